//! Demand helpers for subscribers: a fixed window and an age-driven adaptive window.

use std::num::NonZeroU64;
use std::time::Duration;

use super::error::WindowConfigError;
use crate::Timestamp;

/// The "window up front, one more per finished item" pattern.
///
/// `outstanding` counts items requested and not yet finished (still owed by the
/// publisher, queued at the subscriber, or being processed). [`top_up`](Self::top_up)
/// requests whatever brings `outstanding` back to the window, so with a fixed window
/// the first call requests the whole window and each later call, after one
/// [`finished`](Self::finished), requests one. Demand already granted cannot be taken
/// back (Reactive Streams has no "un-request"), so a smaller window takes effect as
/// items finish: `top_up` requests nothing until `outstanding` is below the window.
///
/// `top_up` never returns zero, so the caller never issues the stream-ending
/// `request(0)`.
///
/// # Examples
///
/// ```
/// use std::num::NonZeroU64;
/// use weir_flow::credit::WindowedDemand;
///
/// let mut window = WindowedDemand::new(NonZeroU64::new(10).unwrap());
/// assert_eq!(window.top_up().map(NonZeroU64::get), Some(10)); // the window up front
/// assert_eq!(window.top_up(), None); // nothing more until an item finishes
/// window.finished();
/// assert_eq!(window.top_up().map(NonZeroU64::get), Some(1)); // one more per finished item
/// ```
#[derive(Debug, Clone)]
pub struct WindowedDemand {
    window: u64,
    outstanding: u64,
}

impl WindowedDemand {
    /// A window of `window` items, nothing requested yet.
    pub fn new(window: NonZeroU64) -> Self {
        WindowedDemand {
            window: window.get(),
            outstanding: 0,
        }
    }

    /// How many items to `request` now to bring the outstanding count back up to the
    /// window, or `None` if it is already there. The returned amount counts as
    /// outstanding from now on.
    #[must_use = "the returned amount must be passed to request(n)"]
    pub fn top_up(&mut self) -> Option<NonZeroU64> {
        let missing = self.window.saturating_sub(self.outstanding);
        let n = NonZeroU64::new(missing)?;
        self.outstanding += missing;
        Some(n)
    }

    /// Records that one requested item finished (processed, dropped, or will never
    /// arrive). Calls beyond the outstanding count are ignored.
    pub fn finished(&mut self) {
        self.outstanding = self.outstanding.saturating_sub(1);
    }

    /// Changes the window. A larger window lets the next [`top_up`](Self::top_up)
    /// request more; a smaller one withholds requests until enough items finish.
    pub fn set_window(&mut self, window: NonZeroU64) {
        self.window = window.get();
    }

    /// The window.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Items requested and not yet finished.
    pub fn outstanding(&self) -> u64 {
        self.outstanding
    }
}

/// Parameters of an [`AdaptiveWindow`]. Build with [`AdaptiveWindowConfig::new`] and
/// adjust the public fields.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AdaptiveWindowConfig {
    /// The largest window, and the starting one.
    pub max_window: u64,
    /// The smallest window. Default `1`; at least `1`, since a zero window would stall
    /// the stream for good.
    pub min_window: u64,
    /// The oldest-item age the window is steered towards. Required.
    pub target_age: Duration,
    /// The window is multiplied by this (rounded down, at least `min_window`) on a
    /// shrink. Default `0.5`.
    pub decrease_factor: f64,
    /// The window grows by this many items on a grow step. Default `1`.
    pub increase_step: u64,
    /// The least time between two changes of the window. Default: `target_age`,
    /// because a shrink shows in the oldest age only after the items already queued
    /// have been worked off.
    pub adjust_interval: Duration,
}

impl AdaptiveWindowConfig {
    /// A configuration with the given maximum (and starting) window and target age,
    /// and the documented defaults for everything else.
    pub fn new(max_window: NonZeroU64, target_age: Duration) -> Self {
        AdaptiveWindowConfig {
            max_window: max_window.get(),
            min_window: 1,
            target_age,
            decrease_factor: 0.5,
            increase_step: 1,
            adjust_interval: target_age,
        }
    }

    /// Checks that the parameters are consistent.
    pub fn validate(&self) -> Result<(), WindowConfigError> {
        if self.target_age.is_zero() {
            return Err(WindowConfigError::ZeroTargetAge);
        }
        if self.min_window == 0 {
            return Err(WindowConfigError::ZeroMinWindow);
        }
        if self.min_window > self.max_window {
            return Err(WindowConfigError::MinAboveMax {
                min: self.min_window,
                max: self.max_window,
            });
        }
        if !(self.decrease_factor > 0.0 && self.decrease_factor < 1.0) {
            return Err(WindowConfigError::DecreaseFactor(self.decrease_factor));
        }
        Ok(())
    }
}

