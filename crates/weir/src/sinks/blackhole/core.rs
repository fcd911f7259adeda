//! The blackhole's pacing: how long to wait before a batch counts as taken, at `rate`
//! records per second. Sans-IO: takes `now` as an argument.

use std::time::{Duration, Instant};

/// Spaces batches so that on average at most `rate` records per second pass.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: u64,
    /// When the previous batch's share of time ends.
    free_at: Option<Instant>,
}

/// The longest a pacer lets credit accumulate while idle (no burst after a pause).
const MAX_IDLE_CREDIT: Duration = Duration::from_millis(100);

impl Pacer {
    /// A pacer for `rate` records per second.
    pub fn new(rate: u64) -> Self {
        Pacer {
            rate: rate.max(1),
            free_at: None,
        }
    }

    /// Records a batch of `records` taken at `now`; returns when it is done.
    pub fn take(&mut self, records: u64, now: Instant) -> Instant {
        let floor = now.checked_sub(MAX_IDLE_CREDIT).unwrap_or(now);
        let start = self.free_at.map_or(floor, |t| t.max(floor));
        let share = Duration::from_secs_f64(records as f64 / self.rate as f64);
        let done = start + share;
        self.free_at = Some(done);
        done.max(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paces_to_the_rate() {
        let t0 = Instant::now() + Duration::from_secs(1);
        let mut p = Pacer::new(100);
        // A fresh pacer has MAX_IDLE_CREDIT (100 ms = 10 records) of credit.
        assert_eq!(p.take(10, t0), t0);
        // Then each batch queues behind the previous one.
        assert_eq!(p.take(10, t0), t0 + Duration::from_millis(100));
        assert_eq!(p.take(5, t0), t0 + Duration::from_millis(150));
    }

    #[test]
    fn idle_time_gives_a_bounded_burst() {
        let t0 = Instant::now() + Duration::from_secs(1);
        let mut p = Pacer::new(100);
        p.take(1, t0);
        let later = t0 + Duration::from_secs(10);
        // At most MAX_IDLE_CREDIT of credit: 10 records are free, the 11th waits.
        assert_eq!(p.take(10, later), later);
        assert_eq!(p.take(1, later), later + Duration::from_millis(10));
    }
}
