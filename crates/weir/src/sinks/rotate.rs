//! `rotate = { bytes, age, max_wal_share }`: when a file-writing sink closes its output
//! and starts a new one. Shared by the sinks that write files or objects.

use serde::Serialize;

use crate::keys::units::{FromValue, ToValue};
use crate::keys::{ByteSize, Duration, Section};

/// The rotation age of Parquet files and objects when `rotate.age` is not set.
pub const DEFAULT_ROTATE_AGE: Duration = Duration::secs(300);

/// The share of `wal.max_disk` an open file may pin when `rotate.max_wal_share` is not
/// set.
pub const DEFAULT_MAX_WAL_SHARE: Share = Share(50);

/// `rotate = { bytes, age, max_wal_share }`: when an output file is closed and a new
/// one started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rotate {
    /// `rotate.bytes`: the size of an output file.
    pub bytes: ByteSize,
    /// `rotate.age`: the age of an output file; files are readable only once closed.
    pub age: Option<Duration>,
    /// `rotate.max_wal_share`: budget-aware rotation, for sinks whose cursor waits until
    /// a file is closed (Parquet, object store): the open file is closed early once the
    /// WAL bytes it covers (from its first record to the last one handed to it) reach
    /// this share of `wal.max_disk`, or of what the WAL's filesystem can hold when that
    /// is less ([`weir_wal::Wal::capacity`]), so that a healthy but buffering sink never
    /// fills the WAL or its disk (under `on_full = "block"` it would stall every source).
    pub max_wal_share: Share,
}

/// A share of a budget, in whole percent (1 to 100), written `"50%"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(into = "String")]
pub struct Share(u8);

impl Share {
    /// `bytes × share`.
    pub fn of(self, bytes: u64) -> u64 {
        u64::try_from(u128::from(bytes) * u128::from(self.0) / 100).unwrap_or(u64::MAX)
    }
}

impl std::fmt::Display for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}%", self.0)
    }
}

impl From<Share> for String {
    fn from(share: Share) -> String {
        share.to_string()
    }
}

impl ToValue for Share {
    fn to_value(&self) -> toml::Value {
        toml::Value::String(self.to_string())
    }
}

impl FromValue for Share {
    const EXPECTED: &'static str = r#"a percentage from "1%" to "100%""#;
    const KIND: &'static str = r#"percentage ("50%")"#;
    fn from_value(value: &toml::Value) -> Result<Self, String> {
        let bad = || format!("expected {}, found {value}", Self::EXPECTED);
        let text = value.as_str().ok_or_else(bad)?;
        let number = text.trim().strip_suffix('%').ok_or_else(bad)?;
        match number.trim().parse::<u8>() {
            Ok(n @ 1..=100) => Ok(Share(n)),
            _ => Err(bad()),
        }
    }
}

/// Reads `rotate`; `default_age` applies when `rotate.age` is absent. `max_wal_share`
/// is read only for sinks that pin the WAL while a file is open (`pins_wal`); for the
/// others it is an error that says why.
pub fn parse_rotate(s: &mut Section<'_>, default_age: Option<Duration>, pins_wal: bool) -> Rotate {
    let default = Rotate {
        bytes: ByteSize::mib(128),
        age: default_age,
        max_wal_share: DEFAULT_MAX_WAL_SHARE,
    };
    let declared = s
        .key(
            "rotate",
            "When an output file is closed and a new one started.",
        )
        .table();
    let Some(mut t) = declared else {
        return default;
    };
    let max_wal_share = if pins_wal {
        t.key(
            "max_wal_share",
            "Close the open file early once the WAL it covers reaches this share of `wal.max_disk`, or of what the WAL's filesystem can hold if that is less (its cursor waits for the file).",
        )
        .or(default.max_wal_share)
    } else {
        t.refuse(
            "max_wal_share",
            "this sink moves its cursor after every batch, so an open file never pins the WAL",
        );
        default.max_wal_share
    };
    let bytes = t.key("bytes", "Size of an output file.").or(default.bytes);
    let age = t.key(
        "age",
        "Age of an output file; files are readable only once closed.",
    );
    let age = match &default.age {
        Some(default_age) => age.default(default_age),
        None => age.default_text("no age limit").example("5m"),
    };
    let age = age.opt().or(default.age);
    let rotate = Rotate {
        bytes,
        age,
        max_wal_share,
    };
    t.finish();
    rotate
}

/// Whether an open file covering the WAL from `first_offset` up to `next_offset` (the
/// offset after the last record handed to it) pins enough of the WAL to be closed now
/// (see [`Rotate::max_wal_share`]). Only the range the file covers counts: what the
/// sink has not read yet is its lag, which closing the file would not release.
pub fn pins_too_much(
    rotate: &Rotate,
    wal: &weir_wal::Wal,
    first_offset: u64,
    next_offset: u64,
) -> bool {
    let covered = wal
        .bytes_since(first_offset)
        .saturating_sub(wal.bytes_since(next_offset));
    covered >= rotate.max_wal_share.of(wal.capacity())
}
