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
//!   `inputs` and those its `where` filter does not pass ([`super::filter`], counted;
//!   both still advance the cursor), decodes the rest (or, for a sink that
//!   [takes the WAL form](Sink::takes_wire), checks their lengths and keeps their
//!   bytes) and sends them on. The channel holds `channel_batches` (2) batches, so it
//!   holds at most that many times the read size. It also commits the cursor to whatever the writer acknowledged,
//!   at most once per [`COMMIT_INTERVAL`] while running (a commit is two fsyncs, the
//!   cursor file's and its directory's) and always at the end.
//! - The **writer task** hands each batch to the [`Sink`]; a failure is retried with
//!   capped exponential backoff (`retry = { initial, max }`) and the sink shows
//!   `failed` meanwhile. It acknowledges the offset the sink reports durable.
//!
//! A slow or failing sink only stops its own cursor. Whether that holds back the WAL is
//! decided by the WAL's cursor policy (`required`, `max_lag`), never by the driver.
//!
//! Records the sink cannot encode go to the [`Quarantine`] with the reason, counted.
//!
//! A sink that lost accepted records on a failure (the Parquet writer abandons its
//! open file) makes [`run`] return [`Outcome::Rewind`]: the caller waits the retry
//! delay and runs the driver again with a new reader, which starts at the committed
//! cursor, so nothing is skipped.
//!
//! Shutdown: [`Phase::Drain`] reads up to the given offset (the durable end once the
//! sources have stopped), writes it, finishes the sink and commits; [`Phase::Stop`]
//! stops reading and writing at once and commits what was acknowledged.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use tokio::sync::{mpsc, watch};
use weir_wal::{ReadBatch, ReadLimits, Reader};

use weir_wal::Wal;

use super::filter::{Applied, SinkFilter};
use super::sink::{Position, Sink, SinkBatch, Unencodable, WireRecord};
use super::stats::{SinkStats, add};
use crate::quarantine::{Quarantine, QuarantineError, Rejected};
use crate::record::{Record, RecordRef, peek_source};
use crate::telemetry::State;

/// The shortest time between two cursor commits while the driver runs. Each commit
/// fsyncs the cursor file and its directory; committing after every read batch would
/// cost two fsyncs per batch, competing with the WAL's own. Deferring only delays
/// retention and, after a crash, re-delivers up to this much more (the cursor still
/// never passes what the sink stored); drain and stop commit at once.
pub const COMMIT_INTERVAL: Duration = Duration::from_millis(100);

/// How a driver run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Drained or stopped: the sink is finished.
    Finished,
    /// The sink lost uncommitted records: run again from the committed cursor.
    Rewind,
}

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
    /// Its `where` filter, if it has one.
    pub filter: Option<SinkFilter>,
}

/// Runs a sink driver until it has drained or been stopped.
///
/// # Cancel safety
///
/// Not meant to be cancelled: drive it to completion through `phase`. If it is
/// dropped, nothing acknowledged is lost (the cursor only lags).
pub async fn run<S: Sink>(
    config: DriverConfig,
    reader: Reader,
    mut sink: S,
    stats: Arc<SinkStats>,
    phase: watch::Receiver<Phase>,
    quarantine: Quarantine,
) -> (S, Outcome) {
    sink.resume_at(reader.position());
    let wire = sink.takes_wire();
    stats.channel.clear();
    set_running(&sink, &stats);
    let (tx, rx) = mpsc::channel(config.channel_batches.max(1));
    let (ack_tx, ack_rx) = watch::channel(reader.committed());
    let mut writer = tokio::spawn(write_loop(
        config.clone(),
        sink,
        rx,
        ack_tx,
        Arc::clone(&stats),
        phase.clone(),
        quarantine,
    ));
    read_loop(config, reader, tx, ack_rx, Arc::clone(&stats), phase, wire).await;
    let (sink, outcome) = match (&mut writer).await {
        Ok(done) => done,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    };
    if outcome == Outcome::Finished {
        stats.component.set_state(State::Stopped);
    }
    (sink, outcome)
}

