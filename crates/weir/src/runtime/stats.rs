//! Counters and component states the runtime keeps for `/status` and the live line.
//!
//! Counters are atomics updated on the data path; states change rarely and sit behind a
//! mutex. Everything here is read by [`super::status`] to build the `/status` document.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use serde::Serialize;

/// What a component is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Working normally.
    Running,
    /// Waiting on admission (a source) or on its downstream (a sink).
    Backpressured,
    /// Finished its input (a generator with a `count`, a file at its end).
    Idle,
    /// Failing; retrying. The reason is the last error.
    Failed(String),
    /// Shut down.
    Stopped,
}

impl State {
    /// The state's name as `/status` shows it.
    pub fn name(&self) -> &'static str {
        match self {
            State::Running => "running",
            State::Backpressured => "backpressured",
            State::Idle => "idle",
            State::Failed(_) => "failed",
            State::Stopped => "stopped",
        }
    }

    /// Why it failed, if it did.
    pub fn reason(&self) -> Option<&str> {
        match self {
            State::Failed(reason) => Some(reason),
            _ => None,
        }
    }
}

/// A component's state and since when it holds.
#[derive(Debug)]
pub struct StateCell {
    inner: Mutex<(State, Instant)>,
}

impl Default for StateCell {
    fn default() -> Self {
        StateCell {
            inner: Mutex::new((State::Running, Instant::now())),
        }
    }
}

impl StateCell {
    /// Sets the state; `since` moves only when it changes.
    pub fn set(&self, state: State) {
        let mut guard = lock(&self.inner);
        if guard.0 != state {
            *guard = (state, Instant::now());
        }
    }

    /// The state and how long it has held, in ms.
    pub fn get(&self) -> (State, u64) {
        let guard = lock(&self.inner);
        (guard.0.clone(), millis(guard.1.elapsed()))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One source's counters.
#[derive(Debug, Default)]
pub struct SourceStats {
    /// Its state.
    pub state: StateCell,
    /// Records made durable (acknowledged).
    pub records: AtomicU64,
    /// Payload bytes made durable.
    pub bytes: AtomicU64,
    /// Batches made durable.
    pub batches: AtomicU64,
    /// Batches refused (WAL full under `reject`, admission timeout, shutdown).
    pub refused_batches: AtomicU64,
    /// Records in refused batches.
    pub refused_records: AtomicU64,
    /// Requests refused before admission (HTTP: 401, 413, 400, concurrency).
    pub refused_requests: AtomicU64,
    /// Batches waiting on admission or durability right now.
    waiters: AtomicU64,
    /// When the current run of waiting began (ms since the epoch), 0 if none.
    wait_started_ms: AtomicU64,
}

/// A wait shorter than this is not backpressure, just work (an fsync).
pub const BACKPRESSURE_AFTER_MS: u64 = 50;

impl SourceStats {
    /// A batch starts waiting.
    pub fn wait_begin(&self) {
        if self.waiters.fetch_add(1, Ordering::AcqRel) == 0 {
            self.wait_started_ms.store(now_ms(), Ordering::Release);
        }
    }

    /// A batch stops waiting.
    pub fn wait_end(&self) {
        if self.waiters.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.wait_started_ms.store(0, Ordering::Release);
        }
    }

    /// The state to report: `backpressured` while a wait has lasted longer than
    /// [`BACKPRESSURE_AFTER_MS`], otherwise the stored state. With how long it has held.
    pub fn current_state(&self) -> (State, u64) {
        let started = self.wait_started_ms.load(Ordering::Acquire);
        let waited = now_ms().saturating_sub(started);
        if started != 0 && waited >= BACKPRESSURE_AFTER_MS {
            return (State::Backpressured, waited);
        }
        self.state.get()
    }
}

fn now_ms() -> u64 {
    u64::try_from(crate::record::now_ms()).unwrap_or(0)
}

/// One sink's counters.
#[derive(Debug, Default)]
pub struct SinkStats {
    /// Its state.
    pub state: StateCell,
    /// Records stored.
    pub records: AtomicU64,
    /// Batches stored.
    pub batches: AtomicU64,
    /// Failed writes that were retried.
    pub retries: AtomicU64,
    /// Records the sink could not encode.
    pub unencodable: AtomicU64,
    /// Gaps seen (records deleted before this sink read them).
    pub gaps: AtomicU64,
    /// Records in those gaps.
    pub gap_records: AtomicU64,
    /// The WAL → sink channel (depth and age of what it holds).
    pub channel: ChannelStats,
}

/// Depth, bytes and oldest age of a bounded channel, kept beside it.
#[derive(Debug, Default)]
pub struct ChannelStats {
    inner: Mutex<ChannelInner>,
}

#[derive(Debug, Default)]
struct ChannelInner {
    /// Enqueue time and bytes of each item in the channel (bounded by its capacity).
    items: VecDeque<(Instant, u64)>,
    bytes: u64,
}

/// A snapshot of a channel.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ChannelSnapshot {
    /// Items in it.
    pub depth: u64,
    /// Bytes in it.
    pub bytes: u64,
    /// Age of the oldest item, in ms.
    pub oldest_age_ms: u64,
}

impl ChannelStats {
    /// An item of `bytes` entered the channel.
    pub fn push(&self, bytes: u64) {
        let mut g = lock(&self.inner);
        g.items.push_back((Instant::now(), bytes));
        g.bytes += bytes;
    }

    /// The oldest item left the channel.
    pub fn pop(&self) {
        let mut g = lock(&self.inner);
        if let Some((_, bytes)) = g.items.pop_front() {
            g.bytes -= bytes;
        }
    }

    /// Now.
    pub fn snapshot(&self) -> ChannelSnapshot {
        let g = lock(&self.inner);
        ChannelSnapshot {
            depth: g.items.len() as u64,
            bytes: g.bytes,
            oldest_age_ms: g.items.front().map_or(0, |(t, _)| millis(t.elapsed())),
        }
    }
}

/// Adds to a counter.
pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// Reads a counter.
pub fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_since_moves_only_on_change() {
        let cell = StateCell::default();
        cell.set(State::Backpressured);
        std::thread::sleep(std::time::Duration::from_millis(20));
        cell.set(State::Backpressured);
        let (state, since) = cell.get();
        assert_eq!(state, State::Backpressured);
        assert!(since >= 20, "{since}");
    }

    #[test]
    fn a_long_wait_is_backpressure() {
        let stats = SourceStats::default();
        stats.wait_begin();
        assert_eq!(stats.current_state().0, State::Running);
        std::thread::sleep(std::time::Duration::from_millis(BACKPRESSURE_AFTER_MS + 10));
        stats.wait_begin();
        stats.wait_end();
        assert_eq!(stats.current_state().0, State::Backpressured);
        stats.wait_end();
        assert_eq!(stats.current_state().0, State::Running);
    }

    #[test]
    fn channel_tracks_depth_bytes_and_age() {
        let ch = ChannelStats::default();
        ch.push(10);
        ch.push(5);
        let s = ch.snapshot();
        assert_eq!((s.depth, s.bytes), (2, 15));
        ch.pop();
        let s = ch.snapshot();
        assert_eq!((s.depth, s.bytes), (1, 5));
        ch.pop();
        ch.pop(); // popping an empty channel is harmless
        assert_eq!(ch.snapshot().depth, 0);
    }
}
