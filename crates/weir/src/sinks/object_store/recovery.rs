//! The sink's journal at run time: appends on a blocking thread (they fsync), recovery
//! of the uploads an earlier run recorded (aborted once the parts it had sent have
//! landed), and compaction of what the cursor has passed.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::journal::Journal;
use super::shell::{ObjectStoreSink, abandoned, lock};
use crate::pipeline::SinkError;

/// How long recovery waits before it aborts the uploads an earlier run recorded, so
/// that parts that run had sent whole land first (and are aborted with the rest).
const UPLOAD_SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

impl ObjectStoreSink {
    /// Runs `f` on the journal on a blocking thread (its appends fsync).
    pub(super) fn blocking_journal<T: Send + 'static>(
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
    pub(super) async fn recover(&mut self, committed: u64) -> Result<(), SinkError> {
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
    pub(super) async fn compact_journal(&mut self, committed: u64) -> Result<(), SinkError> {
        let mut recorded = self.recorded.clone();
        self.recorded = self
            .blocking_journal(move |j| {
                j.compact(&mut recorded, committed)?;
                Ok(recorded)
            })
            .await?;
        Ok(())
    }
}
