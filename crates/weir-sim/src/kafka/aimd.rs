//! Seed 001's adaptive limiter: the AIMD rate limiter against a downstream whose
//! capacity moves.

use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;
use weir_flow::Timestamp;
use weir_flow::aimd::{AimdConfig, AimdRate};
use weir_flow::queue::{Capacity, OnFull, QueueConfig, QueueCore};

use crate::error::SimError;

/// One stretch of the downstream's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapacityPhase {
    /// When the stretch starts.
    pub from: Duration,
    /// Records per second the downstream handles in it.
    pub per_second: u64,
}

/// The experiment's parameters.
///
/// # Model
///
/// The client has an endless backlog and sends a record whenever the limiter
/// ([`AimdRate`], seed 001's limiter: +20/s per on-target window, ×0.8 above the
/// target, 1 s windows judged on p99) grants a permit. The downstream is one server with
/// a FIFO queue; a record's service time is `1 / capacity` at the moment its service
/// starts. A record's latency is from send to the downstream's reply (its queueing
/// inside the downstream included, the client's own wait for a permit excluded), and
/// is fed to the limiter when the reply arrives.
#[derive(Debug, Clone, PartialEq)]
pub struct AimdExperiment {
    /// How long to run.
    pub duration: Duration,
    /// The downstream's capacity over time; the first phase should start at zero.
    pub phases: Vec<CapacityPhase>,
    /// The limiter's latency target.
    pub target_latency: Duration,
    /// The limiter's starting rate, records per second.
    pub initial_rate: f64,
    /// One trace line per this much time.
    pub trace_every: Duration,
}

impl Default for AimdExperiment {
    fn default() -> Self {
        let phase = |s, per_second| CapacityPhase {
            from: Duration::from_secs(s),
            per_second,
        };
        AimdExperiment {
            duration: Duration::from_secs(60),
            phases: vec![phase(0, 1_000), phase(20, 400), phase(40, 1_000)],
            target_latency: Duration::from_millis(50),
            initial_rate: 500.0,
            trace_every: Duration::from_secs(2),
        }
    }
}

impl AimdExperiment {
    fn capacity_at(&self, at: Duration) -> u64 {
        self.phases
            .iter()
            .rev()
            .find(|p| p.from <= at)
            .or(self.phases.first())
            .map_or(1, |p| p.per_second.max(1))
    }
}

/// One line of the rate trace.
#[derive(Debug, Clone, PartialEq)]
pub struct RateSample {
    /// End of the interval.
    pub at: Duration,
    /// The limiter's rate at the end of the interval.
    pub rate: f64,
    /// The downstream's capacity at the end of the interval.
    pub capacity: u64,
    /// Records answered in the interval.
    pub answered: u64,
    /// p99 latency of the interval's replies.
    pub p99_latency: Duration,
}

/// What the AIMD experiment measured.
#[derive(Debug, Clone, PartialEq)]
pub struct AimdResult {
    /// The rate trace, one sample per `trace_every`.
    pub trace: Vec<RateSample>,
    /// Records answered over the run.
    pub answered: u64,
    /// Median latency over the run.
    pub p50_latency: Duration,
    /// 99th-percentile latency over the run.
    pub p99_latency: Duration,
    /// How many times the limiter cut its rate.
    pub decreases: u64,
    /// How many times it raised its rate.
    pub increases: u64,
}

