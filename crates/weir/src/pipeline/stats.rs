//! Counters the runtime keeps for `/status`, `/metrics` and the live line.
//!
//! Counters are atomics updated on the data path; component states are the
//! telemetry's [`Component`]s. [`super::status`] registers all of it with the
//! [`Telemetry`](crate::telemetry::Telemetry).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::telemetry::{Component, State};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One source's counters.
#[derive(Debug)]
pub struct SourceStats {
    /// Its state.
    pub component: Component,
    /// Records made durable (acknowledged).
    pub records: AtomicU64,
    /// Payload bytes made durable.
    pub bytes: AtomicU64,
    /// Batches made durable.
    pub batches: AtomicU64,
    /// Batches refused (WAL full under `reject`, not admitting at shutdown or with too
    /// many waiting).
    pub refused_batches: AtomicU64,
    /// Records in refused batches.
    pub refused_records: AtomicU64,
    /// Records of batches that waited their whole deadline for WAL admission and were
    /// refused then (HTTP's `admission_timeout`): never written.
    pub expired_records: AtomicU64,
    /// Requests refused before admission (HTTP: 401, 413, 400, concurrency).
    pub refused_requests: AtomicU64,
    /// Records written and then not made durable (the WAL failed between the write
    /// and its fsync): they may or may not be delivered after a restart. Not refused.
    pub in_doubt_records: AtomicU64,
    /// Batches waiting on admission or durability right now.
    waiters: AtomicU64,
    /// When the current run of waiting began (ms since the epoch), 0 if none.
    wait_started_ms: AtomicU64,
    /// Type-specific details for `/status` (e.g. an MQTT source's window), under the
    /// source type's name.
    pub detail: std::sync::OnceLock<Detail>,
    /// Type-specific fields for `/status` next to the common ones (a file source's
    /// `files`): the keys of the object it returns join the source's section.
    pub fields: std::sync::OnceLock<Detail>,
}

/// A source's type-specific `/status` details, read at request time.
#[derive(Clone)]
pub struct Detail(pub std::sync::Arc<dyn Fn() -> serde_json::Value + Send + Sync>);

impl std::fmt::Debug for Detail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Detail")
    }
}

/// A wait shorter than this is not backpressure, just work (an fsync).
pub const BACKPRESSURE_AFTER_MS: u64 = 50;

impl SourceStats {
    /// Counters for the source whose state is `component`.
    pub fn new(component: Component) -> Self {
        SourceStats {
            component,
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            refused_batches: AtomicU64::new(0),
            refused_records: AtomicU64::new(0),
            expired_records: AtomicU64::new(0),
            refused_requests: AtomicU64::new(0),
            in_doubt_records: AtomicU64::new(0),
            waiters: AtomicU64::new(0),
            wait_started_ms: AtomicU64::new(0),
            detail: std::sync::OnceLock::new(),
            fields: std::sync::OnceLock::new(),
        }
    }

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

    /// How long the current wait has lasted, in ms (0 if nothing waits).
    pub fn waiting_ms(&self) -> u64 {
        let started = self.wait_started_ms.load(Ordering::Acquire);
        if started == 0 {
            return 0;
        }
        now_ms().saturating_sub(started)
    }

    /// Brings the component's state in line with the waits: `backpressured` while a
    /// wait has lasted [`BACKPRESSURE_AFTER_MS`], `running` again after. Called
    /// periodically; leaves `failed` and `stopped` alone.
    pub fn reflect(&self) {
        let state = self.component.flow_state();
        let waiting = self.waiting_ms() >= BACKPRESSURE_AFTER_MS;
        match state {
            State::Running | State::Starting if waiting => {
                self.component.set_state(State::Backpressured);
            }
            State::Backpressured if !waiting => self.component.set_state(State::Running),
            _ => {}
        }
    }
}

fn now_ms() -> u64 {
    u64::try_from(crate::record::now_ms()).unwrap_or(0)
}

