//! The blocking half of a [`Reader`](crate::Reader)'s read: locating the cursor's
//! position, opening a segment there, reading and CRC-checking frames up to the durable
//! end, and turning evicted, quarantined or damaged ranges into gaps.

use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::PathBuf;

use crate::core::Locate;
use crate::error::ReadError;
use crate::format::{FrameError, FrameReader, SEGMENT_HEADER_LEN};
use crate::reader::{Gap, ReadBatch, ReadLimits, Record};
use crate::segment::{READ_BUFFER, segment_path};
use crate::shared::Shared;

/// An open segment positioned at record `next`.
pub(crate) struct OpenSegment {
    first: u64,
    next: u64,
    path: PathBuf,
    frames: FrameReader<BufReader<File>>,
    consumed: u64,
}

/// One read under the limits, starting at `next`.
pub(crate) fn read_blocking(
    shared: &Shared,
    index: usize,
    mut next: u64,
    open: &mut Option<OpenSegment>,
    limits: ReadLimits,
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
                note_gap(shared, index, records);
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
            match open_at(shared, first, next) {
                Ok(Some(o)) => *open = Some(o),
                Ok(None) => continue, // deleted meanwhile: locate again
                Err(OpenAtError::Io(path, source)) => return Err(ReadError::Io { path, source }),
                Err(OpenAtError::Damaged) => {
                    if corrupt_gap(shared, index, first, &mut next, &mut batch) {
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
        while o.next < first + readable {
            if batch.records.len() >= limits.max_records.max(1)
                || (!batch.records.is_empty() && bytes >= limits.max_bytes)
            {
                break 'outer;
            }
            match o.frames.next_frame() {
                Ok(Some(meta)) => {
                    o.consumed += meta.frame_len;
                    let payload = o.frames.take_payload();
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
                    *open = None;
                    if corrupt_gap(shared, index, first, &mut next, &mut batch) {
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
fn corrupt_gap(
    shared: &Shared,
    index: usize,
    first: u64,
    next: &mut u64,
    batch: &mut ReadBatch,
) -> bool {
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
    note_gap(shared, index, records);
    *next = to;
    true
}

fn note_gap(shared: &Shared, index: usize, records: u64) {
    let mut core = shared.core();
    let c = &mut core.cursors[index];
    c.gaps += 1;
    c.gap_records += records;
}

fn refresh_remaining(o: &mut OpenSegment) {
    if let Ok(meta) = std::fs::metadata(&o.path) {
        let body = meta.len().saturating_sub(SEGMENT_HEADER_LEN);
        o.frames.set_remaining(body.saturating_sub(o.consumed));
    }
}

enum OpenAtError {
    Io(PathBuf, std::io::Error),
    Damaged,
}

/// Opens the segment starting at `first`, positioned at record `next`.
fn open_at(shared: &Shared, first: u64, next: u64) -> Result<Option<OpenSegment>, OpenAtError> {
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
    let frames = FrameReader::new(
        BufReader::with_capacity(READ_BUFFER, file),
        len.saturating_sub(SEGMENT_HEADER_LEN),
    );
    let mut o = OpenSegment {
        first,
        next: first,
        path,
        frames,
        consumed: 0,
    };
    while o.next < next {
        match o.frames.next_frame() {
            Ok(Some(meta)) => {
                o.consumed += meta.frame_len;
                o.next += 1;
            }
            Ok(None)
            | Err(
                FrameError::Torn { .. }
                | FrameError::Crc { .. }
                | FrameError::TooLong { .. }
                | FrameError::Zeroed,
            ) => {
                return Err(OpenAtError::Damaged);
            }
            Err(FrameError::Io(e)) => return Err(OpenAtError::Io(o.path, e)),
        }
    }
    Ok(Some(o))
}
