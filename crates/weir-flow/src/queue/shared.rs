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

use std::collections::VecDeque;
use std::hash::Hash;
use std::sync::PoisonError;
use std::task::{Context, Poll, Waker};

use super::{Fallback, QueueCore, Reservation};
use crate::Clock;
use crate::sync::{Mutex, MutexGuard};

/// What the handles share.
pub(crate) struct Shared<T, K> {
    state: Mutex<State<T, K>>,
    pub(crate) clock: Clock,
}

/// Everything behind the mutex.
pub(crate) struct State<T, K> {
    pub(crate) core: QueueCore<T, K>,
    /// Live `Sender` handles; the queue closes when the last one goes.
    pub(crate) senders: usize,
    /// Set while the receiver waits for an item.
    pub(crate) rx_waker: Option<Waker>,
    /// Waiting senders, oldest first; granted ones form a prefix.
    waiters: VecDeque<Waiter>,
    /// Entries of `waiters` not yet granted.
    ungranted: usize,
    next_id: u64,
    /// Whether the core's policy waits when full.
    blocking: bool,
    /// Free slots needed before waiting senders are let in.
    wake_batch: usize,
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
        // The core is empty: its room is its whole item bound.
        let wake_batch = wake_batch(core.room());
        Shared {
            state: Mutex::new(State {
                core,
                senders: 1,
                rx_waker: None,
                waiters: VecDeque::new(),
                ungranted: 0,
                next_id: 0,
                blocking,
                wake_batch,
            }),
            clock,
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
        let wakers = state.grant();
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

    /// Grants room to waiters in order while it fits, once a batch of room is free;
    /// returns the wakers to call once the lock is released.
    #[inline]
    pub(crate) fn grant(&mut self) -> Wakers {
        let mut wakers = Wakers::new();
        if self.ungranted == 0 || self.core.room() < self.wake_batch {
            return wakers;
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
        wakers
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
