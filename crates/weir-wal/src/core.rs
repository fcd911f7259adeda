//! The sans-IO core: segment bookkeeping, the disk budget and its policy, cursors,
//! retention and lag. No file, clock or thread here: the writer thread and readers
//! consult it under a lock and do the I/O it decides; time comes in as `now_ms`.

use std::collections::VecDeque;

use crate::config::{CursorConfig, OnFull};
use crate::format::SEGMENT_HEADER_LEN;
use crate::time_index::TimeIndex;

/// What the core knows about one segment file.
#[derive(Debug, Clone)]
pub(crate) struct SegMeta {
    pub first: u64,
    /// Records written (for the active segment this includes records not yet fsynced).
    pub count: u64,
    /// File length, header included.
    pub bytes: u64,
    pub created_ms: u64,
    pub times: TimeIndex,
}

impl SegMeta {
    pub fn new(first: u64, created_ms: u64) -> Self {
        SegMeta {
            first,
            count: 0,
            bytes: SEGMENT_HEADER_LEN,
            created_ms,
            times: TimeIndex::new(true),
        }
    }

    pub fn end(&self) -> u64 {
        self.first + self.count
    }
}

/// One cursor's state.
#[derive(Debug, Clone)]
pub(crate) struct CursorState {
    pub name: String,
    pub config: CursorConfig,
    /// The next offset not yet committed.
    pub committed: u64,
    /// Released from retention by `max_lag`.
    pub released: bool,
    pub releases: u64,
    pub gaps: u64,
    pub gap_records: u64,
    pub reader_out: bool,
    /// Its sink was removed while the log is open ([`Wal::detach_cursor`]): it holds
    /// no retention, has no reader and is not reported. Kept in place (readers index
    /// the cursors) and taken back by [`Wal::add_cursor`] under the same name.
    ///
    /// [`Wal::detach_cursor`]: crate::Wal::detach_cursor
    /// [`Wal::add_cursor`]: crate::Wal::add_cursor
    pub detached: bool,
}

impl CursorState {
    /// A cursor at `committed`, attached, with no reader out.
    pub fn new(name: String, config: CursorConfig, committed: u64) -> Self {
        CursorState {
            name,
            config,
            committed,
            released: false,
            releases: 0,
            gaps: 0,
            gap_records: 0,
            reader_out: false,
            detached: false,
        }
    }

    fn holds_retention(&self) -> bool {
        self.config.required && !self.released && !self.detached
    }
}

/// A quarantined offset range `[from, to)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hole {
    pub from: u64,
    pub to: u64,
}

/// What an append of `len` bytes must do first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Write it (after rotating if `rotate`).
    Write { rotate: bool },
    /// Delete this many releasable segments (retention), then plan again.
    Retain { segments: usize },
    /// `drop_oldest`: evict this many segments, then plan again.
    Evict { segments: usize },
    /// `reject`: refuse it; it needs `needed` bytes.
    Reject { needed: u64 },
    /// `block`: wait for retention.
    Wait,
}

/// Where an offset lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Locate {
    /// Deleted before being read: the next retained offset is `to`.
    Evicted { to: u64 },
    /// Quarantined: the next offset after the hole is `to`.
    Hole { to: u64 },
    /// In the segment starting at `first`; `readable` records are durable in it.
    Segment { first: u64, readable: u64 },
    /// At or past the durable end.
    End,
}

