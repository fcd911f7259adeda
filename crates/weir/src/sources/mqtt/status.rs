//! The `mqtt` source's counters: what `/status` shows (`sources.NAME.mqtt`) and the
//! queues and metrics registered from them.

use std::sync::Arc;

use serde::Serialize;
use weir_flow::FlowStats;

use super::shell::Shared;
use crate::telemetry::Telemetry;

/// Counters and gauges for `/status` and `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MqttStatus {
    /// Connected to the broker now.
    pub connected: bool,
    /// Connections made (CONNACKs received).
    pub connections: u64,
    /// Connections made after the first.
    pub reconnects: u64,
    /// QoS 1/2 messages of this connection not yet acked.
    pub unacked: u64,
    /// The most ever unacked at once.
    pub max_unacked: u64,
    /// `expected_broker_window`.
    pub window: u64,
    /// Unacked messages holding a payload above which reading pauses.
    pub guard_limit: u64,
    /// Payload bytes of QoS 1/2 messages not yet durable (queued or on their way to
    /// the WAL).
    pub held_bytes: u64,
    /// The most ever held at once.
    pub max_held_bytes: u64,
    /// `held_bytes` above which reading pauses (`expected_broker_window ×
    /// max_message_bytes`).
    pub held_limit_bytes: u64,
    /// Reading the socket is paused now: more than `guard_limit` unacked or more than
    /// `held_limit_bytes` held (a broker that overshoots its window).
    pub reading_paused: bool,
    /// Times reading was paused.
    pub read_pauses: u64,
    /// Since when (ms since the epoch) the window has been full: the broker sends
    /// nothing more until the WAL makes room. `null` when not full.
    pub paused_since_ms: Option<u64>,
    /// PUBLISH packets received.
    pub received: u64,
    /// Acks sent (PUBACK or PUBREC).
    pub acked: u64,
    /// Acks due whose connection was gone before the client took them (counted in
    /// `acked` too): the broker redelivers those messages, and the ledger recognises
    /// the redeliveries.
    pub acks_dropped: u64,
    /// Redeliveries not written again.
    pub duplicates_skipped: u64,
    /// QoS 0 messages received.
    pub qos0_received: u64,
    /// QoS 0 messages held (queued or on their way to the WAL).
    pub qos0_queue_messages: u64,
    /// QoS 0 payload bytes held (queued or on their way to the WAL).
    pub qos0_queue_bytes: u64,
    /// `qos0_queue_bytes`.
    pub qos0_queue_max_bytes: u64,
    /// QoS 0 messages dropped because the budget was spent.
    pub qos0_dropped: u64,
    /// QoS 0 messages that arrived after shutdown began, or that the WAL did not take
    /// before it: not written (QoS 1/2 messages then are not acked, and the broker
    /// redelivers them).
    pub qos0_dropped_at_shutdown: u64,
    /// Messages above `max_message_bytes` sent to the quarantine.
    pub oversized: u64,
    /// Connections dropped by the guard: reading stayed paused for a keepalive (the
    /// WAL made no room), so the connection could not be kept alive.
    pub guard_disconnects: u64,
    /// Connections lost to errors.
    pub connection_errors: u64,
    /// Mean time from PUBLISH received to ack sent, ms.
    pub ack_latency_ms_mean: f64,
    /// Largest time from PUBLISH received to ack sent, ms.
    pub ack_latency_ms_max: u64,
    /// Units taken for the WAL and not yet durable (several may be on their way at
    /// once, appended in arrival order).
    pub units_in_flight: u64,
    /// The most units ever on their way at once.
    pub max_units_in_flight: u64,
    /// The last connection error.
    pub last_error: Option<String>,
}

/// Registers the source's queues (`sources.NAME.window`: unacked QoS 1/2 messages
/// against the window; `sources.NAME.qos0_queue`: QoS 0 messages held against
/// `qos0_queue_bytes`) and metrics: drops, unacked, reconnects, disconnects by reason.
pub fn register(name: &str, shared: &Arc<Shared>, telemetry: &Telemetry) {
    let s = Arc::clone(shared);
    let window = s.status().window;
    telemetry.register_queue(
        &format!("sources.{name}.window"),
        Some(window),
        None,
        move || {
            let m = s.status();
            // Acked, or unacked now; messages of lost connections are the broker's again.
            let mut f = FlowStats::default();
            f.offered = m.acked + m.unacked;
            f.accepted = f.offered;
            f.delivered = m.acked;
            f.depth = m.unacked;
            f.max_depth = m.max_unacked;
            f
        },
    );
    let s = Arc::clone(shared);
    let max_bytes = s.status().qos0_queue_max_bytes;
    telemetry.register_queue(
        &format!("sources.{name}.qos0_queue"),
        None,
        Some(max_bytes),
        move || {
            let m = s.status();
            let mut f = FlowStats::default();
            f.offered = m.qos0_received;
            f.accepted = m.qos0_received - m.qos0_dropped;
            f.delivered = f.accepted - m.qos0_queue_messages;
            f.dropped_newest = m.qos0_dropped;
            f.depth = m.qos0_queue_messages;
            f.bytes = m.qos0_queue_bytes;
            f
        },
    );
    register_metrics(name, shared, telemetry);
}

fn register_metrics(name: &str, shared: &Arc<Shared>, telemetry: &Telemetry) {
    type Field = fn(&MqttStatus) -> u64;
    type Label<'a> = Option<(&'a str, &'a str)>;
    let counters: [(&str, &str, Label<'_>, Field); 5] = [
        (
            "weir_source_dropped_total",
            "Records a source dropped by policy, by reason.",
            Some(("reason", "qos0_queue_full")),
            |s| s.qos0_dropped,
        ),
        (
            "weir_source_dropped_total",
            "Records a source dropped by policy, by reason.",
            Some(("reason", "shutdown")),
            |s| s.qos0_dropped_at_shutdown,
        ),
        (
            "weir_mqtt_reconnects_total",
            "Connections to the broker made after the first.",
            None,
            |s| s.reconnects,
        ),
        (
            "weir_mqtt_disconnects_total",
            "Connections to the broker lost, by reason.",
            Some(("reason", "unacked_guard")),
            |s| s.guard_disconnects,
        ),
        (
            "weir_mqtt_disconnects_total",
            "Connections to the broker lost, by reason.",
            Some(("reason", "connection_error")),
            |s| s.connection_errors,
        ),
    ];
    for (metric, help, label, field) in counters {
        let mut labels = vec![("source", name)];
        labels.extend(label);
        let s = Arc::clone(shared);
        telemetry.register_counter_fn(metric, help, &labels, move || field(&s.status()));
    }
    let gauges: [(&str, &str, Field); 3] = [
        (
            "weir_mqtt_unacked",
            "QoS 1/2 messages received and not yet acked (waiting for durability).",
            |s| s.unacked,
        ),
        (
            "weir_mqtt_window",
            "The broker's expected inflight window (expected_broker_window).",
            |s| s.window,
        ),
        (
            "weir_mqtt_qos0_queue_bytes",
            "QoS 0 payload bytes held on their way to the WAL.",
            |s| s.qos0_queue_bytes,
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
