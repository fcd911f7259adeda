//! The `kafka` source's queue (`sources.NAME.held`) and `weir_kafka_*` metrics, read
//! from its `/status` figures ([`KafkaStatus`]).

use std::sync::Arc;

use super::core::KafkaStatus;
use super::shell::Shared;
use crate::telemetry::Telemetry;

/// Registers `sources.NAME.held` (bytes fetched and not yet durable against
/// `max_held_bytes`) and the source's metrics.
pub fn register(name: &str, shared: &Arc<Shared>, telemetry: &Telemetry) {
    let s = Arc::clone(shared);
    telemetry.register_queue(&format!("sources.{name}.held"), None, None, move || {
        let m = s.status();
        let mut f = weir_flow::FlowStats::default();
        f.offered = m.fetched;
        f.accepted = m.fetched;
        f.delivered = m.durable;
        f.depth = m.fetched - m.durable.min(m.fetched);
        f.bytes = m.held_bytes;
        f
    });
    type Field = fn(&KafkaStatus) -> u64;
    let counters: [(&str, &str, Field); 5] = [
        ("weir_kafka_fetched_total", "Records fetched.", |s| {
            s.fetched
        }),
        (
            "weir_kafka_rebalances_total",
            "Assignments and revocations.",
            |s| s.rebalances,
        ),
        (
            "weir_kafka_pauses_total",
            "Pauses above the high watermark.",
            |s| s.pauses,
        ),
        ("weir_kafka_gaps_total", "Offset gaps seen.", |s| s.gaps),
        (
            "weir_kafka_gap_offsets_total",
            "Offsets missed by gaps (deleted before they were read).",
            |s| s.gap_offsets,
        ),
    ];
    for (metric, help, field) in counters {
        let s = Arc::clone(shared);
        telemetry.register_counter_fn(metric, help, &[("source", name)], move || {
            field(&s.status())
        });
    }
    let s = Arc::clone(shared);
    #[allow(clippy::cast_precision_loss, reason = "gauges are f64")]
    telemetry.register_gauge_fn(
        "weir_kafka_held_bytes",
        "Bytes fetched and not yet durable.",
        &[("source", name)],
        move || s.status().held_bytes as f64,
    );
}
