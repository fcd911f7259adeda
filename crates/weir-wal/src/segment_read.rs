//! The blocking half of a [`Reader`](crate::Reader)'s read: locating the cursor's
//! position, opening a segment there, reading and CRC-checking frames up to the durable
//! end, and turning evicted, quarantined or damaged ranges into gaps.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use bytes::{Buf, Bytes};

use crate::core::Locate;
use crate::error::ReadError;
use crate::format::{
    FRAME_HEADER_LEN, FrameError, FrameMeta, MAX_RECORD_BYTES, SEGMENT_HEADER_LEN,
};
use crate::reader::{Gap, ReadBatch, ReadLimits, Record};
use crate::segment::{READ_BUFFER, segment_path};
use crate::shared::Shared;

/// An open segment positioned at record `next`.
pub(crate) struct OpenSegment {
    first: u64,
    next: u64,
    path: PathBuf,
    frames: ChunkFrames,
}

/// Frames read from a segment file in chunks of [`READ_BUFFER`] bytes: each payload is
/// a slice of its chunk (no copy, no allocation per record), and each frame's CRC is
/// checked once, over the bytes in the chunk. A chunk stays alive while a payload of it
/// does, so a batch of records holds at most its own bytes plus two chunks.
struct ChunkFrames {
    file: File,
    /// Bytes of frames in the file not yet read into a chunk.
    remaining: u64,
    /// Bytes of the file read into chunks so far (after the header).
    read: u64,
    /// Read and not yet parsed.
    buf: Bytes,
}

impl ChunkFrames {
    fn new(file: File, remaining: u64) -> Self {
        ChunkFrames {
            file,
            remaining,
            read: 0,
            buf: Bytes::new(),
        }
    }

    /// The file now holds `body` bytes of frames (it grew since the last look).
    fn set_body_len(&mut self, body: u64) {
        self.remaining = body.saturating_sub(self.read);
    }

    /// Makes `buf` hold at least `need` bytes (the file has them: checked by the caller),
    /// reading a chunk of at least [`READ_BUFFER`] when it must read.
    fn fill(&mut self, need: usize) -> std::io::Result<()> {
        if self.buf.len() >= need {
            return Ok(());
        }
        let left = self.buf.len();
        let want = (need - left)
            .max(READ_BUFFER)
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let mut chunk = Vec::with_capacity(left + want);
        chunk.extend_from_slice(&self.buf);
        // read_to_end reads into the spare capacity without zero-filling it first.
        (&mut self.file).take(want as u64).read_to_end(&mut chunk)?;
        if chunk.len() < left + want {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the segment file is shorter than the records it holds",
            ));
        }
        self.remaining -= want as u64;
        self.read += want as u64;
        self.buf = Bytes::from(chunk);
        Ok(())
    }

    /// The next frame and its payload, or `None` when no bytes are left.
    fn next_frame(&mut self) -> Result<Option<(FrameMeta, Bytes)>, FrameError> {
        let available = self.buf.len() as u64 + self.remaining;
        if available == 0 {
            return Ok(None);
        }
        let header_len = FRAME_HEADER_LEN as usize;
        if available < FRAME_HEADER_LEN {
            return Err(FrameError::Torn {
                needed: FRAME_HEADER_LEN,
                remaining: available,
            });
        }
        self.fill(header_len)?;
        let header = &self.buf[..header_len];
        if header.iter().all(|&b| b == 0) {
            return Err(FrameError::Zeroed);
        }
        let len = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
        let stored = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
        if len > MAX_RECORD_BYTES {
            return Err(FrameError::TooLong { len });
        }
        let frame_len = FRAME_HEADER_LEN + u64::from(len);
        if frame_len > available {
            return Err(FrameError::Torn {
                needed: frame_len,
                remaining: available,
            });
        }
        self.fill(header_len + len as usize)?;
        let frame = self.buf.split_to(header_len + len as usize);
        let mut computed = crc32c::crc32c(&frame[0..4]);
        computed = crc32c::crc32c_append(computed, &frame[8..]);
        if computed != stored {
            return Err(FrameError::Crc { stored, computed });
        }
        let time_ms = u64::from_le_bytes(frame[8..16].try_into().expect("8 bytes"));
        let mut payload = frame;
        payload.advance(header_len);
        Ok(Some((FrameMeta { time_ms, frame_len }, payload)))
    }
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
    if let Ok(meta) = o.frames.file.metadata() {
        o.frames
            .set_body_len(meta.len().saturating_sub(SEGMENT_HEADER_LEN));
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
    let frames = ChunkFrames::new(file, len.saturating_sub(SEGMENT_HEADER_LEN));
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
                return Err(OpenAtError::Damaged);
            }
            Err(FrameError::Io(e)) => return Err(OpenAtError::Io(o.path, e)),
        }
    }
    Ok(Some(o))
}
