//! The sans-IO core: the FIFO waiter queue and every grant decision.
//!
//! [`SemaphoreCore`] is a plain state machine. It never reads a clock (callers pass
//! `now`), never blocks, never wakes anything: each waiter carries a caller-chosen
//! payload `T` (the async shell stores its waker slot there, the simulator an id) that
//! the core hands back when the waiter's fate is decided.

use std::collections::VecDeque;
use std::time::Duration;

use crate::{FlowStats, Timestamp};

use super::amount::Amount;
use super::error::{AcquireError, TryAcquireError};
use super::stats::SemaphoreStats;

/// What to do with a request larger than the semaphore's total.
///
/// # Examples
///
/// ```
/// use weir_flow::semaphore::{Oversize, Semaphore, SemaphoreConfig, TryAcquireError};
///
/// let strict = Semaphore::new(SemaphoreConfig { total: 10, oversize: Oversize::Reject, ..SemaphoreConfig::default() });
/// assert!(matches!(strict.try_acquire(11), Err(TryAcquireError::TooLarge { requested: 11, total: 10 })));
///
/// let lenient = Semaphore::new(SemaphoreConfig { total: 10, oversize: Oversize::AdmitAloneWhenIdle, ..SemaphoreConfig::default() });
/// let big = lenient.try_acquire(11).expect("nothing else is held");
/// assert_eq!(lenient.available(), 0);
/// drop(big);
/// assert_eq!(lenient.available(), 10);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Oversize {
    /// Refuse it at once with [`AcquireError::TooLarge`].
    #[default]
    Reject,
    /// Grant it, in its FIFO turn, only when nothing else is held; while it is held
    /// nothing else is granted.
    AdmitAloneWhenIdle,
}

/// Identifies a waiter queued in a [`SemaphoreCore`]. Ids grow with arrival order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WaiterId(u64);

/// What [`SemaphoreCore::offer`] decided for a request that was not refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Granted at once: the amount is now held.
    Granted,
    /// It cannot be granted now: queue it with [`SemaphoreCore::enqueue`]. Nothing was
    /// counted yet.
    MustWait,
}

#[derive(Debug)]
struct Waiter<A, T> {
    id: WaiterId,
    /// What the request adds to what is held.
    need: A,
    /// What the requester already holds (non-zero for a growing resize).
    holding: A,
    enqueued_at: Timestamp,
    deadline: Option<Timestamp>,
    payload: T,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    offered: u64,
    accepted: u64,
    delivered: u64,
    too_many_waiters: u64,
    timeout: u64,
    too_large: u64,
    closed: u64,
    no_permits: u64,
    cancelled: u64,
    max_depth: u64,
    max_queue_wait: Duration,
}

/// The sans-IO weighted FIFO semaphore.
///
/// Grants are strictly FIFO: only the head of the queue may be granted, so a large
/// request is never overtaken by smaller ones behind it. A request for `need` from a
/// requester already holding `holding` (zero for a fresh acquire) may be granted when
/// `held + need <= total`; if `holding + need` is itself larger than the total, the
/// [`Oversize`] policy decides: refuse it, or grant it when the requester holds all that
/// is held.
///
/// Protocol: [`offer`](Self::offer) a request; if it says [`Offer::MustWait`],
/// [`enqueue`](Self::enqueue) it. After anything that frees permits or removes the head
/// ([`release`](Self::release), [`cancel`](Self::cancel), [`time_out`](Self::time_out),
/// [`expire`](Self::expire), [`add_permits`](Self::add_permits)), call
/// [`grant`](Self::grant) while [`can_grant`](Self::can_grant) is true.
///
/// # Examples
///
/// ```
/// use weir_flow::Timestamp;
/// use weir_flow::semaphore::{Offer, Oversize, SemaphoreCore};
///
/// let mut core: SemaphoreCore<u64, &str> = SemaphoreCore::new(10, 16, Oversize::Reject);
/// assert_eq!(core.offer(8, 0), Ok(Offer::Granted));
/// assert_eq!(core.offer(5, 0), Ok(Offer::MustWait));
/// let t0 = Timestamp::from_millis(0);
/// core.enqueue(5, 0, t0, None, "five").expect("room in the queue");
/// core.enqueue(1, 0, t0, None, "one").expect("room in the queue");
/// assert!(!core.can_grant()); // "one" would fit, but FIFO: "five" is first
///
/// core.release(8);
/// let mut granted = Vec::new();
/// core.grant(Timestamp::from_millis(30), 16, |_, who| granted.push(who));
/// assert_eq!(granted, ["five", "one"]);
/// let stats = core.stats(Timestamp::from_millis(30));
/// assert!(stats.flow.is_conserved());
/// assert_eq!(stats.flow.max_queue_wait.as_millis(), 30);
/// ```
#[derive(Debug)]
pub struct SemaphoreCore<A, T> {
    total: A,
    held: A,
    max_waiters: usize,
    oversize: Oversize,
    closed: bool,
    waiters: VecDeque<Waiter<A, T>>,
    /// Sum of `need` over the queue.
    waiting: A,
    next_id: u64,
    counters: Counters,
}

