//! The running object-store sink.
//!
//! ```text
//! batches ──▶ encoder (blocking thread) ──parts──▶ ordered stage (upload_concurrency)
//!                                                     │ completions in WAL order
//!                 cursor ◀── contiguous prefix of completed objects ◀┘
//! ```
//!
//! - Without a `layout`, one object is open at a time; objects are contiguous ranges of
//!   the WAL, so they never overlap. The next object starts right after the last
//!   offset of the one before.
//! - With a `layout`, each record goes to the open object of its partition (the
//!   layout rendered for it), up to `max_open_partitions` open at once: past it, the
//!   least recently written is closed early. An object holds the records of its
//!   partition from its first offset through its last; objects of different partitions
//!   interleave in the WAL but never share a record.
//! - The encoder's buffer is cut into parts of `part_size` as it fills. An object that
//!   closes before its first part is full is sent in one PUT; otherwise a multipart
//!   upload starts with the first full part, and the last part and the
//!   CompleteMultipartUpload follow at close.
//! - Parts, PUTs and completions go through weir-flow's ordered stage: at most
//!   `upload_concurrency` at once (so at most `upload_concurrency × part_size` bytes
//!   uploading), each retried with capped exponential backoff and full jitter up to
//!   `max_attempts`, results released in submission order. A completion waits for its
//!   object's parts inside its own slot.
//! - The cursor is the smallest first offset of any open object or any closed object
//!   whose PUT or CompleteMultipartUpload has not succeeded yet ([`Sink::settled`]),
//!   else the end of what the sink was handed.
//! - The [journal](super::journal) records each object's first offset, key and upload
//!   id when its upload starts, and its last offset before it is completed, with the
//!   [shape](super::shape) of the config. After a crash or a failure the sink aborts the
//!   recorded uploads and cuts the replayed objects at the recorded boundaries under the
//!   recorded keys; it does not start when the config would write one of them otherwise.
//!   A replay from the cursor skips the records of a partition that an object stored
//!   before the cursor already holds (its first offset is below the cursor, its last
//!   is not).
//! - A part or object that fails `max_attempts` times (or at once, for a permanent
//!   error) fails the sink's run: its uploads are aborted and the driver reads again
//!   from the committed cursor. A permanent error (403, a missing bucket) marks the
//!   sink `failed` with the store's answer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use weir_flow::ordered::{OrderedError, SubmitError};
use weir_wal::Wal;

use super::config::ObjectStoreConfig;
use super::encode::Encoding;
use super::journal::{Journal, Recorded};
use super::naming::Naming;
use super::object::OpenObject;
use super::shape::{Shape, check_recorded};
use super::stats::ObjectStoreStats;
use super::store::{Store, StoreError};
use super::upload::{Done, Op, Stage, new_stage};
use crate::pipeline::{Sink, SinkBatch, SinkError, Unencodable, Written};
use crate::sinks::layout::Layout;
use crate::sinks::rotate::{CloseReason, early_close_note};
use crate::sinks::schema::EventTime;
use crate::sinks::{ConfigStamp, OpenSink, SinkContext};

/// Journal lines after which the journal is compacted (on the next tick).
const COMPACT_AFTER_LINES: u64 = 1_024;

/// An `object_store` sink.
pub struct ObjectStoreSink {
    pub(super) name: String,
    pub(super) config: ObjectStoreConfig,
    pub(super) encoding: Encoding,
    pub(super) naming: Naming,
    pub(super) footer: ConfigStamp,
    pub(super) store: Store,
    pub(super) wal: Wal,
    pub(super) journal: Arc<Mutex<Journal>>,
    pub(super) recorded: BTreeMap<u64, Recorded>,
    pub(super) needs_recovery: bool,
    pub(super) stage: Stage,
    /// The open objects, by partition (`""` without a layout).
    pub(super) open: BTreeMap<String, OpenObject>,
    /// Without a layout: where the next object starts.
    pub(super) next_first: Option<u64>,
    /// Where the driver reads from since the last reset: objects recorded as starting
    /// below it are stored.
    pub(super) replay_from: u64,
    /// The first offsets of closed objects not yet stored.
    pub(super) pending: BTreeSet<u64>,
    /// With a layout: the first offsets of the recorded objects that start before
    /// `replay_from`, end after it, and are in the store (found at recovery).
    pub(super) stored: BTreeSet<u64>,
    /// The end (next offset) of the last batch handed over since the last reset.
    pub(super) read_end: Option<u64>,
    /// `layout`, and the `event_time` it may read.
    pub(super) layout: Option<Layout>,
    pub(super) event_time: Option<EventTime>,
    /// `max_open_partitions` (1 without a layout).
    pub(super) max_open: usize,
    /// A `file://` store on the WAL's filesystem: a batch that would take the WAL's
    /// reserve waits instead.
    pub(super) reserve: Option<crate::sinks::reserve::WalReserve>,
    /// Batches written: when each open object last had records (closed first when too
    /// many partitions are open: the least recently written).
    pub(super) writes: u64,
    pub(super) stats: Arc<ObjectStoreStats>,
}

