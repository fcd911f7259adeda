//! The object-store sink's counters ([`ObjectStoreStats`]) and the `/status` details
//! made from them: objects, parts and bytes stored, retries, aborted uploads, objects
//! closed by reason, and the bytes held (encoder and uploads) against their bounds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use super::shell::ObjectStoreSink;
use crate::sinks::rotate::{CloseReason, Closes};

/// Counters of one object-store sink, for `/status`.
#[derive(Debug, Default)]
pub struct ObjectStoreStats {
    /// Objects stored (PUT or completed).
    pub objects: AtomicU64,
    /// Of those, objects sent in one PUT (stored: an attempt that failed is a retry).
    pub single_puts: AtomicU64,
    /// Parts uploaded.
    pub parts: AtomicU64,
    /// Bytes stored.
    pub bytes: AtomicU64,
    /// Retried attempts (throttling, 5xx, timeouts, connection errors).
    pub retries: AtomicU64,
    /// Uploads aborted (a failed object, or one recorded by an earlier run).
    pub aborted_uploads: AtomicU64,
    /// Recorded uploads the store refused to abort and whose object is not stored
    /// (logged at WARN).
    pub unabortable_uploads: AtomicU64,
    /// Retries of requests made outside the stage.
    pub inline_retries: AtomicU64,
    /// Retries of stages replaced after a failure.
    pub earlier_stage_retries: AtomicU64,
    /// Bytes of parts and objects uploading now.
    pub uploading_bytes: AtomicU64,
    /// Parts, objects and completions uploading now, and multipart uploads being
    /// created.
    pub in_flight: AtomicU64,
    /// Bytes the open objects' encoders hold.
    pub encoder_bytes: AtomicU64,
    /// Objects open now (one per partition with records since its last close).
    pub open_objects: AtomicU64,
    /// Objects closed with no record in them (every one quarantined or filtered): in the
    /// journal, not stored.
    pub empty_objects: AtomicU64,
    /// Objects closed, by reason (`closes` in `/status`).
    pub closes: ObjectCloses,
    /// Why requests are failing: the last failed attempt's error, until an attempt
    /// succeeds (the sink shows `failed` with it meanwhile).
    failing: Mutex<Option<String>>,
}

/// The reasons an object closes for: `rotate` (bytes, age, the WAL it pins), the end an
/// earlier run recorded, shutdown.
pub const OBJECT_CLOSES: &[CloseReason] = &[
    CloseReason::Bytes,
    CloseReason::Age,
    CloseReason::WalShare,
    CloseReason::Recorded,
    CloseReason::Partitions,
    CloseReason::Shutdown,
];

/// [`Closes`] of the [`OBJECT_CLOSES`] reasons.
#[derive(Debug)]
pub struct ObjectCloses(pub Closes);

impl Default for ObjectCloses {
    fn default() -> Self {
        Self(Closes::new(OBJECT_CLOSES))
    }
}

impl ObjectStoreStats {
    /// A request failed with `reason`.
    pub(super) fn attempt_failed(&self, reason: String) {
        *self.failing.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason);
    }

    /// A request succeeded: the store works again.
    pub(super) fn attempt_succeeded(&self) {
        self.failing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// The last failed attempt's error, while no attempt has succeeded since.
    pub(super) fn failing(&self) -> Option<String> {
        self.failing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// One more request in flight while it lives (a CreateMultipartUpload, made outside
/// the stage).
pub(super) struct InFlight(Arc<ObjectStoreStats>);

impl InFlight {
    pub(super) fn new(stats: &Arc<ObjectStoreStats>) -> Self {
        stats.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(stats))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // Saturating: a reset may have zeroed the count meanwhile.
        let _ = self
            .0
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

fn get(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

impl ObjectStoreSink {
    /// The `/status` details: uploads, memory and its bound.
    pub(super) fn status_fn(&self) -> impl Fn() -> Value + Send + Sync + 'static {
        let stats = Arc::clone(&self.stats);
        let bound = self.config.upload_bytes();
        let open_bound = self.config.partitioning.max_open();
        let encoder_bound = self
            .config
            .encoder_bytes()
            .0
            .saturating_mul(open_bound.into());
        let layout = self.layout.as_ref().map(|l| l.text().to_owned());
        let url = self.config.url.clone();
        let wal_id = self.naming.wal_id.clone();
        let typed = self.encoding.typed_stats().cloned();
        move || {
            let mut details = json!({
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
                "closes": stats.closes.0.status(),
                "open_objects": get(&stats.open_objects),
                "empty_objects": get(&stats.empty_objects),
                "max_open_objects": open_bound,
                "layout": layout,
            });
            if let (Some(typed), Some(map)) = (&typed, details.as_object_mut()) {
                map.insert("schema".to_owned(), typed.status());
            }
            details
        }
    }

    /// `retries` = the retries of earlier stages + this stage's + the inline ones.
    pub(super) fn count_retries(&self) {
        let total = get(&self.stats.earlier_stage_retries)
            + self.stage.retries()
            + get(&self.stats.inline_retries);
        self.stats.retries.store(total, Ordering::Relaxed);
    }

    pub(super) fn held_bytes(&self) -> u64 {
        get(&self.stats.encoder_bytes) + get(&self.stats.uploading_bytes)
    }
}