#[derive(Debug)]
pub(crate) struct Core {
    pub segments: VecDeque<SegMeta>,
    pub holes: Vec<Hole>,
    /// Ranges of damaged records a reader stepped over in sealed segments (found while
    /// reading, not at recovery), each once however many cursors read it.
    pub damaged: Vec<Hole>,
    /// Records in `damaged` since open.
    pub damaged_records: u64,
    pub durable_end: u64,
    pub disk_bytes: u64,
    pub max_disk: u64,
    pub segment_bytes: u64,
    pub on_full: OnFull,
    pub cursors: Vec<CursorState>,
    pub retained_segments_deleted: u64,
    pub evicted_segments: u64,
    pub evicted_records: u64,
    /// Bytes the filesystem holding the log can still take, its reserve
    /// ([`FS_RESERVE`]) kept back: a second budget next to `max_disk`, refreshed by the
    /// writer each round (`u64::MAX` until the first reading).
    pub fs_room: u64,
    /// Appends that had to wait, were refused or evicted for because the filesystem,
    /// not `max_disk`, had no room.
    pub fs_full_events: u64,
    /// Times the next segment could not be opened for want of space, inodes or file
    /// descriptors (appends waited or were refused; nothing was poisoned).
    pub resource_refusals: u64,
}

/// Free space kept back on the log's filesystem: appends stop this far from a full
/// disk, so that cursor commits (whose files are replaced, never grown), segment
/// headers and the quarantine still find room, and retention can run.
pub const FS_RESERVE: u64 = 4 << 20;

/// Free inodes kept back on the log's filesystem (where it counts them), for the same
/// reason: a cursor commit writes a new file before it renames it over the old one.
pub const INODE_RESERVE: u64 = 16;

impl Core {
    /// The first retained offset.
    pub fn start(&self) -> u64 {
        self.segments.front().map_or(self.durable_end, |s| s.first)
    }

    /// Plans an append of `len` encoded bytes.
    pub fn plan_append(&self, len: u64) -> Plan {
        let Some(active) = self.segments.back() else {
            return Plan::Write { rotate: true };
        };
        let rotate = active.count > 0 && active.bytes + len > self.segment_bytes;
        let needed = len + if rotate { SEGMENT_HEADER_LEN } else { 0 };
        let room = self.room();
        if needed <= room {
            return Plan::Write { rotate };
        }
        let releasable = self.releasable_segments();
        if releasable > 0 {
            return Plan::Retain {
                segments: releasable,
            };
        }
        match self.on_full {
            OnFull::Reject => Plan::Reject { needed },
            OnFull::Block => Plan::Wait,
            OnFull::DropOldest => {
                let sealed = self.segments.len() - 1;
                let mut freed = 0;
                let mut n = 0;
                for seg in self.segments.iter().take(sealed) {
                    if needed <= room + freed {
                        break;
                    }
                    freed += seg.bytes;
                    n += 1;
                }
                if n == 0 {
                    // Only the active segment is left and the batch still does not fit:
                    // the config bounds make this unreachable; refuse rather than loop.
                    Plan::Reject { needed }
                } else {
                    Plan::Evict { segments: n }
                }
            }
        }
    }

    /// Bytes an append may take now: the room in `max_disk`, or on the filesystem if
    /// that is less.
    pub fn room(&self) -> u64 {
        self.max_disk
            .saturating_sub(self.disk_bytes)
            .min(self.fs_room)
    }

    /// The most the log can hold now: `max_disk`, or what it holds plus the room left on
    /// its filesystem (its reserve kept back) when that is less.
    pub fn capacity(&self) -> u64 {
        self.max_disk
            .min(self.disk_bytes.saturating_add(self.fs_room))
    }

    /// Whether the filesystem, rather than `max_disk`, is what leaves no room for `needed`.
    pub fn fs_is_short(&self, needed: u64) -> bool {
        self.fs_room < needed && self.fs_room < self.max_disk.saturating_sub(self.disk_bytes)
    }

    /// Sealed segments below every cursor that holds retention (all sealed ones if none
    /// does). Deleted only when an append needs the room.
    pub fn releasable_segments(&self) -> usize {
        let floor = self
            .cursors
            .iter()
            .filter(|c| c.holds_retention())
            .map(|c| c.committed)
            .min()
            .unwrap_or(u64::MAX);
        self.count_sealed_below(floor)
    }

