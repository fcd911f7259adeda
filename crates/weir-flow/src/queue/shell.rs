//! The thin async shell: [`channel`], [`Sender`] and [`Permit`] around a
//! [`QueueCore`] behind a mutex (the [`Receiver`] is in `receiver.rs`).

use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use super::Receiver;
use super::core::preallocated_slots;
use super::error::{ReserveError, SendError, Sent};
use super::shared::{Shared, State, WaitEnd};
use super::{Offer, OnFull, QueueConfig, QueueCore, Reservation, ReserveRefused};
use crate::sync::Arc;
use crate::{Clock, FlowStats};

/// Creates a bounded queue with one receiver and any number of senders (clone the
/// [`Sender`]), timed by a new [`Clock::coarse`].
///
/// Every item is stamped when queued and when taken (for `oldest_age`,
/// `max_queue_wait` and `Expire`). The coarse clock makes those stamps cheap, at the
/// price of its resolution (one timer tick, typically 1–4 ms; see
/// [`Clock::resolution`]): ages and waits are exact to within a tick, and under
/// [`OnFull::Expire`](super::OnFull::Expire) an item is **never expired before it is
/// `max_age` old** but may be delivered up to two ticks past it (the shell widens
/// `max_age` by one tick to stay on that side). The coarse clock does not follow
/// tokio's paused clock: to test with `tokio::time::pause`, or for tick-exact
/// expiry, use [`channel_with_clock`] with [`Clock::new`].
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
    channel_with_clock(config, Clock::coarse())
}

/// Like [`channel`], timing enqueues and takes with `clock`. [`Clock::new`] follows
/// tokio's clock (paused-clock tests, full resolution, two `CLOCK_MONOTONIC` readings
/// per item); [`Clock::coarse`] is what [`channel`] uses. A clock of coarse
/// resolution widens an `Expire` policy's `max_age` by its resolution, so no item is
/// expired early.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use weir_flow::Clock;
/// use weir_flow::queue::{channel_with_clock, Capacity, Fallback, OnFull, QueueConfig};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
/// let policy = OnFull::Expire { max_age: Duration::from_millis(100), when_full: Fallback::Reject };
/// // Tokio's clock: expiry follows the paused clock to the nanosecond.
/// let (tx, mut rx) = channel_with_clock(QueueConfig::new(Capacity::items(8), policy), Clock::new());
/// tx.send("stale").await.expect("room");
/// tokio::time::advance(Duration::from_millis(101)).await;
/// tx.send("fresh").await.expect("room");
/// assert_eq!(rx.recv().await, Some("fresh"));
/// assert_eq!(rx.stats().expired, 1);
/// # });
/// ```
pub fn channel_with_clock<T, K: Hash + Eq + Clone>(
    mut config: QueueConfig<T, K>,
    clock: Clock,
) -> (Sender<T, K>, Receiver<T, K>) {
    if let OnFull::Expire { max_age, when_full } = config.on_full {
        // A reading lags the true time by up to one tick, so a measured age can fall
        // short of the true age by a tick or exceed it by one: widening the deadline
        // by a tick means a measured age past it is a true age past `max_age`.
        config.on_full = OnFull::Expire {
            max_age: max_age.saturating_add(clock.resolution()),
            when_full,
        };
    }
    let core = QueueCore::new(config);
    // A lending receiver swaps buffers with the core: give it one of the same size.
    let lent = if core.can_lend() {
        VecDeque::with_capacity(preallocated_slots(core.room()))
    } else {
        VecDeque::new()
    };
    let shared = Arc::new(Shared::new(core, clock));
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver::new(shared, lent),
    )
}

/// The sending half. Clone it for more producers; the queue closes when the last
/// sender is dropped (the receiver still drains what is queued).
pub struct Sender<T, K = ()> {
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
    /// Queued on the fast path (open, room, nobody waiting).
    Queued,
    Done(Result<Sent<T>, SendError<T>>),
    Wait {
        item: T,
        id: u64,
    },
}

impl<T> Attempt<T> {
    /// An item was just queued: wakes the receiver if it waits.
    #[inline]
    fn queued<K>(mut state: crate::sync::MutexGuard<'_, State<T, K>>) -> Self {
        // Read first: `take` would write the line even when there is no waker.
        let waker = if state.rx_waker.is_some() {
            state.rx_waker.take()
        } else {
            None
        };
        drop(state);
        if let Some(waker) = waker {
            waker.wake();
        }
        Attempt::Queued
    }
}