async fn read_loop(
    config: DriverConfig,
    mut reader: Reader,
    tx: mpsc::Sender<Arc<SinkBatch>>,
    mut acks: watch::Receiver<u64>,
    stats: Arc<SinkStats>,
    mut phase: watch::Receiver<Phase>,
    wire: bool,
) {
    let inputs: Vec<Arc<str>> = config
        .inputs
        .iter()
        .map(|s| Arc::from(s.as_str()))
        .collect();
    let mut filter = config.filter.clone().map(Applied::new);
    let mut tx = Some(tx);
    // When the acknowledged offset is ahead of the saved cursor: when to save it.
    let mut commit_due: Option<Instant> = None;
    let mut last_commit: Option<Instant> = None;
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
                if offset > reader.committed() && commit_due.is_none() {
                    let now = Instant::now();
                    commit_due = Some(last_commit.map_or(now, |t| (t + COMMIT_INTERVAL).max(now)));
                }
            }
            () = sleep_until(commit_due) => {
                commit_due = None;
                last_commit = Some(Instant::now());
                let offset = *acks.borrow();
                commit(&mut reader, offset, &config.name).await;
            }
            _ = phase.changed(), if current != Phase::Stop => {}
            read = read_next(&mut reader, tx.as_ref(), config.limits), if tx.is_some() => {
                match read {
                    Ok((permit, batch)) => {
                        let batch = decode(batch, &inputs, filter.as_mut(), &stats, &config.name, wire);
                        stats.channel.push(batch.bytes);
                        permit.send(Arc::new(batch));
                    }
                    Err(message) => {
                        stats.component.set_state(State::Failed(message));
                        tokio::time::sleep(config.retry_max.min(Duration::from_secs(1))).await;
                    }
                }
            }
        }
    }
    let offset = *acks.borrow();
    commit(&mut reader, offset, &config.name).await;
}

/// Resolves at `at`; never if there is none.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
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
        tracing::warn!("sink {name}: saving its cursor at {offset} failed: {e}");
    }
}

/// Keeps the records of the sink's inputs that its filter passes, decoded (or checked
/// and kept in their WAL form for a sink that [takes them so](Sink::takes_wire)); counts
/// the gap.
fn decode(
    batch: ReadBatch,
    inputs: &[Arc<str>],
    mut filter: Option<&mut Applied>,
    stats: &SinkStats,
    name: &str,
    wire: bool,
) -> SinkBatch {
    if let Some(gap) = batch.gap {
        add(&stats.gaps, 1);
        add(&stats.gap_records, gap.records());
        let (why, from, to) = match gap {
            weir_wal::Gap::Evicted { from, to, .. } => ("deleted before it read them", from, to),
            weir_wal::Gap::Quarantined { from, to, .. } => ("in a quarantined segment", from, to),
            weir_wal::Gap::Corrupt { from, to, .. } => ("damaged on disk", from, to),
            _ => ("lost", batch.next_offset(), batch.next_offset()),
        };
        tracing::warn!(
            "sink {name}: skipped {} WAL records (offsets {from}..{to}): {why}",
            gap.records()
        );
    }
    let next_offset = batch.next_offset();
    let mut out = SinkBatch {
        next_offset,
        ..SinkBatch::default()
    };
    if wire {
        out.wire.reserve(batch.records.len());
    } else {
        out.records.reserve(batch.records.len());
        out.positions.reserve(batch.records.len());
    }
    let skip = |offset: u64, e: &dyn std::fmt::Display| {
        add(&stats.unencodable, 1);
        tracing::warn!("sink {name}: WAL record {offset} skipped: {e}");
    };
    for wal_record in batch.records {
        let input = match peek_source(&wal_record.payload) {
            Ok(source) => match inputs.iter().find(|i| ***i == *source) {
                Some(input) => input,
                None => continue,
            },
            Err(e) => {
                skip(wal_record.offset, &e);
                continue;
            }
        };
        let position = Position {
            offset: wal_record.offset,
            time_ms: wal_record.time_ms,
        };
        if let Some(filter) = filter.as_deref_mut() {
            // Evaluated on the WAL form, before anything is decoded.
            let admitted = RecordRef::parse(&wal_record.payload).map(|record| {
                filter.admits(&wal_record.payload, &record, position.offset, stats, name)
            });
            match admitted {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    skip(position.offset, &e);
                    continue;
                }
            }
        }
        if wire {
            match WireRecord::new(position, wal_record.payload) {
                Ok(record) => {
                    out.bytes += record.payload_len() as u64;
                    out.wire.push(record);
                }
                Err(e) => skip(position.offset, &e),
            }
            continue;
        }
        // The source name is the input's, already held: no allocation per record.
        match Record::decode_with(wal_record.payload, |_| Arc::clone(input)) {
            Ok(record) => {
                out.bytes += record.payload.len() as u64;
                out.records.push(record);
                out.positions.push(position);
            }
            Err(e) => skip(position.offset, &e),
        }
    }
    out
}

