//! `weir lab littles-law`: seed 002's concurrency buffer for a slow stage.
//!
//! A stage whose operations take a latency `L` (an object-store upload, a remote call)
//! delivers at most `depth / L` operations per second with `depth` in flight (Little's
//! law), so one at a time it is pinned at `1 / L`. This lab sweeps the in-flight depth
//! of the real ordered stage ([`weir_flow::ordered::OrderedCore`]), which releases
//! results in submission order and holds back the ones that finish early, and shows the
//! throughput growing with depth until another limit binds: a shared link that moves
//! one operation's bytes at a time.
//!
//! # Model
//!
//! A backlog of `operations` is waiting at t=0. An admitted operation first crosses the
//! link (one at a time, FIFO, `transfer` each), then takes its latency (fixed, or drawn
//! from a seeded log-normal distribution; operations overlap freely here), then
//! completes. The ordered stage admits while it has room (`max_in_flight = depth`,
//! `max_held = 2 × depth`) and releases completed results in submission order. Within
//! one instant the producer admits first; after each completion (and the releases it
//! allows) it admits again, so a freed slot is refilled in the same instant. End-to-end
//! latency runs from admission to release in order.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::convert::Infallible;
use std::fmt::Write as _;
use std::num::NonZeroUsize;
use std::time::Duration;

use hdrhistogram::Histogram;
use weir_flow::Timestamp;
use weir_flow::ordered::{Attempt, OrderedConfig, OrderedCore, RetryPolicy, littles_law_depth};

use crate::error::SimError;
use crate::rng::SimRng;

/// How long the slow stage takes per operation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Latency {
    /// Always the same.
    Fixed(Duration),
    /// Log-normal: `median × e^(sigma × N(0,1))`, seeded.
    LogNormal {
        /// The median latency.
        median: Duration,
        /// Standard deviation of the latency's logarithm (0.8 gives p99 ≈ 6.4 × median).
        sigma: f64,
        /// The seed of the draws.
        seed: u64,
    },
}

impl Latency {
    /// The mean latency.
    pub fn mean(&self) -> Duration {
        match *self {
            Latency::Fixed(latency) => latency,
            Latency::LogNormal { median, sigma, .. } => median.mul_f64((sigma * sigma / 2.0).exp()),
        }
    }

    /// A short name for file names: `fixed` or `heavy-tail`.
    pub fn slug(&self) -> &'static str {
        match self {
            Latency::Fixed(_) => "fixed",
            Latency::LogNormal { .. } => "heavy-tail",
        }
    }

    fn describe(&self) -> String {
        match *self {
            Latency::Fixed(latency) => format!("fixed latency ({} ms)", latency.as_millis()),
            Latency::LogNormal {
                median,
                sigma,
                seed,
            } => format!(
                "heavy-tailed latency (log-normal, median {} ms, sigma {sigma}, mean {} ms, seed {seed})",
                median.as_millis(),
                self.mean().as_millis()
            ),
        }
    }
}

/// The experiment's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct LittlesLaw {
    /// Operations in the backlog.
    pub operations: u64,
    /// Time one operation occupies the shared link (the other limit).
    pub transfer: Duration,
    /// The in-flight depths to try.
    pub depths: Vec<usize>,
}

impl Default for LittlesLaw {
    fn default() -> Self {
        LittlesLaw {
            operations: 2_000,
            transfer: Duration::from_millis(10),
            depths: (0..=8).map(|k| 1 << k).collect(),
        }
    }
}

/// One depth's result.
#[derive(Debug, Clone, PartialEq)]
pub struct DepthResult {
    /// The in-flight depth.
    pub depth: usize,
    /// Operations per second over the run.
    pub throughput: f64,
    /// The most completed results held back behind an unfinished earlier one.
    pub max_held_back: usize,
    /// Median admission-to-release latency.
    pub p50: Duration,
    /// 99th-percentile admission-to-release latency.
    pub p99: Duration,
    /// Completed results held back over time: `(ms, held back)` after each completion
    /// and the releases it allowed (one entry per operation, so bounded by the run).
    pub held_back_over_time: Vec<(u64, usize)>,
}

