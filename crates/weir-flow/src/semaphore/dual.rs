//! [`DualSemaphore`]: items and bytes acquired together, atomically, in one FIFO queue.

use std::fmt;
use std::time::Duration;

use crate::sync::Arc;
use crate::{Clock, FlowStats};

use super::amount::DualAmount;
use super::blocking::block_on;
use super::core::Oversize;
use super::error::{AcquireError, TryAcquireError};
use super::raw::{RawAcquire, RawPermit, Shared};
use super::stats::SemaphoreStats;

/// How a [`DualSemaphore`] is sized.
///
/// # Examples
///
/// ```
/// use weir_flow::semaphore::{DualAmount, DualSemaphoreConfig, Oversize};
///
/// let config = DualSemaphoreConfig::new(1_000, 8 << 20).max_waiters(64);
/// assert_eq!(config.total, DualAmount::new(1_000, 8 << 20));
/// assert_eq!(config.oversize, Oversize::Reject);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DualSemaphoreConfig {
    /// How many items and how many bytes may be held at once.
    pub total: DualAmount,
    /// How many acquires may wait; one more is refused at once.
    pub max_waiters: usize,
    /// What to do with a request larger than `total` in either dimension.
    pub oversize: Oversize,
}

impl DualSemaphoreConfig {
    /// `items` items and `bytes` bytes, 1024 waiters, [`Oversize::Reject`].
    pub fn new(items: u64, bytes: u64) -> Self {
        DualSemaphoreConfig {
            total: DualAmount::new(items, bytes),
            max_waiters: 1024,
            oversize: Oversize::Reject,
        }
    }

    /// Sets `max_waiters`.
    pub fn max_waiters(self, max_waiters: usize) -> Self {
        DualSemaphoreConfig {
            max_waiters,
            ..self
        }
    }

    /// Sets the oversize policy.
    pub fn oversize(self, oversize: Oversize) -> Self {
        DualSemaphoreConfig { oversize, ..self }
    }
}

/// A [`Semaphore`](super::Semaphore) counted in items and bytes at once: a request
/// for `(items, bytes)` is granted only when both fit, in one step, in one FIFO queue
/// across both dimensions. It replaces a pair of semaphores (one for pending messages,
/// one for memory), which could deadlock or reorder when taken one after the other.
///
/// Everything else — bounded waiters, timeouts, cancellation, oversize policy (a
/// request is oversize if it exceeds the total in either dimension), resize, split,
/// forget, close, stats (`bytes` counts the bytes dimension) — is as for
/// [`Semaphore`](super::Semaphore).
///
/// # Examples
///
/// ```
/// use weir_flow::semaphore::{DualAmount, DualSemaphore, DualSemaphoreConfig};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let pending = DualSemaphore::new(DualSemaphoreConfig::new(2, 1_000));
/// let a = pending.acquire(1, 10).await?;
/// let b = pending.acquire(1, 10).await?;
/// assert!(pending.try_acquire(1, 10).is_err()); // bytes are free, items are not
/// drop(a);
/// let c = pending.try_acquire(1, 900)?;
/// assert_eq!(pending.available(), DualAmount::new(0, 90));
/// # drop((b, c));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct DualSemaphore {
    shared: Arc<Shared<DualAmount>>,
}

impl DualSemaphore {
    /// A semaphore with `config.total` items and bytes free; stats on
    /// [`Clock::coarse`], as for [`Semaphore::new`](super::Semaphore::new).
    pub fn new(config: DualSemaphoreConfig) -> Self {
        DualSemaphore::with_clock(config, Clock::coarse())
    }

    /// A semaphore whose stats are read on `clock`.
    pub fn with_clock(config: DualSemaphoreConfig, clock: Clock) -> Self {
        DualSemaphore {
            shared: Shared::new(config.total, config.max_waiters, config.oversize, clock),
        }
    }

    /// Waits, in FIFO order, until `items` items and `bytes` bytes are both free, and
    /// holds them until the permit is dropped. Refused as
    /// [`Semaphore::acquire`](super::Semaphore::acquire) is.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future before it completes removes the request from
    /// the queue (or returns what was granted to it) and wakes the waiters behind it if
    /// they now fit.
    pub async fn acquire(
        &self,
        items: u64,
        bytes: u64,
    ) -> Result<DualPermit, AcquireError<DualAmount>> {
        let amount = DualAmount::new(items, bytes);
        RawAcquire::new(&self.shared, amount, DualAmount::default(), None).await?;
        Ok(self.permit(amount))
    }

