//! The rate form: a token bucket whose rate is steered by AIMD.

use std::time::Duration;

use super::core::{AimdConfig, AimdController};
use super::error::AimdConfigError;
use crate::Timestamp;

/// Tolerance on a whole token, for floating-point error in the refill.
const TOKEN_EPSILON: f64 = 1e-6;

/// A token bucket whose refill rate (permits per second) grows additively while
/// latency stays on target and shrinks multiplicatively above it or on overload.
///
/// Take a permit with [`try_acquire`](Self::try_acquire) before each operation; feed
/// each operation's latency to [`observe`](Self::observe) (or a window's quantile to
/// [`observe_window`](Self::observe_window)) and explicit overload signals to
/// [`overload`](Self::overload). The bucket holds at most `rate × burst` tokens (at
/// least one) and starts full. See [`AimdController`] for the control rule and
/// [`AimdConfig::rate`] for the defaults.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use weir_flow::Timestamp;
/// use weir_flow::aimd::{AimdConfig, AimdRate};
///
/// let mut config = AimdConfig::rate(Duration::from_millis(50), 100.0);
/// config.burst = Duration::from_millis(20); // at most 2 tokens at 100/s
/// let mut limiter = AimdRate::new(config).unwrap();
/// let t0 = Timestamp::ZERO;
/// assert!(limiter.try_acquire(t0).is_ok());
/// assert!(limiter.try_acquire(t0).is_ok());
/// // Empty: the next token comes in 10 ms at 100 per second.
/// assert_eq!(limiter.try_acquire(t0), Err(Duration::from_millis(10)));
/// assert!(limiter.try_acquire(t0 + Duration::from_millis(10)).is_ok());
///
/// limiter.overload(t0 + Duration::from_millis(10));
/// assert_eq!(limiter.rate(), 80.0);
/// ```
#[derive(Debug, Clone)]
pub struct AimdRate {
    ctl: AimdController,
    tokens: f64,
    last_refill: Option<Timestamp>,
    granted: u64,
    refused: u64,
}

impl AimdRate {
    /// A limiter at `config.initial` permits per second, with a full bucket.
    pub fn new(config: AimdConfig) -> Result<Self, AimdConfigError> {
        let ctl = AimdController::new(config)?;
        let mut limiter = AimdRate {
            ctl,
            tokens: 0.0,
            last_refill: None,
            granted: 0,
            refused: 0,
        };
        limiter.tokens = limiter.capacity();
        Ok(limiter)
    }

    fn capacity(&self) -> f64 {
        (self.ctl.value() * self.ctl.config().burst.as_secs_f64()).max(1.0)
    }

    fn refill(&mut self, now: Timestamp) {
        if let Some(last) = self.last_refill {
            let elapsed = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + elapsed * self.ctl.value()).min(self.capacity());
        }
        // Never move the refill point backwards if `now` goes back.
        if self.last_refill.is_none_or(|last| now > last) {
            self.last_refill = Some(now);
        }
    }

    /// Runs a rate change: tokens accrued so far count at the old rate, and the
    /// bucket is clipped to the new capacity.
    fn steer(&mut self, now: Timestamp, change: impl FnOnce(&mut AimdController)) {
        self.refill(now);
        change(&mut self.ctl);
        self.tokens = self.tokens.min(self.capacity());
    }

    /// Takes one permit, or returns how long until the next token (at the current
    /// rate; the rate may change meanwhile, so try again then).
    pub fn try_acquire(&mut self, now: Timestamp) -> Result<(), Duration> {
        self.steer(now, |ctl| ctl.roll(now));
        // A token is "whole" within float error, so waiting exactly the returned time
        // always finds one.
        if self.tokens >= 1.0 - TOKEN_EPSILON {
            self.tokens = (self.tokens - 1.0).max(0.0);
            self.granted += 1;
            return Ok(());
        }
        self.refused += 1;
        self.ctl.mark_saturated(now);
        let wait_ns = ((1.0 - self.tokens) / self.ctl.value() * 1e9).ceil();
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let wait = Duration::from_nanos((wait_ns as u64).max(1));
        Err(wait)
    }

    /// Records one operation's latency.
    pub fn observe(&mut self, now: Timestamp, latency: Duration) {
        self.steer(now, |ctl| ctl.observe(now, latency));
    }

    /// Applies a window's quantile latency measured by the caller (seed 001's
    /// `observeLatency`).
    pub fn observe_window(&mut self, now: Timestamp, quantile_latency: Duration) {
        self.steer(now, |ctl| ctl.observe_window(now, quantile_latency));
    }

    /// An explicit overload signal: cut the rate now (at most once per window).
    pub fn overload(&mut self, now: Timestamp) {
        self.steer(now, |ctl| ctl.overload(now));
    }

    /// The current rate in permits per second.
    pub fn rate(&self) -> f64 {
        self.ctl.value()
    }

    /// Permits granted so far.
    pub fn granted(&self) -> u64 {
        self.granted
    }

    /// `try_acquire` calls refused so far.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// The control law, for its counters and configuration.
    pub fn controller(&self) -> &AimdController {
        &self.ctl
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_acquisition_follows_the_rate() {
        let mut config = AimdConfig::rate(Duration::from_millis(50), 200.0);
        config.burst = Duration::from_millis(5);
        let mut limiter = AimdRate::new(config).unwrap();
        let mut now = Timestamp::ZERO;
        let mut granted = 0;
        // Ten seconds of a caller that always wants more, at 1 ms steps.
        for _ in 0..10_000 {
            while limiter.try_acquire(now).is_ok() {
                granted += 1;
            }
            now = now + Duration::from_millis(1);
        }
        // No latency samples: the rate stays at 200/s.
        assert_eq!(limiter.rate(), 200.0);
        assert!((1_995..=2_002).contains(&granted), "granted {granted}");
    }

    #[test]
    fn waiting_the_returned_time_always_finds_a_token() {
        let mut limiter = AimdRate::new(AimdConfig::rate(Duration::from_millis(50), 30.0)).unwrap();
        let mut now = Timestamp::ZERO;
        while limiter.try_acquire(now).is_ok() {}
        for _ in 0..100 {
            let wait = limiter.try_acquire(now).unwrap_err();
            now = now + wait;
            assert!(limiter.try_acquire(now).is_ok());
        }
    }
}
