//! What the file source shows: `/status` → `sources.NAME.files` (one entry per file)
//! and its counters, and the `weir_file_*` metrics.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::Serialize;

use crate::telemetry::Telemetry;

/// Where a file stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileState {
    /// Open and followed at its path.
    Reading,
    /// Closed: waiting for a free slot (`max_open_files`), or for growth.
    Waiting,
    /// Open, no longer at its path (renamed, replaced or deleted): read to its end,
    /// then released after `rotate_wait` without growth.
    Rotated,
    /// Read to its end and closed after a rotation.
    Released,
    /// Cannot be opened or read: retried with backoff.
    Error,
    /// Not read: a NUL byte in its first KiB (`allow_binary = false`).
    Binary,
}

/// One file in `/status`.
#[derive(Debug, Clone, Serialize)]
pub struct FileStatus {
    /// Its path (its last one, once rotated).
    pub path: String,
    /// 16 hex digits of its first bytes' hash.
    pub fingerprint: String,
    /// Its inode.
    pub inode: u64,
    /// Every byte before it is durable (in the WAL or the quarantine).
    pub position: u64,
    /// Read up to here (lines past `position` are on their way to the WAL).
    pub read: u64,
    /// Its size when last looked at.
    pub size: u64,
    /// `size - position`.
    pub lag_bytes: u64,
    /// Where it stands.
    pub state: FileState,
    /// The last error, while `state` is `error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),+ $(,)?) => {
        /// The file source's counters.
        #[derive(Debug, Default)]
        pub struct Counters {
            $($(#[$doc])* pub $name: AtomicU64,)+
        }

        /// A snapshot of [`Counters`].
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
        pub struct CounterValues {
            $($(#[$doc])* pub $name: u64,)+
        }

        impl Counters {
            /// Their values now.
            pub fn values(&self) -> CounterValues {
                CounterValues { $($name: self.$name.load(Ordering::Relaxed),)+ }
            }
        }
    };
}

counters! {
    /// Files found to be renamed, replaced or deleted while open.
    rotations,
    /// Files found shorter than their position, or with other first bytes (copytruncate).
    truncations,
    /// Bytes of truncated files that were known and not read.
    truncated_unread_bytes,
    /// Lines longer than `max_line_bytes`, their heads sent to the quarantine.
    long_lines,
    /// Lines that were not JSON under `format = "ndjson"`.
    not_json,
    /// Lines `regex` or `logfmt` could not read.
    mismatches,
    /// Lines and records sent to the quarantine (all reasons).
    quarantined,
    /// Last lines without a newline emitted (partial_flush, or a rotated file released).
    partial_lines,
    /// Multi-line records cut at `max_lines` or `max_bytes`.
    multiline_bounded,
    /// Files skipped as binary.
    binary_files,
    /// Failed opens and reads (each retried with backoff).
    read_errors,
    /// Files that vanished with bytes known and not read, and those bytes.
    lost_bytes,
    /// Rotated files read to their end and released.
    released,
}

/// What the tailer, the task and `/status` share.
#[derive(Debug, Default)]
pub struct Shared {
    /// The counters.
    pub counters: Counters,
    files: Mutex<BTreeMap<u64, FileStatus>>,
    /// `max_open_files`.
    pub max_open_files: u64,
    /// Files open now.
    pub open_files: AtomicU64,
    /// Files waiting for a slot.
    pub waiting_files: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The `files` section and the counters, as `/status` shows them.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Every file followed (and released ones, until forgotten), by path.
    pub files: Vec<FileStatus>,
    /// Files open now.
    pub open_files: u64,
    /// `max_open_files`.
    pub max_open_files: u64,
    /// Files waiting for a slot.
    pub waiting_files: u64,
    /// Bytes not yet durable, over every file.
    pub lag_bytes: u64,
    /// The counters.
    #[serde(flatten)]
    pub counters: CounterValues,
}

impl Shared {
    /// For `max_open_files`.
    pub fn new(max_open_files: u64) -> Self {
        Shared {
            max_open_files,
            ..Shared::default()
        }
    }

    /// Adds one to a counter.
    pub fn count(&self, counter: fn(&Counters) -> &AtomicU64, n: u64) {
        counter(&self.counters).fetch_add(n, Ordering::Relaxed);
    }

    /// Changes file `id`'s entry (creating it with `new` first).
    pub fn update(
        &self,
        id: u64,
        new: impl FnOnce() -> FileStatus,
        change: impl FnOnce(&mut FileStatus),
    ) {
        let mut files = lock(&self.files);
        change(files.entry(id).or_insert_with(new));
    }

    /// Sets file `id`'s durable position, if it is shown.
    pub fn set_position(&self, id: u64, position: u64) {
        if let Some(f) = lock(&self.files).get_mut(&id) {
            f.position = position;
        }
    }

    /// File `id`'s size when last looked at.
    pub fn size(&self, id: u64) -> Option<u64> {
        lock(&self.files).get(&id).map(|f| f.size)
    }

    /// Stops showing file `id`.
    pub fn remove(&self, id: u64) {
        lock(&self.files).remove(&id);
    }

    /// The report.
    pub fn report(&self) -> Report {
        let mut files: Vec<FileStatus> = lock(&self.files)
            .values()
            .cloned()
            .map(|mut f| {
                f.lag_bytes = f.size.saturating_sub(f.position);
                f
            })
            .collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let lag_bytes = files
            .iter()
            .filter(|f| {
                matches!(
                    f.state,
                    FileState::Reading | FileState::Rotated | FileState::Waiting
                )
            })
            .map(|f| f.lag_bytes)
            .sum();
        Report {
            files,
            open_files: self.open_files.load(Ordering::Relaxed),
            max_open_files: self.max_open_files,
            waiting_files: self.waiting_files.load(Ordering::Relaxed),
            lag_bytes,
            counters: self.counters.values(),
        }
    }
}

/// Registers the source's queue of files and its metrics.
pub fn register(name: &str, shared: &Arc<Shared>, telemetry: &Telemetry) {
    type Field = fn(&CounterValues) -> u64;
    type Label<'a> = Option<(&'a str, &'a str)>;
    type Gauge = fn(&Shared) -> u64;
    let counters: [(&str, &str, Label<'_>, Field); 8] = [
        (
            "weir_file_rotations_total",
            "Files a file source found renamed, replaced or deleted while open.",
            None,
            |c| c.rotations,
        ),
        (
            "weir_file_truncations_total",
            "Files a file source found truncated (copytruncate) or rewritten.",
            None,
            |c| c.truncations,
        ),
        (
            "weir_file_released_total",
            "Rotated files read to their end and closed.",
            None,
            |c| c.released,
        ),
        (
            "weir_file_partial_lines_total",
            "Last lines without a newline emitted (partial_flush, or a rotated file released).",
            None,
            |c| c.partial_lines,
        ),
        (
            "weir_file_multiline_bounded_total",
            "Multi-line records cut at max_lines or max_bytes.",
            None,
            |c| c.multiline_bounded,
        ),
        (
            "weir_file_lost_bytes_total",
            "Bytes of files that vanished before they were read (rotated away and deleted while waiting), or were truncated unread.",
            None,
            |c| c.lost_bytes + c.truncated_unread_bytes,
        ),
        (
            "weir_source_quarantined_total",
            "Records a source sent to the quarantine, by reason.",
            Some(("reason", "line_too_long")),
            |c| c.long_lines,
        ),
        (
            "weir_source_quarantined_total",
            "Records a source sent to the quarantine, by reason.",
            Some(("reason", "unparsed")),
            |c| c.quarantined.saturating_sub(c.long_lines),
        ),
    ];
    for (metric, help, label, field) in counters {
        let mut labels = vec![("source", name)];
        labels.extend(label);
        let s = Arc::clone(shared);
        telemetry.register_counter_fn(metric, help, &labels, move || field(&s.counters.values()));
    }
    let gauges: [(&str, &str, Gauge); 3] = [
        (
            "weir_file_open_files",
            "Files a file source holds open.",
            |s| s.open_files.load(Ordering::Relaxed),
        ),
        (
            "weir_file_waiting_files",
            "Files waiting for a slot under max_open_files.",
            |s| s.waiting_files.load(Ordering::Relaxed),
        ),
        (
            "weir_file_lag_bytes",
            "Bytes of followed files not yet durable in the WAL.",
            |s| s.report().lag_bytes,
        ),
    ];
    for (metric, help, field) in gauges {
        let s = Arc::clone(shared);
        #[allow(clippy::cast_precision_loss, reason = "gauges are f64")]
        telemetry.register_gauge_fn(metric, help, &[("source", name)], move || field(&s) as f64);
    }
}