impl<A: Amount, T> SemaphoreCore<A, T> {
    /// A semaphore with `total` permits free, at most `max_waiters` queued requests, and
    /// the given policy for requests larger than the total.
    pub fn new(total: A, max_waiters: usize, oversize: Oversize) -> Self {
        SemaphoreCore {
            total,
            held: A::default(),
            max_waiters,
            oversize,
            closed: false,
            waiters: VecDeque::new(),
            waiting: A::default(),
            next_id: 0,
            counters: Counters::default(),
        }
    }

    /// The total: what may be held at once.
    pub fn total(&self) -> A {
        self.total
    }

    /// What granted permits hold now.
    pub fn held(&self) -> A {
        self.held
    }

    /// What is free now (`total - held`, zero while an oversize grant is held).
    pub fn available(&self) -> A {
        self.total.saturating_sub(self.held)
    }

    /// How many requests are queued.
    pub fn waiters(&self) -> usize {
        self.waiters.len()
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Why a request would be refused on arrival, if it would.
    fn refusal(&self, need: A, holding: A) -> Option<AcquireError<A>> {
        if self.closed {
            return Some(AcquireError::Closed);
        }
        let target = holding.saturating_add(need);
        if !target.fits(self.total) && self.oversize == Oversize::Reject {
            return Some(AcquireError::TooLarge {
                requested: target,
                total: self.total,
            });
        }
        None
    }

    /// Whether a request could be granted now if it were at the head of the queue.
    fn admissible(&self, need: A, holding: A) -> bool {
        if holding.saturating_add(need).fits(self.total) {
            self.held.saturating_add(need).fits(self.total)
        } else {
            // Oversize: only alone (the requester holds everything held).
            self.oversize == Oversize::AdmitAloneWhenIdle && self.held == holding
        }
    }

    fn count_refusal(&mut self, error: &AcquireError<A>) {
        self.counters.offered += 1;
        match error {
            AcquireError::Closed => self.counters.closed += 1,
            AcquireError::TooManyWaiters { .. } => self.counters.too_many_waiters += 1,
            AcquireError::Timeout { .. } => self.counters.timeout += 1,
            AcquireError::TooLarge { .. } => self.counters.too_large += 1,
        }
    }

    /// Offers a request for `need` from a requester already holding `holding` (zero for
    /// a fresh acquire; the current amount for a growing resize).
    ///
    /// Grants it at once when nobody is queued and it fits; refuses it (and counts the
    /// refusal) when the semaphore is closed or the request is too large under
    /// [`Oversize::Reject`]; otherwise answers [`Offer::MustWait`] without counting
    /// anything, and the caller should [`enqueue`](Self::enqueue) it.
    pub fn offer(&mut self, need: A, holding: A) -> Result<Offer, AcquireError<A>> {
        if let Some(error) = self.refusal(need, holding) {
            self.count_refusal(&error);
            return Err(error);
        }
        if self.waiters.is_empty() && self.admissible(need, holding) {
            self.held = self.held.saturating_add(need);
            self.counters.offered += 1;
            self.counters.accepted += 1;
            self.counters.delivered += 1;
            Ok(Offer::Granted)
        } else {
            Ok(Offer::MustWait)
        }
    }

    /// A fresh request that must not wait: granted at once or refused (and counted).
    pub fn try_acquire(&mut self, need: A) -> Result<(), TryAcquireError<A>> {
        match self.offer(need, A::default()) {
            Ok(Offer::Granted) => Ok(()),
            Ok(Offer::MustWait) => {
                self.counters.offered += 1;
                self.counters.no_permits += 1;
                Err(TryAcquireError::NoPermits)
            }
            Err(AcquireError::TooLarge { requested, total }) => {
                Err(TryAcquireError::TooLarge { requested, total })
            }
            Err(_) => Err(TryAcquireError::Closed),
        }
    }

    /// Queues a request at the tail, to be granted in FIFO order; `deadline` is when
    /// [`expire`](Self::expire) times it out. Call it after [`offer`](Self::offer)
    /// answered [`Offer::MustWait`].
    ///
    /// Refuses (and counts) the request when the semaphore is closed, it is too large
    /// under [`Oversize::Reject`], or `max_waiters` requests are already queued; the
    /// payload is then dropped.
    pub fn enqueue(
        &mut self,
        need: A,
        holding: A,
        now: Timestamp,
        deadline: Option<Timestamp>,
        payload: T,
    ) -> Result<WaiterId, AcquireError<A>> {
        let refusal = self.refusal(need, holding).or_else(|| {
            (self.waiters.len() >= self.max_waiters).then_some(AcquireError::TooManyWaiters {
                max_waiters: self.max_waiters,
            })
        });
        if let Some(error) = refusal {
            self.count_refusal(&error);
            return Err(error);
        }
        let id = WaiterId(self.next_id);
        self.next_id += 1;
        self.waiters.push_back(Waiter {
            id,
            need,
            holding,
            enqueued_at: now,
            deadline,
            payload,
        });
        self.waiting = self.waiting.saturating_add(need);
        self.counters.offered += 1;
        self.counters.accepted += 1;
        self.counters.max_depth = self.counters.max_depth.max(self.waiters.len() as u64);
        Ok(id)
    }

    /// Whether the head of the queue can be granted now.
    pub fn can_grant(&self) -> bool {
        self.waiters
            .front()
            .is_some_and(|head| self.admissible(head.need, head.holding))
    }

    /// Grants waiters from the head, in order, while the head can be granted, at most
    /// `limit` of them; calls `on_grant` for each. Returns whether the (new) head could
    /// be granted too, i.e. whether to call again.
    pub fn grant(
        &mut self,
        now: Timestamp,
        limit: usize,
        mut on_grant: impl FnMut(WaiterId, T),
    ) -> bool {
        let mut granted = 0;
        while granted < limit && self.can_grant() {
            let Some(head) = self.waiters.pop_front() else {
                break;
            };
            self.held = self.held.saturating_add(head.need);
            self.waiting = self.waiting.saturating_sub(head.need);
            self.counters.delivered += 1;
            let waited = now.saturating_duration_since(head.enqueued_at);
            self.counters.max_queue_wait = self.counters.max_queue_wait.max(waited);
            granted += 1;
            on_grant(head.id, head.payload);
        }
        self.can_grant()
    }

    /// Returns `amount` to the semaphore. Call [`grant`](Self::grant) afterwards.
    pub fn release(&mut self, amount: A) {
        debug_assert!(amount.fits(self.held), "released more than is held");
        self.held = self.held.saturating_sub(amount);
    }

    /// Removes a waiter whose requester gave up (its future was dropped) and hands its
    /// payload back; `None` if it is no longer queued (granted or refused already).
    /// Call [`grant`](Self::grant) afterwards: the head may have changed.
    pub fn cancel(&mut self, id: WaiterId) -> Option<T> {
        let waiter = self.remove(id)?;
        self.counters.cancelled += 1;
        Some(waiter.payload)
    }

    /// Refuses a waiter with a timeout, whatever its deadline; hands back its payload
    /// and how long it waited, or `None` if it is no longer queued. Call
    /// [`grant`](Self::grant) afterwards.
    pub fn time_out(&mut self, id: WaiterId, now: Timestamp) -> Option<(T, Duration)> {
        let waiter = self.remove(id)?;
        self.counters.timeout += 1;
        Some((
            waiter.payload,
            now.saturating_duration_since(waiter.enqueued_at),
        ))
    }

    /// Times out every waiter whose deadline is at or before `now`, calling `on_expired`
    /// with its id, payload and wait. Call [`grant`](Self::grant) afterwards.
    pub fn expire(&mut self, now: Timestamp, mut on_expired: impl FnMut(WaiterId, T, Duration)) {
        let mut index = 0;
        while index < self.waiters.len() {
            let due = self.waiters[index].deadline.is_some_and(|d| d <= now);
            if !due {
                index += 1;
                continue;
            }
            if let Some(waiter) = self.waiters.remove(index) {
                self.waiting = self.waiting.saturating_sub(waiter.need);
                self.counters.timeout += 1;
                let waited = now.saturating_duration_since(waiter.enqueued_at);
                on_expired(waiter.id, waiter.payload, waited);
            }
        }
    }

    /// Closes the semaphore: every queued request is refused with
    /// [`AcquireError::Closed`] (`on_failed` is called for each, in FIFO order) and so is
    /// every later one. What is held stays held until released.
    pub fn close(&mut self, mut on_failed: impl FnMut(WaiterId, T)) {
        self.closed = true;
        self.waiting = A::default();
        while let Some(waiter) = self.waiters.pop_front() {
            self.counters.closed += 1;
            on_failed(waiter.id, waiter.payload);
        }
    }

    /// Drops `amount` from what is held without returning it: the total shrinks by as
    /// much. Under [`Oversize::Reject`], queued requests that no longer fit the smaller
    /// total are refused with [`AcquireError::TooLarge`] through `on_refused`. Call
    /// [`grant`](Self::grant) afterwards.
    pub fn forget(&mut self, amount: A, mut on_refused: impl FnMut(WaiterId, T, AcquireError<A>)) {
        self.held = self.held.saturating_sub(amount);
        self.total = self.total.saturating_sub(amount);
        if self.oversize != Oversize::Reject {
            return;
        }
        let mut index = 0;
        while index < self.waiters.len() {
            let waiter = &self.waiters[index];
            let target = waiter.holding.saturating_add(waiter.need);
            if target.fits(self.total) {
                index += 1;
                continue;
            }
            if let Some(waiter) = self.waiters.remove(index) {
                self.waiting = self.waiting.saturating_sub(waiter.need);
                self.counters.too_large += 1;
                let error = AcquireError::TooLarge {
                    requested: target,
                    total: self.total,
                };
                on_refused(waiter.id, waiter.payload, error);
            }
        }
    }

    /// Raises the total by `amount`. Call [`grant`](Self::grant) afterwards.
    pub fn add_permits(&mut self, amount: A) {
        self.total = self.total.saturating_add(amount);
    }

    fn remove(&mut self, id: WaiterId) -> Option<Waiter<A, T>> {
        // Ids grow with arrival and the queue keeps arrival order, so it is sorted.
        let index = self.waiters.binary_search_by_key(&id, |w| w.id).ok()?;
        let waiter = self.waiters.remove(index)?;
        self.waiting = self.waiting.saturating_sub(waiter.need);
        Some(waiter)
    }

    /// The statistics as of `now` (which only `oldest_age` depends on).
    pub fn stats(&self, now: Timestamp) -> SemaphoreStats<A> {
        let c = &self.counters;
        let rejected =
            c.too_many_waiters + c.timeout + c.too_large + c.closed + c.no_permits + c.cancelled;
        let oldest_age = self.waiters.front().map_or(Duration::ZERO, |head| {
            now.saturating_duration_since(head.enqueued_at)
        });
        SemaphoreStats {
            flow: FlowStats {
                offered: c.offered,
                accepted: c.accepted,
                delivered: c.delivered,
                rejected,
                depth: self.waiters.len() as u64,
                bytes: self.waiting.bytes(),
                oldest_age,
                max_depth: c.max_depth,
                max_queue_wait: c.max_queue_wait,
                ..FlowStats::default()
            },
            total: self.total,
            available: self.available(),
            held: self.held,
            waiters: self.waiters.len(),
            waiting: self.waiting,
            rejected_too_many_waiters: c.too_many_waiters,
            rejected_timeout: c.timeout,
            rejected_too_large: c.too_large,
            rejected_closed: c.closed,
            rejected_no_permits: c.no_permits,
            cancelled: c.cancelled,
        }
    }
}
