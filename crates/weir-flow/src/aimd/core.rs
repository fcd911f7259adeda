//! The AIMD control law shared by the rate and concurrency limiters.

use std::time::Duration;

use super::error::AimdConfigError;
use crate::Timestamp;

/// Parameters of an AIMD limiter. Build with [`AimdConfig::rate`] or
/// [`AimdConfig::concurrency`] and adjust the public fields.
///
/// The controlled value is a rate in permits per second (rate form) or a number of
/// operations in flight (concurrency form).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AimdConfig {
    /// The latency to steer by (compared with the window's `quantile`): a good start
    /// is half the downstream's latency SLO; one below the downstream's normal latency
    /// drives the limit to `min`. `None`: latency never decreases the value, only
    /// [`overload`](AimdController::overload) signals do (an HTTP client steered by
    /// 429s and timeouts alone).
    pub target_latency: Option<Duration>,
    /// The starting value.
    pub initial: f64,
    /// The smallest value. Rate default `20`/s (seed 001); concurrency default `1`.
    pub min: f64,
    /// The largest value. Rate default `50_000`/s (seed 001); concurrency default `1_000`.
    pub max: f64,
    /// Added once per window that stayed on target while the limit was in full use.
    /// Rate default `20` (per second, per window; seed 001); concurrency default `1`.
    /// With [`increase_per_round_trip`](Self::increase_per_round_trip), added once per
    /// round trip instead.
    pub increase: f64,
    /// Concurrency form only: grow like TCP's congestion window instead of once per
    /// window. Every operation that finishes while the limit is in full use adds
    /// `increase / limit`, so a full round trip of the limit's operations adds
    /// `increase`; a limit of 5 at 10 ms per operation reaches 40 in well under a
    /// second. Latency is still judged per window. Default `false`.
    pub increase_per_round_trip: bool,
    /// Multiplies the value on a decrease. Default `0.8` (seed 001).
    pub decrease_factor: f64,
    /// The statistics window: latency samples are judged once per window, and at most
    /// one decrease happens per window. Default one second.
    pub window: Duration,
    /// The quantile of a window's latencies compared with the target. Default `0.99`.
    pub quantile: f64,
    /// Rate form only: the bucket holds at most `rate × burst` tokens (at least one).
    /// Default one second (seed 001).
    pub burst: Duration,
}

impl AimdConfig {
    /// A rate-limiter configuration: `initial_per_s` permits per second to start with,
    /// steering by `target_latency`, with the documented rate defaults.
    pub fn rate(target_latency: impl Into<Option<Duration>>, initial_per_s: f64) -> Self {
        AimdConfig {
            target_latency: target_latency.into(),
            initial: initial_per_s,
            min: 20.0,
            max: 50_000.0,
            increase: 20.0,
            increase_per_round_trip: false,
            decrease_factor: 0.8,
            window: Duration::from_secs(1),
            quantile: 0.99,
            burst: Duration::from_secs(1),
        }
    }

    /// A concurrency-limiter configuration: `initial_limit` operations in flight to
    /// start with, steering by `target_latency` (`None`: by overload signals only),
    /// with the documented concurrency defaults.
    pub fn concurrency(target_latency: impl Into<Option<Duration>>, initial_limit: u32) -> Self {
        AimdConfig {
            initial: f64::from(initial_limit),
            min: 1.0,
            max: 1_000.0,
            increase: 1.0,
            ..AimdConfig::rate(target_latency, 0.0)
        }
    }

    /// Checks that the parameters are consistent.
    pub fn validate(&self) -> Result<(), AimdConfigError> {
        if self.target_latency.is_some_and(|t| t.is_zero()) {
            return Err(AimdConfigError::ZeroTargetLatency);
        }
        if self.window.is_zero() {
            return Err(AimdConfigError::ZeroWindow);
        }
        if self.burst.is_zero() {
            return Err(AimdConfigError::ZeroBurst);
        }
        if !(self.min > 0.0 && self.min <= self.max && self.max.is_finite()) {
            return Err(AimdConfigError::Bounds {
                min: self.min,
                max: self.max,
            });
        }
        if !(self.min..=self.max).contains(&self.initial) {
            return Err(AimdConfigError::InitialOutOfBounds {
                initial: self.initial,
                min: self.min,
                max: self.max,
            });
        }
        if !(self.decrease_factor > 0.0 && self.decrease_factor < 1.0) {
            return Err(AimdConfigError::DecreaseFactor(self.decrease_factor));
        }
        if !(self.increase >= 0.0 && self.increase.is_finite()) {
            return Err(AimdConfigError::Increase(self.increase));
        }
        if !(self.quantile > 0.0 && self.quantile < 1.0) {
            return Err(AimdConfigError::Quantile(self.quantile));
        }
        Ok(())
    }
}

