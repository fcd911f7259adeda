//! Losses logged without flooding the log: the first record a component quarantines,
//! dead-letters or drops is logged at once with its reason, and the ones after it are
//! summarized with counts at most every [`SUMMARY_EVERY`].
//!
//! A loss is never silent, and a stream of them is a few lines, not one per record:
//! 10,000 refused records are one line with the first reason, then one line per 10 s
//! with how many more and the first reason among them. A reason is formatted only when
//! it is kept: once per line, not once per record. The counters (`/metrics`) say how many in
//! all; the log says that it happens, since when, and why.
//!
//! A summary is due [`SUMMARY_EVERY`] after the line before it. It is written by the
//! next loss after that, or by a timer task armed on the runtime when the losses stop
//! (so the last ones are reported too), or by [`LossLog::flush`] at shutdown.

use std::fmt::Display;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::log_window::{LOG_EVERY, LogWindow};

/// The shortest time between two lines of one [`LossLog`].
pub const SUMMARY_EVERY: Duration = LOG_EVERY;

/// The level a [`LossLog`] writes at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The record was kept elsewhere (the quarantine): an operator should look.
    Warn,
    /// The record is gone: an operator must act.
    Error,
}

/// One kind of loss of one component, logged rate-limited. Cheap to clone (an `Arc`
/// inside); clones share the window.
#[derive(Debug, Clone)]
pub struct LossLog {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// `sink lake`, `source in`.
    who: String,
    /// What happened to the records: `quarantined`, `dropped: the quarantine is full`.
    what: String,
    severity: Severity,
    window: Mutex<Window>,
}

/// The counts since the last line ([`LogWindow`]), all in all, and the reason of the
/// first loss waiting for the next line.
#[derive(Debug, Default)]
struct Window {
    total: u64,
    counts: LogWindow,
    /// The reason of the first loss counted in `counts` and not logged yet.
    first_reason: String,
    /// A timer task will write the pending summary when it is due.
    timer_armed: bool,
}

/// A line to write, decided under the lock and written after it.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    First {
        records: u64,
        reason: String,
    },
    Summary {
        records: u64,
        total: u64,
        seconds: u64,
        reason: String,
    },
}

impl Window {
    /// Counts `records` lost for `reason` at `now`: the line to write now, if any.
    fn note(&mut self, now: Instant, records: u64, reason: &dyn Display) -> Option<Line> {
        self.total += records;
        let last = self.counts.logged_at();
        if last.is_some() && self.counts.pending() == 0 {
            self.first_reason = reason.to_string();
        }
        let records = self.counts.note(now, records)?;
        Some(match last {
            None => Line::First {
                records,
                reason: reason.to_string(),
            },
            Some(last) => self.summary_line(records, now, last),
        })
    }

    /// The pending summary, if there is one, and the window starts again at `now`.
    fn summary(&mut self, now: Instant) -> Option<Line> {
        let last = self.counts.logged_at().unwrap_or(now);
        let records = self.counts.take(now)?;
        Some(self.summary_line(records, now, last))
    }

    fn summary_line(&mut self, records: u64, now: Instant, last: Instant) -> Line {
        Line::Summary {
            records,
            total: self.total,
            seconds: now.saturating_duration_since(last).as_secs_f64().round() as u64,
            reason: std::mem::take(&mut self.first_reason),
        }
    }

    /// When the pending summary is due, if there is one.
    fn due_at(&self) -> Option<Instant> {
        self.counts.due_at()
    }
}

impl LossLog {
    /// A log for records of `who` (`sink lake`) that were `what` (`quarantined`).
    pub fn new(who: impl Into<String>, what: impl Into<String>, severity: Severity) -> Self {
        Self {
            inner: Arc::new(Inner {
                who: who.into(),
                what: what.into(),
                severity,
                window: Mutex::new(Window::default()),
            }),
        }
    }

