//! The record every source produces and every sink writes.

use std::sync::Arc;

/// One record: what a source read, on its way through the WAL to the sinks.
///
/// Sinks that write text render it as one JSON object per line:
/// `{"source", "key", "ts", "payload", "attributes"}`, where `payload` is the payload's
/// own JSON when it parses as JSON and a string otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The name of the source (its `[sources.NAME]`).
    pub source: Arc<str>,
    /// The key: MQTT topic, NATS subject, generator key, or empty.
    pub key: String,
    /// When the source read it, in milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    /// The payload bytes, as received.
    pub payload: bytes::Bytes,
    /// Attributes set by the source (e.g. `mqtt.qos`), sorted by name, usually empty.
    pub attributes: Vec<(String, String)>,
}
