//! The state the async handles share: the core behind a mutex, the receiver's waker
//! and the FIFO line of waiting senders.
//!
//! Waiting senders are entries in a `VecDeque` (one per blocked `send` or `reserve`,
//! so its length is bounded by the number of waiting tasks). When room frees, the
//! entries at the front are *granted* a [`Reservation`] in the core, in order, until one
//! does not fit (strict FIFO: a heavy waiter at the front holds back lighter ones
//! behind it). A granted entry stays in the line until its future takes the
//! reservation; a future dropped before that releases it and the next waiters are
//! granted, so cancellation leaves no hole.
//!
//! Waking is batched: once senders wait on a full queue, they are let in when a batch
//! of room is free ([`wake_batch`]: an eighth of the item bound, 1 to 256 slots), not
//! after every single take. A sender that just waited then usually finds room for many
//! sends in a row instead of parking again after each one. Nothing waits forever on
//! this: an empty queue always has a batch of room, and `close` wakes everyone.
//!
//! # Lending
//!
//! Under `Block`, `Reject` and `DropNewest` (policies that never touch an item once it
//! is queued) the receiver does not take items one by one under the lock. When its
//! local batch is empty it takes the lock once and the core *lends* it every queued
//! item in one swap of buffers ([`QueueCore::lend`]); it then serves `recv` from that
//! batch without the lock. Lent items stay queued in the core's accounting (bounds,
//! depth, weight, head age) until they are *settled*: the receiver publishes how many
//! lent items it has delivered in [`RxProgress::served`] (one atomic add per `recv`,
//! before the item is returned), and whoever holds the lock and needs exact figures
//! (a sender that finds the queue full or about to reach a new `max_depth`, `stats`,
//! `len`, a grant, the receiver's next refill) settles the core up to that count. So a
//! send never finds the queue full while the receiver has delivered items, and the
//! stats are exact at every instant: an item counts as delivered from the moment the
//! receiver publishes it, and as queued until then.
//!
//! Waiting senders need the receiver to come back to the lock once it has delivered
//! enough lent items for a batch of room. Whoever leaves senders waiting under the
//! lock computes that point ([`QueueCore::lent_needed_for`]) into
//! [`RxProgress::grant_at`] and sets [`GRANT_WANTED`] in `served` with one atomic
//! read-modify-write; the receiver's add on the same word sees the flag (and then the
//! point), or the flag setter sees the receiver's newer count and settles and grants
//! itself. Read-modify-writes of one word are totally ordered, so neither side can miss
//! the other.

use std::collections::VecDeque;
use std::hash::Hash;
use std::sync::PoisonError;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::{Fallback, QueueCore, Reservation};
use crate::Clock;
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::{Mutex, MutexGuard};

/// Set in [`RxProgress::served`] while senders wait for the receiver to reach
/// [`RxProgress::grant_at`].
pub(crate) const GRANT_WANTED: u64 = 1 << 63;
/// The count bits of [`RxProgress::served`].
pub(crate) const SERVED: u64 = GRANT_WANTED - 1;

/// What the handles share. `repr(C)` and padded so that the fields read on every send
/// and receive but never written (`clock`, `lending`) do not share a cache line with
/// the lock (written by every send) or with the receiver's counters (written by every
/// receive): a read of such a line after another core wrote it is a cache miss.
#[repr(C)]
pub(crate) struct Shared<T, K> {
    pub(crate) clock: Clock,
    /// Whether the receiver borrows items in batches (see the module docs); fixed by
    /// the policy.
    pub(crate) lending: bool,
    /// The receiver's progress through lent items, on a cache line of its own.
    pub(crate) rx: CachePadded<RxProgress>,
    state: CachePadded<Mutex<State<T, K>>>,
}

/// Aligns its content to a cache line (two, against adjacent-line prefetching), so
/// that the receiver's counters do not share a line with the lock.
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

/// What the receiver publishes as it delivers lent items.
pub(crate) struct RxProgress {
    /// Lent items delivered since the queue was created (the low 63 bits; only the
    /// receiver adds to them) and [`GRANT_WANTED`].
    pub(crate) served: AtomicU64,
    /// The longest wait of a delivered lent item, in nanoseconds (written by the
    /// receiver before the `served` add that publishes the item).
    pub(crate) max_wait: AtomicU64,
    /// While [`GRANT_WANTED`] is set: the `served` count at which waiting senders can
    /// be let in (`u64::MAX`: not before the receiver's next refill). Written under
    /// the lock before the flag is set.
    pub(crate) grant_at: AtomicU64,
}

