//! `rotate = { bytes, age, max_wal_share }`: when a file-writing sink closes its output
//! and starts a new one. Shared by the sinks that write files or objects, with the
//! counts of why they closed ([`Closes`], `closes` in their `/status` details) and the
//! sentence that says when budget-aware rotation closes files before `rotate.bytes`
//! would ([`early_close_note`], in `weir validate` and the sink's startup log).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::keys::units::{FromValue, ToValue};
use crate::keys::{ByteSize, Duration, Section, format_bytes};

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

/// Why an output file or object was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// It reached `rotate.bytes`.
    Bytes,
    /// It reached `rotate.age`.
    Age,
    /// It pinned `rotate.max_wal_share` of the WAL (budget-aware rotation).
    WalShare,
    /// An object an earlier run recorded ends where it ended then (object store).
    Recorded,
    /// More partitions had records than `max_open_partitions`: the least recently
    /// written one was closed early.
    Partitions,
    /// The sink stopped.
    Shutdown,
}

impl CloseReason {
    /// Its name in `/status` (`size` for `rotate.bytes`: a count, not bytes).
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::Bytes => "size",
            CloseReason::Age => "age",
            CloseReason::WalShare => "wal_share",
            CloseReason::Recorded => "recorded",
            CloseReason::Partitions => "partitions",
            CloseReason::Shutdown => "shutdown",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The reasons a file sink that never pins the WAL closes files for.
pub const FILE_CLOSES: &[CloseReason] =
    &[CloseReason::Bytes, CloseReason::Age, CloseReason::Shutdown];

/// The reasons a sink whose open file pins the WAL closes files for.
pub const PINNING_CLOSES: &[CloseReason] = &[
    CloseReason::Bytes,
    CloseReason::Age,
    CloseReason::WalShare,
    CloseReason::Shutdown,
];

/// Files or objects closed since the sink opened, by reason: `closes` in its `/status`
/// details (`{"size": 3, "age": 0, "wal_share": 12, "shutdown": 0}`: `size` counts
/// `rotate.bytes`).
#[derive(Debug)]
pub struct Closes {
    reasons: &'static [CloseReason],
    counts: [AtomicU64; 6],
}

impl Closes {
    /// Counts for `reasons`, the ones the sink can close for, in the order shown.
    pub fn new(reasons: &'static [CloseReason]) -> Self {
        Self {
            reasons,
            counts: Default::default(),
        }
    }

    /// One more close for `reason`.
    pub fn count(&self, reason: CloseReason) {
        self.counts[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Closes for `reason` so far.
    pub fn get(&self, reason: CloseReason) -> u64 {
        self.counts[reason.index()].load(Ordering::Relaxed)
    }

    /// The counts as a JSON object, one key per reason the sink can close for.
    pub fn status(&self) -> serde_json::Value {
        let map = self
            .reasons
            .iter()
            .map(|&r| (r.as_str().to_owned(), serde_json::Value::from(self.get(r))))
            .collect();
        serde_json::Value::Object(map)
    }
}

/// When budget-aware rotation closes a sink's files (`what`: "file" or "object")
/// before `rotate.bytes` would: the sentence `weir validate` and the sink's startup log
/// print. `capacity` is what the WAL can hold when that is less than `max_disk` (its
/// filesystem is smaller); `None` when `rotate.bytes` comes first.
///
/// `rotate.bytes` counts the encoded file and `rotate.max_wal_share` the WAL records it
/// holds, which are larger: at an equal bound the share comes first.
pub fn early_close_note(
    sink: &str,
    what: &str,
    rotate: &Rotate,
    max_disk: u64,
    capacity: Option<u64>,
) -> Option<String> {
    let room = capacity.filter(|&c| c < max_disk);
    let bound = rotate.max_wal_share.of(room.unwrap_or(max_disk));
    if bound > rotate.bytes.bytes() {
        return None;
    }
    let of = match room {
        Some(room) => format!(
            "of the {} the WAL's filesystem can hold, less than wal.max_disk {}",
            format_bytes(room),
            format_bytes(max_disk)
        ),
        None => format!("of wal.max_disk {}", format_bytes(max_disk)),
    };
    let article = if what.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    Some(format!(
        "sinks.{sink}: {article} {what} closes once the WAL records it holds reach {} \
         (rotate.max_wal_share {} {of}), before its rotate.bytes {}; raise wal.max_disk or \
         rotate.max_wal_share for larger {what}s",
        format_bytes(bound),
        rotate.max_wal_share,
        rotate.bytes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rotate(bytes_mib: u64, share: u8) -> Rotate {
        Rotate {
            bytes: ByteSize::mib(bytes_mib),
            age: Some(Duration::secs(30)),
            max_wal_share: Share(share),
        }
    }

    #[test]
    fn the_note_states_the_effective_bound_when_the_share_comes_first() {
        const MIB: u64 = 1 << 20;
        let note = early_close_note("lake", "file", &rotate(16, 25), 32 * MIB, None)
            .expect("8 MiB comes before 16 MiB");
        assert_eq!(
            note,
            "sinks.lake: a file closes once the WAL records it holds reach 8 MiB \
             (rotate.max_wal_share 25% of wal.max_disk 32 MiB), before its rotate.bytes 16 MiB; \
             raise wal.max_disk or rotate.max_wal_share for larger files"
        );
        // Equal: the share still comes first (the file is smaller than its records).
        assert!(early_close_note("lake", "file", &rotate(16, 50), 32 * MIB, None).is_some());
        // rotate.bytes first: nothing to say.
        assert_eq!(
            early_close_note("lake", "file", &rotate(16, 50), 64 * MIB, None),
            None
        );
        // A filesystem smaller than the budget is what counts.
        let note = early_close_note("o", "object", &rotate(128, 50), 1 << 30, Some(24 * MIB))
            .expect("12 MiB before 128 MiB");
        assert!(
            note.contains("reach 12 MiB (rotate.max_wal_share 50% of the 24 MiB the WAL's filesystem can hold, less than wal.max_disk 1 GiB)")
                && note.contains("larger objects"),
            "{note}"
        );
        assert_eq!(
            early_close_note("o", "object", &rotate(8, 50), 1 << 30, Some(1 << 31)),
            None
        );
    }

    #[test]
    fn closes_are_counted_by_reason() {
        let closes = Closes::new(PINNING_CLOSES);
        closes.count(CloseReason::WalShare);
        closes.count(CloseReason::WalShare);
        closes.count(CloseReason::Shutdown);
        assert_eq!(closes.get(CloseReason::WalShare), 2);
        assert_eq!(
            closes.status(),
            serde_json::json!({"size": 0, "age": 0, "wal_share": 2, "shutdown": 1})
        );
        let files = Closes::new(FILE_CLOSES);
        files.count(CloseReason::Bytes);
        assert_eq!(
            files.status(),
            serde_json::json!({"size": 1, "age": 0, "shutdown": 0})
        );
    }
}
