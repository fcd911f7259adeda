//! The running object-store sink.
//!
//! ```text
//! batches ──▶ encoder (blocking thread) ──parts──▶ ordered stage (upload_concurrency)
//!                                                     │ completions in WAL order
//!                 cursor ◀── contiguous prefix of completed objects ◀┘
//! ```
//!
//! - One object is open at a time; objects are contiguous ranges of the WAL, so they
//!   never overlap. The next object starts right after the last offset of the one
//!   before.
//! - The encoder's buffer is cut into parts of `part_size` as it fills. An object that
//!   closes before its first part is full is sent in one PUT; otherwise a multipart
//!   upload starts with the first full part, and the last part and the
//!   CompleteMultipartUpload follow at close.
//! - Parts, PUTs and completions go through weir-flow's ordered stage: at most
//!   `upload_concurrency` at once (so at most `upload_concurrency × part_size` bytes
//!   uploading), each retried with capped exponential backoff and full jitter up to
//!   `max_attempts`, results released in submission order. A completion waits for its
//!   object's parts inside its own slot.
//! - The cursor moves only past objects whose PUT or CompleteMultipartUpload
//!   succeeded, in order ([`Sink::settled`]), even when uploads finish out of order.
//! - The [journal](super::journal) records each object's first offset, key and upload
//!   id when its upload starts, and its last offset before it is completed. After a
//!   crash or a failure the sink aborts the recorded uploads and cuts the replayed
//!   objects at the recorded boundaries under the recorded keys.
//! - A part or object that fails `max_attempts` times (or at once, for a permanent
//!   error) fails the sink's run: its uploads are aborted and the driver reads again
//!   from the committed cursor. A permanent error (403, a missing bucket) marks the
//!   sink `failed` with the store's answer.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use bytes::Bytes;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::Notify;
use weir_flow::ordered::{OrderedConfig, OrderedError, OrderedStage, RetryPolicy, SubmitError};
use weir_wal::Wal;

use super::config::ObjectStoreConfig;
use super::encode::{Encoding, ObjectEncoder};
use super::journal::{Journal, Recorded};
use super::naming::Naming;
use super::store::{Metadata, Store, StoreError};
use crate::pipeline::{Sink, SinkBatch, SinkError, Unencodable, Written};
use crate::sinks::parquet::FooterMetadata;
use crate::sinks::rotate::pins_too_much;
use crate::sinks::{OpenSink, SinkContext};

/// How long recovery waits before it aborts the uploads an earlier run recorded, so
/// that parts that run had sent whole land first (and are aborted with the rest).
const UPLOAD_SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

/// The first retry delay of a failed request.
const RETRY_INITIAL: std::time::Duration = std::time::Duration::from_millis(200);
/// The longest retry delay of a failed request (before jitter).
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(15);

/// Journal lines after which the journal is compacted (on the next tick).
const COMPACT_AFTER_LINES: u64 = 1_024;

/// A multipart upload in progress: its id and the tags of its parts as they land.
#[derive(Debug)]
struct Upload {
    id: String,
    tags: Mutex<Vec<Option<String>>>,
    landed: Notify,
}

impl Upload {
    fn record(&self, index: usize, tag: String) {
        {
            let mut tags = self.tags.lock().unwrap_or_else(PoisonError::into_inner);
            if tags.len() <= index {
                tags.resize(index + 1, None);
            }
            tags[index] = Some(tag);
        }
        self.landed.notify_waiters();
    }

    /// The tags of parts `0..parts`, once every one has landed.
    fn tags(&self, parts: usize) -> Option<Vec<String>> {
        let tags = self.tags.lock().unwrap_or_else(PoisonError::into_inner);
        (tags.len() >= parts)
            .then(|| {
                tags[..parts]
                    .iter()
                    .cloned()
                    .collect::<Option<Vec<String>>>()
            })
            .flatten()
    }
}

