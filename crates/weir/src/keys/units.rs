//! Leaf value types of the configuration: sizes, durations, addresses; how each is read
//! from a TOML value with a message that says what was expected and what was found
//! ([`FromValue`]), and how a default is written back for the reference ([`ToValue`]).

use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroU64};
use std::path::PathBuf;

use serde::Serialize;
use toml::Value;

/// A positive size in bytes, written `"8 MiB"`, `"1.5 GB"` or as a plain integer of bytes.
///
/// Every size in weir's configuration is a bound, so zero is refused. Units are
/// case-insensitive; `KiB`/`MiB`/`GiB` are powers of 1024, `KB`/`MB`/`GB` powers of 1000.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(NonZeroU64);

impl ByteSize {
    /// A size of `bytes`, or `None` for zero.
    pub const fn new(bytes: u64) -> Option<Self> {
        match NonZeroU64::new(bytes) {
            Some(bytes) => Some(Self(bytes)),
            None => None,
        }
    }

    /// `n` mebibytes (`n × 1024²` bytes), for defaults.
    pub const fn mib(n: u64) -> Self {
        match Self::new(n.saturating_mul(1024 * 1024)) {
            Some(size) => size,
            None => panic!("ByteSize::mib(0)"),
        }
    }

    /// `n` kibibytes (`n × 1024` bytes), for defaults.
    pub const fn kib(n: u64) -> Self {
        match Self::new(n.saturating_mul(1024)) {
            Some(size) => size,
            None => panic!("ByteSize::kib(0)"),
        }
    }

    /// The size in bytes.
    pub const fn bytes(self) -> u64 {
        self.0.get()
    }
}

impl std::fmt::Display for ByteSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format_bytes(self.bytes()))
    }
}

impl Serialize for ByteSize {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.bytes())
    }
}