/// Additive increase, multiplicative decrease of one value, judged per window.
///
/// The rule:
///
/// * Latency samples ([`observe`](Self::observe)) are collected per `window`. When a
///   window ends, if it holds samples and its `quantile` latency is above the target,
///   the value becomes `max(min, value × decrease_factor)`; if the quantile is at or
///   below the target **and** the limit was in full use during the window
///   ([`mark_saturated`](Self::mark_saturated)), it becomes
///   `min(max, value + increase)`. A window without samples, or on target but not
///   saturated, changes nothing: there is no evidence that more would be used.
/// * The quantile test needs no sample storage: the nearest-rank `q`-quantile is
///   above the target exactly when fewer than `ceil(q × n)` of the `n` samples are at
///   or below it.
/// * [`overload`](Self::overload) decreases at once, at most once per window (a burst
///   of overload signals from one episode cuts once), and starts a new window.
/// * [`observe_window`](Self::observe_window) is seed 001's `observeLatency`: the
///   caller measured the window's quantile itself; decrease if above target, else
///   increase.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use weir_flow::Timestamp;
/// use weir_flow::aimd::{AimdConfig, AimdController};
///
/// let mut ctl = AimdController::new(AimdConfig::rate(Duration::from_millis(50), 1_000.0)).unwrap();
/// ctl.observe_window(Timestamp::from_millis(1_000), Duration::from_millis(80));
/// assert_eq!(ctl.value(), 800.0); // over target: × 0.8
/// ctl.observe_window(Timestamp::from_millis(2_000), Duration::from_millis(30));
/// assert_eq!(ctl.value(), 820.0); // on target: + 20
/// ```
#[derive(Debug, Clone)]
pub struct AimdController {
    config: AimdConfig,
    value: f64,
    window_start: Option<Timestamp>,
    samples: u64,
    on_target: u64,
    saturated: bool,
    last_decrease: Option<Timestamp>,
    increases: u64,
    decreases: u64,
}

impl AimdController {
    /// A controller starting at `config.initial`.
    pub fn new(config: AimdConfig) -> Result<Self, AimdConfigError> {
        config.validate()?;
        Ok(AimdController {
            value: config.initial,
            config,
            window_start: None,
            samples: 0,
            on_target: 0,
            saturated: false,
            last_decrease: None,
            increases: 0,
            decreases: 0,
        })
    }

    /// Records one observed latency (measured after the downstream call returned,
    /// excluding time queued before it).
    pub fn observe(&mut self, now: Timestamp, latency: Duration) {
        self.roll(now);
        self.samples += 1;
        if self
            .config
            .target_latency
            .is_none_or(|target| latency <= target)
        {
            self.on_target += 1;
        }
    }

    /// Records that the limit was in full use (a caller was refused or waited), which
    /// allows the next on-target window to increase.
    pub fn mark_saturated(&mut self, now: Timestamp) {
        self.roll(now);
        self.saturated = true;
    }

    /// Applies a window's quantile latency measured by the caller: decrease if above
    /// the target, otherwise increase. Samples collected with
    /// [`observe`](Self::observe) are discarded and a new window starts.
    pub fn observe_window(&mut self, now: Timestamp, quantile_latency: Duration) {
        if self
            .config
            .target_latency
            .is_some_and(|target| quantile_latency > target)
        {
            self.decrease(now);
        } else {
            self.increase();
        }
        self.start_window(now);
    }

    /// An explicit overload signal (a 429/503, a timeout, a dropped request): decrease
    /// now unless a decrease already happened within the last window.
    pub fn overload(&mut self, now: Timestamp) {
        let recent = self
            .last_decrease
            .is_some_and(|at| now.saturating_duration_since(at) < self.config.window);
        if !recent {
            self.decrease(now);
            self.start_window(now);
        }
    }

    /// An overload signal that decreases now, whatever the last decrease (the caller
    /// decided it is news: the concurrency form's once-per-round-trip rule).
    pub fn decrease_now(&mut self, now: Timestamp) {
        self.decrease(now);
        self.start_window(now);
    }