async fn write_loop<S: Sink>(
    config: DriverConfig,
    mut sink: S,
    mut rx: mpsc::Receiver<Arc<SinkBatch>>,
    acks: watch::Sender<u64>,
    stats: Arc<SinkStats>,
    mut phase: watch::Receiver<Phase>,
    quarantine: Quarantine,
) -> (S, Outcome) {
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
            _ = stopped(&mut phase) => return (sink, Outcome::Finished),
            batch = rx.recv() => {
                let Some(batch) = batch else { break };
                stats.channel.pop();
                match write_with_retry(&config, &mut sink, &batch, &mut rejects, &stats, &mut phase).await {
                    Step::Stored(durable) => {
                        to_quarantine(&config.name, &mut rejects, &stats, &quarantine).await;
                        ack(durable);
                    }
                    Step::Stopped => return (sink, Outcome::Finished),
                    Step::Rewind => return (sink, Outcome::Rewind),
                }
            }
            settled = sink.settled() => match settled {
                Ok(durable) => {
                    set_running(&sink, &stats);
                    ack(durable);
                }
                Err(e) if e.needs_rewind() => {
                    add(&stats.retries, 1);
                    tracing::warn!("sink {}: {e}; reading again from its committed cursor", config.name);
                    stats.component.set_state(State::Failed(e.to_string()));
                    return (sink, Outcome::Rewind);
                }
                Err(e) => {
                    log_failure(&config.name, &e, None);
                    stats.component.set_state(State::Failed(e.to_string()));
                }
            },
            _ = tick.tick() => {
                match sink.tick().await {
                    Ok(durable) => {
                        if let Some(reason) = sink.failing() {
                            stats.component.set_state(State::Failed(reason));
                        }
                        ack(durable);
                    }
                    Err(e) => stats.component.set_state(State::Failed(e.to_string())),
                }
            }
        }
    }
    match sink.finish().await {
        Ok(durable) => ack(durable),
        Err(e) => tracing::warn!("sink {}: closing failed: {e}", config.name),
    }
    (sink, Outcome::Finished)
}

/// How a write ended.
enum Step {
    /// Stored; the durable offset if it moved.
    Stored(Option<u64>),
    /// The driver was stopped first.
    Stopped,
    /// The sink lost uncommitted records: rewind.
    Rewind,
}

