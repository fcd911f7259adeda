//! Time as the sans-IO cores see it: a plain number handed in by the caller.

use std::time::Duration;

/// A point on a monotonic clock, in nanoseconds since an arbitrary origin.
///
/// Cores never read a clock: the caller passes `now`. Async shells get it from a
/// [`Clock`]; the simulator builds it from virtual milliseconds with
/// [`Timestamp::from_millis`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use weir_flow::Timestamp;
///
/// let t0 = Timestamp::from_millis(2_000);
/// let t1 = t0 + Duration::from_millis(500);
/// assert_eq!(t1.saturating_duration_since(t0), Duration::from_millis(500));
/// assert_eq!(t1.as_millis(), 2_500);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The origin of the clock.
    pub const ZERO: Timestamp = Timestamp(0);

    /// A timestamp `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Self {
        Timestamp(nanos)
    }

    /// A timestamp `millis` milliseconds after the origin.
    pub const fn from_millis(millis: u64) -> Self {
        Timestamp(millis.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Whole milliseconds since the origin (rounded down).
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }

    /// The time elapsed from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at the end of the clock.
    pub fn saturating_add(self, d: Duration) -> Timestamp {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(nanos))
    }
}

impl std::ops::Add<Duration> for Timestamp {
    type Output = Timestamp;

    fn add(self, d: Duration) -> Timestamp {
        self.saturating_add(d)
    }
}

/// Maps tokio's clock onto [`Timestamp`]s for the async shells.
///
/// It honours tokio's paused test clock (`tokio::time::pause`), so shells can be
/// tested with virtual time too.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: tokio::time::Instant,
}

impl Clock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Clock {
            origin: tokio::time::Instant::now(),
        }
    }

    /// The current time on this clock.
    pub fn now(&self) -> Timestamp {
        let nanos = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        Timestamp(nanos)
    }

    /// The tokio instant that corresponds to `t`, for timers.
    pub fn instant_at(&self, t: Timestamp) -> tokio::time::Instant {
        self.origin + Duration::from_nanos(t.0)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
