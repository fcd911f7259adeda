//! `layout = "dt={event:%Y-%m-%d}/device={/device}"`: the folders a sink's files or
//! objects go in, from each record's event time, the time the WAL appended it, and its
//! payload's fields. Sans-IO.
//!
//! A layout is literal text and placeholders:
//! - `{event:FMT}`: the record's event time (`event_time`) in UTC, as the strftime
//!   pattern `FMT` writes it (`%Y-%m-%d`, `%H`);
//! - `{ingest:FMT}`: the time the WAL appended the record, the same on every replay;
//! - `{/pointer}`: the payload field at that JSON pointer (RFC 6901);
//! - `{key}`: the record's key (the MQTT topic, the NATS subject, the Kafka key);
//! - `{source}`: the name of the source that read it.
//!
//! A field's value (and a key) is made safe to be one folder name ([`escape`]): Hive's escapes
//! (`%2F` for `/`, `%3D` for `=`, control characters and `"#%'*:?\{[]^~` likewise),
//! `.` and `..` written `%2E` and `%2E%2E`, a missing, null or empty value written
//! `__HIVE_DEFAULT_PARTITION__` (as Hive and Spark do), and a value longer than
//! [`MAX_VALUE_BYTES`] once escaped replaced by `~` and the 16 hex digits of its xxh3
//! hash. A number or a boolean is its JSON text; an object or a list its compact JSON.
//!
//! The rendered layout of a record is its partition: records of one partition go to
//! the same open file or object, whatever their order in the WAL.

use std::num::NonZeroU32;

use chrono::format::{Item, StrftimeItems};
use serde::Serialize;
use xxhash_rust::xxh3::xxh3_64;

use crate::keys::Section;
use crate::record::Record;
use crate::sinks::schema::{EventTime, TimeFormat, pointer_keys};

/// `max_open_partitions` when it is not set.
pub const DEFAULT_MAX_OPEN_PARTITIONS: u32 = 16;

/// `layout` and `max_open_partitions`: the folders of a sink's files or objects, and
/// how many partitions may have one open at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Partitioning {
    /// `layout`: none for the sink's default.
    #[serde(serialize_with = "layout_text")]
    pub layout: Option<Layout>,
    /// `max_open_partitions`: files or objects open at once, one per partition. Past
    /// it, the least recently written one is closed early (counted).
    pub max_open_partitions: NonZeroU32,
}

fn layout_text<S: serde::Serializer>(layout: &Option<Layout>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(layout.as_ref().map_or("", Layout::text))
}

impl Default for Partitioning {
    /// No layout.
    fn default() -> Self {
        Partitioning {
            layout: None,
            max_open_partitions: NonZeroU32::new(DEFAULT_MAX_OPEN_PARTITIONS).expect("16 > 0"),
        }
    }
}

impl Partitioning {
    /// Whether neither key is set (left out of the serialized configuration, so that a
    /// configuration without them keeps its hash).
    pub fn is_default(&self) -> bool {
        self.layout.is_none() && self.max_open_partitions.get() == DEFAULT_MAX_OPEN_PARTITIONS
    }

    /// Files or objects open at once: `max_open_partitions` with a layout, else 1.
    pub fn max_open(&self) -> u32 {
        if self.layout.is_some() {
            self.max_open_partitions.get()
        } else {
            1
        }
    }

