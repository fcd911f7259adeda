//! The sans-IO watermark controller.

use std::time::Duration;

use super::error::WatermarkError;
use crate::Timestamp;

/// A change of state the caller must act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transition {
    /// Stop producing (e.g. `KafkaConsumer::pause`): the depth reached the high watermark.
    Pause,
    /// Produce again (e.g. `KafkaConsumer::resume`): the depth fell to the low watermark.
    Resume,
}

/// High/low hysteresis over a depth: `Pause` once when the depth reaches `high`,
/// `Resume` once when it falls back to `low`.
///
/// The rule, applied by [`observe`](Self::observe):
///
/// * while **running**, a depth `>= high` pauses and returns [`Transition::Pause`];
/// * while **paused**, a depth `<= low` resumes and returns [`Transition::Resume`];
/// * anything else returns `None`.
///
/// So transitions alternate, starting with `Pause`, and a depth that lingers around
/// one watermark produces one transition, not a flapping series: the band between
/// `low` and `high` gives each change a direction. With `low < high` (validated) one
/// observation never crosses both.
///
/// [`reset`](Self::reset) returns to running without a transition, for a Kafka
/// rebalance: the new assignment starts unpaused, so the local flag must follow.
///
/// # Examples
///
/// ```
/// use weir_flow::Timestamp;
/// use weir_flow::watermark::{Transition, Watermark};
///
/// let mut w = Watermark::new(400, 1600).unwrap();
/// let t = Timestamp::from_millis;
/// assert_eq!(w.observe(t(0), 1_000), None);
/// assert_eq!(w.observe(t(10), 1_995), Some(Transition::Pause));
/// assert_eq!(w.observe(t(20), 1_700), None); // still above: no second Pause
/// assert_eq!(w.observe(t(30), 800), None); // inside the band: stay paused
/// assert_eq!(w.observe(t(40), 362), Some(Transition::Resume));
/// assert_eq!(w.paused_time(t(40)).as_millis(), 30);
/// assert_eq!((w.pauses(), w.resumes()), (1, 1));
/// ```
#[derive(Debug, Clone)]
pub struct Watermark {
    low: u64,
    high: u64,
    paused_since: Option<Timestamp>,
    paused_total: Duration,
    pauses: u64,
    resumes: u64,
    resets: u64,
}

impl Watermark {
    /// A running controller that pauses at `depth >= high` and resumes at
    /// `depth <= low`. Fails unless `low < high`.
    pub fn new(low: u64, high: u64) -> Result<Self, WatermarkError> {
        if low >= high {
            return Err(WatermarkError::LowNotBelowHigh { low, high });
        }
        Ok(Watermark {
            low,
            high,
            paused_since: None,
            paused_total: Duration::ZERO,
            pauses: 0,
            resumes: 0,
            resets: 0,
        })
    }

    /// Feeds the current depth; returns the transition to act on, if any.
    pub fn observe(&mut self, now: Timestamp, depth: u64) -> Option<Transition> {
        match self.paused_since {
            None if depth >= self.high => {
                self.paused_since = Some(now);
                self.pauses += 1;
                Some(Transition::Pause)
            }
            Some(since) if depth <= self.low => {
                self.end_pause(now, since);
                self.resumes += 1;
                Some(Transition::Resume)
            }
            _ => None,
        }
    }

    /// Back to running without a transition (after a rebalance the new assignment is
    /// unpaused). A pause in progress ends now for [`paused_time`](Self::paused_time)
    /// but is not counted as a resume.
    pub fn reset(&mut self, now: Timestamp) {
        if let Some(since) = self.paused_since {
            self.end_pause(now, since);
        }
        self.resets += 1;
    }

    fn end_pause(&mut self, now: Timestamp, since: Timestamp) {
        self.paused_total += now.saturating_duration_since(since);
        self.paused_since = None;
    }

    /// Whether the controller is paused.
    pub fn is_paused(&self) -> bool {
        self.paused_since.is_some()
    }

    /// The low watermark.
    pub fn low(&self) -> u64 {
        self.low
    }

    /// The high watermark.
    pub fn high(&self) -> u64 {
        self.high
    }

    /// How many `Pause` transitions were emitted.
    pub fn pauses(&self) -> u64 {
        self.pauses
    }

    /// How many `Resume` transitions were emitted.
    pub fn resumes(&self) -> u64 {
        self.resumes
    }

    /// How many times [`reset`](Self::reset) was called.
    pub fn resets(&self) -> u64 {
        self.resets
    }

    /// Total time spent paused up to `now`, including a pause in progress.
    pub fn paused_time(&self, now: Timestamp) -> Duration {
        let ongoing = self
            .paused_since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        self.paused_total + ongoing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_must_be_below_high() {
        assert_eq!(
            Watermark::new(5, 5).unwrap_err(),
            WatermarkError::LowNotBelowHigh { low: 5, high: 5 }
        );
        assert!(Watermark::new(6, 5).is_err());
        assert!(Watermark::new(4, 5).is_ok());
    }

    #[test]
    fn exact_watermarks_trigger() {
        let mut w = Watermark::new(2, 8).unwrap();
        assert_eq!(w.observe(Timestamp::ZERO, 7), None);
        assert_eq!(w.observe(Timestamp::ZERO, 8), Some(Transition::Pause));
        assert_eq!(w.observe(Timestamp::ZERO, 3), None);
        assert_eq!(w.observe(Timestamp::ZERO, 2), Some(Transition::Resume));
    }

    #[test]
    fn reset_unpauses_silently_and_stops_the_pause_clock() {
        let mut w = Watermark::new(2, 8).unwrap();
        let _ = w.observe(Timestamp::from_millis(100), 9);
        w.reset(Timestamp::from_millis(250));
        assert!(!w.is_paused());
        assert_eq!(w.resumes(), 0);
        assert_eq!(w.resets(), 1);
        assert_eq!(
            w.paused_time(Timestamp::from_millis(1_000)),
            Duration::from_millis(150)
        );
        // Running again: the next crossing pauses again.
        assert_eq!(
            w.observe(Timestamp::from_millis(1_000), 9),
            Some(Transition::Pause)
        );
    }
}
