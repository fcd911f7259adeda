//! The record every source produces and every sink writes.
//!
//! - [`wire`]: the compact, versioned binary form a record takes inside the WAL
//!   ([`Record::encode_into`], [`Record::decode_with`]).
//! - [`ndjson`]: the one-JSON-object-per-line form text sinks write
//!   ([`Record::write_ndjson`]).

mod json_check;
mod ndjson;
pub mod time;
mod wire;

use std::sync::Arc;

pub use self::ndjson::{EncodeError, Line};
pub use self::wire::{
    DecodeError, RecordRef, WIRE_VERSION, encode_parts, encoded_len, peek_source,
};

/// One record: what a source read, on its way through the WAL to the sinks.
///
/// Sinks that write text render it as one JSON object per line:
/// `{"source", "key", "ts", "payload", "attributes"}`, where `payload` is the payload's
/// own JSON when it parses as JSON and a string otherwise.
///
/// # Examples
///
/// ```
/// use weir::record::Record;
///
/// let record = Record {
///     source: "gen".into(),
///     key: "k1".into(),
///     timestamp_ms: 1_700_000_000_000,
///     payload: bytes::Bytes::from_static(br#"{"t":21.5}"#),
///     attributes: vec![("unit".into(), "C".into())],
/// };
/// let mut wire = Vec::new();
/// record.encode_into(&mut wire);
/// assert_eq!(Record::decode_with(bytes::Bytes::from(wire), |s| s.into())?, record);
///
/// let mut line = Vec::new();
/// record.write_ndjson(&mut line)?;
/// assert_eq!(line, br#"{"source":"gen","key":"k1","ts":1700000000000,"payload":{"t":21.5},"attributes":{"unit":"C"}}"#.iter().chain(b"\n").copied().collect::<Vec<u8>>());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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

/// Whether `bytes` is one JSON value in UTF-8 (surrounding whitespace allowed): what
/// text sinks write as JSON rather than as a string.
pub fn is_json(bytes: &[u8]) -> bool {
    json_check::check(bytes).is_some()
}

/// Milliseconds since the Unix epoch, now (0 if the clock is before 1970).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
