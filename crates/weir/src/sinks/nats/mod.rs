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
//! returns once all came back. Each PubAck's deadline (`ack_timeout`)
//! starts when its record is published, and the PubAcks are awaited together: a window
//! whose acks were all lost (the server died) costs one `ack_timeout`, not one per
//! record. A record whose PubAck timed out or failed is published again with the same
//! id, up to `retries` times; then the write fails, counted, and the driver retries the
//! batch with backoff. When the connection comes back after it was lost, every record
//! still awaiting its PubAck is published again at once (not counted as a retry), and
//! the client tries to reconnect at least once per `ack_timeout` (at most every 4 s).
//!
//! Its startup check (`healthcheck = true`) connects and finds the stream its
//! publishes land in (`healthcheck.rs`).

mod config;
mod core;
mod healthcheck;
mod shell;
mod window;

pub use self::config::NatsSinkConfig;
pub use self::core::{SubjectTemplate, header_name, header_value, msg_id, subjects_collide};
pub use self::shell::{NatsSink, NatsSinkStats, NatsSinkStatus};