impl std::fmt::Debug for ObjectStoreSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStoreSink")
            .field("name", &self.name)
            .field("url", &crate::keys::redact::url(&self.config.url))
            .field("open", &self.open.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

pub(super) fn abandoned(name: &str, e: impl std::fmt::Display) -> SinkError {
    SinkError::Abandoned(format!("object store sink {name}: {e}"))
}

fn from_stage(name: &str, e: OrderedError<StoreError>) -> SinkError {
    match e {
        OrderedError::Failed { error, .. } if error.permanent => {
            SinkError::Permanent(format!("object store sink {name}: {error}"))
        }
        other => abandoned(name, other),
    }
}

/// The committed cursor of the sink `name` (0 before it has one).
fn committed(wal: &Wal, name: &str) -> u64 {
    wal.stats()
        .cursors
        .iter()
        .find(|c| c.name == name)
        .map_or(0, |c| c.committed)
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl OpenSink for ObjectStoreConfig {
    type Sink = ObjectStoreSink;

    fn open(&self, name: &str, cx: &SinkContext) -> Result<ObjectStoreSink, SinkError> {
        ObjectStoreSink::open(name, self, cx, true)
    }

    fn healthcheck(
        &self,
        name: &str,
        timeout: std::time::Duration,
    ) -> impl Future<Output = Result<(), String>> + Send {
        self.healthcheck_store(name, timeout)
    }
}

impl ObjectStoreSink {
    /// Opens the sink (blocking: reads its journal). Its objects go under a folder
    /// named after it (`sink_folder`) unless it has the directory to itself (a Parquet
    /// sink with a layout).
    ///
    /// # Errors
    ///
    /// [`SinkError::Permanent`] if the store's client cannot be built, the journal
    /// cannot be read, or it records an object the current config would write
    /// otherwise than it was recorded ([`check_recorded`]).
    pub fn open(
        name: &str,
        config: &ObjectStoreConfig,
        cx: &SinkContext,
        sink_folder: bool,
    ) -> Result<ObjectStoreSink, SinkError> {
        let store =
            Store::open(config).map_err(|e| SinkError::Permanent(format!("sinks.{name}: {e}")))?;
        let state_dir: PathBuf = cx.data_dir.join("sinks").join(name);
        let shape = Shape::of(config);
        let (journal, recorded) =
            Journal::open(&state_dir, shape.clone()).map_err(SinkError::Permanent)?;
        check_recorded(&recorded, committed(&cx.wal, name), &shape, journal.path())
            .map_err(SinkError::Permanent)?;
        let encoding = Encoding::of(config);
        if let Some(stats) = encoding.typed_stats() {
            crate::sinks::schema::register(name, stats, &cx.telemetry);
        }
        let prefix = match &config.location {
            super::config::Location::S3 { prefix, .. }
            | super::config::Location::Gcs { prefix, .. }
            | super::config::Location::Azure { prefix, .. }
            | super::config::Location::Memory { prefix } => prefix.clone(),
            super::config::Location::File { .. } => String::new(),
        };
        let naming = Naming {
            prefix,
            sink: if sink_folder {
                name.to_owned()
            } else {
                String::new()
            },
            wal_id: cx.wal.id().to_owned(),
            extension: encoding.extension(),
        };
        let stats = Arc::new(ObjectStoreStats::default());
        let stage = new_stage(config, &store, &stats, name);
        let sink = ObjectStoreSink {
            name: name.to_owned(),
            config: config.clone(),
            encoding,
            naming,
            footer: cx.stamp.clone(),
            store,
            wal: cx.wal.clone(),
            journal: Arc::new(Mutex::new(journal)),
            recorded,
            needs_recovery: true,
            stage,
            open: BTreeMap::new(),
            next_first: None,
            replay_from: 0,
            pending: BTreeSet::new(),
            stored: BTreeSet::new(),
            read_end: None,
            layout: config.partitioning.layout.clone(),
            event_time: config.schema.as_ref().and_then(|s| s.event_time.clone()),
            max_open: config.partitioning.max_open() as usize,
            reserve: match &config.location {
                super::config::Location::File { dir } => {
                    crate::sinks::reserve::WalReserve::for_dir(cx.wal.dir(), dir)
                }
                _ => None,
            },
            writes: 0,
            stats,
        };
        // Already set only if the sink was opened twice with one context.
        let _ = cx
            .detail
            .set(crate::pipeline::Detail(Arc::new(sink.status_fn())));
        let (max_disk, capacity) = (cx.wal.stats().max_disk, cx.wal.capacity());
        if let Some(note) =
            early_close_note(name, "object", &config.rotate, max_disk, Some(capacity))
        {
            tracing::info!(sink = %name, "{note}");
        }
        Ok(sink)
    }

    /// The sink's counters.
    pub fn stats(&self) -> Arc<ObjectStoreStats> {
        Arc::clone(&self.stats)
    }

    /// The store (tests read `memory://` objects back through it).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Submits `op`, taking completions while the stage is full (so that its held
    /// results never block admission).
    pub(super) async fn submit(&mut self, mut op: Op, bytes: u64) -> Result<(), SinkError> {
        loop {
            match self.stage.try_submit(op) {
                Ok(_) => {
                    self.stats
                        .uploading_bytes
                        .fetch_add(bytes, Ordering::Relaxed);
                    self.stats.in_flight.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Err(SubmitError::Full(back)) => {
                    op = back;
                    match self.stage.next().await {
                        Some(result) => self.take(result)?,
                        None => return Err(abandoned(&self.name, "the upload stage closed")),
                    }
                }
                Err(_) => {
                    return Err(abandoned(&self.name, "the upload stage closed"));
                }
            }
        }
    }

    /// Takes one completion, in order.
    fn take(&mut self, result: Result<Done, OrderedError<StoreError>>) -> Result<(), SinkError> {
        self.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.count_retries();
        match result.map_err(|e| from_stage(&self.name, e))? {
            Done::Part { bytes } => {
                self.stats
                    .uploading_bytes
                    .fetch_sub(bytes, Ordering::Relaxed);
                self.stats.parts.fetch_add(1, Ordering::Relaxed);
            }
            Done::Object {
                first,
                bytes,
                single,
            } => {
                self.stats
                    .uploading_bytes
                    .fetch_sub(bytes, Ordering::Relaxed);
                self.stats.objects.fetch_add(1, Ordering::Relaxed);
                if single {
                    self.stats.single_puts.fetch_add(1, Ordering::Relaxed);
                }
                if !self.pending.remove(&first) {
                    return Err(abandoned(&self.name, "a completion without an object"));
                }
            }
        }
        Ok(())
    }

    /// Where the cursor may move: before the first offset of every open object and of
    /// every closed one not stored yet, else to the end of what was handed over.
    pub(super) fn durable(&self) -> Option<u64> {
        let end = self.read_end?;
        let open = self.open.values().map(|o| o.first);
        Some(
            open.chain(self.pending.first().copied())
                .fold(end, u64::min),
        )
    }

    fn written(&self) -> Written {
        Written {
            durable_through: self.durable(),
            unencodable: 0,
            buffered_bytes: self.held_bytes(),
        }
    }

    /// A failed run: everything in flight is thrown away and the driver reads again
    /// from the committed cursor ([`SinkError::Abandoned`]); a permanent refusal (403,
    /// a missing bucket) is logged at ERROR, since retrying will not fix it.
    fn failed(&mut self, e: SinkError) -> SinkError {
        let resume = self.next_first.unwrap_or(0);
        self.reset(resume);
        match e {
            SinkError::Permanent(message) => {
                tracing::error!(
                    "{message}; fix the store or its credentials: the sink retries with backoff up to retry.max"
                );
                SinkError::Abandoned(message)
            }
            other => other,
        }
    }

    /// Throws away everything in flight (after a failure, or before a replay).
    fn reset(&mut self, next_offset: u64) {
        self.stage.close();
        self.stats
            .earlier_stage_retries
            .fetch_add(self.stage.retries(), Ordering::Relaxed);
        self.stage = new_stage(&self.config, &self.store, &self.stats, &self.name);
        for counter in [
            &self.stats.in_flight,
            &self.stats.uploading_bytes,
            &self.stats.encoder_bytes,
            &self.stats.open_objects,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
        self.open.clear();
        self.pending.clear();
        self.stored.clear();
        self.read_end = None;
        self.next_first = Some(next_offset);
        self.replay_from = next_offset;
        self.needs_recovery = true;
    }
}

impl Sink for ObjectStoreSink {
    async fn write(
        &mut self,
        batch: &Arc<SinkBatch>,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<Written, SinkError> {
        if self.needs_recovery {
            let committed = self.next_first.unwrap_or(0);
            self.recover(committed).await.map_err(|e| self.failed(e))?;
        }
        // If the batch's payloads would take the WAL's reserve, nothing of the batch is
        // taken, and the driver offers it again after its backoff (the open objects stay
        // as they are). What the open objects' encoders hold already is not counted:
        // with many partitions open it can be most of a small disk, and counting it would
        // refuse every batch while nothing closes them.
        if let Some(reserve) = &self.reserve {
            let needed = batch.bytes;
            if let Err(reason) = reserve.check(needed) {
                return Err(SinkError::Io {
                    action: "writing into",
                    path: reserve.dir().to_path_buf(),
                    source: std::io::Error::new(std::io::ErrorKind::StorageFull, reason),
                });
            }
        }
        let before = rejects.len();
        self.write_batch(batch, rejects)
            .await
            .map_err(|e| self.failed(e))?;
        self.read_end = Some(batch.next_offset);
        Ok(Written {
            unencodable: (rejects.len() - before) as u64,
            ..self.written()
        })
    }

    async fn settled(&mut self) -> Result<Option<u64>, SinkError> {
        if self.stage.in_flight() + self.stage.held() == 0 {
            return std::future::pending().await;
        }
        match self.stage.next().await {
            Some(result) => {
                self.take(result).map_err(|e| self.failed(e))?;
                Ok(self.durable())
            }
            None => std::future::pending().await,
        }
    }

    async fn tick(&mut self) -> Result<Option<u64>, SinkError> {
        self.count_retries();
        if !self.needs_recovery {
            self.rotate_if_due().await?;
            if lock(&self.journal).lines() > COMPACT_AFTER_LINES {
                let committed = committed(&self.wal, &self.name);
                self.compact_journal(committed).await?;
            }
        }
        Ok(self.durable())
    }

    async fn finish(&mut self) -> Result<Option<u64>, SinkError> {
        let open: Vec<(String, u64, Option<u64>, Option<u64>)> = self
            .open
            .iter()
            .map(|(p, o)| (p.clone(), o.first, o.last, o.boundary))
            .collect();
        for (partition, first, last, boundary) in open {
            match (last, boundary) {
                // Closing a recorded object short of its boundary would overwrite the
                // stored one with fewer records: it stays open (holding the cursor
                // before it) for the next run's replay to write again.
                (Some(last), Some(boundary)) if last < boundary => {
                    tracing::info!(
                        "sink {}: leaving the recorded object at {first} open (through {last} of {boundary}): the next run writes it again",
                        self.name,
                    );
                }
                (Some(last), _) => {
                    self.close(&partition, last).await?;
                    self.stats.closes.0.count(CloseReason::Shutdown);
                }
                (None, _) => {
                    self.open.remove(&partition);
                }
            }
        }
        while !self.pending.is_empty() {
            match self.stage.next().await {
                Some(result) => self.take(result)?,
                None => break,
            }
        }
        Ok(self.durable())
    }

    fn resume_at(&mut self, next_offset: u64) {
        self.reset(next_offset);
    }

    /// Uploads are retried in the background while `write` goes on encoding: from
    /// their first failed attempt until one succeeds, the sink shows `failed` with the
    /// store's answer (and, for S3 without credentials, every source tried).
    fn failing(&self) -> Option<String> {
        self.stats
            .failing()
            .map(|reason| format!("object store sink {}: {reason}", self.name))
    }
}
