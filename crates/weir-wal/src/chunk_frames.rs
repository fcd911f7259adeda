//! Frames read from a segment file in chunks: each payload is a slice of its chunk, and
//! a chunk's buffer goes back to its reader's [`ChunkPool`] once every payload sliced
//! from it has been dropped.

use std::fs::File;
use std::io::Read;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use bytes::{Buf, Bytes};

use crate::format::{
    BatchEnd, FRAME_HEADER_LEN, FrameError, FrameMeta, MARK_LEN, MAX_RECORD_BYTES, MarkCheck,
    decode_mark, frame_crc, frame_crcs4, is_mark,
};
use crate::read_batch::Record;

/// The most bytes read from a segment file at once (unless a frame is larger).
const MAX_CHUNK: usize = 1024 * 1024;
/// The fewest.
const MIN_CHUNK: usize = 64 * 1024;

/// Buffers kept for reuse per reader: at most this many, a chunk each, so an idle
/// reader holds at most 4 MiB of them (4 × 64 KiB with small reads).
const POOL_CHUNKS: usize = 4;

type Buffers = Mutex<Vec<Vec<u8>>>;

/// A reader's spare chunk buffers.
///
/// A fresh buffer costs a page fault and a zeroed page per 4 KiB the first time the
/// kernel copies into it; a reused one is already mapped (and, being recent, often still
/// in the CPU's cache). Buffers are returned by the last payload of a chunk to be
/// dropped, on whatever thread drops it.
#[derive(Debug, Clone)]
pub(crate) struct ChunkPool {
    buffers: Arc<Buffers>,
    /// Bytes read at once: the read's `max_bytes` within 64 KiB..=1 MiB, so that a
    /// reader of small batches does not hold megabytes.
    chunk_len: usize,
}

impl Default for ChunkPool {
    fn default() -> Self {
        ChunkPool {
            buffers: Arc::default(),
            chunk_len: MAX_CHUNK,
        }
    }
}

/// The chunk size for reads of at most `max_bytes`.
pub(crate) fn chunk_len(max_bytes: u64) -> usize {
    usize::try_from(max_bytes)
        .unwrap_or(usize::MAX)
        .clamp(MIN_CHUNK, MAX_CHUNK)
}

/// Spare chunk buffers a reader keeps.
pub(crate) const SPARE_CHUNKS: usize = POOL_CHUNKS;

impl ChunkPool {
    /// The same buffers, read in chunks sized for reads of at most `max_bytes`.
    pub(crate) fn for_reads_of(&self, max_bytes: u64) -> ChunkPool {
        ChunkPool {
            buffers: Arc::clone(&self.buffers),
            chunk_len: chunk_len(max_bytes),
        }
    }

    /// A buffer of at least `len` initialised bytes.
    fn take(&self, len: usize) -> Vec<u8> {
        let spare = self
            .buffers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match spare {
            Some(buf) if buf.len() >= len => buf,
            // `vec!` of zeroes takes pages the kernel has zeroed, without a second pass.
            _ => vec![0; len.max(self.chunk_len)],
        }
    }

    /// The lengths of the buffers waiting for reuse.
    #[cfg(test)]
    pub(crate) fn spare_lens(&self) -> Vec<usize> {
        let spare = self.buffers.lock().unwrap_or_else(PoisonError::into_inner);
        spare.iter().map(Vec::len).collect()
    }
}

/// The owner of one chunk's bytes: `len` bytes of `buf` are frames read from the file.
struct Chunk {
    buf: Vec<u8>,
    len: usize,
    pool: Weak<Buffers>,
    /// The pool's chunk length when this chunk was read.
    chunk_len: usize,
}

impl AsRef<[u8]> for Chunk {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // Only standard-size buffers are kept: a chunk grown for one large frame is freed.
        if self.buf.len() != self.chunk_len {
            return;
        }
        if let Some(pool) = self.pool.upgrade() {
            let mut spare = pool.lock().unwrap_or_else(PoisonError::into_inner);
            if spare.len() < POOL_CHUNKS {
                spare.push(std::mem::take(&mut self.buf));
            }
        }
    }
}

/// One batch's share of a chunk ([`ChunkFrames::begin_batch`]). Aligned to a cache line
/// so that the reference counts of two batches, allocated one after the other, never
/// share a line: the caller drops one batch's payloads while the reader slices the next.
#[repr(align(64))]
struct BatchOwner(Bytes);

