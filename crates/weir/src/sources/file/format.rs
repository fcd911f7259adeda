//! `format`: how a line (or a multi-line record) becomes a payload, before the WAL.
//!
//! - `ndjson` (the default): the line is the payload as it is. A line that is not JSON
//!   is counted (`not_json`); sinks that write JSON write it as a string, or, with
//!   `on_not_json = "quarantine"`, it goes to the quarantine.
//! - `lines`: the payload is the line as a JSON string.
//! - `regex`: `pattern`'s named captures become a JSON object (captures that did not
//!   take part are left out), each a string unless `types` names it `int`, `float`,
//!   `bool` or `timestamp:<strftime format>` (written as RFC 3339, UTC; a format with no
//!   zone is read as UTC).
//! - `logfmt`: `key=value key2="quoted value" flag` becomes a JSON object of strings
//!   (a key alone is `true`).
//!
//! A line that `regex` or `logfmt` cannot read goes to the quarantine with the reason
//! (`on_mismatch = "quarantine"`, the default), or is kept as `lines` would keep it
//! (`on_mismatch = "keep"`); either way it is counted.

use regex::Regex;
use serde::Serialize;

use super::logfmt;
use crate::keys::Section;
use crate::keys::units::string_enum;

/// The `format` key's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatKind {
    /// One JSON value per line, kept as it is.
    Ndjson,
    /// The line as a JSON string.
    Lines,
    /// Named captures as a JSON object.
    Regex,
    /// `key=value` pairs as a JSON object.
    Logfmt,
}

string_enum!(FormatKind { "ndjson" => Ndjson, "lines" => Lines, "regex" => Regex, "logfmt" => Logfmt });
string_enum!(OnNotJson { "keep" => Keep, "quarantine" => Quarantine });
string_enum!(OnMismatch { "quarantine" => Quarantine, "keep" => Keep });

/// What happens to a line that is not JSON under `format = "ndjson"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnNotJson {
    /// Kept as it is (written as a string by JSON sinks), and counted.
    Keep,
    /// Sent to the quarantine, and counted.
    Quarantine,
}

/// What happens to a line that `regex` or `logfmt` cannot read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMismatch {
    /// Sent to the quarantine with the reason, and counted.
    Quarantine,
    /// Kept as a JSON string (as `lines`), and counted.
    Keep,
}

/// A capture's type under `format = "regex"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldType {
    /// A JSON integer.
    Int,
    /// A JSON number.
    Float,
    /// `true` or `false`.
    Bool,
    /// A time read with this strftime format, written as RFC 3339 (UTC).
    Timestamp(String),
}

impl FieldType {
    /// Reads `int`, `float`, `bool` or `timestamp:<format>`.
    ///
    /// # Errors
    ///
    /// The message for anything else, or a timestamp format chrono cannot use.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "int" => Ok(FieldType::Int),
            "float" => Ok(FieldType::Float),
            "bool" => Ok(FieldType::Bool),
            _ => match text.strip_prefix("timestamp:") {
                Some(format) => {
                    if !crate::record::time::is_strftime(format) {
                        Err(format!(
                            "{format:?} is not a strftime format (e.g. \"timestamp:%d/%b/%Y:%H:%M:%S %z\")"
                        ))
                    } else {
                        Ok(FieldType::Timestamp(format.to_owned()))
                    }
                }
                None => Err(format!(
                    "expected one of \"int\", \"float\", \"bool\", \"timestamp:<strftime format>\", found {text:?}"
                )),
            },
        }
    }
}

/// The `format` key and the keys that go with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Format {
    /// Which format.
    pub kind: FormatKind,
    /// `ndjson` only. Default `keep`.
    pub on_not_json: OnNotJson,
    /// `regex` only: the pattern, with named captures. Required for `regex`.
    pub pattern: Option<String>,
    /// `regex` only: capture types.
    pub types: Vec<(String, FieldType)>,
    /// `regex` and `logfmt`. Default `quarantine`.
    pub on_mismatch: OnMismatch,
}

