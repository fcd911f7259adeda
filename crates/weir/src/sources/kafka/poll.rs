//! The `kafka` source's poll loop: polls librdkafka at least every [`POLL_TICK`],
//! paused or not, encodes each record into the unit being built (counting gaps), hands
//! units to the appender, starts the commits of durable offsets and the reads of
//! committed offsets and lag, and pauses or resumes the assignment on the watermarks.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use rdkafka::TopicPartitionList;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{BorrowedMessage, Headers, Message};
use tokio::sync::{mpsc, watch};
use weir_flow::Timestamp;
use weir_flow::watermark::Transition;
use weir_wal::Batch;

use super::client::{Context, offsets_list};
use super::core::{Gap, Partition, UnitTag};
use super::offsets::{CommitOutcome, apply_commit, read_lag, start_read_committed};
use super::shell::{Shared, UNIT_BYTES, UNIT_RECORDS, Unit, now};
use crate::pipeline::ingest::Ingest;
use crate::quarantine::Rejected;

/// The longest the poll loop waits for a record before it looks at the rest again
/// (commits, watermarks): it polls librdkafka at least this often, paused or not.
const POLL_TICK: Duration = Duration::from_millis(50);
/// How often durable offsets are committed, at most.
const COMMIT_EVERY: Duration = Duration::from_millis(200);
/// How often the partitions' high watermarks are read for the lag.
const LAG_EVERY: Duration = Duration::from_secs(5);

/// Polls librdkafka without ever stopping (paused or not), encodes what it fetches
/// into units, hands them to the appender, commits durable offsets, and pauses or
/// resumes the assignment on the watermarks.
pub(super) async fn poll_loop(
    name: &Arc<str>,
    consumer: &Arc<StreamConsumer<Context>>,
    ingest: &Ingest,
    shared: &Arc<Shared>,
    tx: mpsc::Sender<Unit>,
    mut stop: watch::Receiver<bool>,
) {
    let max_batch_bytes = ingest.max_batch_bytes();
    let mut ready: VecDeque<Unit> = VecDeque::new();
    let mut current = Unit {
        tag: UnitTag::default(),
        batches: Vec::new(),
        oversize: Vec::new(),
    };
    let mut batch = Batch::new();
    let mut scratch = Scratch::default();
    let mut last_commit = Instant::now();
    let mut last_lag = Instant::now();
    let mut committing: Option<tokio::task::JoinHandle<CommitOutcome>> = None;
    let mut lag: Option<tokio::task::JoinHandle<()>> = None;
    let mut committed_read: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        // Hands what is ready to the appender without waiting for it.
        let idle = tx.capacity() > 0;
        if !current.tag.is_empty()
            && (idle
                || current.tag.records as usize >= UNIT_RECORDS
                || current.tag.bytes >= UNIT_BYTES)
        {
            if !batch.is_empty() {
                current
                    .batches
                    .push(std::mem::replace(&mut batch, Batch::new()));
            }
            ready.push_back(std::mem::replace(
                &mut current,
                Unit {
                    tag: UnitTag::default(),
                    batches: Vec::new(),
                    oversize: Vec::new(),
                },
            ));
        }
        while let Some(unit) = ready.pop_front() {
            match tx.try_send(unit) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(unit)) => {
                    ready.push_front(unit);
                    break;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return,
            }
        }
        // Commits run one at a time on a blocking thread (synchronous, so the answer
        // is known here), while the poll loop goes on.
        if committing
            .as_ref()
            .is_some_and(tokio::task::JoinHandle::is_finished)
            && let Some(handle) = committing.take()
        {
            apply_commit(shared, handle.await);
        }
        if committing.is_none() && last_commit.elapsed() >= COMMIT_EVERY {
            last_commit = Instant::now();
            let due = shared.core().commits_due();
            if !due.is_empty() {
                let c = Arc::clone(consumer);
                committing = Some(tokio::task::spawn_blocking(move || {
                    let result = c.commit(&offsets_list(&due), CommitMode::Sync);
                    (due, result)
                }));
            }
        }
        start_read_committed(name, consumer, shared, &mut committed_read);
        // The lag is read in the background: the poll loop never waits for it.
        if last_lag.elapsed() >= LAG_EVERY
            && lag
                .as_ref()
                .is_none_or(tokio::task::JoinHandle::is_finished)
        {
            last_lag = Instant::now();
            lag = Some(tokio::spawn(read_lag(
                Arc::clone(consumer),
                Arc::clone(shared),
            )));
        }
        watermarks(name, consumer, shared);
        // Polls: one record (or the tick), then whatever is already there.
        let first = tokio::select! {
            biased;
            () = crate::pipeline::stopped(&mut stop) => break,
            () = shared.durable.notified() => continue,
            m = tokio::time::timeout(POLL_TICK, consumer.recv()) => m,
        };
        let Ok(first) = first else { continue };
        // One clock read for what this poll takes (it is there already).
        let fetched_at = now();
        let mut next = Some(first);
        let mut taken = 0usize;
        while let Some(m) = next.take() {
            match m {
                Ok(m) => {
                    take(
                        name,
                        shared,
                        &m,
                        &mut current,
                        &mut batch,
                        &mut scratch,
                        max_batch_bytes,
                        fetched_at,
                    );
                }
                Err(e) => {
                    let message = format!("poll: {e}");
                    tracing::warn!(source = %name, "kafka: {message}");
                    shared.error(message);
                }
            }
            taken += 1;
            if taken < UNIT_RECORDS && current.tag.bytes < UNIT_BYTES {
                next = consumer.recv().now_or_never();
            }
        }
    }
    if let Some(handle) = committing.take() {
        apply_commit(shared, handle.await);
    }
    // At shutdown: hand over everything fetched (the appender is still taking).
    if !current.tag.is_empty() {
        if !batch.is_empty() {
            current.batches.push(batch);
        }
        ready.push_back(current);
    }
    for unit in ready {
        if tx.send(unit).await.is_err() {
            break;
        }
    }
}

