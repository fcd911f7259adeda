//! The sink driver: one per sink, two tasks joined by a bounded channel.
//!
//! ```text
//! WAL ──read(cursor)──▶ reader task ──channel (channel_batches)──▶ writer task ──▶ Sink
//!          ▲                                                           │
//!          └──────────── commit(offset) ◀── acks (watch) ◀─────────────┘
//! ```
//!
//! - The **reader task** owns the WAL [`Reader`]: it reads up to `read_batch_records`
//!   records and `read_batch_bytes` bytes, skips records of sources not in the sink's
//!   `inputs` (they still advance the cursor), decodes the rest and sends them on. The
//!   channel holds `channel_batches` (2) batches, so it holds at most that many times
//!   the read size. It also commits the cursor to whatever the writer acknowledged.
//! - The **writer task** hands each batch to the [`Sink`]; a failure is retried with
//!   capped exponential backoff (`retry = { initial, max }`) and the sink shows
//!   `failed` meanwhile. It acknowledges the offset the sink reports durable.
//!
//! A slow or failing sink only stops its own cursor. Whether that holds back the WAL is
//! decided by the WAL's cursor policy (`required`, `max_lag`), never by the driver.
//!
//! Shutdown: [`Phase::Drain`] reads up to the given offset (the durable end once the
//! sources have stopped), writes it, finishes the sink and commits; [`Phase::Stop`]
//! stops reading and writing at once and commits what was acknowledged.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};
use weir_wal::{ReadBatch, ReadLimits, Reader};

use super::stats::{SinkStats, State, add};
use crate::record::{Record, peek_source};
use crate::sinks::{Sink, SinkBatch, Unencodable};

/// What the driver should be doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Follow the WAL.
    Run,
    /// Read up to this offset, store it, then finish.
    Drain(u64),
    /// Stop now; commit what is stored.
    Stop,
}

/// How a driver is set up.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// The sink's name (for logs).
    pub name: String,
    /// The sources whose records it takes.
    pub inputs: Vec<String>,
    /// Read bounds.
    pub limits: ReadLimits,
    /// Batches the WAL → sink channel holds.
    pub channel_batches: usize,
    /// First retry delay.
    pub retry_initial: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
}

/// Runs a sink driver until it has drained or been stopped.
///
/// # Cancel safety
///
/// Not meant to be cancelled: drive it to completion through `phase`. If it is
/// dropped, nothing acknowledged is lost (the cursor only lags).
pub async fn run(
    config: DriverConfig,
    reader: Reader,
    sink: Sink,
    stats: Arc<SinkStats>,
    phase: watch::Receiver<Phase>,
) {
    let (tx, rx) = mpsc::channel(config.channel_batches.max(1));
    let (ack_tx, ack_rx) = watch::channel(reader.committed());
    let writer = tokio::spawn(write_loop(
        config.clone(),
        sink,
        rx,
        ack_tx,
        Arc::clone(&stats),
        phase.clone(),
    ));
    read_loop(config, reader, tx, ack_rx, Arc::clone(&stats), phase).await;
    let _ = writer.await;
    stats.state.set(State::Stopped);
}

async fn read_loop(
    config: DriverConfig,
    mut reader: Reader,
    tx: mpsc::Sender<Arc<SinkBatch>>,
    mut acks: watch::Receiver<u64>,
    stats: Arc<SinkStats>,
    mut phase: watch::Receiver<Phase>,
) {
    let inputs: Vec<Arc<str>> = config
        .inputs
        .iter()
        .map(|s| Arc::from(s.as_str()))
        .collect();
    let mut tx = Some(tx);
    loop {
        let current = if phase.has_changed().is_err() {
            Phase::Stop
        } else {
            *phase.borrow_and_update()
        };
        let done_reading = match current {
            Phase::Run => false,
            Phase::Drain(until) => reader.position() >= until,
            Phase::Stop => true,
        };
        if done_reading {
            // Closing the channel tells the writer to finish.
            tx = None;
        }
        tokio::select! {
            biased;
            changed = acks.changed() => {
                if changed.is_err() {
                    break; // the writer is done
                }
                let offset = *acks.borrow_and_update();
                commit(&mut reader, offset, &config.name).await;
            }
            _ = phase.changed(), if current != Phase::Stop => {}
            read = read_next(&mut reader, tx.as_ref(), config.limits), if tx.is_some() => {
                match read {
                    Ok((permit, batch)) => {
                        let batch = decode(batch, &inputs, &stats, &config.name);
                        stats.channel.push(batch.bytes);
                        permit.send(Arc::new(batch));
                    }
                    Err(message) => {
                        stats.state.set(State::Failed(message));
                        tokio::time::sleep(config.retry_max.min(Duration::from_secs(1))).await;
                    }
                }
            }
        }
    }
    let offset = *acks.borrow();
    commit(&mut reader, offset, &config.name).await;
}

/// Waits for room in the channel, then reads (both cancel-safe).
async fn read_next<'a>(
    reader: &mut Reader,
    tx: Option<&'a mpsc::Sender<Arc<SinkBatch>>>,
    limits: ReadLimits,
) -> Result<(mpsc::Permit<'a, Arc<SinkBatch>>, ReadBatch), String> {
    let Some(tx) = tx else {
        return std::future::pending().await;
    };
    let permit = match tx.reserve().await {
        Ok(p) => p,
        Err(_) => return std::future::pending().await,
    };
    let batch = reader.read(limits).await.map_err(|e| e.to_string())?;
    Ok((permit, batch))
}

