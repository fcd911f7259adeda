//! The uploads: the ordered stage's operations (a whole object in one PUT, one part of
//! a multipart upload, a completion that waits for its parts) and the retry policy of
//! every request, in the stage or outside it: up to `max_attempts`, capped exponential
//! backoff with full jitter, no retry of a permanent error.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::Notify;
use weir_flow::ordered::{OrderedConfig, OrderedStage, RetryPolicy};

use super::config::ObjectStoreConfig;
use super::shell::ObjectStoreSink;
use super::stats::ObjectStoreStats;
use super::store::{Metadata, Store, StoreError};

/// The first retry delay of a failed request.
const RETRY_INITIAL: std::time::Duration = std::time::Duration::from_millis(200);
/// The longest retry delay of a failed request (before jitter).
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(15);

/// A multipart upload in progress: its id and the tags of its parts as they land.
#[derive(Debug)]
pub(super) struct Upload {
    pub(super) id: String,
    pub(super) tags: Mutex<Vec<Option<String>>>,
    pub(super) landed: Notify,
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
pub(super) enum Op {
    /// A whole object in one PUT.
    Put {
        key: String,
        body: Bytes,
        metadata: Arc<Metadata>,
        first: u64,
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
        first: u64,
    },
}

/// What an operation achieved.
#[derive(Debug)]
pub(super) enum Done {
    /// A part landed.
    Part { bytes: u64 },
    /// The object at `first` is stored (in one PUT when `single`): the cursor may pass
    /// it once no object before it is open or uploading.
    Object {
        first: u64,
        bytes: u64,
        single: bool,
    },
}

type OpFn = Box<dyn Fn(Op) -> BoxFuture<'static, Result<Done, StoreError>> + Send + Sync>;
pub(super) type Stage = OrderedStage<Op, Done, StoreError, OpFn>;

impl ObjectStoreSink {
    /// Runs a request outside the ordered stage (a CreateMultipartUpload, an abort at
    /// recovery) with the stage's policy: up to `max_attempts`, capped exponential
    /// backoff with full jitter; retries are counted with the stage's.
    pub(super) fn with_retries<T, F, Fut>(
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
        let store = self.store.clone();
        async move {
            let mut attempt = 1;
            loop {
                let result = f().await;
                let result = attempted(&store, &stats, result).await;
                match result {
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
}

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

pub(super) fn new_stage(
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

/// Records an attempt's outcome for [`ObjectStoreStats::failing`]; a failure of S3
/// whose credentials cannot be resolved says so, naming every source tried
/// ([`Store::explain`]).
async fn attempted<T>(
    store: &Store,
    stats: &ObjectStoreStats,
    result: Result<T, StoreError>,
) -> Result<T, StoreError> {
    match result {
        Ok(value) => {
            stats.attempt_succeeded();
            Ok(value)
        }
        Err(e) => {
            let e = store.explain(e).await;
            stats.attempt_failed(e.message.clone());
            Err(e)
        }
    }
}

async fn run_op(store: &Store, stats: &ObjectStoreStats, op: Op) -> Result<Done, StoreError> {
    let result = attempt(store, stats, op).await;
    attempted(store, stats, result).await
}

async fn attempt(store: &Store, stats: &ObjectStoreStats, op: Op) -> Result<Done, StoreError> {
    match op {
        Op::Put {
            key,
            body,
            metadata,
            first,
        } => {
            let bytes = body.len() as u64;
            store.put(&key, body, &metadata).await?;
            stats.bytes.fetch_add(bytes, Ordering::Relaxed);
            Ok(Done::Object {
                first,
                bytes,
                single: true,
            })
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
            first,
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
            Ok(Done::Object {
                first,
                bytes: 0,
                single: false,
            })
        }
    }
}