/// Runs the experiment and returns the rate trace and the latency it held.
///
/// # Errors
///
/// [`SimError::BadLimit`] if the limiter's configuration is refused.
pub fn run_aimd(experiment: &AimdExperiment) -> Result<AimdResult, SimError> {
    let config = AimdConfig::rate(experiment.target_latency, experiment.initial_rate);
    let mut limiter = AimdRate::new(config).map_err(|e| SimError::BadLimit {
        name: "AIMD limiter",
        expected: "a valid configuration",
        found: e.to_string(),
    })?;
    let mut latency_us =
        Histogram::<u64>::new_with_bounds(1, 3_600 * 1_000_000, 3).map_err(|e| {
            SimError::BadLimit {
                name: "histogram bounds",
                expected: "valid bounds",
                found: e.to_string(),
            }
        })?;
    let mut total_us = latency_us.clone();
    let mut downstream: QueueCore<()> =
        QueueCore::new(QueueConfig::new(Capacity::unbounded(), OnFull::Reject));
    let end = Timestamp::ZERO + experiment.duration;
    let trace_every = experiment.trace_every.max(Duration::from_millis(1));
    let mut next_trace = Timestamp::ZERO + trace_every;
    let mut trace = Vec::new();
    let mut answered = 0;
    let mut now = Timestamp::ZERO;
    let mut next_send = Timestamp::ZERO;
    // The record in service: when it was sent and when its reply comes.
    let mut in_service: Option<(Timestamp, Timestamp)> = None;
    while now <= end {
        // 1. The client sends while the limiter grants permits.
        if now >= next_send {
            loop {
                match limiter.try_acquire(now) {
                    Ok(()) => {
                        let _ = downstream.offer((), now);
                    }
                    Err(wait) => {
                        next_send = now + wait;
                        break;
                    }
                }
            }
        }
        // 2. The downstream: a reply, then the next record.
        if let Some((sent, done)) = in_service
            && done == now
        {
            in_service = None;
            let latency = now.saturating_duration_since(sent);
            limiter.observe(now, latency);
            let us = u64::try_from(latency.as_micros())
                .unwrap_or(u64::MAX)
                .max(1);
            latency_us.saturating_record(us);
            total_us.saturating_record(us);
            answered += 1;
        }
        if in_service.is_none()
            && let Some(taken) = downstream.take(now)
        {
            let at = now.saturating_duration_since(Timestamp::ZERO);
            let service = Duration::from_nanos(1_000_000_000 / experiment.capacity_at(at));
            in_service = Some((taken.enqueued_at, now + service));
        }
        if now >= next_trace {
            let at = now.saturating_duration_since(Timestamp::ZERO);
            trace.push(RateSample {
                at,
                rate: limiter.rate(),
                capacity: experiment.capacity_at(at),
                answered,
                p99_latency: Duration::from_micros(latency_us.value_at_quantile(0.99)),
            });
            latency_us.reset();
            answered = 0;
            next_trace = next_trace + trace_every;
        }
        now = [
            Some(next_send),
            in_service.map(|(_, done)| done),
            Some(next_trace),
        ]
        .into_iter()
        .flatten()
        .filter(|t| *t > now)
        .min()
        .unwrap_or(end);
    }
    Ok(AimdResult {
        trace,
        answered: total_us.len(),
        p50_latency: Duration::from_micros(total_us.value_at_quantile(0.5)),
        p99_latency: Duration::from_micros(total_us.value_at_quantile(0.99)),
        decreases: limiter.controller().decreases(),
        increases: limiter.controller().increases(),
    })
}

/// The rate trace as a table, and a summary line of the latency it held.
pub fn rate_table(result: &AimdResult) -> String {
    let samples = &result.trace;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>6} {:>12} {:>12} {:>10} {:>12}",
        "t", "limit", "capacity", "answered", "p99 latency"
    );
    for s in samples {
        let _ = writeln!(
            out,
            "{:>4} s {:>10.0}/s {:>10}/s {:>10} {:>9} ms",
            s.at.as_secs(),
            s.rate,
            s.capacity,
            s.answered,
            s.p99_latency.as_millis()
        );
    }
    let _ = writeln!(
        out,
        "Over the run: {} records answered, latency p50 {} ms, p99 {} ms; the limit was cut {} times and raised {} times.",
        result.answered,
        result.p50_latency.as_millis(),
        result.p99_latency.as_millis(),
        result.decreases,
        result.increases
    );
    out
}
