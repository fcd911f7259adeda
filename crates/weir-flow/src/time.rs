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

/// Maps a monotonic clock onto [`Timestamp`]s for the async shells.
///
/// Two sources:
///
/// - [`Clock::new`] reads tokio's clock. It honours tokio's paused test clock
///   (`tokio::time::pause`), so shells can be tested with virtual time. Each reading
///   is a full-resolution `CLOCK_MONOTONIC` reading (plus, with tokio's `test-util`
///   feature, a look-up of the runtime's clock).
/// - [`Clock::coarse`] reads `CLOCK_MONOTONIC_COARSE` on Linux: the time of the last
///   timer tick, several times cheaper to read, with the tick as its resolution
///   (typically 1–4 ms, see [`Clock::resolution`]). It ignores tokio's paused clock.
///   Elsewhere it falls back to [`std::time::Instant`] (full resolution, paused clock
///   still ignored).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use weir_flow::Clock;
///
/// let clock = Clock::coarse();
/// let t0 = clock.now();
/// std::thread::sleep(Duration::from_millis(20));
/// // A coarse reading lags the true time by less than one tick.
/// let elapsed = clock.now().saturating_duration_since(t0);
/// assert!(elapsed + clock.resolution() >= Duration::from_millis(20));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// The tokio instant at the origin (also used to place timers for coarse clocks).
    origin: tokio::time::Instant,
    source: Source,
}

/// Where [`Clock::now`] reads the time.
#[derive(Debug, Clone, Copy)]
enum Source {
    Tokio,
    Coarse(coarse::Origin),
}

impl Clock {
    /// A clock on tokio's time (honouring its paused test clock) whose origin is now.
    pub fn new() -> Self {
        Clock {
            origin: tokio::time::Instant::now(),
            source: Source::Tokio,
        }
    }

    /// A cheap clock of coarse resolution whose origin is now (see [`Clock`]); it does
    /// not honour tokio's paused clock.
    pub fn coarse() -> Self {
        Clock {
            origin: tokio::time::Instant::now(),
            source: Source::Coarse(coarse::Origin::now()),
        }
    }

    /// Whether this clock honours tokio's paused test clock ([`Clock::new`]).
    pub fn follows_tokio(&self) -> bool {
        matches!(self.source, Source::Tokio)
    }

    /// The current time on this clock.
    #[inline]
    pub fn now(&self) -> Timestamp {
        let elapsed = match self.source {
            Source::Tokio => self.origin.elapsed(),
            Source::Coarse(origin) => origin.elapsed(),
        };
        Timestamp(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
    }

    /// How far a reading may lag the true time: zero for [`Clock::new`], one timer
    /// tick for [`Clock::coarse`] on Linux.
    pub fn resolution(&self) -> Duration {
        match self.source {
            Source::Tokio => Duration::ZERO,
            Source::Coarse(_) => coarse::resolution(),
        }
    }

    /// The tokio instant that corresponds to `t`, for timers (for a coarse clock, to
    /// within its resolution).
    pub fn instant_at(&self, t: Timestamp) -> tokio::time::Instant {
        self.origin + Duration::from_nanos(t.0)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// `CLOCK_MONOTONIC_COARSE` through rustix's vDSO call.
#[cfg(target_os = "linux")]
mod coarse {
    use std::time::Duration;

    use rustix::time::{ClockId, Timespec, clock_getres, clock_gettime};

    #[derive(Debug, Clone, Copy)]
    pub(super) struct Origin(Timespec);

    impl Origin {
        pub(super) fn now() -> Self {
            Origin(clock_gettime(ClockId::MonotonicCoarse))
        }

        #[inline]
        pub(super) fn elapsed(self) -> Duration {
            nanos_between(self.0, clock_gettime(ClockId::MonotonicCoarse))
        }
    }

    pub(super) fn resolution() -> Duration {
        let res = clock_getres(ClockId::MonotonicCoarse);
        nanos_between(
            Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            res,
        )
    }

    /// `to - from`, or zero if `to` is earlier.
    #[inline]
    fn nanos_between(from: Timespec, to: Timespec) -> Duration {
        let nanos = |t: Timespec| i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec);
        let diff = (nanos(to) - nanos(from)).max(0);
        Duration::from_nanos(u64::try_from(diff).unwrap_or(u64::MAX))
    }
}

/// Elsewhere: the standard monotonic clock.
#[cfg(not(target_os = "linux"))]
mod coarse {
    use std::time::{Duration, Instant};

    #[derive(Debug, Clone, Copy)]
    pub(super) struct Origin(Instant);

    impl Origin {
        pub(super) fn now() -> Self {
            Origin(Instant::now())
        }

        #[inline]
        pub(super) fn elapsed(self) -> Duration {
            self.0.elapsed()
        }
    }

    pub(super) fn resolution() -> Duration {
        Duration::ZERO
    }
}