impl Format {
    /// Reads `format`, `on_not_json`, `pattern`, `types` and `on_mismatch`, refusing
    /// those that do not apply to the chosen format.
    pub(super) fn parse(s: &mut Section<'_>) -> Option<Self> {
        let kind = s
            .key(
                "format",
                "How a line becomes a payload: as it is (`ndjson`), a JSON string (`lines`), named captures (`regex`), or `logfmt` pairs.",
            )
            .or(FormatKind::Ndjson);
        let on_not_json = s
            .key(
                "on_not_json",
                "`format = \"ndjson\"`: a line that is not JSON is kept as a string (counted) or sent to the quarantine.",
            )
            .only_if(kind == FormatKind::Ndjson, "applies only to format = \"ndjson\"")
            .or(OnNotJson::Keep);
        let pattern = s
            .key(
                "pattern",
                "`format = \"regex\"`: a regular expression whose named captures become the payload's fields.",
            )
            .example("^(?P<level>\\w+) (?P<msg>.*)$")
            .only_if(kind == FormatKind::Regex, "applies only to format = \"regex\"")
            .opt::<String>();
        let types = FieldType::parse_table(s, kind == FormatKind::Regex);
        let on_mismatch = s
            .key(
                "on_mismatch",
                "`format = \"regex\"` or `\"logfmt\"`: a line that does not parse goes to the quarantine, or is kept as a JSON string (counted either way).",
            )
            .only_if(
                matches!(kind, FormatKind::Regex | FormatKind::Logfmt),
                "applies only to format = \"regex\" or \"logfmt\"",
            )
            .or(OnMismatch::Quarantine);
        if kind == FormatKind::Regex {
            match &pattern {
                None if !s.failed(&["pattern"]) => s.error(
                    "pattern",
                    "missing required key for format = \"regex\" (expected a regular expression with named captures, e.g. '^(?P<ip>\\S+) (?P<status>\\d+)')",
                ),
                None => {}
                Some(p) => match Regex::new(p) {
                    Err(e) => s.error("pattern", format!("not a valid regular expression: {e}")),
                    Ok(re) => {
                        let names: Vec<&str> = re.capture_names().flatten().collect();
                        if names.is_empty() {
                            s.error("pattern", "has no named capture (?P<name>…): nothing would become a field");
                        }
                        for (name, _) in &types {
                            if !names.contains(&name.as_str()) {
                                s.error(
                                    "types",
                                    format!("{name:?} is not a named capture of pattern; its captures: {}", names.join(", ")),
                                );
                            }
                        }
                    }
                },
            }
        }
        Some(Format {
            kind,
            on_not_json,
            pattern,
            types,
            on_mismatch,
        })
    }
}

/// Why a line did not become a payload as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    /// Not JSON (`ndjson`).
    NotJson,
    /// `regex` did not match or a capture did not convert; `logfmt` could not read it.
    Mismatch,
}

