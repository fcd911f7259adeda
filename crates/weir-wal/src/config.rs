//! Configuration: the disk budget and its `on_full` policy, sync mode, cursors.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::faults::IoFaults;
use crate::format::{FRAME_HEADER_LEN, MARK_LEN, SEGMENT_HEADER_LEN};

/// What an append does when the disk budget `max_disk` is reached. There is no default:
/// it is the one place where acknowledged data may be lost, so it must be chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFull {
    /// Appends wait (FIFO) until retention frees room: backpressure to the sources.
    Block,
    /// Appends fail at once with [`AppendError::Full`](crate::AppendError::Full), which
    /// hands the batch back.
    Reject,
    /// The oldest whole segments are deleted even if cursors have not passed them; every
    /// cursor behind the cut sees a [`Gap::Evicted`](crate::Gap::Evicted).
    DropOldest,
}

impl OnFull {
    /// The name as written in a configuration (`block`, `reject`, `drop_oldest`), the
    /// same as its serde name.
    pub fn as_str(self) -> &'static str {
        match self {
            OnFull::Block => "block",
            OnFull::Reject => "reject",
            OnFull::DropOldest => "drop_oldest",
        }
    }
}

impl std::fmt::Display for OnFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When appended data is fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncMode {
    /// One `fsync` (`sync_data`) per group of batches; an append completes only after the
    /// fsync that covers it. The default.
    Always,
    /// Weaker: an append completes once written to the OS; an fsync follows within the
    /// interval. A power loss may lose acknowledged appends of the last interval (a
    /// process crash does not). Readers still never see data that is not fsynced.
    Interval(Duration),
}

/// Where a cursor without a saved position starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartFrom {
    /// The oldest retained record.
    #[default]
    Earliest,
    /// The durable end at open: only records appended from now on.
    Latest,
}

/// How far a cursor may fall behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MaxLag {
    /// Bytes of segment data (frames) past the cursor.
    pub bytes: Option<u64>,
    /// Age of the oldest record the cursor has not committed.
    pub age: Option<Duration>,
}

/// One named cursor (one per sink).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CursorConfig {
    /// Whether the cursor holds retention. `false`: segments are deleted whether it read
    /// them or not, and it sees a [`Gap::Evicted`](crate::Gap::Evicted) if it falls behind.
    pub required: bool,
    /// A required cursor further behind than this is released from retention (counted);
    /// it rejoins once it has caught up: committed a position that is still retained and
    /// within the limit.
    pub max_lag: MaxLag,
    /// Where it starts when it has no saved position.
    pub start_from: StartFrom,
}

impl Default for CursorConfig {
    fn default() -> Self {
        CursorConfig {
            required: true,
            max_lag: MaxLag::default(),
            start_from: StartFrom::Earliest,
        }
    }
}

/// How much of the log is checked at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryScan {
    /// CRC-check every record of the last segment; check only the headers of the others
    /// (damage inside them is reported to readers as a gap when read). The default.
    #[default]
    Tail,
    /// CRC-check every record of every segment; a damaged segment that is not the last
    /// is quarantined.
    Full,
}

/// A validated WAL configuration. Build it with [`WalConfig::builder`].
#[derive(Debug, Clone)]
pub struct WalConfig {
    pub(crate) dir: PathBuf,
    pub(crate) max_disk: u64,
    pub(crate) on_full: OnFull,
    pub(crate) segment_bytes: u64,
    pub(crate) max_pending_bytes: u64,
    pub(crate) max_pending_waiters: usize,
    pub(crate) sync: SyncMode,
    pub(crate) recovery: RecoveryScan,
    pub(crate) cursors: Vec<(String, CursorConfig)>,
    pub(crate) faults: Option<Arc<dyn IoFaults>>,
}