impl AsRef<[u8]> for BatchOwner {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// Frames read from a segment file in chunks (64 KiB to 1 MiB): each payload is
/// a slice of its chunk (no copy, no allocation per record), and each frame's CRC is
/// checked once, over the bytes in the chunk. A chunk stays alive while a payload of it
/// does, so a batch of records holds at most its own bytes plus two chunks.
pub(crate) struct ChunkFrames {
    pub(crate) file: File,
    /// Bytes of frames in the file not yet read into a chunk.
    remaining: u64,
    /// Bytes of the file read into chunks so far (after the header).
    read: u64,
    /// Read and not yet parsed.
    buf: Bytes,
    pool: ChunkPool,
    marks: MarkCheck,
}

impl ChunkFrames {
    /// Frames from `file`, positioned at body byte `read` (after the segment header),
    /// with `remaining` bytes of frames after it; the record there has offset `offset`
    /// (batch marks are checked against it).
    pub(crate) fn new(file: File, read: u64, remaining: u64, pool: ChunkPool, offset: u64) -> Self {
        #[cfg(target_os = "linux")]
        {
            // Read ahead harder: a replay reads the file front to back. Only advice.
            let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::Sequential);
        }
        ChunkFrames {
            file,
            remaining,
            read,
            buf: Bytes::new(),
            pool,
            marks: MarkCheck {
                offset: Some(offset),
                batch: None,
            },
        }
    }

    /// Starts a new batch of records: payloads sliced from now on hold a reference
    /// count of their own on the chunk, so that the caller dropping the previous
    /// batch's payloads does not update the counter this reader is incrementing.
    pub(crate) fn begin_batch(&mut self) {
        if !self.buf.is_empty() {
            self.buf = Bytes::from_owner(BatchOwner(std::mem::take(&mut self.buf)));
        }
    }

    /// The batch being read (body positions), if its mark was read.
    pub(crate) fn batch(&self) -> Option<BatchEnd> {
        self.marks.batch
    }

    /// The body byte (after the segment header) where the next frame starts.
    pub(crate) fn position(&self) -> u64 {
        self.read - self.buf.len() as u64
    }

    /// The file now holds `body` bytes of frames (it grew since the last look).
    pub(crate) fn set_body_len(&mut self, body: u64) {
        self.remaining = body.saturating_sub(self.read);
    }

