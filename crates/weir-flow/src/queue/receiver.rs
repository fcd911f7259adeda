//! The receiving half of the async queue.

use std::fmt;
use std::future::poll_fn;
use std::hash::Hash;
use std::task::{Context, Poll};

use super::error::TryRecvError;
use super::shared::Shared;
use crate::sync::Arc;
use crate::{FlowStats, Timestamp};

/// The receiving half. Dropping it closes the queue: later sends fail with
/// [`SendError::Closed`](super::SendError::Closed).
pub struct Receiver<T, K = ()> {
    pub(super) shared: Arc<Shared<T, K>>,
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
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir_flow::queue::{channel, Capacity, Fallback, OnFull, QueueConfig};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
    /// let policy = OnFull::Expire { max_age: Duration::from_millis(100), when_full: Fallback::Reject };
    /// let (tx, mut rx) = channel(QueueConfig::new(Capacity::items(8), policy));
    /// tx.send("stale").await.expect("room");
    /// tokio::time::advance(Duration::from_millis(150)).await;
    /// tx.send("fresh").await.expect("room");
    /// let mut expired = Vec::new();
    /// assert_eq!(rx.recv_with(|item, _enqueued_at| expired.push(item)).await, Some("fresh"));
    /// assert_eq!(expired, ["stale"]);
    /// # });
    /// ```
    pub async fn recv_with(&mut self, mut on_expired: impl FnMut(T, Timestamp)) -> Option<T> {
        poll_fn(|cx| self.poll_recv_with(cx, &mut on_expired)).await
    }

    /// Receives up to `limit` items into `buffer` (appended, oldest first) under one
    /// lock and one clock reading, waiting only if none is queued. Returns how many
    /// were received: 0 only once the queue is closed and drained (or if `limit` is
    /// 0). Reuse `buffer` across calls to avoid allocating.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: items are taken only in the poll that returns, so dropping the
    /// future loses nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use weir_flow::queue::{channel, Capacity, OnFull, QueueConfig};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let (tx, mut rx) = channel(QueueConfig::new(Capacity::items(8), OnFull::Block));
    /// for i in 0..5 {
    ///     tx.send(i).await.expect("room");
    /// }
    /// let mut batch = Vec::with_capacity(4);
    /// assert_eq!(rx.recv_many(&mut batch, 4).await, 4);
    /// assert_eq!(batch, [0, 1, 2, 3]);
    /// # });
    /// ```
    pub async fn recv_many(&mut self, buffer: &mut Vec<T>, limit: usize) -> usize {
        poll_fn(|cx| self.poll_take(cx, limit, &mut |_, _| {}, &mut |item| buffer.push(item))).await
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

    /// Closes the queue: senders get [`SendError::Closed`](super::SendError::Closed); what is queued can still
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

    /// Takes up to `limit` items (at least one, unless the queue is closed and
    /// drained), handing each to `out`, all under one lock and one clock reading.
    #[inline]
    fn poll_take(
        &mut self,
        cx: &mut Context<'_>,
        limit: usize,
        on_expired: &mut dyn FnMut(T, Timestamp),
        out: &mut dyn FnMut(T),
    ) -> Poll<usize> {
        if limit == 0 {
            return Poll::Ready(0);
        }
        let now = self.shared.clock.now();
        let mut state = self.shared.lock();
        let mut count = 0;
        while count < limit {
            match state.core.take_with(now, &mut *on_expired) {
                Some(taken) => {
                    out(taken.item);
                    count += 1;
                }
                None => break,
            }
        }
        let wakers = state.grant();
        let poll = if count > 0 || state.core.is_closed() {
            Poll::Ready(count)
        } else {
            match &state.rx_waker {
                Some(waker) if waker.will_wake(cx.waker()) => {}
                _ => state.rx_waker = Some(cx.waker().clone()),
            }
            Poll::Pending
        };
        drop(state);
        wakers.wake_all();
        poll
    }

    #[inline]
    fn poll_recv_with(
        &mut self,
        cx: &mut Context<'_>,
        on_expired: &mut dyn FnMut(T, Timestamp),
    ) -> Poll<Option<T>> {
        let mut item = None;
        let poll = self.poll_take(cx, 1, on_expired, &mut |taken| item = Some(taken));
        poll.map(|_| item)
    }
}

impl<T, K> Drop for Receiver<T, K> {
    fn drop(&mut self) {
        let wakers = self.shared.lock().close();
        wakers.wake_all();
    }
}

impl<T, K> fmt::Debug for Receiver<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}
