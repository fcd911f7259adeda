//! The async shell: [`Semaphore`] and its [`Permit`], a thin layer over the core.

use std::fmt;
use std::time::Duration;

use crate::sync::Arc;
use crate::{Clock, FlowStats};

use super::blocking::block_on;
use super::core::Oversize;
use super::error::{AcquireError, TryAcquireError};
use super::raw::{RawAcquire, RawPermit, Shared};
use super::stats::SemaphoreStats;

/// How a [`Semaphore`] is sized.
///
/// The default is 8 MiB, 1024 waiters, [`Oversize::Reject`].
///
/// # Examples
///
/// ```
/// use weir_flow::semaphore::{Oversize, SemaphoreConfig};
///
/// let config = SemaphoreConfig::new(64 << 20).max_waiters(256).oversize(Oversize::AdmitAloneWhenIdle);
/// assert_eq!(config.total, 64 << 20);
/// let same = SemaphoreConfig { total: 64 << 20, max_waiters: 256, oversize: Oversize::AdmitAloneWhenIdle };
/// assert_eq!(config, same);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SemaphoreConfig {
    /// What may be held at once (bytes, for a memory limiter).
    pub total: u64,
    /// How many acquires may wait; one more is refused at once with
    /// [`AcquireError::TooManyWaiters`].
    pub max_waiters: usize,
    /// What to do with a request larger than `total`.
    pub oversize: Oversize,
}

impl SemaphoreConfig {
    /// `total` permits, the default 1024 waiters and [`Oversize::Reject`].
    pub fn new(total: u64) -> Self {
        SemaphoreConfig {
            total,
            ..SemaphoreConfig::default()
        }
    }

    /// Sets `max_waiters`.
    pub fn max_waiters(self, max_waiters: usize) -> Self {
        SemaphoreConfig {
            max_waiters,
            ..self
        }
    }

    /// Sets the oversize policy.
    pub fn oversize(self, oversize: Oversize) -> Self {
        SemaphoreConfig { oversize, ..self }
    }
}

impl Default for SemaphoreConfig {
    fn default() -> Self {
        SemaphoreConfig {
            total: 8 << 20,
            max_waiters: 1024,
            oversize: Oversize::Reject,
        }
    }
}

/// An async, weighted, strictly FIFO semaphore: a memory limiter that makes producers
/// wait without blocking a thread.
///
/// Permits are counted in `u64` units (bytes, usually). Requests are granted in arrival
/// order: a large request at the head is never overtaken by smaller ones behind it, and
/// [`try_acquire`](Self::try_acquire) never barges past a waiter. At most `max_waiters`
/// requests wait; beyond that, acquires fail at once. An acquire can time out, and
/// dropping its future withdraws it (waking those behind it if they now fit).
/// [`close`](Self::close) fails this semaphore's waiters and later acquires, and nothing
/// else. A request larger than the total follows the configured [`Oversize`] policy.
///
/// The handle is cheap to clone (an `Arc` inside); every clone is the same semaphore,
/// and [`Permit`]s own a handle, so they are `'static`.
///
/// Nothing here blocks a thread: waiting is a future. The one exception is
/// [`acquire_blocking`](Self::acquire_blocking), for synchronous callers that are not
/// on a runtime thread.
///
/// # Examples
///
/// ```
/// use weir_flow::semaphore::{Semaphore, SemaphoreConfig};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let memory = Semaphore::new(SemaphoreConfig::new(1_000).max_waiters(64));
/// let batch = memory.acquire(600).await?; // held until `batch` is dropped
/// assert_eq!(memory.available(), 400);
///
/// let waiter = tokio::spawn({
///     let memory = memory.clone();
///     async move { memory.acquire(700).await.map(|permit| permit.amount()) }
/// });
/// tokio::task::yield_now().await;
/// assert!(memory.try_acquire(100).is_err()); // FIFO: the 700 is queued first
/// drop(batch);
/// assert_eq!(waiter.await??, 700);
/// assert!(memory.stats().is_conserved());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    shared: Arc<Shared<u64>>,
}