/// One operation of the ordered stage.
#[derive(Debug, Clone)]
enum Op {
    /// A whole object in one PUT.
    Put {
        key: String,
        body: Bytes,
        metadata: Arc<Metadata>,
        next: u64,
    },
    /// One part of a multipart upload.
    Part {
        key: String,
        upload: Arc<Upload>,
        index: usize,
        body: Bytes,
    },
    /// The completion of a multipart upload of `parts` parts (waits for them).
    Complete {
        key: String,
        upload: Arc<Upload>,
        parts: usize,
        next: u64,
    },
}

/// What an operation achieved.
#[derive(Debug)]
enum Done {
    /// A part landed.
    Part { bytes: u64 },
    /// An object is stored: the cursor may move to `next` once every object before
    /// it is stored too.
    Object { next: u64, bytes: u64 },
}

type OpFn = Box<dyn Fn(Op) -> BoxFuture<'static, Result<Done, StoreError>> + Send + Sync>;
type Stage = OrderedStage<Op, Done, StoreError, OpFn>;

/// Counters of one object-store sink, for `/status`.
#[derive(Debug, Default)]
pub struct ObjectStoreStats {
    /// Objects stored (PUT or completed).
    pub objects: AtomicU64,
    /// Of those, objects sent in one PUT.
    pub single_puts: AtomicU64,
    /// Parts uploaded.
    pub parts: AtomicU64,
    /// Bytes stored.
    pub bytes: AtomicU64,
    /// Retried attempts (throttling, 5xx, timeouts, connection errors).
    pub retries: AtomicU64,
    /// Uploads aborted (a failed object, or one recorded by an earlier run).
    pub aborted_uploads: AtomicU64,
    /// Recorded uploads the store refused to abort (logged at WARN).
    pub unabortable_uploads: AtomicU64,
    /// Retries of requests made outside the stage.
    pub inline_retries: AtomicU64,
    /// Retries of stages replaced after a failure.
    pub earlier_stage_retries: AtomicU64,
    /// Bytes of parts and objects uploading now.
    pub uploading_bytes: AtomicU64,
    /// Parts and objects uploading now.
    pub in_flight: AtomicU64,
    /// Bytes the open object's encoder holds.
    pub encoder_bytes: AtomicU64,
}

fn get(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// The object being written.
#[derive(Debug)]
struct OpenObject {
    first: u64,
    key: String,
    /// Covered through this offset so far (none yet when just opened).
    last: Option<u64>,
    /// Where a recorded object must end.
    boundary: Option<u64>,
    encoder: Option<ObjectEncoder>,
    upload: Option<Arc<Upload>>,
    /// Parts submitted.
    parts: usize,
    opened: Instant,
}

/// A place in the WAL the cursor may reach once everything before it is stored.
#[derive(Debug, Clone, Copy)]
struct Mark {
    next: u64,
    done: bool,
}

/// An `object_store` sink.
pub struct ObjectStoreSink {
    name: String,
    config: ObjectStoreConfig,
    encoding: Encoding,
    naming: Naming,
    footer: FooterMetadata,
    store: Store,
    wal: Wal,
    journal: Arc<Mutex<Journal>>,
    recorded: BTreeMap<u64, Recorded>,
    needs_recovery: bool,
    stage: Stage,
    open: Option<OpenObject>,
    next_first: Option<u64>,
    marks: VecDeque<Mark>,
    durable: Option<u64>,
    stats: Arc<ObjectStoreStats>,
}

impl std::fmt::Debug for ObjectStoreSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStoreSink")
            .field("name", &self.name)
            .field("url", &self.config.url)
            .field("open", &self.open.as_ref().map(|o| &o.key))
            .finish_non_exhaustive()
    }
}

