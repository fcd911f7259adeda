//! What the producer sends and how long the consumer needs: the workload of a run.

use std::num::NonZeroU64;

use crate::rng::SimRng;

/// How messages arrive, as the gap between one message's entry and the next one's
/// due time.
///
/// The first message is due at t=0. Message `i + 1` is due `gap` milliseconds after
/// message `i` *entered* (was accepted, refused or sent), so a producer that had to
/// wait shifts the rest of its schedule instead of catching up in a burst.
///
/// # Examples
///
/// ```
/// use weir_sim::{Arrivals, ArrivalGaps};
///
/// let mut gaps = ArrivalGaps::new(&Arrivals::Bursts { size: 3, every_ms: 100 });
/// let first: Vec<u64> = (0..6).map(|_| gaps.next_gap_ms()).collect();
/// assert_eq!(first, [0, 0, 100, 0, 0, 100]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Arrivals {
    /// One message every `interval_ms`.
    Constant {
        /// Milliseconds between messages.
        interval_ms: u64,
    },
    /// A Poisson process: exponentially distributed gaps, rounded to whole milliseconds.
    Poisson {
        /// The mean gap in milliseconds.
        mean_interval_ms: f64,
        /// The seed of the gaps.
        seed: u64,
    },
    /// `size` messages at once, then the next burst `every_ms` later.
    Bursts {
        /// Messages per burst (zero counts as one).
        size: u64,
        /// Milliseconds from one burst to the next.
        every_ms: u64,
    },
}

/// The stream of gaps an [`Arrivals`] process produces.
#[derive(Debug, Clone)]
pub struct ArrivalGaps {
    arrivals: Arrivals,
    rng: SimRng,
    index: u64,
}

impl ArrivalGaps {
    /// The gaps of `arrivals`, from the first message on.
    pub fn new(arrivals: &Arrivals) -> Self {
        let seed = match arrivals {
            Arrivals::Poisson { seed, .. } => *seed,
            _ => 0,
        };
        ArrivalGaps {
            arrivals: arrivals.clone(),
            rng: SimRng::new(seed),
            index: 0,
        }
    }

    /// The gap in milliseconds between the message just sent and the next one.
    pub fn next_gap_ms(&mut self) -> u64 {
        self.index += 1;
        match &self.arrivals {
            Arrivals::Constant { interval_ms } => *interval_ms,
            Arrivals::Poisson {
                mean_interval_ms, ..
            } => {
                let gap = self.rng.exponential(*mean_interval_ms).round();
                // An f64 → u64 cast saturates; the gap is finite and non-negative.
                gap as u64
            }
            Arrivals::Bursts { size, every_ms } => {
                if self.index.is_multiple_of((*size).max(1)) {
                    *every_ms
                } else {
                    0
                }
            }
        }
    }
}

/// A period of the service-time schedule: services that *start* in
/// `[from_ms, until_ms)` take `service_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServicePeriod {
    /// First millisecond of the period.
    pub from_ms: u64,
    /// First millisecond after the period.
    pub until_ms: u64,
    /// Service time of a message whose service starts in the period.
    pub service_ms: NonZeroU64,
}

/// A piecewise-constant service-time schedule.
///
/// A service's duration is fixed when it starts: the first period containing the start
/// time decides, and `default_ms` applies outside every period.
///
/// # Examples
///
/// ```
/// use std::num::NonZeroU64;
/// use weir_sim::{ServicePeriod, ServiceSchedule};
///
/// let five = NonZeroU64::new(5).unwrap();
/// let twenty = NonZeroU64::new(20).unwrap();
/// let schedule = ServiceSchedule::new(five)
///     .with_period(ServicePeriod { from_ms: 2_000, until_ms: 6_000, service_ms: twenty });
/// assert_eq!(schedule.service_ms(1_999), 5);
/// assert_eq!(schedule.service_ms(2_000), 20);
/// assert_eq!(schedule.service_ms(5_999), 20);
/// assert_eq!(schedule.service_ms(6_000), 5);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceSchedule {
    default_ms: NonZeroU64,
    periods: Vec<ServicePeriod>,
}

impl ServiceSchedule {
    /// A schedule with the same service time everywhere.
    pub fn new(default_ms: NonZeroU64) -> Self {
        ServiceSchedule {
            default_ms,
            periods: Vec::new(),
        }
    }

    /// The schedule with one more period (earlier periods win where they overlap).
    pub fn with_period(mut self, period: ServicePeriod) -> Self {
        self.periods.push(period);
        self
    }

    /// The service time outside every period.
    pub fn default_ms(&self) -> u64 {
        self.default_ms.get()
    }

    /// The periods, in the order they were added.
    pub fn periods(&self) -> &[ServicePeriod] {
        &self.periods
    }

    /// The duration of a service that starts at `start_ms`.
    pub fn service_ms(&self, start_ms: u64) -> u64 {
        self.periods
            .iter()
            .find(|p| (p.from_ms..p.until_ms).contains(&start_ms))
            .map_or(self.default_ms, |p| p.service_ms)
            .get()
    }
}

/// Everything a single-consumer run needs besides the strategy: how many messages, when
/// they arrive and how long each takes to handle.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Messages the producer sends in total.
    pub messages: u64,
    /// When they arrive.
    pub arrivals: Arrivals,
    /// How long the consumer needs for each.
    pub service: ServiceSchedule,
}
