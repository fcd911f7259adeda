//! The open objects: where each starts and ends in the WAL (a boundary an earlier run
//! recorded, rotation by size, age or the WAL it pins, or too many partitions open),
//! their records encoded on a blocking thread, their full parts sent as they come (the
//! first one starts an object's multipart upload, journaled before any part is sent),
//! and their close: the end journaled, then one PUT, or the remaining parts and the
//! completion. Which object a record goes to: the one open at the WAL's end without a
//! layout, the one of its partition with one.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::Notify;

use super::encode::ObjectEncoder;
use super::naming::hour_folders;
use super::shell::{ObjectStoreSink, abandoned, lock};
use super::stats::InFlight;
use super::store::Metadata;
use super::upload::{Op, Upload};
use crate::pipeline::{SinkBatch, SinkError, Unencodable};
use crate::record::Record;
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
    /// Its partition (`""` without a layout).
    pub(super) partition: String,
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
    /// The sink's write count when it last had records.
    written: u64,
    /// Bytes its encoder holds.
    held: u64,
}

/// The records of a batch one object gets.
enum Take {
    /// A run of them.
    Run(std::ops::Range<usize>),
    /// These, in order.
    Each(Vec<usize>),
}

/// Where a record of a partition goes when no object of that partition is open.
enum Place {
    /// Into a stored object (recorded as starting below where the replay began, and
    /// found in the store at recovery): it is there already.
    Stored,
    /// Into the recorded object at `first`, cut again at its recorded end.
    Recorded { first: u64 },
    /// Into a new object.
    New,
}