/// Formats a byte count for people: exact binary units when the count is a whole number
/// of them (`"8 MiB"`), one decimal otherwise (`"1.5 GiB"`), plain bytes below 1 KiB.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut unit = 0;
    let mut scale: u64 = 1024;
    while unit + 1 < UNITS.len() && bytes / scale >= 1024 {
        unit += 1;
        scale *= 1024;
    }
    if bytes.is_multiple_of(scale) {
        format!("{} {}", bytes / scale, UNITS[unit])
    } else {
        // Display only: the exact figure is printed next to it where it matters.
        #[expect(clippy::cast_precision_loss, reason = "one decimal for display")]
        let value = bytes as f64 / scale as f64;
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A positive duration, written like `"30s"`, `"100ms"` or `"1h 30m"` (humantime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(std::time::Duration);

impl Duration {
    /// A duration, or `None` for zero.
    pub const fn new(duration: std::time::Duration) -> Option<Self> {
        if duration.is_zero() {
            None
        } else {
            Some(Self(duration))
        }
    }

    /// `n` milliseconds, for defaults.
    pub const fn millis(n: u64) -> Self {
        match Self::new(std::time::Duration::from_millis(n)) {
            Some(duration) => duration,
            None => panic!("Duration::millis(0)"),
        }
    }

    /// `n` seconds, for defaults.
    pub const fn secs(n: u64) -> Self {
        match Self::new(std::time::Duration::from_secs(n)) {
            Some(duration) => duration,
            None => panic!("Duration::secs(0)"),
        }
    }

    /// The duration.
    pub const fn get(self) -> std::time::Duration {
        self.0
    }
}

impl std::fmt::Display for Duration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl Serialize for Duration {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Serializes a possibly-zero duration the way [`Duration`] serializes (for the hash).
pub fn serialize_std_duration<S: serde::Serializer>(
    duration: &std::time::Duration,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&humantime::format_duration(*duration))
}

/// How a TOML value is read into a configuration type.
pub trait FromValue: Sized {
    /// What the key expects, for messages: `a size like "128 MiB"`.
    const EXPECTED: &'static str;

    /// What the key takes, in a word or two, for the reference: `size ("8 MiB")`,
    /// `duration ("30s")`, `one of "a" | "b"`.
    const KIND: &'static str;

    /// Reads the value; the error is the message to print after the key's path.
    fn from_value(value: &Value) -> Result<Self, String>;
}

/// Describes a value the way it was written, for "found …" in messages.
pub fn describe(value: &Value) -> String {
    match value {
        // A URL's credentials are not echoed back.
        Value::String(s) => format!("{:?}", super::redact::url(s)),
        Value::Integer(i) => i.to_string(),
        Value::Float(x) => x.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Datetime(d) => format!("the date-time {d}"),
        Value::Array(_) => "a list".to_owned(),
        Value::Table(_) => "a table".to_owned(),
    }
}

/// The standard message for a value of the wrong kind.
pub fn mismatch(expected: &str, value: &Value) -> String {
    format!("expected {expected}, found {}", describe(value))
}

/// The message for a value that is not one of `choices`, with the closest choice when
/// it looks like a typo.
pub fn choice_mismatch(expected: &str, value: &Value, choices: &[&str]) -> String {
    let mut message = mismatch(expected, value);
    if let Some(close) = value
        .as_str()
        .and_then(|text| super::walk::closest(text, choices))
    {
        message.push_str(&format!(" (did you mean \"{close}\"?)"));
    }
    message
}

impl FromValue for bool {
    const EXPECTED: &'static str = "true or false";
    const KIND: &'static str = "boolean";
    fn from_value(value: &Value) -> Result<Self, String> {
        value
            .as_bool()
            .ok_or_else(|| mismatch(Self::EXPECTED, value))
    }
}

impl FromValue for String {
    const EXPECTED: &'static str = "a non-empty string";
    const KIND: &'static str = "string";
    fn from_value(value: &Value) -> Result<Self, String> {
        match value.as_str() {
            Some(s) if !s.is_empty() => Ok(s.to_owned()),
            _ => Err(mismatch(Self::EXPECTED, value)),
        }
    }
}

impl FromValue for PathBuf {
    const EXPECTED: &'static str = "a path (a non-empty string)";
    const KIND: &'static str = "path";
    fn from_value(value: &Value) -> Result<Self, String> {
        match value.as_str() {
            Some(s) if !s.is_empty() => Ok(PathBuf::from(s)),
            _ => Err(mismatch(Self::EXPECTED, value)),
        }
    }
}

impl FromValue for u64 {
    const EXPECTED: &'static str = "a whole number, 0 or more";
    const KIND: &'static str = "integer ≥ 0";
    fn from_value(value: &Value) -> Result<Self, String> {
        value
            .as_integer()
            .and_then(|i| u64::try_from(i).ok())
            .ok_or_else(|| mismatch(Self::EXPECTED, value))
    }
}

impl FromValue for f64 {
    const EXPECTED: &'static str = "a number, e.g. 0.1";
    const KIND: &'static str = "number";
    fn from_value(value: &Value) -> Result<Self, String> {
        match value {
            Value::Float(f) if f.is_finite() => Ok(*f),
            #[allow(clippy::cast_precision_loss)]
            Value::Integer(i) => Ok(*i as f64),
            _ => Err(mismatch(Self::EXPECTED, value)),
        }
    }
}

impl FromValue for NonZeroU64 {
    const EXPECTED: &'static str = "a positive whole number";
    const KIND: &'static str = "integer ≥ 1";
    fn from_value(value: &Value) -> Result<Self, String> {
        match value.as_integer() {
            Some(0) => Err(format!(
                "expected {}, found 0: this is a bound, it must be at least 1",
                Self::EXPECTED
            )),
            Some(i) => u64::try_from(i)
                .ok()
                .and_then(NonZeroU64::new)
                .ok_or_else(|| mismatch(Self::EXPECTED, value)),
            None => Err(mismatch(Self::EXPECTED, value)),
        }
    }
}

impl FromValue for NonZeroU32 {
    const EXPECTED: &'static str = "a positive whole number (at most 4294967295)";
    const KIND: &'static str = "integer ≥ 1";
    fn from_value(value: &Value) -> Result<Self, String> {
        let wide = NonZeroU64::from_value(value)
            .map_err(|e| e.replace(NonZeroU64::EXPECTED, Self::EXPECTED))?;
        NonZeroU32::try_from(wide).map_err(|_| mismatch(Self::EXPECTED, value))
    }
}

impl FromValue for SocketAddr {
    const EXPECTED: &'static str = r#"an IP address and port like "127.0.0.1:9464""#;
    const KIND: &'static str = r#"address ("IP:port")"#;
    fn from_value(value: &Value) -> Result<Self, String> {
        let text = value
            .as_str()
            .ok_or_else(|| mismatch(Self::EXPECTED, value))?;
        text.parse().map_err(|_| {
            format!(
                "expected {}, found {text:?} (host names are not resolved here: write an IP address)",
                Self::EXPECTED
            )
        })
    }
}

impl FromValue for ByteSize {
    const EXPECTED: &'static str = r#"a size like "128 MiB" (or a whole number of bytes)"#;
    const KIND: &'static str = r#"size ("8 MiB")"#;
    fn from_value(value: &Value) -> Result<Self, String> {
        let bytes = match value {
            Value::Integer(i) => u64::try_from(*i).map_err(|_| mismatch(Self::EXPECTED, value))?,
            Value::String(text) => {
                parse_size(text).ok_or_else(|| mismatch(Self::EXPECTED, value))?
            }
            _ => return Err(mismatch(Self::EXPECTED, value)),
        };
        Self::new(bytes).ok_or_else(|| {
            format!(
                "expected {}, found {}: this is a bound, it must be at least 1 byte",
                Self::EXPECTED,
                describe(value)
            )
        })
    }
}

/// Parses a human size with `bytesize`, refusing what it would silently saturate.
fn parse_size(text: &str) -> Option<u64> {
    let trimmed = text.trim();
    // bytesize accepts a bare unit-less number; it is bytes, like a TOML integer.
    let parsed: bytesize::ByteSize = trimmed.parse().ok()?;
    let bytes = parsed.as_u64();
    // bytesize saturates on overflow; a literal u64::MAX is the only honest way to get it.
    if bytes == u64::MAX && trimmed != u64::MAX.to_string() {
        return None;
    }
    Some(bytes)
}

impl FromValue for Duration {
    const EXPECTED: &'static str = r#"a duration like "30s" or "100ms""#;
    const KIND: &'static str = r#"duration ("30s")"#;
    fn from_value(value: &Value) -> Result<Self, String> {
        let duration = std::time::Duration::from_value(value)
            .map_err(|e| e.replace(std::time::Duration::EXPECTED, Self::EXPECTED))?;
        Self::new(duration).ok_or_else(|| {
            format!(
                "expected {}, found {}: this must be longer than zero",
                Self::EXPECTED,
                describe(value)
            )
        })
    }
}

impl FromValue for std::time::Duration {
    const EXPECTED: &'static str = r#"a duration like "30s", "100ms" or "0s""#;
    const KIND: &'static str = r#"duration ("30s", "0s" allowed)"#;
    fn from_value(value: &Value) -> Result<Self, String> {
        match value {
            Value::String(text) => humantime::parse_duration(text.trim())
                .map_err(|e| format!("expected {}, found {text:?} ({e})", Self::EXPECTED)),
            Value::Integer(i) => Err(format!(
                "expected {}, found the bare number {i}: write the unit, e.g. \"{i}s\" or \"{i}ms\"",
                Self::EXPECTED
            )),
            _ => Err(mismatch(Self::EXPECTED, value)),
        }
    }
}

/// How a configuration value is written back as TOML: a default as the reference and
/// `weir config example` show it. `T::from_value(&x.to_value())` reads `x` back.
pub trait ToValue {
    /// The TOML value that reads back as `self`.
    fn to_value(&self) -> Value;
}

impl ToValue for bool {
    fn to_value(&self) -> Value {
        Value::Boolean(*self)
    }
}

impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::String(self.clone())
    }
}

