//! The thin async shell: [`channel`], [`Sender`], [`Receiver`] and [`Permit`] around
//! a [`QueueCore`] behind a mutex.

use std::fmt;
use std::future::poll_fn;
use std::hash::Hash;
use std::task::{Context, Poll};
use std::time::Duration;

use super::error::{ReserveError, SendError, Sent, TryRecvError};
use super::shared::{Shared, State, WaitEnd};
use super::{Offer, QueueConfig, QueueCore, Reservation, ReserveRefused};
use crate::sync::Arc;
use crate::{Clock, FlowStats, Timestamp};

/// Creates a bounded queue with one receiver and any number of senders (clone the
/// [`Sender`]), timed by a new [`Clock`].
///
/// # Examples
///
/// ```
/// use weir_flow::queue::{channel, Capacity, OnFull, QueueConfig};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let (tx, mut rx) = channel(QueueConfig::new(Capacity::items(64), OnFull::Block));
/// tokio::spawn(async move {
///     for i in 0..100 {
///         // Waits whenever 64 items are queued.
///         tx.send(i).await.expect("the receiver is alive");
///     }
/// });
/// let mut sum = 0;
/// while let Some(i) = rx.recv().await {
///     sum += i;
/// }
/// assert_eq!(sum, 4950);
/// assert!(rx.stats().is_conserved());
/// # });
/// ```
pub fn channel<T, K: Hash + Eq + Clone>(
    config: QueueConfig<T, K>,
) -> (Sender<T, K>, Receiver<T, K>) {
    channel_with_clock(config, Clock::new())
}

/// Like [`channel`], timing enqueues and takes with `clock`.
pub fn channel_with_clock<T, K: Hash + Eq + Clone>(
    config: QueueConfig<T, K>,
    clock: Clock,
) -> (Sender<T, K>, Receiver<T, K>) {
    let shared = Arc::new(Shared::new(QueueCore::new(config), clock));
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

/// The sending half. Clone it for more producers; the queue closes when the last
/// sender is dropped (the receiver still drains what is queued).
pub struct Sender<T, K = ()> {
    shared: Arc<Shared<T, K>>,
}

/// The receiving half. Dropping it closes the queue: later sends fail with
/// [`SendError::Closed`].
pub struct Receiver<T, K = ()> {
    shared: Arc<Shared<T, K>>,
}

/// Room for one item, reserved by [`Sender::reserve`]. Dropping it unused gives the
/// room back (and lets the next waiting sender in).
#[must_use = "the reserved room stays taken until the permit sends or is dropped"]
pub struct Permit<'a, T, K: Hash + Eq + Clone = ()> {
    shared: &'a Shared<T, K>,
    reservation: Option<Reservation>,
}

/// The first, synchronous step of a send.
enum Attempt<T> {
    Done(Result<Sent<T>, SendError<T>>),
    Wait { item: T, id: u64 },
}

impl<T, K: Hash + Eq + Clone> Sender<T, K> {
    /// Sends `item`. Under a `Block` policy (or fallback) it waits until there is room,
    /// behind senders already waiting (FIFO); other policies answer at once.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe in the sense that matters: dropping the future before it completes
    /// loses nothing that was queued and leaves no hole. The item is owned by the
    /// future and dropped with it, never queued and never counted (a cancelled waiting
    /// send was never offered). If room had already been granted to it, the room is
    /// given back and the next waiting sender is let in.
    pub async fn send(&self, item: T) -> Result<Sent<T>, SendError<T>> {
        match self.attempt(item) {
            Attempt::Done(result) => result,
            Attempt::Wait { item, id } => {
                let mut wait = WaitGuard::new(&self.shared, id);
                match poll_fn(|cx| wait.poll(cx)).await {
                    Ok(reservation) => self.offer_reserved(item, reservation),
                    Err(WaitEnd::Closed) => Err(SendError::Closed(item)),
                }
            }
        }
    }