    /// Reads `layout` and `max_open_partitions`; `default` says where files go without
    /// a layout, `event_time` is the sink's (a layout using `{event:…}` needs one).
    pub fn parse(
        s: &mut Section<'_>,
        default: &'static str,
        event_time: Option<&EventTime>,
    ) -> Partitioning {
        let text: Option<String> = s
            .key(
                "layout",
                "Folders under the sink's path or prefix, from `{event:FMT}` (the event time), `{ingest:FMT}` (the WAL append time), `{/pointer}` (a payload field), `{key}` and `{source}`; the file name `{wal_id}-{first:020}` is appended.",
            )
            .default_text(default)
            .example("dt={event:%Y-%m-%d}/device={/device}")
            .opt();
        let has_layout = text.is_some();
        let layout = text.and_then(|t| match Layout::parse(&t) {
            Ok(layout) => Some(layout),
            Err(e) => {
                s.error("layout", e);
                None
            }
        });
        if let Some(layout) = &layout
            && layout.uses_event_time()
            && event_time.is_none()
        {
            s.error(
                "layout",
                "{event:…} needs the sink's event_time (for example event_time = { path = \"/ts\", format = \"unix_ms\" }); or use {ingest:…}",
            );
        }
        let max_open_partitions = s
            .key(
                "max_open_partitions",
                "With a layout: files or objects open at once, one per partition; past it the least recently written is closed early (counted in closes.partitions).",
            )
            .only_if(has_layout, "only applies with a layout: without one, a single file or object is open")
            .or(Partitioning::default().max_open_partitions);
        Partitioning {
            layout,
            max_open_partitions,
        }
    }
}

/// The longest field value kept as it is (escaped); a longer one is hashed.
pub const MAX_VALUE_BYTES: usize = 128;

/// What a missing, null or empty field value is written as.
pub const NULL_VALUE: &str = "__HIVE_DEFAULT_PARTITION__";

/// One piece of a layout.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// Text written as it is.
    Text(String),
    /// `{event:FMT}`.
    Event(String),
    /// `{ingest:FMT}`.
    Ingest(String),
    /// `{/pointer}`: its keys.
    Field(Vec<String>),
    /// `{key}`.
    Key,
    /// `{source}`.
    Source,
}

/// A parsed `layout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    text: String,
    pieces: Vec<Piece>,
}

impl Layout {
    /// Reads a layout.
    ///
    /// # Errors
    ///
    /// What is wrong, with the byte position (from 1) where it is: an unclosed or empty
    /// placeholder, an unknown one, a strftime pattern chrono cannot write, a folder
    /// that is empty, `.` or `..`, a leading or trailing `/`.
    pub fn parse(text: &str) -> Result<Layout, String> {
        let at = |pos: usize, what: String| format!("at position {}: {what}", pos + 1);
        if text.is_empty() {
            return Err("a layout cannot be empty; leave the key out for the default".into());
        }
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text.char_indices().peekable();
        while let Some((i, c)) = rest.next() {
            match c {
                '{' => {
                    let close = text[i..]
                        .find('}')
                        .map(|n| i + n)
                        .ok_or_else(|| at(i, "'{' is never closed by '}'".into()))?;
                    let inner = &text[i + 1..close];
                    if !literal.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut literal)));
                    }
                    pieces.push(placeholder(inner).map_err(|e| at(i, e))?);
                    while rest.peek().is_some_and(|&(j, _)| j <= close) {
                        rest.next();
                    }
                }
                '}' => return Err(at(i, "'}' without an opening '{'".into())),
                c if c.is_control() => {
                    return Err(at(
                        i,
                        "control characters cannot be in a folder name".into(),
                    ));
                }
                '\\' => return Err(at(i, "'\\' cannot be in a folder name".into())),
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        let layout = Layout {
            text: text.to_owned(),
            pieces,
        };
        layout.check_folders()?;
        Ok(layout)
    }

    /// Each folder of the layout must be able to name something: not empty, and not
    /// `.` or `..` once its placeholders are left out.
    fn check_folders(&self) -> Result<(), String> {
        if self.text.starts_with('/') || self.text.ends_with('/') {
            return Err(format!(
                "{:?}: a layout names folders under the sink's path; it neither starts nor ends with '/'",
                self.text
            ));
        }
        // The folders as written, a placeholder standing for one character.
        let mut skeleton = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => skeleton.push_str(t),
                _ => skeleton.push('*'),
            }
        }
        for folder in skeleton.split('/') {
            if folder.is_empty() || folder == "." || folder == ".." {
                return Err(format!(
                    "{:?}: every folder between '/' needs a name (not empty, \".\" or \"..\")",
                    self.text
                ));
            }
        }
        Ok(())
    }

    /// As written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether it reads the event time (`{event:…}`): the sink then needs `event_time`.
    pub fn uses_event_time(&self) -> bool {
        self.pieces.iter().any(|p| matches!(p, Piece::Event(_)))
    }

    /// Whether it reads the payload (`{/pointer}` or `{event:…}`).
    fn reads_payload(&self) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, Piece::Field(_) | Piece::Event(_)))
    }

    /// The partition of `record`, which the WAL appended at `ingest_ms`: the folders
    /// the layout names for it. `event` is the sink's `event_time`; a record without a
    /// usable one is placed by its ingest time (the encoder counts or quarantines it).
    pub fn render(&self, record: &Record, ingest_ms: u64, event: Option<&EventTime>) -> String {
        let payload = if self.reads_payload() {
            serde_json::from_slice::<serde_json::Value>(&record.payload).ok()
        } else {
            None
        };
        let ingest_us = i64::try_from(ingest_ms)
            .unwrap_or(i64::MAX)
            .saturating_mul(1000);
        let mut out = String::with_capacity(self.text.len() + 16);
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Ingest(format) => push_time(&mut out, ingest_us, format),
                Piece::Event(format) => {
                    let event_us = event
                        .zip(payload.as_ref())
                        .and_then(|(e, p)| e.format.micros_of(lookup(p, &e.path)?));
                    push_time(&mut out, event_us.unwrap_or(ingest_us), format);
                }
                Piece::Field(path) => {
                    let value = payload.as_ref().and_then(|p| lookup(p, path));
                    out.push_str(&escape(value));
                }
                Piece::Key => out.push_str(&escape_text(&record.key)),
                Piece::Source => out.push_str(&escape_text(&record.source)),
            }
        }
        out
    }
}

