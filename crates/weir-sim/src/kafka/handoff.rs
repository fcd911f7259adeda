//! Seed 001's consumer experiment: a poll loop hands records to a slow downstream,
//! through an unbounded queue or through a bounded one with pause/resume watermarks.

use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;
use weir_flow::Timestamp;
use weir_flow::queue::{Capacity, Offer, OnFull, QueueConfig, QueueCore};
use weir_flow::watermark::{Transition, Watermark};

use crate::engine::{Observer, Step};
use crate::error::SimError;
use crate::series::Series;

/// Transition lines kept for the report (the first few show the pattern).
const LOG_LINES: usize = 4;

/// The experiment's parameters; [`Default`] is seed 001's setup.
///
/// # Poll model
///
/// The poll loop runs back to back. A poll starts by checking the hand-off queue's
/// depth with the watermark controller (pause at `high`, resume at `low`), exactly as
/// the seed's `pollOnce` does, then fetches. A fetch returns after `poll_latency` with
/// up to `max_poll_records` records (none while paused: the loop keeps polling, as
/// Kafka requires for heartbeats). The records are put into the queue the moment the
/// poll returns, and the next poll starts at once. If the bounded queue is full, the
/// put blocks: the rest of the batch waits for room and no new poll starts.
///
/// A poll latency of 60 ms gives 500 / 0.06 s ≈ 8,300 records per second when nothing
/// holds the loop back, the shape of the seed's unthrottled fetch (8,109/s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandOffConfig {
    /// Records in the topic, all available at t=0.
    pub records: u64,
    /// Downstream time per record.
    pub service: Duration,
    /// Most records one poll returns (`max.poll.records`).
    pub max_poll_records: u64,
    /// Time from the start of a poll to its return.
    pub poll_latency: Duration,
    /// Capacity of the bounded queue.
    pub capacity: u64,
    /// Pause fetching when the queue holds this many records.
    pub high: u64,
    /// Resume fetching when the queue has drained to this many.
    pub low: u64,
}

impl Default for HandOffConfig {
    fn default() -> Self {
        HandOffConfig {
            records: 30_000,
            service: Duration::from_micros(1_000),
            max_poll_records: 500,
            poll_latency: Duration::from_millis(60),
            capacity: 3_000,
            high: 1_600,
            low: 400,
        }
    }
}

/// How the poll loop hands records to the downstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandOff {
    /// An unbounded queue: every poll's records go straight in.
    Unbounded,
    /// A bounded queue with pause/resume watermarks.
    Watermarked,
}

/// What one run measured (the seed's comparison table).
#[derive(Debug, Clone, PartialEq)]
pub struct HandOffResult {
    /// Time until every record had been fetched.
    pub fetch_all: Duration,
    /// Time until every record had been processed.
    pub total: Duration,
    /// The most records ever waiting in the hand-off queue.
    pub max_queue: u64,
    /// Median in-client dwell (poll return → processed).
    pub p50_dwell: Duration,
    /// 99th-percentile in-client dwell.
    pub p99_dwell: Duration,
    /// Pauses of the fetch.
    pub pauses: u64,
    /// The first pause/resume transitions and the line when fetching ended, as log lines.
    pub log: Vec<String>,
    /// The hand-off queue over time, in [`SERIES_BUCKET_MS`] buckets.
    pub series: Series,
}

/// The bucket width of the hand-off's time series: 100 ms.
pub const SERIES_BUCKET_MS: u64 = 100;

impl HandOffResult {
    /// Records per second while fetching.
    pub fn fetch_phase_rate(&self, records: u64) -> f64 {
        per_second(records, self.fetch_all)
    }

    /// Records per second over the whole run.
    pub fn process_rate(&self, records: u64) -> f64 {
        per_second(records, self.total)
    }
}

fn per_second(records: u64, over: Duration) -> f64 {
    // Record counts are far below 2^53: exact in f64.
    #[allow(clippy::cast_precision_loss)]
    let records = records as f64;
    records / over.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// The state of one run.
struct Run<'a> {
    config: &'a HandOffConfig,
    queue: QueueCore<u64>,
    watermark: Option<Watermark>,
    /// Records handed out by the broker so far (the consumer's position).
    position: u64,
    /// Records put into the queue so far.
    fetched: u64,
    /// Records of the returned poll not yet in the queue (a blocked put).
    batch_end: u64,
    processed: u64,
    dwell_us: Histogram<u64>,
    log: Vec<String>,
}

