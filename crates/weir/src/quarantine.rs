//! The quarantine: records a sink cannot encode, kept with the reason under their own
//! disk budget (`[quarantine] max_disk`).
//!
//! Each sink gets `<dir>/<sink>/quarantine.ndjson`, one JSON object per line:
//!
//! ```text
//! {"ts_ms":1764400000000,"sink":"lake","reason":"payload is not valid UTF-8","payload_base64":"/w=="}
//! ```
//!
//! `payload_base64` is the record's bytes as given, in standard base64 with padding.
//! Lines are appended and fsynced in batches: every [`SYNC_EVERY_RECORDS`] records or
//! [`SYNC_EVERY_BYTES`] bytes per sink, and on [`Quarantine::sync`]; a crash can lose
//! the lines written since the last fsync.
//!
//! The budget counts every byte under `dir` that the quarantine wrote, including files
//! of earlier runs (measured by [`Quarantine::new`]). Over budget, a record is refused
//! ([`QuarantineError::Full`]) and counted as
//! `weir_quarantine_dropped_total{sink,reason="quarantine_full"}`: the quarantine never
//! grows past its budget, and never blocks the sink waiting for room.
//!
//! Nothing it takes or refuses is silent. Each component's quarantined records are
//! logged at WARN and the ones it drops (over budget, or a write that failed) at
//! ERROR, each rate-limited by a [`LossLog`]: the first at once with its reason, then a
//! summary with counts at most every 10 s. A component registered with
//! [`Quarantine::attach`] is [degraded](Component::set_degraded) while its records are
//! dropped, with the reason and the fix, until the quarantine takes one again.
//!
//! The file I/O is blocking. Async callers use [`Quarantine::put_durable`], which runs
//! the writes and the fsync on tokio's blocking pool and resolves when they are on
//! disk; [`Quarantine::put`] and [`Quarantine::sync`] are for blocking threads. Each
//! sink's file has its own lock, held across its writes and fsync only: one sink's
//! fsync never holds up another sink's quarantine, nor [`Quarantine::stats`] (read by
//! `/status` on an async worker).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use serde::Serialize;

use crate::telemetry::{Component, Counter, LossLog, Severity, Telemetry};

/// Records written to a sink's file between two fsyncs.
pub const SYNC_EVERY_RECORDS: u32 = 64;
/// Bytes written to a sink's file between two fsyncs.
pub const SYNC_EVERY_BYTES: u64 = 1024 * 1024;
/// The name of each sink's file.
pub const FILE_NAME: &str = "quarantine.ndjson";

/// Why a record was not quarantined.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QuarantineError {
    /// The budget is spent: the record was dropped and counted.
    #[error(
        "quarantine full: a {needed}-byte entry for sink {sink:?} does not fit, {used} of {max_disk} bytes used; raise [quarantine] max_disk or clear {dir}"
    )]
    Full {
        /// The sink whose record was refused.
        sink: String,
        /// Bytes the entry needed.
        needed: u64,
        /// Bytes used when it was refused.
        used: u64,
        /// The budget.
        max_disk: u64,
        /// The quarantine directory.
        dir: PathBuf,
    },
    /// The sink name cannot be a directory name.
    #[error(
        "quarantine: expected a sink name usable as a directory name (not empty, no '/', '\\', not '.' or '..'), found {0:?}"
    )]
    SinkName(String),
    /// The blocking task of [`Quarantine::put_durable`] did not run to its end (it
    /// panicked, or the runtime is shutting down): what it wrote is unknown.
    #[error("quarantine: the blocking write did not complete: {0}")]
    Blocking(#[source] tokio::task::JoinError),
    /// A file-system operation failed; the entry's budget was released.
    #[error("quarantine: cannot {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// What the quarantine holds and refused so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QuarantineStats {
    /// Bytes on disk under the quarantine directory (this run's and earlier runs').
    pub used_bytes: u64,
    /// The budget.
    pub max_disk_bytes: u64,
    /// Per sink: records quarantined and refused in this run.
    pub sinks: BTreeMap<String, SinkQuarantineStats>,
}