impl WalConfig {
    /// A builder for a WAL in `dir`. `max_disk` and `on_full` must be set.
    ///
    /// # Examples
    ///
    /// ```
    /// use weir_wal::{CursorConfig, OnFull, WalConfig};
    ///
    /// let config = WalConfig::builder("/tmp/never-created")
    ///     .max_disk(1 << 30)
    ///     .on_full(OnFull::Block)
    ///     .cursor("lake", CursorConfig::default())
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.on_full(), OnFull::Block);
    ///
    /// // Without `on_full` there is no WAL.
    /// let err = WalConfig::builder("/tmp/x").max_disk(1 << 30).build().unwrap_err();
    /// assert!(err.to_string().contains("on_full"));
    /// ```
    pub fn builder(dir: impl Into<PathBuf>) -> WalConfigBuilder {
        WalConfigBuilder {
            dir: dir.into(),
            max_disk: None,
            on_full: None,
            segment_bytes: 64 * 1024 * 1024,
            max_pending_bytes: 8 * 1024 * 1024,
            max_pending_waiters: 4096,
            sync: SyncMode::Always,
            recovery: RecoveryScan::Tail,
            cursors: Vec::new(),
            faults: None,
        }
    }

    /// The WAL directory.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The disk budget in bytes.
    pub fn max_disk(&self) -> u64 {
        self.max_disk
    }

    /// The `on_full` policy.
    pub fn on_full(&self) -> OnFull {
        self.on_full
    }

    /// The size at which a segment is rotated.
    pub fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    /// The largest batch an append accepts: it must fit both `max_pending_bytes` and half
    /// the disk budget.
    pub fn max_batch_bytes(&self) -> u64 {
        self.max_pending_bytes.min(self.max_disk / 2)
    }
}

/// Builds a [`WalConfig`]; see [`WalConfig::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct WalConfigBuilder {
    dir: PathBuf,
    max_disk: Option<u64>,
    on_full: Option<OnFull>,
    segment_bytes: u64,
    max_pending_bytes: u64,
    max_pending_waiters: usize,
    sync: SyncMode,
    recovery: RecoveryScan,
    cursors: Vec<(String, CursorConfig)>,
    faults: Option<Arc<dyn IoFaults>>,
}

impl WalConfigBuilder {
    /// The disk budget: segment files (headers included) never exceed it. Required.
    pub fn max_disk(mut self, bytes: u64) -> Self {
        self.max_disk = Some(bytes);
        self
    }

    /// What happens at the disk budget. Required: there is no default.
    pub fn on_full(mut self, on_full: OnFull) -> Self {
        self.on_full = Some(on_full);
        self
    }

    /// Segment size at which the log rotates (default 64 MiB).
    pub fn segment_bytes(mut self, bytes: u64) -> Self {
        self.segment_bytes = bytes;
        self
    }

    /// Bound on bytes handed to the writer and not yet durable (default 8 MiB).
    pub fn max_pending_bytes(mut self, bytes: u64) -> Self {
        self.max_pending_bytes = bytes;
        self
    }

    /// Bound on appenders waiting for pending room (default 4096).
    pub fn max_pending_waiters(mut self, waiters: usize) -> Self {
        self.max_pending_waiters = waiters;
        self
    }

    /// The sync mode (default [`SyncMode::Always`]).
    pub fn sync(mut self, sync: SyncMode) -> Self {
        self.sync = sync;
        self
    }

    /// How much is checked at open (default [`RecoveryScan::Tail`]).
    pub fn recovery(mut self, recovery: RecoveryScan) -> Self {
        self.recovery = recovery;
        self
    }

    /// Declares a named cursor. Names are 1 to 64 of `[A-Za-z0-9_.-]`, unique.
    pub fn cursor(mut self, name: impl Into<String>, config: CursorConfig) -> Self {
        self.cursors.push((name.into(), config));
        self
    }

    /// Injects I/O failures into the writer (tests; see [`crate::faults`]).
    pub fn io_faults(mut self, faults: Arc<dyn IoFaults>) -> Self {
        self.faults = Some(faults);
        self
    }

