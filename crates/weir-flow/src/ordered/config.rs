//! Configuration of the ordered stage, its retry policy, and Little's-law sizing.

use std::num::{NonZeroU32, NonZeroUsize};
use std::time::Duration;

use super::error::OrderedConfigError;

/// Capped exponential backoff with a bounded number of attempts.
///
/// Attempt `k` (the first is 1) that fails is retried after
/// `min(max_backoff, initial_backoff × multiplier^(k-1))`, until `max_attempts`
/// attempts have been made; the last failure is released as the result. There is no
/// jitter: the cores are deterministic, and a caller who needs jitter can spread the
/// backoff itself.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts in total, the first included. Default `3`; `1` disables retries.
    pub max_attempts: NonZeroU32,
    /// The wait before the second attempt. Default 100 ms.
    pub initial_backoff: Duration,
    /// The longest wait between attempts. Default 10 s.
    pub max_backoff: Duration,
    /// Each wait is this many times the previous one. Default `2.0`.
    pub multiplier: f64,
    /// Full jitter (AWS's "exponential backoff and jitter"): each wait is drawn
    /// uniformly from `[0, backoff(attempt)]`, so that operations failed together by
    /// one outage do not retry together. The draw is seeded (`jitter_seed`), so a stage
    /// run on a virtual clock stays deterministic. Default off.
    pub jitter: bool,
    /// Seed of the jitter draws.
    pub jitter_seed: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: NonZeroU32::new(3).unwrap_or(NonZeroU32::MIN),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            multiplier: 2.0,
            jitter: false,
            jitter_seed: 0,
        }
    }
}

impl RetryPolicy {
    /// No retries: the first failure is final.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: NonZeroU32::MIN,
            ..RetryPolicy::default()
        }
    }

    /// The same policy with full jitter on (see [`RetryPolicy::jitter`]).
    pub fn with_full_jitter(self, seed: u64) -> Self {
        RetryPolicy {
            jitter: true,
            jitter_seed: seed,
            ..self
        }
    }

    /// The longest wait after failed attempt number `attempt` (the first is 1): the wait
    /// itself without jitter, its upper bound with it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir_flow::ordered::RetryPolicy;
    ///
    /// let retry = RetryPolicy::default();
    /// assert_eq!(retry.backoff(1), Duration::from_millis(100));
    /// assert_eq!(retry.backoff(3), Duration::from_millis(400));
    /// assert_eq!(retry.backoff(30), Duration::from_secs(10)); // capped
    /// ```
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exponent = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let factor = self.multiplier.powi(exponent);
        let secs = self.initial_backoff.as_secs_f64() * factor;
        if !secs.is_finite() || secs >= self.max_backoff.as_secs_f64() {
            return self.max_backoff;
        }
        Duration::from_secs_f64(secs)
    }
}

/// The bounds and policies of an ordered stage.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OrderedConfig {
    /// Operations running or waiting to retry at once (`N`).
    pub max_in_flight: NonZeroUsize,
    /// Results completed and not yet taken, at most (a hard bound). Every admitted
    /// operation reserves a place: a submission is admitted only while
    /// `in_flight + held < max_held`. Must be at least `max_in_flight`; equal to it,
    /// the stage behaves like `buffered(N)` (a stalled head stops admission at once).
    /// Default: `2 × max_in_flight`.
    pub max_held: usize,
    /// Bytes of results completed and not yet taken. Admission stops while
    /// `held_bytes >= max_held_bytes`; a result's weight is known only when it
    /// completes, so operations already in flight can still land and overshoot by at
    /// most their own weights. Default: unbounded (`u64::MAX`).
    pub max_held_bytes: u64,
    /// The time one attempt may take before it counts as failed (and is retried).
    /// `None`: no timeout. Default 30 s.
    pub attempt_timeout: Option<Duration>,
    /// Retries of failed or timed-out attempts.
    pub retry: RetryPolicy,
}

impl OrderedConfig {
    /// `max_in_flight` operations at once, with the documented defaults.
    pub fn new(max_in_flight: NonZeroUsize) -> Self {
        OrderedConfig {
            max_in_flight,
            max_held: max_in_flight.get().saturating_mul(2),
            max_held_bytes: u64::MAX,
            attempt_timeout: Some(Duration::from_secs(30)),
            retry: RetryPolicy::default(),
        }
    }

    /// Checks that the parameters are consistent.
    pub fn validate(&self) -> Result<(), OrderedConfigError> {
        if self.max_held < self.max_in_flight.get() {
            return Err(OrderedConfigError::HeldBelowInFlight {
                max_held: self.max_held,
                max_in_flight: self.max_in_flight.get(),
            });
        }
        if self.max_held_bytes == 0 {
            return Err(OrderedConfigError::ZeroHeldBytes);
        }
        if self.attempt_timeout.is_some_and(|t| t.is_zero()) {
            return Err(OrderedConfigError::ZeroTimeout);
        }
        let retry = &self.retry;
        if !(retry.multiplier >= 1.0 && retry.multiplier.is_finite())
            || retry.initial_backoff > retry.max_backoff
        {
            return Err(OrderedConfigError::Retry {
                multiplier: retry.multiplier,
            });
        }
        Ok(())
    }
}

/// The in-flight depth Little's law asks for: `ceil(throughput × latency)`.
///
/// To sustain `throughput_per_s` through a stage whose operations take `latency`, that
/// many must be in flight at once (seed 002). A non-finite or negative throughput
/// gives `0`; a result too large for `usize` saturates.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use weir_flow::ordered::littles_law_depth;
///
/// // 100 uploads per second at 1 s each: 100 in flight.
/// assert_eq!(littles_law_depth(100.0, Duration::from_secs(1)), 100);
/// // 250 per second at 30 ms: 7.5, rounded up.
/// assert_eq!(littles_law_depth(250.0, Duration::from_millis(30)), 8);
/// ```
pub fn littles_law_depth(throughput_per_s: f64, latency: Duration) -> usize {
    let depth = (throughput_per_s * latency.as_secs_f64()).ceil();
    if depth.is_nan() || depth <= 0.0 {
        return 0;
    }
    // Saturating float-to-int conversion is the documented behaviour.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let depth = depth as usize;
    depth
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn littles_law_edges() {
        assert_eq!(littles_law_depth(0.0, Duration::from_secs(1)), 0);
        assert_eq!(littles_law_depth(-5.0, Duration::from_secs(1)), 0);
        assert_eq!(littles_law_depth(f64::NAN, Duration::from_secs(1)), 0);
        assert_eq!(
            littles_law_depth(f64::INFINITY, Duration::from_secs(1)),
            usize::MAX
        );
        assert_eq!(littles_law_depth(0.001, Duration::from_millis(1)), 1);
    }

    #[test]
    fn config_validation() {
        let n = NonZeroUsize::new(4).unwrap();
        let mut c = OrderedConfig::new(n);
        assert_eq!(c.max_held, 8);
        assert!(c.validate().is_ok());
        c.max_held = 3;
        assert_eq!(
            c.validate(),
            Err(OrderedConfigError::HeldBelowInFlight {
                max_held: 3,
                max_in_flight: 4
            })
        );
        let mut c = OrderedConfig::new(n);
        c.retry.multiplier = 0.5;
        assert!(matches!(
            c.validate(),
            Err(OrderedConfigError::Retry { .. })
        ));
    }
}
