//! At most one log line per interval: the first event at once, the later ones counted
//! and reported by the next line. The pure policy under every rate-limited line weir
//! writes: lost or dead-lettered records ([`crate::telemetry::LossLog`]), failed accepts
//! of the HTTP servers ([`crate::serve`]), failed NATS fetches.

use std::time::{Duration, Instant};

/// The shortest time between two lines of one window.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// Events since the last line, and when that line was written.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogWindow {
    logged_at: Option<Instant>,
    pending: u64,
}

impl LogWindow {
    /// Counts `n` events at `now`: `Some(count)` when a line is due now (the first
    /// event, or [`LOG_EVERY`] after the last line), `count` being the events since the
    /// last line, these included; `None` when they wait for a later line.
    pub fn note(&mut self, now: Instant, n: u64) -> Option<u64> {
        self.pending += n;
        let due = self
            .logged_at
            .is_none_or(|at| now.saturating_duration_since(at) >= LOG_EVERY);
        due.then(|| self.take(now)).flatten()
    }

    /// The events not logged yet, as a line written at `now`, due or not (a timer that
    /// found the line due, or a shutdown); `None` when there are none.
    pub fn take(&mut self, now: Instant) -> Option<u64> {
        (self.pending > 0).then(|| {
            self.logged_at = Some(now);
            std::mem::take(&mut self.pending)
        })
    }

    /// When the last line was written (`None`: never, so the next event is logged at
    /// once).
    pub fn logged_at(&self) -> Option<Instant> {
        self.logged_at
    }

    /// Events counted and not logged yet.
    pub fn pending(&self) -> u64 {
        self.pending
    }

    /// When the events waiting are due to be logged, if any wait.
    pub fn due_at(&self) -> Option<Instant> {
        (self.pending > 0)
            .then_some(self.logged_at)
            .flatten()
            .map(|at| at + LOG_EVERY)
    }

    /// The events stopped (a fetch or an accept worked again): the next one is logged
    /// at once.
    pub fn clear(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn repeated_errors_are_a_line_per_interval_with_counts() {
        let (mut log, t0) = (LogWindow::default(), Instant::now());
        assert_eq!(log.note(t0, 1), Some(1), "the first at once");
        let lines: Vec<u64> = (1..=100u64)
            .filter_map(|i| log.note(at(t0, i * 200), 1)) // 20 s of errors
            .collect();
        assert_eq!(lines, vec![50, 50], "one line per 10 s, with the count");
        log.clear();
        assert_eq!(
            log.note(at(t0, 20_100), 1),
            Some(1),
            "after a success, at once again"
        );
    }

    #[test]
    fn waiting_events_are_due_an_interval_after_the_last_line_and_can_be_taken_early() {
        let (mut log, t0) = (LogWindow::default(), Instant::now());
        assert_eq!(log.due_at(), None);
        log.note(t0, 3);
        assert_eq!(log.note(at(t0, 1_000), 4), None);
        assert_eq!(log.pending(), 4);
        assert_eq!(log.due_at(), Some(t0 + LOG_EVERY));
        assert_eq!(log.take(at(t0, 2_000)), Some(4), "a shutdown writes them");
        assert_eq!(log.take(at(t0, 3_000)), None, "nothing left");
        assert_eq!(log.logged_at(), Some(at(t0, 2_000)));
    }
}