impl ObjectStoreSink {
    /// Opens the object of `partition` that starts at `first`: the recorded one there
    /// (its key and boundary), else one named now from `folders`.
    fn open_object(&mut self, partition: &str, first: u64, folders: &str) -> Result<(), SinkError> {
        let recorded = self.recorded.get(&first);
        let key = recorded.map_or_else(|| self.naming.key_in(folders, first), |r| r.key.clone());
        let boundary = recorded.and_then(|r| r.last);
        let encoder = ObjectEncoder::new(&self.encoding, self.config.part_size.bytes())
            .map_err(|e| abandoned(&self.name, e))?;
        self.open.insert(
            partition.to_owned(),
            OpenObject {
                first,
                partition: partition.to_owned(),
                key,
                last: None,
                boundary,
                encoder: Some(encoder),
                upload: None,
                parts: 0,
                opened: Instant::now(),
                written: self.writes,
                held: 0,
            },
        );
        self.stats
            .open_objects
            .store(self.open.len() as u64, Ordering::Relaxed);
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

    /// The bytes the open objects' encoders hold, for `/status`.
    fn count_held(&self) {
        let held = self.open.values().map(|o| o.held).sum();
        self.stats.encoder_bytes.store(held, Ordering::Relaxed);
        self.stats
            .open_objects
            .store(self.open.len() as u64, Ordering::Relaxed);
    }

    /// Appends records to open objects, each its `Take` of the batch, on one blocking
    /// thread; then sends the parts that filled.
    async fn encode(
        &mut self,
        batch: &Arc<SinkBatch>,
        takes: Vec<(String, Take)>,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<(), SinkError> {
        if takes.is_empty() {
            return Ok(());
        }
        let mut work = Vec::with_capacity(takes.len());
        for (partition, take) in takes {
            let open = self
                .open
                .get_mut(&partition)
                .expect("records go to an open object");
            let encoder = open.encoder.take().expect("the encoder is in place");
            work.push((partition, take, encoder));
        }
        let batch = Arc::clone(batch);
        let (done, mut new_rejects) = tokio::task::spawn_blocking(move || {
            let mut rejects = Vec::new();
            let mut done = Vec::with_capacity(work.len());
            for (partition, take, mut encoder) in work {
                let mut parts = Vec::new();
                let result = match take {
                    Take::Run(range) => {
                        encoder.append(&batch.records[range], &mut parts, &mut rejects)
                    }
                    Take::Each(indices) => {
                        let records: Vec<Record> =
                            indices.iter().map(|&i| batch.records[i].clone()).collect();
                        encoder.append(&records, &mut parts, &mut rejects)
                    }
                };
                let held = encoder.held();
                done.push((partition, encoder, held, result.map(|()| parts)));
            }
            (done, rejects)
        })
        .await
        .map_err(|_| SinkError::Cancelled)?;
        rejects.append(&mut new_rejects);
        let mut sends = Vec::with_capacity(done.len());
        let mut failure = None;
        for (partition, encoder, held, result) in done {
            let open = self.open.get_mut(&partition).expect("still open");
            open.encoder = Some(encoder);
            open.held = held;
            match result {
                Ok(parts) => sends.push((partition, parts)),
                Err(e) => failure = Some(e),
            }
        }
        self.count_held();
        if let Some(e) = failure {
            return Err(abandoned(&self.name, e));
        }
        for (partition, parts) in sends {
            self.send_parts(&partition, parts).await?;
        }
        Ok(())
    }

    /// Sends full parts of the open object of `partition`, starting its multipart
    /// upload first.
    async fn send_parts(&mut self, partition: &str, parts: Vec<Bytes>) -> Result<(), SinkError> {
        if parts.is_empty() {
            return Ok(());
        }
        let open = self
            .open
            .get(partition)
            .expect("parts belong to an open object");
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
                let (p, k, i) = (partition.to_owned(), key.clone(), id.clone());
                self.blocking_journal(move |j| j.started(first, &p, &k, &i))
                    .await?;
                let entry = self.recorded.entry(first).or_default();
                entry.key = key;
                entry.partition = partition.to_owned();
                entry.upload = Some(id.clone());
                entry.shape = Some(lock(&self.journal).shape().clone());
                let upload = Arc::new(Upload {
                    id,
                    tags: Mutex::new(Vec::new()),
                    landed: Notify::new(),
                });
                self.open.get_mut(partition).expect("still open").upload =
                    Some(Arc::clone(&upload));
                upload
            }
        };
        for body in parts {
            let open = self.open.get_mut(partition).expect("still open");
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

    /// Closes the open object of `partition` at `last`: records its end, then sends it.
    pub(super) async fn close(&mut self, partition: &str, last: u64) -> Result<(), SinkError> {
        let Some(mut open) = self.open.remove(partition) else {
            return Ok(());
        };
        let encoder = open.encoder.take().expect("the encoder is in place");
        // Every record quarantined or filtered (a partition of bad records): recorded,
        // so that a replay ends it at the same place, but not stored.
        let empty = encoder.records() == 0 && open.upload.is_none() && open.boundary.is_none();
        let (footer, first) = (self.footer.get(), open.first);
        let (parts, rest) =
            tokio::task::spawn_blocking(move || encoder.finish(&footer, first, last))
                .await
                .map_err(|_| SinkError::Cancelled)?
                .map_err(|e| abandoned(&self.name, e))?;
        open.held = 0;
        self.count_held();
        let key = open.key.clone();
        let (p, k) = (partition.to_owned(), key.clone());
        self.blocking_journal(move |j| j.closed(first, &p, &k, last))
            .await?;
        let entry = self.recorded.entry(first).or_default();
        entry.key = key.clone();
        entry.partition = partition.to_owned();
        entry.last = Some(last);
        entry.shape = Some(lock(&self.journal).shape().clone());
        if self.layout.is_none() {
            self.next_first = Some(last + 1);
        }
        if empty {
            self.stats.empty_objects.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                "sink {}: the object at {first} ({key}) holds no record: not stored",
                self.name
            );
            return Ok(());
        }
        self.pending.insert(first);
        if open.upload.is_none() && parts.is_empty() {
            let bytes = rest.len() as u64;
            let op = Op::Put {
                key,
                body: rest,
                metadata: self.metadata(first, Some(last)),
                first,
            };
            return self.submit(op, bytes).await;
        }
        // Multipart: the remaining parts, the last one, then the completion.
        self.open.insert(partition.to_owned(), open);
        let mut all = parts;
        if !rest.is_empty() {
            all.push(rest);
        }
        let sent = self.send_parts(partition, all).await;
        let open = self.open.remove(partition).expect("still open");
        sent?;
        let upload = open.upload.expect("send_parts started the upload");
        let op = Op::Complete {
            key,
            upload,
            parts: open.parts,
            first,
        };
        self.submit(op, 0).await
    }

    /// Closes the open objects that rotation says are due: by size or age, and the one
    /// that pins the WAL from the smallest first offset when it pins too much.
    pub(super) async fn rotate_if_due(&mut self) -> Result<(), SinkError> {
        let rotate = self.config.rotate;
        let mut due: Vec<(String, u64, CloseReason)> = Vec::new();
        for (partition, open) in &mut self.open {
            // A recorded object ends where it ended before, whatever the rotation
            // says: it was that size then too. One that has covered nothing yet
            // cannot end.
            let (None, Some(last)) = (open.boundary, open.last) else {
                continue;
            };
            let size = open.encoder.as_mut().map_or(0, ObjectEncoder::size);
            let aged = rotate
                .age
                .is_some_and(|age| open.opened.elapsed() >= age.get());
            if size >= rotate.bytes.bytes() {
                due.push((partition.clone(), last, CloseReason::Bytes));
            } else if aged {
                due.push((partition.clone(), last, CloseReason::Age));
            }
        }
        let pinning = self
            .open
            .values()
            .min_by_key(|o| o.first)
            .filter(|o| o.boundary.is_none() && !due.iter().any(|(p, ..)| *p == o.partition));
        if let Some(open) = pinning
            && let Some(last) = open.last
            && pins_too_much(
                &rotate,
                &self.wal,
                open.first,
                self.read_end.unwrap_or(last + 1).max(last + 1),
            )
        {
            due.push((open.partition.clone(), last, CloseReason::WalShare));
        }
        for (partition, last, reason) in due {
            self.close(&partition, last).await?;
            self.stats.closes.0.count(reason);
        }
        Ok(())
    }

    pub(super) async fn write_batch(
        &mut self,
        batch: &Arc<SinkBatch>,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<(), SinkError> {
        self.writes += 1;
        if self.layout.is_some() {
            return self.write_partitioned(batch, rejects).await;
        }
        let Some(end) = batch.next_offset.checked_sub(1) else {
            return Ok(());
        };
        let n = batch.records.len();
        let mut i = 0;
        loop {
            if self.open.is_empty() {
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
                        self.open_object("", first, &hour_folders(time))?;
                    }
                    Some(p) => self.open_object("", first, &hour_folders(p.time_ms))?,
                    None => {
                        // Nothing of this sink's inputs: the range is passed.
                        self.next_first = Some(end + 1);
                        return Ok(());
                    }
                }
            }
            let open = self.open.get("").expect("opened above");
            let boundary = open.boundary;
            let stop = boundary.map_or(n, |b| {
                i + batch.positions[i..].partition_point(|p| p.offset <= b)
            });
            if stop > i {
                self.encode(batch, vec![(String::new(), Take::Run(i..stop))], rejects)
                    .await?;
            }
            i = stop;
            let open = self.open.get_mut("").expect("still open");
            open.written = self.writes;
            match boundary {
                Some(b) if b <= end => {
                    open.last = Some(b);
                    self.close("", b).await?;
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

    /// Where a record of `partition` at `offset` goes when no object of that partition
    /// is open: the journal's object of that partition that starts last at or before
    /// it, if its range holds the record.
    fn place(&self, partition: &str, offset: u64) -> Place {
        let recorded = self
            .recorded
            .range(..=offset)
            .rev()
            .find(|(_, r)| r.partition == partition);
        match recorded {
            Some((&first, r)) if r.last.is_some_and(|last| offset <= last) => {
                if first >= self.replay_from {
                    Place::Recorded { first }
                } else if self.stored.contains(&first) {
                    Place::Stored
                } else {
                    // Closed but never stored, and its first records are gone from
                    // the WAL: what is left of it goes to a new object.
                    Place::New
                }
            }
            _ => Place::New,
        }
    }

    /// With a layout: each record to the open object of its partition.
    async fn write_partitioned(
        &mut self,
        batch: &Arc<SinkBatch>,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<(), SinkError> {
        let Some(end) = batch.next_offset.checked_sub(1) else {
            return Ok(());
        };
        let layout = self.layout.clone().expect("a layout");
        let mut takes: Vec<(String, Take)> = Vec::new();
        let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for (i, (record, position)) in batch.records.iter().zip(&batch.positions).enumerate() {
            let offset = position.offset;
            let partition = layout.render(record, position.time_ms, self.event_time.as_ref());
            // Past the recorded end of its partition's object: that object is complete.
            if let Some(boundary) = self.open.get(&partition).and_then(|o| o.boundary)
                && offset > boundary
            {
                self.flush(batch, &mut takes, &mut index, rejects).await?;
                self.close(&partition, boundary).await?;
                self.stats.closes.0.count(CloseReason::Recorded);
            }
            if !self.open.contains_key(&partition) {
                let first = match self.place(&partition, offset) {
                    Place::Stored => continue,
                    Place::Recorded { first } => first,
                    Place::New => offset,
                };
                if self.open.len() >= self.max_open {
                    self.flush(batch, &mut takes, &mut index, rejects).await?;
                    self.close_least_recent().await?;
                }
                self.open_object(&partition, first, &partition)?;
            }
            let open = self.open.get_mut(&partition).expect("opened above");
            open.last = Some(offset);
            open.written = self.writes;
            match index.get(&partition) {
                Some(&t) => match &mut takes[t].1 {
                    Take::Each(indices) => indices.push(i),
                    Take::Run(_) => unreachable!("partitions take records one by one"),
                },
                None => {
                    index.insert(partition.clone(), takes.len());
                    takes.push((partition, Take::Each(vec![i])));
                }
            }
        }
        self.flush(batch, &mut takes, &mut index, rejects).await?;
        // Recorded objects whose end the batch reached are complete.
        let ended: Vec<(String, u64)> = self
            .open
            .iter()
            .filter_map(|(p, o)| o.boundary.filter(|&b| b <= end).map(|b| (p.clone(), b)))
            .collect();
        for (partition, boundary) in ended {
            self.close(&partition, boundary).await?;
            self.stats.closes.0.count(CloseReason::Recorded);
        }
        self.read_end = Some(batch.next_offset);
        self.rotate_if_due().await
    }

    /// Encodes the records gathered so far (before an object closes mid-batch).
    async fn flush(
        &mut self,
        batch: &Arc<SinkBatch>,
        takes: &mut Vec<(String, Take)>,
        index: &mut std::collections::HashMap<String, usize>,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<(), SinkError> {
        index.clear();
        self.encode(batch, std::mem::take(takes), rejects).await
    }

    /// Closes the least recently written open object that may end early (not one cut
    /// again at a recorded end), to make room for another partition; counted.
    async fn close_least_recent(&mut self) -> Result<(), SinkError> {
        let victim = self
            .open
            .values()
            .filter(|o| o.boundary.is_none())
            .min_by_key(|o| (o.written, o.first))
            .and_then(|o| o.last.map(|last| (o.partition.clone(), last)));
        match victim {
            Some((partition, last)) => {
                self.close(&partition, last).await?;
                self.stats.closes.0.count(CloseReason::Partitions);
            }
            // Only objects an earlier run recorded are open: as many were open then.
            None => tracing::debug!(
                "sink {}: {} recorded objects open, more than max_open_partitions, while they are written again",
                self.name,
                self.open.len()
            ),
        }
        Ok(())
    }
}