impl Semaphore {
    /// A semaphore with `config.total` permits free. Its stats (`oldest_age`,
    /// `max_queue_wait`, `waited`) are read on [`Clock::coarse`]: a waited acquire reads
    /// the clock twice, and the precise clock would cost a fifth of the waiting path.
    /// Timeouts always run on tokio's timer.
    pub fn new(config: SemaphoreConfig) -> Self {
        Semaphore::with_clock(config, Clock::coarse())
    }

    /// A semaphore whose stats are read on `clock` (e.g. [`Clock::new`], which follows
    /// tokio's paused test clock).
    pub fn with_clock(config: SemaphoreConfig, clock: Clock) -> Self {
        Semaphore {
            shared: Shared::new(config.total, config.max_waiters, config.oversize, clock),
        }
    }

    /// Waits, in FIFO order, until `amount` is free, and holds it until the permit is
    /// dropped.
    ///
    /// Refused at once with [`AcquireError::TooManyWaiters`] when `max_waiters` requests
    /// are already waiting, [`AcquireError::TooLarge`] when `amount` exceeds the total
    /// under [`Oversize::Reject`], [`AcquireError::Closed`] when the semaphore is closed
    /// (also while waiting).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, and FIFO-fair: dropping the future before it completes removes the
    /// request from the queue (or gives back what was granted to it but not yet
    /// returned), and wakes the waiters behind it if they now fit. Its place in the
    /// queue is lost.
    ///
    /// # Examples
    ///
    /// ```
    /// # use weir_flow::semaphore::{Semaphore, SemaphoreConfig};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let sem = Semaphore::new(SemaphoreConfig::new(10));
    /// let permit = sem.acquire(4).await.expect("open and large enough");
    /// assert_eq!((permit.amount(), sem.available()), (4, 6));
    /// # }
    /// ```
    pub async fn acquire(&self, amount: u64) -> Result<Permit, AcquireError> {
        RawAcquire::new(&self.shared, amount, 0, None).await?;
        Ok(self.permit(amount))
    }

    /// Like [`acquire`](Self::acquire), but refused with [`AcquireError::Timeout`] if
    /// not granted within `timeout` (measured on tokio's clock, so a paused test clock
    /// applies).
    ///
    /// # Panics
    ///
    /// If it has to wait outside a tokio runtime with the time driver enabled.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use weir_flow::semaphore::{AcquireError, Semaphore, SemaphoreConfig};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let sem = Semaphore::new(SemaphoreConfig::new(10));
    /// let _all = sem.acquire(10).await.expect("free");
    /// let late = sem.acquire_timeout(1, Duration::from_millis(100)).await;
    /// assert!(matches!(late, Err(AcquireError::Timeout { waited }) if waited >= Duration::from_millis(100)));
    /// # }
    /// ```
    pub async fn acquire_timeout(
        &self,
        amount: u64,
        timeout: Duration,
    ) -> Result<Permit, AcquireError> {
        RawAcquire::new(&self.shared, amount, 0, Some(timeout)).await?;
        Ok(self.permit(amount))
    }

    /// Takes `amount` now or not at all: refused with [`TryAcquireError::NoPermits`]
    /// when too little is free or anyone is waiting (it never overtakes a waiter).
    ///
    /// # Examples
    ///
    /// ```
    /// # use weir_flow::semaphore::{Semaphore, SemaphoreConfig, TryAcquireError};
    /// let sem = Semaphore::new(SemaphoreConfig::new(10));
    /// let seven = sem.try_acquire(7).expect("free");
    /// assert_eq!(sem.try_acquire(4).unwrap_err(), TryAcquireError::NoPermits);
    /// drop(seven);
    /// assert!(sem.try_acquire(4).is_ok());
    /// ```
    pub fn try_acquire(&self, amount: u64) -> Result<Permit, TryAcquireError> {
        self.shared.try_acquire(amount)?;
        Ok(self.permit(amount))
    }

    /// [`acquire`](Self::acquire) for synchronous callers: parks the calling thread
    /// until the permit is granted or refused.
    ///
    /// Never call it on a thread that serves others (a tokio worker, an event loop, an
    /// I/O thread): that is the very bug this semaphore exists to avoid.
    ///
    /// # Panics
    ///
    /// When called on a tokio runtime thread.
    ///
    /// # Examples
    ///
    /// ```
    /// # use weir_flow::semaphore::{Semaphore, SemaphoreConfig};
    /// let sem = Semaphore::new(SemaphoreConfig::new(10));
    /// let permit = sem.acquire_blocking(3).expect("free");
    /// assert_eq!(sem.available(), 7);
    /// # drop(permit);
    /// ```
    pub fn acquire_blocking(&self, amount: u64) -> Result<Permit, AcquireError> {
        block_on("Semaphore::acquire_blocking", self.acquire(amount))
    }

