//! The machinery the async shells share: the locked core, waiter slots, the acquire
//! future and the permit, generic over what permits are counted in.
//!
//! Everything here takes one short `Mutex` critical section on the core per operation.
//! A queued waiter owns a [`Slot`] (behind an `Arc` shared with the core's queue) where
//! the core's decision is written, under the core's lock, before its waker is woken —
//! always after the core's lock is released, so a waker that polls synchronously cannot
//! deadlock.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::Clock;
use crate::sync::{Arc, Mutex, MutexGuard};

use super::amount::Amount;
use super::core::{Offer, Oversize, SemaphoreCore, WaiterId};
use super::error::{AcquireError, TryAcquireError};
use super::stats::SemaphoreStats;

type Core<A> = SemaphoreCore<A, Arc<Slot<A>>>;

/// How many wakers are collected under the lock before it is released to wake them.
const WAKE_BATCH: usize = 32;

/// A semaphore's shared state: the core behind a mutex, and the clock for its stats.
#[derive(Debug)]
pub(crate) struct Shared<A: Amount> {
    core: Mutex<Core<A>>,
    clock: Clock,
}

impl<A: Amount> Shared<A> {
    pub(crate) fn new(total: A, max_waiters: usize, oversize: Oversize) -> Arc<Self> {
        Arc::new(Shared {
            core: Mutex::new(SemaphoreCore::new(total, max_waiters, oversize)),
            clock: Clock::new(),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Core<A>> {
        // The core is never left half-updated (no user code runs under the lock), so a
        // poisoned lock still guards a consistent core.
        self.core
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Grants whatever can be granted now and wakes the granted waiters, outside the lock.
    fn settle<'a>(&'a self, mut core: MutexGuard<'a, Core<A>>) {
        loop {
            if !core.can_grant() {
                return;
            }
            let now = self.clock.now();
            let mut wakers = WakeList::new();
            let more = core.grant(now, WAKE_BATCH, |_, slot| {
                wakers.push(slot.decide(Ok(())));
            });
            drop(core);
            wakers.wake_all();
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
        let mut core = self.lock();
        core.release(amount);
        self.settle(core);
    }

    pub(crate) fn try_acquire(&self, need: A) -> Result<(), TryAcquireError<A>> {
        self.lock().try_acquire(need)
    }

    pub(crate) fn close(&self) {
        let mut failed = Vec::new();
        {
            let mut core = self.lock();
            failed.reserve(core.waiters());
            core.close(|_, slot| failed.push(slot.decide(Err(AcquireError::Closed))));
        }
        failed.into_iter().flatten().for_each(Waker::wake);
    }

    pub(crate) fn forget(&self, amount: A) {
        let mut refused = Vec::new();
        let mut core = self.lock();
        core.forget(amount, |_, slot, error| {
            refused.push(slot.decide(Err(error)))
        });
        self.settle(core);
        refused.into_iter().flatten().for_each(Waker::wake);
    }

    pub(crate) fn add_permits(&self, amount: A) {
        let mut core = self.lock();
        core.add_permits(amount);
        self.settle(core);
    }

    pub(crate) fn stats(&self) -> SemaphoreStats<A> {
        let now = self.clock.now();
        self.lock().stats(now)
    }
}

/// Wakers gathered under the lock, woken after it is released. Fixed size: no allocation.
struct WakeList {
    wakers: [Option<Waker>; WAKE_BATCH],
    len: usize,
}

impl WakeList {
    fn new() -> Self {
        WakeList {
            wakers: [const { None }; WAKE_BATCH],
            len: 0,
        }
    }

    fn push(&mut self, waker: Option<Waker>) {
        // `grant` is called with `limit = WAKE_BATCH`, so there is always room.
        if let Some(slot) = self.wakers.get_mut(self.len) {
            *slot = waker;
            self.len += 1;
        } else if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn wake_all(&mut self) {
        self.wakers[..self.len]
            .iter_mut()
            .filter_map(Option::take)
            .for_each(Waker::wake);
    }
}

/// Where the core's decision for one queued waiter is written.
#[derive(Debug)]
pub(crate) struct Slot<A: Amount> {
    state: Mutex<SlotState<A>>,
}

#[derive(Debug)]
enum SlotState<A: Amount> {
    Waiting(Option<Waker>),
    Granted,
    Failed(AcquireError<A>),
}

impl<A: Amount> Slot<A> {
    fn new(waker: &Waker) -> Self {
        Slot {
            state: Mutex::new(SlotState::Waiting(Some(waker.clone()))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SlotState<A>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records the outcome; returns the waker to wake once the core's lock is released.
    fn decide(&self, outcome: Result<(), AcquireError<A>>) -> Option<Waker> {
        let next = match outcome {
            Ok(()) => SlotState::Granted,
            Err(error) => SlotState::Failed(error),
        };
        match std::mem::replace(&mut *self.lock(), next) {
            SlotState::Waiting(waker) => waker,
            SlotState::Granted | SlotState::Failed(_) => None,
        }
    }

    /// The outcome if decided; otherwise registers `waker` and returns `None`.
    fn poll(&self, waker: &Waker) -> Option<Result<(), AcquireError<A>>> {
        let mut state = self.lock();
        match &mut *state {
            SlotState::Waiting(registered) => {
                if !registered.as_ref().is_some_and(|w| w.will_wake(waker)) {
                    *registered = Some(waker.clone());
                }
                None
            }
            SlotState::Granted => Some(Ok(())),
            SlotState::Failed(error) => Some(Err(*error)),
        }
    }

    fn is_granted(&self) -> bool {
        matches!(*self.lock(), SlotState::Granted)
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

    /// First poll: granted at once, refused at once, or queued.
    fn start(&mut self, cx: &Context<'_>) -> Option<Result<(), AcquireError<A>>> {
        let mut core = self.shared.lock();
        match core.offer(self.need, self.holding) {
            Ok(Offer::Granted) => return Some(Ok(())),
            Err(error) => return Some(Err(error)),
            Ok(Offer::MustWait) => {}
        }
        let now = self.shared.clock.now();
        let deadline = self.timeout.map(|timeout| now + timeout);
        let slot = Arc::new(Slot::new(cx.waker()));
        match core.enqueue(self.need, self.holding, now, deadline, Arc::clone(&slot)) {
            Err(error) => Some(Err(error)),
            Ok(id) => {
                drop(core);
                let sleep = deadline.map(|deadline| {
                    Box::pin(tokio::time::sleep_until(
                        self.shared.clock.instant_at(deadline),
                    ))
                });
                self.state = AcquireState::Waiting { id, slot, sleep };
                None
            }
        }
    }
}

impl<A: Amount> Future for RawAcquire<'_, A> {
    type Output = Result<(), AcquireError<A>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if matches!(this.state, AcquireState::Init)
            && let Some(outcome) = this.start(cx)
        {
            this.state = AcquireState::Done;
            return Poll::Ready(outcome);
        }
        let AcquireState::Waiting { id, slot, sleep } = &mut this.state else {
            panic!("RawAcquire polled after it completed");
        };
        if let Some(outcome) = slot.poll(cx.waker()) {
            this.state = AcquireState::Done;
            return Poll::Ready(outcome);
        }
        let Some(sleep) = sleep else {
            return Poll::Pending;
        };
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let mut core = this.shared.lock();
        let now = this.shared.clock.now();
        let outcome = match core.time_out(*id, now) {
            Some((_, waited)) => {
                this.shared.settle(core);
                Err(AcquireError::Timeout { waited })
            }
            None => {
                // Decided (under the lock we hold) between our two looks at the slot.
                drop(core);
                match slot.poll(cx.waker()) {
                    Some(outcome) => outcome,
                    None => return Poll::Pending,
                }
            }
        };
        this.state = AcquireState::Done;
        Poll::Ready(outcome)
    }
}

impl<A: Amount> Drop for RawAcquire<'_, A> {
    fn drop(&mut self) {
        let AcquireState::Waiting { id, slot, .. } = &self.state else {
            return;
        };
        let mut core = self.shared.lock();
        if core.cancel(*id).is_some() {
            // It may have been the head that held the others back.
            self.shared.settle(core);
        } else if slot.is_granted() {
            // Granted, but nobody will ever use it: give it back.
            core.release(self.need);
            self.shared.settle(core);
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
