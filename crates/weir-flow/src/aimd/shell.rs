//! Async shells over the AIMD cores, on tokio's clock.

use std::sync::PoisonError;
use std::time::Duration;

use tokio::sync::{Mutex as AsyncMutex, Notify};

use super::concurrency::{AimdConcurrency, Token};
use super::core::AimdConfig;
use super::error::AimdConfigError;
use super::rate::AimdRate;
use crate::Clock;
use crate::sync::{Arc, Mutex, MutexGuard};

/// An async AIMD rate limiter: [`acquire`](Self::acquire) sleeps until a permit is
/// due. Waiters are served in FIFO order. Clones share one limiter.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use weir_flow::aimd::{AimdConfig, RateLimiter};
///
/// let mut config = AimdConfig::rate(Duration::from_millis(50), 100.0);
/// config.burst = Duration::from_millis(10); // one token at 100/s
/// let limiter = RateLimiter::new(config).unwrap();
/// let start = tokio::time::Instant::now();
/// for _ in 0..3 {
///     limiter.acquire().await;
/// }
/// assert_eq!(start.elapsed(), Duration::from_millis(20));
/// limiter.observe(Duration::from_millis(12));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RateLimiter {
    shared: Arc<RateShared>,
}

#[derive(Debug)]
struct RateShared {
    core: Mutex<AimdRate>,
    turn: AsyncMutex<()>,
    clock: Clock,
}

impl RateLimiter {
    /// A limiter with the given configuration.
    pub fn new(config: AimdConfig) -> Result<Self, AimdConfigError> {
        Ok(RateLimiter {
            shared: Arc::new(RateShared {
                core: Mutex::new(AimdRate::new(config)?),
                turn: AsyncMutex::new(()),
                clock: Clock::new(),
            }),
        })
    }

    fn core(&self) -> MutexGuard<'_, AimdRate> {
        self.shared
            .core
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until a permit is due and takes it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the permit is taken only in the poll that returns, so a dropped
    /// future takes nothing, and it gives up its place in the FIFO line.
    pub async fn acquire(&self) {
        let _turn = self.shared.turn.lock().await;
        loop {
            let now = self.shared.clock.now();
            let wait = match self.core().try_acquire(now) {
                Ok(()) => return,
                Err(wait) => wait,
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// Takes a permit if one is due now, ahead of any waiter; or returns how long
    /// until the next one.
    pub fn try_acquire(&self) -> Result<(), Duration> {
        let now = self.shared.clock.now();
        self.core().try_acquire(now)
    }

    /// Records one operation's latency.
    pub fn observe(&self, latency: Duration) {
        let now = self.shared.clock.now();
        self.core().observe(now, latency);
    }

    /// Applies a window's quantile latency measured by the caller.
    pub fn observe_window(&self, quantile_latency: Duration) {
        let now = self.shared.clock.now();
        self.core().observe_window(now, quantile_latency);
    }

    /// An explicit overload signal (429, 503, timeout).
    pub fn overload(&self) {
        let now = self.shared.clock.now();
        self.core().overload(now);
    }

    /// The current rate in permits per second.
    pub fn rate(&self) -> f64 {
        self.core().rate()
    }
}

/// An async AIMD concurrency limiter: [`acquire`](Self::acquire) waits, FIFO, for an
/// in-flight slot. Clones share one limiter.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::time::Duration;
/// use weir_flow::aimd::{AimdConfig, ConcurrencyLimiter};
///
/// let limiter = ConcurrencyLimiter::new(AimdConfig::concurrency(Duration::from_millis(50), 4)).unwrap();
/// let permit = limiter.acquire().await;
/// assert_eq!(limiter.in_flight(), 1);
/// // ... call the downstream ...
/// permit.finish(); // records the latency since acquire
/// assert_eq!(limiter.in_flight(), 0);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ConcurrencyLimiter {
    shared: Arc<ConcurrencyShared>,
}

#[derive(Debug)]
struct ConcurrencyShared {
    core: Mutex<AimdConcurrency>,
    turn: AsyncMutex<()>,
    released: Notify,
    clock: Clock,
}

impl ConcurrencyShared {
    fn core(&self) -> MutexGuard<'_, AimdConcurrency> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ConcurrencyLimiter {
    /// A limiter with the given configuration.
    pub fn new(config: AimdConfig) -> Result<Self, AimdConfigError> {
        Ok(ConcurrencyLimiter {
            shared: Arc::new(ConcurrencyShared {
                core: Mutex::new(AimdConcurrency::new(config)?),
                turn: AsyncMutex::new(()),
                released: Notify::new(),
                clock: Clock::new(),
            }),
        })
    }

    /// Waits for an in-flight slot; waiters are served in FIFO order.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the slot is taken only in the poll that returns the permit, so a
    /// dropped future takes nothing, and it gives up its place in the FIFO line.
    pub async fn acquire(&self) -> Permit {
        let _turn = self.shared.turn.lock().await;
        loop {
            let released = self.shared.released.notified();
            tokio::pin!(released);
            // Register before checking, so a release between the check and the await
            // is not missed.
            released.as_mut().enable();
            if let Some(permit) = self.try_take() {
                return permit;
            }
            released.await;
        }
    }

    /// Takes a slot if one is free now, ahead of any waiter.
    pub fn try_acquire(&self) -> Option<Permit> {
        self.try_take()
    }

    fn try_take(&self) -> Option<Permit> {
        let now = self.shared.clock.now();
        let token = self.shared.core().try_start(now)?;
        Some(Permit {
            shared: Arc::clone(&self.shared),
            token: Some(token),
        })
    }

    /// The current limit.
    pub fn limit(&self) -> u64 {
        self.shared.core().limit()
    }

    /// Operations in flight now.
    pub fn in_flight(&self) -> u64 {
        self.shared.core().in_flight()
    }
}

/// One in-flight slot of a [`ConcurrencyLimiter`]. Report how the operation went
/// with [`finish`](Self::finish) or [`dropped`](Self::dropped); dropping the permit
/// frees the slot and records nothing (a cancelled operation says nothing about the
/// downstream).
#[derive(Debug)]
#[must_use = "the slot is freed when the permit is finished or dropped"]
pub struct Permit {
    shared: Arc<ConcurrencyShared>,
    token: Option<Token>,
}

impl Permit {
    /// The operation succeeded; its latency is the time since the permit was granted.
    pub fn finish(mut self) {
        self.end(|core, now, token| core.finish(now, token));
    }

    /// The operation succeeded with a latency the caller measured.
    pub fn finish_with_latency(mut self, latency: Duration) {
        self.end(|core, now, token| core.finish_with_latency(now, token, Some(latency)));
    }

    /// The operation was dropped for overload (rejected, timed out): cut the limit.
    pub fn dropped(mut self) {
        self.end(|core, now, token| core.dropped(now, token));
    }

    fn end(&mut self, f: impl FnOnce(&mut AimdConcurrency, crate::Timestamp, Token)) {
        if let Some(token) = self.token.take() {
            let now = self.shared.clock.now();
            f(&mut self.shared.core(), now, token);
            self.shared.released.notify_waiters();
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.end(|core, _, token| core.ignore(token));
    }
}
