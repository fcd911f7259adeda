//! The async ordered stage: runs operations on tokio, one task per operation.

use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::PoisonError;

use tokio::sync::{Mutex as AsyncMutex, Notify};
use tokio::task::AbortHandle;

use super::config::OrderedConfig;
use super::core::{Attempt, Completion, OrderedCore};
use super::error::{OrderedConfigError, OrderedError, SubmitError};
use crate::sync::{Arc, Mutex, MutexGuard};
use crate::{Clock, FlowStats};

// Caller functions, not shared state: plain `std` Arcs (loom's `Arc` cannot hold
// unsized values).
type Weigher<O> = std::sync::Arc<dyn Fn(&O) -> u64 + Send + Sync>;
type Retryable<E> = std::sync::Arc<dyn Fn(&E) -> bool + Send + Sync>;

/// Runs `op(input)` for up to `max_in_flight` inputs at once and yields the results
/// in submission order, with the bounds, timeout and retries of an
/// [`OrderedCore`].
///
/// [`submit`](Self::submit) waits for admission (FIFO among submitters);
/// [`next`](Self::next) waits for the next result in order. Each operation runs in
/// its own tokio task; an attempt that overruns `attempt_timeout` is dropped (its
/// future cancelled) and retried; an operation that panics is given up and released
/// in its place as [`OrderedError::Abandoned`]. Dropping the stage aborts the
/// operations still running. The methods take `&self`, so a producer and a consumer can share the stage
/// (e.g. in an `Arc`, or in the two branches of a `select!`).
///
/// Inputs are `Clone` because a retry runs `op` again on the same input. Every error
/// is retried unless a predicate set with [`retry_if`](Self::retry_if) says otherwise.
/// Results weigh nothing against `max_held_bytes` unless a weigher is set with
/// [`weigh_with`](Self::weigh_with).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::num::NonZeroUsize;
/// use std::time::Duration;
/// use weir_flow::ordered::{OrderedConfig, OrderedStage};
///
/// // Later inputs finish first; results still come out in submission order.
/// let stage = OrderedStage::new(OrderedConfig::new(NonZeroUsize::new(3).unwrap()), |n: u64| async move {
///     tokio::time::sleep(Duration::from_millis(100 - n * 30)).await;
///     Ok::<_, std::io::Error>(n * 10)
/// })
/// .unwrap();
/// for n in 0..3 {
///     stage.submit(n).await.unwrap();
/// }
/// stage.close();
/// let mut results = Vec::new();
/// while let Some(result) = stage.next().await {
///     results.push(result.unwrap());
/// }
/// assert_eq!(results, vec![0, 10, 20]);
/// # }
/// ```
pub struct OrderedStage<I, O, E, F> {
    shared: Arc<Shared<O, E>>,
    op: Arc<F>,
    weigh: Weigher<O>,
    retryable: Retryable<E>,
    _input: PhantomData<fn(I)>,
}

struct Shared<O, E> {
    state: Mutex<State<O, E>>,
    submit_turn: AsyncMutex<()>,
    /// Signalled when room may have appeared (a result finished or was taken).
    room: Notify,
    /// Signalled when a result was stored or the stage closed.
    results: Notify,
    clock: Clock,
}

struct State<O, E> {
    core: OrderedCore<O, E>,
    closed: bool,
    /// One entry per operation in flight: at most `max_in_flight`.
    tasks: HashMap<u64, AbortHandle>,
}

impl<O, E> Shared<O, E> {
    fn lock(&self) -> MutexGuard<'_, State<O, E>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<I, O, E, F> std::fmt::Debug for OrderedStage<I, O, E, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("OrderedStage")
            .field("in_flight", &state.core.in_flight())
            .field("held", &state.core.held())
            .field("closed", &state.closed)
            .finish_non_exhaustive()
    }
}

