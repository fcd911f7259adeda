//! The semaphore's statistics: the shared [`FlowStats`] plus its own gauges.

use crate::FlowStats;

use super::amount::Amount;

/// A semaphore's [`FlowStats`] plus the gauges and refusal reasons only a semaphore has.
///
/// How the flow counters map onto a semaphore (each acquire request is one "item"):
///
/// | field | meaning here |
/// |---|---|
/// | `offered` | acquire requests decided (granted or refused) or waiting now; a resize that grows counts as one request for the increase |
/// | `accepted` | requests granted at once or queued (not refused on arrival) |
/// | `delivered` | requests granted |
/// | `rejected` | requests refused: too many waiters, timeout, too large, closed, no permits for `try_acquire`, and waiting requests withdrawn by dropping their future (broken down below) |
/// | `depth` | requests waiting now |
/// | `bytes` | what the waiting requests ask for, in bytes |
/// | `oldest_age` | how long the head of the queue (the oldest waiter) has waited |
/// | `max_depth` | the most requests ever waiting at once |
/// | `max_queue_wait` | the longest wait of a request that was then granted |
///
/// `dropped_*`, `expired` and `superseded` stay zero. Conservation holds at every instant:
/// `offered = delivered + rejected + depth`, and `rejected` is the sum of the six reasons.
///
/// # Examples
///
/// ```
/// use weir_flow::semaphore::{Semaphore, SemaphoreConfig};
///
/// let sem = Semaphore::new(SemaphoreConfig::new(10));
/// let held = sem.try_acquire(8).expect("free");
/// assert!(sem.try_acquire(5).is_err());
/// let stats = sem.semaphore_stats();
/// assert_eq!((stats.total, stats.held, stats.available), (10, 8, 2));
/// assert_eq!((stats.flow.offered, stats.flow.delivered, stats.flow.rejected), (2, 1, 1));
/// assert_eq!(stats.rejected_no_permits, 1);
/// assert!(stats.flow.is_conserved());
/// # drop(held);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreStats<A: Amount = u64> {
    /// The flow counters, mapped as in the table above.
    pub flow: FlowStats,
    /// The semaphore's total (lowered by [`Permit::forget`](super::Permit::forget),
    /// raised by `add_permits`).
    pub total: A,
    /// What is free now: `total - held`, zero while an oversize permit is held.
    pub available: A,
    /// What granted permits hold now (above `total` while an oversize permit is held).
    pub held: A,
    /// Requests waiting now (the same as `flow.depth`).
    pub waiters: usize,
    /// What the waiting requests ask for.
    pub waiting: A,
    /// Refused at once because `max_waiters` requests were already waiting.
    pub rejected_too_many_waiters: u64,
    /// Refused after waiting for their whole timeout.
    pub rejected_timeout: u64,
    /// Refused because they were larger than the total under `Oversize::Reject`.
    pub rejected_too_large: u64,
    /// Refused because the semaphore was closed (on arrival or while waiting).
    pub rejected_closed: u64,
    /// `try_acquire` calls that found no permits free.
    pub rejected_no_permits: u64,
    /// Waiting requests withdrawn because their future was dropped.
    pub cancelled: u64,
}