impl DepthResult {
    /// The held-back series as CSV: `t_ms,held_back`, one row per completion.
    pub fn held_back_csv(&self) -> String {
        let mut out = String::from("t_ms,held_back\n");
        for (t_ms, held) in &self.held_back_over_time {
            let _ = writeln!(out, "{t_ms},{held}");
        }
        out
    }
}

/// Runs one depth.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use weir_sim::littles_law::{Latency, LittlesLaw, run_depth};
///
/// let experiment = LittlesLaw { operations: 100, ..LittlesLaw::default() };
/// let one = run_depth(&experiment, Latency::Fixed(Duration::from_secs(1)), 1).unwrap();
/// let eight = run_depth(&experiment, Latency::Fixed(Duration::from_secs(1)), 8).unwrap();
/// assert!(one.throughput < 1.0);
/// assert!(eight.throughput > 7.0 * one.throughput);
/// ```
///
/// # Errors
///
/// [`SimError::BadLimit`] if the depth is zero or the ordered stage refuses its
/// configuration.
pub fn run_depth(
    experiment: &LittlesLaw,
    latency: Latency,
    depth: usize,
) -> Result<DepthResult, SimError> {
    let bad = |found: String| SimError::BadLimit {
        name: "depth",
        expected: "at least 1, and a valid ordered-stage configuration",
        found,
    };
    let max_in_flight = NonZeroUsize::new(depth).ok_or_else(|| bad("0".to_owned()))?;
    let mut config = OrderedConfig::new(max_in_flight);
    config.attempt_timeout = None;
    config.retry = RetryPolicy::none();
    let mut stage: OrderedCore<(), Infallible> =
        OrderedCore::new(config).map_err(|e| bad(e.to_string()))?;
    let mut e2e_us = Histogram::<u64>::new_with_bounds(1, 24 * 3_600 * 1_000_000, 3)
        .map_err(|e| bad(e.to_string()))?;
    let mut rng = match latency {
        Latency::LogNormal { seed, .. } => SimRng::new(seed),
        Latency::Fixed(_) => SimRng::new(0),
    };
    // Completions by time, then sequence number: at most `depth` entries.
    let mut completions: BinaryHeap<Reverse<(Timestamp, u64, u32)>> = BinaryHeap::new();
    // Admission times of admitted, unreleased operations: at most `max_held` entries.
    let mut admitted_at: VecDeque<Timestamp> = VecDeque::new();
    let mut link_free = Timestamp::ZERO;
    let mut now = Timestamp::ZERO;
    let mut submitted = 0;
    let mut released = 0;
    let mut max_held_back = 0;
    let mut held_back_over_time = Vec::with_capacity(
        usize::try_from(experiment.operations)
            .unwrap_or(0)
            .min(1 << 20),
    );
    while released < experiment.operations {
        // The producer: admit while the stage has room.
        while submitted < experiment.operations
            && let Some(attempt) = stage.try_submit(now)
        {
            submitted += 1;
            admitted_at.push_back(now);
            let start = link_free.max(now);
            link_free = start + experiment.transfer;
            let took = match latency {
                Latency::Fixed(latency) => latency,
                Latency::LogNormal { median, sigma, .. } => {
                    Duration::from_secs_f64(rng.lognormal(median.as_secs_f64(), sigma))
                }
            };
            completions.push(Reverse((link_free + took, attempt.seq, attempt.number)));
        }
        // The stage: the next completion, and the releases it allows.
        let Some(Reverse((at, seq, number))) = completions.pop() else {
            return Err(bad(format!(
                "{depth}: nothing in flight and nothing admitted"
            )));
        };
        now = at;
        let attempt = Attempt {
            seq,
            number,
            deadline: None,
        };
        let _ = stage.complete(attempt, Ok(()), 0, now);
        max_held_back = max_held_back.max(stage.held_back());
        while let Some((seq, _)) = stage.pop_ready(now) {
            if seq != released {
                return Err(bad(format!(
                    "{depth}: the stage released operation {seq} when {released} was next"
                )));
            }
            released += 1;
            if let Some(admitted) = admitted_at.pop_front() {
                let e2e = now.saturating_duration_since(admitted);
                let us = u64::try_from(e2e.as_micros()).unwrap_or(u64::MAX).max(1);
                e2e_us.saturating_record(us);
            }
        }
        held_back_over_time.push((now.as_millis(), stage.held_back()));
    }
    let elapsed = now.saturating_duration_since(Timestamp::ZERO).as_secs_f64();
    // Operation counts are far below 2^53: exact in f64.
    #[allow(clippy::cast_precision_loss)]
    let throughput = experiment.operations as f64 / elapsed.max(f64::MIN_POSITIVE);
    Ok(DepthResult {
        depth,
        throughput,
        max_held_back,
        p50: Duration::from_micros(e2e_us.value_at_quantile(0.5)),
        p99: Duration::from_micros(e2e_us.value_at_quantile(0.99)),
        held_back_over_time,
    })
}

