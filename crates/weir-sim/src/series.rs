//! Time series of a run, in fixed buckets of simulated time, and their CSV form.

use std::fmt::Write as _;

use crate::engine::{Observer, Step};

/// The bucket width the lab uses: 10 ms, one lesson message interval.
pub const DEFAULT_BUCKET_MS: u64 = 10;

/// One bucket of a [`Series`]: what happened in `[start_ms, start_ms + bucket_ms)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bucket {
    /// First millisecond of the bucket.
    pub start_ms: u64,
    /// The most messages waiting at the end of any millisecond in the bucket.
    pub depth_max: u64,
    /// The greatest age of the oldest waiting message in the bucket.
    pub oldest_age_ms_max: u64,
    /// Messages finished in the bucket.
    pub completions: u64,
    /// Messages lost in the bucket (rejected, dropped, expired or superseded).
    pub lost: u64,
}

/// A run's time series: an [`Observer`] that folds every millisecond into buckets.
///
/// # Examples
///
/// ```
/// use weir_sim::Series;
///
/// let series = Series::new(10);
/// assert!(series.buckets().is_empty());
/// assert_eq!(series.to_csv().lines().next(), Some("start_ms,depth_max,oldest_age_ms_max,completions,lost"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    bucket_ms: u64,
    buckets: Vec<Bucket>,
    completed_before: u64,
    lost_before: u64,
    /// The last step seen: its millisecond, depth and oldest age.
    last: Option<(u64, u64, u64)>,
}

impl Series {
    /// An empty series with buckets `bucket_ms` wide (at least 1).
    pub fn new(bucket_ms: u64) -> Self {
        Series {
            bucket_ms: bucket_ms.max(1),
            buckets: Vec::new(),
            completed_before: 0,
            lost_before: 0,
            last: None,
        }
    }

    /// The bucket width.
    pub fn bucket_ms(&self) -> u64 {
        self.bucket_ms
    }

    /// The buckets, oldest first.
    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    /// The series as CSV with a header line.
    pub fn to_csv(&self) -> String {
        let mut out = String::from("start_ms,depth_max,oldest_age_ms_max,completions,lost\n");
        for b in &self.buckets {
            // Writing to a String cannot fail.
            let _ = writeln!(
                out,
                "{},{},{},{},{}",
                b.start_ms, b.depth_max, b.oldest_age_ms_max, b.completions, b.lost
            );
        }
        out
    }
}

impl Series {
    /// Folds the milliseconds the engine skipped between the last step and `now_ms`:
    /// the depth stays as it was, and a waiting message keeps ageing.
    fn fill_gap(&mut self, now_ms: u64) {
        let Some((last_ms, depth, age_ms)) = self.last else {
            return;
        };
        let mut ms = last_ms + 1;
        while ms < now_ms {
            let start_ms = ms - ms % self.bucket_ms;
            let end_ms = (start_ms + self.bucket_ms - 1).min(now_ms - 1);
            let age_at_end = if depth > 0 {
                age_ms + (end_ms - last_ms)
            } else {
                0
            };
            if self.buckets.last().is_none_or(|b| b.start_ms != start_ms) {
                self.buckets.push(Bucket {
                    start_ms,
                    ..Bucket::default()
                });
            }
            if let Some(bucket) = self.buckets.last_mut() {
                bucket.depth_max = bucket.depth_max.max(depth);
                bucket.oldest_age_ms_max = bucket.oldest_age_ms_max.max(age_at_end);
            }
            ms = end_ms + 1;
        }
    }
}

impl Observer for Series {
    fn step(&mut self, step: &Step) {
        self.fill_gap(step.now_ms);
        let start_ms = step.now_ms - step.now_ms % self.bucket_ms;
        if self.buckets.last().is_none_or(|b| b.start_ms != start_ms) {
            self.buckets.push(Bucket {
                start_ms,
                ..Bucket::default()
            });
        }
        let age_ms = u64::try_from(step.stats.oldest_age.as_millis()).unwrap_or(u64::MAX);
        let lost = step.stats.lost();
        if let Some(bucket) = self.buckets.last_mut() {
            bucket.depth_max = bucket.depth_max.max(step.stats.depth);
            bucket.oldest_age_ms_max = bucket.oldest_age_ms_max.max(age_ms);
            bucket.completions += step.completed - self.completed_before;
            bucket.lost += lost - self.lost_before;
        }
        self.completed_before = step.completed;
        self.lost_before = lost;
        self.last = Some((step.now_ms, step.stats.depth, age_ms));
    }
}

#[cfg(test)]
mod tests {
    use weir_flow::FlowStats;

    use super::*;

    fn step(now_ms: u64, depth: u64, age_ms: u64, completed: u64) -> Step {
        let mut stats = FlowStats::default();
        stats.depth = depth;
        stats.oldest_age = std::time::Duration::from_millis(age_ms);
        Step {
            now_ms,
            sent: completed + depth,
            completed,
            in_service: false,
            stats,
        }
    }

    #[test]
    fn skipped_milliseconds_keep_the_depth_and_age_the_oldest_message() {
        let mut series = Series::new(10);
        series.step(&step(3, 2, 1, 0));
        series.step(&step(35, 1, 0, 1));
        let buckets = series.buckets();
        let starts: Vec<u64> = buckets.iter().map(|b| b.start_ms).collect();
        assert_eq!(starts, [0, 10, 20, 30]);
        // The message waiting since t=2 is 7, 17, 27 and 32 ms old at t=9, 19, 29 and 34.
        let ages: Vec<u64> = buckets.iter().map(|b| b.oldest_age_ms_max).collect();
        assert_eq!(ages, [7, 17, 27, 32]);
        assert!(buckets.iter().all(|b| b.depth_max == 2));
        assert_eq!(buckets[3].completions, 1);
    }

    #[test]
    fn an_empty_queue_has_no_age_in_a_gap() {
        let mut series = Series::new(10);
        series.step(&step(0, 0, 0, 0));
        series.step(&step(25, 0, 0, 0));
        assert!(series.buckets().iter().all(|b| b.oldest_age_ms_max == 0));
        assert_eq!(series.buckets().len(), 3);
    }
}
