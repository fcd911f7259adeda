//! Opening a WAL directory: lock, list, check, truncate a torn tail, quarantine damaged
//! segments, load cursors.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::path::Path;

use crate::config::{CursorConfig, RecoveryScan, StartFrom, WalConfig};
use crate::core::{Core, CursorState, Hole, SegMeta};
use crate::error::OpenError;
use crate::format::{
    FORMAT_VERSION, HeaderError, SEGMENT_HEADER_LEN, SegmentHeader, decode_cursor,
    parse_segment_file_name,
};
use crate::open_report::{OpenReport, QuarantinedSegment, warn_quarantined};
use crate::segment::{
    create_segment, quarantine, read_header, scan_segment, segment_path, sync_dir,
    unfinished_header,
};
use crate::time_index::TimeIndex;

/// The directory opened and checked, ready for the writer.
pub(crate) struct Opened {
    pub core: Core,
    pub active: File,
    pub lock: File,
}

const LOCK_FILE: &str = "LOCK";
pub(crate) const CURSOR_DIR: &str = "cursors";

pub(crate) fn lock_dir(dir: &Path) -> Result<File, OpenError> {
    let path = dir.join(LOCK_FILE);
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| OpenError::io("creating lock file", &path, e))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(fs::TryLockError::WouldBlock) => Err(OpenError::Locked { path }),
        Err(fs::TryLockError::Error(e)) => Err(OpenError::io("locking", &path, e)),
    }
}

