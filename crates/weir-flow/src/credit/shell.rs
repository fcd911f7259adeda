//! The async credit channel: a [`DemandCore`] shared by one sender and one receiver.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::num::NonZeroUsize;
use std::sync::PoisonError;
use std::task::{Poll, Waker};
use std::time::Duration;

use super::core::{DemandCore, RequestOutcome, StreamState};
use super::error::{Closed, RecvError, RequestError, SendError, TryRecvError, TrySendError};
use crate::sync::{Arc, Mutex, MutexGuard};
use crate::{Clock, FlowStats, Timestamp};

/// Creates a credit channel whose receiver buffers at most `capacity` items.
///
/// The sender sends only against demand the receiver granted with
/// [`CreditReceiver::request`], so the receiver's buffer never holds more than it
/// asked for. `capacity` is a hard ceiling on top of that for receivers that request
/// a lot (up to unbounded `u64::MAX`): demand is a licence to send, not an obligation,
/// so at the ceiling the sender waits for the receiver to take items, as if the
/// demand were smaller.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::num::NonZeroUsize;
/// use weir_flow::credit::{self, RecvError, TrySendError};
///
/// let (mut tx, mut rx) = credit::channel::<u32>(NonZeroUsize::new(16).unwrap());
/// // No demand yet: nothing may be sent.
/// assert!(matches!(tx.try_send(1), Err(TrySendError::NoDemand(1))));
///
/// let _ = rx.request(2);
/// tx.send(1).await.unwrap();
/// tx.send(2).await.unwrap();
/// assert!(matches!(tx.try_send(3), Err(TrySendError::NoDemand(3))));
/// tx.complete();
///
/// assert_eq!(rx.recv().await, Ok(1));
/// assert_eq!(rx.recv().await, Ok(2));
/// assert_eq!(rx.recv().await, Err(RecvError::Completed));
/// # }
/// ```
pub fn channel<T>(capacity: NonZeroUsize) -> (CreditSender<T>, CreditReceiver<T>) {
    let shared = Arc::new(Shared {
        inner: Mutex::new(Inner {
            core: DemandCore::new(),
            buffer: VecDeque::new(),
            capacity: capacity.get(),
            stats: FlowStats::default(),
            failure: None,
            sender_waker: None,
            receiver_waker: None,
        }),
        clock: Clock::new(),
    });
    (
        CreditSender {
            shared: Arc::clone(&shared),
            finished: false,
        },
        CreditReceiver { shared },
    )
}

struct Shared<T> {
    inner: Mutex<Inner<T>>,
    clock: Clock,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct Inner<T> {
    core: DemandCore,
    buffer: VecDeque<(Timestamp, T)>,
    capacity: usize,
    stats: FlowStats,
    /// How a failed stream failed: `Some` once the core is `Failed`.
    failure: Option<RecvError>,
    sender_waker: Option<Waker>,
    receiver_waker: Option<Waker>,
}

impl<T> Inner<T> {
    fn wake_sender(&mut self) {
        if let Some(waker) = self.sender_waker.take() {
            waker.wake();
        }
    }

    fn wake_receiver(&mut self) {
        if let Some(waker) = self.receiver_waker.take() {
            waker.wake();
        }
    }

    /// `Ok(true)` if an item may be sent now, `Ok(false)` if not yet, `Err` if never.
    fn send_allowed(&self) -> Result<bool, Closed> {
        match self.core.state() {
            StreamState::Active => Ok(self.core.can_emit() && self.buffer.len() < self.capacity),
            StreamState::Cancelled => Err(Closed::Cancelled),
            _ => Err(Closed::Terminated),
        }
    }

    fn push(&mut self, now: Timestamp, item: T) {
        let claimed = self.core.try_claim();
        debug_assert!(claimed, "send_allowed was checked just before");
        self.buffer.push_back((now, item));
        self.stats.offered += 1;
        self.stats.accepted += 1;
        self.stats.depth += 1;
        self.stats.max_depth = self.stats.max_depth.max(self.stats.depth);
        self.wake_receiver();
    }

    fn refuse(&mut self) {
        self.stats.offered += 1;
        self.stats.rejected += 1;
    }

