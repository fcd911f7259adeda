//! What the accept loop does after a failed accept: back off, and log without
//! flooding the log.
//!
//! A failed accept (EMFILE, ENFILE, ENOBUFS) leaves the connection in the listen
//! backlog, so trying again at once fails again at once. [`AcceptErrors`] is the
//! sans-IO policy: the delay doubles from [`BACKOFF_MIN`] to [`BACKOFF_MAX`] while
//! accepts keep failing, and the first failure is logged at once, the later ones at
//! most once every [`LOG_EVERY`] with how many there were ([`LogWindow`]).

use std::time::{Duration, Instant};

pub use crate::log_window::LOG_EVERY;
use crate::log_window::LogWindow;

/// The delay after the first failed accept of a streak.
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);

/// The longest delay between two accepts while they keep failing.
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Failed accepts: the current backoff and the log window.
#[derive(Debug, Default)]
pub struct AcceptErrors {
    /// The delay after the last failure of the current streak (`None`: no streak).
    delay: Option<Duration>,
    /// The log lines about them.
    log: LogWindow,
}

/// What to do after a failed accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptFailed {
    /// How long to wait before accepting again.
    pub retry_in: Duration,
    /// `Some(n)`: log a line now, covering `n` failures (this one and those not
    /// logged since the last line); `None`: this failure is counted for a later line.
    pub log: Option<u64>,
}

impl AcceptErrors {
    /// Counts a failed accept at `now`.
    pub fn failed(&mut self, now: Instant) -> AcceptFailed {
        let retry_in = self.delay.map_or(BACKOFF_MIN, |d| (d * 2).min(BACKOFF_MAX));
        self.delay = Some(retry_in);
        AcceptFailed {
            retry_in,
            log: self.log.note(now, 1),
        }
    }

    /// An accept succeeded: the next failure starts a new streak at the shortest delay
    /// (the log window stays).
    pub fn succeeded(&mut self) {
        self.delay = None;
    }
}
