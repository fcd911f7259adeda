//! What a read returns ([`ReadBatch`]: an optional [`Gap`], then [`Record`]s in offset
//! order) and the [`ReadLimits`] it is read under.

/// One record read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its offset.
    pub offset: u64,
    /// Its append time in ms since the UNIX epoch.
    pub time_ms: u64,
    /// The payload: a slice of the chunk the reader read it in (no copy of its own).
    pub payload: bytes::Bytes,
}

/// Records the cursor will never see, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Gap {
    /// Deleted before this cursor read them: `on_full = drop_oldest`, or retention while
    /// the cursor was not required or was released by `max_lag`.
    Evicted {
        /// First lost offset.
        from: u64,
        /// First offset after the gap.
        to: u64,
        /// `to - from`.
        records: u64,
    },
    /// In a segment quarantined at open.
    Quarantined {
        /// First lost offset.
        from: u64,
        /// First offset after the gap.
        to: u64,
        /// `to - from`.
        records: u64,
    },
    /// Damaged on disk, found while reading a sealed segment.
    Corrupt {
        /// First lost offset.
        from: u64,
        /// First offset after the gap.
        to: u64,
        /// `to - from`.
        records: u64,
    },
}

impl Gap {
    /// Records lost.
    pub fn records(&self) -> u64 {
        match *self {
            Gap::Evicted { records, .. }
            | Gap::Quarantined { records, .. }
            | Gap::Corrupt { records, .. } => records,
        }
    }
}

/// What one read returns: an optional gap, then records in offset order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadBatch {
    /// Records skipped before `records` (they are gone).
    pub gap: Option<Gap>,
    /// The records.
    pub records: Vec<Record>,
    pub(crate) next: u64,
    /// The payload bytes of `records`.
    pub(crate) bytes: u64,
}

impl ReadBatch {
    /// The offset after the last record (or gap): commit this once the records are stored.
    pub fn next_offset(&self) -> u64 {
        self.next
    }

    /// No records and no gap.
    pub fn is_empty(&self) -> bool {
        self.gap.is_none() && self.records.is_empty()
    }
}

/// Bounds on one read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// At most this many records.
    pub max_records: usize,
    /// At most this many payload bytes, except that one record is always returned.
    pub max_bytes: u64,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits {
            max_records: 1024,
            max_bytes: 4 * 1024 * 1024,
        }
    }
}