impl<T, K: Hash + Eq + Clone> Sender<T, K> {
    /// Sends `item`. Under a `Block` policy (or fallback) it waits until there is room,
    /// behind senders already waiting (FIFO); other policies answer at once.
    ///
    /// Once senders wait, they are let in when a batch of room is free (an eighth of
    /// the item capacity, 1 to 256 slots), not after every single take: a sender that
    /// waited then finds room for many sends in a row instead of parking after each.
    /// An empty queue always has a batch of room, so no sender waits on a drained
    /// queue.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe in the sense that matters: dropping the future before it completes
    /// loses nothing that was queued and leaves no hole. The item is owned by the
    /// future and dropped with it, never queued and never counted (a cancelled waiting
    /// send was never offered). If room had already been granted to it, the room is
    /// given back and the next waiting sender is let in.
    pub fn send(&self, item: T) -> impl Future<Output = Result<Sent<T>, SendError<T>>> + '_ {
        // A hand-written future rather than an `async fn`: the state machine of an
        // `async fn` builds its (large) output in a temporary and copies it out on
        // every completion, a measurable share of a fast-path send.
        Sending {
            sender: self,
            item: Some(item),
            wait: None,
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
    ///
    /// # Panics
    ///
    /// If it has to wait outside a tokio runtime with the time driver enabled.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir_flow::queue::{channel, Capacity, OnFull, QueueConfig, SendError};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
    /// let (tx, rx) = channel(QueueConfig::new(Capacity::items(1), OnFull::Block));
    /// tx.send("first").await.expect("room");
    /// // Nobody receives: after 50 ms the second item comes back, counted as rejected.
    /// let refused = tx.send_timeout("second", Duration::from_millis(50)).await;
    /// assert!(matches!(refused, Err(SendError::Timeout("second"))));
    /// assert_eq!(rx.stats().rejected, 1);
    /// # });
    /// ```
    pub async fn send_timeout(&self, item: T, timeout: Duration) -> Result<Sent<T>, SendError<T>> {
        let deadline = tokio::time::Instant::now() + timeout;
        match self.attempt(item) {
            Attempt::Queued => Ok(Sent::Queued),
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
            Attempt::Queued => Ok(Sent::Queued),
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
    ///
    /// # Examples
    ///
    /// ```
    /// use weir_flow::queue::{channel, Capacity, OnFull, QueueConfig};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let (tx, mut rx) = channel(QueueConfig::new(Capacity::items(1), OnFull::Block));
    /// // Wait for room first, build the item only once it has a place.
    /// let permit = tx.reserve().await.expect("open");
    /// permit.send(String::from("built after the room was secured")).expect("reserved");
    /// assert_eq!(rx.recv().await.as_deref(), Some("built after the room was secured"));
    /// # });
    /// ```
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
                self.shared.settle_if_needed(&mut state, weight);
                match state.core.try_reserve(weight) {
                    Ok(reservation) => return Ok(self.permit(reservation)),
                    Err(ReserveRefused::Full) => {
                        let id = state.join(weight);
                        let wakers = self.shared.grant(&mut state);
                        drop(state);
                        wakers.wake_all();
                        id
                    }
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
        self.shared.settle_if_needed(&mut state, weight);
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
        self.shared.stats()
    }

    /// Number of queued items.
    pub fn len(&self) -> usize {
        self.shared.len()
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
    #[inline]
    fn attempt(&self, item: T) -> Attempt<T> {
        let now = self.shared.clock.now();
        let mut state = self.shared.lock();
        let must_wait_in_line = state.must_wait_in_line();
        let item = if must_wait_in_line {
            item
        } else {
            match state.core.try_push(item, now) {
                Ok(()) => return Attempt::queued(state),
                Err(item) if state.core.lent() > 0 => {
                    // Full (or a new max_depth) counting lent items the receiver may
                    // have delivered: settle and try again.
                    self.shared.settle(&mut state);
                    match state.core.try_push(item, now) {
                        Ok(()) => return Attempt::queued(state),
                        Err(item) => item,
                    }
                }
                Err(item) => item,
            }
        };
        if must_wait_in_line && !state.core.is_closed() {
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
                // First in line: arm the receiver's grant point (lending), or be let
                // in at once if the receiver delivered enough meanwhile.
                let wakers = self.shared.grant(&mut state);
                drop(state);
                wakers.wake_all();
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
#[inline]
fn offer_reserved<T, K: Hash + Eq + Clone>(
    shared: &Shared<T, K>,
    item: T,
    reservation: Reservation,
) -> Result<Sent<T>, SendError<T>> {
    let now = shared.clock.now();
    let mut state = shared.lock();
    if state.core.lent() > 0 {
        let weight = state.core.weight_of(&item);
        if state.core.needs_settling_reserved(weight, &reservation) {
            shared.settle(&mut state);
        }
    }
    let outcome = state.core.offer_reserved(item, reservation, now);
    finish(state, outcome)
}

/// Wakes the receiver if `outcome` queued an item, then maps it to a send result.
#[inline]
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

#[inline]
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

/// The future of [`Sender::send`].
struct Sending<'a, T, K: Hash + Eq + Clone> {
    sender: &'a Sender<T, K>,
    /// The item, until it is queued or handed back.
    item: Option<T>,
    /// The place in line while waiting for room.
    wait: Option<WaitGuard<'a, T, K>>,
}

// Nothing is pinned structurally: the item is moved out by value, never pinned.
impl<T, K: Hash + Eq + Clone> Unpin for Sending<'_, T, K> {}

impl<T, K: Hash + Eq + Clone> Future for Sending<'_, T, K> {
    type Output = Result<Sent<T>, SendError<T>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let wait = match &mut this.wait {
            Some(wait) => wait,
            None => {
                let Some(item) = this.item.take() else {
                    panic!("`Sender::send` future polled after completion")
                };
                match this.sender.attempt(item) {
                    Attempt::Queued => return Poll::Ready(Ok(Sent::Queued)),
                    Attempt::Done(result) => return Poll::Ready(result),
                    Attempt::Wait { item, id } => {
                        this.item = Some(item);
                        this.wait.insert(WaitGuard::new(&this.sender.shared, id))
                    }
                }
            }
        };
        let end = ready!(wait.poll(cx));
        this.wait = None;
        let Some(item) = this.item.take() else {
            unreachable!("a waiting send holds its item")
        };
        Poll::Ready(match end {
            Ok(reservation) => this.sender.offer_reserved(item, reservation),
            Err(WaitEnd::Closed) => Err(SendError::Closed(item)),
        })
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
            let wakers = self.shared.grant(&mut state);
            drop(state);
            wakers.wake_all();
        }
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

impl<T, K> fmt::Debug for Sender<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl<T, K: Hash + Eq + Clone> fmt::Debug for Permit<'_, T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("reservation", &self.reservation)
            .finish()
    }
}
