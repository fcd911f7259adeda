//! The `/status` document and the server for it on `runtime.status_addr`.
//!
//! This is the runtime's own view — component states, every queue, the WAL and each
//! sink's cursor — as one JSON document. It is served by a small axum router; the
//! project's telemetry module can take these figures over as they are.

use std::sync::Arc;

use serde_json::{Value, json};
use weir_flow::semaphore::DualSemaphore;
use weir_wal::Wal;

use super::stats::{SinkStats, SourceStats, get};

/// Everything `/status` reports on.
pub struct Registry {
    /// The configuration's hash.
    pub config_hash: String,
    /// What WAL recovery found at open.
    pub recovery: Value,
    /// The WAL.
    pub wal: Wal,
    /// The source → WAL channel.
    pub channel: DualSemaphore,
    /// The sources: name, type, counters.
    pub sources: Vec<(String, &'static str, Arc<SourceStats>)>,
    /// The sinks: name, type, counters, channel bound in batches and bytes.
    pub sinks: Vec<SinkEntry>,
}

/// One sink in the registry.
pub struct SinkEntry {
    /// Its name.
    pub name: String,
    /// Its type.
    pub kind: &'static str,
    /// Its counters.
    pub stats: Arc<SinkStats>,
    /// Its channel's bound in batches.
    pub channel_batches: u64,
    /// Its channel's bound in bytes.
    pub channel_bytes: u64,
}

impl Registry {
    /// The `/status` document.
    pub fn status(&self) -> Value {
        let wal = self.wal.stats();
        let sources: serde_json::Map<String, Value> = self
            .sources
            .iter()
            .map(|(name, kind, s)| {
                let (state, since_ms) = s.current_state();
                (
                    name.clone(),
                    json!({
                        "type": kind,
                        "state": state.name(),
                        "reason": state.reason(),
                        "state_for_ms": since_ms,
                        "records": get(&s.records),
                        "bytes": get(&s.bytes),
                        "batches": get(&s.batches),
                        "refused_batches": get(&s.refused_batches),
                        "refused_records": get(&s.refused_records),
                        "refused_requests": get(&s.refused_requests),
                    }),
                )
            })
            .collect();
        let mut queues = Vec::new();
        let channel = self.channel.semaphore_stats();
        queues.push(json!({
            "name": "source->wal",
            "depth": channel.held.items,
            "bytes": channel.held.bytes,
            "waiting": channel.waiters,
            "oldest_wait_ms": channel.flow.oldest_age.as_millis() as u64,
            "bound_items": channel.total.items,
            "bound_bytes": channel.total.bytes,
        }));
        let sinks: serde_json::Map<String, Value> = self
            .sinks
            .iter()
            .map(|e| {
                let s = &e.stats;
                let (state, since_ms) = s.state.get();
                let ch = s.channel.snapshot();
                queues.push(json!({
                    "name": format!("wal->{}", e.name),
                    "depth": ch.depth,
                    "bytes": ch.bytes,
                    "oldest_age_ms": ch.oldest_age_ms,
                    "bound_items": e.channel_batches,
                    "bound_bytes": e.channel_bytes,
                }));
                let cursor = wal.cursors.iter().find(|c| c.name == e.name);
                (
                    e.name.clone(),
                    json!({
                        "type": e.kind,
                        "state": state.name(),
                        "reason": state.reason(),
                        "state_for_ms": since_ms,
                        "records": get(&s.records),
                        "batches": get(&s.batches),
                        "retries": get(&s.retries),
                        "unencodable": get(&s.unencodable),
                        "gaps": get(&s.gaps),
                        "gap_records": get(&s.gap_records),
                        "cursor": cursor,
                    }),
                )
            })
            .collect();
        json!({
            "config_hash": self.config_hash,
            "sources": sources,
            "sinks": sinks,
            "queues": queues,
            "wal": wal,
            "wal_recovery": self.recovery,
        })
    }
}

/// The status router: `GET /status`.
pub fn router(registry: Arc<Registry>) -> axum::Router {
    axum::Router::new().route(
        "/status",
        axum::routing::get(move || {
            let registry = Arc::clone(&registry);
            async move { axum::Json(registry.status()) }
        }),
    )
}