impl Run<'_> {
    fn say(&mut self, now: Timestamp, what: &str) {
        if self.log.len() < LOG_LINES || what == "fetched" {
            let line = format!(
                "t={:>6.3} s {what:<8} queue={:<5} processed={:<5} fetched={:<5} lag={}",
                now.as_nanos() as f64 / 1e9,
                self.queue.len(),
                self.processed,
                self.fetched,
                self.config.records - self.position,
            );
            self.log.push(line);
        }
    }

    /// Puts the returned batch into the queue; `false` if a put blocked.
    fn put_batch(&mut self, now: Timestamp) -> bool {
        while self.fetched < self.batch_end {
            if let Offer::WouldBlock(_) = self.queue.offer(self.fetched, now) {
                return false;
            }
            self.fetched += 1;
            if self.fetched == self.config.records {
                self.say(now, "fetched");
            }
        }
        true
    }

    /// Starts a poll at `now`; returns how many records it will return.
    fn start_poll(&mut self, now: Timestamp) -> u64 {
        let depth = self.queue.len() as u64;
        if let Some(watermark) = &mut self.watermark {
            match watermark.observe(now, depth) {
                Some(Transition::Pause) => self.say(now, "paused"),
                Some(Transition::Resume) => self.say(now, "resumed"),
                None => {}
            }
        }
        if self.watermark.as_ref().is_some_and(Watermark::is_paused) {
            return 0;
        }
        let n = self
            .config
            .max_poll_records
            .min(self.config.records - self.position);
        self.position += n;
        n
    }
}