    /// Sealed segments below every cursor that holds retention, when at least one does:
    /// these are deleted as soon as the cursors commit past them.
    pub fn eager_retention(&self) -> usize {
        let floor = self
            .cursors
            .iter()
            .filter(|c| c.holds_retention())
            .map(|c| c.committed)
            .min();
        floor.map_or(0, |f| self.count_sealed_below(f))
    }

    fn count_sealed_below(&self, floor: u64) -> usize {
        let sealed = self.segments.len().saturating_sub(1);
        self.segments
            .iter()
            .take(sealed)
            .take_while(|s| s.end() <= floor)
            .count()
    }

    /// Removes the `n` oldest segments from the books; returns their first offsets (the
    /// files to delete). `evict` counts them as evicted (data lost to `drop_oldest`).
    pub fn pop_front(&mut self, n: usize, evict: bool) -> Vec<u64> {
        let mut firsts = Vec::with_capacity(n);
        for _ in 0..n.min(self.segments.len().saturating_sub(1)) {
            let Some(seg) = self.segments.pop_front() else {
                break;
            };
            self.disk_bytes -= seg.bytes;
            self.fs_room = self.fs_room.saturating_add(seg.bytes);
            if evict {
                self.evicted_segments += 1;
                self.evicted_records += seg.count;
            } else {
                self.retained_segments_deleted += 1;
            }
            firsts.push(seg.first);
        }
        let start = self.start();
        self.holes.retain(|h| h.to > start);
        self.damaged.retain(|h| h.to > start);
        firsts
    }

    /// Opens a new active segment starting at the current end.
    pub fn push_segment(&mut self, first: u64, created_ms: u64) {
        self.segments.push_back(SegMeta::new(first, created_ms));
        self.disk_bytes += SEGMENT_HEADER_LEN;
    }

    /// Books a written batch in the active segment; returns its first offset.
    pub fn record_write(&mut self, records: u64, bytes: u64, time_ms: u64) -> u64 {
        let active = self
            .segments
            .back_mut()
            .expect("the writer opens a segment before writing");
        let first = active.end();
        active.times.push(first, time_ms);
        active.count += records;
        active.bytes += bytes;
        self.disk_bytes += bytes;
        self.fs_room = self.fs_room.saturating_sub(bytes);
        first
    }

    /// Takes back writes booked from offset `first` on (`bytes` of them) that did not
    /// reach the file: the active segment ends at `first` again.
    pub fn unrecord_writes(&mut self, first: u64, bytes: u64) {
        let active = self
            .segments
            .back_mut()
            .expect("the writer opens a segment before writing");
        active.count = first.saturating_sub(active.first);
        active.bytes = active.bytes.saturating_sub(bytes);
        active.times.forget_from(first);
        self.disk_bytes = self.disk_bytes.saturating_sub(bytes);
    }

    /// The written end (next offset to assign).
    pub fn written_end(&self) -> u64 {
        self.segments.back().map_or(self.durable_end, SegMeta::end)
    }

    /// Records the damaged range `[from, to)` a reader stepped over (once per range).
    pub fn note_damage(&mut self, from: u64, to: u64) {
        if self.damaged.iter().any(|h| h.from == from && h.to == to) {
            return;
        }
        self.damaged.push(Hole { from, to });
        self.damaged.sort_by_key(|h| h.from);
        self.damaged_records += to - from;
    }

    /// Where `offset` lies for a reader.
    pub fn locate(&self, offset: u64) -> Locate {
        if let Some(h) = self
            .holes
            .iter()
            .find(|h| h.from <= offset && offset < h.to)
        {
            return Locate::Hole { to: h.to };
        }
        if offset < self.start() {
            return Locate::Evicted { to: self.start() };
        }
        if offset >= self.durable_end {
            return Locate::End;
        }
        for (i, seg) in self.segments.iter().enumerate() {
            if offset >= seg.first && offset < seg.end() {
                let readable = seg.end().min(self.durable_end) - seg.first;
                return Locate::Segment {
                    first: seg.first,
                    readable,
                };
            }
            if let Some(next) = self.segments.get(i + 1)
                && offset >= seg.end()
                && offset < next.first
            {
                return Locate::Hole { to: next.first };
            }
        }
        Locate::End
    }

