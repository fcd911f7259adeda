//! Checks that span sections: names, directories, listen addresses, batch sizes
//! against the WAL's byte semaphore, sessions on one broker ([`super::clash`]), and
//! sinks' `rename_from`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::Config;
use crate::keys::units::format_bytes;
use crate::keys::{ConfigError, Section, join};

/// Reports a source or sink name that cannot be used in metric labels and file names.
pub(super) fn check_name(section: &Section<'_>, what: &str, name: &str) {
    let bare = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !bare || name.is_empty() {
        section.error_here(format!(
            "a {what} name may contain only letters, digits, '_' and '-' (it names metrics and files)"
        ));
    }
}

/// Checks a parsed configuration as a whole, appending to `errors`. A key that already
/// has an error holds a stand-in default, so checks involving it are skipped rather than
/// reporting a consequence of the first mistake.
pub(super) fn cross_check(config: &Config, errors: &mut Vec<ConfigError>) {
    let failed: Vec<String> = errors
        .iter()
        .filter_map(|e| e.path().map(str::to_owned))
        .collect();
    let failed = |path: &str| failed.iter().any(|p| p == path);
    let mut found = Vec::new();
    check_listen_addresses(config, &failed, &mut found);
    check_batches_fit_the_wal(config, &failed, &mut found);
    check_directories(config, &failed, &mut found);
    check_component_names(config, &mut found);
    super::clash::check_sessions(config, &failed, &mut found);
    check_renames(config, &mut found);
    errors.extend(found);
}

/// The WAL, the quarantine and every file-writing sink need a directory of their own:
/// sharing one, they would delete or overwrite each other's files. None may be inside
/// the WAL's directory, which the WAL's recovery owns.
fn check_directories(
    config: &Config,
    failed: &dyn Fn(&str) -> bool,
    errors: &mut Vec<ConfigError>,
) {
    let mut dirs: Vec<(String, &Path)> = vec![
        ("wal.dir".to_owned(), config.wal.dir.as_path()),
        ("quarantine.dir".to_owned(), config.quarantine.dir.as_path()),
    ];
    for (name, sink) in &config.sinks {
        if let Some(path) = sink.kind.directory() {
            dirs.push((join(&join("sinks", name), "path"), path));
        }
    }
    dirs.retain(|(path, _)| !failed(path));
    let wal = dirs
        .iter()
        .find(|(path, _)| path == "wal.dir")
        .map(|(_, dir)| normalize(dir));
    for (i, (path, dir)) in dirs.iter().enumerate() {
        let normal = normalize(dir);
        if let Some(wal) = &wal
            && i > 0
            && normal != *wal
            && normal.starts_with(wal)
        {
            errors.push(ConfigError::Key {
                path: path.clone(),
                message: format!(
                    "{} is inside wal.dir ({}); the WAL owns that directory (its recovery \
                     lists, quarantines and deletes files there): choose a directory outside it",
                    dir.display(),
                    config.wal.dir.display()
                ),
            });
            continue;
        }
        if let Some((other_path, _)) = dirs[..i]
            .iter()
            .find(|(_, other)| normalize(other) == normal)
        {
            errors.push(ConfigError::Key {
                path: path.clone(),
                message: format!(
                    "{} is also {other_path}; each needs its own directory, or their files would collide",
                    dir.display()
                ),
            });
        }
    }
}

/// The directory a path names, for comparison only: its longest existing ancestor
/// resolved by the file system (symbolic links, `..`), and the rest of it lexically
/// (`.` dropped, `..` taking off the component before it). `data/x/../wal` and a link to
/// `data` followed by `/wal` are both `…/data/wal`.
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_or_else(|_| path.to_path_buf(), |cwd| cwd.join(path))
    };
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    let resolved = loop {
        if let Ok(resolved) = existing.canonicalize() {
            break resolved;
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                existing = parent;
            }
            _ => break PathBuf::new(),
        }
    };
    let mut normal = resolved;
    for component in rest.into_iter().rev() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}

/// A source and a sink may not share a name: the quarantine keeps records under the
/// component's name (`<quarantine dir>/<name>/`), and its counters and log lines are
/// labelled with it.
fn check_component_names(config: &Config, errors: &mut Vec<ConfigError>) {
    for name in config.sources.keys() {
        if config.sinks.contains_key(name) {
            errors.push(ConfigError::Key {
                path: join("sinks", name),
                message: format!(
                    "a source is named {name:?} too; a source and a sink need different names \
                     (the quarantine keeps records, counts and logs under the name): rename one"
                ),
            });
        }
    }
}