/// Everything behind the mutex. `repr(C)`, the fields every send touches first, then
/// the core (whose hot fields come first too), so that a send touches few cache lines.
#[repr(C)]
pub(crate) struct State<T, K> {
    /// Entries of `waiters` not yet granted.
    ungranted: usize,
    /// Whether the core's policy waits when full.
    blocking: bool,
    /// Whether [`GRANT_WANTED`] may be set.
    armed: bool,
    /// Set while the receiver waits for an item.
    pub(crate) rx_waker: Option<Waker>,
    pub(crate) core: QueueCore<T, K>,
    /// Live `Sender` handles; the queue closes when the last one goes.
    pub(crate) senders: usize,
    /// Waiting senders, oldest first; granted ones form a prefix.
    waiters: VecDeque<Waiter>,
    next_id: u64,
    /// Free slots needed before waiting senders are let in.
    wake_batch: usize,
    /// Lent items settled into the core so far (the `served` count they reach).
    settled: u64,
}

/// Free slots needed before waiting senders are let in: an eighth of the item bound,
/// between 1 and 256 (1 without an item bound).
pub(crate) fn wake_batch(item_limit: usize) -> usize {
    if item_limit == usize::MAX {
        1
    } else {
        (item_limit / 8).clamp(1, 256)
    }
}

/// One waiting `send` or `reserve`.
struct Waiter {
    id: u64,
    weight: u64,
    waker: Option<Waker>,
    grant: Option<Reservation>,
}

/// Why a wait ended without room.
pub(crate) enum WaitEnd {
    Closed,
}

impl<T, K> Shared<T, K> {
    /// Locks the state. A panic while locked cannot leave the core half-updated in a
    /// way later calls could not handle, so a poisoned lock is used as is.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State<T, K>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T, K: Hash + Eq + Clone> Shared<T, K> {
    pub(crate) fn new(core: QueueCore<T, K>, clock: Clock) -> Self {
        let blocking = core.on_full().fallback() == Fallback::Block;
        let lending = core.can_lend();
        // The core is empty: its room is its whole item bound.
        let wake_batch = wake_batch(core.room());
        Shared {
            state: CachePadded(Mutex::new(State {
                core,
                senders: 1,
                rx_waker: None,
                waiters: VecDeque::new(),
                ungranted: 0,
                next_id: 0,
                blocking,
                wake_batch,
                settled: 0,
                armed: false,
            })),
            clock,
            lending,
            rx: CachePadded(RxProgress {
                served: AtomicU64::new(0),
                max_wait: AtomicU64::new(0),
                grant_at: AtomicU64::new(u64::MAX),
            }),
        }
    }

    /// The stats now, settled.
    pub(crate) fn stats(&self) -> crate::FlowStats {
        let now = self.clock.now();
        let mut state = self.lock();
        self.settle(&mut state);
        state.core.stats(now)
    }

    /// Number of queued items, settled.
    pub(crate) fn len(&self) -> usize {
        let mut state = self.lock();
        self.settle(&mut state);
        state.core.len()
    }

    /// Settles the core up to what the receiver has published (see the module docs).
    #[inline]
    pub(crate) fn settle(&self, state: &mut State<T, K>) {
        if state.core.lent() == 0 {
            return;
        }
        let served = self.rx.served.load(Ordering::Acquire) & SERVED;
        state.settle_to(served, &self.rx);
    }

    /// Settles if items are lent and the core's pessimistic view could make it
    /// refuse or miscount the next item (see [`QueueCore::needs_settling`]).
    #[inline]
    pub(crate) fn settle_if_needed(&self, state: &mut State<T, K>, weight: u64) {
        if state.core.needs_settling(weight) {
            self.settle(state);
        }
    }

    /// Lets waiting senders in, in order, while room allows (once a batch of room is
    /// free); returns the wakers to call once the lock is released. When lending, also
    /// arms the receiver's grant point for the senders still waiting (see the module
    /// docs).
    pub(crate) fn grant(&self, state: &mut State<T, K>) -> Wakers {
        let mut wakers = Wakers::new();
        state.grant_into(&mut wakers);
        if !self.lending {
            return wakers;
        }
        loop {
            let Some(weight) = state.first_ungranted_weight() else {
                if state.armed {
                    state.armed = false;
                    self.rx.served.fetch_and(SERVED, Ordering::Relaxed);
                }
                return wakers;
            };
            let grant_at = state
                .core
                .lent_needed_for(state.wake_batch, weight)
                .map_or(u64::MAX, |needed| state.settled + needed.max(1) as u64);
            self.rx.grant_at.store(grant_at, Ordering::Relaxed);
            let served = self.rx.served.fetch_or(GRANT_WANTED, Ordering::AcqRel) & SERVED;
            state.armed = true;
            if served == state.settled {
                return wakers;
            }
            // The receiver delivered more meanwhile: settle, grant, arm again.
            state.settle_to(served, &self.rx);
            state.grant_into(&mut wakers);
        }
    }

