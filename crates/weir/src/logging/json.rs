//! `--log-format json`: one JSON object a line, for log shippers.
//!
//! Each line has, in this order:
//!
//! - `ts`: when the event happened, RFC 3339 in UTC with milliseconds
//!   (`2026-12-06T10:15:02.123Z`);
//! - `level`: `ERROR`, `WARN`, `INFO`, `DEBUG` or `TRACE`;
//! - `target`: the module that logged it (`weir::pipeline::driver`);
//! - `component`: the source or sink the event is about, when it is about one: the
//!   value of its `component`, `sink` or `source` field, or else the name in a message
//!   that starts `sink NAME: ` or `source NAME: ` (the two ways weir's events name a
//!   component). Such an event also carries the `sink` or `source` field, so the kind of
//!   component is always there. Absent for events about the daemon as a whole;
//! - `message`;
//! - every other field of the event, numbers and booleans as JSON numbers and booleans,
//!   anything else as a string (a field named like one of the keys above, other than
//!   `component`, is written `field.NAME`).
//!
//! A line never exceeds `runtime.log_line_max_bytes`: the longest text values (the
//! message first among equals) are shortened, ending in `…`, and the line gets
//! `"truncated": true`, so a cut line is still one valid JSON object. It is counted in
//! `weir_log_truncated_total` like a cut text line.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use super::Shared;

/// The keys every line starts with; an event's own field of the same name is renamed.
const RESERVED: [&str; 6] = ["ts", "level", "target", "component", "message", "truncated"];
/// Appended to a shortened value.
const ELLIPSIS: &str = "…";
/// A value this short is not worth shortening further.
const SHORTEST: usize = 16;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines (`2026-12-06T10:15:02.123Z  INFO weir::runtime: started`).
    #[default]
    Text,
    /// One JSON object a line.
    Json,
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("expected text or json, found {text:?}")),
        }
    }
}

impl LogFormat {
    /// The environment variable read when `--log-format` is not given.
    pub const ENV: &'static str = "WEIR_LOG_FORMAT";

    /// The format in force: `flag` when given, else [`Self::ENV`] when set, else text.
    ///
    /// # Errors
    ///
    /// When `WEIR_LOG_FORMAT` is set to something other than `text` or `json`.
    pub fn from_flag_or_env(flag: Option<LogFormat>) -> Result<LogFormat, String> {
        if let Some(format) = flag {
            return Ok(format);
        }
        match std::env::var(Self::ENV) {
            Ok(text) if !text.trim().is_empty() => text.parse().map_err(|e| {
                format!(
                    "{}: {e}; set it to text or json, or pass --log-format",
                    Self::ENV
                )
            }),
            _ => Ok(LogFormat::Text),
        }
    }
}

/// The JSON line of one message that is not a `tracing` event (what `weir run` prints
/// before logging is set up: configuration errors and warnings), without its newline.
pub fn plain_line(level: Level, target: &str, message: &str) -> String {
    let mut fields = vec![
        ("ts".to_owned(), Value::String(now_rfc3339())),
        ("level".to_owned(), Value::String(level.as_str().to_owned())),
        ("target".to_owned(), Value::String(target.to_owned())),
    ];
    if let Some((kind, name)) = component_in_message(message) {
        fields.push(("component".to_owned(), Value::String(name.to_owned())));
        fields.push(("message".to_owned(), Value::String(message.to_owned())));
        fields.push((kind.to_owned(), Value::String(name.to_owned())));
    } else {
        fields.push(("message".to_owned(), Value::String(message.to_owned())));
    }
    render(&fields)
}