/// First offsets of the segment files in `dir`, sorted.
pub(crate) fn list_segments(dir: &Path) -> Result<Vec<u64>, OpenError> {
    let mut firsts = Vec::new();
    if !dir.exists() {
        return Ok(firsts);
    }
    let entries = fs::read_dir(dir).map_err(|e| OpenError::io("listing", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| OpenError::io("listing", dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let base = match name.find(".seg") {
            Some(i) => &name[..i + 4],
            None => continue,
        };
        if let Some(first) = parse_segment_file_name(base) {
            firsts.push(first);
        }
    }
    firsts.sort_unstable();
    firsts.dedup();
    Ok(firsts)
}

pub(crate) fn open_dir(config: &WalConfig, now_ms: u64) -> Result<(Opened, OpenReport), OpenError> {
    let dir = &config.dir;
    fs::create_dir_all(dir.join(CURSOR_DIR)).map_err(|e| OpenError::io("creating", dir, e))?;
    let lock = lock_dir(dir)?;
    let mut report = OpenReport::default();
    let mut firsts = list_segments(dir)?;
    // The most bytes a segment holds: rotation happens before a batch that would pass
    // segment_bytes, so only a first batch larger than that makes one bigger.
    let segment_cap = config
        .segment_bytes
        .max(SEGMENT_HEADER_LEN + config.max_batch_bytes());
    let mut holes: Vec<Hole> =
        crate::strays::set_aside_strays(dir, &mut firsts, &mut report, segment_cap)?;
    let quarantined_firsts = list_segments(&dir.join("quarantine"))?;

    // The tail: scan the last segment; drop or quarantine it while it is unusable.
    let mut tail: Option<(u64, crate::segment::Scan)> = None;
    while let Some(&last) = firsts.last() {
        let path = segment_path(dir, last);
        let scan = scan_segment(&path).map_err(|e| OpenError::io("scanning", &path, e))?;
        match &scan.header {
            Err(source @ HeaderError::Version { .. }) => {
                return Err(OpenError::UnsupportedVersion {
                    path,
                    source: *source,
                });
            }
            Ok(h) if h.first_offset == last => {
                tail = Some((last, scan));
                break;
            }
            header => {
                let reason = match header {
                    Ok(h) => format!(
                        "header says first offset {}, name says {last}",
                        h.first_offset
                    ),
                    Err(e) => e.to_string(),
                };
                if scan.file_len <= SEGMENT_HEADER_LEN || unfinished_header(&path) {
                    fs::remove_file(&path).map_err(|e| OpenError::io("removing", &path, e))?;
                    sync_dir(dir).map_err(|e| OpenError::io("syncing", dir, e))?;
                    report.removed_unfinished_segments += 1;
                } else {
                    let count = count_frames_after_header(&path);
                    let q = quarantine(dir, &path)
                        .map_err(|e| OpenError::io("quarantining", &path, e))?;
                    holes.push(Hole {
                        from: last,
                        to: last + count,
                    });
                    let q = QuarantinedSegment {
                        path: q,
                        from: last,
                        to: last + count,
                        reason,
                    };
                    warn_quarantined(&path, &q);
                    report.quarantined.push(q);
                }
                firsts.pop();
            }
        }
    }

    // The tail's end bounds everything; a fresh directory starts at the end of what the
    // quarantine holds, or 0.
    let mut segments = VecDeque::new();
    let mut disk_bytes = 0;
    let tail_end = tail.as_ref().map(|(first, scan)| first + scan.records);
    let mut boundaries: Vec<u64> = firsts.iter().chain(&quarantined_firsts).copied().collect();
    boundaries.extend(holes.iter().map(|h| h.from));
    boundaries.sort_unstable();
    boundaries.dedup();

    // Sealed segments: check headers (or everything with RecoveryScan::Full).
    let sealed = firsts.len().saturating_sub(1);
    for (i, &first) in firsts.iter().take(sealed).enumerate() {
        let path = segment_path(dir, first);
        let next = boundaries
            .iter()
            .copied()
            .find(|&b| b > first)
            .or(tail_end)
            .unwrap_or(first);
        let _ = i;
        let problem = check_sealed(&path, first, config.recovery)?;
        match problem {
            None => {
                let len = fs::metadata(&path)
                    .map_err(|e| OpenError::io("reading metadata of", &path, e))?
                    .len();
                let created = created_ms(&path).unwrap_or(0);
                disk_bytes += len;
                segments.push_back(SegMeta {
                    first,
                    count: next - first,
                    bytes: len,
                    created_ms: created,
                    times: TimeIndex::new(false),
                });
            }
            Some(reason) => {
                let q =
                    quarantine(dir, &path).map_err(|e| OpenError::io("quarantining", &path, e))?;
                holes.push(Hole {
                    from: first,
                    to: next,
                });
                let q = QuarantinedSegment {
                    path: q,
                    from: first,
                    to: next,
                    reason,
                };
                warn_quarantined(&path, &q);
                report.quarantined.push(q);
            }
        }
    }

    // The active segment: truncate its tail, or create one.
    let active = match tail {
        Some((first, scan)) => {
            let path = segment_path(dir, first);
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| OpenError::io("opening", &path, e))?;
            if let Some((count, len)) = scan.valid_after_damage {
                // Damage inside the segment, acknowledged records after it: keep them
                // (only bytes after the last valid frame go), seal the segment at its
                // full count so offsets do not shift, and go on in a fresh one. Readers
                // step over the damaged records as in any sealed segment, and count them.
                let damaged = first + scan.records;
                report.truncated_bytes = scan.file_len - len;
                tracing::error!(
                    segment = %path.display(),
                    offset = damaged,
                    problem = ?scan.problem,
                    "damaged record at offset {damaged} of the last WAL segment {}: \
                     records {damaged}..{} are kept and the segment is sealed there, so \
                     no offset shifts; readers skip and count the damaged ones among them",
                    path.display(),
                    first + count
                );
                if len < scan.file_len {
                    file.set_len(len)
                        .map_err(|e| OpenError::io("truncating", &path, e))?;
                }
                file.sync_all()
                    .map_err(|e| OpenError::io("syncing", &path, e))?;
                disk_bytes += len;
                let created = scan.header.as_ref().map_or(0, |h| h.created_ms);
                segments.push_back(SegMeta {
                    first,
                    count,
                    bytes: len,
                    created_ms: created,
                    times: scan.times,
                });
                disk_bytes += SEGMENT_HEADER_LEN;
                segments.push_back(SegMeta::new(first + count, now_ms));
                create_segment(dir, first + count, now_ms)
                    .map_err(|e| OpenError::io("creating segment in", dir, e))?
            } else {
                if scan.good_len < scan.file_len {
                    report.truncated_bytes = scan.file_len - scan.good_len;
                    report.truncated_records = scan.cut_records;
                    tracing::warn!(
                        segment = %path.display(),
                        bytes = report.truncated_bytes,
                        records = report.truncated_records,
                        problem = ?scan.problem,
                        "truncating a torn or corrupt WAL tail"
                    );
                    file.set_len(scan.good_len)
                        .map_err(|e| OpenError::io("truncating", &path, e))?;
                }
                // The writer appends from the end of the good records.
                use std::io::Seek;
                (&file)
                    .seek(std::io::SeekFrom::Start(scan.good_len))
                    .map_err(|e| OpenError::io("seeking in", &path, e))?;
                // Whatever survived the crash in the page cache becomes durable now.
                file.sync_all()
                    .map_err(|e| OpenError::io("syncing", &path, e))?;
                disk_bytes += scan.good_len;
                let (created, version) = scan
                    .header
                    .as_ref()
                    .map_or((0, FORMAT_VERSION), |h| (h.created_ms, h.version));
                segments.push_back(SegMeta {
                    first,
                    count: scan.records,
                    bytes: scan.good_len,
                    created_ms: created,
                    times: scan.times,
                });
                if version == FORMAT_VERSION {
                    file
                } else {
                    if scan.records > 0 {
                        disk_bytes += SEGMENT_HEADER_LEN; // the segment that follows it
                    }
                    upgrade_active(dir, &path, file, first, scan.records, now_ms, &mut segments)
                        .map_err(|e| OpenError::io("upgrading segment", &path, e))?
                }
            }
        }
        None => {
            let first = holes.iter().map(|h| h.to).max().unwrap_or(0);
            let file = create_segment(dir, first, now_ms)
                .map_err(|e| OpenError::io("creating segment in", dir, e))?;
            disk_bytes += SEGMENT_HEADER_LEN;
            segments.push_back(SegMeta::new(first, now_ms));
            file
        }
    };
    // A quarantined tail left offsets beyond the active segment's end: new records must
    // not reuse them, so the log continues in a fresh segment after the hole.
    let mut active = active;
    let hole_end = holes.iter().map(|h| h.to).max().unwrap_or(0);
    if segments.back().is_some_and(|s| s.end() < hole_end) {
        active = create_segment(dir, hole_end, now_ms)
            .map_err(|e| OpenError::io("creating segment in", dir, e))?;
        disk_bytes += SEGMENT_HEADER_LEN;
        segments.push_back(SegMeta::new(hole_end, now_ms));
    }
    holes.sort_by_key(|h| h.from);
    let durable_end = segments.back().map_or(0, SegMeta::end);
    let start = segments.front().map_or(durable_end, |s| s.first);

    let mut cursors = Vec::with_capacity(config.cursors.len());
    for (name, cfg) in &config.cursors {
        let (committed, note) = load_cursor(dir, name, cfg, start, durable_end)?;
        match note {
            Some(CursorNote::Clamped) => report.cursors_clamped.push(name.clone()),
            Some(CursorNote::Reset) => report.cursors_reset.push(name.clone()),
            None => {}
        }
        cursors.push(CursorState::new(name.clone(), *cfg, committed));
    }

    report.segments = segments.len();
    report.start = start;
    report.durable_end = durable_end;
    let core = Core {
        fs_room: u64::MAX,
        fs_full_events: 0,
        resource_refusals: 0,
        segments,
        holes,
        damaged: Vec::new(),
        damaged_records: 0,
        durable_end,
        disk_bytes,
        max_disk: config.max_disk,
        segment_bytes: config.segment_bytes,
        on_full: config.on_full,
        cursors,
        retained_segments_deleted: 0,
        evicted_segments: 0,
        evicted_records: 0,
    };
    Ok((Opened { core, active, lock }, report))
}

/// The active segment was written by an older release (format version 1, without batch
/// marks): new batches must not go into it, or that release would read their marks as
/// damage. With records, it is sealed where it ends and a version-2 segment follows it;
/// with none, its header is rewritten in place (one 40-byte write, then fsync).
fn upgrade_active(
    dir: &Path,
    path: &Path,
    file: File,
    first: u64,
    records: u64,
    now_ms: u64,
    segments: &mut VecDeque<SegMeta>,
) -> std::io::Result<File> {
    if records == 0 {
        use std::os::unix::fs::FileExt;
        let header = SegmentHeader {
            first_offset: first,
            created_ms: now_ms,
            version: FORMAT_VERSION,
        };
        file.write_all_at(&header.encode(), 0)?;
        file.sync_data()?;
        if let Some(active) = segments.back_mut() {
            active.created_ms = now_ms;
        }
        tracing::info!(
            segment = %path.display(),
            "WAL segment {} is empty and of format version 1: rewritten as version {FORMAT_VERSION}",
            path.display()
        );
        return Ok(file);
    }
    let end = first + records;
    tracing::info!(
        segment = %path.display(),
        "WAL segment {} is of format version 1: sealed at offset {end}; new records go to a \
         version-{FORMAT_VERSION} segment",
        path.display()
    );
    segments.push_back(SegMeta::new(end, now_ms));
    create_segment(dir, end, now_ms)
}

/// A sealed segment's problem, if any.
fn check_sealed(path: &Path, first: u64, scan: RecoveryScan) -> Result<Option<String>, OpenError> {
    if scan == RecoveryScan::Full {
        let s = scan_segment(path).map_err(|e| OpenError::io("scanning", path, e))?;
        return match s.header {
            Err(source @ HeaderError::Version { .. }) => Err(OpenError::UnsupportedVersion {
                path: path.to_owned(),
                source,
            }),
            Err(e) => Ok(Some(e.to_string())),
            Ok(h) if h.first_offset != first => Ok(Some(format!(
                "header says first offset {}, name says {first}",
                h.first_offset
            ))),
            Ok(_) => Ok(s
                .problem
                .map(|p| format!("record {}: {p}", first + s.records))),
        };
    }
    let mut file = File::open(path).map_err(|e| OpenError::io("opening", path, e))?;
    match read_header(&mut file).map_err(|e| OpenError::io("reading", path, e))? {
        Err(source @ HeaderError::Version { .. }) => Err(OpenError::UnsupportedVersion {
            path: path.to_owned(),
            source,
        }),
        Err(e) => Ok(Some(e.to_string())),
        Ok(h) if h.first_offset != first => Ok(Some(format!(
            "header says first offset {}, name says {first}",
            h.first_offset
        ))),
        Ok(_) => Ok(None),
    }
}

fn created_ms(path: &Path) -> Option<u64> {
    let mut file = File::open(path).ok()?;
    read_header(&mut file).ok()?.ok().map(|h| h.created_ms)
}

/// Valid frames after a damaged header, to size the range a quarantined tail held.
fn count_frames_after_header(path: &Path) -> u64 {
    use std::io::{BufReader, Seek, SeekFrom};
    let Ok(mut file) = File::open(path) else {
        return 0;
    };
    let Ok(len) = file.metadata().map(|m| m.len()) else {
        return 0;
    };
    if file.seek(SeekFrom::Start(SEGMENT_HEADER_LEN)).is_err() {
        return 0;
    }
    let mut reader = crate::format::FrameReader::new(
        BufReader::new(file),
        len.saturating_sub(SEGMENT_HEADER_LEN),
    );
    let mut n = 0;
    while let Ok(Some(_)) = reader.next_frame() {
        n += 1;
    }
    n
}

/// What [`load_cursor`] had to correct in a saved cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CursorNote {
    /// Saved past the durable end: moved back to it.
    Clamped,
    /// Unreadable: reset to the earliest record.
    Reset,
}