/// Runs the experiment with one hand-off.
///
/// # Examples
///
/// ```
/// use weir_sim::kafka::{HandOff, HandOffConfig, run_handoff};
///
/// let config = HandOffConfig { records: 5_000, ..HandOffConfig::default() };
/// let bounded = run_handoff(&config, HandOff::Watermarked).unwrap();
/// assert!(bounded.max_queue <= config.high + config.max_poll_records);
/// let unbounded = run_handoff(&config, HandOff::Unbounded).unwrap();
/// assert!(unbounded.p99_dwell > bounded.p99_dwell);
/// ```
///
/// # Errors
///
/// [`SimError::BadLimit`] if the watermarks are inconsistent (`low >= high`) or a limit
/// is zero.
pub fn run_handoff(config: &HandOffConfig, handoff: HandOff) -> Result<HandOffResult, SimError> {
    if config.records == 0 || config.max_poll_records == 0 || config.capacity == 0 {
        return Err(SimError::BadLimit {
            name: "records, max_poll_records and capacity",
            expected: "at least 1",
            found: format!("{config:?}"),
        });
    }
    let (capacity, watermark) = match handoff {
        HandOff::Unbounded => (Capacity::unbounded(), None),
        HandOff::Watermarked => {
            let watermark =
                Watermark::new(config.low, config.high).map_err(|e| SimError::BadLimit {
                    name: "low and high watermarks",
                    expected: "low < high",
                    found: e.to_string(),
                })?;
            let items = usize::try_from(config.capacity).unwrap_or(usize::MAX);
            (Capacity::items(items), Some(watermark))
        }
    };
    let dwell_us = Histogram::new_with_bounds(1, 24 * 3_600 * 1_000_000, 3).map_err(|e| {
        SimError::BadLimit {
            name: "histogram bounds",
            expected: "valid bounds",
            found: e.to_string(),
        }
    })?;
    let mut run = Run {
        config,
        queue: QueueCore::new(QueueConfig::new(capacity, OnFull::Block)),
        watermark,
        position: 0,
        fetched: 0,
        batch_end: 0,
        processed: 0,
        dwell_us,
        log: Vec::new(),
    };
    let mut now = Timestamp::ZERO;
    let mut fetch_all = Duration::ZERO;
    // The first poll starts at t=0.
    let first = run.start_poll(now);
    let mut poll_returns: Option<(Timestamp, u64)> = Some((now + config.poll_latency, first));
    let mut busy_until: Option<Timestamp> = None;
    let mut blocked = false;
    let mut series = Series::new(SERIES_BUCKET_MS);
    loop {
        // 1. The poll loop: a returning poll puts its records in, then polls again.
        if let Some((at, n)) = poll_returns
            && at == now
        {
            run.batch_end += n;
            poll_returns = None;
            blocked = true;
        }
        if blocked && run.put_batch(now) {
            blocked = false;
            if run.fetched == config.records && fetch_all.is_zero() {
                fetch_all = now.saturating_duration_since(Timestamp::ZERO);
            }
            if run.fetched < config.records && poll_returns.is_none() {
                let n = run.start_poll(now);
                poll_returns = Some((now + config.poll_latency, n));
            }
        }
        // 2. The downstream: a completion, then the next record.
        if busy_until == Some(now) {
            busy_until = None;
            run.processed += 1;
        }
        if busy_until.is_none()
            && let Some(taken) = run.queue.take(now)
        {
            let done = now + config.service;
            busy_until = Some(done);
            let dwell = done.saturating_duration_since(taken.enqueued_at);
            let dwell_us = u64::try_from(dwell.as_micros()).unwrap_or(u64::MAX).max(1);
            run.dwell_us.saturating_record(dwell_us);
        }
        series.step(&Step {
            now_ms: now.as_millis(),
            sent: run.fetched,
            completed: run.processed,
            in_service: busy_until.is_some(),
            stats: run.queue.stats(now),
        });
        if run.processed == config.records {
            break;
        }
        // The next event: a poll return or a completion (a blocked put retries then).
        let next = [poll_returns.map(|(at, _)| at), busy_until]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(next) => now = next,
            None => {
                return Err(SimError::Stalled {
                    strategy: format!("{handoff:?} hand-off"),
                    horizon_ms: now.as_millis(),
                    sent: run.fetched,
                    completed: run.processed,
                });
            }
        }
    }
    let quantile = |q: f64| Duration::from_micros(run.dwell_us.value_at_quantile(q));
    Ok(HandOffResult {
        fetch_all,
        total: now.saturating_duration_since(Timestamp::ZERO),
        max_queue: run.queue.stats(now).max_depth,
        p50_dwell: quantile(0.5),
        p99_dwell: quantile(0.99),
        pauses: run.watermark.as_ref().map_or(0, Watermark::pauses),
        log: run.log,
        series,
    })
}

/// The comparison table of the two hand-offs, in the seed's rows.
pub fn comparison_table(
    config: &HandOffConfig,
    unbounded: &HandOffResult,
    bounded: &HandOffResult,
) -> String {
    let records = config.records;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28}{:>14}{:>14}",
        "metric", "unbounded", "pause/resume"
    );
    let _ = writeln!(out, "{}", "-".repeat(56));
    let mut row = |name: &str, a: String, b: String| {
        let _ = writeln!(out, "{name:<28}{a:>14}{b:>14}");
    };
    let secs = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    let rate = |r: f64| format!("{r:.0}/s");
    let ms = |d: Duration| format!("{} ms", d.as_millis());
    row(
        &format!("time to fetch all {records}"),
        secs(unbounded.fetch_all),
        secs(bounded.fetch_all),
    );
    row(
        "fetch-phase rate",
        rate(unbounded.fetch_phase_rate(records)),
        rate(bounded.fetch_phase_rate(records)),
    );
    row(
        "downstream process rate",
        rate(unbounded.process_rate(records)),
        rate(bounded.process_rate(records)),
    );
    row(
        "peak queue",
        unbounded.max_queue.to_string(),
        bounded.max_queue.to_string(),
    );
    row(
        "p50 in-client dwell",
        ms(unbounded.p50_dwell),
        ms(bounded.p50_dwell),
    );
    row(
        "p99 in-client dwell",
        ms(unbounded.p99_dwell),
        ms(bounded.p99_dwell),
    );
    row("total time", secs(unbounded.total), secs(bounded.total));
    out
}
