//! The `mqtt` source: subscribes to a broker (MQTT 3.1.1 or 5) and withholds each QoS
//! 1/2 ack until the record is durable in the WAL.
//!
//! Two tasks share a [`Ledger`](core::Ledger) (see [`core`] for its rules):
//!
//! - the **connection task** owns rumqttc's event loop and awaits nothing but its
//!   poll and the writing of acks, so keepalive pings and acks go out while other acks
//!   are withheld; the broker stops at its inflight window (`max_inflight_messages`,
//!   or the receive maximum weir announces under MQTT 5), and that is how backpressure
//!   reaches the publishers. Each PUBLISH is [`offer`](core::Ledger::offer)ed to the
//!   ledger. A broker that sends beyond its window (Mosquitto 2.0.11 once acks flow,
//!   under 3.1.1 and 5 alike) is met with TCP backpressure: while more than
//!   `expected_broker_window × unacked_guard_multiple` messages are unacked, or more
//!   than `expected_broker_window × max_message_bytes` of QoS 1/2 payloads are not yet
//!   durable, the task stops polling, so the socket's receive buffer fills and the
//!   broker stops sending; the appender wakes it once a unit is durable. Pings cannot
//!   go out meanwhile, so if no room comes within a keepalive the guard drops the
//!   connection (counted as `weir_mqtt_disconnects_total{reason="unacked_guard"}`);
//!   after errors it reconnects with a capped backoff (100 ms doubling to 30 s). When a
//!   unit becomes durable, the task takes the acks that fell due from the ledger, in
//!   arrival order (MQTT requires it), and under MQTT 3.1.1 writes them with one flush
//!   (rumqttc's request channel, which MQTT 5 still uses, writes and flushes one ack
//!   per poll);
//! - the **appender task** takes what the ledger holds in arrival order, in units of
//!   up to 1024 records or 1 MiB, and appends them to the WAL in that order with up to
//!   four units on their way at once ([`OrderedAppends`](crate::pipeline::appends)):
//!   unit k+1 is appended while unit k is fsynced (waiting for admission is
//!   backpressure; it never blocks the connection task). As each unit becomes durable
//!   it marks its acks due and wakes the connection task.
//!
//! Delivery: QoS 1/2 messages are acknowledged only once durable, so nothing the
//! broker saw acknowledged is lost; after a crash or a lost connection the broker
//! redelivers the rest (at least once: a message made durable whose ack was lost is
//! written again, unless it is redelivered on a connection of the same run with the
//! same packet id, topic and payload, which the ledger recognises and skips). QoS 0
//! messages go through a byte-bounded budget (`qos0_queue_bytes`) that drops the newest
//! when full, counted as `weir_source_dropped_total{reason="qos0_queue_full"}`, the next
//! record carrying `mqtt.gap` and `mqtt.gap_dropped`. A message above
//! `max_message_bytes` is written to `<quarantine dir>/<source>/` with the reason and
//! then acked, so it never wedges the window.
//!
//! Memory: at most `expected_broker_window × max_message_bytes` of QoS 1/2 payloads
//! not yet durable (one message more when a broker overshoots), whatever the broker
//! does, plus `qos0_queue_bytes`, the units on their way to the WAL and the acks not
//! yet written; `weir validate` prints each.

pub mod client;
mod config;
pub mod core;
mod shell;
mod status;
mod values;

pub use self::config::MqttConfig;
pub use self::shell::{Shared, run};
pub use self::status::register;
pub use self::values::{MqttProtocol, MqttScheme, MqttTopic, MqttUrl, Qos};