/// The committed position of cursor `name`: its saved file in `<dir>/cursors/`, or
/// `cfg.start_from` (between `start` and `durable_end`) when it has none. A position
/// past the durable end is clamped, an unreadable file reset to `start`, each logged
/// (WARN) and noted.
pub(crate) fn load_cursor(
    dir: &Path,
    name: &str,
    cfg: &CursorConfig,
    start: u64,
    durable_end: u64,
) -> Result<(u64, Option<CursorNote>), OpenError> {
    let path = dir.join(CURSOR_DIR).join(format!("{name}.cursor"));
    let default = match cfg.start_from {
        StartFrom::Earliest => start,
        StartFrom::Latest => durable_end,
    };
    match fs::read(&path) {
        Ok(bytes) => match decode_cursor(&bytes) {
            Some(offset) if offset > durable_end => {
                tracing::warn!(
                    cursor = %name,
                    file = %path.display(),
                    saved = offset,
                    durable_end,
                    records = offset - durable_end,
                    "WAL cursor {name} was saved at {offset}, past the durable end \
                     {durable_end} (the tail it pointed into was lost): moved back to \
                     {durable_end}"
                );
                Ok((durable_end, Some(CursorNote::Clamped)))
            }
            Some(offset) => Ok((offset, None)),
            None => {
                tracing::warn!(
                    cursor = %name,
                    file = %path.display(),
                    bytes = bytes.len(),
                    restart = start,
                    records = durable_end - start,
                    "WAL cursor {name}: {} is unreadable ({} bytes, not a cursor \
                     record); reset to the earliest record {start}: {} records \
                     ({start}..{durable_end}) will be delivered again",
                    path.display(),
                    bytes.len(),
                    durable_end - start
                );
                Ok((start, Some(CursorNote::Reset)))
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((default, None)),
        Err(e) => Err(OpenError::io("reading cursor", &path, e)),
    }
}