/// What became of a line.
#[derive(Debug)]
pub enum Parsed<'a> {
    /// The payload.
    Payload(&'a [u8]),
    /// The payload, kept although it missed (counted).
    Kept(&'a [u8], Miss),
    /// To the quarantine with this reason (counted).
    Refused(String, Miss),
}

/// A compiled [`Format`].
#[derive(Debug, Clone)]
pub struct Parser {
    kind: FormatKind,
    on_not_json: OnNotJson,
    on_mismatch: OnMismatch,
    regex: Option<Regex>,
    /// For each capture group index, its name and type (None: unnamed).
    captures: Vec<Option<(String, Option<FieldType>)>>,
}

impl Parser {
    /// Compiles `format` (checked when parsed).
    pub fn new(format: &Format) -> Self {
        let regex = format
            .pattern
            .as_deref()
            .filter(|_| format.kind == FormatKind::Regex)
            .map(|p| Regex::new(p).expect("checked when parsed"));
        let captures = regex.as_ref().map_or_else(Vec::new, |re| {
            re.capture_names()
                .map(|name| {
                    name.map(|n| {
                        let t = format
                            .types
                            .iter()
                            .find(|(k, _)| k == n)
                            .map(|(_, t)| t.clone());
                        (n.to_owned(), t)
                    })
                })
                .collect()
        });
        Parser {
            kind: format.kind,
            on_not_json: format.on_not_json,
            on_mismatch: format.on_mismatch,
            regex,
            captures,
        }
    }

    /// Turns `line` into a payload, building it in `out` when it is not the line itself.
    pub fn parse<'a>(&self, line: &'a [u8], out: &'a mut Vec<u8>) -> Parsed<'a> {
        out.clear();
        match self.kind {
            FormatKind::Ndjson => {
                if crate::record::is_json(line) {
                    Parsed::Payload(line)
                } else if self.on_not_json == OnNotJson::Quarantine {
                    Parsed::Refused(
                        "not JSON (format = \"ndjson\", on_not_json = \"quarantine\")".into(),
                        Miss::NotJson,
                    )
                } else {
                    Parsed::Kept(line, Miss::NotJson)
                }
            }
            FormatKind::Lines => {
                json_string(line, out);
                Parsed::Payload(out)
            }
            FormatKind::Regex | FormatKind::Logfmt => {
                let result = if self.kind == FormatKind::Regex {
                    self.regex(line, out)
                } else {
                    logfmt::to_json(line, out)
                };
                match result {
                    Ok(()) => Parsed::Payload(out),
                    Err(reason) if self.on_mismatch == OnMismatch::Keep => {
                        out.clear();
                        json_string(line, out);
                        let _ = reason;
                        Parsed::Kept(out, Miss::Mismatch)
                    }
                    Err(reason) => Parsed::Refused(reason, Miss::Mismatch),
                }
            }
        }
    }

    fn regex(&self, line: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let re = self.regex.as_ref().expect("regex format has a pattern");
        let text = std::str::from_utf8(line)
            .map_err(|e| format!("not UTF-8 at byte {} (format = \"regex\")", e.valid_up_to()))?;
        let caps = re
            .captures(text)
            .ok_or_else(|| "does not match pattern (format = \"regex\")".to_owned())?;
        out.push(b'{');
        let mut first = true;
        for (i, capture) in self.captures.iter().enumerate() {
            let (Some((name, kind)), Some(m)) = (capture, caps.get(i)) else {
                continue;
            };
            if !first {
                out.push(b',');
            }
            first = false;
            json_string(name.as_bytes(), out);
            out.push(b':');
            let value = m.as_str();
            match kind {
                None => json_string(value.as_bytes(), out),
                Some(t) => typed(t, value, out)
                    .map_err(|why| format!("capture {name:?} = {value:?} {why}"))?,
            }
        }
        out.push(b'}');
        Ok(())
    }
}

fn typed(t: &FieldType, value: &str, out: &mut Vec<u8>) -> Result<(), String> {
    match t {
        FieldType::Int => {
            let n: i64 = value
                .trim()
                .parse()
                .map_err(|_| "is not an integer".to_owned())?;
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        }
        FieldType::Float => {
            let x: f64 = value
                .trim()
                .parse()
                .map_err(|_| "is not a number".to_owned())?;
            if !x.is_finite() {
                return Err("is not a finite number".into());
            }
            serde_json::to_writer(&mut *out, &x).map_err(|e| e.to_string())?;
        }
        FieldType::Bool => match value.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => out.extend_from_slice(b"true"),
            "false" | "0" | "no" | "off" => out.extend_from_slice(b"false"),
            _ => return Err("is not a boolean (true/false, 1/0, yes/no, on/off)".into()),
        },
        FieldType::Timestamp(format) => {
            let time = crate::record::time::parse_strftime(value, format)
                .ok_or_else(|| format!("does not fit the timestamp format {format:?}"))?;
            json_string(
                time.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
                    .as_bytes(),
                out,
            );
        }
    }
    Ok(())
}

/// Writes `bytes` as a JSON string (invalid UTF-8 replaced by U+FFFD).
pub fn json_string(bytes: &[u8], out: &mut Vec<u8>) {
    let text = String::from_utf8_lossy(bytes);
    serde_json::to_writer(&mut *out, text.as_ref()).expect("a string serializes into a Vec");
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