fn now_rfc3339() -> String {
    chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `sink NAME: …` or `source NAME: …` (an event's message), or `sinks.NAME…: …` or
/// `sources.NAME…: …` (a configuration error or warning naming its key): the kind and
/// the name.
fn component_in_message(message: &str) -> Option<(&'static str, &str)> {
    for (kind, section) in [("sink", "sinks."), ("source", "sources.")] {
        let Some(rest) = message.strip_prefix(section) else {
            continue;
        };
        let end = rest.find(['.', ':'])?;
        let name = &rest[..end];
        if !name.is_empty() && !name.contains(char::is_whitespace) {
            return Some((kind, name));
        }
    }
    for kind in ["sink", "source"] {
        let Some(rest) = message
            .strip_prefix(kind)
            .and_then(|rest| rest.strip_prefix(' '))
        else {
            continue;
        };
        let name = &rest[..rest.find(": ")?];
        if !name.is_empty() && !name.contains(char::is_whitespace) {
            return Some((kind, name));
        }
    }
    None
}

/// The event's fields, in the order they were recorded.
#[derive(Default)]
struct Fields(Vec<(String, Value)>);

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        self.0.push((field.name().to_owned(), value));
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        let value = serde_json::Number::from_f64(value)
            .map_or_else(|| Value::String(value.to_string()), Value::Number);
        self.put(field, value);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }
}

/// The formatter `tracing_subscriber::fmt` uses in JSON mode.
pub struct JsonFormat {
    shared: Arc<Shared>,
}

impl JsonFormat {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    /// The ordered fields of `event`.
    fn fields(event: &Event<'_>) -> Vec<(String, Value)> {
        let meta = event.metadata();
        let mut recorded = Fields::default();
        event.record(&mut recorded);
        let mut message = String::new();
        let mut component = None;
        let mut rest = Vec::with_capacity(recorded.0.len());
        for (key, value) in recorded.0 {
            match key.as_str() {
                "message" => {
                    message = match value {
                        Value::String(text) => text,
                        other => other.to_string(),
                    };
                }
                "component" => component = Some(value),
                reserved if RESERVED.contains(&reserved) => {
                    rest.push((format!("field.{key}"), value));
                }
                _ => rest.push((key, value)),
            }
        }
        let text = |value: &Value| match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let component = component.as_ref().map(text).or_else(|| {
            ["sink", "source"].iter().find_map(|kind| {
                rest.iter()
                    .find(|(key, _)| key == kind)
                    .map(|(_, value)| text(value))
            })
        });
        let component = component.or_else(|| {
            component_in_message(&message).map(|(kind, name)| {
                rest.push((kind.to_owned(), Value::String(name.to_owned())));
                name.to_owned()
            })
        });
        let mut fields = vec![
            ("ts".to_owned(), Value::String(now_rfc3339())),
            (
                "level".to_owned(),
                Value::String(meta.level().as_str().to_owned()),
            ),
            ("target".to_owned(), Value::String(meta.target().to_owned())),
        ];
        if let Some(component) = component {
            fields.push(("component".to_owned(), Value::String(component)));
        }
        fields.push(("message".to_owned(), Value::String(message)));
        fields.extend(rest);
        fields
    }
}

impl<S, N> FormatEvent<S, N> for JsonFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Self::fields(event);
        let (line, cut) = fit(&mut fields, self.shared.line_max_bytes);
        if cut {
            self.shared.truncated.fetch_add(1, Ordering::Relaxed);
        }
        writer.write_str(&line)?;
        writer.write_char('\n')
    }
}

/// The fields as one JSON object, keys in order.
fn render(fields: &[(String, Value)]) -> String {
    let mut line = String::from("{");
    for (i, (key, value)) in fields.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        line.push_str(&Value::String(key.clone()).to_string());
        line.push(':');
        line.push_str(&value.to_string());
    }
    line.push('}');
    line
}