    /// Makes `buf` hold at least `need` bytes (the file has them: checked by the caller),
    /// reading up to a chunk (or `need`, if larger) when it must read.
    fn fill(&mut self, need: usize) -> std::io::Result<()> {
        if self.buf.len() >= need {
            return Ok(());
        }
        let left = self.buf.len();
        let want = (need.max(self.pool.chunk_len) - left)
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let len = left + want;
        let mut buf = self.pool.take(len);
        // The partial frame at the end of the last chunk moves to the front of this one.
        buf[..left].copy_from_slice(&self.buf);
        self.file
            .read_exact(&mut buf[left..len])
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the segment file is shorter than the records it holds",
                ),
                _ => e,
            })?;
        self.remaining -= want as u64;
        self.read += want as u64;
        self.buf = Bytes::from_owner(Chunk {
            buf,
            len,
            pool: Arc::downgrade(&self.pool.buffers),
            chunk_len: self.pool.chunk_len,
        });
        Ok(())
    }

    /// The frames already read into the chunk, up to the first batch mark, appended to
    /// `out` as records numbered from `*next`: at most `room` of them, and no more once
    /// `*bytes` (the payload bytes in `out`, kept up to date) has reached `max_bytes`
    /// while `out` holds a record. Returns how many.
    ///
    /// A replay's hot path: no read, no mark, and four frames' CRCs checked at once
    /// ([`frame_crcs4`]). Whatever it does not take — a mark, a frame the chunk cuts
    /// short, a damaged frame — is left where it is for [`Self::next_frame`], which
    /// reads or reports it, so this has no error of its own.
    pub(crate) fn whole_frames(
        &mut self,
        out: &mut Vec<Record>,
        next: &mut u64,
        room: usize,
        bytes: &mut u64,
        max_bytes: u64,
    ) -> usize {
        const H: usize = FRAME_HEADER_LEN as usize;
        let buf = &self.buf[..];
        let word = |at: usize| u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"));
        let (mut pos, mut taken) = (0usize, 0usize);
        'groups: loop {
            // Up to four whole frames from `pos`, within the limits.
            let (mut starts, mut lens, mut n) = ([0usize; 4], [0usize; 4], 0);
            let (mut at, mut held) = (pos, *bytes);
            // The read's byte limit, as `read_blocking` applies it: a first record always.
            while n < 4 && taken + n < room && ((out.is_empty() && n == 0) || held < max_bytes) {
                let Some(header) = buf.get(at..at + H) else {
                    break;
                };
                let len = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
                if is_mark(header) || len > MAX_RECORD_BYTES || header == [0; H] {
                    break;
                }
                let end = at + H + len as usize;
                if end > buf.len() {
                    break;
                }
                (starts[n], lens[n], n) = (at, len as usize, n + 1);
                held += u64::from(len);
                at = end;
            }
            if n == 0 {
                break;
            }
            let rest = |i: usize| &buf[starts[i] + 8..starts[i] + H + lens[i]];
            let mut computed = [0u32; 4];
            if n == 4 {
                computed = frame_crcs4(lens.map(|l| l as u32), std::array::from_fn(rest));
            } else {
                for i in 0..n {
                    computed[i] = frame_crc(&buf[starts[i]..starts[i] + 4], rest(i));
                }
            }
            for i in 0..n {
                let s = starts[i];
                if computed[i] != word(s + 4) {
                    // Left for `next_frame` to report.
                    pos = s;
                    break 'groups;
                }
                let time_ms = u64::from_le_bytes(buf[s + 8..s + H].try_into().expect("8 bytes"));
                out.push(Record {
                    offset: *next,
                    time_ms,
                    payload: self.buf.slice(s + H..s + H + lens[i]),
                });
                *next += 1;
                *bytes += lens[i] as u64;
                taken += 1;
            }
            pos = at;
        }
        self.buf.advance(pos);
        if self.buf.is_empty() {
            // Lets the chunk's buffer go back to the pool once its payloads drop.
            self.buf = Bytes::new();
        }
        self.marks.on_records(taken as u64);
        taken
    }

    /// The next frame and its payload, or `None` when no bytes are left. A batch mark
    /// before the frame is consumed with it (and checked).
    pub(crate) fn next_frame(&mut self) -> Result<Option<(FrameMeta, Bytes)>, FrameError> {
        let mut available = self.buf.len() as u64 + self.remaining;
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
        let mut mark_len = 0;
        if is_mark(&self.buf) {
            if available < MARK_LEN {
                return Err(FrameError::Torn {
                    needed: MARK_LEN,
                    remaining: available,
                });
            }
            self.fill(MARK_LEN as usize)?;
            match decode_mark(&self.buf) {
                // Checked before the mark is consumed: after an error, `position` is the
                // mark's start.
                Ok(Some(mark)) => self.marks.on_mark(&mark, self.position())?,
                // A damaged mark loses nothing: the record count places what follows.
                _ => self.marks.batch = None,
            }
            self.buf.advance(MARK_LEN as usize);
            available -= MARK_LEN;
            mark_len = MARK_LEN;
            if available < FRAME_HEADER_LEN {
                return Err(FrameError::Torn {
                    needed: FRAME_HEADER_LEN,
                    remaining: available,
                });
            }
            self.fill(header_len)?;
        }
        let header: [u8; FRAME_HEADER_LEN as usize] =
            self.buf[..header_len].try_into().expect("16 bytes");
        if header == [0; FRAME_HEADER_LEN as usize] {
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
        let frame_bytes = header_len + len as usize;
        self.fill(frame_bytes)?;
        // Checked before the frame is consumed: after an error, `position` is still the
        // damaged frame's start.
        let computed = frame_crc(&header[0..4], &self.buf[8..frame_bytes]);
        if computed != stored {
            return Err(FrameError::Crc { stored, computed });
        }
        let time_ms = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
        let payload = self.buf.slice(header_len..frame_bytes);
        self.buf.advance(frame_bytes);
        if self.buf.is_empty() {
            // Lets the chunk's buffer go back to the pool once its payloads drop.
            self.buf = Bytes::new();
        }
        self.marks.on_record();
        Ok(Some((
            FrameMeta {
                time_ms,
                frame_len: mark_len + frame_len,
            },
            payload,
        )))
    }
}
