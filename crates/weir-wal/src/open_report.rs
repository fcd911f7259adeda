//! [`OpenReport`]: what recovery found and did when the WAL was opened, and the
//! warning every quarantined segment is logged with.

use std::fmt;
use std::path::{Path, PathBuf};

/// What recovery found and did when the WAL was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct OpenReport {
    /// Segments after recovery.
    pub segments: usize,
    /// The first retained offset.
    pub start: u64,
    /// The durable end: the next offset to be appended.
    pub durable_end: u64,
    /// Bytes cut from the tail of the last segment (torn or corrupt frames).
    pub truncated_bytes: u64,
    /// Complete frames among the bytes cut (a torn frame is not counted).
    pub truncated_records: u64,
    /// Segments quarantined, with the offset ranges lost.
    pub quarantined: Vec<QuarantinedSegment>,
    /// Segment files removed because their header was never completely written (a crash
    /// while rotating); they held no record.
    pub removed_unfinished_segments: usize,
    /// Cursors whose saved file was unreadable: restarted from the earliest record.
    pub cursors_reset: Vec<String>,
    /// Cursors saved past the durable end (the tail they pointed into was lost): moved
    /// back to the end.
    pub cursors_clamped: Vec<String>,
}

/// A segment moved to `<dir>/quarantine/`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QuarantinedSegment {
    /// Where it now is.
    pub path: PathBuf,
    /// First offset of the lost range.
    pub from: u64,
    /// End (exclusive) of the lost range.
    pub to: u64,
    /// Why.
    pub reason: String,
}

impl fmt::Display for OpenReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} segments, offsets {}..{}",
            self.segments, self.start, self.durable_end
        )?;
        if self.truncated_bytes > 0 {
            write!(
                f,
                "; tail truncated by {} bytes ({} records)",
                self.truncated_bytes, self.truncated_records
            )?;
        }
        for q in &self.quarantined {
            write!(
                f,
                "; quarantined {} (offsets {}..{}: {})",
                q.path.display(),
                q.from,
                q.to,
                q.reason
            )?;
        }
        Ok(())
    }
}

/// Every quarantine is a loss: logged at WARN with the file, the range and the reason.
pub(crate) fn warn_quarantined(original: &Path, q: &QuarantinedSegment) {
    tracing::warn!(
        segment = %original.display(),
        moved_to = %q.path.display(),
        from = q.from,
        to = q.to,
        records = q.to - q.from,
        reason = %q.reason,
        "quarantined WAL segment {}: {} records (offsets {}..{}) are lost: {}; \
         moved to {}",
        original.display(),
        q.to - q.from,
        q.from,
        q.to,
        q.reason,
        q.path.display()
    );
}