/// Reads the inside of `{…}`.
fn placeholder(inner: &str) -> Result<Piece, String> {
    if inner.starts_with('/') {
        return pointer_keys(inner).map(Piece::Field);
    }
    match inner {
        "key" => return Ok(Piece::Key),
        "source" => return Ok(Piece::Source),
        _ => {}
    }
    let (kind, format) = inner.split_once(':').ok_or_else(|| {
        format!(
            "{{{inner}}} is not a placeholder: expected {{event:FMT}}, {{ingest:FMT}}, {{/pointer}}, {{key}} or {{source}}"
        )
    })?;
    if format.is_empty() || StrftimeItems::new(format).any(|item| item == Item::Error) {
        return Err(format!(
            "{format:?} is not a strftime pattern chrono can write (like \"%Y-%m-%d\" or \"%H\")"
        ));
    }
    if format.contains(['{', '\\']) || format.chars().any(char::is_control) {
        return Err(format!("{format:?} cannot be in a folder name"));
    }
    match kind {
        "event" => Ok(Piece::Event(format.to_owned())),
        "ingest" => Ok(Piece::Ingest(format.to_owned())),
        other => Err(format!(
            "{{{other}:…}} is not a placeholder: expected {{event:FMT}}, {{ingest:FMT}}, {{/pointer}}, {{key}} or {{source}}"
        )),
    }
}

fn push_time(out: &mut String, micros: i64, format: &str) {
    use std::fmt::Write;
    let time = chrono::DateTime::from_timestamp_micros(micros).unwrap_or_default();
    let _ = write!(out, "{}", time.format(format));
}

fn lookup<'a>(value: &'a serde_json::Value, path: &[String]) -> Option<&'a serde_json::Value> {
    path.iter()
        .try_fold(value, |v, key| v.as_object()?.get(key))
}

