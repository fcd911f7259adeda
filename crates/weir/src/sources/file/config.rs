//! `type = "file"` (a source): its keys and its bounds.

use std::num::NonZeroU32;
use std::path::PathBuf;

use serde::Serialize;

use crate::keys::{Bounds, ByteSize, Section, times};
use crate::sources::SourceKeys;

/// `type = "file"`: NDJSON lines from a file, or standard input for `-`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileSourceConfig {
    /// The file, or `-` for standard input. Required.
    pub path: PathBuf,
    /// Longest line accepted; a longer line is quarantined, never buffered whole.
    /// Default 1 MiB, at most `batch_bytes`.
    pub max_line_bytes: ByteSize,
    /// Lines per batch handed to the WAL. Default 256.
    pub batch_size: NonZeroU32,
    /// Bytes per batch handed to the WAL; a batch is cut before it would pass this.
    /// Default 1 MiB.
    pub batch_bytes: ByteSize,
}

impl SourceKeys for FileSourceConfig {
    const TYPE: &'static str = "file";

    fn parse(s: &mut Section<'_>, _name: &str) -> Option<Self> {
        let path = s.req("path", "a file path, or \"-\" for standard input");
        let max_line_bytes = s.or("max_line_bytes", ByteSize::mib(1));
        let batch_bytes = s.or("batch_bytes", ByteSize::mib(1));
        if max_line_bytes > batch_bytes && !s.failed(&["max_line_bytes", "batch_bytes"]) {
            s.error(
                "max_line_bytes",
                format!("{max_line_bytes} is more than batch_bytes = {batch_bytes}; the longest line must fit in a batch"),
            );
        }
        Some(Self {
            max_line_bytes,
            batch_size: s.or("batch_size", NonZeroU32::new(256).expect("256 > 0")),
            batch_bytes,
            path: path?,
        })
    }

    fn bounds(&self, bounds: &mut Bounds<'_>) {
        bounds.add(
            "batch",
            Some(self.batch_size.get().into()),
            self.batch_bytes.bytes(),
            format!(
                "lines being batched: batch_size {} lines or batch_bytes {}",
                self.batch_size, self.batch_bytes
            ),
        );
        let units = super::shell::UNITS_IN_FLIGHT as u64;
        bounds.add(
            "appends_in_flight",
            Some(units),
            times(units, self.batch_bytes.bytes()),
            format!(
                "batches on their way to the WAL, in file order (the next appended while the last is fsynced): \
                 {units} × batch_bytes {}; a refused batch is retried, never dropped",
                self.batch_bytes
            ),
        );
    }

    fn max_batch_bytes(&self) -> (u64, &'static str) {
        (self.batch_bytes.bytes(), "batch_bytes")
    }
}