    /// Closes the current window if it has ended.
    pub fn roll(&mut self, now: Timestamp) {
        let Some(start) = self.window_start else {
            self.start_window(now);
            return;
        };
        if now.saturating_duration_since(start) < self.config.window {
            return;
        }
        if self.samples > 0 {
            #[allow(
                clippy::cast_precision_loss,
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss
            )]
            let needed = (self.config.quantile * self.samples as f64).ceil() as u64;
            if self.on_target < needed {
                self.decrease(now);
            } else if self.saturated && !self.config.increase_per_round_trip {
                self.increase();
            }
        }
        self.start_window(now);
    }

    fn start_window(&mut self, now: Timestamp) {
        self.window_start = Some(now);
        self.samples = 0;
        self.on_target = 0;
        self.saturated = false;
    }

    fn decrease(&mut self, now: Timestamp) {
        self.value = (self.value * self.config.decrease_factor).max(self.config.min);
        self.last_decrease = Some(now);
        self.decreases += 1;
    }

    fn increase(&mut self) {
        self.value = (self.value + self.config.increase).min(self.config.max);
        self.increases += 1;
    }

    /// One round trip's share of an increase: adds `increase / value` (TCP's
    /// congestion avoidance), so a round trip of `value` operations adds `increase`.
    /// Used by the concurrency form with
    /// [`increase_per_round_trip`](AimdConfig::increase_per_round_trip).
    pub fn increase_per_ack(&mut self) {
        let before = self.value;
        self.value = (self.value + self.config.increase / self.value.max(1.0)).min(self.config.max);
        if before.floor() < self.value.floor() {
            self.increases += 1;
        }
    }

    /// When the last decrease happened, if one did.
    pub fn last_decrease(&self) -> Option<Timestamp> {
        self.last_decrease
    }

    /// The controlled value now.
    pub fn value(&self) -> f64 {
        self.value
    }

    /// How many increases happened.
    pub fn increases(&self) -> u64 {
        self.increases
    }

    /// How many decreases happened (latency or overload).
    pub fn decreases(&self) -> u64 {
        self.decreases
    }

    /// The configuration.
    pub fn config(&self) -> &AimdConfig {
        &self.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Timestamp {
        Timestamp::from_millis(n)
    }

    fn controller() -> AimdController {
        AimdController::new(AimdConfig::rate(Duration::from_millis(50), 100.0)).unwrap()
    }

    #[test]
    fn one_slow_sample_in_a_hundred_is_within_p99() {
        let mut ctl = controller();
        ctl.mark_saturated(ms(0));
        for i in 0..100 {
            let latency = if i == 0 { 500 } else { 10 };
            ctl.observe(ms(i), Duration::from_millis(latency));
        }
        ctl.roll(ms(1_000));
        assert_eq!(ctl.value(), 120.0);
    }

    #[test]
    fn two_slow_samples_in_a_hundred_break_p99() {
        let mut ctl = controller();
        for i in 0..100 {
            let latency = if i < 2 { 500 } else { 10 };
            ctl.observe(ms(i), Duration::from_millis(latency));
        }
        ctl.roll(ms(1_000));
        assert_eq!(ctl.value(), 80.0);
    }

    #[test]
    fn no_increase_without_saturation_or_samples() {
        let mut ctl = controller();
        ctl.observe(ms(0), Duration::from_millis(1));
        ctl.roll(ms(1_000));
        assert_eq!(ctl.value(), 100.0, "on target but the limit was not in use");
        ctl.mark_saturated(ms(1_500));
        ctl.roll(ms(2_000));
        assert_eq!(ctl.value(), 100.0, "saturated but no latency evidence");
    }

    #[test]
    fn overload_cuts_once_per_window_and_respects_min() {
        let mut ctl = controller();
        ctl.overload(ms(0));
        ctl.overload(ms(10));
        ctl.overload(ms(999));
        assert_eq!(ctl.value(), 80.0);
        for i in 1..30 {
            ctl.overload(ms(i * 1_000));
        }
        assert_eq!(ctl.value(), 20.0);
    }

    #[test]
    fn config_validation_names_the_problem() {
        let mut c = AimdConfig::rate(Duration::from_millis(50), 10.0);
        assert!(matches!(
            c.validate(),
            Err(AimdConfigError::InitialOutOfBounds { .. })
        ));
        c.initial = 100.0;
        c.decrease_factor = 1.5;
        assert_eq!(c.validate(), Err(AimdConfigError::DecreaseFactor(1.5)));
        c.decrease_factor = 0.8;
        c.target_latency = Some(Duration::ZERO);
        assert_eq!(c.validate(), Err(AimdConfigError::ZeroTargetLatency));
        assert!(
            AimdConfig::concurrency(Duration::from_millis(5), 10)
                .validate()
                .is_ok()
        );
    }
}
