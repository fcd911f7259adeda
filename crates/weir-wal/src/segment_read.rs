//! The blocking half of a [`Reader`](crate::Reader)'s read: locating the cursor's
//! position, opening a segment there, reading and CRC-checking frames up to the durable
//! end, and turning evicted, quarantined or damaged ranges into gaps.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use crate::chunk_frames::{ChunkFrames, ChunkPool};
use crate::core::Locate;
use crate::error::ReadError;
use crate::format::{BatchEnd, FrameError, SEGMENT_HEADER_LEN, TIME_SLACK_MS, find_resync};
use crate::read_batch::{Gap, ReadBatch, ReadLimits, Record};
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
    // The segment whose file was missing at the last attempt to open it.
    let mut missing: Option<u64> = None;
    if let Some(o) = open.as_mut() {
        o.frames.begin_batch();
    }
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
                // Deleted meanwhile: the writer takes a segment out of the log before it
                // removes the file, so locating again finds where the records went.
                Ok(None) if missing != Some(first) => {
                    missing = Some(first);
                    continue;
                }
                Ok(None) => {
                    // Still in the log, and its file is gone: removed behind the log's
                    // back, or by another process once this log was closed. An error,
                    // not a retry: retrying would spin forever.
                    return Err(ReadError::Io {
                        path: segment_path(&shared.dir, first),
                        source: std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "the segment file is missing while the log still holds it",
                        ),
                    });
                }
                Err(OpenAtError::Io(path, source)) => return Err(ReadError::Io { path, source }),
                Err(OpenAtError::Lost { resumed }) => {
                    // The cursor's position is inside a damaged range whose end is known.
                    if !batch.records.is_empty() || batch.gap.is_some() {
                        break;
                    }
                    let to = resumed.next;
                    resynced_gap(shared, next, to, &mut batch);
                    next = to;
                    *open = Some(*resumed);
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
        // reserves a few), up to 4096 at first (196 KiB): `max_bytes` may stop the
        // batch earlier, and growing it from less copies it on the replay's hot path.
        let wanted = limits.max_records.max(1) - batch.records.len();
        let here = usize::try_from(first + readable - o.next.min(first + readable));
        batch
            .records
            .reserve(wanted.min(here.unwrap_or(usize::MAX)).min(4096));
        while o.next < first + readable {
            if batch.records.len() >= limits.max_records.max(1)
                || (!batch.records.is_empty() && bytes >= limits.max_bytes)
            {
                break 'outer;
            }
            let room = (limits.max_records.max(1) - batch.records.len())
                .min(usize::try_from(first + readable - o.next).unwrap_or(usize::MAX));
            let taken = o.frames.whole_frames(
                &mut batch.records,
                &mut o.next,
                room,
                &mut bytes,
                limits.max_bytes,
            );
            if taken > 0 {
                next = o.next;
                continue;
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
                    let in_batch = o.frames.batch();
                    *open = None;
                    if !batch.records.is_empty() || batch.gap.is_some() {
                        break 'outer; // the next read starts at the damage
                    }
                    match resync(shared, first, damaged, at, in_batch, pool) {
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
    batch.bytes = bytes;
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
        resumed: Box<OpenSegment>,
    },
}

/// After damage at record `damaged`, whose frame (or batch mark) starts at body byte
/// `at` of the segment starting at `first`: finds where reading can resume with every
/// offset known ([`find_resync`]). `batch` is the batch the damage is in, when its mark
/// was read. With batch marks (format version 2) this works in the active segment too;
/// in a version-1 segment only a sealed one's end places the records after damage.
///
/// Reads the remainder of the segment into memory (at most `segment_bytes`), which only
/// damage costs. `None` when nothing after the damage can be placed: then the rest of a
/// sealed segment is lost, and the reader of the active one stops at the damage.
fn resync(
    shared: &Shared,
    first: u64,
    damaged: u64,
    at: u64,
    batch: Option<BatchEnd>,
    pool: &ChunkPool,
) -> std::io::Result<Option<OpenSegment>> {
    // A sealed segment's end is the next one's first offset; the active one's end is not
    // known, and only what is durable may be placed.
    let (file_end, durable, lo, hi) = {
        let core = shared.core();
        let mut segs = core.segments.iter().skip_while(|s| s.first != first);
        let Some(seg) = segs.next() else {
            return Ok(None); // gone
        };
        let lo = seg.created_ms.saturating_sub(TIME_SLACK_MS);
        match segs.next() {
            Some(next_seg) => (
                Some(seg.end()),
                seg.end(),
                lo,
                next_seg.created_ms.saturating_add(TIME_SLACK_MS),
            ),
            None => (
                None,
                core.durable_end,
                lo,
                crate::clock::now_ms().saturating_add(TIME_SLACK_MS),
            ),
        }
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
    let batch = batch.filter(|b| b.pos >= at).map(|b| BatchEnd {
        pos: b.pos - at,
        offset: b.offset,
    });
    let Some((skip, resumed)) = find_resync(&rest, damaged, batch, file_end, lo, hi) else {
        return Ok(None);
    };
    if resumed > durable {
        return Ok(None); // not durable yet: placed by a later read
    }
    let resume_at = body_start + skip as u64;
    if resumed == damaged {
        tracing::warn!(
            segment = %path.display(),
            offset = damaged,
            "damaged WAL batch mark at byte {body_start}, before offset {damaged}: no record \
             is lost (the record count places the frames after it)"
        );
    } else {
        tracing::error!(
            segment = %path.display(),
            from = damaged,
            to = resumed,
            records = resumed - damaged,
            "damaged WAL records skipped: {} records ({damaged}..{resumed}) are lost; \
             reading resumes at offset {resumed} (byte {resume_at})",
            resumed - damaged
        );
    }
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(resume_at))?;
    let frames = ChunkFrames::new(
        file,
        resume_at - SEGMENT_HEADER_LEN,
        len.saturating_sub(resume_at),
        pool.clone(),
        resumed,
    );
    Ok(Some(OpenSegment {
        first,
        next: resumed,
        path,
        frames,
    }))
}

/// Counts a damaged range `[from, to)` the reader stepped over.
fn resynced_gap(shared: &Shared, from: u64, to: u64, batch: &mut ReadBatch) {
    let records = to - from;
    if records == 0 {
        return; // only a batch mark was damaged
    }
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
        first,
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
                | FrameError::Misplaced { .. }
                | FrameError::Zeroed,
            ) => {
                let at = o.frames.position();
                let in_batch = o.frames.batch();
                match resync(shared, first, o.next, at, in_batch, pool) {
                    Ok(Some(resumed)) if resumed.next <= next => o = resumed,
                    Ok(Some(resumed)) => {
                        return Err(OpenAtError::Lost {
                            resumed: Box::new(resumed),
                        });
                    }
                    Ok(None) => return Err(OpenAtError::Damaged),
                    Err(e) => return Err(OpenAtError::Io(o.path, e)),
                }
            }
            Err(FrameError::Io(e)) => return Err(OpenAtError::Io(o.path, e)),
        }
    }
    Ok(Some(o))
}