/// `rename_from` names the sink's earlier name: not another configured sink (whose
/// cursor and state are in use), nor the same name twice.
fn check_renames(config: &Config, errors: &mut Vec<ConfigError>) {
    let mut taken: Vec<(&str, &str)> = Vec::new();
    for (name, sink) in &config.sinks {
        let Some(old) = sink.rename_from.as_deref() else {
            continue;
        };
        let path = join(&join("sinks", name), "rename_from");
        let message = if old == name {
            Some(format!(
                "{old:?} is this sink's own name; rename_from names the sink's earlier name"
            ))
        } else if config.sinks.contains_key(old) {
            Some(format!(
                "{old:?} is a configured sink, whose cursor and state are its own; rename_from \
                 names a sink that is no longer in the file (remove [sinks.{old}] or rename_from)"
            ))
        } else {
            taken.iter().find(|(o, _)| *o == old).map(|(_, other)| {
                format!(
                    "sinks.{other}.rename_from takes {old:?} over already; one sink takes it over"
                )
            })
        };
        match message {
            Some(message) => errors.push(ConfigError::Key { path, message }),
            None => taken.push((old, name)),
        }
    }
}

/// Two listeners on one port conflict when the addresses are equal or either is the
/// wildcard address. Port 0 (any free port) never conflicts.
fn check_listen_addresses(
    config: &Config,
    failed: &dyn Fn(&str) -> bool,
    errors: &mut Vec<ConfigError>,
) {
    let mut listeners: Vec<(String, SocketAddr)> =
        vec![("runtime.status_addr".to_owned(), config.runtime.status_addr)];
    for (name, source) in &config.sources {
        if let Some((key, addr)) = source.kind.listen() {
            listeners.push((join(&join("sources", name), key), addr));
        }
    }
    listeners.retain(|(path, _)| !failed(path));
    for (i, (path, addr)) in listeners.iter().enumerate() {
        if addr.port() == 0 {
            continue;
        }
        let clash = listeners[..i].iter().find(|(_, other)| {
            other.port() == addr.port()
                && (other.ip() == addr.ip()
                    || other.ip().is_unspecified()
                    || addr.ip().is_unspecified())
        });
        if let Some((other_path, other)) = clash {
            errors.push(ConfigError::Key {
                path: path.clone(),
                message: format!(
                    "{addr} conflicts with {other_path} = {other}; give each listener its own port"
                ),
            });
        }
    }
}

/// Every batch a source can hand the WAL must fit in `wal.max_pending_bytes`, or it
/// could never be admitted.
fn check_batches_fit_the_wal(
    config: &Config,
    failed: &dyn Fn(&str) -> bool,
    errors: &mut Vec<ConfigError>,
) {
    if failed("wal.max_pending_bytes") {
        return;
    }
    let pending = config.wal.max_pending_bytes;
    for (name, source) in &config.sources {
        let (bytes, formula) = source.kind.max_batch_bytes();
        let source_path = join("sources", name);
        let keys_failed = formula
            .split(" × ")
            .any(|key| failed(&join(&source_path, key)));
        if bytes > pending.bytes() && !keys_failed {
            errors.push(ConfigError::Key {
                path: source_path,
                message: format!(
                    "a batch of {formula} = {} is larger than wal.max_pending_bytes = {pending} and could never \
                     be admitted to the WAL; lower it or raise wal.max_pending_bytes",
                    crate::keys::format_bytes(bytes)
                ),
            });
        }
    }
}

impl Config {
    /// Things that are allowed but probably not meant, one sentence each with its key
    /// path: a source no sink reads, QoS 1/2 on a clean MQTT session, interval syncing.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        for name in self.sources.keys() {
            if !self.sinks.values().any(|sink| sink.inputs.contains(name)) {
                warnings.push(format!(
                    "{}: no sink reads this source; its records fill the WAL and are only deleted by retention",
                    join("sources", name)
                ));
            }
        }
        for (name, source) in &self.sources {
            source.kind.warnings(&join("sources", name), &mut warnings);
        }
        if let Some((max, can_hold, free)) =
            disk_smaller_than_budget(&self.wal.dir, self.wal.max_disk.bytes())
        {
            warnings.push(format!(
                "wal.max_disk: {} but its filesystem can hold only about {} ({} free, {} kept in reserve, \
                 plus what the WAL holds now): on_full will apply when the disk is full, before the budget is; \
                 lower max_disk or free space",
                format_bytes(max),
                format_bytes(can_hold),
                format_bytes(free),
                format_bytes(weir_wal::FS_RESERVE),
            ));
        }
        if let weir_wal::SyncMode::Interval(every) = self.wal.sync {
            warnings.push(format!(
                "wal.sync: \"interval\" acknowledges before fsync; a crash can lose up to {} of acknowledged records",
                humantime::format_duration(every)
            ));
        }
        warnings
    }
}

/// `(max_disk, what the filesystem can hold, its free bytes)` when `max_disk` is more
/// than the WAL directory's filesystem can hold: the segment bytes already in `dir` plus
/// the free space above the WAL's reserve. The directory (or, before the first run, its
/// nearest existing parent) is asked with statvfs; `None` when it cannot be.
fn disk_smaller_than_budget(dir: &Path, max_disk: u64) -> Option<(u64, u64, u64)> {
    let existing = dir.ancestors().find(|d| d.exists())?;
    let st = rustix::fs::statvfs(existing).ok()?;
    let free = st.f_bavail.saturating_mul(st.f_frsize);
    let held: u64 = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "seg"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    let can_hold = held.saturating_add(free.saturating_sub(weir_wal::FS_RESERVE));
    (max_disk > can_hold).then_some((max_disk, can_hold, free))
}