/// Writes until it succeeds (returning the durable offset), the driver is stopped, or
/// the sink needs a rewind.
async fn write_with_retry<S: Sink>(
    config: &DriverConfig,
    sink: &mut S,
    batch: &Arc<SinkBatch>,
    rejects: &mut Vec<Unencodable>,
    stats: &SinkStats,
    phase: &mut watch::Receiver<Phase>,
) -> Step {
    let mut delay = config.retry_initial;
    loop {
        let result = tokio::select! {
            biased;
            _ = stopped(phase) => return Step::Stopped,
            result = sink.write(batch, rejects) => result,
        };
        match result {
            Ok(written) => {
                set_running(sink, stats);
                add(&stats.records, batch.len() as u64 - written.unencodable);
                add(&stats.bytes, batch.bytes);
                add(&stats.batches, 1);
                stats
                    .buffered_bytes
                    .store(written.buffered_bytes, std::sync::atomic::Ordering::Relaxed);
                return Step::Stored(written.durable_through);
            }
            Err(e) if e.needs_rewind() => {
                rejects.clear();
                add(&stats.retries, 1);
                tracing::warn!(
                    "sink {}: {e}; reading again from its committed cursor",
                    config.name
                );
                stats.component.set_state(State::Failed(e.to_string()));
                return Step::Rewind;
            }
            Err(e) => {
                rejects.clear();
                add(&stats.retries, 1);
                if e.is_permanent() {
                    delay = config.retry_max;
                }
                log_failure(&config.name, &e, Some(delay));
                stats.component.set_state(State::Failed(e.to_string()));
                tokio::select! {
                    biased;
                    _ = stopped(phase) => return Step::Stopped,
                    () = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(config.retry_max);
            }
        }
    }
}

/// Shows the sink `running`, unless work it carries on in the background is failing
/// ([`Sink::failing`]): then `failed` with that reason.
fn set_running<S: Sink>(sink: &S, stats: &SinkStats) {
    match sink.failing() {
        Some(reason) => stats.component.set_state(State::Failed(reason)),
        None => stats.component.set_state(State::Running),
    }
}

/// Logs a failed write (with the delay before it is retried) or a failed completion:
/// at ERROR when retrying soon cannot help.
fn log_failure(name: &str, e: &super::sink::SinkError, retry_in: Option<Duration>) {
    let retry = retry_in.map_or(String::new(), |d| format!(", retrying in {d:?}"));
    if e.is_permanent() {
        tracing::error!("sink {name}: refused{retry}: {e}");
    } else {
        tracing::warn!("sink {name}: write failed{retry}: {e}");
    }
}

/// Records a sink could not encode: counted, and written to the quarantine with the
/// reason (the quarantine counts and logs what it keeps and what it drops).
async fn to_quarantine(
    name: &str,
    rejects: &mut Vec<Unencodable>,
    stats: &SinkStats,
    quarantine: &Quarantine,
) {
    if rejects.is_empty() {
        return;
    }
    add(&stats.unencodable, rejects.len() as u64);
    let entries: Vec<Rejected> = rejects
        .drain(..)
        .map(|u| Rejected {
            reason: u.reason.to_string(),
            payload: u.record.payload,
        })
        .collect();
    let n = entries.len();
    // On the blocking pool: the cursor moves past these only once they are on disk.
    if let Err(QuarantineError::Blocking(e)) = quarantine.put_durable(name, entries).await {
        tracing::error!(
            "sink {name}: {n} records could not be encoded, and quarantining them did not complete: {e}"
        );
    }
}

/// Runs a sink's driver until it is finished; after a rewind, waits the retry delay
/// and runs it again with a new reader (which starts at the committed cursor).
///
/// # Cancel safety
///
/// As [`run`]: drive it to completion through `phase`.
pub async fn drive<S: Sink>(
    config: DriverConfig,
    wal: Wal,
    mut sink: S,
    stats: Arc<SinkStats>,
    phase: watch::Receiver<Phase>,
    quarantine: Quarantine,
) {
    let mut delay = config.retry_initial;
    loop {
        let reader = match wal.reader(&config.name) {
            Ok(reader) => reader,
            Err(weir_wal::CursorError::InUse(_)) if *phase.borrow() == Phase::Run => {
                // A reload restarted this sink while its previous driver, aborted, is
                // still letting go of the reader.
                tokio::time::sleep(config.retry_initial).await;
                continue;
            }
            Err(e) => {
                // Declared before the driver starts (at startup or by a reload).
                tracing::error!("sink {}: {e}", config.name);
                stats.component.set_state(State::Failed(e.to_string()));
                return;
            }
        };
        let (returned, outcome) = run(
            config.clone(),
            reader,
            sink,
            Arc::clone(&stats),
            phase.clone(),
            quarantine.clone(),
        )
        .await;
        sink = returned;
        if outcome == Outcome::Finished || *phase.borrow() != Phase::Run {
            return;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(config.retry_max);
    }
}

/// Resolves once the phase is [`Phase::Stop`].
/// A dropped phase sender counts as [`Phase::Stop`].
async fn stopped(phase: &mut watch::Receiver<Phase>) {
    let _ = phase.wait_for(|p| *p == Phase::Stop).await;
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
