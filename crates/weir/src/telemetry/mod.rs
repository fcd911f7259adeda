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
//! - `GET /`: a self-contained dashboard polling `/status` every second.
//!
//! There is no global registry: each `Telemetry` is its own, which keeps tests apart.

mod component;
mod dashboard;
mod metrics;
mod registry;
mod router;
mod status;

#[cfg(test)]
mod tests;

pub use self::component::{Component, ComponentKind, State};
pub use self::registry::{Counter, Gauge, Telemetry};
pub use self::status::{ComponentStatus, QueueStatus, StatusReport};
