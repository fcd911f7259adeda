//! [`WalStats`]: a serializable snapshot for `/status` and `weir wal inspect`.

use std::sync::atomic::Ordering;

use crate::config::OnFull;
use crate::shared::{Shared, lock};

/// A snapshot of the WAL's figures.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct WalStats {
    /// Segment files.
    pub segments: usize,
    /// Bytes of segment files on disk, headers included.
    pub disk_bytes: u64,
    /// The disk budget.
    pub max_disk: u64,
    /// `disk_bytes / max_disk`.
    pub budget_used: f64,
    /// The policy at the budget.
    pub on_full: OnFull,
    /// The first retained offset.
    pub start: u64,
    /// The durable end (next offset).
    pub durable_end: u64,
    /// Offset ranges lost inside the retained log, sorted: quarantined at recovery
    /// (unreadable or damaged segments, stray files), and damaged records a reader
    /// stepped over in a sealed segment since open (also in `damaged_ranges`).
    pub quarantined_ranges: Vec<(u64, u64)>,
    /// Damaged records readers stepped over in sealed segments since open, each range
    /// once (however many cursors read it); each one is logged at ERROR.
    pub damaged_ranges: Vec<(u64, u64)>,
    /// Records in `damaged_ranges`, since open.
    pub damaged_records: u64,
    /// Records appended since open.
    pub appended_records: u64,
    /// Bytes appended since open (frames).
    pub appended_bytes: u64,
    /// Fsyncs of segment data since open.
    pub fsyncs: u64,
    /// Fsync latency, median, in µs.
    pub fsync_p50_us: u64,
    /// Fsync latency, 99th percentile, in µs.
    pub fsync_p99_us: u64,
    /// Fsync latency, maximum, in µs.
    pub fsync_max_us: u64,
    /// Time the writer spent in those fsyncs, in µs (at least 1 each), since open.
    pub fsync_time_us: u64,
    /// Time the writer spent writing batches to the active segment, in µs, since open.
    /// Over a busy stretch, the wall time less these two is what the log adds around
    /// the disk: its bookkeeping and the hand-over from appenders.
    pub write_time_us: u64,
    /// Segments deleted by retention since open.
    pub retention_deleted_segments: u64,
    /// Segments evicted by `drop_oldest` since open.
    pub evicted_segments: u64,
    /// Records in evicted segments.
    pub evicted_records: u64,
    /// Bytes the log's filesystem can still take before its reserve (`null` before the
    /// writer first measured it): appends wait, are refused or evict (by `on_full`)
    /// when this, not `max_disk`, has no room.
    pub fs_room_bytes: Option<u64>,
    /// Free space kept back on the filesystem (for cursor commits and retention).
    pub fs_reserve_bytes: u64,
    /// Times appends found the filesystem, rather than `max_disk`, full.
    pub fs_full_events: u64,
    /// Times the next segment could not be opened for want of space, inodes or file
    /// descriptors (appends waited or were refused; the log was not poisoned).
    pub resource_refusals: u64,
    /// The failure that poisoned the log, if any.
    pub poisoned: Option<String>,
    /// Each cursor.
    pub cursors: Vec<CursorStats>,
}

/// One cursor's figures.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct CursorStats {
    /// Its name.
    pub name: String,
    /// Whether it holds retention by configuration.
    pub required: bool,
    /// Released from retention by `max_lag` right now.
    pub released: bool,
    /// Times it was released.
    pub releases: u64,
    /// The committed offset.
    pub committed: u64,
    /// Records between the committed offset and the durable end.
    pub lag_records: u64,
    /// Frame bytes between the committed offset and the durable end (estimated within
    /// a segment).
    pub lag_bytes: u64,
    /// Age of the oldest uncommitted record in ms (never overstated).
    pub lag_age_ms: u64,
    /// Gaps it has seen since open.
    pub gaps: u64,
    /// Records in those gaps.
    pub gap_records: u64,
}

impl WalStats {
    pub(crate) fn collect(shared: &Shared, now_ms: u64) -> WalStats {
        let (p50, p99, max) = {
            let h = lock(&shared.fsync_us);
            (h.value_at_quantile(0.5), h.value_at_quantile(0.99), h.max())
        };
        let poisoned = lock(&shared.poison_cause).clone();
        let core = shared.core();
        let cursors = core
            .cursors
            .iter()
            .filter(|c| !c.detached)
            .map(|c| CursorStats {
                name: c.name.clone(),
                required: c.config.required,
                released: c.released,
                releases: c.releases,
                committed: c.committed,
                lag_records: core
                    .durable_end
                    .saturating_sub(c.committed.max(core.start())),
                lag_bytes: core.lag_bytes(c.committed),
                lag_age_ms: core.lag_age_ms(c.committed.max(core.start()), now_ms),
                gaps: c.gaps,
                gap_records: c.gap_records,
            })
            .collect();
        WalStats {
            segments: core.segments.len(),
            disk_bytes: core.disk_bytes,
            max_disk: core.max_disk,
            budget_used: core.disk_bytes as f64 / core.max_disk.max(1) as f64,
            on_full: core.on_full,
            start: core.start(),
            durable_end: core.durable_end,
            quarantined_ranges: {
                let mut ranges: Vec<(u64, u64)> = core
                    .holes
                    .iter()
                    .chain(&core.damaged)
                    .map(|h| (h.from, h.to))
                    .collect();
                ranges.sort_unstable();
                ranges
            },
            damaged_ranges: core.damaged.iter().map(|h| (h.from, h.to)).collect(),
            damaged_records: core.damaged_records,
            appended_records: shared.appended_records.load(Ordering::Relaxed),
            appended_bytes: shared.appended_bytes.load(Ordering::Relaxed),
            fsyncs: shared.fsyncs.load(Ordering::Relaxed),
            fsync_p50_us: p50,
            fsync_p99_us: p99,
            fsync_max_us: max,
            fsync_time_us: shared.fsync_total_us.load(Ordering::Relaxed),
            write_time_us: shared.write_total_us.load(Ordering::Relaxed),
            retention_deleted_segments: core.retained_segments_deleted,
            evicted_segments: core.evicted_segments,
            evicted_records: core.evicted_records,
            fs_room_bytes: (core.fs_room != u64::MAX).then_some(core.fs_room),
            fs_reserve_bytes: crate::core::FS_RESERVE,
            fs_full_events: core.fs_full_events,
            resource_refusals: core.resource_refusals,
            poisoned,
            cursors,
        }
    }
}
