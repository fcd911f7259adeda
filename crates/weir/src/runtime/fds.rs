//! The open-file limit: raised at startup from the soft to the hard limit, and a
//! warning when even that leaves too little room for the HTTP sources' connections.
//!
//! Running out of descriptors fails whatever opens the next file, a WAL segment as
//! readily as a socket, so the connection caps must fit well inside the limit.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

use crate::config::Config;
use crate::sources::SourceKind;

/// Descriptors weir needs besides the HTTP sources' and the status server's
/// connections: WAL segments (the writer's and each sink's reader), cursor and sink
/// files, the listeners, stdio.
pub const RESERVED_FDS: u64 = 256;

/// The open-file limit after [`raise_fd_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    /// The soft limit now in force (`None`: unlimited).
    pub soft: Option<u64>,
    /// The hard limit (`None`: unlimited).
    pub hard: Option<u64>,
    /// The soft limit before, when it was raised.
    pub raised_from: Option<u64>,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit.
///
/// # Errors
///
/// The OS error of `setrlimit`, with the limit left as it was.
pub fn raise_fd_limit() -> std::io::Result<FdLimit> {
    let before = getrlimit(Resource::Nofile);
    if before.current == before.maximum {
        return Ok(FdLimit {
            soft: before.current,
            hard: before.maximum,
            raised_from: None,
        });
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: before.maximum,
            maximum: before.maximum,
        },
    )?;
    let after = getrlimit(Resource::Nofile);
    Ok(FdLimit {
        soft: after.current,
        hard: after.maximum,
        raised_from: before.current,
    })
}

/// The descriptors `config` may hold at once: every HTTP source's `max_connections`,
/// `runtime.status_max_connections` and [`RESERVED_FDS`].
pub fn fds_needed(config: &Config) -> u64 {
    let connections: u64 = config
        .sources
        .values()
        .map(|source| match &source.kind {
            SourceKind::Http(http) => u64::from(http.max_connections.get()),
            _ => 0,
        })
        .sum();
    connections + u64::from(config.runtime.status_max_connections.get()) + RESERVED_FDS
}

/// The warning for a limit below `needed`, if it is.
pub fn low_limit_warning(limit: &FdLimit, needed: u64) -> Option<String> {
    let soft = limit.soft?;
    if soft >= needed {
        return None;
    }
    let hard = limit
        .hard
        .map_or_else(|| "unlimited".to_owned(), |h| h.to_string());
    Some(format!(
        "the open-file limit is {soft} (hard limit {hard}), below the {needed} this \
         configuration may need (the HTTP sources' max_connections + \
         runtime.status_max_connections + {RESERVED_FDS}); raise it (ulimit -n, or \
         LimitNOFILE= under systemd) or lower those caps, \
         or a burst of connections can make opening a WAL segment fail"
    ))
}

/// Raises the limit and logs what it found: a warning when it is low for `config`.
pub fn check_fd_limit(config: &Config) {
    match raise_fd_limit() {
        Ok(limit) => {
            if let (Some(from), Some(to)) = (limit.raised_from, limit.soft) {
                tracing::debug!("raised the open-file limit from {from} to {to}");
            }
            if let Some(warning) = low_limit_warning(&limit, fds_needed(config)) {
                tracing::warn!("{warning}");
            }
        }
        Err(e) => tracing::warn!("raising the open-file limit to its hard limit failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_low_limit_is_named_with_what_is_needed() {
        let limit = FdLimit {
            soft: Some(200),
            hard: Some(200),
            raised_from: None,
        };
        let warning = low_limit_warning(&limit, 512).expect("200 < 512");
        assert!(
            warning.contains("open-file limit is 200 (hard limit 200)"),
            "{warning}"
        );
        assert!(warning.contains("512"), "{warning}");
        let enough = FdLimit {
            soft: Some(1024),
            ..limit
        };
        assert_eq!(low_limit_warning(&enough, 512), None);
        let unlimited = FdLimit {
            soft: None,
            hard: None,
            raised_from: None,
        };
        assert_eq!(low_limit_warning(&unlimited, 512), None);
    }

    #[test]
    fn raising_leaves_the_soft_limit_at_the_hard_one() {
        let limit = raise_fd_limit().expect("setrlimit to the hard limit is allowed");
        assert_eq!(limit.soft, limit.hard);
    }
}