    /// Like [`Sender::send`], giving up after `timeout`. A send that times out is
    /// counted as offered and `rejected`, and the item is handed back in
    /// [`SendError::Timeout`].
    ///
    /// # Cancel safety
    ///
    /// As [`Sender::send`]: dropping the future loses nothing queued, the item is
    /// dropped uncounted, and granted room passes to the next waiting sender.
    pub async fn send_timeout(&self, item: T, timeout: Duration) -> Result<Sent<T>, SendError<T>> {
        let deadline = tokio::time::Instant::now() + timeout;
        match self.attempt(item) {
            Attempt::Done(result) => result,
            Attempt::Wait { item, id } => {
                let mut wait = WaitGuard::new(&self.shared, id);
                match tokio::time::timeout_at(deadline, poll_fn(|cx| wait.poll(cx))).await {
                    Ok(Ok(reservation)) => self.offer_reserved(item, reservation),
                    Ok(Err(WaitEnd::Closed)) => Err(SendError::Closed(item)),
                    Err(_elapsed) => {
                        if wait.leave() {
                            self.shared.lock().core.record_abandoned();
                        }
                        Err(SendError::Timeout(item))
                    }
                }
            }
        }
    }

    /// Sends `item` if that needs no waiting. Under `Block` with a full queue (or with
    /// senders already waiting) the item comes back in [`SendError::WouldBlock`],
    /// uncounted.
    pub fn try_send(&self, item: T) -> Result<Sent<T>, SendError<T>> {
        match self.attempt(item) {
            Attempt::Done(result) => result,
            Attempt::Wait { item, id } => {
                self.shared.leave(id);
                Err(SendError::WouldBlock(item))
            }
        }
    }

    /// Waits for room for one item of weight 0 (for queues bounded by item count) and
    /// holds it in a [`Permit`]. It waits whatever the policy, in the same FIFO line as
    /// blocked sends. Nothing is counted until the permit sends.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future leaves no room reserved and lets the next
    /// waiting sender in.
    pub async fn reserve(&self) -> Result<Permit<'_, T, K>, ReserveError> {
        self.reserve_weight(0).await
    }

    /// Like [`Sender::reserve`], for an item of weight up to `weight` (under a weight
    /// bound, pass the weight of the item you will send).
    ///
    /// # Cancel safety
    ///
    /// As [`Sender::reserve`].
    pub async fn reserve_weight(&self, weight: u64) -> Result<Permit<'_, T, K>, ReserveError> {
        let id = {
            let mut state = self.shared.lock();
            if state.must_wait_in_line() {
                if state.core.is_closed() {
                    return Err(ReserveError::Closed);
                }
                if state
                    .core
                    .capacity()
                    .max_weight()
                    .is_some_and(|max| weight > max)
                {
                    return Err(ReserveError::TooHeavy);
                }
                state.join(weight)
            } else {
                match state.core.try_reserve(weight) {
                    Ok(reservation) => return Ok(self.permit(reservation)),
                    Err(ReserveRefused::Full) => state.join(weight),
                    Err(ReserveRefused::TooHeavy) => return Err(ReserveError::TooHeavy),
                    Err(_) => return Err(ReserveError::Closed),
                }
            }
        };
        let mut wait = WaitGuard::new(&self.shared, id);
        match poll_fn(|cx| wait.poll(cx)).await {
            Ok(reservation) => Ok(self.permit(reservation)),
            Err(WaitEnd::Closed) => Err(ReserveError::Closed),
        }
    }

    /// Reserves room for one item of weight up to `weight` if there is room now and
    /// nobody waits ahead.
    pub fn try_reserve_weight(&self, weight: u64) -> Result<Permit<'_, T, K>, ReserveError> {
        let mut state = self.shared.lock();
        if state.must_wait_in_line() && !state.core.is_closed() {
            let too_heavy = state
                .core
                .capacity()
                .max_weight()
                .is_some_and(|max| weight > max);
            return Err(if too_heavy {
                ReserveError::TooHeavy
            } else {
                ReserveError::Full
            });
        }
        match state.core.try_reserve(weight) {
            Ok(reservation) => Ok(self.permit(reservation)),
            Err(ReserveRefused::Full) => Err(ReserveError::Full),
            Err(ReserveRefused::TooHeavy) => Err(ReserveError::TooHeavy),
            Err(_) => Err(ReserveError::Closed),
        }
    }

    /// Closes the queue for every sender: waiting and later sends fail with
    /// [`SendError::Closed`]; the receiver drains what is queued, then sees the end.
    pub fn close(&self) {
        let wakers = self.shared.lock().close();
        wakers.wake_all();
    }

    /// Whether the queue is closed.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().core.is_closed()
    }

    /// The queue's stats now.
    pub fn stats(&self) -> FlowStats {
        let now = self.shared.clock.now();
        self.shared.lock().core.stats(now)
    }

    /// Number of queued items.
    pub fn len(&self) -> usize {
        self.shared.lock().core.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn permit(&self, reservation: Reservation) -> Permit<'_, T, K> {
        Permit {
            shared: &self.shared,
            reservation: Some(reservation),
        }
    }

    /// Offers `item` at once unless it must wait; joins the line if it must.
    fn attempt(&self, item: T) -> Attempt<T> {
        let now = self.shared.clock.now();
        let mut state = self.shared.lock();
        if state.must_wait_in_line() && !state.core.is_closed() {
            let weight = state.core.weight_of(&item);
            if state
                .core
                .capacity()
                .max_weight()
                .is_some_and(|max| weight > max)
            {
                // Never fits: refused at once, ahead of the line (counted by the core).
                return Attempt::Done(into_result(state.core.offer(item, now)));
            }
            let id = state.join(weight);
            return Attempt::Wait { item, id };
        }
        match state.core.offer(item, now) {
            Offer::WouldBlock(item) => {
                let weight = state.core.weight_of(&item);
                let id = state.join(weight);
                Attempt::Wait { item, id }
            }
            outcome => Attempt::Done(finish(state, outcome)),
        }
    }

    fn offer_reserved(&self, item: T, reservation: Reservation) -> Result<Sent<T>, SendError<T>> {
        offer_reserved(&self.shared, item, reservation)
    }
}