    fn pop(&mut self, now: Timestamp) -> Result<T, TryRecvError> {
        if let Some((at, item)) = self.buffer.pop_front() {
            self.stats.depth -= 1;
            self.stats.delivered += 1;
            self.stats.max_queue_wait = self
                .stats
                .max_queue_wait
                .max(now.saturating_duration_since(at));
            // The sender may be waiting for room under the capacity ceiling.
            self.wake_sender();
            return Ok(item);
        }
        let end = match self.core.state() {
            StreamState::Active => return Err(TryRecvError::Empty),
            StreamState::Cancelled => RecvError::Cancelled,
            StreamState::Completed => RecvError::Completed,
            StreamState::InvalidRequest => RecvError::InvalidRequest(RequestError::NonPositive(0)),
            _ => self.failure.clone().unwrap_or(RecvError::Disconnected),
        };
        Err(TryRecvError::Ended(end))
    }

    fn stats(&self, now: Timestamp) -> FlowStats {
        let mut stats = self.stats;
        stats.oldest_age = self
            .buffer
            .front()
            .map_or(Duration::ZERO, |(at, _)| now.saturating_duration_since(*at));
        stats
    }
}

/// The sending half of a credit channel: the publisher.
///
/// It sends only against demand granted by the [`CreditReceiver`]. Dropping it without
/// [`complete`](Self::complete) or [`fail`](Self::fail) ends the stream with
/// [`RecvError::Disconnected`] once the buffered items are received.
pub struct CreditSender<T> {
    shared: Arc<Shared<T>>,
    finished: bool,
}

impl<T> std::fmt::Debug for CreditSender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.shared.lock();
        f.debug_struct("CreditSender")
            .field("state", &inner.core.state())
            .field("demand", &inner.core.demand())
            .finish_non_exhaustive()
    }
}

impl<T> CreditSender<T> {
    /// Sends `item` now if there is demand and room, or hands it back.
    ///
    /// A refusal for lack of demand ([`TrySendError::NoDemand`]) is not counted in
    /// the stats: the item was never offered. Refusals after a cancel or the end are
    /// counted as `offered` and `rejected`.
    pub fn try_send(&mut self, item: T) -> Result<(), TrySendError<T>> {
        let now = self.shared.clock.now();
        let mut inner = self.shared.lock();
        match inner.send_allowed() {
            Ok(true) => {
                inner.push(now, item);
                Ok(())
            }
            Ok(false) => Err(TrySendError::NoDemand(item)),
            Err(closed) => {
                inner.refuse();
                Err(match closed {
                    Closed::Cancelled => TrySendError::Cancelled(item),
                    Closed::Terminated => TrySendError::Terminated(item),
                })
            }
        }
    }

    /// Waits for demand (and room), then sends `item`.
    ///
    /// Fails, handing the item back, if the receiver cancels or the stream ends first.
    ///
    /// # Cancel safety
    ///
    /// If the future is dropped before it completes, the item was not sent, no demand
    /// was taken, and the item is dropped with the future. To keep the item, wait
    /// with [`ready`](Self::ready) (cancel safe) and then call
    /// [`try_send`](Self::try_send), which cannot fail for lack of demand right after
    /// `ready` returned `Ok` because this sender is the only one.
    pub async fn send(&mut self, item: T) -> Result<(), SendError<T>> {
        let mut item = Some(item);
        poll_fn(|cx| {
            let now = self.shared.clock.now();
            let mut inner = self.shared.lock();
            match inner.send_allowed() {
                Ok(true) => {
                    if let Some(item) = item.take() {
                        inner.push(now, item);
                    }
                    Poll::Ready(Ok(()))
                }
                Ok(false) => {
                    inner.sender_waker = Some(cx.waker().clone());
                    Poll::Pending
                }
                Err(closed) => match item.take() {
                    Some(item) => {
                        inner.refuse();
                        Poll::Ready(Err(match closed {
                            Closed::Cancelled => SendError::Cancelled(item),
                            Closed::Terminated => SendError::Terminated(item),
                        }))
                    }
                    None => Poll::Ready(Ok(())),
                },
            }
        })
        .await
    }

    /// Waits until a [`try_send`](Self::try_send) would succeed, returning the
    /// outstanding demand, or why nothing can be sent any more.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it takes nothing, so dropping the future loses nothing.
    pub async fn ready(&mut self) -> Result<u64, Closed> {
        poll_fn(|cx| {
            let mut inner = self.shared.lock();
            match inner.send_allowed() {
                Ok(true) => Poll::Ready(Ok(inner.core.demand())),
                Ok(false) => {
                    inner.sender_waker = Some(cx.waker().clone());
                    Poll::Pending
                }
                Err(closed) => Poll::Ready(Err(closed)),
            }
        })
        .await
    }

