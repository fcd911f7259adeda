//! Leaf value types of the configuration: sizes, durations, addresses, and how each is
//! read from a TOML value with a message that says what was expected and what was found.

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

    /// Reads the value; the error is the message to print after the key's path.
    fn from_value(value: &Value) -> Result<Self, String>;
}

/// Describes a value the way it was written, for "found …" in messages.
pub fn describe(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
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
    fn from_value(value: &Value) -> Result<Self, String> {
        value
            .as_bool()
            .ok_or_else(|| mismatch(Self::EXPECTED, value))
    }
}

impl FromValue for String {
    const EXPECTED: &'static str = "a non-empty string";
    fn from_value(value: &Value) -> Result<Self, String> {
        match value.as_str() {
            Some(s) if !s.is_empty() => Ok(s.to_owned()),
            _ => Err(mismatch(Self::EXPECTED, value)),
        }
    }
}

impl FromValue for PathBuf {
    const EXPECTED: &'static str = "a path (a non-empty string)";
    fn from_value(value: &Value) -> Result<Self, String> {
        match value.as_str() {
            Some(s) if !s.is_empty() => Ok(PathBuf::from(s)),
            _ => Err(mismatch(Self::EXPECTED, value)),
        }
    }
}

impl FromValue for u64 {
    const EXPECTED: &'static str = "a whole number, 0 or more";
    fn from_value(value: &Value) -> Result<Self, String> {
        value
            .as_integer()
            .and_then(|i| u64::try_from(i).ok())
            .ok_or_else(|| mismatch(Self::EXPECTED, value))
    }
}

impl FromValue for f64 {
    const EXPECTED: &'static str = "a number, e.g. 0.1";
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
    fn from_value(value: &Value) -> Result<Self, String> {
        let wide = NonZeroU64::from_value(value)
            .map_err(|e| e.replace(NonZeroU64::EXPECTED, Self::EXPECTED))?;
        NonZeroU32::try_from(wide).map_err(|_| mismatch(Self::EXPECTED, value))
    }
}