fn abandoned(name: &str, e: impl std::fmt::Display) -> SinkError {
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl OpenSink for ObjectStoreConfig {
    type Sink = ObjectStoreSink;

    fn open(&self, name: &str, cx: &SinkContext) -> Result<ObjectStoreSink, SinkError> {
        ObjectStoreSink::open(name, self, cx)
    }
}

impl ObjectStoreSink {
    /// Opens the sink (blocking: reads its journal).
    ///
    /// # Errors
    ///
    /// [`SinkError::Permanent`] if the store's client cannot be built or the journal
    /// cannot be read.
    pub fn open(
        name: &str,
        config: &ObjectStoreConfig,
        cx: &SinkContext,
    ) -> Result<ObjectStoreSink, SinkError> {
        let store =
            Store::open(config).map_err(|e| SinkError::Permanent(format!("sinks.{name}: {e}")))?;
        let state_dir: PathBuf = cx.data_dir.join("sinks").join(name);
        let (journal, recorded) = Journal::open(&state_dir).map_err(SinkError::Permanent)?;
        let encoding = Encoding::of(config);
        if let super::encode::Encoding::Parquet(settings) = &encoding
            && let Some(stats) = settings.typed_stats()
        {
            crate::sinks::schema::register(name, stats, &cx.telemetry, &cx.detail);
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
            sink: name.to_owned(),
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
            footer: FooterMetadata::from_context(cx),
            store,
            wal: cx.wal.clone(),
            journal: Arc::new(Mutex::new(journal)),
            recorded,
            needs_recovery: true,
            stage,
            open: None,
            next_first: None,
            marks: VecDeque::new(),
            durable: None,
            stats,
        };
        // Already set only if the sink was opened twice with one context.
        let _ = cx
            .detail
            .set(crate::pipeline::Detail(Arc::new(sink.status_fn())));
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

    /// The `/status` details: uploads, memory and its bound.
    fn status_fn(&self) -> impl Fn() -> Value + Send + Sync + 'static {
        let stats = Arc::clone(&self.stats);
        let bound = self.config.upload_bytes();
        let (encoder_bound, _) = self.config.encoder_bytes();
        let url = self.config.url.clone();
        let wal_id = self.naming.wal_id.clone();
        move || {
            json!({
                "url": url,
                "wal_id": wal_id,
                "objects": get(&stats.objects),
                "single_puts": get(&stats.single_puts),
                "parts": get(&stats.parts),
                "bytes": get(&stats.bytes),
                "upload_retries": get(&stats.retries),
                "aborted_uploads": get(&stats.aborted_uploads),
                "unabortable_uploads": get(&stats.unabortable_uploads),
                "in_flight": get(&stats.in_flight),
                "uploading_bytes": get(&stats.uploading_bytes),
                "max_uploading_bytes": bound,
                "encoder_bytes": get(&stats.encoder_bytes),
                "max_encoder_bytes": encoder_bound,
            })
        }
    }

    /// Runs `f` on the journal on a blocking thread (its appends fsync).
    fn blocking_journal<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Journal) -> Result<T, String> + Send + 'static,
    ) -> impl std::future::Future<Output = Result<T, SinkError>> + Send + 'static {
        let journal = Arc::clone(&self.journal);
        let name = self.name.clone();
        async move {
            tokio::task::spawn_blocking(move || f(&mut lock(&journal)))
                .await
                .map_err(|_| SinkError::Cancelled)?
                .map_err(|e| abandoned(&name, e))
        }
    }

    /// Aborts every upload the journal records (left by a crash or a failed run) and
    /// drops what the cursor has passed.
    async fn recover(&mut self, committed: u64) -> Result<(), SinkError> {
        let uploads: Vec<(u64, String, String)> = self
            .recorded
            .iter()
            .filter_map(|(&first, r)| r.upload.clone().map(|id| (first, r.key.clone(), id)))
            .collect();
        if !uploads.is_empty() {
            // A part the crashed run had sent whole may still be landing on the store:
            // one that lands after the abort stays (S3 says to abort again; some stores,
            // s3s-fs among them, then no longer know the upload). Let those settle
            // first; this costs a moment only after a crash.
            tracing::info!(
                "sink {}: {} unfinished uploads recorded by an earlier run; aborting them in {:?}, once parts it had sent have landed",
                self.name,
                uploads.len(),
                UPLOAD_SETTLE
            );
            tokio::time::sleep(UPLOAD_SETTLE).await;
        }
        for (first, key, id) in uploads {
            let store = self.store.clone();
            let aborted = self
                .with_retries("AbortMultipartUpload", || {
                    let (store, key, id) = (store.clone(), key.clone(), id.clone());
                    async move { store.abort(&key, &id).await }
                })
                .await;
            match aborted {
                Ok(true) => {
                    self.stats.aborted_uploads.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(
                        "sink {}: aborted the unfinished upload {id} of {key} (a failed or crashed run's); its records are written again",
                        self.name
                    );
                }
                Ok(false) => {}
                // Some stores refuse to abort an upload that completed (s3s-fs answers
                // 403, S3 404): the replay overwrites the object under the same key
                // either way, so nothing is lost; at worst the upload's parts stay until
                // the bucket's lifecycle rule removes them.
                Err(e) if e.permanent => {
                    self.stats
                        .unabortable_uploads
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        "sink {}: could not abort the recorded upload {id} of {key}: {e}; if it never completed, its parts stay until a lifecycle rule for unfinished multipart uploads removes them",
                        self.name
                    );
                }
                Err(e) => {
                    return Err(abandoned(
                        &self.name,
                        format!("aborting a recorded upload: {e}"),
                    ));
                }
            }
            if let Some(r) = self.recorded.get_mut(&first) {
                r.upload = None;
            }
        }
        self.compact_journal(committed).await?;
        self.needs_recovery = false;
        Ok(())
    }

    /// Drops the journal's entries below `committed` (on disk, then here). On failure
    /// both stay as they were: the boundaries are never forgotten.
    async fn compact_journal(&mut self, committed: u64) -> Result<(), SinkError> {
        let mut recorded = self.recorded.clone();
        self.recorded = self
            .blocking_journal(move |j| {
                j.compact(&mut recorded, committed)?;
                Ok(recorded)
            })
            .await?;
        Ok(())
    }

    /// Runs a request outside the ordered stage (a CreateMultipartUpload, an abort at
    /// recovery) with the stage's policy: up to `max_attempts`, capped exponential
    /// backoff with full jitter; retries are counted with the stage's.
    fn with_retries<T, F, Fut>(
        &self,
        what: &'static str,
        f: F,
    ) -> impl std::future::Future<Output = Result<T, StoreError>> + Send + use<T, F, Fut>
    where
        F: Fn() -> Fut + Send,
        Fut: std::future::Future<Output = Result<T, StoreError>> + Send,
        T: Send,
    {
        let policy = retry_policy(&self.config, &self.name);
        let attempts = policy.max_attempts.get();
        let stats = Arc::clone(&self.stats);
        let name = self.name.clone();
        async move {
            let mut attempt = 1;
            loop {
                match f().await {
                    Ok(value) => return Ok(value),
                    Err(e) if e.permanent || attempt >= attempts => return Err(e),
                    Err(e) => {
                        stats.inline_retries.fetch_add(1, Ordering::Relaxed);
                        let ceiling = policy.backoff(attempt);
                        let mut raw = [0u8; 8];
                        let _ = getrandom::fill(&mut raw);
                        #[allow(clippy::cast_precision_loss, reason = "a fraction for jitter")]
                        let fraction = (u64::from_le_bytes(raw) >> 11) as f64 / (1u64 << 53) as f64;
                        tracing::debug!("sink {name}: {what} failed, retrying: {e}");
                        tokio::time::sleep(ceiling.mul_f64(fraction)).await;
                        attempt += 1;
                    }
                }
            }
        }
    }

    /// Submits `op`, taking completions while the stage is full (so that its held
    /// results never block admission).
    async fn submit(&mut self, mut op: Op, bytes: u64) -> Result<(), SinkError> {
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
            Done::Object { next, bytes } => {
                self.stats
                    .uploading_bytes
                    .fetch_sub(bytes, Ordering::Relaxed);
                self.stats.objects.fetch_add(1, Ordering::Relaxed);
                let mark = self
                    .marks
                    .iter_mut()
                    .find(|m| !m.done)
                    .ok_or_else(|| abandoned(&self.name, "a completion without an object"))?;
                debug_assert_eq!(mark.next, next, "completions come in WAL order");
                mark.done = true;
                while let Some(front) = self.marks.front().copied() {
                    if !front.done {
                        break;
                    }
                    self.durable = Some(front.next);
                    self.marks.pop_front();
                }
            }
        }
        Ok(())
    }

    /// `retries` = the retries of earlier stages + this stage's + the inline ones.
    fn count_retries(&self) {
        let total = get(&self.stats.earlier_stage_retries)
            + self.stage.retries()
            + get(&self.stats.inline_retries);
        self.stats.retries.store(total, Ordering::Relaxed);
    }

    fn held_bytes(&self) -> u64 {
        get(&self.stats.encoder_bytes) + get(&self.stats.uploading_bytes)
    }

    fn written(&self) -> Written {
        Written {
            durable_through: self.durable,
            unencodable: 0,
            buffered_bytes: self.held_bytes(),
        }
    }

    /// Opens the object that starts at `first` (its key recorded, or named now).
    fn open_object(&mut self, first: u64, time_ms: u64) -> Result<(), SinkError> {
        let recorded = self.recorded.get(&first);
        let key = recorded.map_or_else(|| self.naming.key(first, time_ms), |r| r.key.clone());
        let boundary = recorded.and_then(|r| r.last);
        let encoder = ObjectEncoder::new(&self.encoding, self.config.part_size.bytes())
            .map_err(|e| abandoned(&self.name, e))?;
        self.open = Some(OpenObject {
            first,
            key,
            last: None,
            boundary,
            encoder: Some(encoder),
            upload: None,
            parts: 0,
            opened: Instant::now(),
        });
        Ok(())
    }

    fn metadata(&self, first: u64, last: Option<u64>) -> Arc<Metadata> {
        let mut metadata: Metadata = vec![
            (KEY_FIRST_OFFSET_META, first.to_string()),
            (KEY_CONFIG_HASH_META, self.footer.config_hash.clone()),
            (KEY_ON_FULL_META, self.footer.on_full.as_str().to_owned()),
            (KEY_WAL_ID_META, self.naming.wal_id.clone()),
        ];
        if let Some(last) = last {
            metadata.push((KEY_LAST_OFFSET_META, last.to_string()));
        }
        Arc::new(metadata)
    }

    /// Appends records to the open object on a blocking thread; returns the full parts.
    async fn encode(
        &mut self,
        batch: &Arc<SinkBatch>,
        range: std::ops::Range<usize>,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<Vec<Bytes>, SinkError> {
        let batch = Arc::clone(batch);
        let open = self.open.as_mut().expect("encode runs with an object open");
        let mut encoder = open.encoder.take().expect("the encoder is in place");
        let (encoder, result, mut new_rejects) = tokio::task::spawn_blocking(move || {
            let mut parts = Vec::new();
            let mut rejects = Vec::new();
            let result = encoder
                .append(&batch.records[range], &mut parts, &mut rejects)
                .map(|()| parts);
            (encoder, result, rejects)
        })
        .await
        .map_err(|_| SinkError::Cancelled)?;
        rejects.append(&mut new_rejects);
        let mut encoder = encoder;
        self.stats
            .encoder_bytes
            .store(encoder.held(), Ordering::Relaxed);
        self.open.as_mut().expect("still open").encoder = Some(encoder);
        result.map_err(|e| abandoned(&self.name, e))
    }

    /// Sends full parts of the open object, starting its multipart upload first.
    async fn send_parts(&mut self, parts: Vec<Bytes>) -> Result<(), SinkError> {
        if parts.is_empty() {
            return Ok(());
        }
        let open = self.open.as_ref().expect("parts belong to the open object");
        let upload = match &open.upload {
            Some(upload) => Arc::clone(upload),
            None => {
                let (first, key) = (open.first, open.key.clone());
                let metadata = self.metadata(first, None);
                let store = self.store.clone();
                let id = self
                    .with_retries("CreateMultipartUpload", || {
                        let (store, key, metadata) =
                            (store.clone(), key.clone(), Arc::clone(&metadata));
                        async move { store.create(&key, &metadata).await }
                    })
                    .await
                    .map_err(|e| {
                        if e.permanent {
                            SinkError::Permanent(format!("object store sink {}: {e}", self.name))
                        } else {
                            abandoned(&self.name, e)
                        }
                    })?;
                let (k, i) = (key.clone(), id.clone());
                self.blocking_journal(move |j| j.started(first, &k, &i))
                    .await?;
                let entry = self.recorded.entry(first).or_default();
                entry.key = key;
                entry.upload = Some(id.clone());
                let upload = Arc::new(Upload {
                    id,
                    tags: Mutex::new(Vec::new()),
                    landed: Notify::new(),
                });
                self.open.as_mut().expect("still open").upload = Some(Arc::clone(&upload));
                upload
            }
        };
        for body in parts {
            let open = self.open.as_mut().expect("still open");
            let index = open.parts;
            open.parts += 1;
            let op = Op::Part {
                key: open.key.clone(),
                upload: Arc::clone(&upload),
                index,
                body: body.clone(),
            };
            self.submit(op, body.len() as u64).await?;
        }
        Ok(())
    }

    /// Closes the open object at `last`: records its end, then sends it.
    async fn close(&mut self, last: u64) -> Result<(), SinkError> {
        let Some(mut open) = self.open.take() else {
            return Ok(());
        };
        let encoder = open.encoder.take().expect("the encoder is in place");
        let (footer, first) = (self.footer.clone(), open.first);
        let (parts, rest) =
            tokio::task::spawn_blocking(move || encoder.finish(&footer, first, last))
                .await
                .map_err(|_| SinkError::Cancelled)?
                .map_err(|e| abandoned(&self.name, e))?;
        self.stats.encoder_bytes.store(0, Ordering::Relaxed);
        let key = open.key.clone();
        let (k, next) = (key.clone(), last + 1);
        self.blocking_journal(move |j| j.closed(first, &k, last))
            .await?;
        let entry = self.recorded.entry(first).or_default();
        entry.key = key.clone();
        entry.last = Some(last);
        self.next_first = Some(next);
        if open.upload.is_none() && parts.is_empty() {
            let bytes = rest.len() as u64;
            let op = Op::Put {
                key,
                body: rest,
                metadata: self.metadata(first, Some(last)),
                next,
            };
            self.marks.push_back(Mark { next, done: false });
            self.stats.single_puts.fetch_add(1, Ordering::Relaxed);
            return self.submit(op, bytes).await;
        }
        // Multipart: the remaining parts, the last one, then the completion.
        self.open = Some(open);
        let mut all = parts;
        if !rest.is_empty() {
            all.push(rest);
        }
        self.send_parts(all).await?;
        let open = self.open.take().expect("still open");
        let upload = open.upload.expect("send_parts started the upload");
        self.marks.push_back(Mark { next, done: false });
        let op = Op::Complete {
            key,
            upload,
            parts: open.parts,
            next,
        };
        self.submit(op, 0).await
    }

    /// Closes the open object if rotation is due (size, age, or the WAL it pins).
    async fn rotate_if_due(&mut self) -> Result<(), SinkError> {
        let Some(open) = self.open.as_mut() else {
            return Ok(());
        };
        // A recorded object ends where it ended before, whatever the rotation says: it
        // was that size then too.
        if open.boundary.is_some() {
            return Ok(());
        }
        let rotate = self.config.rotate;
        let size = open.encoder.as_mut().map_or(0, ObjectEncoder::size);
        let aged = rotate
            .age
            .is_some_and(|age| open.opened.elapsed() >= age.get());
        let due = size >= rotate.bytes.bytes()
            || aged
            || open
                .last
                .is_some_and(|last| pins_too_much(&rotate, &self.wal, open.first, last + 1));
        // An object that has covered nothing yet cannot end.
        if due && let Some(last) = open.last {
            self.close(last).await?;
        }
        Ok(())
    }

    async fn write_batch(
        &mut self,
        batch: &Arc<SinkBatch>,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<(), SinkError> {
        let Some(end) = batch.next_offset.checked_sub(1) else {
            return Ok(());
        };
        let n = batch.records.len();
        let mut i = 0;
        loop {
            if self.open.is_none() {
                let first = self.next_first.unwrap_or_else(|| {
                    batch
                        .positions
                        .first()
                        .map_or(batch.next_offset, |p| p.offset)
                });
                if first > end {
                    return Ok(());
                }
                let recorded = self.recorded.contains_key(&first);
                match batch.positions.get(i) {
                    // A recorded object is cut again where it started, records or not.
                    _ if recorded => {
                        let time = batch.positions.get(i).map_or(0, |p| p.time_ms);
                        self.open_object(first, time)?;
                    }
                    Some(p) => self.open_object(first, p.time_ms)?,
                    None => {
                        // Nothing of this sink's inputs: the range is passed.
                        self.next_first = Some(end + 1);
                        // Behind objects still uploading, one done mark per run of
                        // skipped batches: the marks stay bounded by the objects in
                        // flight, however long an upload retries.
                        match self.marks.back_mut() {
                            None => self.durable = Some(end + 1),
                            Some(back) if back.done => back.next = end + 1,
                            Some(_) => self.marks.push_back(Mark {
                                next: end + 1,
                                done: true,
                            }),
                        }
                        return Ok(());
                    }
                }
            }
            let open = self.open.as_ref().expect("opened above");
            let boundary = open.boundary;
            let stop = boundary.map_or(n, |b| {
                i + batch.positions[i..].partition_point(|p| p.offset <= b)
            });
            if stop > i {
                let parts = self.encode(batch, i..stop, rejects).await?;
                self.send_parts(parts).await?;
            }
            i = stop;
            let open = self.open.as_mut().expect("still open");
            match boundary {
                Some(b) if b <= end => {
                    open.last = Some(b);
                    self.close(b).await?;
                    if i >= n && b == end {
                        return Ok(());
                    }
                }
                _ => {
                    open.last = Some(end);
                    return self.rotate_if_due().await;
                }
            }
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
        ] {
            counter.store(0, Ordering::Relaxed);
        }
        self.open = None;
        self.marks.clear();
        self.durable = None;
        self.next_first = Some(next_offset);
        self.needs_recovery = true;
    }
}

const KEY_FIRST_OFFSET_META: &str = "weir-first-offset";
const KEY_LAST_OFFSET_META: &str = "weir-last-offset";
const KEY_CONFIG_HASH_META: &str = "weir-config-hash";
const KEY_ON_FULL_META: &str = "weir-on-full";
const KEY_WAL_ID_META: &str = "weir-wal-id";

/// The retry policy of every request: the stage's, and the ones made outside it.
fn retry_policy(config: &ObjectStoreConfig, name: &str) -> RetryPolicy {
    let seed = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let mut retry = RetryPolicy::default().with_full_jitter(seed);
    retry.max_attempts = config.max_attempts;
    retry.initial_backoff = RETRY_INITIAL;
    retry.max_backoff = RETRY_MAX;
    retry
}

fn new_stage(
    config: &ObjectStoreConfig,
    store: &Store,
    stats: &Arc<ObjectStoreStats>,
    name: &str,
) -> Stage {
    let concurrency = std::num::NonZeroUsize::new(config.upload_concurrency.get() as usize)
        .unwrap_or(std::num::NonZeroUsize::MIN);
    let mut stage_config = OrderedConfig::new(concurrency);
    // Completed results are small (no bytes): holding back twice the uploads in
    // flight behind a slow one is enough.
    stage_config.max_held = concurrency.get() * 2;
    // Each request has the client's `timeout`; a completion waits for its parts in its
    // slot, which no attempt timeout may cut short.
    stage_config.attempt_timeout = None;
    stage_config.retry = retry_policy(config, name);
    let store = store.clone();
    let stats = Arc::clone(stats);
    let op: OpFn = Box::new(move |op: Op| {
        let store = store.clone();
        let stats = Arc::clone(&stats);
        Box::pin(async move { run_op(&store, &stats, op).await })
    });
    OrderedStage::new(stage_config, op)
        .expect("the stage's settings are valid")
        .retry_if(|e: &StoreError| !e.permanent)
}

async fn run_op(store: &Store, stats: &ObjectStoreStats, op: Op) -> Result<Done, StoreError> {
    match op {
        Op::Put {
            key,
            body,
            metadata,
            next,
        } => {
            let bytes = body.len() as u64;
            store.put(&key, body, &metadata).await?;
            stats.bytes.fetch_add(bytes, Ordering::Relaxed);
            Ok(Done::Object { next, bytes })
        }
        Op::Part {
            key,
            upload,
            index,
            body,
        } => {
            let bytes = body.len() as u64;
            let tag = store.put_part(&key, &upload.id, index, body).await?;
            upload.record(index, tag);
            stats.bytes.fetch_add(bytes, Ordering::Relaxed);
            Ok(Done::Part { bytes })
        }
        Op::Complete {
            key,
            upload,
            parts,
            next,
        } => {
            let tags = loop {
                let landed = upload.landed.notified();
                tokio::pin!(landed);
                landed.as_mut().enable();
                if let Some(tags) = upload.tags(parts) {
                    break tags;
                }
                landed.await;
            };
            store.complete(&key, &upload.id, tags).await?;
            Ok(Done::Object { next, bytes: 0 })
        }
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
        let before = rejects.len();
        self.write_batch(batch, rejects)
            .await
            .map_err(|e| self.failed(e))?;
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
                Ok(self.durable)
            }
            None => std::future::pending().await,
        }
    }

    async fn tick(&mut self) -> Result<Option<u64>, SinkError> {
        self.count_retries();
        if !self.needs_recovery {
            self.rotate_if_due().await?;
            if lock(&self.journal).lines() > COMPACT_AFTER_LINES {
                let committed = self
                    .wal
                    .stats()
                    .cursors
                    .iter()
                    .find(|c| c.name == self.name)
                    .map_or(0, |c| c.committed);
                self.compact_journal(committed).await?;
            }
        }
        Ok(self.durable)
    }

    async fn finish(&mut self) -> Result<Option<u64>, SinkError> {
        match self.open.as_ref().map(|open| (open.last, open.boundary)) {
            // Closing a recorded object short of its boundary would overwrite the
            // stored one with fewer records: leave it to the next run's replay.
            Some((Some(last), Some(boundary))) if last < boundary => {
                tracing::info!(
                    "sink {}: leaving the recorded object at {} open (through {last} of {boundary}): the next run writes it again",
                    self.name,
                    self.open.as_ref().map_or(0, |o| o.first)
                );
                self.open = None;
            }
            Some((Some(last), _)) => self.close(last).await?,
            _ => {}
        }
        while self.marks.iter().any(|m| !m.done) {
            match self.stage.next().await {
                Some(result) => self.take(result)?,
                None => break,
            }
        }
        Ok(self.durable)
    }

    fn resume_at(&mut self, next_offset: u64) {
        self.reset(next_offset);
    }
}
