//! A typed sink's counts in `/metrics` (`weir_sink_schema_records_total{sink,
//! outcome}`); its `/status` details show them under `schema`
//! ([`TypedStats::status`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::TypedStats;
use crate::telemetry::Telemetry;

/// Registers `stats`' metrics for sink `name`.
pub fn register(name: &str, stats: &Arc<TypedStats>, telemetry: &Telemetry) {
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