impl ToValue for PathBuf {
    fn to_value(&self) -> Value {
        Value::String(self.display().to_string())
    }
}

impl ToValue for u64 {
    fn to_value(&self) -> Value {
        Value::Integer(i64::try_from(*self).unwrap_or(i64::MAX))
    }
}

impl ToValue for f64 {
    fn to_value(&self) -> Value {
        Value::Float(*self)
    }
}

impl ToValue for NonZeroU64 {
    fn to_value(&self) -> Value {
        self.get().to_value()
    }
}

impl ToValue for NonZeroU32 {
    fn to_value(&self) -> Value {
        Value::Integer(self.get().into())
    }
}

impl ToValue for SocketAddr {
    fn to_value(&self) -> Value {
        Value::String(self.to_string())
    }
}

impl ToValue for ByteSize {
    /// `"8 MiB"` when that is exact, else the number of bytes.
    fn to_value(&self) -> Value {
        let text = format_bytes(self.bytes());
        if parse_size(&text) == Some(self.bytes()) {
            Value::String(text)
        } else {
            self.bytes().to_value()
        }
    }
}

impl ToValue for Duration {
    fn to_value(&self) -> Value {
        Value::String(self.to_string())
    }
}

impl ToValue for std::time::Duration {
    fn to_value(&self) -> Value {
        Value::String(humantime::format_duration(*self).to_string())
    }
}

mod enums;
pub(crate) use self::enums::string_enum;

#[cfg(test)]
mod tests;