    /// Polls waiter `id` for its grant.
    pub(crate) fn poll_grant(
        &self,
        id: u64,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Reservation, WaitEnd>> {
        let mut state = self.lock();
        let Some(index) = state.position(id) else {
            // Not in line: only possible after the wait already ended.
            return Poll::Ready(Err(WaitEnd::Closed));
        };
        if let Some(reservation) = state.waiters[index].grant.take() {
            state.waiters.remove(index);
            return Poll::Ready(Ok(reservation));
        }
        if state.core.is_closed() {
            state.waiters.remove(index);
            state.ungranted -= 1;
            return Poll::Ready(Err(WaitEnd::Closed));
        }
        let waiter = &mut state.waiters[index];
        match &waiter.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => waiter.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Removes waiter `id` from the line (its future was dropped or timed out),
    /// giving back any room granted to it. Returns whether it was still in line.
    pub(crate) fn leave(&self, id: u64) -> bool {
        let mut state = self.lock();
        let Some(index) = state.position(id) else {
            return false;
        };
        let left = state.waiters.remove(index);
        match left.and_then(|waiter| waiter.grant) {
            Some(reservation) => state.core.release(reservation),
            None => state.ungranted -= 1,
        }
        let wakers = self.grant(&mut state);
        drop(state);
        wakers.wake_all();
        true
    }
}

impl<T, K> State<T, K> {
    /// Closes the core and collects every waker to call: the receiver's and all
    /// waiting senders'.
    pub(crate) fn close(&mut self) -> Wakers {
        self.core.close();
        let mut wakers = Wakers::new();
        if let Some(waker) = self.rx_waker.take() {
            wakers.push(waker);
        }
        for waiter in &mut self.waiters {
            if let Some(waker) = waiter.waker.take() {
                wakers.push(waker);
            }
        }
        wakers
    }
}

impl<T, K: Hash + Eq + Clone> State<T, K> {
    /// Whether a blocking send must queue behind others already waiting.
    pub(crate) fn must_wait_in_line(&self) -> bool {
        self.blocking && self.ungranted > 0
    }

    /// Puts a sender needing `weight` at the back of the line; returns its id.
    pub(crate) fn join(&mut self, weight: u64) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.waiters.push_back(Waiter {
            id,
            weight,
            waker: None,
            grant: None,
        });
        self.ungranted += 1;
        id
    }

    /// Settles the core up to `served` delivered lent items.
    fn settle_to(&mut self, served: u64, rx: &RxProgress) {
        let count = served.saturating_sub(self.settled);
        if count > 0 {
            // Loaded after `served`, which the receiver published after this.
            let max_wait = Duration::from_nanos(rx.max_wait.load(Ordering::Relaxed));
            self.core
                .settle(usize::try_from(count).unwrap_or(usize::MAX), max_wait);
            self.settled = served;
        }
    }

    /// The weight the first waiter not yet granted asks for.
    fn first_ungranted_weight(&self) -> Option<u64> {
        if self.ungranted == 0 {
            return None;
        }
        self.waiters
            .iter()
            .find(|waiter| waiter.grant.is_none())
            .map(|waiter| waiter.weight)
    }

    /// Grants room to waiters in order while it fits, once a batch of room is free,
    /// collecting their wakers.
    #[inline]
    fn grant_into(&mut self, wakers: &mut Wakers) {
        if self.ungranted == 0 || self.core.room() < self.wake_batch {
            return;
        }
        for waiter in self
            .waiters
            .iter_mut()
            .filter(|waiter| waiter.grant.is_none())
        {
            match self.core.try_reserve(waiter.weight) {
                Ok(reservation) => {
                    waiter.grant = Some(reservation);
                    self.ungranted -= 1;
                    if let Some(waker) = waiter.waker.take() {
                        wakers.push(waker);
                    }
                }
                // Full: strict FIFO, nobody behind may pass. TooHeavy cannot happen
                // (checked before joining). Closed: `close` wakes everyone.
                Err(_) => break,
            }
        }
    }

    fn position(&self, id: u64) -> Option<usize> {
        self.waiters.iter().position(|waiter| waiter.id == id)
    }
}

/// Wakers collected under the lock and called after it is released. One waker (the
/// usual case) needs no allocation; more spill into a vector (only when several
/// senders are let in at once).
pub(crate) struct Wakers {
    first: Option<Waker>,
    rest: Vec<Waker>,
}

impl Wakers {
    pub(crate) fn new() -> Self {
        Wakers {
            first: None,
            rest: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, waker: Waker) {
        if self.first.is_none() {
            self.first = Some(waker);
        } else {
            self.rest.push(waker);
        }
    }

    pub(crate) fn wake_all(self) {
        if let Some(first) = self.first {
            first.wake();
            for waker in self.rest {
                waker.wake();
            }
        }
    }
}
