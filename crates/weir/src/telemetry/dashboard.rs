//! The live dashboard served at `GET /`: one self-contained HTML page (no external
//! scripts, styles or fonts; charts drawn by hand in SVG) that polls `/status` and
//! `/history` every second, one request of each at a time.
//!
//! It shows:
//! - the wave banner: the slow sink (the one the WAL keeps the most data for), the WAL's
//!   share of its budget, and the sources it holds up (blocked for how long, or refusing
//!   how many records a second); failed components in red;
//! - the pipeline as a graph, sources → WAL → sinks, each edge labelled with its
//!   records/s and bytes/s and each node coloured by state, the wave's path in red;
//! - the WAL budget as a gauge with a forecast ("full in 4.0 min at the trend of the
//!   last minute"), from `/history`'s `wal_forecast` (a least-squares trend that the
//!   sawtooth of segments written and deleted does not swing);
//! - each sink's cursor, lag, lag age, `max_lag` and `required` as a table;
//! - six charts over the last 15 minutes: rates in and out, WAL budget, sink lag in
//!   bytes and in age, queue fill, and refusals, evictions, gaps and quarantined
//!   records per second;
//! - the queues with fill bars, and every source's and sink's `/status` details (MQTT
//!   window, HTTP 503s, object-store uploads, any other type's) as key/value panels.
//!
//! Every rate is smoothed: exponentially weighted with a 10 s time constant, as
//! [`super::trend::smoothed_rate`] does for `weir top`. Sizes and durations are shown in
//! human units, read from what each key says it is (`…_bytes`, `…_ms`, …), as
//! `weir status` does.

/// The page, as served: the markup and styles (`dashboard.html`, which ends by opening
/// the page's one script), the figures and rates (`dashboard_units.js`: the rules of
/// `cmd::human` and `telemetry::trend` in JavaScript), then the page's logic
/// (`dashboard.js`).
pub(super) const DASHBOARD_HTML: &str = concat!(
    include_str!("dashboard.html"),
    include_str!("dashboard_units.js"),
    include_str!("dashboard.js"),
    "</script>\n</body>\n</html>\n"
);