    fn permit(&self, amount: u64) -> Permit {
        Permit {
            raw: RawPermit::new(Arc::clone(&self.shared), amount),
        }
    }

    /// What is free now (zero while an oversize permit is held).
    pub fn available(&self) -> u64 {
        self.shared.lock().available()
    }

    /// The total (lowered by [`Permit::forget`], raised by
    /// [`add_permits`](Self::add_permits)).
    pub fn total(&self) -> u64 {
        self.shared.lock().total()
    }

    /// Raises the total by `amount`, granting waiters that now fit.
    pub fn add_permits(&self, amount: u64) {
        self.shared.add_permits(amount);
    }

    /// Closes the semaphore: every waiting acquire (of this semaphore only) fails with
    /// [`AcquireError::Closed`], and so does every later one. Permits already held stay
    /// valid and are returned as usual. Idempotent.
    pub fn close(&self) {
        self.shared.close();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().is_closed()
    }

    /// The flow counters, mapped as documented on [`SemaphoreStats`].
    pub fn stats(&self) -> FlowStats {
        self.shared.stats().flow
    }

    /// The flow counters plus the semaphore's own gauges and refusal reasons.
    pub fn semaphore_stats(&self) -> SemaphoreStats {
        self.shared.stats()
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let core = self.shared.lock();
        f.debug_struct("Semaphore")
            .field("total", &core.total())
            .field("available", &core.available())
            .field("waiters", &core.waiters())
            .field("closed", &core.is_closed())
            .finish()
    }
}

/// Holds an amount of a [`Semaphore`] and returns it when dropped.
///
/// # Examples
///
/// ```
/// # use weir_flow::semaphore::{Semaphore, SemaphoreConfig};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), weir_flow::semaphore::AcquireError> {
/// let sem = Semaphore::new(SemaphoreConfig::new(100));
/// let mut batch = sem.acquire(10).await?; // reserve, then resize to what the batch needs
/// batch.resize(40).await?;
/// let sent = batch.split(15).expect("40 >= 15"); // hand part of it to another task
/// assert_eq!((batch.amount(), sent.amount(), sem.available()), (25, 15, 60));
/// drop(sent);
/// batch.resize(5).await?; // shrinking returns the rest at once
/// assert_eq!(sem.available(), 95);
/// # Ok(()) }
/// ```
#[must_use = "the permit is returned as soon as it is dropped"]
#[derive(Debug)]
pub struct Permit {
    raw: RawPermit<u64>,
}

impl Permit {
    /// What the permit holds.
    pub fn amount(&self) -> u64 {
        self.raw.amount()
    }

    /// Changes what the permit holds to `amount`. Shrinking returns the difference at
    /// once (waking waiters that now fit). Growing queues a request for the difference
    /// behind the current waiters (FIFO), refused like an acquire (`TooLarge` judging
    /// the new `amount` as a whole); on error the permit keeps its amount.
    ///
    /// A permit that waits to grow still holds what it has, so growing while others
    /// wait for that very amount can wait forever: prefer a timeout around it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future before it completes leaves the permit as it
    /// was (after any shrink) and withdraws the request for the increase.
    pub async fn resize(&mut self, amount: u64) -> Result<(), AcquireError> {
        self.raw.resize(amount).await
    }

    /// Splits `amount` off into a new permit, or `None` if this one holds less.
    pub fn split(&mut self, amount: u64) -> Option<Permit> {
        self.raw.split(amount).map(|raw| Permit { raw })
    }

    /// Consumes the permit without returning its amount: the semaphore's total shrinks
    /// by as much, for good (see [`Semaphore::add_permits`]). Under
    /// [`Oversize::Reject`], waiters that no longer fit the smaller total fail with
    /// [`AcquireError::TooLarge`].
    pub fn forget(self) {
        self.raw.forget();
    }
}
