//! The async FIFO semaphore / memory limiter: the producer waits, and no thread does.
//!
//! A producer that must not outrun memory asks for what it is about to hold (bytes of
//! a batch, say) and gets a [`Permit`] when there is room. Waiting is a future, so an
//! event loop or runtime worker is never parked (the blocking answer that the Pulsar
//! client's `blockIfQueueFull` gives, and this module exists to avoid). The rules:
//!
//! - **Weighted** permits, in `u64` units ([`Semaphore`]) or items and bytes together
//!   ([`DualSemaphore`]).
//! - **Strict FIFO**: requests are granted in arrival order; a large request at the
//!   head is not overtaken by smaller ones behind it, and `try_acquire` does not barge.
//! - **Bounded waiters**: beyond `max_waiters`, an acquire fails at once with
//!   [`AcquireError::TooManyWaiters`].
//! - **Timeouts** per acquire ([`Semaphore::acquire_timeout`]) and **cancellation** by
//!   dropping the future, which withdraws the request and wakes the waiters behind it
//!   that now fit.
//! - [`Permit::resize`] (shrink at once; grow in FIFO turn), [`Permit::split`],
//!   [`Permit::forget`].
//! - [`Semaphore::close`] fails this semaphore's waiters (and nobody else's) with
//!   [`AcquireError::Closed`].
//! - An explicit [`Oversize`] policy for a request above the total: refuse it, or admit
//!   it alone when nothing else is held.
//!
//! The policy lives in a sans-IO [`SemaphoreCore`] (FIFO queue, grant decisions, stats;
//! it takes `now` and touches no clock), which the async shells wrap with one short
//! mutex critical section per operation. Stats are [`FlowStats`](crate::FlowStats),
//! mapped as documented on [`SemaphoreStats`].
//!
//! # Examples
//!
//! ```
//! use weir_flow::semaphore::{AcquireError, Oversize, Semaphore, SemaphoreConfig};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), AcquireError> {
//! let sem = Semaphore::new(SemaphoreConfig { total: 8 << 20, max_waiters: 1024, oversize: Oversize::Reject });
//! let permit = sem.acquire(1 << 20).await?;
//! assert_eq!(sem.available(), 7 << 20);
//! assert!(matches!(sem.acquire(9 << 20).await, Err(AcquireError::TooLarge { .. })));
//! drop(permit);
//! sem.close();
//! assert!(matches!(sem.acquire(1).await, Err(AcquireError::Closed)));
//! # Ok(()) }
//! ```

mod amount;
mod blocking;
mod core;
mod dual;
mod error;
mod raw;
mod shell;
mod stats;

#[cfg(test)]
mod core_tests;

pub use self::amount::{Amount, DualAmount};
pub use self::core::{Offer, Oversize, SemaphoreCore, WaiterId};
pub use self::dual::{DualPermit, DualSemaphore, DualSemaphoreConfig};
pub use self::error::{AcquireError, TryAcquireError};
pub use self::shell::{Permit, Semaphore, SemaphoreConfig};
pub use self::stats::SemaphoreStats;