/// Offers into granted room, waking the receiver if the item was queued.
fn offer_reserved<T, K: Hash + Eq + Clone>(
    shared: &Shared<T, K>,
    item: T,
    reservation: Reservation,
) -> Result<Sent<T>, SendError<T>> {
    let now = shared.clock.now();
    let mut state = shared.lock();
    let outcome = state.core.offer_reserved(item, reservation, now);
    finish(state, outcome)
}

/// Wakes the receiver if `outcome` queued an item, then maps it to a send result.
fn finish<T, K: Hash + Eq + Clone>(
    mut state: crate::sync::MutexGuard<'_, State<T, K>>,
    outcome: Offer<T>,
) -> Result<Sent<T>, SendError<T>> {
    let waker = if outcome.is_accepted() {
        state.rx_waker.take()
    } else {
        None
    };
    drop(state);
    if let Some(waker) = waker {
        waker.wake();
    }
    into_result(outcome)
}

fn into_result<T>(outcome: Offer<T>) -> Result<Sent<T>, SendError<T>> {
    match outcome {
        Offer::Accepted => Ok(Sent::Queued),
        Offer::Evicted(evicted) => Ok(Sent::Evicted(evicted)),
        Offer::Superseded { old, evicted } => Ok(Sent::Superseded { old, evicted }),
        Offer::WouldBlock(item) => Err(SendError::WouldBlock(item)),
        Offer::Rejected(item) => Err(SendError::Full(item)),
        Offer::DroppedNewest(item) => Err(SendError::DroppedNewest(item)),
        Offer::TooHeavy(item) => Err(SendError::TooHeavy(item)),
        Offer::Closed(item) => Err(SendError::Closed(item)),
    }
}

/// A place in the line of waiting senders; dropping it leaves the line.
struct WaitGuard<'a, T, K: Hash + Eq + Clone> {
    shared: &'a Shared<T, K>,
    id: u64,
    in_line: bool,
}

impl<'a, T, K: Hash + Eq + Clone> WaitGuard<'a, T, K> {
    fn new(shared: &'a Shared<T, K>, id: u64) -> Self {
        WaitGuard {
            shared,
            id,
            in_line: true,
        }
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Reservation, WaitEnd>> {
        let poll = self.shared.poll_grant(self.id, cx);
        if poll.is_ready() {
            self.in_line = false;
        }
        poll
    }

    /// Leaves the line now; whether it was still in line.
    fn leave(&mut self) -> bool {
        let was_in_line = self.in_line && self.shared.leave(self.id);
        self.in_line = false;
        was_in_line
    }
}

impl<T, K: Hash + Eq + Clone> Drop for WaitGuard<'_, T, K> {
    fn drop(&mut self) {
        if self.in_line {
            self.shared.leave(self.id);
        }
    }
}

