//! Steady figures from noisy samples: the smoothed rate of a counter, and the trend of
//! a level. Sans-IO: both take the samples (time in milliseconds, value) and return a
//! number; `/history`, `weir top` and the dashboard (the same formulas in JavaScript)
//! use them.
//!
//! - **Rates** are exponentially weighted, with a time constant of [`RATE_TIME_CONSTANT`]
//!   (10 s): each interval's rate `r` moves the estimate by `α = 1 − e^(−Δt/τ)` of the way
//!   to `r`, and the estimate is divided by the weight accumulated so far (`1 − e^(−T/τ)`
//!   after `T` seconds), so the first samples are not biased towards zero. A sink that
//!   stores 1,024 records every two seconds reads 486 to 538 records/s, not 0 and 1,024
//!   in turn; a step in the rate shows 63% of its size after 10 s and 90% after 23 s.
//! - **The WAL's fill trend** is the least-squares slope of its disk use over the last
//!   [`TREND_WINDOW_SAMPLES`] samples (a minute at one a second). It counts as filling
//!   (or shrinking) only when the rise it predicts over the window is larger than twice
//!   the spread of the samples around the line: the sawtooth of segments written and
//!   deleted by retention is noise, not a trend, so the forecast does not swing from
//!   "full in 3 min" to "not filling" with each deleted segment.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The time constant of smoothed rates.
pub const RATE_TIME_CONSTANT: Duration = Duration::from_secs(10);

/// Samples (at most) the fill trend is measured over.
pub const TREND_WINDOW_SAMPLES: usize = 60;

/// How much larger than the samples' spread around the line the predicted rise over the
/// window must be for the level to count as moving.
const SIGNIFICANCE: f64 = 2.0;

/// The exponentially weighted per-second rate of a counter sampled at `(t_ms, value)`,
/// oldest first, with time constant `tau`. A missing value (`None`, or not finite) is
/// stepped over: the next interval spans the gap. A counter that goes down (a restart)
/// counts as zero for that interval. `None` before two samples a positive time apart.
pub fn smoothed_rate(
    samples: impl IntoIterator<Item = (u64, Option<f64>)>,
    tau: Duration,
) -> Option<f64> {
    let tau = tau.as_secs_f64().max(1e-3);
    let mut previous: Option<(u64, f64)> = None;
    let (mut estimate, mut weight) = (0.0_f64, 0.0_f64);
    for (t_ms, value) in samples {
        let Some(value) = value.filter(|v| v.is_finite()) else {
            continue;
        };
        if let Some((t0, v0)) = previous {
            if t_ms <= t0 {
                continue;
            }
            let dt = (t_ms - t0) as f64 / 1000.0;
            let rate = (value - v0).max(0.0) / dt;
            let alpha = 1.0 - (-dt / tau).exp();
            estimate += alpha * (rate - estimate);
            weight += alpha * (1.0 - weight);
        }
        previous = Some((t_ms, value));
    }
    (weight > 0.0).then(|| estimate / weight)
}

/// Which way a level is going, by [`fill_trend`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Growing by more than its ripple.
    Filling,
    /// Neither: the slope is within the samples' spread (or there are too few).
    #[default]
    Steady,
    /// Shrinking by more than its ripple.
    Shrinking,
}

/// The trend of a level: its slope and whether that slope is more than noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trend {
    /// The least-squares slope, per second.
    pub per_second: f64,
    /// Whether the level is filling, steady or shrinking.
    pub direction: Direction,
}