/// Renders `fields` in at most `max` bytes with the newline: shortens the longest text
/// values (the message first among equals) until it fits, marking the line
/// `"truncated": true`; drops the extra fields if that is not enough. Returns the line
/// and whether it was cut. A `max` too small for even the shortest line gives a line
/// longer than `max`, which the writer drops and counts.
fn fit(fields: &mut Vec<(String, Value)>, max: usize) -> (String, bool) {
    let mut line = render(fields);
    if line.len() < max {
        return (line, false);
    }
    fields.push(("truncated".to_owned(), Value::Bool(true)));
    line = render(fields);
    for _ in 0..fields.len() * 2 {
        if line.len() < max {
            return (line, true);
        }
        let excess = line.len() + 1 - max;
        let longest = fields
            .iter()
            .enumerate()
            .filter_map(|(i, (key, value))| {
                let text = value.as_str()?;
                let rank = (text.len(), key == "message");
                let worth = text.len() > SHORTEST + ELLIPSIS.len();
                (worth && key != "ts" && key != "level").then_some((rank, i))
            })
            .max();
        let Some(((len, _), i)) = longest else { break };
        if let Value::String(text) = &mut fields[i].1 {
            let mut keep = len.saturating_sub(excess + ELLIPSIS.len()).max(SHORTEST);
            while !text.is_char_boundary(keep) {
                keep -= 1;
            }
            text.truncate(keep);
            text.push_str(ELLIPSIS);
        }
        line = render(fields);
    }
    if line.len() >= max {
        // The extra fields are what is left to give up.
        fields.retain(|(key, _)| RESERVED.contains(&key.as_str()));
        line = render(fields);
    }
    (line, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> serde_json::Map<String, Value> {
        match serde_json::from_str(line) {
            Ok(Value::Object(map)) => map,
            other => panic!("not a JSON object: {line:?} ({other:?})"),
        }
    }

    #[test]
    fn formats_parse_and_the_flag_wins_over_nothing() {
        assert_eq!("json".parse(), Ok(LogFormat::Json));
        assert_eq!(" Text ".parse(), Ok(LogFormat::Text));
        let err = "yaml".parse::<LogFormat>().expect_err("not a format");
        assert!(
            err.contains("expected text or json") && err.contains("yaml"),
            "{err}"
        );
        assert_eq!(
            LogFormat::from_flag_or_env(Some(LogFormat::Json)),
            Ok(LogFormat::Json)
        );
    }

    #[test]
    fn components_are_read_from_a_message_prefix() {
        assert_eq!(
            component_in_message("sink lake: write failed: disk full"),
            Some(("sink", "lake"))
        );
        assert_eq!(
            component_in_message("source gen: 3 records dropped"),
            Some(("source", "gen"))
        );
        assert_eq!(component_in_message("sink driver stopped: x"), None);
        assert_eq!(component_in_message("sinks are fine"), None);
        assert_eq!(component_in_message("source : x"), None);
        assert_eq!(
            component_in_message("sinks.lake.rotate.bytes: expected a size"),
            Some(("sink", "lake"))
        );
        assert_eq!(
            component_in_message("sources.gen: no sink reads this source"),
            Some(("source", "gen"))
        );
        let line = parse(&plain_line(Level::WARN, "weir::config", "sink lake: slow"));
        assert_eq!(line["component"], "lake");
        assert_eq!(line["sink"], "lake");
        assert_eq!(line["level"], "WARN");
        let line = parse(&plain_line(
            Level::ERROR,
            "weir::config",
            "wal.max_disk: missing",
        ));
        assert!(!line.contains_key("component"));
        assert_eq!(line["message"], "wal.max_disk: missing");
    }

    fn sample(message: &str) -> Vec<(String, Value)> {
        vec![
            ("ts".into(), Value::from("2026-12-06T10:15:02.123Z")),
            ("level".into(), Value::from("INFO")),
            ("target".into(), Value::from("weir::test")),
            ("message".into(), Value::from(message)),
            ("path".into(), Value::from("/var/lib/weir/x".repeat(20))),
            ("records".into(), Value::from(12)),
        ]
    }

    #[test]
    fn a_long_line_is_shortened_to_valid_json_within_the_bound() {
        let (line, cut) = fit(&mut sample("short"), 4096);
        assert!(!cut);
        assert!(!parse(&line).contains_key("truncated"));
        for max in [200, 300, 1000, 4096] {
            let long = "é\"\u{1}x".repeat(3000);
            let (line, cut) = fit(&mut sample(&long), max);
            assert!(cut, "{max}");
            assert!(line.len() < max, "{max}: {} bytes", line.len());
            let parsed = parse(&line);
            assert_eq!(parsed["truncated"], true);
            assert_eq!(parsed["level"], "INFO");
            let message = parsed["message"].as_str().expect("message");
            assert!(message.ends_with('…'), "{message}");
        }
        // Too small for anything: the line is over the bound and the writer drops it.
        let (line, cut) = fit(&mut sample(&"x".repeat(500)), 20);
        assert!(cut && line.len() >= 20);
    }
}