impl<I, O, E, F, Fut> OrderedStage<I, O, E, F>
where
    I: Clone + Send + 'static,
    O: Send + 'static,
    E: Send + 'static,
    F: Fn(I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
{
    /// A stage running `op` under `config`. Must be used inside a tokio runtime.
    pub fn new(config: OrderedConfig, op: F) -> Result<Self, OrderedConfigError> {
        Ok(OrderedStage {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    core: OrderedCore::new(config)?,
                    closed: false,
                    tasks: HashMap::new(),
                }),
                submit_turn: AsyncMutex::new(()),
                room: Notify::new(),
                results: Notify::new(),
                clock: Clock::new(),
            }),
            op: Arc::new(op),
            weigh: std::sync::Arc::new(|_| 0),
            retryable: std::sync::Arc::new(|_| true),
            _input: PhantomData,
        })
    }

    /// Counts each successful result as `weigh(&output)` bytes against
    /// `max_held_bytes` (applies to operations submitted from now on).
    pub fn weigh_with(mut self, weigh: impl Fn(&O) -> u64 + Send + Sync + 'static) -> Self {
        self.weigh = std::sync::Arc::new(weigh);
        self
    }

    /// Retries a failed attempt only when `retryable(&error)` is true; other errors
    /// are final at once (e.g. a 400 is final, a 503 is worth retrying). Applies to
    /// operations submitted from now on.
    pub fn retry_if(mut self, retryable: impl Fn(&E) -> bool + Send + Sync + 'static) -> Self {
        self.retryable = std::sync::Arc::new(retryable);
        self
    }

    /// Submits `input` if the stage can admit it now, ahead of waiting submitters;
    /// returns its sequence number, or hands the input back.
    pub fn try_submit(&self, input: I) -> Result<u64, SubmitError<I>> {
        let now = self.shared.clock.now();
        let mut state = self.shared.lock();
        if state.closed {
            return Err(SubmitError::Closed(input));
        }
        let Some(attempt) = state.core.try_submit(now) else {
            return Err(SubmitError::Full(input));
        };
        // Spawned under the lock, so the task's own clean-up (which takes the lock)
        // always finds its handle.
        let task = tokio::spawn(run(
            Arc::clone(&self.shared),
            Arc::clone(&self.op),
            std::sync::Arc::clone(&self.weigh),
            std::sync::Arc::clone(&self.retryable),
            input,
            attempt,
        ));
        state.tasks.insert(attempt.seq, task.abort_handle());
        Ok(attempt.seq)
    }

    /// Waits until the stage admits `input` (FIFO among submitters), submits it and
    /// returns its sequence number. Fails, handing the input back, if the stage is
    /// closed.
    ///
    /// # Cancel safety
    ///
    /// If the future is dropped before it completes, nothing was submitted and the
    /// input is dropped with it; the place in the FIFO line is given up. Use
    /// [`try_submit`](Self::try_submit) to get the input back instead.
    pub async fn submit(&self, mut input: I) -> Result<u64, SubmitError<I>> {
        let _turn = self.shared.submit_turn.lock().await;
        loop {
            let room = self.shared.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            match self.try_submit(input) {
                Err(SubmitError::Full(back)) => input = back,
                done => return done,
            }
            room.await;
        }
    }
}

impl<I, O, E, F> OrderedStage<I, O, E, F> {
    /// Waits until the stage would admit a submission now (or is closed), without
    /// submitting anything: for a caller that keeps its input until
    /// [`try_submit`](OrderedStage::try_submit) takes it. Room appears when any
    /// operation finishes (not only the oldest) or a result is taken, so a caller
    /// that waits here rather than on [`next`](Self::next) keeps every slot busy
    /// while a slow operation holds the head.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it takes nothing.
    pub async fn room(&self) {
        loop {
            let room = self.shared.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let state = self.shared.lock();
                if state.closed || state.core.can_admit() {
                    return;
                }
            }
            room.await;
        }
    }

    /// Takes the next result in submission order if it is finished.
    pub fn try_next(&self) -> Option<Result<O, OrderedError<E>>> {
        let now = self.shared.clock.now();
        let popped = self.shared.lock().core.pop_ready(now);
        let (_, result) = popped?;
        self.shared.room.notify_waiters();
        Some(result)
    }

    /// Waits for the next result in submission order. Returns `None` once the stage
    /// is [closed](Self::close) and every result has been taken; while open and
    /// empty, it waits.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a result is taken only in the poll that returns it, so dropping
    /// the future loses nothing.
    pub async fn next(&self) -> Option<Result<O, OrderedError<E>>> {
        loop {
            let stored = self.shared.results.notified();
            tokio::pin!(stored);
            stored.as_mut().enable();
            if let Some(result) = self.try_next() {
                return Some(result);
            }
            {
                let state = self.shared.lock();
                if state.closed && state.core.is_empty() {
                    return None;
                }
            }
            stored.await;
        }
    }

    /// Stops admission: submissions fail with [`SubmitError::Closed`], and
    /// [`next`](Self::next) returns `None` after the last result. Operations in flight
    /// run to the end.
    pub fn close(&self) {
        self.shared.lock().closed = true;
        self.shared.room.notify_waiters();
        self.shared.results.notify_waiters();
    }

    /// The stage's flow statistics now (see [`OrderedCore::stats`]).
    pub fn stats(&self) -> FlowStats {
        let now = self.shared.clock.now();
        self.shared.lock().core.stats(now)
    }

    /// Operations in flight (running or waiting to retry).
    pub fn in_flight(&self) -> usize {
        self.shared.lock().core.in_flight()
    }

    /// Finished results not yet taken.
    pub fn held(&self) -> usize {
        self.shared.lock().core.held()
    }

    /// Finished results waiting behind an unfinished earlier operation.
    pub fn held_back(&self) -> usize {
        self.shared.lock().core.held_back()
    }

    /// The most results ever held at once.
    pub fn max_held_seen(&self) -> usize {
        self.shared.lock().core.max_held_seen()
    }

    /// Attempts started after a failure or timeout.
    pub fn retries(&self) -> u64 {
        self.shared.lock().core.retries()
    }
}

