//! The `/status` report: every component's state, every queue's fill, and the
//! registered sections. `weir status` reads the same types back.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::registry::Telemetry;

/// Keys of the report itself; a status section may not use them.
pub(super) const RESERVED_KEYS: [&str; 5] = [
    "config_hash",
    "started_unix_ms",
    "uptime_seconds",
    "components",
    "queues",
];

/// The body of `GET /status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    /// The running configuration's hash.
    pub config_hash: String,
    /// When the daemon started, in milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// Seconds since the daemon started.
    pub uptime_seconds: f64,
    /// Components in pipeline order: sources, WAL, sinks, runtime.
    pub components: Vec<ComponentStatus>,
    /// Queues in registration order.
    pub queues: Vec<QueueStatus>,
    /// The sections registered with [`Telemetry::register_status`] (e.g. `wal`,
    /// `sinks`), each under its own key.
    #[serde(flatten)]
    pub sections: serde_json::Map<String, serde_json::Value>,
}

/// One component in the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentStatus {
    /// The component's name.
    pub name: String,
    /// `source`, `wal`, `sink` or `runtime`.
    pub kind: String,
    /// `starting`, `running`, `paused`, `backpressured`, `failed` or `stopped`.
    pub state: String,
    /// Why it failed, for `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it entered the state, in milliseconds since the Unix epoch.
    pub since_unix_ms: u64,
    /// Seconds in the state.
    pub for_seconds: f64,
}

/// One queue in the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueStatus {
    /// The queue's name.
    pub name: String,
    /// Items queued.
    pub depth: u64,
    /// Bytes queued.
    pub bytes: u64,
    /// Age of the oldest queued item, in seconds.
    pub oldest_age_seconds: f64,
    /// The bound in items, if any.
    pub bound_items: Option<u64>,
    /// The bound in bytes, if any.
    pub bound_bytes: Option<u64>,
    /// How full the queue is, 0 to 1: the larger of depth / bound_items and
    /// bytes / bound_bytes; absent for a queue with no bound.
    pub fill: Option<f64>,
    /// The largest depth reached.
    pub max_depth: u64,
    /// Items offered.
    pub offered: u64,
    /// Items the consumer took.
    pub delivered: u64,
    /// Items dropped (newest, oldest or superseded).
    pub dropped: u64,
    /// Items refused and handed back.
    pub rejected: u64,
    /// Items discarded as too old.
    pub expired: u64,
}

pub(super) fn unix_ms(time: SystemTime) -> u64 {
    let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
}

fn ratio(value: u64, bound: Option<u64>) -> Option<f64> {
    bound
        .filter(|&b| b > 0)
        .map(|b| (value as f64 / b as f64).min(1.0))
}

impl Telemetry {
    /// The report `GET /status` serves, read from the probes now.
    pub fn status(&self) -> StatusReport {
        let (started_at, started_instant) = self.started();
        let probes = self.probes();
        let mut cells = probes
            .components
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        cells.sort_by_key(|cell| cell.kind);
        let components = cells
            .iter()
            .map(|cell| {
                let snapshot = cell.snapshot();
                ComponentStatus {
                    name: cell.name.clone(),
                    kind: cell.kind.as_str().to_owned(),
                    state: snapshot.state.as_str().to_owned(),
                    reason: snapshot.state.reason().map(str::to_owned),
                    since_unix_ms: unix_ms(snapshot.since),
                    for_seconds: snapshot.since_instant.elapsed().as_secs_f64(),
                }
            })
            .collect();
        let queue_probes = probes
            .queues
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let queues = queue_probes
            .iter()
            .map(|q| {
                let s = (q.probe)();
                let fill = match (ratio(s.depth, q.bound_items), ratio(s.bytes, q.bound_bytes)) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                QueueStatus {
                    name: q.name.clone(),
                    depth: s.depth,
                    bytes: s.bytes,
                    oldest_age_seconds: s.oldest_age.as_secs_f64(),
                    bound_items: q.bound_items,
                    bound_bytes: q.bound_bytes,
                    fill,
                    max_depth: s.max_depth,
                    offered: s.offered,
                    delivered: s.delivered,
                    dropped: s.dropped() + s.superseded,
                    rejected: s.rejected,
                    expired: s.expired,
                }
            })
            .collect();
        let sections = self
            .sections()
            .into_iter()
            .map(|(name, probe)| (name, probe()))
            .collect();
        StatusReport {
            config_hash: self.config_hash(),
            started_unix_ms: unix_ms(started_at),
            uptime_seconds: started_instant.elapsed().as_secs_f64(),
            components,
            queues,
            sections,
        }
    }
}