/// A field's value as one safe folder name (see the module's notes).
pub fn escape(value: Option<&serde_json::Value>) -> String {
    match value {
        None | Some(serde_json::Value::Null) => NULL_VALUE.to_owned(),
        Some(serde_json::Value::String(s)) => escape_text(s),
        Some(other) => escape_text(&other.to_string()),
    }
}

/// `text` as one safe folder name.
fn escape_text(text: &str) -> String {
    match text {
        "" => return NULL_VALUE.to_owned(),
        "." => return "%2E".to_owned(),
        ".." => return "%2E%2E".to_owned(),
        _ => {}
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || "\"#%'*/:=?\\{[]^~".contains(c) {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    if out.len() > MAX_VALUE_BYTES {
        return format!("~{:016x}", xxh3_64(text.as_bytes()));
    }
    out
}

impl TimeFormat {
    /// The microseconds of a JSON value in this format, read as the typed columns
    /// read it (a number, or a string of one, for the Unix formats).
    pub fn micros_of(&self, value: &serde_json::Value) -> Option<i64> {
        use serde_json::Value;
        let integer = || match value {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        let scaled = |per_second: f64| {
            let x = match value {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.trim().parse().ok(),
                _ => None,
            }?;
            let us = x * 1_000_000.0 / per_second;
            (us.is_finite() && us.abs() < 9.2e18).then(|| us.round() as i64)
        };
        let text = || value.as_str();
        match self {
            TimeFormat::UnixS => scaled(1.0),
            TimeFormat::UnixMs => integer()
                .map(|ms| ms.saturating_mul(1000))
                .or_else(|| scaled(1000.0)),
            TimeFormat::UnixUs => integer().or_else(|| scaled(1_000_000.0)),
            TimeFormat::UnixNs => integer().map(|ns| ns.div_euclid(1000)),
            TimeFormat::Rfc3339 => chrono::DateTime::parse_from_rfc3339(text()?)
                .ok()
                .map(|t| t.timestamp_micros()),
            TimeFormat::Strftime(pattern) => {
                crate::record::time::parse_strftime(text()?, pattern).map(|t| t.timestamp_micros())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::sinks::schema::OnMissing;

    fn record(payload: &str) -> Record {
        Record {
            source: Arc::from("mqtt"),
            key: String::new(),
            timestamp_ms: 0,
            payload: bytes::Bytes::from(payload.to_owned()),
            attributes: Vec::new(),
        }
    }

    fn ts_ms() -> EventTime {
        EventTime {
            pointer: "/ts".into(),
            path: vec!["ts".into()],
            format: TimeFormat::UnixMs,
            on_missing: OnMissing::IngestTime,
        }
    }

    // 2026-12-01T12:34:56Z
    const T_MS: u64 = 1_796_128_496_000;

    #[test]
    fn event_time_ingest_time_and_fields_fill_the_folders() {
        let layout = Layout::parse("dt={event:%Y-%m-%d}/hour={event:%H}/device={/device}").unwrap();
        let r = record(&format!(r#"{{"device":"d1","ts":{T_MS}}}"#));
        assert_eq!(
            layout.render(&r, 0, Some(&ts_ms())),
            "dt=2026-12-01/hour=12/device=d1"
        );
        let ingest = Layout::parse("day={ingest:%Y%m%d}/{/loc/site}").unwrap();
        let r = record(r#"{"loc":{"site":7}}"#);
        assert_eq!(ingest.render(&r, T_MS, None), "day=20261201/7");
        let topic = Layout::parse("source={source}/topic={key}").unwrap();
        let mut r = record("not json");
        r.key = "plant/3/temp".into();
        assert_eq!(
            topic.render(&r, 0, None),
            "source=mqtt/topic=plant%2F3%2Ftemp"
        );
    }

    #[test]
    fn a_record_without_an_event_time_is_placed_by_its_ingest_time() {
        let layout = Layout::parse("dt={event:%Y-%m-%d}").unwrap();
        let r = record(r#"{"ts":"soon"}"#);
        assert_eq!(layout.render(&r, T_MS, Some(&ts_ms())), "dt=2026-12-01");
        let not_json = record("not json");
        assert_eq!(layout.render(&not_json, 0, Some(&ts_ms())), "dt=1970-01-01");
    }

    #[test]
    fn values_are_escaped_to_one_safe_folder_name() {
        let e = |v: serde_json::Value| escape(Some(&v));
        assert_eq!(e(json!("a/b")), "a%2Fb");
        assert_eq!(e(json!("k=v")), "k%3Dv");
        assert_eq!(e(json!("..")), "%2E%2E");
        assert_eq!(e(json!(".")), "%2E");
        assert_eq!(e(json!("../etc")), "..%2Fetc", "no folder can be '..'");
        assert_eq!(e(json!("tab\there\n")), "tab%09here%0A");
        assert_eq!(e(json!("100%")), "100%25");
        assert_eq!(e(json!("ünï")), "ünï");
        assert_eq!(e(json!(42)), "42");
        assert_eq!(e(json!(true)), "true");
        assert_eq!(e(json!({"a": 1})), "%7B%22a%22%3A1}");
        assert_eq!(e(json!("")), NULL_VALUE);
        assert_eq!(e(serde_json::Value::Null), NULL_VALUE);
        assert_eq!(escape(None), NULL_VALUE);
    }

    #[test]
    fn a_value_too_long_is_hashed_and_stays_the_same() {
        let long = "x".repeat(MAX_VALUE_BYTES + 1);
        let hashed = escape(Some(&json!(long)));
        assert_eq!(hashed.len(), 17);
        assert!(hashed.starts_with('~'), "{hashed}");
        assert_eq!(hashed, escape(Some(&json!(long))));
        assert_ne!(hashed, escape(Some(&json!(format!("{long}y")))));
        let fits = "x".repeat(MAX_VALUE_BYTES);
        assert_eq!(escape(Some(&json!(fits))), fits);
        // Escaping counts: 43 slashes become 129 bytes.
        assert!(escape(Some(&json!("/".repeat(43)))).starts_with('~'));
    }

    #[test]
    fn mistakes_name_the_position() {
        let err = |t: &str| Layout::parse(t).unwrap_err();
        assert!(
            err("dt={event:%Y").contains("position 4"),
            "{}",
            err("dt={event:%Y")
        );
        assert!(err("a/{when:%H}").contains("position 3"));
        assert!(err("a/{when:%H}").contains("{event:FMT}"));
        assert!(err("d={event:%Q}").contains("strftime"));
        assert!(err("d={/}").contains("empty key"));
        assert!(err("a}").contains("position 2"));
        assert!(err("/a").contains("starts nor ends"));
        assert!(err("a//b").contains("needs a name"));
        assert!(err("a/../b").contains("needs a name"));
        assert!(err("").contains("empty"));
        assert!(Layout::parse("{/device}/{ingest:%Y}").is_ok());
    }

    #[test]
    fn the_unix_formats_read_numbers_and_strings_of_numbers() {
        assert_eq!(TimeFormat::UnixMs.micros_of(&json!(1500)), Some(1_500_000));
        assert_eq!(
            TimeFormat::UnixMs.micros_of(&json!("1500")),
            Some(1_500_000)
        );
        assert_eq!(TimeFormat::UnixS.micros_of(&json!(1.5)), Some(1_500_000));
        assert_eq!(
            TimeFormat::UnixNs.micros_of(&json!(1_500_000_000)),
            Some(1_500_000)
        );
        assert_eq!(
            TimeFormat::Rfc3339.micros_of(&json!("1970-01-01T00:00:01.5Z")),
            Some(1_500_000)
        );
        assert_eq!(TimeFormat::UnixMs.micros_of(&json!([1])), None);
    }
}
