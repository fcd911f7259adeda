//! The live dashboard served at `GET /`: one self-contained HTML page (no external
//! scripts, styles or fonts) that polls `/status` every second.
//!
//! It shows each component's state in lanes (sources, WAL, sinks, runtime), each queue
//! as a bar of its fill against its bound, and a banner naming where the backpressure
//! wave is: components backpressured or paused and queues at 90% or more, in amber;
//! failed components in red.

/// The page, as served.
pub(super) const DASHBOARD_HTML: &str = include_str!("dashboard.html");