/// What the poll loop reuses from record to record: the encoded record, and the key of
/// the last record's partition (a poll's records mostly share one, so their lookups in
/// the core make no new `String`).
#[derive(Default)]
struct Scratch {
    wire: Vec<u8>,
    partition: Partition,
}

impl Scratch {
    /// The partition of `m`, made anew only when it differs from the last one's.
    fn partition_of(&mut self, m: &BorrowedMessage<'_>) -> &Partition {
        if self.partition.1 != m.partition() || self.partition.0 != m.topic() {
            self.partition = (m.topic().to_owned(), m.partition());
        }
        &self.partition
    }
}

/// Encodes one record, fetched at `at`, into the unit being built.
#[allow(
    clippy::too_many_arguments,
    reason = "the poll loop's buffers, passed down"
)]
fn take(
    name: &str,
    shared: &Shared,
    m: &BorrowedMessage<'_>,
    unit: &mut Unit,
    batch: &mut Batch,
    scratch: &mut Scratch,
    max_batch_bytes: u64,
    at: Timestamp,
) {
    let payload = m.payload().unwrap_or_default();
    encode(name, m, payload, &mut scratch.wire);
    let bytes = scratch.wire.len() as u64;
    let partition = scratch.partition_of(m);
    let Some((fetched, gap)) = shared.core().fetched(partition, m.offset(), bytes) else {
        return;
    };
    if let Some(g) = gap {
        warn_gap(name, &g);
    }
    unit.tag.add(&fetched, bytes, at);
    let framed = weir_wal::format::FRAME_HEADER_LEN + bytes;
    if framed > max_batch_bytes {
        unit.oversize.push(Rejected {
            reason: format!(
                "kafka record {}/{} offset {}: {framed} bytes, above the WAL's batch limit ({max_batch_bytes}); lower fetch_max_bytes or raise wal.max_pending_bytes",
                partition.0, partition.1, m.offset()
            ),
            payload: bytes::Bytes::copy_from_slice(payload),
        });
        return;
    }
    if !batch.is_empty() && batch.encoded_len() + framed > max_batch_bytes {
        unit.batches.push(std::mem::replace(batch, Batch::new()));
    }
    if let Err(e) = batch.push(&scratch.wire) {
        shared.error(format!("a record does not fit the WAL: {e}"));
    }
}

/// Says that a partition's offsets `g.from..g.to` were never read.
pub(super) fn warn_gap(name: &str, g: &Gap) {
    tracing::warn!(
        source = name,
        "kafka: gap in {}/{}: offsets {}..{} ({} records) were not read (deleted by retention, out of range, or skipped by the broker)",
        g.topic,
        g.partition,
        g.from,
        g.to,
        g.to - g.from
    );
}

/// The record of one Kafka record: key = the Kafka key (or the topic), `ts` = its
/// timestamp, attributes `kafka.topic`, `kafka.partition`, `kafka.offset` and each
/// header as `kafka.header.NAME`.
fn encode(name: &str, m: &BorrowedMessage<'_>, payload: &[u8], wire: &mut Vec<u8>) {
    let key = match m.key() {
        Some(k) => String::from_utf8_lossy(k),
        None => std::borrow::Cow::Borrowed(m.topic()),
    };
    let ts = m
        .timestamp()
        .to_millis()
        .unwrap_or_else(crate::record::now_ms);
    let (mut partition, mut offset) = (itoa::Buffer::new(), itoa::Buffer::new());
    let (partition, offset) = (partition.format(m.partition()), offset.format(m.offset()));
    let mut headers: Vec<(String, String)> = Vec::new();
    if let Some(h) = m.headers() {
        for header in h.iter() {
            let value = header
                .value
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            headers.push((format!("kafka.header.{}", header.key), value.into_owned()));
        }
    }
    let fixed = [
        ("kafka.offset", offset),
        ("kafka.partition", partition),
        ("kafka.topic", m.topic()),
    ];
    let attributes = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .chain(fixed.iter().copied());
    wire.clear();
    crate::record::encode_parts(wire, name, &key, ts, attributes, payload);
}

/// Pauses or resumes the assignment when the bytes held cross a watermark.
fn watermarks(name: &str, consumer: &StreamConsumer<Context>, shared: &Shared) {
    let (transition, assignment, held) = {
        let mut core = shared.core();
        let t = core.observe(now());
        (t, core.assignment(), core.held_bytes())
    };
    let Some(t) = transition else { return };
    let tpl = {
        let mut tpl = TopicPartitionList::new();
        for (topic, p) in &assignment {
            tpl.add_partition(topic, *p);
        }
        tpl
    };
    let result = match t {
        Transition::Pause => consumer.pause(&tpl),
        Transition::Resume => consumer.resume(&tpl),
    };
    tracing::debug!(
        source = name,
        "kafka: {t:?} {} partitions at {held} bytes held",
        assignment.len()
    );
    if let Err(e) = result {
        shared.error(format!("{t:?} failed: {e}"));
    }
}