    /// Checks everything and reports every problem at once.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] listing each problem with the key it concerns.
    pub fn build(self) -> Result<WalConfig, ConfigError> {
        let mut problems = Vec::new();
        if self.on_full.is_none() {
            problems.push(
                "on_full: required, no default; choose block, reject or drop_oldest".to_owned(),
            );
        }
        let min_segment = SEGMENT_HEADER_LEN + MARK_LEN + FRAME_HEADER_LEN + 1;
        if self.segment_bytes < min_segment {
            problems.push(format!(
                "segment_bytes: expected at least {min_segment}, found {}",
                self.segment_bytes
            ));
        }
        let min_disk = 2 * (self.segment_bytes.saturating_add(SEGMENT_HEADER_LEN));
        match self.max_disk {
            None => problems.push("max_disk: required; set the WAL's disk budget".to_owned()),
            Some(d) if d < min_disk => problems.push(format!(
                "max_disk: expected at least twice segment_bytes plus headers ({min_disk}), found {d}; \
                 raise max_disk or lower segment_bytes"
            )),
            Some(_) => {}
        }
        let min_pending = MARK_LEN + FRAME_HEADER_LEN;
        if self.max_pending_bytes < min_pending {
            problems.push(format!(
                "max_pending_bytes: expected at least {min_pending}, found {}",
                self.max_pending_bytes
            ));
        }
        // A batch mark records a batch's bytes in 32 bits.
        if self.max_pending_bytes > u64::from(u32::MAX) {
            problems.push(format!(
                "max_pending_bytes: expected at most {} (4 GiB), found {}",
                u32::MAX,
                self.max_pending_bytes
            ));
        }
        if let SyncMode::Interval(d) = self.sync
            && (d.is_zero() || d > Duration::from_secs(60))
        {
            problems.push(format!(
                "sync: interval must be between 1 ms and 60 s, found {d:?}"
            ));
        }
        for (i, (name, _)) in self.cursors.iter().enumerate() {
            if !valid_cursor_name(name) {
                problems.push(format!(
                    "cursors.{name:?}: names are 1 to 64 characters of [A-Za-z0-9_.-]"
                ));
            }
            if self.cursors[..i].iter().any(|(n, _)| n == name) {
                problems.push(format!("cursors.{name}: declared twice"));
            }
        }
        if !problems.is_empty() {
            return Err(ConfigError { problems });
        }
        Ok(WalConfig {
            dir: self.dir,
            max_disk: self.max_disk.unwrap_or_default(),
            on_full: self.on_full.unwrap_or(OnFull::Reject),
            segment_bytes: self.segment_bytes,
            max_pending_bytes: self.max_pending_bytes,
            max_pending_waiters: self.max_pending_waiters,
            sync: self.sync,
            recovery: self.recovery,
            cursors: self.cursors,
            faults: self.faults,
        })
    }
}

pub(crate) fn valid_cursor_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
}

/// Every problem found in a WAL configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid WAL configuration: {}", .problems.join("; "))]
pub struct ConfigError {
    /// One line per problem, each starting with the key's name.
    pub problems: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_reported() {
        let err = WalConfig::builder("d")
            .segment_bytes(10)
            .cursor("a/b", CursorConfig::default())
            .cursor("x", CursorConfig::default())
            .cursor("x", CursorConfig::default())
            .build()
            .unwrap_err();
        let text = err.to_string();
        for key in [
            "on_full",
            "max_disk",
            "segment_bytes",
            "a/b",
            "declared twice",
        ] {
            assert!(text.contains(key), "{key} missing from {text}");
        }
    }

    #[test]
    fn budget_must_hold_two_segments() {
        let err = WalConfig::builder("d")
            .segment_bytes(1000)
            .max_disk(1500)
            .on_full(OnFull::Reject)
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("max_disk"));
    }
}