/// One sink's counters.
#[derive(Debug)]
pub struct SinkStats {
    /// Its state.
    pub component: Component,
    /// Records stored.
    pub records: AtomicU64,
    /// Payload bytes of the batches stored.
    pub bytes: AtomicU64,
    /// Batches stored.
    pub batches: AtomicU64,
    /// Failed writes that were retried.
    pub retries: AtomicU64,
    /// Records the sink could not encode (shared with the sink, whose own tasks may
    /// refuse records: [`SinkContext::unencodable`](crate::sinks::SinkContext)).
    pub unencodable: std::sync::Arc<AtomicU64>,
    /// Records of its inputs its `where` filter did not pass (the cursor moved past them).
    pub filtered: AtomicU64,
    /// Records its `where` filter could not evaluate (dropped or kept by
    /// `on_filter_error`).
    pub filter_errors: AtomicU64,
    /// Gaps seen (records deleted before this sink read them).
    pub gaps: AtomicU64,
    /// Records in those gaps.
    pub gap_records: AtomicU64,
    /// Bytes the sink holds in memory (a Parquet row group being built).
    pub buffered_bytes: AtomicU64,
    /// The WAL → sink channel (depth and age of what it holds).
    pub channel: ChannelStats,
    /// Type-specific details for `/status` (e.g. an HTTP sink's concurrency limit),
    /// under the sink type's name; set by the sink when it opens.
    pub detail: std::sync::Arc<std::sync::OnceLock<Detail>>,
}

impl SinkStats {
    /// Counters for the sink whose state is `component`.
    pub fn new(component: Component) -> Self {
        SinkStats {
            component,
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            unencodable: std::sync::Arc::default(),
            filtered: AtomicU64::new(0),
            filter_errors: AtomicU64::new(0),
            gaps: AtomicU64::new(0),
            gap_records: AtomicU64::new(0),
            buffered_bytes: AtomicU64::new(0),
            channel: ChannelStats::default(),
            detail: std::sync::Arc::default(),
        }
    }
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
    offered: u64,
    delivered: u64,
    max_depth: u64,
}

impl ChannelStats {
    /// An item of `bytes` entered the channel.
    pub fn push(&self, bytes: u64) {
        let mut g = lock(&self.inner);
        g.items.push_back((Instant::now(), bytes));
        g.bytes += bytes;
        g.offered += 1;
        g.max_depth = g.max_depth.max(g.items.len() as u64);
    }

    /// The channel was dropped with what it held (a driver restart).
    pub fn clear(&self) {
        let mut g = lock(&self.inner);
        g.delivered += g.items.len() as u64;
        g.items.clear();
        g.bytes = 0;
    }

    /// The oldest item left the channel.
    pub fn pop(&self) {
        let mut g = lock(&self.inner);
        if let Some((_, bytes)) = g.items.pop_front() {
            g.bytes -= bytes;
            g.delivered += 1;
        }
    }

    /// The channel as [`FlowStats`](weir_flow::FlowStats), for the telemetry's queue
    /// probe (a channel refuses nothing: the reader waits for room).
    pub fn flow_stats(&self) -> weir_flow::FlowStats {
        let g = lock(&self.inner);
        let mut stats = weir_flow::FlowStats::default();
        stats.offered = g.offered;
        stats.accepted = g.offered;
        stats.delivered = g.delivered;
        stats.depth = g.items.len() as u64;
        stats.bytes = g.bytes;
        stats.oldest_age = g
            .items
            .front()
            .map_or(std::time::Duration::ZERO, |(t, _)| t.elapsed());
        stats.max_depth = g.max_depth;
        stats
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
    fn a_long_wait_is_backpressure() {
        let telemetry = crate::telemetry::Telemetry::new("test".into());
        let component = telemetry.component(crate::telemetry::ComponentKind::Source, "s");
        component.set_state(State::Running);
        let stats = SourceStats::new(component.clone());
        stats.wait_begin();
        stats.reflect();
        assert_eq!(component.state(), State::Running);
        std::thread::sleep(std::time::Duration::from_millis(BACKPRESSURE_AFTER_MS + 10));
        stats.wait_begin();
        stats.wait_end();
        stats.reflect();
        assert_eq!(component.state(), State::Backpressured);
        stats.wait_end();
        stats.reflect();
        assert_eq!(component.state(), State::Running);
        component.set_state(State::Failed("x".into()));
        stats.reflect();
        assert_eq!(component.state(), State::Failed("x".into()));
    }

    #[test]
    fn channel_tracks_depth_bytes_and_age() {
        let ch = ChannelStats::default();
        ch.push(10);
        ch.push(5);
        let s = ch.flow_stats();
        assert_eq!((s.depth, s.bytes), (2, 15));
        ch.pop();
        let s = ch.flow_stats();
        assert_eq!((s.depth, s.bytes), (1, 5));
        ch.pop();
        ch.pop(); // popping an empty channel is harmless
        assert_eq!(ch.flow_stats().depth, 0);
        let flow = ch.flow_stats();
        assert_eq!((flow.offered, flow.delivered, flow.max_depth), (2, 2, 2));
        assert!(flow.is_conserved());
    }
}
