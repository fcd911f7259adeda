//! The blocking half of a [`Reader`](crate::Reader)'s read: locating the cursor's
//! position, opening a segment there, reading and CRC-checking frames up to the durable
//! end, and turning evicted, quarantined or damaged ranges into gaps.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use crate::chunk_frames::{ChunkFrames, ChunkPool};
use crate::core::Locate;
use crate::error::ReadError;
use crate::format::{FRAME_HEADER_LEN, FrameError, MAX_RECORD_BYTES, SEGMENT_HEADER_LEN};
use crate::reader::{Gap, ReadBatch, ReadLimits, Record};
use crate::segment::segment_path;
use crate::shared::Shared;

/// An open segment positioned at record `next`.
pub(crate) struct OpenSegment {
    first: u64,
    next: u64,
    path: PathBuf,
    frames: ChunkFrames,
}

/// One read under the limits, starting at `next`.
pub(crate) fn read_blocking(
    shared: &Shared,
    mut next: u64,
    open: &mut Option<OpenSegment>,
    limits: ReadLimits,
    pool: &ChunkPool,
) -> Result<ReadBatch, ReadError> {
    let mut batch = ReadBatch::default();
    let mut bytes = 0u64;
    'outer: while batch.records.len() < limits.max_records.max(1) {
        let locate = shared.core().locate(next);
        let (first, readable) = match locate {
            Locate::End => break,
            Locate::Evicted { to } | Locate::Hole { to } => {
                if !batch.records.is_empty() || batch.gap.is_some() {
                    break;
                }
                let records = to - next;
                batch.gap = Some(match locate {
                    Locate::Evicted { .. } => Gap::Evicted {
                        from: next,
                        to,
                        records,
                    },
                    _ => Gap::Quarantined {
                        from: next,
                        to,
                        records,
                    },
                });
                next = to;
                *open = None;
                continue;
            }
            Locate::Segment { first, readable } => (first, readable),
        };
        if open
            .as_ref()
            .is_none_or(|o| o.first != first || o.next != next)
        {
            *open = None;
            match open_at(shared, first, next, pool) {
                Ok(Some(o)) => *open = Some(o),
                Ok(None) => continue, // deleted meanwhile: locate again
                Err(OpenAtError::Io(path, source)) => return Err(ReadError::Io { path, source }),
                Err(OpenAtError::Lost { resumed }) => {
                    // The cursor's position is inside a damaged range whose end is known.
                    if !batch.records.is_empty() || batch.gap.is_some() {
                        break;
                    }
                    let to = resumed.next;
                    resynced_gap(shared, next, to, &mut batch);
                    next = to;
                    *open = Some(resumed);
                    continue;
                }
                Err(OpenAtError::Damaged) => {
                    if corrupt_gap(shared, first, &mut next, &mut batch) {
                        *open = None;
                        continue;
                    }
                    break;
                }
            }
        }
        let Some(o) = open.as_mut() else { break };
        // Every readable record was written before `locate` saw it durable, so the file
        // length now covers them all.
        refresh_remaining(o);
        // Room for what this segment can give (a follower's read of a few records
        // reserves a few), up to 1024 at first: `max_bytes` may stop the batch earlier.
        let wanted = limits.max_records.max(1) - batch.records.len();
        let here = usize::try_from(first + readable - o.next.min(first + readable));
        batch
            .records
            .reserve(wanted.min(here.unwrap_or(usize::MAX)).min(1024));
        while o.next < first + readable {
            if batch.records.len() >= limits.max_records.max(1)
                || (!batch.records.is_empty() && bytes >= limits.max_bytes)
            {
                break 'outer;
            }
            match o.frames.next_frame() {
                Ok(Some((meta, payload))) => {
                    bytes += payload.len() as u64;
                    batch.records.push(Record {
                        offset: o.next,
                        time_ms: meta.time_ms,
                        payload,
                    });
                    o.next += 1;
                    next = o.next;
                }
                Ok(None) | Err(_) => {
                    let damaged = o.next;
                    let at = o.frames.position();
                    *open = None;
                    if !batch.records.is_empty() || batch.gap.is_some() {
                        break 'outer; // the next read starts at the damage
                    }
                    match resync(shared, first, damaged, at, pool) {
                        Ok(Some(resumed)) => {
                            let to = resumed.next;
                            resynced_gap(shared, damaged, to, &mut batch);
                            next = to;
                            *open = Some(resumed);
                            continue 'outer;
                        }
                        Ok(None) => {}
                        Err(source) => {
                            return Err(ReadError::Io {
                                path: segment_path(&shared.dir, first),
                                source,
                            });
                        }
                    }
                    if corrupt_gap(shared, first, &mut next, &mut batch) {
                        continue 'outer;
                    }
                    break 'outer;
                }
            }
        }
    }
    batch.next = next;
    Ok(batch)
}

