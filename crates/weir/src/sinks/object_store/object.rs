//! The open object: where it starts and ends in the WAL (a boundary an earlier run
//! recorded, or rotation by size, age or the WAL it pins), its records encoded on a
//! blocking thread, its full parts sent as they come (the first one starts its multipart
//! upload, journaled before any part is sent), and its close: its end journaled, then
//! one PUT, or its remaining parts and the completion.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::Notify;

use super::encode::ObjectEncoder;
use super::shell::{Mark, ObjectStoreSink, abandoned, lock};
use super::stats::InFlight;
use super::store::Metadata;
use super::upload::{Op, Upload};
use crate::pipeline::{SinkBatch, SinkError, Unencodable};
use crate::sinks::rotate::{CloseReason, pins_too_much};

const KEY_FIRST_OFFSET_META: &str = "weir-first-offset";
const KEY_LAST_OFFSET_META: &str = "weir-last-offset";
const KEY_CONFIG_HASH_META: &str = "weir-config-hash";
const KEY_ON_FULL_META: &str = "weir-on-full";
const KEY_WAL_ID_META: &str = "weir-wal-id";

/// The object being written.
#[derive(Debug)]
pub(super) struct OpenObject {
    pub(super) first: u64,
    pub(super) key: String,
    /// Covered through this offset so far (none yet when just opened).
    pub(super) last: Option<u64>,
    /// Where a recorded object must end.
    pub(super) boundary: Option<u64>,
    encoder: Option<ObjectEncoder>,
    upload: Option<Arc<Upload>>,
    /// Parts submitted.
    parts: usize,
    opened: Instant,
}

impl ObjectStoreSink {
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
        let footer = self.footer.get();
        let mut metadata: Metadata = vec![
            (KEY_FIRST_OFFSET_META, first.to_string()),
            (KEY_CONFIG_HASH_META, footer.config_hash),
            (KEY_ON_FULL_META, footer.on_full.as_str().to_owned()),
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
                // The upload is in flight from its CreateMultipartUpload on.
                let _creating = InFlight::new(&self.stats);
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
                entry.shape = Some(lock(&self.journal).shape().clone());
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
    pub(super) async fn close(&mut self, last: u64) -> Result<(), SinkError> {
        let Some(mut open) = self.open.take() else {
            return Ok(());
        };
        let encoder = open.encoder.take().expect("the encoder is in place");
        let (footer, first) = (self.footer.get(), open.first);
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
        entry.shape = Some(lock(&self.journal).shape().clone());
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
    pub(super) async fn rotate_if_due(&mut self) -> Result<(), SinkError> {
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
        let reason = if size >= rotate.bytes.bytes() {
            Some(CloseReason::Bytes)
        } else if aged {
            Some(CloseReason::Age)
        } else if open
            .last
            .is_some_and(|last| pins_too_much(&rotate, &self.wal, open.first, last + 1))
        {
            Some(CloseReason::WalShare)
        } else {
            None
        };
        // An object that has covered nothing yet cannot end.
        if let (Some(reason), Some(last)) = (reason, open.last) {
            self.close(last).await?;
            self.stats.closes.0.count(reason);
        }
        Ok(())
    }

    pub(super) async fn write_batch(
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
                    self.stats.closes.0.count(CloseReason::Recorded);
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
}
