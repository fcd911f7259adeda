//! Why an acquire was refused.

use std::time::Duration;

use super::amount::Amount;

/// Why [`Semaphore::acquire`](super::Semaphore::acquire) (or a timed, resizing or dual
/// acquire) gave no permit.
///
/// `A` is what permits are counted in: `u64` for a [`Semaphore`](super::Semaphore),
/// [`DualAmount`](super::DualAmount) for a [`DualSemaphore`](super::DualSemaphore).
///
/// # Examples
///
/// ```
/// use weir_flow::semaphore::{AcquireError, Semaphore, SemaphoreConfig};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let sem = Semaphore::new(SemaphoreConfig::new(100).max_waiters(0));
/// let _all = sem.acquire(100).await.expect("free");
/// match sem.acquire(1).await {
///     Err(AcquireError::TooManyWaiters { max_waiters }) => assert_eq!(max_waiters, 0),
///     other => panic!("expected a refusal, got {other:?}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AcquireError<A: Amount = u64> {
    /// The semaphore was closed before the request could be granted.
    #[error(
        "the semaphore is closed: expected an open semaphore, found one closed by `close()`; \
         stop submitting work to it (permits already held stay valid)"
    )]
    Closed,
    /// `max_waiters` requests were already queued, so this one was refused at once.
    #[error(
        "too many waiters: at most {max_waiters} acquires may wait and that many are queued; \
         shed or retry this request later, or raise `max_waiters`"
    )]
    TooManyWaiters {
        /// The configured bound on queued acquires.
        max_waiters: usize,
    },
    /// The request waited in the FIFO queue for its whole timeout without being granted.
    #[error(
        "no permit within the timeout: waited {waited:?} in the FIFO queue without being \
         granted; shed or retry the request, or give it a longer timeout"
    )]
    Timeout {
        /// How long the request waited before it was refused.
        waited: Duration,
    },
    /// The request is larger than the semaphore's total and the oversize policy is
    /// [`Oversize::Reject`](super::Oversize::Reject).
    #[error(
        "request too large: asked for {requested} but the semaphore's total is {total} and \
         the oversize policy is Reject; split the request, raise the total, or use \
         `Oversize::AdmitAloneWhenIdle`"
    )]
    TooLarge {
        /// What the request would have held once granted.
        requested: A,
        /// The semaphore's total.
        total: A,
    },
}

/// Why [`Semaphore::try_acquire`](super::Semaphore::try_acquire) gave no permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TryAcquireError<A: Amount = u64> {
    /// Not enough permits are free now, or other requests are queued ahead (FIFO: a
    /// `try_acquire` never overtakes a waiter).
    #[error(
        "no permits now: expected the request to fit in what is free with nobody queued \
         ahead, found too little free or waiters queued; use `acquire().await` to wait"
    )]
    NoPermits,
    /// The request is larger than the total and the oversize policy is
    /// [`Oversize::Reject`](super::Oversize::Reject).
    #[error(
        "request too large: asked for {requested} but the semaphore's total is {total} and \
         the oversize policy is Reject; split the request, raise the total, or use \
         `Oversize::AdmitAloneWhenIdle`"
    )]
    TooLarge {
        /// What the request would have held once granted.
        requested: A,
        /// The semaphore's total.
        total: A,
    },
    /// The semaphore is closed.
    #[error(
        "the semaphore is closed: expected an open semaphore, found one closed by `close()`; \
         stop submitting work to it (permits already held stay valid)"
    )]
    Closed,
}