/// One sink's quarantine counts in this run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SinkQuarantineStats {
    /// Records written.
    pub records: u64,
    /// Records dropped: refused because the budget was spent, or not written because
    /// the file could not be.
    pub dropped: u64,
}

#[derive(Serialize)]
struct Entry<'a> {
    ts_ms: u64,
    sink: &'a str,
    reason: &'a str,
    payload_base64: String,
}

/// A record on its way to the quarantine, owned so that it can cross to a blocking
/// thread ([`Quarantine::put_durable`]).
#[derive(Debug, Clone)]
pub struct Rejected {
    /// Why it was refused.
    pub reason: String,
    /// Its bytes, as given.
    pub payload: Bytes,
}

struct SinkFile {
    file: BufWriter<File>,
    path: PathBuf,
    unsynced_records: u32,
    unsynced_bytes: u64,
}

/// One sink's counts, logs and file. The counts are read without the file's lock.
struct SinkSlot {
    records: Counter,
    /// Refused for the budget.
    dropped: Counter,
    /// Not written: the file system failed.
    failed: Counter,
    /// Marked degraded while its records are dropped, when one was attached.
    component: Option<Component>,
    quarantined_log: LossLog,
    dropped_log: LossLog,
    /// Opened on the first entry; locked across a write and its fsync.
    file: Mutex<Option<SinkFile>>,
}

impl SinkSlot {
    /// A record was written.
    fn kept(&self, reason: &str) {
        self.records.inc();
        self.quarantined_log.note(1, &reason);
        if let Some(component) = &self.component {
            component.clear_degraded();
        }
    }

    /// A record was dropped: `error` says why, `degraded` what to do.
    fn lost(&self, error: &QuarantineError, degraded: &str) {
        self.lost_many(1, error, degraded);
    }

    /// The fsync of `records` written records failed: they may not be on disk.
    fn lost_unsynced(&self, records: u64, error: &QuarantineError) {
        self.failed.inc_by(records);
        self.lost_many(records, error, &cannot_keep(error));
    }

    /// Flushes and fsyncs the file, when it has one; records that may not be on disk
    /// after a failure are counted and logged as dropped.
    fn sync(&self) -> Result<(), QuarantineError> {
        let mut file = lock(&self.file);
        let Some(file) = &mut *file else {
            return Ok(());
        };
        let unsynced = u64::from(file.unsynced_records);
        sync_file(file).inspect_err(|error| self.lost_unsynced(unsynced, error))
    }

    fn lost_many(&self, records: u64, error: &QuarantineError, degraded: &str) {
        self.dropped_log.note(records, error);
        if let Some(component) = &self.component {
            component.set_degraded(degraded);
        }
    }
}

struct Shared {
    dir: PathBuf,
    max_disk: u64,
    /// Why a component whose records the budget refuses is degraded, and the fix: made
    /// once, not for each record dropped.
    full_reason: String,
    /// Shared with the telemetry gauge, which holds nothing else of the quarantine.
    used: Arc<AtomicU64>,
    telemetry: OnceLock<Telemetry>,
    /// One entry per sink that quarantined something or was attached: bounded by the
    /// configured sources and sinks. Locked only to find or add a slot, never across
    /// I/O.
    sinks: Mutex<BTreeMap<String, Arc<SinkSlot>>>,
}

