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
        Shared {
            state: Mutex::new(State {
                core,
                senders: 1,
                rx_waker: None,
                waiters: VecDeque::new(),
                ungranted: 0,
                next_id: 0,
                blocking,
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

    /// Grants room to waiters in order while it fits; returns the wakers to call
    /// once the lock is released.
    pub(crate) fn grant(&mut self) -> Wakers {
        let mut wakers = Wakers::new();
        if self.ungranted == 0 {
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

/// Wakers collected under the lock and called after it is released. Up to
/// [`Wakers::INLINE`] are kept without allocating; more spill into a vector (only when
/// that many senders wait at once).
pub(crate) struct Wakers {
    inline: [Option<Waker>; Wakers::INLINE],
    len: usize,
    spill: Vec<Waker>,
}

impl Wakers {
    const INLINE: usize = 4;

    pub(crate) fn new() -> Self {
        Wakers {
            inline: Default::default(),
            len: 0,
            spill: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, waker: Waker) {
        match self.inline.get_mut(self.len) {
            Some(slot) => {
                *slot = Some(waker);
                self.len += 1;
            }
            None => self.spill.push(waker),
        }
    }

    pub(crate) fn wake_all(self) {
        for waker in self.inline.into_iter().flatten() {
            waker.wake();
        }
        for waker in self.spill {
            waker.wake();
        }
    }
}