/// A credit window steered by the age of the oldest queued or unfinished item.
///
/// The rule, applied by [`observe`](Self::observe), at most once per
/// `adjust_interval`:
///
/// * **shrink** — when the oldest age is above `target_age`, the window becomes
///   `max(min_window, floor(window × decrease_factor))`;
/// * **grow** — when the oldest age is at or below `target_age`, the window becomes
///   `min(max_window, window + increase_step)`.
///
/// That is additive increase, multiplicative decrease on the window, with the oldest
/// age as the congestion signal: with a steady consumer the queue wait is about
/// `window × service time`, so the window settles where the oldest age hovers around
/// the target. Feed the result to [`WindowedDemand::set_window`].
///
/// # Examples
///
/// ```
/// use std::num::NonZeroU64;
/// use std::time::Duration;
/// use weir_flow::Timestamp;
/// use weir_flow::credit::{AdaptiveWindow, AdaptiveWindowConfig};
///
/// let config = AdaptiveWindowConfig::new(NonZeroU64::new(10).unwrap(), Duration::from_millis(100));
/// let mut window = AdaptiveWindow::new(config).unwrap();
/// assert_eq!(window.window().get(), 10);
///
/// // The oldest item is 180 ms old, above the 100 ms target: halve the window.
/// let w = window.observe(Timestamp::from_millis(1_000), Duration::from_millis(180));
/// assert_eq!(w.get(), 5);
/// // No second change within adjust_interval (100 ms).
/// assert_eq!(window.observe(Timestamp::from_millis(1_050), Duration::from_millis(180)).get(), 5);
/// // The age fell back under the target: grow by one step.
/// assert_eq!(window.observe(Timestamp::from_millis(1_100), Duration::from_millis(40)).get(), 6);
/// ```
#[derive(Debug, Clone)]
pub struct AdaptiveWindow {
    config: AdaptiveWindowConfig,
    window: u64,
    last_change: Option<Timestamp>,
    shrinks: u64,
    grows: u64,
}

impl AdaptiveWindow {
    /// A window starting at `config.max_window`.
    pub fn new(config: AdaptiveWindowConfig) -> Result<Self, WindowConfigError> {
        config.validate()?;
        Ok(AdaptiveWindow {
            window: config.max_window,
            config,
            last_change: None,
            shrinks: 0,
            grows: 0,
        })
    }

    /// Feeds the age of the oldest queued or unfinished item at `now` and returns the
    /// window to use from now on.
    pub fn observe(&mut self, now: Timestamp, oldest_age: Duration) -> NonZeroU64 {
        let due = match self.last_change {
            None => true,
            Some(at) => now.saturating_duration_since(at) >= self.config.adjust_interval,
        };
        if due {
            let before = self.window;
            if oldest_age > self.config.target_age {
                // Truncation is the documented rounding; the window fits in f64's range
                // of exact integers for every practical size.
                #[allow(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    clippy::cast_precision_loss
                )]
                let shrunk = (self.window as f64 * self.config.decrease_factor) as u64;
                self.window = shrunk.max(self.config.min_window);
                if self.window != before {
                    self.shrinks += 1;
                }
            } else {
                self.window = self
                    .window
                    .saturating_add(self.config.increase_step)
                    .min(self.config.max_window);
                if self.window != before {
                    self.grows += 1;
                }
            }
            if self.window != before {
                self.last_change = Some(now);
            }
        }
        self.window()
    }

    /// The current window.
    pub fn window(&self) -> NonZeroU64 {
        // min_window >= 1 is validated, and the window never goes below it.
        NonZeroU64::new(self.window).unwrap_or(NonZeroU64::MIN)
    }

    /// How many times the window shrank.
    pub fn shrinks(&self) -> u64 {
        self.shrinks
    }

    /// How many times the window grew.
    pub fn grows(&self) -> u64 {
        self.grows
    }

    /// The configuration.
    pub fn config(&self) -> &AdaptiveWindowConfig {
        &self.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nz(n: u64) -> NonZeroU64 {
        NonZeroU64::new(n).unwrap()
    }

    #[test]
    fn shrunk_window_withholds_requests_until_items_finish() {
        let mut w = WindowedDemand::new(nz(4));
        assert_eq!(w.top_up(), Some(nz(4)));
        w.set_window(nz(2));
        w.finished();
        assert_eq!(w.top_up(), None, "3 outstanding, window 2");
        w.finished();
        assert_eq!(w.top_up(), None, "2 outstanding, window 2");
        w.finished();
        assert_eq!(w.top_up(), Some(nz(1)));
        w.set_window(nz(5));
        assert_eq!(w.top_up(), Some(nz(3)));
        assert_eq!(w.outstanding(), 5);
    }

    #[test]
    fn window_never_leaves_its_bounds() {
        let mut config = AdaptiveWindowConfig::new(nz(8), Duration::from_millis(10));
        config.min_window = 2;
        let mut w = AdaptiveWindow::new(config).unwrap();
        let mut now = Timestamp::ZERO;
        for _ in 0..10 {
            now = now + Duration::from_millis(10);
            assert!(w.observe(now, Duration::from_secs(1)).get() >= 2);
        }
        assert_eq!(w.window().get(), 2);
        for _ in 0..20 {
            now = now + Duration::from_millis(10);
            assert!(w.observe(now, Duration::ZERO).get() <= 8);
        }
        assert_eq!(w.window().get(), 8);
        assert_eq!(w.shrinks(), 2, "8 -> 4 -> 2");
        assert_eq!(w.grows(), 6, "2 -> 8 one step at a time");
    }

    #[test]
    fn invalid_configs_are_refused() {
        let base = AdaptiveWindowConfig::new(nz(8), Duration::from_millis(10));
        let mut c = base.clone();
        c.min_window = 9;
        assert_eq!(
            AdaptiveWindow::new(c).unwrap_err(),
            WindowConfigError::MinAboveMax { min: 9, max: 8 }
        );
        let mut c = base.clone();
        c.decrease_factor = 1.0;
        assert!(matches!(
            AdaptiveWindow::new(c),
            Err(WindowConfigError::DecreaseFactor(_))
        ));
        let mut c = base;
        c.target_age = Duration::ZERO;
        assert_eq!(
            AdaptiveWindow::new(c).unwrap_err(),
            WindowConfigError::ZeroTargetAge
        );
    }
}