    /// Like [`acquire`](Self::acquire), but refused with [`AcquireError::Timeout`] if
    /// not granted within `timeout` (on tokio's clock).
    ///
    /// # Panics
    ///
    /// If it has to wait outside a tokio runtime with the time driver enabled.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn acquire_timeout(
        &self,
        items: u64,
        bytes: u64,
        timeout: Duration,
    ) -> Result<DualPermit, AcquireError<DualAmount>> {
        let amount = DualAmount::new(items, bytes);
        RawAcquire::new(&self.shared, amount, DualAmount::default(), Some(timeout)).await?;
        Ok(self.permit(amount))
    }

    /// Takes `items` and `bytes` now or not at all; never overtakes a waiter.
    pub fn try_acquire(
        &self,
        items: u64,
        bytes: u64,
    ) -> Result<DualPermit, TryAcquireError<DualAmount>> {
        let amount = DualAmount::new(items, bytes);
        self.shared.try_acquire(amount)?;
        Ok(self.permit(amount))
    }

    /// [`acquire`](Self::acquire) for synchronous callers: parks the calling thread.
    /// Never call it on a thread that serves others.
    ///
    /// # Panics
    ///
    /// When called on a tokio runtime thread.
    pub fn acquire_blocking(
        &self,
        items: u64,
        bytes: u64,
    ) -> Result<DualPermit, AcquireError<DualAmount>> {
        block_on(
            "DualSemaphore::acquire_blocking",
            self.acquire(items, bytes),
        )
    }

    fn permit(&self, amount: DualAmount) -> DualPermit {
        DualPermit {
            raw: RawPermit::new(Arc::clone(&self.shared), amount),
        }
    }

    /// What is free now, in each dimension.
    pub fn available(&self) -> DualAmount {
        self.shared.lock().available()
    }

    /// The total, in each dimension.
    pub fn total(&self) -> DualAmount {
        self.shared.lock().total()
    }

    /// Raises the total by `items` and `bytes`, granting waiters that now fit.
    pub fn add_permits(&self, items: u64, bytes: u64) {
        self.shared.add_permits(DualAmount::new(items, bytes));
    }

    /// Fails every waiting acquire of this semaphore, and every later one, with
    /// [`AcquireError::Closed`]. Permits already held stay valid. Idempotent.
    pub fn close(&self) {
        self.shared.close();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().is_closed()
    }

    /// The flow counters (`bytes` counts the bytes dimension).
    pub fn stats(&self) -> FlowStats {
        self.shared.stats().flow
    }

    /// The flow counters plus the gauges, in both dimensions.
    pub fn semaphore_stats(&self) -> SemaphoreStats<DualAmount> {
        self.shared.stats()
    }
}

impl fmt::Debug for DualSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let core = self.shared.lock();
        f.debug_struct("DualSemaphore")
            .field("total", &core.total())
            .field("available", &core.available())
            .field("waiters", &core.waiters())
            .field("closed", &core.is_closed())
            .finish()
    }
}

/// Holds items and bytes of a [`DualSemaphore`] and returns them when dropped.
///
/// # Examples
///
/// ```
/// use weir_flow::semaphore::{DualAmount, DualSemaphore, DualSemaphoreConfig};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let sem = DualSemaphore::new(DualSemaphoreConfig::new(100, 1 << 20));
/// let mut batch = sem.acquire(10, 4_096).await?;
/// let first = batch.split(4, 1_024).expect("holds that much");
/// batch.resize(6, 2_048).await?; // fewer bytes than reserved: the rest goes back now
/// assert_eq!(sem.available(), DualAmount::new(90, (1 << 20) - 3_072));
/// # drop((first, batch));
/// # Ok(()) }
/// ```
#[must_use = "the permit is returned as soon as it is dropped"]
#[derive(Debug)]
pub struct DualPermit {
    raw: RawPermit<DualAmount>,
}

impl DualPermit {
    /// What the permit holds.
    pub fn amount(&self) -> DualAmount {
        self.raw.amount()
    }

    /// Changes what the permit holds to `items` and `bytes`. A dimension that shrinks
    /// is returned at once; the dimensions that grow are then requested together, in
    /// FIFO order. On error the permit keeps the shrunk amount.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future leaves the permit as it was after the shrink
    /// and withdraws the request for the increase.
    pub async fn resize(&mut self, items: u64, bytes: u64) -> Result<(), AcquireError<DualAmount>> {
        self.raw.resize(DualAmount::new(items, bytes)).await
    }

    /// Splits `items` and `bytes` off into a new permit, or `None` if this one holds
    /// less in either dimension.
    pub fn split(&mut self, items: u64, bytes: u64) -> Option<DualPermit> {
        self.raw
            .split(DualAmount::new(items, bytes))
            .map(|raw| DualPermit { raw })
    }

    /// Consumes the permit without returning it: the totals shrink by as much.
    pub fn forget(self) {
        self.raw.forget();
    }
}