/// Damage at `next` in the segment starting at `first`: if the segment is sealed and no
/// records are in hand, skip to its end as a [`Gap::Corrupt`]. False: stop reading here.
fn corrupt_gap(shared: &Shared, first: u64, next: &mut u64, batch: &mut ReadBatch) -> bool {
    if !batch.records.is_empty() || batch.gap.is_some() {
        return false;
    }
    let end = {
        let core = shared.core();
        let sealed =
            core.segments.len() > 1 && core.segments.iter().rev().skip(1).any(|s| s.first == first);
        if !sealed {
            tracing::error!(offset = *next, "damaged record in the active WAL segment");
            return false;
        }
        core.segments
            .iter()
            .find(|s| s.first == first)
            .map(|s| s.end())
    };
    let Some(to) = end else { return false };
    let records = to - *next;
    tracing::error!(from = *next, to, "damaged WAL records skipped");
    batch.gap = Some(Gap::Corrupt {
        from: *next,
        to,
        records,
    });
    shared.core().note_damage(*next, to);
    *next = to;
    true
}

/// Counts a gap in the cursor's figures: once per gap the caller is given (a batch
/// read ahead and then discarded, and read again, must not count its gap twice).
pub(crate) fn note_gap(shared: &Shared, index: usize, records: u64) {
    let mut core = shared.core();
    let c = &mut core.cursors[index];
    c.gaps += 1;
    c.gap_records += records;
}

fn refresh_remaining(o: &mut OpenSegment) {
    if let Ok(meta) = o.frames.file.metadata() {
        o.frames
            .set_body_len(meta.len().saturating_sub(SEGMENT_HEADER_LEN));
    }
}

enum OpenAtError {
    Io(PathBuf, std::io::Error),
    /// Damage before the position, and no provable place to resume after it.
    Damaged,
    /// The position lies in a damaged range; reading resumes with `resumed`.
    Lost {
        resumed: OpenSegment,
    },
}

/// Slack around a segment's lifetime for the append times of its records (clock steps).
const TIME_SLACK_MS: u64 = 24 * 3600 * 1000;

/// After damage at record `damaged`, whose frame starts at body byte `at` of the sealed
/// segment starting at `first`: finds where reading can resume with every offset known.
///
/// The segment's records end at the next segment's first offset `end`, so frames that
/// parse cleanly, CRC by CRC, from some byte after the damage exactly to the end of the
/// file are the last `k` records: offsets `end - k ..`. The first such position is
/// searched byte by byte, a candidate frame's append time first checked against the
/// segment's lifetime (so random bytes are rarely CRC-checked). Only `[damaged, end - k)`
/// is lost, and offsets after the damage never shift. `None` when nothing after the
/// damage can be placed that way, or the segment is the active one (its end is not
/// known): then the rest of the segment is lost, as before. Reads the remainder of the
/// segment into memory (at most `segment_bytes`), which only damage costs.
fn resync(
    shared: &Shared,
    first: u64,
    damaged: u64,
    at: u64,
    pool: &ChunkPool,
) -> std::io::Result<Option<OpenSegment>> {
    let (end, lo, hi) = {
        let core = shared.core();
        let mut segs = core.segments.iter().skip_while(|s| s.first != first);
        let (Some(seg), Some(next_seg)) = (segs.next(), segs.next()) else {
            return Ok(None); // the active segment, or gone
        };
        (
            seg.end(),
            seg.created_ms.saturating_sub(TIME_SLACK_MS),
            next_seg.created_ms.saturating_add(TIME_SLACK_MS),
        )
    };
    let path = segment_path(&shared.dir, first);
    let mut file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let body_start = SEGMENT_HEADER_LEN + at;
    file.seek(SeekFrom::Start(body_start))?;
    let mut rest = Vec::new();
    file.read_to_end(&mut rest)?;
    let Some(found) = find_resync(&rest, end.saturating_sub(damaged + 1), lo, hi) else {
        return Ok(None);
    };
    let (skip, k) = found;
    let resume_at = body_start + skip as u64;
    let resumed = end - k;
    tracing::error!(
        segment = %path.display(),
        from = damaged,
        to = resumed,
        records = resumed - damaged,
        "damaged WAL records skipped; reading resumes at offset {resumed} (byte {resume_at}), \
         the {k} records after the damage parse to the segment's end"
    );
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(resume_at))?;
    let frames = ChunkFrames::new(
        file,
        resume_at - SEGMENT_HEADER_LEN,
        len.saturating_sub(resume_at),
        pool.clone(),
    );
    Ok(Some(OpenSegment {
        first,
        next: resumed,
        path,
        frames,
    }))
}

