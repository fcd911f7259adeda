//! Telemetry: where the backpressure wave is, in numbers.
//!
//! [`Telemetry`] holds every component's [`State`], a probe per bounded queue, the
//! counters and gauges the pipeline updates (atomics, resolved once), and extra
//! `/status` sections (`wal`, `sinks`). [`Telemetry::router`] serves them on
//! `runtime.status_addr`:
//!
//! - `GET /status`: JSON ([`StatusReport`]): components with state and since when,
//!   queues with depth, bytes, oldest age and bounds, and the registered sections;
//! - `GET /metrics`: Prometheus text, names prefixed `weir_` with units last
//!   (`weir_queue_oldest_age_seconds`), drops labelled with `reason`
//!   (`weir_source_dropped_total{source,reason}`); the families the probes report are
//!   listed in `metrics.rs`;
//! - `GET /history`: the last 15 minutes, one sample a second ([`history`]), as JSON;
//!   `?since=UNIX_MS` returns only the samples taken after that time;
//! - `GET /`: a self-contained dashboard polling `/status` and `/history` every second.
//!
//! There is no global registry: each `Telemetry` is its own, which keeps tests apart.

mod component;
mod dashboard;
pub mod history;
mod loss_log;
mod metrics;
mod registry;
mod router;
mod status;
pub mod trend;

#[cfg(test)]
mod tests;

pub use self::component::{Component, ComponentKind, State};
pub use self::loss_log::{LossLog, SUMMARY_EVERY, Severity};
pub use self::registry::{Counter, Gauge, Telemetry};
pub use self::status::{ComponentStatus, QueueStatus, StatusReport};
