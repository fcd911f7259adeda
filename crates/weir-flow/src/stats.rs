//! The statistics every primitive keeps.

use std::time::Duration;

/// Counters and gauges kept by every weir-flow primitive.
///
/// Counters only grow. The conservation law holds at every instant:
///
/// ```text
/// offered = delivered + rejected + dropped_newest + dropped_oldest
///         + expired + superseded + depth
/// ```
///
/// where `depth` is what is still queued. [`FlowStats::is_conserved`] checks it.
///
/// # Examples
///
/// ```
/// use weir_flow::FlowStats;
///
/// // The struct is `#[non_exhaustive]`: outside the crate, start from the default.
/// let mut stats = FlowStats::default();
/// (stats.offered, stats.accepted, stats.rejected) = (3, 2, 1);
/// (stats.delivered, stats.depth) = (1, 1);
/// assert!(stats.is_conserved());
/// assert_eq!(stats.dropped(), 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlowStats {
    /// Items offered to the primitive (each counted once, when its fate is decided).
    pub offered: u64,
    /// Items that entered the queue (`offered - rejected - dropped_newest`).
    pub accepted: u64,
    /// Items handed to the consumer.
    pub delivered: u64,
    /// Items refused and handed back to the caller.
    pub rejected: u64,
    /// Incoming items dropped because the queue was full.
    pub dropped_newest: u64,
    /// Queued items evicted from the head to make room (handed back to the caller).
    pub dropped_oldest: u64,
    /// Queued items discarded because they were older than the deadline.
    pub expired: u64,
    /// Queued items replaced in place by a newer item with the same key.
    pub superseded: u64,
    /// Items queued now.
    pub depth: u64,
    /// Total weight (e.g. payload bytes) queued now.
    pub bytes: u64,
    /// Age of the oldest queued item at the time the stats were read.
    pub oldest_age: Duration,
    /// The largest `depth` ever observed.
    pub max_depth: u64,
    /// The longest time an item waited between entering the queue and being delivered.
    pub max_queue_wait: Duration,
}

impl FlowStats {
    /// All items dropped, newest and oldest.
    pub fn dropped(&self) -> u64 {
        self.dropped_newest + self.dropped_oldest
    }

    /// Every item offered that is no longer queued and was not delivered: the lost work.
    pub fn lost(&self) -> u64 {
        self.rejected + self.dropped() + self.expired + self.superseded
    }

    /// Whether `offered = delivered + rejected + dropped + expired + superseded + depth`.
    pub fn is_conserved(&self) -> bool {
        u128::from(self.offered)
            == u128::from(self.delivered) + u128::from(self.lost()) + u128::from(self.depth)
    }
}