/// The quarantine directory and its budget. Cheap to clone (an `Arc` inside); every
/// clone shares the budget.
///
/// [`put`](Self::put) and [`sync`](Self::sync) do blocking file I/O: call them on a
/// blocking thread. From async code, use [`put_durable`](Self::put_durable).
#[derive(Clone)]
pub struct Quarantine {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Quarantine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quarantine")
            .field("dir", &self.shared.dir)
            .field("max_disk", &self.shared.max_disk)
            .field("used", &self.shared.used.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

fn io(op: &'static str, path: &Path, source: std::io::Error) -> QuarantineError {
    QuarantineError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Bytes of the quarantine files under `dir` (`<dir>/<sink>/quarantine.ndjson`).
fn measure(dir: &Path) -> Result<u64, QuarantineError> {
    let mut used = 0;
    for entry in fs::read_dir(dir).map_err(|e| io("list", dir, e))? {
        let sink_dir = entry.map_err(|e| io("list", dir, e))?.path();
        let file = sink_dir.join(FILE_NAME);
        match fs::metadata(&file) {
            Ok(meta) if meta.is_file() => used += meta.len(),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("stat", &file, e)),
        }
    }
    Ok(used)
}

impl Quarantine {
    /// A quarantine under `dir` (created when missing) with a budget of `max_disk`
    /// bytes, of which files left by earlier runs already count.
    ///
    /// # Errors
    ///
    /// [`QuarantineError::Io`] when the directory cannot be created or measured.
    pub fn new(dir: &Path, max_disk: u64) -> Result<Self, QuarantineError> {
        fs::create_dir_all(dir).map_err(|e| io("create directory", dir, e))?;
        let used = measure(dir)?;
        Ok(Self {
            shared: Arc::new(Shared {
                dir: dir.to_owned(),
                max_disk,
                full_reason: format!(
                    "the quarantine is full ([quarantine] max_disk = {max_disk} bytes): records \
                     it cannot keep are dropped; raise max_disk, or move the files out of {} \
                     and restart",
                    dir.display()
                ),
                used: Arc::new(AtomicU64::new(used)),
                telemetry: OnceLock::new(),
                sinks: Mutex::new(BTreeMap::new()),
            }),
        })
    }

    /// Reports to `telemetry`: `weir_quarantine_disk_used_bytes`,
    /// `weir_quarantine_disk_max_bytes`, and per sink `weir_quarantine_records_total`
    /// and `weir_quarantine_dropped_total{reason="quarantine_full"}`. Call it before the
    /// first [`put`](Self::put).
    pub fn with_telemetry(self, telemetry: &Telemetry) -> Self {
        let used = Arc::clone(&self.shared.used);
        telemetry.register_gauge_fn(
            "weir_quarantine_disk_used_bytes",
            "Bytes the quarantine holds on disk.",
            &[],
            move || used.load(Ordering::Relaxed) as f64,
        );
        let max = self.shared.max_disk as f64;
        telemetry.register_gauge_fn(
            "weir_quarantine_disk_max_bytes",
            "The quarantine's disk budget ([quarantine] max_disk).",
            &[],
            move || max,
        );
        // Set once: a second call keeps the first registry for the counters.
        let _ = self.shared.telemetry.set(telemetry.clone());
        self
    }

    /// Appends `record_bytes` with `reason` to the sink's quarantine file.
    ///
    /// # Errors
    ///
    /// [`QuarantineError::Full`] when the entry does not fit the budget (counted as
    /// dropped); [`QuarantineError::SinkName`] for a name that cannot be a directory;
    /// [`QuarantineError::Io`] when writing fails (the entry's bytes are released).
    pub fn put(
        &self,
        sink: &str,
        reason: &str,
        record_bytes: &[u8],
    ) -> Result<(), QuarantineError> {
        if sink.is_empty() || sink == "." || sink == ".." || sink.contains(['/', '\\']) {
            return Err(QuarantineError::SinkName(sink.to_owned()));
        }
        let ts_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let entry = Entry {
            ts_ms,
            sink,
            reason,
            payload_base64: BASE64.encode(record_bytes),
        };
        let mut line = serde_json::to_vec(&entry).expect("strings and numbers serialize");
        line.push(b'\n');
        let needed = line.len() as u64;

        let slot = self.slot(sink);
        let mut file = lock(&slot.file);
        let file = match &mut *file {
            Some(file) => file,
            empty => match self.open(sink) {
                Ok(opened) => empty.insert(opened),
                Err(error) => {
                    slot.failed.inc();
                    slot.lost(&error, &cannot_keep(&error));
                    return Err(error);
                }
            },
        };
        let reserved = self
            .shared
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(needed)
                    .filter(|&n| n <= self.shared.max_disk)
            });
        if let Err(used) = reserved {
            slot.dropped.inc();
            let error = QuarantineError::Full {
                sink: sink.to_owned(),
                needed,
                used,
                max_disk: self.shared.max_disk,
                dir: self.shared.dir.clone(),
            };
            slot.lost(&error, &self.shared.full_reason);
            return Err(error);
        }
        if let Err(e) = file.file.write_all(&line) {
            self.shared.used.fetch_sub(needed, Ordering::AcqRel);
            let error = io("append to", &file.path, e);
            slot.failed.inc();
            slot.lost(&error, &cannot_keep(&error));
            return Err(error);
        }
        slot.kept(reason);
        file.unsynced_records += 1;
        file.unsynced_bytes += needed;
        if file.unsynced_records >= SYNC_EVERY_RECORDS || file.unsynced_bytes >= SYNC_EVERY_BYTES {
            let unsynced = u64::from(file.unsynced_records);
            sync_file(file).inspect_err(|error| slot.lost_unsynced(unsynced, error))?;
        }
        Ok(())
    }