/// A read-only view of an [`OrderedStage`]'s counts, kept apart from it (for a status
/// page): each call reads the stage's state as it is then. It keeps the stage's
/// bookkeeping alive, not its operations: once the stage is dropped, it reads what
/// was left.
pub struct StageView<O, E> {
    shared: Arc<Shared<O, E>>,
}

impl<O, E> Clone for StageView<O, E> {
    fn clone(&self) -> Self {
        StageView {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<O, E> std::fmt::Debug for StageView<O, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StageView").field(&self.counts()).finish()
    }
}

/// An [`OrderedStage`]'s counts at one moment (read under one lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StageCounts {
    /// Operations in flight (running or waiting to retry).
    pub in_flight: usize,
    /// Finished results not yet taken.
    pub held: usize,
    /// Of those, the ones waiting behind an unfinished earlier operation.
    pub held_back: usize,
}

impl<O, E> StageView<O, E> {
    /// The stage's counts now.
    pub fn counts(&self) -> StageCounts {
        let state = self.shared.lock();
        StageCounts {
            in_flight: state.core.in_flight(),
            held: state.core.held(),
            held_back: state.core.held_back(),
        }
    }
}

impl<I, O, E, F> OrderedStage<I, O, E, F> {
    /// A view of this stage's counts that a status page can keep.
    pub fn view(&self) -> StageView<O, E> {
        StageView {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<I, O, E, F> Drop for OrderedStage<I, O, E, F> {
    fn drop(&mut self) {
        let tasks: Vec<AbortHandle> = self.shared.lock().tasks.drain().map(|(_, t)| t).collect();
        // Aborted outside the lock: each task's clean-up takes it.
        for task in tasks {
            task.abort();
        }
    }
}

/// One operation's life: attempts, timeouts and backoffs until its result is stored.
async fn run<I, O, E, F, Fut>(
    shared: Arc<Shared<O, E>>,
    op: Arc<F>,
    weigh: Weigher<O>,
    retryable: Retryable<E>,
    input: I,
    attempt: Attempt,
) where
    I: Clone,
    F: Fn(I) -> Fut,
    Fut: Future<Output = Result<O, E>>,
{
    let mut guard = RunGuard {
        shared,
        attempt,
        done: false,
    };
    let shared = Arc::clone(&guard.shared);
    loop {
        let attempt = guard.attempt;
        let call = op(input.clone());
        let outcome = match attempt.deadline {
            Some(deadline) => tokio::time::timeout_at(shared.clock.instant_at(deadline), call)
                .await
                .ok(),
            None => Some(call.await),
        };
        let now = shared.clock.now();
        // The weigher and the predicate are caller code: run them outside the lock.
        let (weight, retry) = match &outcome {
            Some(Ok(output)) => (weigh(output), true),
            Some(Err(error)) => (0, retryable(error)),
            None => (0, true),
        };
        let completion = {
            let mut state = shared.lock();
            match outcome {
                Some(Err(error)) if !retry => state.core.fail_permanently(attempt, error),
                Some(result) => state.core.complete(attempt, result, weight, now),
                None => state.core.time_out(attempt, now),
            }
        };
        let Completion::RetryAt(at) = completion else {
            break;
        };
        tokio::time::sleep_until(shared.clock.instant_at(at)).await;
        let now = shared.clock.now();
        let next = shared.lock().core.begin_retry(attempt.seq, now);
        match next {
            Some(next) => guard.attempt = next,
            None => break,
        }
    }
    guard.done = true;
}

/// Clean-up for one operation's task, run however the task ends: forgets its abort
/// handle, wakes the consumer and submitters, and — if the task is unwinding from a
/// panic in the operation — gives the operation up so the stage does not stall.
struct RunGuard<O, E> {
    shared: Arc<Shared<O, E>>,
    attempt: Attempt,
    done: bool,
}

impl<O, E> Drop for RunGuard<O, E> {
    fn drop(&mut self) {
        {
            let mut state = self.shared.lock();
            if !self.done && std::thread::panicking() {
                let _ = state.core.abandon(self.attempt);
            }
            state.tasks.remove(&self.attempt.seq);
        }
        self.shared.results.notify_waiters();
        self.shared.room.notify_waiters();
    }
}