    /// Notes `records` lost for `reason`: logged now if it is the first loss or a
    /// summary is due, else counted for the next summary (a timer task on the current
    /// tokio runtime writes it when it is due, if no loss comes first). `reason` is
    /// formatted only if it is the first since the last line.
    pub fn note(&self, records: u64, reason: &dyn Display) {
        if records == 0 {
            return;
        }
        let (line, arm) = {
            let mut window = self.lock();
            let line = window.note(Instant::now(), records, reason);
            let arm = match window.due_at() {
                Some(due) if !window.timer_armed => {
                    window.timer_armed = tokio::runtime::Handle::try_current().is_ok();
                    window.timer_armed.then_some(due)
                }
                _ => None,
            };
            (line, arm)
        };
        if let Some(line) = line {
            self.write(&line);
        }
        if let Some(due) = arm {
            let log = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(due.into()).await;
                log.write_due();
            });
        }
    }

    /// Writes the pending summary now, due or not (at shutdown).
    pub fn flush(&self) {
        let line = self.lock().summary(Instant::now());
        if let Some(line) = line {
            self.write(&line);
        }
    }

    /// Records noted in all.
    pub fn total(&self) -> u64 {
        self.lock().total
    }

    /// The timer's turn: writes the summary if it is still pending (a loss may have
    /// written it since), and lets the next pending loss arm a timer again.
    fn write_due(&self) {
        let line = {
            let mut window = self.lock();
            window.timer_armed = false;
            window.summary(Instant::now())
        };
        if let Some(line) = line {
            self.write(&line);
        }
    }

    fn write(&self, line: &Line) {
        let Inner {
            who,
            what,
            severity,
            ..
        } = &*self.inner;
        let text = match line {
            Line::First { records, reason } => format!(
                "{who}: {} {what}: {reason} (more are summarized at most every {}s)",
                plural(*records),
                SUMMARY_EVERY.as_secs()
            ),
            Line::Summary {
                records,
                total,
                seconds,
                reason,
            } => {
                let records = match records {
                    1 => "1 more record".to_owned(),
                    n => format!("{n} more records"),
                };
                let during = match seconds {
                    0 => "in under 1s".to_owned(),
                    s => format!("in the last {s}s"),
                };
                format!(
                    "{who}: {records} {what} {during} ({total} in all); the first of them: {reason}"
                )
            }
        };
        match severity {
            Severity::Warn => tracing::warn!("{text}"),
            Severity::Error => tracing::error!("{text}"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Window> {
        self.inner
            .window
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

fn plural(records: u64) -> String {
    if records == 1 {
        "1 record".to_owned()
    } else {
        format!("{records} records")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, seconds: u64) -> Instant {
        base + Duration::from_secs(seconds)
    }

    #[test]
    fn the_first_loss_is_a_line_with_its_reason() {
        let mut window = Window::default();
        let now = Instant::now();
        assert_eq!(
            window.note(now, 3, &"HTTP 400: bad"),
            Some(Line::First {
                records: 3,
                reason: "HTTP 400: bad".to_owned()
            })
        );
        assert_eq!(
            window.due_at(),
            None,
            "nothing pending after the first line"
        );
    }

    #[test]
    fn losses_within_the_window_wait_for_one_summary_with_counts() {
        let (mut window, t0) = (Window::default(), Instant::now());
        window.note(t0, 1, &"a");
        for s in 1..10 {
            assert_eq!(window.note(at(t0, s), 100, &format!("r{s}")), None);
        }
        assert_eq!(window.due_at(), Some(at(t0, 10)));
        assert_eq!(
            window.note(at(t0, 10), 1, &"r10"),
            Some(Line::Summary {
                records: 901,
                total: 902,
                seconds: 10,
                reason: "r1".to_owned()
            })
        );
        assert_eq!(window.due_at(), None);
        // The next window is counted from that summary.
        assert_eq!(window.note(at(t0, 15), 5, &"r15"), None);
        assert_eq!(window.due_at(), Some(at(t0, 20)));
    }

    #[test]
    fn a_summary_is_written_when_due_even_if_the_losses_stop() {
        let (mut window, t0) = (Window::default(), Instant::now());
        window.note(t0, 1, &"a");
        window.note(at(t0, 2), 7, &"b");
        assert_eq!(
            window.summary(at(t0, 10)),
            Some(Line::Summary {
                records: 7,
                total: 8,
                seconds: 10,
                reason: "b".to_owned()
            })
        );
        assert_eq!(window.summary(at(t0, 30)), None, "nothing more to say");
    }

    #[test]
    fn a_loss_after_a_quiet_spell_is_written_at_once() {
        let (mut window, t0) = (Window::default(), Instant::now());
        window.note(t0, 1, &"a");
        assert_eq!(
            window.note(at(t0, 60), 2, &"later"),
            Some(Line::Summary {
                records: 2,
                total: 3,
                seconds: 60,
                reason: "later".to_owned()
            })
        );
    }

    #[test]
    fn a_flood_is_a_few_lines_not_one_per_record() {
        let (mut window, t0) = (Window::default(), Instant::now());
        let mut lines = 0;
        // 10,000 records over 20 s, one every 2 ms.
        for i in 0..10_000u64 {
            let now = t0 + Duration::from_millis(i * 2);
            lines += u64::from(window.note(now, 1, &"x").is_some());
        }
        lines += u64::from(window.summary(at(t0, 30)).is_some());
        assert!(lines <= 3, "{lines} lines for 10,000 records");
        assert_eq!(window.total, 10_000);
    }

    #[test]
    fn a_reason_is_formatted_once_per_line_not_once_per_record() {
        struct Counted<'a>(&'a std::cell::Cell<u32>);
        impl Display for Counted<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.set(self.0.get() + 1);
                f.write_str("expensive")
            }
        }
        let (mut window, t0) = (Window::default(), Instant::now());
        let formatted = std::cell::Cell::new(0);
        for i in 0..1000 {
            window.note(t0 + Duration::from_millis(i), 1, &Counted(&formatted));
        }
        // The first line's, and the first of the pending ones.
        assert_eq!(formatted.get(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_timer_writes_the_pending_summary_and_rearms() {
        let log = LossLog::new("sink t", "quarantined", Severity::Warn);
        log.note(1, &"a");
        log.note(4, &"b");
        assert!(log.lock().timer_armed);
        assert_eq!(log.lock().counts.pending(), 4);
        tokio::time::advance(SUMMARY_EVERY - Duration::from_secs(1)).await;
        tokio::task::yield_now().await;
        assert_eq!(log.lock().counts.pending(), 4, "not due yet");
        tokio::time::advance(Duration::from_secs(2)).await;
        tokio::task::yield_now().await;
        let window = log.lock();
        assert_eq!(window.counts.pending(), 0, "the timer wrote the summary");
        assert!(!window.timer_armed, "the next loss may arm a timer again");
        assert_eq!(window.total, 5);
    }
}
