//! The machinery the async shells share: the locked core, waiter slots, the acquire
//! future and the permit, generic over what permits are counted in.
//!
//! Everything here takes one short `Mutex` critical section on the core per operation;
//! the clock is read and waiter slots are allocated outside it when a hint says the
//! request will probably wait. A queued waiter owns a [`Slot`] (behind an `Arc` shared
//! with the core's queue) where the core's decision is written, under the core's lock,
//! before its waker is woken — always after the core's lock is released, so a waker
//! that polls synchronously cannot deadlock. A woken waiter reads its outcome with one
//! atomic load.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::Clock;
use crate::Timestamp;
use crate::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use crate::sync::{Arc, Mutex, MutexGuard};

use super::amount::Amount;
use super::core::{Offer, Oversize, SemaphoreCore, WaiterId};
use super::error::{AcquireError, TryAcquireError};
use super::stats::SemaphoreStats;

type Core<A> = SemaphoreCore<A, Arc<Slot<A>>>;

/// How many granted waiters are collected under the lock before it is released to
/// wake them.
const WAKE_BATCH: usize = 8;

/// A semaphore's shared state: the core behind a mutex, and the clock for its stats.
#[derive(Debug)]
pub(crate) struct Shared<A: Amount> {
    core: Mutex<Core<A>>,
    clock: Clock,
    /// How many requests were queued when the lock was last released. Only a hint (read
    /// without the lock) for reading the clock and allocating before taking the lock.
    waiters_hint: AtomicUsize,
}