    /// Registers `component` as the one whose records go to the quarantine under its
    /// name: its records are logged as its own (`sink lake: 1 record quarantined …`),
    /// and it is degraded while they are dropped. Call it before its first
    /// [`put`](Self::put); a name attached twice keeps the first component.
    pub fn attach(&self, component: &Component) {
        self.slot_for(component.name(), Some(component));
    }

    /// Writes every rate-limited summary still pending (at shutdown).
    pub fn flush_logs(&self) {
        for slot in lock(&self.shared.sinks).values() {
            slot.quarantined_log.flush();
            slot.dropped_log.flush();
        }
    }

    /// Appends each of `entries` to `sink`'s file and fsyncs it, on tokio's blocking
    /// pool: the calling task's worker never waits on the disk. Resolves once every
    /// entry that was accepted is on disk, so a caller may then acknowledge them or
    /// move past them.
    ///
    /// # Errors
    ///
    /// The first error of [`put`](Self::put) (every entry is still attempted; one
    /// refused for the budget is counted as dropped) or of the fsync;
    /// [`QuarantineError::Blocking`] when the blocking task could not run to its end
    /// (it panicked, or the runtime is shutting down).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future does not stop the write: the blocking task still appends
    /// and fsyncs every entry, and only its result is lost. Call it again after a
    /// cancellation and the entries are written twice.
    pub async fn put_durable(
        &self,
        sink: &str,
        entries: Vec<Rejected>,
    ) -> Result<(), QuarantineError> {
        let (quarantine, sink) = (self.clone(), sink.to_owned());
        tokio::task::spawn_blocking(move || {
            let mut first_error = None;
            for entry in &entries {
                if let Err(e) = quarantine.put(&sink, &entry.reason, &entry.payload) {
                    first_error.get_or_insert(e);
                }
            }
            if let Err(e) = quarantine.sync_sink(&sink) {
                first_error.get_or_insert(e);
            }
            first_error.map_or(Ok(()), Err)
        })
        .await
        .map_err(QuarantineError::Blocking)?
    }

