//! What a typed sink's configuration says: its columns, their types and how times
//! are written, the envelope columns kept, and what a record that does not fit
//! becomes.

use serde::Serialize;

use crate::keys::units::string_enum;

/// The column types, for messages.
const TYPES: &str =
    "bool, int32, int64, uint64, float32, float64, string, timestamp, date, json, list<T>, struct";

/// How a timestamp is written in the payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeFormat {
    /// Seconds since the Unix epoch (a number, possibly fractional, or a string of one).
    UnixS,
    /// Milliseconds since the Unix epoch.
    UnixMs,
    /// Microseconds since the Unix epoch.
    UnixUs,
    /// Nanoseconds since the Unix epoch.
    UnixNs,
    /// An RFC 3339 string (`2024-12-06T10:00:00.5Z`).
    Rfc3339,
    /// A strftime pattern; a time without a zone is UTC.
    Strftime(String),
}

impl TimeFormat {
    /// Reads `unix_s`, `unix_ms`, `unix_us`, `unix_ns`, `rfc3339` or a strftime pattern.
    ///
    /// # Errors
    ///
    /// The message for a pattern chrono cannot use.
    pub fn parse(text: &str) -> Result<Self, String> {
        Ok(match text {
            "unix_s" => TimeFormat::UnixS,
            "unix_ms" => TimeFormat::UnixMs,
            "unix_us" => TimeFormat::UnixUs,
            "unix_ns" => TimeFormat::UnixNs,
            "rfc3339" => TimeFormat::Rfc3339,
            pattern if pattern.contains('%') && crate::record::time::is_strftime(pattern) => {
                TimeFormat::Strftime(pattern.to_owned())
            }
            other => {
                return Err(format!(
                    "expected unix_s, unix_ms, unix_us, unix_ns, rfc3339 or a strftime pattern (\"%d/%b/%Y:%H:%M:%S %z\"), found {other:?}"
                ));
            }
        })
    }

    /// As written in the configuration.
    pub fn text(&self) -> &str {
        match self {
            TimeFormat::UnixS => "unix_s",
            TimeFormat::UnixMs => "unix_ms",
            TimeFormat::UnixUs => "unix_us",
            TimeFormat::UnixNs => "unix_ns",
            TimeFormat::Rfc3339 => "rfc3339",
            TimeFormat::Strftime(p) => p,
        }
    }
}

/// A column's type.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnType {
    /// `bool`.
    Bool,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `uint64`.
    UInt64,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `string`.
    String,
    /// `timestamp`, read with its format, stored as microseconds in UTC.
    Timestamp(TimeFormat),
    /// `date` (`"2024-12-06"`), stored as days.
    Date,
    /// `json`: the value, whatever it is, as JSON text.
    Json,
    /// `list<T>`.
    List(Box<ColumnType>),
    /// `struct`: nested columns.
    Struct(Vec<Column>),
}

/// One declared column.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Column {
    /// The column's name.
    pub name: String,
    /// Where its value is in the payload: an RFC 6901 JSON pointer of object keys
    /// (relative to the parent's for a struct's columns).
    pub pointer: String,
    /// The pointer's keys, unescaped.
    #[serde(skip)]
    pub path: Vec<String>,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: ColumnType,
    /// A record without it does not fit (after `default`).
    pub required: bool,
    /// The value when the payload has none (as JSON).
    pub default: Option<serde_json::Value>,
}

/// The envelope columns a typed file may keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Envelope {
    /// The source's name.
    Source,
    /// The record's key.
    Key,
    /// The event time (`event_time`), else the time weir read the record.
    Timestamp,
    /// The source's attributes, a map.
    Attributes,
    /// The payload as it arrived.
    Payload,
}

string_enum!(Envelope { "source" => Source, "key" => Key, "timestamp" => Timestamp, "attributes" => Attributes, "payload" => Payload });

/// What a value that does not fit its column does to its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMismatch {
    /// The record goes to the sink's quarantine, with the column and the value's type.
    Quarantine,
    /// The value becomes null and the record is kept (counted); a required column's
    /// missing value still sends its record to the quarantine.
    Null,
}

string_enum!(OnMismatch { "quarantine" => Quarantine, "null" => Null });

/// What fields the schema does not name become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownFields {
    /// They are dropped.
    Drop,
    /// They are kept, as one JSON object, in an `_extra` column.
    Extra,
}

string_enum!(UnknownFields { "drop" => Drop, "extra" => Extra });

/// What a record without a usable event time becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMissing {
    /// Its time is the time weir read it (counted).
    IngestTime,
    /// It goes to the quarantine.
    Quarantine,
}

string_enum!(OnMissing { "ingest_time" => IngestTime, "quarantine" => Quarantine });

/// `event_time = { path, format, on_missing }`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventTime {
    /// Where the time is in the payload (a JSON pointer).
    pub pointer: String,
    /// Its keys.
    #[serde(skip)]
    pub path: Vec<String>,
    /// How it is written.
    pub format: TimeFormat,
    /// What a record without one becomes.
    pub on_missing: OnMissing,
}

/// A typed sink's schema: its columns and what else its files hold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchemaConfig {
    /// The declared columns, in order.
    pub columns: Vec<Column>,
    /// The envelope columns kept, before the declared ones.
    pub envelope: Vec<Envelope>,
    /// What a value that does not fit does.
    pub on_mismatch: OnMismatch,
    /// What fields the schema does not name become.
    pub unknown_fields: UnknownFields,
    /// Where the records' time comes from, if not from weir's clock.
    pub event_time: Option<EventTime>,
}

/// Splits an RFC 6901 pointer (`/a/b~1c` → `a`, `b/c`); an object key cannot be empty.
///
/// # Errors
///
/// A pointer that does not start with `/`, or has an empty key.
pub fn pointer_keys(pointer: &str) -> Result<Vec<String>, String> {
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!(
            "expected a JSON pointer starting with '/', like \"/device\" or \"/loc/lat\", found {pointer:?}"
        ));
    };
    rest.split('/')
        .map(|key| {
            if key.is_empty() {
                Err(format!("{pointer:?} has an empty key"))
            } else {
                Ok(key.replace("~1", "/").replace("~0", "~"))
            }
        })
        .collect()
}

/// Reads a column type (`float64`, `list<string>`, …); `format` for timestamps and
/// `columns` for a struct are read by the caller.
pub(super) fn parse_type(text: &str, format: Option<TimeFormat>) -> Result<ColumnType, String> {
    Ok(match text {
        "bool" => ColumnType::Bool,
        "int32" => ColumnType::Int32,
        "int64" => ColumnType::Int64,
        "uint64" => ColumnType::UInt64,
        "float32" => ColumnType::Float32,
        "float64" => ColumnType::Float64,
        "string" => ColumnType::String,
        "timestamp" => ColumnType::Timestamp(format.unwrap_or(TimeFormat::Rfc3339)),
        "date" => ColumnType::Date,
        "json" => ColumnType::Json,
        "struct" => ColumnType::Struct(Vec::new()),
        _ => match text.strip_prefix("list<").and_then(|t| t.strip_suffix('>')) {
            Some(inner) => {
                let inner = parse_type(inner.trim(), format)?;
                if matches!(inner, ColumnType::Struct(_) | ColumnType::List(_)) {
                    return Err(format!(
                        "{text:?}: a list's elements are a plain type (not a struct or a list)"
                    ));
                }
                ColumnType::List(Box::new(inner))
            }
            None => return Err(format!("expected one of {TYPES}, found {text:?}")),
        },
    })
}