impl<T, K: Hash + Eq + Clone> Permit<'_, T, K> {
    /// Sends `item` into the reserved room. An item no heavier than the reservation
    /// is queued unless the queue was closed meanwhile ([`SendError::Closed`]); a
    /// heavier one gets whatever the policy gives it.
    pub fn send(mut self, item: T) -> Result<Sent<T>, SendError<T>> {
        match self.reservation.take() {
            Some(reservation) => offer_reserved(self.shared, item, reservation),
            None => Err(SendError::Closed(item)),
        }
    }
}

impl<T, K: Hash + Eq + Clone> Drop for Permit<'_, T, K> {
    fn drop(&mut self) {
        if let Some(reservation) = self.reservation.take() {
            let mut state = self.shared.lock();
            state.core.release(reservation);
            let wakers = state.grant();
            drop(state);
            wakers.wake_all();
        }
    }
}

impl<T, K: Hash + Eq + Clone> Receiver<T, K> {
    /// Receives the next item, or `None` once the queue is closed and drained.
    /// Expired items (under `Expire`) are discarded and counted on the way.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: an item is taken from the queue only in the poll that returns it,
    /// so dropping the future loses nothing.
    pub async fn recv(&mut self) -> Option<T> {
        poll_fn(|cx| self.poll_recv_with(cx, &mut |_, _| {})).await
    }

    /// Like [`Receiver::recv`], handing each expired item and its enqueue time to
    /// `on_expired` (called with the queue locked: keep it short).
    ///
    /// # Cancel safety
    ///
    /// As [`Receiver::recv`]; items handed to `on_expired` before the future is dropped
    /// have been handed over.
    pub async fn recv_with(&mut self, mut on_expired: impl FnMut(T, Timestamp)) -> Option<T> {
        poll_fn(|cx| self.poll_recv_with(cx, &mut on_expired)).await
    }

    /// Polls for the next item (see [`Receiver::recv`]).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.poll_recv_with(cx, &mut |_, _| {})
    }

    /// Takes the next item if one is queued.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        let now = self.shared.clock.now();
        let mut state = self.shared.lock();
        let taken = state.core.take(now);
        let wakers = state.grant();
        let closed = state.core.is_closed();
        drop(state);
        wakers.wake_all();
        match taken {
            Some(taken) => Ok(taken.item),
            None if closed => Err(TryRecvError::Closed),
            None => Err(TryRecvError::Empty),
        }
    }

    /// Closes the queue: senders get [`SendError::Closed`]; what is queued can still
    /// be received.
    pub fn close(&mut self) {
        let wakers = self.shared.lock().close();
        wakers.wake_all();
    }

    /// The queue's stats now.
    pub fn stats(&self) -> FlowStats {
        let now = self.shared.clock.now();
        self.shared.lock().core.stats(now)
    }

    /// Number of queued items.
    pub fn len(&self) -> usize {
        self.shared.lock().core.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn poll_recv_with(
        &mut self,
        cx: &mut Context<'_>,
        on_expired: &mut dyn FnMut(T, Timestamp),
    ) -> Poll<Option<T>> {
        let now = self.shared.clock.now();
        let mut state = self.shared.lock();
        let taken = state.core.take_with(now, on_expired);
        let wakers = state.grant();
        let poll = match taken {
            Some(taken) => Poll::Ready(Some(taken.item)),
            None if state.core.is_closed() => Poll::Ready(None),
            None => {
                match &state.rx_waker {
                    Some(waker) if waker.will_wake(cx.waker()) => {}
                    _ => state.rx_waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        };
        drop(state);
        wakers.wake_all();
        poll
    }
}

impl<T, K> Clone for Sender<T, K> {
    fn clone(&self) -> Self {
        let mut state = self.shared.lock();
        state.senders += 1;
        drop(state);
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<T, K> Drop for Sender<T, K> {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.senders -= 1;
        if state.senders == 0 {
            let wakers = state.close();
            drop(state);
            wakers.wake_all();
        }
    }
}

impl<T, K> Drop for Receiver<T, K> {
    fn drop(&mut self) {
        let wakers = self.shared.lock().close();
        wakers.wake_all();
    }
}

impl<T, K> fmt::Debug for Sender<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl<T, K> fmt::Debug for Receiver<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

impl<T, K: Hash + Eq + Clone> fmt::Debug for Permit<'_, T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("reservation", &self.reservation)
            .finish()
    }
}
