//! The receiving half of the async queue.

use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::hash::Hash;
use std::task::{Context, Poll};

use super::core::Entry;
use super::error::TryRecvError;
use super::shared::{GRANT_WANTED, Shared};
use crate::sync::Arc;
use crate::sync::atomic::Ordering;
use crate::{FlowStats, Timestamp};

/// The receiving half. Dropping it closes the queue: later sends fail with
/// [`SendError::Closed`](super::SendError::Closed).
pub struct Receiver<T, K = ()> {
    pub(super) shared: Arc<Shared<T, K>>,
    /// Items lent by the core, oldest first, not delivered yet (lending policies only;
    /// see `shared.rs`). They still count as queued.
    lent: VecDeque<Entry<T>>,
    /// Lent items delivered so far (what `shared.rx.served` counts).
    served: u64,
    /// The longest wait of a delivered lent item, in nanoseconds.
    max_wait: u64,
}

impl<T, K> Receiver<T, K> {
    pub(super) fn new(shared: Arc<Shared<T, K>>, lent: VecDeque<Entry<T>>) -> Self {
        Receiver {
            shared,
            lent,
            served: 0,
            max_wait: 0,
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
    /// // Tokio's clock, so that the paused clock's `advance` ages the items.
    /// let config = QueueConfig::new(Capacity::items(8), policy);
    /// let (tx, mut rx) = channel_with_clock(config, Clock::new());
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
        if self.shared.lending {
            return match self.next_lent(None) {
                Poll::Ready(Some(item)) => Ok(item),
                Poll::Ready(None) => Err(TryRecvError::Closed),
                Poll::Pending => Err(TryRecvError::Empty),
            };
        }
        let now = self.shared.clock.now();
        let mut state = self.shared.lock();
        let taken = state.core.take(now);
        let wakers = self.shared.grant(&mut state);
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
        if self.shared.lending {
            return self.take_lent(cx, limit, out);
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
        let wakers = self.shared.grant(&mut state);
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
        if self.shared.lending {
            // Nothing expires under a lending policy.
            return self.next_lent(Some(cx));
        }
        let mut item = None;
        let poll = self.poll_take(cx, 1, on_expired, &mut |taken| item = Some(taken));
        poll.map(|_| item)
    }

    /// The next lent item (borrowing more from the core when none is left): `None`
    /// once the queue is closed and drained; pending (with `cx`'s waker registered if
    /// given) when nothing is queued.
    #[inline]
    fn next_lent(&mut self, cx: Option<&mut Context<'_>>) -> Poll<Option<T>> {
        if self.lent.is_empty() {
            match self.borrow(cx) {
                Poll::Ready(true) => {}
                Poll::Ready(false) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
        let Some(entry) = self.lent.pop_front() else {
            return Poll::Pending; // Unreachable: `borrow` lent at least one item.
        };
        let now = self.shared.clock.now();
        self.note_wait(now, entry.enqueued_at);
        self.publish(1);
        Poll::Ready(Some(entry.item))
    }

    /// Up to `limit` items into `out` (lent ones first, borrowing more while some are
    /// queued), under one clock reading; waits only if none is queued.
    fn take_lent(
        &mut self,
        cx: &mut Context<'_>,
        limit: usize,
        out: &mut dyn FnMut(T),
    ) -> Poll<usize> {
        let mut now = None;
        let mut count = 0;
        let mut cx = Some(cx);
        loop {
            if self.lent.is_empty() {
                // Register the waker only if nothing was taken: otherwise return what was.
                let cx = if count == 0 { cx.take() } else { None };
                match self.borrow(cx) {
                    Poll::Ready(true) => {}
                    Poll::Ready(false) => return Poll::Ready(count),
                    Poll::Pending if count == 0 => return Poll::Pending,
                    Poll::Pending => return Poll::Ready(count),
                }
            }
            let now = *now.get_or_insert_with(|| self.shared.clock.now());
            let batch = (limit - count).min(self.lent.len());
            for _ in 0..batch {
                let Some(entry) = self.lent.pop_front() else {
                    break;
                };
                self.note_wait(now, entry.enqueued_at);
                out(entry.item);
            }
            // Published before borrowing again, so that the borrow settles them.
            self.publish(batch as u64);
            count += batch;
            if count == limit {
                return Poll::Ready(count);
            }
        }
    }

    /// Records the wait of an item delivered at `now` (published by [`Self::publish`]).
    #[inline]
    fn note_wait(&mut self, now: Timestamp, enqueued_at: Timestamp) {
        let wait = now.as_nanos().saturating_sub(enqueued_at.as_nanos());
        self.max_wait = self.max_wait.max(wait);
    }

    /// Publishes `count` more delivered lent items (and the longest wait so far); lets
    /// waiting senders in if that reaches their grant point.
    #[inline]
    fn publish(&mut self, count: u64) {
        // Always stored (a plain store on this thread's line), so the atomic operations
        // do not depend on the clock: the loom models need that.
        self.shared
            .rx
            .max_wait
            .store(self.max_wait, Ordering::Relaxed);
        let word = self.shared.rx.served.fetch_add(count, Ordering::AcqRel);
        self.served += count;
        if word & GRANT_WANTED != 0
            && self.served >= self.shared.rx.grant_at.load(Ordering::Relaxed)
        {
            self.let_senders_in();
        }
    }

    #[cold]
    fn let_senders_in(&mut self) {
        let mut state = self.shared.lock();
        self.shared.settle(&mut state);
        let wakers = self.shared.grant(&mut state);
        drop(state);
        wakers.wake_all();
    }

    /// Settles what was delivered and borrows every queued item from the core. Ready
    /// with whether it got any (`false`: closed and drained); pending, with the
    /// waker registered if `cx` is given, when nothing is queued.
    #[inline(never)]
    fn borrow(&mut self, cx: Option<&mut Context<'_>>) -> Poll<bool> {
        let mut state = self.shared.lock();
        self.shared.settle(&mut state);
        let count = state.core.lend(&mut self.lent);
        // The settled items made room: let waiting senders in, re-arm the grant point.
        let wakers = self.shared.grant(&mut state);
        let poll = if count > 0 {
            Poll::Ready(true)
        } else if state.core.is_closed() {
            Poll::Ready(false)
        } else {
            if let Some(cx) = cx {
                match &state.rx_waker {
                    Some(waker) if waker.will_wake(cx.waker()) => {}
                    _ => state.rx_waker = Some(cx.waker().clone()),
                }
            }
            Poll::Pending
        };
        drop(state);
        wakers.wake_all();
        poll
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