    /// Frame bytes from `offset` to the durable end, estimated in proportion within the
    /// segment holding `offset`.
    pub fn lag_bytes(&self, offset: u64) -> u64 {
        let mut total = 0;
        for seg in &self.segments {
            let data = seg.bytes - SEGMENT_HEADER_LEN;
            if seg.end() <= offset {
                continue;
            }
            if seg.first >= offset {
                total += data;
            } else {
                let behind = seg.end() - offset;
                total +=
                    (u128::from(data) * u128::from(behind) / u128::from(seg.count.max(1))) as u64;
            }
        }
        total
    }

    /// Age in ms of the record at `offset` (0 if there is none): a lower bound when the
    /// time index of its segment was downsampled.
    pub fn lag_age_ms(&self, offset: u64, now_ms: u64) -> u64 {
        if offset >= self.durable_end {
            return 0;
        }
        let Some(i) = self
            .segments
            .iter()
            .position(|s| offset >= s.first && offset < s.end())
        else {
            return 0;
        };
        let seg = &self.segments[i];
        let next_created = self.segments.get(i + 1).map(|s| s.created_ms);
        let t = seg.times.time_of(offset, seg.created_ms, next_created);
        now_ms.saturating_sub(t)
    }

    /// Applies each required cursor's `max_lag`: releases it from retention when it is
    /// further behind; takes it back once it has committed a retained position within
    /// the limit. Returns cursors newly released.
    pub fn update_releases(&mut self, now_ms: u64) -> usize {
        let mut newly = 0;
        let start = self.start();
        for i in 0..self.cursors.len() {
            let c = &self.cursors[i];
            if !c.config.required || c.detached {
                continue;
            }
            let lag = c.config.max_lag;
            if lag.bytes.is_none() && lag.age.is_none() {
                continue;
            }
            let over_bytes = lag.bytes.is_some_and(|b| self.lag_bytes(c.committed) > b);
            let over_age = lag
                .age
                .is_some_and(|a| u128::from(self.lag_age_ms(c.committed, now_ms)) > a.as_millis());
            let over = over_bytes || over_age;
            let c = &mut self.cursors[i];
            if over && !c.released {
                c.released = true;
                c.releases += 1;
                newly += 1;
            } else if !over && c.released && c.committed >= start {
                c.released = false;
            }
        }
        newly
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(on_full: OnFull) -> Core {
        let mut c = Core {
            fs_room: u64::MAX,
            fs_full_events: 0,
            resource_refusals: 0,
            segments: VecDeque::new(),
            holes: Vec::new(),
            damaged: Vec::new(),
            damaged_records: 0,
            durable_end: 0,
            disk_bytes: 0,
            max_disk: 1000,
            segment_bytes: 300,
            on_full,
            cursors: vec![CursorState::new("a".into(), CursorConfig::default(), 0)],
            retained_segments_deleted: 0,
            evicted_segments: 0,
            evicted_records: 0,
        };
        c.push_segment(0, 0);
        c
    }

    fn fill(c: &mut Core, batches: usize) {
        for _ in 0..batches {
            match c.plan_append(200) {
                Plan::Write { rotate } => {
                    if rotate {
                        let end = c.written_end();
                        c.push_segment(end, 0);
                    }
                    c.record_write(2, 200, 0);
                    c.durable_end = c.written_end();
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn each_policy_answers_a_full_budget() {
        for (policy, expected) in [
            (OnFull::Reject, Plan::Reject { needed: 240 }),
            (OnFull::Block, Plan::Wait),
            (OnFull::DropOldest, Plan::Evict { segments: 1 }),
        ] {
            let mut c = core(policy);
            fill(&mut c, 4);
            assert_eq!(c.disk_bytes, 4 * 240);
            assert_eq!(c.plan_append(200), expected, "{policy:?}");
        }
    }

    /// With the budget far from full but the filesystem's room spent, every policy
    /// answers as at a full budget, and the shortage is the filesystem's; eviction and
    /// retention give the room back.
    #[test]
    fn a_full_filesystem_is_a_budget_too() {
        for (policy, expected) in [
            (OnFull::Reject, Plan::Reject { needed: 240 }),
            (OnFull::Block, Plan::Wait),
            (OnFull::DropOldest, Plan::Evict { segments: 1 }),
        ] {
            let mut c = core(policy);
            c.max_disk = 1 << 30;
            fill(&mut c, 3);
            c.fs_room = 100;
            assert_eq!(c.plan_append(200), expected, "{policy:?}");
            assert!(c.fs_is_short(240), "the filesystem, not max_disk, is short");
            c.max_disk = c.disk_bytes + 100;
            assert!(
                !c.fs_is_short(240),
                "both short: the budget is what applies"
            );
            c.max_disk = 1 << 30;
            c.pop_front(1, true);
            assert_eq!(
                c.fs_room,
                100 + 240,
                "deleting a segment gives its bytes back"
            );
            assert_eq!(c.plan_append(200), Plan::Write { rotate: true });
            c.record_write(2, 200, 0);
            assert_eq!(c.fs_room, 140, "writing takes room");
        }
    }

    #[test]
    fn capacity_is_the_budget_or_what_the_filesystem_leaves_if_less() {
        let mut c = core(OnFull::Block);
        c.max_disk = 1 << 30;
        assert_eq!(c.capacity(), 1 << 30, "no reading of the filesystem yet");
        fill(&mut c, 3);
        c.fs_room = 16 << 20;
        assert_eq!(c.capacity(), c.disk_bytes + (16 << 20));
        c.max_disk = 1 << 20;
        assert_eq!(c.capacity(), 1 << 20);
    }

    #[test]
    fn committed_segments_are_released_first() {
        let mut c = core(OnFull::Reject);
        fill(&mut c, 4);
        c.cursors[0].committed = 4;
        assert_eq!(c.eager_retention(), 2);
        assert_eq!(c.plan_append(200), Plan::Retain { segments: 2 });
        assert_eq!(c.pop_front(2, false), vec![0, 2]);
        assert_eq!(c.locate(1), Locate::Evicted { to: 4 });
        assert_eq!(c.plan_append(200), Plan::Write { rotate: true });
    }

    #[test]
    fn max_lag_by_age_uses_append_times() {
        let mut c = core(OnFull::Block);
        c.cursors[0].config.max_lag.age = Some(std::time::Duration::from_secs(10));
        for t in [1_000, 5_000] {
            c.record_write(1, 100, t);
        }
        c.durable_end = c.written_end();
        assert_eq!(c.lag_age_ms(0, 12_000), 11_000);
        assert_eq!(c.lag_age_ms(1, 12_000), 7_000);
        assert_eq!(c.update_releases(10_999), 0, "9.999 s old: within");
        assert_eq!(c.update_releases(11_001), 1, "10.001 s old: released");
        c.cursors[0].committed = 1;
        assert_eq!(c.update_releases(11_001), 0);
        assert!(!c.cursors[0].released, "caught up: back in retention");
    }

    #[test]
    fn max_lag_releases_and_takes_back() {
        let mut c = core(OnFull::Block);
        c.cursors[0].config.max_lag.bytes = Some(300);
        fill(&mut c, 2);
        assert_eq!(c.update_releases(0), 1);
        assert!(c.cursors[0].released);
        c.cursors[0].committed = 2;
        assert_eq!(c.lag_bytes(2), 200);
        assert_eq!(c.update_releases(0), 0);
        assert!(!c.cursors[0].released);
    }
}
