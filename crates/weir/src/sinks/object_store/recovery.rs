//! The sink's journal at run time: appends on a blocking thread (they fsync), recovery
//! of the uploads an earlier run recorded and the cursor has not passed (aborted once
//! the parts it had sent have landed), and compaction of what the cursor has passed.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::journal::Journal;
use super::shape::Shape;
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

    /// Drops what the cursor has passed, then aborts every upload the journal still
    /// records (left by a crash or a failed run); an unclosed object recorded under
    /// another config is forgotten, to be named by this one.
    pub(super) async fn recover(&mut self, committed: u64) -> Result<(), SinkError> {
        // An upload of an object the cursor has passed completed: nothing to abort.
        self.compact_journal(committed).await?;
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
            self.abort_recorded(&key, &id).await?;
            if let Some(r) = self.recorded.get_mut(&first) {
                r.upload = None;
            }
        }
        let shape = lock(&self.journal).shape().clone();
        self.recorded.retain(|first, r| {
            let renamed = Shape::unclosed_renamed(r, &shape);
            if renamed {
                tracing::info!(
                    "sink {}: the unfinished object at offset {first} ({}) was started under another config; it is written again as this one names it",
                    self.name,
                    r.key
                );
            }
            !renamed
        });
        self.compact_journal(committed).await?;
        self.find_stored(committed).await?;
        self.needs_recovery = false;
        Ok(())
    }

    /// With a layout: which recorded objects that start before `from` (where the replay
    /// starts) and end at or after it the store holds. Their records from `from` on are
    /// in them already, and the replay skips those. One the store does not hold was
    /// closed but never stored: the replay starts past its first offset only when the
    /// WAL no longer has its earlier records (evicted, counted by the WAL), and its
    /// records from `from` on go to new objects instead.
    async fn find_stored(&mut self, from: u64) -> Result<(), SinkError> {
        self.stored.clear();
        if self.layout.is_none() {
            return Ok(());
        }
        let straddling: Vec<(u64, String)> = self
            .recorded
            .range(..from)
            .filter(|(_, r)| r.last.is_some_and(|last| last >= from))
            .map(|(&first, r)| (first, r.key.clone()))
            .collect();
        for (first, key) in straddling {
            let store = self.store.clone();
            let held = self
                .with_retries("HeadObject", || {
                    let (store, key) = (store.clone(), key.clone());
                    async move { store.exists(&key).await }
                })
                .await
                .map_err(|e| {
                    abandoned(
                        &self.name,
                        format!("asking the store for a recorded object: {e}"),
                    )
                })?;
            if held {
                self.stored.insert(first);
            } else {
                tracing::warn!(
                    "sink {}: the object at offset {first} ({key}) was recorded as closed but is not in the store; its records from offset {from} on are written again in new objects (the WAL no longer holds the earlier ones)",
                    self.name
                );
            }
        }
        Ok(())
    }

    /// Aborts the recorded upload `id` of `key`. One the store no longer knows
    /// completed (or was aborted before): S3 answers NoSuchUpload, and some stores
    /// (s3s-fs) refuse instead (403); its object in place tells the two apart from an
    /// upload that could not be aborted.
    async fn abort_recorded(&mut self, key: &str, id: &str) -> Result<(), SinkError> {
        let store = self.store.clone();
        let aborted = self
            .with_retries("AbortMultipartUpload", || {
                let (store, key, id) = (store.clone(), key.to_owned(), id.to_owned());
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
            Ok(false) => tracing::debug!(
                "sink {}: the recorded upload {id} of {key} had completed or was aborted before",
                self.name
            ),
            Err(e) if e.permanent => {
                let stored = self.store.exists(key).await.unwrap_or(false);
                if stored {
                    tracing::debug!(
                        "sink {}: the recorded upload {id} of {key} had completed ({e}); the replay writes the object again under the same key",
                        self.name
                    );
                } else {
                    // The replay overwrites the object under the same key either way,
                    // so nothing is lost; at worst the upload's parts stay until the
                    // bucket's lifecycle rule removes them.
                    self.stats
                        .unabortable_uploads
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        "sink {}: could not abort the recorded upload {id} of {key}: {e}; if it never completed, its parts stay until a lifecycle rule for unfinished multipart uploads removes them",
                        self.name
                    );
                }
            }
            Err(e) => {
                return Err(abandoned(
                    &self.name,
                    format!("aborting a recorded upload: {e}"),
                ));
            }
        }
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