    /// Completes the stream (`onComplete`): the receiver gets every buffered item,
    /// then [`RecvError::Completed`]. Returns `false` if the stream had already been
    /// cancelled or ended, in which case nothing is signalled.
    pub fn complete(mut self) -> bool {
        self.finished = true;
        let mut inner = self.shared.lock();
        let signalled = inner.core.complete();
        inner.wake_receiver();
        signalled
    }

    /// Fails the stream (`onError`) with `reason`: the receiver gets every buffered
    /// item, then [`RecvError::Failed`]. Returns `false` if the stream had already
    /// been cancelled or ended.
    pub fn fail(mut self, reason: impl Into<String>) -> bool {
        self.finished = true;
        let mut inner = self.shared.lock();
        let signalled = inner.core.fail();
        if signalled {
            inner.failure = Some(RecvError::Failed {
                reason: reason.into(),
            });
        }
        inner.wake_receiver();
        signalled
    }

    /// The outstanding demand ([`UNBOUNDED`](super::UNBOUNDED) when saturated).
    pub fn demand(&self) -> u64 {
        self.shared.lock().core.demand()
    }

    /// The stream's state.
    pub fn state(&self) -> StreamState {
        self.shared.lock().core.state()
    }

    /// The channel's statistics now.
    pub fn stats(&self) -> FlowStats {
        let now = self.shared.clock.now();
        self.shared.lock().stats(now)
    }
}

impl<T> Drop for CreditSender<T> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut inner = self.shared.lock();
        if inner.core.fail() {
            inner.failure = Some(RecvError::Disconnected);
        }
        inner.wake_receiver();
    }
}

/// The receiving half of a credit channel: the subscriber.
///
/// It grants demand with [`request`](Self::request) and takes items with
/// [`recv`](Self::recv). Dropping it cancels the stream.
pub struct CreditReceiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> std::fmt::Debug for CreditReceiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.shared.lock();
        f.debug_struct("CreditReceiver")
            .field("state", &inner.core.state())
            .field("demand", &inner.core.demand())
            .field("buffered", &inner.buffer.len())
            .finish_non_exhaustive()
    }
}

impl<T> CreditReceiver<T> {
    /// Grants `n` more items of demand (saturating at `u64::MAX`, which is unbounded).
    ///
    /// `request(0)` ends the stream with [`RecvError::InvalidRequest`] after the
    /// buffered items; a request after a cancel or the end is a no-op. Never blocks and
    /// never recurses, so it may be called from anywhere.
    pub fn request(&self, n: u64) -> RequestOutcome {
        let mut inner = self.shared.lock();
        let outcome = inner.core.request(n);
        match outcome {
            RequestOutcome::Added { .. } => inner.wake_sender(),
            RequestOutcome::Errored(_) => {
                inner.wake_sender();
                inner.wake_receiver();
            }
            _ => {}
        }
        outcome
    }

    /// Cancels the stream. Idempotent. Items already buffered can still be received;
    /// after them [`recv`](Self::recv) returns [`RecvError::Cancelled`] (unless the
    /// stream had ended before). The sender's next send fails.
    pub fn cancel(&self) {
        let mut inner = self.shared.lock();
        if inner.core.cancel() {
            inner.wake_sender();
        }
    }

    /// Takes the next buffered item, or says why there is none.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        let now = self.shared.clock.now();
        self.shared.lock().pop(now)
    }

    /// Waits for the next item. After the last item, returns how the stream ended.
    ///
    /// It waits forever if no demand is outstanding and the stream is open: request
    /// first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an item is taken from the buffer only in the poll that returns it,
    /// so dropping the future loses nothing.
    pub async fn recv(&mut self) -> Result<T, RecvError> {
        poll_fn(|cx| {
            let now = self.shared.clock.now();
            let mut inner = self.shared.lock();
            match inner.pop(now) {
                Ok(item) => Poll::Ready(Ok(item)),
                Err(TryRecvError::Ended(end)) => Poll::Ready(Err(end)),
                Err(TryRecvError::Empty) => {
                    inner.receiver_waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// The outstanding demand: granted and not yet sent.
    pub fn demand(&self) -> u64 {
        self.shared.lock().core.demand()
    }

    /// Items sent and not yet received.
    pub fn buffered(&self) -> usize {
        self.shared.lock().buffer.len()
    }

    /// The stream's state.
    pub fn state(&self) -> StreamState {
        self.shared.lock().core.state()
    }

    /// The channel's statistics now.
    pub fn stats(&self) -> FlowStats {
        let now = self.shared.clock.now();
        self.shared.lock().stats(now)
    }
}

impl<T> Drop for CreditReceiver<T> {
    fn drop(&mut self) {
        self.cancel();
    }
}