impl<A: Amount> Shared<A> {
    pub(crate) fn new(total: A, max_waiters: usize, oversize: Oversize, clock: Clock) -> Arc<Self> {
        Arc::new(Shared {
            core: Mutex::new(SemaphoreCore::new(total, max_waiters, oversize)),
            clock,
            waiters_hint: AtomicUsize::new(0),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Core<A>> {
        // The core is never left half-updated (no user code runs under the lock), so a
        // poisoned lock still guards a consistent core.
        self.core
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether requests were probably queued a moment ago.
    fn probably_waiting(&self) -> bool {
        self.waiters_hint.load(Ordering::Relaxed) > 0
    }

    /// The current time if requests are probably queued (so a grant will need it).
    fn now_if_waiting(&self) -> Option<Timestamp> {
        self.probably_waiting().then(|| self.clock.now())
    }

    /// Grants whatever can be granted now and wakes the granted waiters, outside the
    /// lock. `now` is the time read before the lock was taken, if it was.
    fn settle<'a>(&'a self, mut core: MutexGuard<'a, Core<A>>, now: Option<Timestamp>) {
        loop {
            if !core.can_grant() {
                self.waiters_hint.store(core.waiters(), Ordering::Relaxed);
                return;
            }
            let now = now.unwrap_or_else(|| self.clock.now());
            let mut granted = Granted::new();
            let more = core.grant(now, WAKE_BATCH, |_, slot| {
                slot.grant();
                granted.push(slot);
            });
            self.waiters_hint.store(core.waiters(), Ordering::Relaxed);
            drop(core);
            granted.wake_all();
            if !more {
                return;
            }
            core = self.lock();
        }
    }

    pub(crate) fn release(&self, amount: A) {
        if amount.is_zero() {
            return;
        }
        let now = self.now_if_waiting();
        let mut core = self.lock();
        core.release(amount);
        self.settle(core, now);
    }

    pub(crate) fn try_acquire(&self, need: A) -> Result<(), TryAcquireError<A>> {
        self.lock().try_acquire(need)
    }

    pub(crate) fn close(&self) {
        let mut failed = Vec::new();
        {
            let mut core = self.lock();
            failed.reserve(core.waiters());
            core.close(|_, slot| failed.push(slot.fail(AcquireError::Closed)));
            self.waiters_hint.store(0, Ordering::Relaxed);
        }
        failed.into_iter().flatten().for_each(Waker::wake);
    }

    pub(crate) fn forget(&self, amount: A) {
        let mut refused = Vec::new();
        let mut core = self.lock();
        core.forget(amount, |_, slot, error| refused.push(slot.fail(error)));
        self.settle(core, None);
        refused.into_iter().flatten().for_each(Waker::wake);
    }

    pub(crate) fn add_permits(&self, amount: A) {
        let mut core = self.lock();
        core.add_permits(amount);
        self.settle(core, None);
    }

    pub(crate) fn stats(&self) -> SemaphoreStats<A> {
        let now = self.clock.now();
        self.lock().stats(now)
    }
}

/// Waiters granted under the lock, woken after it is released. Fixed size: no
/// allocation.
struct Granted<A: Amount> {
    slots: [Option<Arc<Slot<A>>>; WAKE_BATCH],
    len: usize,
}

impl<A: Amount> Granted<A> {
    fn new() -> Self {
        Granted {
            slots: [const { None }; WAKE_BATCH],
            len: 0,
        }
    }

    fn push(&mut self, slot: Arc<Slot<A>>) {
        // `grant` is called with `limit = WAKE_BATCH`, so there is always room.
        if let Some(free) = self.slots.get_mut(self.len) {
            *free = Some(slot);
            self.len += 1;
        } else if let Some(waker) = slot.take_waker() {
            waker.wake();
        }
    }

    fn wake_all(&mut self) {
        for slot in self.slots[..self.len].iter_mut().filter_map(Option::take) {
            if let Some(waker) = slot.take_waker() {
                waker.wake();
            }
        }
    }
}

/// Where the core's decision for one queued waiter is written.
///
/// `state` is written under the core's lock (so the core's decisions and the slots
/// agree for whoever holds it); a waiter that sees `GRANTED` with one atomic load needs
/// no lock. A waiter registers its waker under `inner` only after seeing `WAITING`
/// there, and the decider takes the waker under `inner` only after writing `state`, so
/// a registered waker is always either taken and woken, or registered by a poll that
/// then sees the decision.
#[derive(Debug)]
pub(crate) struct Slot<A: Amount> {
    state: AtomicU8,
    inner: Mutex<SlotInner<A>>,
}

#[derive(Debug)]
struct SlotInner<A: Amount> {
    waker: Option<Waker>,
    error: Option<AcquireError<A>>,
}

const WAITING: u8 = 0;
const GRANTED: u8 = 1;
const FAILED: u8 = 2;

impl<A: Amount> Slot<A> {
    fn new(waker: &Waker) -> Self {
        Slot {
            state: AtomicU8::new(WAITING),
            inner: Mutex::new(SlotInner {
                waker: Some(waker.clone()),
                error: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SlotInner<A>> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Marks it granted. Called under the core's lock; the waker is taken (with
    /// [`take_waker`](Self::take_waker)) and woken after that lock is released.
    fn grant(&self) {
        self.state.store(GRANTED, Ordering::Release);
    }

    /// The registered waker. A waker registered after it was taken saw the decision.
    fn take_waker(&self) -> Option<Waker> {
        self.lock().waker.take()
    }

    /// Marks it refused with `error`; returns the waker to wake once the core's lock is
    /// released. Called under the core's lock.
    fn fail(&self, error: AcquireError<A>) -> Option<Waker> {
        let mut inner = self.lock();
        inner.error = Some(error);
        self.state.store(FAILED, Ordering::Release);
        inner.waker.take()
    }

    /// The outcome if decided; otherwise registers `waker` and returns `None`.
    fn poll(&self, waker: &Waker) -> Option<Result<(), AcquireError<A>>> {
        if self.state.load(Ordering::Acquire) == GRANTED {
            return Some(Ok(()));
        }
        let mut inner = self.lock();
        match self.state.load(Ordering::Acquire) {
            GRANTED => Some(Ok(())),
            FAILED => Some(Err(inner.error.unwrap_or(AcquireError::Closed))),
            _ => {
                if !inner.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                    inner.waker = Some(waker.clone());
                }
                None
            }
        }
    }

    /// Whether it was granted. Exact under the core's lock, where decisions are made.
    fn is_granted(&self) -> bool {
        self.state.load(Ordering::Acquire) == GRANTED
    }
}

/// A request for `need` from a requester holding `holding`, optionally with a timeout.
///
/// Resolves to `Ok(())` once `need` is held on the requester's behalf (the caller then
/// builds or grows a permit). Dropped while queued, it leaves the queue and lets the
/// next waiters through if they now fit; dropped after being granted but before being
/// polled, it returns what it was granted.
pub(crate) struct RawAcquire<'a, A: Amount> {
    shared: &'a Shared<A>,
    need: A,
    holding: A,
    timeout: Option<Duration>,
    state: AcquireState<A>,
}

enum AcquireState<A: Amount> {
    Init,
    Waiting {
        id: WaiterId,
        slot: Arc<Slot<A>>,
        sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    },
    Done,
}

impl<'a, A: Amount> RawAcquire<'a, A> {
    pub(crate) fn new(
        shared: &'a Shared<A>,
        need: A,
        holding: A,
        timeout: Option<Duration>,
    ) -> Self {
        RawAcquire {
            shared,
            need,
            holding,
            timeout,
            state: AcquireState::Init,
        }
    }

    /// First poll: granted at once, refused at once, or queued (with `cx`'s waker).
    fn start(&mut self, cx: &Context<'_>) -> Option<Result<(), AcquireError<A>>> {
        // When others are queued this request will almost surely wait: read the clock
        // and allocate its slot before taking the lock, not under it.
        let mut prepared = self
            .shared
            .probably_waiting()
            .then(|| (self.shared.clock.now(), Arc::new(Slot::new(cx.waker()))));
        let mut core = self.shared.lock();
        match core.offer(self.need, self.holding) {
            Ok(Offer::Granted) => return Some(Ok(())),
            Err(error) => return Some(Err(error)),
            Ok(Offer::MustWait) => {}
        }
        let (now, slot) = prepared
            .take()
            .unwrap_or_else(|| (self.shared.clock.now(), Arc::new(Slot::new(cx.waker()))));
        let deadline = self.timeout.map(|timeout| now + timeout);
        let queued = core.enqueue(self.need, self.holding, now, deadline, Arc::clone(&slot));
        self.shared
            .waiters_hint
            .store(core.waiters(), Ordering::Relaxed);
        drop(core);
        match queued {
            Err(error) => Some(Err(error)),
            Ok(id) => {
                // The timer runs on tokio's clock (exact, and paused in tests) whatever
                // clock the stats use: a coarse clock's deadline could fire early.
                let sleep = self
                    .timeout
                    .map(|timeout| Box::pin(tokio::time::sleep(timeout)));
                self.state = AcquireState::Waiting { id, slot, sleep };
                None
            }
        }
    }

    /// Polls the timer, if any; on expiry refuses the request unless it was decided.
    fn poll_timeout(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), AcquireError<A>>> {
        let AcquireState::Waiting { id, slot, sleep } = &mut self.state else {
            return Poll::Pending;
        };
        let Some(sleep) = sleep else {
            return Poll::Pending;
        };
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let mut core = self.shared.lock();
        let now = self.shared.clock.now();
        let outcome = match core.time_out(*id, now) {
            Some((_, waited)) => {
                self.shared.settle(core, Some(now));
                // The timer fired, so at least the timeout has passed, whatever a coarse
                // (or tokio-unaware) stats clock read.
                let waited = waited.max(self.timeout.unwrap_or_default());
                Err(AcquireError::Timeout { waited })
            }
            None => {
                // Decided (under the lock we held) since we looked at the slot.
                drop(core);
                match slot.poll(cx.waker()) {
                    Some(outcome) => outcome,
                    None => return Poll::Pending,
                }
            }
        };
        self.state = AcquireState::Done;
        Poll::Ready(outcome)
    }
}

impl<A: Amount> Future for RawAcquire<'_, A> {
    type Output = Result<(), AcquireError<A>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match &this.state {
            AcquireState::Init => {
                if let Some(outcome) = this.start(cx) {
                    this.state = AcquireState::Done;
                    return Poll::Ready(outcome);
                }
                // Queued with this waker: only the timer is left to arm.
            }
            AcquireState::Waiting { slot, .. } => {
                if let Some(outcome) = slot.poll(cx.waker()) {
                    this.state = AcquireState::Done;
                    return Poll::Ready(outcome);
                }
            }
            AcquireState::Done => panic!("RawAcquire polled after it completed"),
        }
        this.poll_timeout(cx)
    }
}

impl<A: Amount> Drop for RawAcquire<'_, A> {
    fn drop(&mut self) {
        let AcquireState::Waiting { id, slot, .. } = &self.state else {
            return;
        };
        let now = self.shared.now_if_waiting();
        let mut core = self.shared.lock();
        if core.cancel(*id).is_some() {
            // It may have been the head that held the others back.
            self.shared.settle(core, now);
        } else if slot.is_granted() {
            // Granted, but nobody will ever use it: give it back.
            core.release(self.need);
            self.shared.settle(core, now);
        }
    }
}

/// Holds `amount` of a semaphore; returns it when dropped.
#[derive(Debug)]
pub(crate) struct RawPermit<A: Amount> {
    shared: Arc<Shared<A>>,
    amount: A,
}

impl<A: Amount> RawPermit<A> {
    pub(crate) fn new(shared: Arc<Shared<A>>, amount: A) -> Self {
        RawPermit { shared, amount }
    }

    pub(crate) fn amount(&self) -> A {
        self.amount
    }

    /// Shrinks at once, then grows (waiting in FIFO order) if any component grows.
    pub(crate) async fn resize(&mut self, target: A) -> Result<(), AcquireError<A>> {
        let shrink = self.amount.saturating_sub(target);
        if !shrink.is_zero() {
            self.amount = self.amount.saturating_sub(shrink);
            self.shared.release(shrink);
        }
        let grow = target.saturating_sub(self.amount);
        if !grow.is_zero() {
            RawAcquire::new(&self.shared, grow, self.amount, None).await?;
            self.amount = self.amount.saturating_add(grow);
        }
        Ok(())
    }

    pub(crate) fn split(&mut self, part: A) -> Option<Self> {
        if !part.fits(self.amount) {
            return None;
        }
        self.amount = self.amount.saturating_sub(part);
        Some(RawPermit::new(Arc::clone(&self.shared), part))
    }

    pub(crate) fn forget(mut self) {
        let amount = std::mem::take(&mut self.amount);
        self.shared.forget(amount);
    }
}

impl<A: Amount> Drop for RawPermit<A> {
    fn drop(&mut self) {
        self.shared.release(self.amount);
    }
}