/// In `rest` (the bytes from a damaged frame to the end of its segment): the first
/// position after 0 from which frames parse cleanly to the very end, and how many there
/// are (at most `max_records`); append times within `[lo, hi]`.
fn find_resync(rest: &[u8], max_records: u64, lo: u64, hi: u64) -> Option<(usize, u64)> {
    let header = FRAME_HEADER_LEN as usize;
    let plausible = |p: usize| -> Option<usize> {
        let h = rest.get(p..p + header)?;
        let time = u64::from_le_bytes(h[8..16].try_into().ok()?);
        if time < lo || time > hi {
            return None;
        }
        let len = u32::from_le_bytes(h[0..4].try_into().ok()?);
        if len > MAX_RECORD_BYTES {
            return None;
        }
        let frame = header + len as usize;
        let bytes = rest.get(p..p + frame)?;
        let stored = u32::from_le_bytes(h[4..8].try_into().ok()?);
        let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[0..4]), &bytes[8..]);
        (crc == stored).then_some(frame)
    };
    'candidates: for start in 1..rest.len() {
        let mut p = start;
        let mut k = 0u64;
        while p < rest.len() {
            let Some(frame) = plausible(p) else {
                continue 'candidates;
            };
            p += frame;
            k += 1;
            if k > max_records {
                continue 'candidates;
            }
        }
        return Some((start, k));
    }
    None
}

/// Counts a damaged range `[from, to)` the reader stepped over.
fn resynced_gap(shared: &Shared, from: u64, to: u64, batch: &mut ReadBatch) {
    let records = to - from;
    batch.gap = Some(Gap::Corrupt { from, to, records });
    shared.core().note_damage(from, to);
}

/// Opens the segment starting at `first`, positioned at record `next`.
fn open_at(
    shared: &Shared,
    first: u64,
    next: u64,
    pool: &ChunkPool,
) -> Result<Option<OpenSegment>, OpenAtError> {
    let path = segment_path(&shared.dir, first);
    let mut file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(OpenAtError::Io(path, e)),
    };
    let len = file
        .metadata()
        .map_err(|e| OpenAtError::Io(path.clone(), e))?
        .len();
    file.seek(SeekFrom::Start(SEGMENT_HEADER_LEN))
        .map_err(|e| OpenAtError::Io(path.clone(), e))?;
    let frames = ChunkFrames::new(
        file,
        0,
        len.saturating_sub(SEGMENT_HEADER_LEN),
        pool.clone(),
    );
    let mut o = OpenSegment {
        first,
        next: first,
        path,
        frames,
    };
    while o.next < next {
        match o.frames.next_frame() {
            Ok(Some(_)) => o.next += 1,
            Ok(None)
            | Err(
                FrameError::Torn { .. }
                | FrameError::Crc { .. }
                | FrameError::TooLong { .. }
                | FrameError::Zeroed,
            ) => {
                let at = o.frames.position();
                match resync(shared, first, o.next, at, pool) {
                    Ok(Some(resumed)) if resumed.next <= next => o = resumed,
                    Ok(Some(resumed)) => return Err(OpenAtError::Lost { resumed }),
                    Ok(None) => return Err(OpenAtError::Damaged),
                    Err(e) => return Err(OpenAtError::Io(o.path, e)),
                }
            }
            Err(FrameError::Io(e)) => return Err(OpenAtError::Io(o.path, e)),
        }
    }
    Ok(Some(o))
}