/// The least-squares trend of `(t_ms, value)` points (oldest first; values not finite
/// are left out). `None` with fewer than two points or no time between them.
pub fn fill_trend(points: &[(u64, f64)]) -> Option<Trend> {
    let points: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.1.is_finite())
        .map(|&(t, v)| (t as f64 / 1000.0, v))
        .collect();
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let t_mean = points.iter().map(|p| p.0).sum::<f64>() / n;
    let v_mean = points.iter().map(|p| p.1).sum::<f64>() / n;
    let spread_t: f64 = points.iter().map(|p| (p.0 - t_mean).powi(2)).sum();
    if spread_t <= 0.0 {
        return None;
    }
    let covariance: f64 = points.iter().map(|p| (p.0 - t_mean) * (p.1 - v_mean)).sum();
    let slope = covariance / spread_t;
    let residual = (points
        .iter()
        .map(|p| (p.1 - (v_mean + slope * (p.0 - t_mean))).powi(2))
        .sum::<f64>()
        / n)
        .sqrt();
    let span = points[points.len() - 1].0 - points[0].0;
    let rise = slope * span;
    let direction = if rise.abs() <= SIGNIFICANCE * residual || rise == 0.0 {
        Direction::Steady
    } else if rise > 0.0 {
        Direction::Filling
    } else {
        Direction::Shrinking
    };
    Some(Trend {
        per_second: slope,
        direction,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counter sampled once a second for `seconds`, growing by `batch` every `every`
    /// seconds (the sink delivers whole batches).
    fn batches(seconds: u64, batch: f64, every: u64) -> Vec<(u64, Option<f64>)> {
        (0..=seconds)
            .map(|s| (1_000 + s * 1_000, Some(batch * (s / every) as f64)))
            .collect()
    }

    #[test]
    fn a_sink_storing_1024_records_every_two_seconds_reads_about_512_per_second() {
        let samples = batches(120, 1024.0, 2);
        let mut shown = Vec::new();
        for end in 2..samples.len() {
            let rate = smoothed_rate(samples[..=end].iter().copied(), RATE_TIME_CONSTANT)
                .expect("two samples");
            shown.push(rate);
        }
        // From the second interval on it never reads 0 or 1,024 …
        for &rate in &shown {
            assert!(rate > 300.0 && rate < 700.0, "{shown:?}");
        }
        // … and after a few time constants it stays within 6% of 512.
        for &rate in &shown[40..] {
            assert!((rate - 512.0).abs() < 0.06 * 512.0, "{rate}");
        }
        // The raw one-second rate would flicker between the two.
        let raw: Vec<f64> = samples
            .windows(2)
            .map(|w| w[1].1.unwrap_or(0.0) - w[0].1.unwrap_or(0.0))
            .collect();
        assert!(raw.contains(&0.0) && raw.contains(&1024.0));
    }

    #[test]
    fn a_steady_rate_is_exact_from_the_first_interval_and_a_step_is_followed() {
        let steady: Vec<(u64, Option<f64>)> = (0..5)
            .map(|s| (s * 1_000, Some(100.0 * s as f64)))
            .collect();
        let rate = smoothed_rate(steady, RATE_TIME_CONSTANT).expect("rate");
        assert!((rate - 100.0).abs() < 1e-9, "{rate}");
        // 100/s for a minute, then 0/s: after one time constant, 63% of the way down.
        let mut samples: Vec<(u64, Option<f64>)> = (0..=60)
            .map(|s| (s * 1_000, Some(100.0 * s as f64)))
            .collect();
        samples.extend((61..=70).map(|s| (s * 1_000, Some(6_000.0))));
        let rate = smoothed_rate(samples, RATE_TIME_CONSTANT).expect("rate");
        assert!((rate - 100.0 / std::f64::consts::E).abs() < 1.0, "{rate}");
    }

    #[test]
    fn gaps_resets_and_too_few_samples() {
        assert_eq!(smoothed_rate([], RATE_TIME_CONSTANT), None);
        assert_eq!(smoothed_rate([(0, Some(5.0))], RATE_TIME_CONSTANT), None);
        assert_eq!(
            smoothed_rate([(0, Some(5.0)), (0, Some(9.0))], RATE_TIME_CONSTANT),
            None
        );
        // A missing sample: the interval spans the gap.
        let rate = smoothed_rate(
            [(0, Some(0.0)), (1_000, None), (2_000, Some(200.0))],
            RATE_TIME_CONSTANT,
        )
        .expect("rate");
        assert!((rate - 100.0).abs() < 1e-9, "{rate}");
        // A counter that restarts from zero is not a negative rate.
        let rate = smoothed_rate([(0, Some(500.0)), (1_000, Some(3.0))], RATE_TIME_CONSTANT);
        assert_eq!(rate, Some(0.0));
    }

    /// The WAL's disk use in a steady state: segments of `amplitude` bytes written over
    /// `period` seconds and deleted by retention, around `base`; plus `fill` bytes a
    /// second when it is filling.
    fn sawtooth(start: u64, base: f64, amplitude: f64, period: u64, fill: f64) -> Vec<(u64, f64)> {
        (start..start + TREND_WINDOW_SAMPLES as u64)
            .map(|s| {
                let phase = (s % period) as f64 / period as f64;
                (s * 1_000, base + amplitude * phase + fill * s as f64)
            })
            .collect()
    }

    #[test]
    fn a_sawtooth_of_segments_is_steady_at_every_phase() {
        const MIB: f64 = 1024.0 * 1024.0;
        for period in [5, 8, 14, 20, 30, 45] {
            for start in 0..120 {
                let points = sawtooth(start, 16.0 * MIB, 8.0 * MIB, period, 0.0);
                let trend = fill_trend(&points).expect("a trend");
                assert_eq!(
                    trend.direction,
                    Direction::Steady,
                    "period {period} s, start {start}: {trend:?}"
                );
            }
        }
    }

    #[test]
    fn a_filling_wal_under_a_ripple_is_filling_at_every_phase_at_about_its_rate() {
        const MIB: f64 = 1024.0 * 1024.0;
        for start in 0..120 {
            // 256 KiB/s of growth under 1 MiB segments deleted every 4 s.
            let points = sawtooth(start, 4.0 * MIB, MIB, 4, 0.25 * MIB);
            let trend = fill_trend(&points).expect("a trend");
            assert_eq!(trend.direction, Direction::Filling, "{start}: {trend:?}");
            let error = (trend.per_second - 0.25 * MIB).abs() / (0.25 * MIB);
            assert!(error < 0.1, "{start}: {trend:?}");
        }
        let shrinking: Vec<(u64, f64)> = (0..30).map(|s| (s * 1_000, 900.0 - s as f64)).collect();
        let trend = fill_trend(&shrinking).expect("a trend");
        assert_eq!(trend.direction, Direction::Shrinking);
        assert!((trend.per_second + 1.0).abs() < 1e-9, "{trend:?}");
    }

    #[test]
    fn too_few_points_have_no_trend() {
        assert_eq!(fill_trend(&[]), None);
        assert_eq!(fill_trend(&[(0, 1.0)]), None);
        assert_eq!(fill_trend(&[(5, 1.0), (5, 2.0)]), None);
        assert_eq!(fill_trend(&[(0, f64::NAN), (1_000, 2.0)]), None);
        let flat = fill_trend(&[(0, 7.0), (1_000, 7.0), (2_000, 7.0)]).expect("trend");
        assert_eq!(flat.direction, Direction::Steady);
    }
}
