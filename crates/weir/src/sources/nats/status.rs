//! The `nats` source's queue (`sources.NAME.credits`) and `weir_nats_*` metrics, read
//! from its `/status` counters ([`NatsStatus`]).

use std::sync::Arc;

use weir_flow::FlowStats;

use super::core::NatsStatus;
use super::shell::Shared;
use crate::telemetry::Telemetry;

/// Registers `sources.NAME.credits` (messages fetched and not yet durable against
/// `max_inflight`) and the source's metrics.
pub fn register(name: &str, shared: &Arc<Shared>, telemetry: &Telemetry) {
    let s = Arc::clone(shared);
    let max = s.status().max_inflight;
    telemetry.register_queue(
        &format!("sources.{name}.credits"),
        Some(max),
        None,
        move || {
            let m = s.status();
            let mut f = FlowStats::default();
            f.offered = m.fetched;
            f.accepted = m.fetched;
            f.delivered = m.fetched - m.credits_outstanding;
            f.depth = m.credits_outstanding;
            f
        },
    );
    type Field = fn(&NatsStatus) -> u64;
    let counters: [(&str, &str, Field); 5] = [
        (
            "weir_nats_fetched_total",
            "Messages fetched from JetStream.",
            |s| s.fetched,
        ),
        (
            "weir_nats_redelivered_total",
            "Messages JetStream delivered more than once.",
            |s| s.redelivered,
        ),
        ("weir_nats_acks_total", "Acks sent once durable.", |s| {
            s.acked
        }),
        (
            "weir_nats_progress_acks_total",
            "Progress acks (+WPI) sent for messages waiting for the WAL.",
            |s| s.progress_acks,
        ),
        (
            "weir_nats_duplicates_acked_total",
            "Redeliveries already durable in this run, acked without writing.",
            |s| s.duplicates_acked,
        ),
    ];
    for (metric, help, field) in counters {
        let s = Arc::clone(shared);
        telemetry.register_counter_fn(metric, help, &[("source", name)], move || {
            field(&s.status())
        });
    }
    let gauges: [(&str, &str, Field); 3] = [
        (
            "weir_nats_credits_outstanding",
            "Messages fetched and not yet durable.",
            |s| s.credits_outstanding,
        ),
        (
            "weir_nats_units_in_flight",
            "Units appended to the WAL and not yet durable.",
            |s| s.units_in_flight,
        ),
        (
            "weir_nats_ack_pending",
            "The consumer's ack-pending count as the server reports it.",
            |s| s.ack_pending,
        ),
    ];
    for (metric, help, field) in gauges {
        let s = Arc::clone(shared);
        #[allow(clippy::cast_precision_loss, reason = "gauges are f64")]
        telemetry.register_gauge_fn(metric, help, &[("source", name)], move || {
            field(&s.status()) as f64
        });
    }
}