impl FromValue for SocketAddr {
    const EXPECTED: &'static str = r#"an IP address and port like "127.0.0.1:9464""#;
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

/// Implements [`FromValue`] for a fieldless enum written as one of a few strings, and
/// `Serialize` as that same string.
macro_rules! string_enum {
    ($ty:ty { $first:literal => $first_variant:ident $(, $text:literal => $variant:ident)* $(,)? }) => {
        impl $crate::keys::units::FromValue for $ty {
            const EXPECTED: &'static str = concat!("one of \"", $first, "\"" $(, ", \"", $text, "\"")*);
            fn from_value(value: &toml::Value) -> Result<Self, String> {
                match value.as_str() {
                    Some($first) => Ok(Self::$first_variant),
                    $(Some($text) => Ok(Self::$variant),)*
                    _ => Err($crate::keys::units::choice_mismatch(
                        Self::EXPECTED,
                        value,
                        &[$first $(, $text)*],
                    )),
                }
            }
        }

        impl $ty {
            /// The name as written in the configuration.
            pub fn as_str(self) -> &'static str {
                match self {
                    Self::$first_variant => $first,
                    $(Self::$variant => $text,)*
                }
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use string_enum;

/// Implements [`FromValue`] for an enum that another crate already deserializes with
/// serde (weir-wal's `OnFull`, `StartFrom`): the value is read through the enum's own
/// `Deserialize`, so the names are never copied and mapped by hand; the listed names
/// only word the message and the "did you mean" hint.
macro_rules! serde_enum {
    ($ty:ty { $first:literal $(, $text:literal)* $(,)? }) => {
        impl $crate::keys::units::FromValue for $ty {
            const EXPECTED: &'static str = concat!("one of \"", $first, "\"" $(, ", \"", $text, "\"")*);
            fn from_value(value: &toml::Value) -> Result<Self, String> {
                <$ty as serde::Deserialize>::deserialize(value.clone()).map_err(|_| {
                    $crate::keys::units::choice_mismatch(Self::EXPECTED, value, &[$first $(, $text)*])
                })
            }
        }
    };
}

serde_enum!(weir_wal::OnFull { "block", "reject", "drop_oldest" });
serde_enum!(weir_wal::StartFrom { "earliest", "latest" });

#[cfg(test)]
mod tests {
    use super::*;

    fn size(value: Value) -> Result<u64, String> {
        ByteSize::from_value(&value).map(ByteSize::bytes)
    }

    fn duration(text: &str) -> Result<std::time::Duration, String> {
        Duration::from_value(&Value::String(text.to_owned())).map(Duration::get)
    }

    #[test]
    fn sizes_accept_units_integers_and_fractions() {
        assert_eq!(size("8 MiB".into()), Ok(8 * 1024 * 1024));
        assert_eq!(size("8MiB".into()), Ok(8 * 1024 * 1024));
        assert_eq!(size("8 mib".into()), Ok(8 * 1024 * 1024));
        assert_eq!(size("1 GB".into()), Ok(1_000_000_000));
        assert_eq!(size("1.5 KiB".into()), Ok(1536));
        assert_eq!(size(" 64 KiB ".into()), Ok(65536));
        assert_eq!(size("4096".into()), Ok(4096));
        assert_eq!(size(Value::Integer(4096)), Ok(4096));
    }

    #[test]
    fn sizes_refuse_zero_negatives_garbage_and_overflow() {
        let lots = size("lots".into()).unwrap_err();
        assert_eq!(
            lots,
            r#"expected a size like "128 MiB" (or a whole number of bytes), found "lots""#
        );
        assert!(
            size(Value::Integer(0))
                .unwrap_err()
                .contains("at least 1 byte")
        );
        assert!(
            size("0 MiB".into())
                .unwrap_err()
                .contains("at least 1 byte")
        );
        assert!(size(Value::Integer(-1)).is_err());
        assert!(size("-1 MiB".into()).is_err());
        assert!(size("8 MiBs".into()).is_err());
        assert!(size("".into()).is_err());
        assert!(size(Value::Float(1.5)).is_err());
        assert!(size("99999999999 EiB".into()).is_err());
    }

    #[test]
    fn durations_accept_humantime_and_refuse_bare_numbers_and_zero() {
        assert_eq!(duration("30s"), Ok(std::time::Duration::from_secs(30)));
        assert_eq!(duration("100ms"), Ok(std::time::Duration::from_millis(100)));
        assert_eq!(duration("1h 30m"), Ok(std::time::Duration::from_secs(5400)));
        assert!(duration("0s").unwrap_err().contains("longer than zero"));
        assert!(
            duration("soon")
                .unwrap_err()
                .starts_with("expected a duration like \"30s\"")
        );
        let bare = Duration::from_value(&Value::Integer(30)).unwrap_err();
        assert!(bare.contains("write the unit, e.g. \"30s\""), "{bare}");
        assert_eq!(
            std::time::Duration::from_value(&Value::String("0s".into())),
            Ok(std::time::Duration::ZERO)
        );
    }

    #[test]
    fn positive_integers_explain_zero() {
        assert!(
            NonZeroU64::from_value(&Value::Integer(0))
                .unwrap_err()
                .contains("at least 1")
        );
        assert!(NonZeroU32::from_value(&Value::Integer(1 << 40)).is_err());
        assert_eq!(
            NonZeroU32::from_value(&Value::Integer(7)).map(NonZeroU32::get),
            Ok(7)
        );
        assert_eq!(u64::from_value(&Value::Integer(0)), Ok(0));
        assert!(u64::from_value(&Value::String("5".into())).is_err());
    }

    #[test]
    fn addresses_must_be_ip_and_port() {
        assert!(SocketAddr::from_value(&Value::String("127.0.0.1:9464".into())).is_ok());
        let named = SocketAddr::from_value(&Value::String("localhost:9464".into())).unwrap_err();
        assert!(named.contains("write an IP address"), "{named}");
    }

    #[test]
    fn formats_bytes_exactly_when_whole() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(8 * 1024 * 1024), "8 MiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(3 * 1024 * 1024 * 1024), "3 GiB");
        assert_eq!(format_bytes(u64::MAX), "16.0 EiB");
    }
}
