//! The `nats` sink: publishes each record to a JetStream subject and moves its cursor
//! only past records whose PubAck came back, in WAL order.
//!
//! The subject is a template over the record (`weir.{key}`: MQTT's `/` becomes `.`,
//! `*`, `>`, whitespace and `%` are percent-escaped, empty tokens become `_`);
//! attributes become headers. Each message carries `Nats-Msg-Id` = the WAL's identity
//! (a random id created with its directory), the sink's name and the record's WAL
//! offset: a replay after a crash is deduplicated by the server within the stream's
//! duplicate window, and two instances (two WALs) never collide.
//!
//! A write publishes its batch with at most `max_inflight` PubAcks outstanding and
//! returns once all came back. A PubAck error or timeout (`ack_timeout`) publishes
//! that record again with the same id, up to `retries` times; then the write fails,
//! counted, and the driver retries the batch with backoff.

mod config;
mod core;
mod shell;

pub use self::config::NatsSinkConfig;
pub use self::core::{SubjectTemplate, header_name, header_value, msg_id};
pub use self::shell::{NatsSink, NatsSinkStats, NatsSinkStatus};