async fn commit(reader: &mut Reader, offset: u64, name: &str) {
    if offset <= reader.committed() {
        return;
    }
    if let Err(e) = reader.commit(offset).await {
        eprintln!("weir: sink {name}: saving its cursor at {offset} failed: {e}");
    }
}

/// Keeps the records of the sink's inputs, decoded; counts the gap.
fn decode(batch: ReadBatch, inputs: &[Arc<str>], stats: &SinkStats, name: &str) -> SinkBatch {
    if let Some(gap) = batch.gap {
        add(&stats.gaps, 1);
        add(&stats.gap_records, gap.records());
    }
    let next_offset = batch.next_offset();
    let mut records = Vec::with_capacity(batch.records.len());
    let mut bytes = 0;
    for wal_record in batch.records {
        match peek_source(&wal_record.payload) {
            Ok(source) if inputs.iter().any(|i| **i == *source) => {}
            Ok(_) => continue,
            Err(e) => {
                add(&stats.unencodable, 1);
                eprintln!(
                    "weir: sink {name}: WAL record {} skipped: {e}",
                    wal_record.offset
                );
                continue;
            }
        }
        match Record::decode(Bytes::from(wal_record.payload)) {
            Ok(record) => {
                bytes += record.payload.len() as u64;
                records.push(record);
            }
            Err(e) => {
                add(&stats.unencodable, 1);
                eprintln!(
                    "weir: sink {name}: WAL record {} skipped: {e}",
                    wal_record.offset
                );
            }
        }
    }
    SinkBatch {
        records,
        next_offset,
        bytes,
    }
}

async fn write_loop(
    config: DriverConfig,
    mut sink: Sink,
    mut rx: mpsc::Receiver<Arc<SinkBatch>>,
    acks: watch::Sender<u64>,
    stats: Arc<SinkStats>,
    mut phase: watch::Receiver<Phase>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut rejects = Vec::new();
    let ack = |offset: Option<u64>| {
        if let Some(offset) = offset {
            acks.send_if_modified(|current| {
                let newer = offset > *current;
                if newer {
                    *current = offset;
                }
                newer
            });
        }
    };
    loop {
        tokio::select! {
            biased;
            _ = stopped(&mut phase) => return,
            batch = rx.recv() => {
                let Some(batch) = batch else { break };
                stats.channel.pop();
                let Some(durable) = write_with_retry(&config, &mut sink, &batch, &mut rejects, &stats, &mut phase).await else {
                    return;
                };
                quarantine(&config.name, &mut rejects, &stats);
                ack(durable);
            }
            _ = tick.tick() => {
                match sink.tick().await {
                    Ok(durable) => ack(durable),
                    Err(e) => stats.state.set(State::Failed(e.to_string())),
                }
            }
        }
    }
    match sink.finish().await {
        Ok(durable) => ack(durable),
        Err(e) => eprintln!("weir: sink {}: closing failed: {e}", config.name),
    }
}

/// Writes until it succeeds (returning the durable offset) or the driver is stopped.
async fn write_with_retry(
    config: &DriverConfig,
    sink: &mut Sink,
    batch: &Arc<SinkBatch>,
    rejects: &mut Vec<Unencodable>,
    stats: &SinkStats,
    phase: &mut watch::Receiver<Phase>,
) -> Option<Option<u64>> {
    let mut delay = config.retry_initial;
    loop {
        let result = tokio::select! {
            biased;
            _ = stopped(phase) => return None,
            result = sink.write(batch, rejects) => result,
        };
        match result {
            Ok(written) => {
                stats.state.set(State::Running);
                add(
                    &stats.records,
                    batch.records.len() as u64 - written.unencodable,
                );
                add(&stats.batches, 1);
                return Some(written.durable_through);
            }
            Err(e) => {
                rejects.clear();
                add(&stats.retries, 1);
                eprintln!(
                    "weir: sink {}: write failed, retrying in {delay:?}: {e}",
                    config.name
                );
                stats.state.set(State::Failed(e.to_string()));
                tokio::select! {
                    biased;
                    _ = stopped(phase) => return None,
                    () = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(config.retry_max);
            }
        }
    }
}

/// Records a sink could not encode: counted and reported (the quarantine directory is
/// not wired yet; see the module docs of `runtime`).
fn quarantine(name: &str, rejects: &mut Vec<Unencodable>, stats: &SinkStats) {
    if let Some(first) = rejects.first() {
        add(&stats.unencodable, rejects.len() as u64);
        eprintln!(
            "weir: sink {name}: {} records could not be encoded and were skipped (first: key {:?}: {})",
            rejects.len(),
            first.record.key,
            first.reason
        );
    }
    rejects.clear();
}

/// Resolves once the phase is [`Phase::Stop`].
/// A dropped phase sender counts as [`Phase::Stop`].
async fn stopped(phase: &mut watch::Receiver<Phase>) {
    let _ = phase.wait_for(|p| *p == Phase::Stop).await;
}
