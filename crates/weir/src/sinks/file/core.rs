//! The file sink's policy: when to rotate and what to name files. Sans-IO.

use std::time::{Duration, Instant};

use crate::sinks::rotate::CloseReason;

/// Suffix of the file being written; renamed to [`DONE_SUFFIX`] when rotated.
pub const OPEN_SUFFIX: &str = ".ndjson.open";
/// Suffix of a closed file.
pub const DONE_SUFFIX: &str = ".ndjson";

/// Rotation by size and age.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Close a file once it holds at least this many bytes.
    pub max_bytes: u64,
    /// Close a non-empty file this long after its first write.
    pub max_age: Option<Duration>,
}

impl Rotation {
    /// Whether a file of `bytes` bytes, first written at `opened`, should be closed at
    /// `now`.
    pub fn due(&self, bytes: u64, opened: Instant, now: Instant) -> bool {
        self.due_for(bytes, opened, now).is_some()
    }

    /// Why a file of `bytes` bytes, first written at `opened`, should be closed at
    /// `now` (its size first), if it should.
    pub fn due_for(&self, bytes: u64, opened: Instant, now: Instant) -> Option<CloseReason> {
        if bytes == 0 {
            None
        } else if bytes >= self.max_bytes {
            Some(CloseReason::Bytes)
        } else if self
            .max_age
            .is_some_and(|age| now.saturating_duration_since(opened) >= age)
        {
            Some(CloseReason::Age)
        } else {
            None
        }
    }
}

/// The stem of the `seq`th file of this process (started at `started_ms`): names sort
/// in write order across restarts.
pub fn file_stem(started_ms: i64, seq: u64) -> String {
    format!("{started_ms:013}-{seq:06}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_on_bytes_or_age_never_when_empty() {
        let r = Rotation {
            max_bytes: 100,
            max_age: Some(Duration::from_secs(5)),
        };
        let t0 = Instant::now();
        assert!(!r.due(0, t0, t0 + Duration::from_secs(60)));
        assert!(!r.due(99, t0, t0 + Duration::from_secs(4)));
        assert!(r.due(100, t0, t0));
        assert!(r.due(1, t0, t0 + Duration::from_secs(5)));
        let bytes_only = Rotation {
            max_bytes: 100,
            max_age: None,
        };
        assert!(!bytes_only.due(1, t0, t0 + Duration::from_secs(3600)));
        let late = t0 + Duration::from_secs(60);
        assert_eq!(r.due_for(100, t0, late), Some(CloseReason::Bytes));
        assert_eq!(r.due_for(1, t0, late), Some(CloseReason::Age));
        assert_eq!(r.due_for(0, t0, late), None);
    }

    #[test]
    fn names_sort_in_write_order() {
        assert!(file_stem(1_700_000_000_000, 9) < file_stem(1_700_000_000_000, 10));
        assert!(file_stem(1_700_000_000_000, 999) < file_stem(1_700_000_000_001, 0));
    }
}