    /// Flushes and fsyncs every sink's file (on shutdown, or periodically). Blocking.
    ///
    /// # Errors
    ///
    /// [`QuarantineError::Io`] for the first file that fails; the others are still
    /// attempted.
    pub fn sync(&self) -> Result<(), QuarantineError> {
        let slots: Vec<_> = lock(&self.shared.sinks).values().cloned().collect();
        let mut first_error = None;
        for slot in slots {
            if let Err(e) = slot.sync() {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Flushes and fsyncs `sink`'s file, when it has one. Blocking.
    ///
    /// # Errors
    ///
    /// [`QuarantineError::Io`] when the flush or the fsync fails.
    pub fn sync_sink(&self, sink: &str) -> Result<(), QuarantineError> {
        let slot = lock(&self.shared.sinks).get(sink).cloned();
        slot.map_or(Ok(()), |slot| slot.sync())
    }

    /// The budget, the bytes used, and per-sink counts of this run.
    pub fn stats(&self) -> QuarantineStats {
        let sinks = lock(&self.shared.sinks);
        QuarantineStats {
            used_bytes: self.shared.used.load(Ordering::Acquire),
            max_disk_bytes: self.shared.max_disk,
            sinks: sinks
                .iter()
                .map(|(name, slot)| {
                    let stats = SinkQuarantineStats {
                        records: slot.records.get(),
                        dropped: slot.dropped.get() + slot.failed.get(),
                    };
                    (name.clone(), stats)
                })
                .collect(),
        }
    }

    /// `sink`'s slot, added on its first entry (its counters registered then).
    fn slot(&self, sink: &str) -> Arc<SinkSlot> {
        self.slot_for(sink, None)
    }

    /// `sink`'s slot, added with `component` if it has none yet.
    fn slot_for(&self, sink: &str, component: Option<&Component>) -> Arc<SinkSlot> {
        let mut sinks = lock(&self.shared.sinks);
        if let Some(slot) = sinks.get(sink) {
            return Arc::clone(slot);
        }
        let counter = |name: &str, help: &str, reason: Option<&str>| {
            let mut labels = vec![("sink", sink)];
            labels.extend(reason.map(|r| ("reason", r)));
            self.shared
                .telemetry
                .get()
                .map_or_else(Counter::default, |telemetry| {
                    telemetry.counter(name, help, &labels)
                })
        };
        let records = counter(
            "weir_quarantine_records_total",
            "Records a sink could not encode, kept in the quarantine.",
            None,
        );
        let dropped_help = "Records the quarantine dropped, by reason.";
        let dropped = counter(
            "weir_quarantine_dropped_total",
            dropped_help,
            Some("quarantine_full"),
        );
        let failed = counter(
            "weir_quarantine_dropped_total",
            dropped_help,
            Some("write_failed"),
        );
        let who = component.map_or_else(
            || format!("quarantine of {sink}"),
            |c| format!("{} {}", c.kind().as_str(), c.name()),
        );
        let file = self.shared.dir.join(sink).join(FILE_NAME);
        let slot = Arc::new(SinkSlot {
            records,
            dropped,
            failed,
            component: component.cloned(),
            quarantined_log: LossLog::new(
                who.clone(),
                format!("quarantined in {}", file.display()),
                Severity::Warn,
            ),
            dropped_log: LossLog::new(who, "dropped, not kept by the quarantine", Severity::Error),
            file: Mutex::new(None),
        });
        sinks.insert(sink.to_owned(), Arc::clone(&slot));
        slot
    }

    fn open(&self, sink: &str) -> Result<SinkFile, QuarantineError> {
        let dir = self.shared.dir.join(sink);
        fs::create_dir_all(&dir).map_err(|e| io("create directory", &dir, e))?;
        let path = dir.join(FILE_NAME);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| io("open", &path, e))?;
        // A new file's directory entry must survive a crash too.
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io("fsync directory", &dir, e))?;
        Ok(SinkFile {
            file: BufWriter::new(file),
            path,
            unsynced_records: 0,
            unsynced_bytes: 0,
        })
    }
}

/// Why a component whose records the quarantine cannot write is degraded.
fn cannot_keep(error: &QuarantineError) -> String {
    format!("the quarantine cannot keep records: {error}")
}

fn sync_file(file: &mut SinkFile) -> Result<(), QuarantineError> {
    if file.unsynced_records == 0 {
        return Ok(());
    }
    file.file
        .flush()
        .and_then(|()| file.file.get_ref().sync_data())
        .map_err(|e| io("fsync", &file.path, e))?;
    file.unsynced_records = 0;
    file.unsynced_bytes = 0;
    Ok(())
}

#[cfg(test)]
#[path = "quarantine_tests.rs"]
mod tests;
