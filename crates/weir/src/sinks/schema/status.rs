//! A typed sink's counts in `/status` (`sinks.NAME.schema`) and `/metrics`
//! (`weir_sink_schema_records_total{sink, outcome}`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use super::TypedStats;
use crate::pipeline::Detail;
use crate::telemetry::Telemetry;

/// Shows `stats` for sink `name`.
pub fn register(
    name: &str,
    stats: &Arc<TypedStats>,
    telemetry: &Telemetry,
    detail: &OnceLock<Detail>,
) {
    let shown = Arc::clone(stats);
    let _ = detail.set(Detail(Arc::new(
        move || serde_json::json!({ "schema": shown.status() }),
    )));
    type Field = fn(&TypedStats) -> &std::sync::atomic::AtomicU64;
    let outcomes: [(&str, Field); 3] = [
        ("rejected", |s| &s.rejected),
        ("nulled", |s| &s.nulled),
        ("ingest_timed", |s| &s.ingest_timed),
    ];
    for (outcome, field) in outcomes {
        let s = Arc::clone(stats);
        telemetry.register_counter_fn(
            "weir_sink_schema_records_total",
            "Records a typed sink did not take as they were, by outcome: rejected (to the quarantine), nulled (values that did not fit read as null), ingest_timed (no event time: the ingest time).",
            &[("sink", name), ("outcome", outcome)],
            move || field(&s).load(Ordering::Relaxed),
        );
    }
}