/// The two latencies `weir lab littles-law` sweeps: fixed, and heavy-tailed
/// (log-normal, sigma 0.8) with the same median.
pub fn latencies(latency: Duration, seed: u64) -> [Latency; 2] {
    [
        Latency::Fixed(latency),
        Latency::LogNormal {
            median: latency,
            sigma: 0.8,
            seed,
        },
    ]
}

/// The sweep's table for one latency.
///
/// # Errors
///
/// [`SimError`] if a depth cannot run.
pub fn sweep_table(experiment: &LittlesLaw, latency: Latency) -> Result<String, SimError> {
    let mean_s = latency.mean().as_secs_f64();
    let link_cap = 1.0 / experiment.transfer.as_secs_f64().max(f64::MIN_POSITIVE);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>5} {:>12} {:>14} {:>12} {:>12} {:>10} {:>10}",
        "depth", "throughput", "depth/latency", "link limit", "maxHeldBack", "p50 e2e", "p99 e2e"
    );
    for &depth in &experiment.depths {
        let r = run_depth(experiment, latency, depth)?;
        // Depths are small: exact in f64.
        #[allow(clippy::cast_precision_loss)]
        let ideal = depth as f64 / mean_s;
        let _ = writeln!(
            out,
            "{:>5} {:>10.2}/s {:>12.2}/s {:>10.0}/s {:>12} {:>7} ms {:>7} ms",
            r.depth,
            r.throughput,
            ideal,
            link_cap,
            r.max_held_back,
            r.p50.as_millis(),
            r.p99.as_millis()
        );
    }
    Ok(out)
}

/// The whole `weir lab littles-law` report: the sweep with a fixed latency and with a
/// heavy-tailed one of the same median.
///
/// # Errors
///
/// [`SimError`] if a depth cannot run.
pub fn report(experiment: &LittlesLaw, latency: Duration, seed: u64) -> Result<String, SimError> {
    let link_cap = 1.0 / experiment.transfer.as_secs_f64().max(f64::MIN_POSITIVE);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Little's law lab. All times are simulated; nothing here reads a real clock."
    );
    let _ = writeln!(
        out,
        "{} operations wait at t=0. Each crosses a shared link ({} ms each, so at most {link_cap:.0}/s), then a slow stage; results are released in submission order by the ordered stage.",
        experiment.operations,
        experiment.transfer.as_millis()
    );
    let _ = writeln!(
        out,
        "Little's law: to sustain {link_cap:.0}/s through {} ms, keep littles_law_depth({link_cap:.0}/s, {} ms) = {} operations in flight.",
        latency.as_millis(),
        latency.as_millis(),
        littles_law_depth(link_cap, latency)
    );
    for latency in latencies(latency, seed) {
        out.push('\n');
        let _ = writeln!(out, "{}:", capitalise(&latency.describe()));
        out.push_str(&sweep_table(experiment, latency)?);
    }
    let _ = writeln!(
        out,
        "\nWith a fixed latency, throughput follows depth/latency until the link's {link_cap:.0}/s binds; nothing is ever held back."
    );
    let _ = writeln!(
        out,
        "With a heavy tail, completions pile up behind a slow earlier operation (maxHeldBack), the reorder buffer (2 x depth) stops admission, and throughput falls short of depth/latency: order costs concurrency."
    );
    Ok(out)
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}
