//! The on-disk format: segment headers, record frames and cursor files, byte by byte.
//!
//! Everything is little-endian. CRCs are CRC32C (Castagnoli).
//!
//! # Segment file `<dir>/<first offset as 20 decimal digits>.seg`
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0..8 | magic | `b"WEIRWAL\0"` |
//! | 8..10 | version | `u16`, [`FORMAT_VERSION`] (2); version 1 is still read |
//! | 10..12 | flags | `u16`, 0 (reserved) |
//! | 12..16 | reserved | 0 |
//! | 16..24 | first offset | `u64`, offset of the first record; equals the file name |
//! | 24..32 | created | `u64`, creation time in ms since the UNIX epoch |
//! | 32..36 | reserved | 0 |
//! | 36..40 | header CRC | `u32`, CRC32C of bytes 0..36 |
//!
//! Then batches, back to back, until the end of the file ([`SEGMENT_HEADER_LEN`] = 40).
//! In a version-2 segment each batch is a batch mark followed by its record frames; a
//! version-1 segment holds record frames only (and so may the part of a version-2
//! segment written before its header was upgraded: marks are optional to readers).
//!
//! # Batch mark (version 2)
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0..4 | tag | `u32::MAX`: a length no frame can have |
//! | 4..8 | CRC | `u32`, CRC32C of bytes 0..4 followed by bytes 8..24 |
//! | 8..16 | first offset | `u64`, the offset of the batch's first record |
//! | 16..20 | records | `u32`, the records in the batch |
//! | 20..24 | bytes | `u32`, the bytes of the batch's frames after this mark |
//!
//! ([`MARK_LEN`] = 24.) The writer writes it, once it has given the batch its offsets.
//! Marks let a reader resume after a damaged frame *with every offset known*: the mark
//! before the damage gives the end of the damaged batch, and the next valid mark after
//! it gives the offset of the record that follows, whatever the damage did to the
//! length fields in between. Offsets after damage never shift, and the records lost
//! are counted exactly. A reader also checks each mark's first offset against its own
//! count, so a misplaced batch is damage, not records under the wrong offsets.
//!
//! # Record frame
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0..4 | length | `u32`, payload length `n`, at most [`MAX_RECORD_BYTES`] |
//! | 4..8 | CRC | `u32`, CRC32C of bytes 0..4 followed by bytes 8..16+n |
//! | 8..16 | time | `u64`, append time in ms since the UNIX epoch |
//! | 16..16+n | payload | opaque bytes |
//!
//! A record's offset is not stored: it is the segment's first offset plus the record's
//! index in the segment. Offsets are record numbers, dense and increasing from 0.
//!
//! A reader accepts a frame only when its length fits both [`MAX_RECORD_BYTES`] and the
//! bytes actually left in the file, and its CRC matches; it never allocates for a length
//! it has not bounded that way. A frame header of 16 zero bytes marks a zero-filled tail
//! (it would fail the CRC check anyway: the CRC of an all-zero frame is not zero).
//!
//! # Cursor file `<dir>/cursors/<name>.cursor`
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0..8 | magic | `b"WEIRCUR\0"` |
//! | 8..10 | version | `u16`, 1 |
//! | 10..16 | reserved | 0 |
//! | 16..24 | offset | `u64`, the next offset the sink has not yet committed |
//! | 24..28 | CRC | `u32`, CRC32C of bytes 0..24 |
//!
//! Cursor files are replaced atomically: written to `<name>.cursor.tmp`, fsynced, renamed
//! over the old file, then the directory is fsynced.

use std::io::{self, Read};

/// The magic at the start of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"WEIRWAL\0";
/// The magic at the start of every cursor file.
pub const CURSOR_MAGIC: [u8; 8] = *b"WEIRCUR\0";
/// The segment format version this build writes (2: with batch marks).
pub const FORMAT_VERSION: u16 = 2;
/// The oldest segment format version this build reads (1: no batch marks).
pub const OLDEST_FORMAT_VERSION: u16 = 1;
/// The cursor file's format version (unchanged by segment format 2).
const CURSOR_VERSION: u16 = 1;
/// Length of a segment header in bytes.
pub const SEGMENT_HEADER_LEN: u64 = 40;
/// Length of a record frame's header in bytes.
pub const FRAME_HEADER_LEN: u64 = 16;
/// Length of a batch mark in bytes (format version 2).
pub const MARK_LEN: u64 = 24;
/// The length field of a batch mark.
const MARK_TAG: u32 = u32::MAX;
/// Length of a cursor file in bytes.
pub const CURSOR_FILE_LEN: usize = 28;
/// The largest payload a record may have (16 MiB). Frames claiming more are corrupt.
pub const MAX_RECORD_BYTES: u32 = 16 * 1024 * 1024;

/// A decoded segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The offset of the segment's first record.
    pub first_offset: u64,
    /// Creation time in ms since the UNIX epoch.
    pub created_ms: u64,
    /// The format version: [`FORMAT_VERSION`] for segments this build creates.
    pub version: u16,
}

/// Why a segment header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// Fewer bytes than a header.
    #[error("segment header is torn: expected {SEGMENT_HEADER_LEN} bytes, found {found}")]
    Short {
        /// Bytes present.
        found: u64,
    },
    /// The magic is wrong: not a weir segment.
    #[error("segment magic is wrong: expected {SEGMENT_MAGIC:?}, found {found:?}")]
    Magic {
        /// The bytes found.
        found: [u8; 8],
    },
    /// A format version this build does not know.
    #[error(
        "segment format version {found} is not supported (this build reads versions \
         {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION}); \
         open it with the weir release that wrote it"
    )]
    Version {
        /// The version found.
        found: u16,
    },
    /// The header CRC does not match.
    #[error("segment header CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Crc {
        /// CRC in the file.
        stored: u32,
        /// CRC of the bytes.
        computed: u32,
    },
}

impl SegmentHeader {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_LEN as usize] {
        let mut b = [0u8; SEGMENT_HEADER_LEN as usize];
        b[0..8].copy_from_slice(&SEGMENT_MAGIC);
        b[8..10].copy_from_slice(&self.version.to_le_bytes());
        b[16..24].copy_from_slice(&self.first_offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.created_ms.to_le_bytes());
        let crc = crc32c::crc32c(&b[0..36]);
        b[36..40].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks a header from the start of `bytes`.
    ///
    /// # Errors
    ///
    /// [`HeaderError`] when the bytes are short, the magic or version is wrong, or the
    /// CRC does not match.
    pub fn decode(bytes: &[u8]) -> Result<SegmentHeader, HeaderError> {
        let Some(b) = bytes.get(..SEGMENT_HEADER_LEN as usize) else {
            return Err(HeaderError::Short {
                found: bytes.len() as u64,
            });
        };
        let magic: [u8; 8] = arr(&b[0..8]);
        if magic != SEGMENT_MAGIC {
            return Err(HeaderError::Magic { found: magic });
        }
        let version = u16::from_le_bytes(arr(&b[8..10]));
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(HeaderError::Version { found: version });
        }
        let stored = u32::from_le_bytes(arr(&b[36..40]));
        let computed = crc32c::crc32c(&b[0..36]);
        if stored != computed {
            return Err(HeaderError::Crc { stored, computed });
        }
        Ok(SegmentHeader {
            first_offset: u64::from_le_bytes(arr(&b[16..24])),
            created_ms: u64::from_le_bytes(arr(&b[24..32])),
            version,
        })
    }
}

/// Copies a slice of known length into an array.
fn arr<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(s);
    a
}

/// Appends one encoded frame to `out`.
///
/// The caller has checked `payload.len() <= MAX_RECORD_BYTES`.
pub(crate) fn encode_frame(out: &mut Vec<u8>, time_ms: u64, payload: &[u8]) {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let len_bytes = len.to_le_bytes();
    let time_bytes = time_ms.to_le_bytes();
    let crc = pieces_crc(&len_bytes, &time_bytes, payload);
    out.extend_from_slice(&len_bytes);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&time_bytes);
    out.extend_from_slice(payload);
}

/// Appends one frame to `out` whose payload `write` appends after its header, then
/// fills the header in (the payload is written in place, not copied). Returns the
/// payload's length; a payload longer than `max` is taken back out and its length
/// returned as the error.
pub(crate) fn encode_frame_with(
    out: &mut Vec<u8>,
    time_ms: u64,
    max: usize,
    write: impl FnOnce(&mut Vec<u8>),
) -> Result<usize, usize> {
    let start = out.len();
    let header = FRAME_HEADER_LEN as usize;
    out.resize(start + header, 0);
    write(out);
    let payload_len = out.len() - start - header;
    if payload_len > max {
        out.truncate(start);
        return Err(payload_len);
    }
    let len_bytes = u32::try_from(payload_len).unwrap_or(u32::MAX).to_le_bytes();
    let time_bytes = time_ms.to_le_bytes();
    let crc = pieces_crc(&len_bytes, &time_bytes, &out[start + header..]);
    out[start..start + 4].copy_from_slice(&len_bytes);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    out[start + 8..start + header].copy_from_slice(&time_bytes);
    Ok(payload_len)
}

/// Frames from this many bytes on are checked with `crc_fast` (folding with carry-less
/// multiplies), shorter ones in one serial pass ([`crate::crc`], one `crc32` instruction
/// per 8 bytes), which is as fast or faster below it on x86-64.
const FOLD_FROM_BYTES: usize = 512;

/// A frame's CRC: CRC32C of its bytes 0..4 (`len`) followed by its bytes 8.. (`rest`:
/// the time and the payload).
pub(crate) fn frame_crc(len: &[u8], rest: &[u8]) -> u32 {
    if rest.len() < FOLD_FROM_BYTES {
        return crate::crc::crc32c_of(&[len, rest]);
    }
    fold(crate::crc::crc32c_of(&[len]), rest)
}

/// [`frame_crc`] of four frames at once (`lens` their length fields, `rests` their
/// time and payload), interleaved when all four are short ([`crate::crc::crc32c_of4`]).
#[inline]
pub(crate) fn frame_crcs4(lens: [u32; 4], rests: [&[u8]; 4]) -> [u32; 4] {
    if rests.iter().all(|r| r.len() < FOLD_FROM_BYTES) {
        return crate::crc::crc32c_of4(lens, rests);
    }
    std::array::from_fn(|i| frame_crc(&lens[i].to_le_bytes(), rests[i]))
}

/// A frame's CRC from its pieces: the length field, the time field and the payload.
fn pieces_crc(len: &[u8], time: &[u8], payload: &[u8]) -> u32 {
    if payload.len() + time.len() < FOLD_FROM_BYTES {
        return crate::crc::crc32c_of(&[len, time, payload]);
    }
    fold(crate::crc::crc32c_of(&[len, time]), payload)
}

/// CRC32C of the bytes that gave `head`, followed by `rest`, with `crc_fast`.
fn fold(head: u32, rest: &[u8]) -> u32 {
    // Both continue from the register value before the final inversion.
    let mut digest =
        crc_fast::Digest::new_with_init_state(crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(!head));
    digest.update(rest);
    digest.finalize() as u32
}

/// What a batch mark says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMark {
    /// The offset of the batch's first record.
    pub first: u64,
    /// The records in the batch.
    pub records: u32,
    /// The bytes of the batch's frames after the mark.
    pub bytes: u32,
}

impl BatchMark {
    /// Encodes the mark.
    pub(crate) fn encode(&self) -> [u8; MARK_LEN as usize] {
        let mut b = [0u8; MARK_LEN as usize];
        b[0..4].copy_from_slice(&MARK_TAG.to_le_bytes());
        b[8..16].copy_from_slice(&self.first.to_le_bytes());
        b[16..20].copy_from_slice(&self.records.to_le_bytes());
        b[20..24].copy_from_slice(&self.bytes.to_le_bytes());
        let crc = frame_crc(&b[0..4], &b[8..24]);
        b[4..8].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// The offset after the batch's last record.
    pub fn end(&self) -> u64 {
        self.first + u64::from(self.records)
    }
}

/// Whether `bytes` start with a mark's tag (what decides a mark from a frame).
pub(crate) fn is_mark(bytes: &[u8]) -> bool {
    bytes.get(0..4) == Some(&MARK_TAG.to_le_bytes()[..])
}

/// The mark at the start of `bytes`: `Ok(None)` if they do not start with a mark's tag,
/// [`FrameError::Torn`] if the mark is cut short, [`FrameError::Crc`] if it is damaged.
///
/// Readers step over a damaged mark (its length is fixed) and go on counting: it loses
/// no record, only the batch's extent, which resyncing would otherwise use.
pub(crate) fn decode_mark(bytes: &[u8]) -> Result<Option<BatchMark>, FrameError> {
    if !is_mark(bytes) {
        return Ok(None);
    }
    let Some(b) = bytes.get(..MARK_LEN as usize) else {
        return Err(FrameError::Torn {
            needed: MARK_LEN,
            remaining: bytes.len() as u64,
        });
    };
    let stored = u32::from_le_bytes(arr(&b[4..8]));
    let computed = frame_crc(&b[0..4], &b[8..24]);
    if stored != computed {
        return Err(FrameError::Crc { stored, computed });
    }
    Ok(Some(BatchMark {
        first: u64::from_le_bytes(arr(&b[8..16])),
        records: u32::from_le_bytes(arr(&b[16..20])),
        bytes: u32::from_le_bytes(arr(&b[20..24])),
    }))
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The file ends inside a frame (a torn write).
    #[error("torn frame: {needed} bytes needed, {remaining} left in the file")]
    Torn {
        /// Bytes the frame needs.
        needed: u64,
        /// Bytes left.
        remaining: u64,
    },
    /// The length field is larger than [`MAX_RECORD_BYTES`].
    #[error("frame length {len} exceeds the maximum record size {MAX_RECORD_BYTES}")]
    TooLong {
        /// The length field.
        len: u32,
    },
    /// The frame header is all zeros: a zero-filled (preallocated or never written) tail.
    #[error("zero-filled bytes where a frame should start")]
    Zeroed,
    /// The CRC does not match the bytes.
    #[error("frame CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Crc {
        /// CRC in the frame.
        stored: u32,
        /// CRC of the bytes.
        computed: u32,
    },
    /// A batch mark names another offset than the record count gives: the batch is
    /// not where it belongs.
    #[error("batch mark names offset {found} where offset {expected} comes next")]
    Misplaced {
        /// The offset the reader's count gives.
        expected: u64,
        /// The offset the mark names.
        found: u64,
    },
    /// Reading failed.
    #[error("reading the segment failed: {0}")]
    Io(#[from] io::Error),
}

/// One frame's metadata; the payload is in the reader's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameMeta {
    /// Append time in ms since the UNIX epoch.
    pub time_ms: u64,
    /// Bytes this frame took: its header and payload, and the batch mark before it when
    /// it is the first of a batch.
    pub frame_len: u64,
}

/// The batch a reader is inside: where it ends, in bytes from the reader's start and
/// in offsets. What [`find_resync`] needs to resume inside a damaged batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchEnd {
    pub pos: u64,
    pub offset: u64,
}

/// The offset bookkeeping both frame readers share: the next record's offset (when
/// known, marks are checked against it) and the batch being read.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MarkCheck {
    pub offset: Option<u64>,
    pub batch: Option<BatchEnd>,
}

impl MarkCheck {
    /// A mark read at byte `pos` (of the reader's stream): checked against the count.
    pub(crate) fn on_mark(&mut self, mark: &BatchMark, pos: u64) -> Result<(), FrameError> {
        if let Some(expected) = self.offset
            && mark.first != expected
        {
            return Err(FrameError::Misplaced {
                expected,
                found: mark.first,
            });
        }
        self.offset = Some(mark.first);
        self.batch = Some(BatchEnd {
            pos: pos + MARK_LEN + u64::from(mark.bytes),
            offset: mark.end(),
        });
        Ok(())
    }

    /// A record was read.
    pub(crate) fn on_record(&mut self) {
        self.on_records(1);
    }

    /// `n` records were read.
    pub(crate) fn on_records(&mut self, n: u64) {
        if let Some(o) = &mut self.offset {
            *o += n;
        }
    }
}

/// Reads frames one by one from a byte stream whose remaining length is known.
///
/// It never reads past `remaining`, never allocates more than the verified frame length,
/// and reuses its payload buffer. Batch marks are consumed with the frame that follows
/// them, and checked against the record count when the reader was told the offset it
/// starts at ([`FrameReader::at_offset`]).
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    remaining: u64,
    start: u64,
    payload: Vec<u8>,
    marks: MarkCheck,
}

impl<R: Read> FrameReader<R> {
    /// A reader over `inner`, which holds exactly `remaining` more bytes of frames.
    pub fn new(inner: R, remaining: u64) -> Self {
        FrameReader {
            inner,
            remaining,
            start: remaining,
            payload: Vec::new(),
            marks: MarkCheck::default(),
        }
    }

    /// The reader's first record has offset `offset`: marks are checked against it.
    pub fn at_offset(mut self, offset: u64) -> Self {
        self.marks.offset = Some(offset);
        self
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// The batch being read, if its mark was read.
    pub(crate) fn batch(&self) -> Option<BatchEnd> {
        self.marks.batch
    }

    /// The payload of the last frame returned by [`FrameReader::next_frame`].
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The next frame, or `None` at a clean end (no bytes left).
    ///
    /// # Errors
    ///
    /// [`FrameError`] on a torn or corrupt frame or an I/O error. After an error the
    /// reader's position is unspecified.
    pub fn next_frame(&mut self) -> Result<Option<FrameMeta>, FrameError> {
        if self.remaining == 0 {
            return Ok(None);
        }
        let mut header = self.read_header()?;
        let mut mark_len = 0;
        if is_mark(&header) {
            let mut mark = [0u8; MARK_LEN as usize];
            mark[..FRAME_HEADER_LEN as usize].copy_from_slice(&header);
            if self.remaining < MARK_LEN - FRAME_HEADER_LEN {
                return Err(FrameError::Torn {
                    needed: MARK_LEN,
                    remaining: self.remaining + FRAME_HEADER_LEN,
                });
            }
            self.inner
                .read_exact(&mut mark[FRAME_HEADER_LEN as usize..])?;
            self.remaining -= MARK_LEN - FRAME_HEADER_LEN;
            let pos = self.start - self.remaining - MARK_LEN;
            match decode_mark(&mark) {
                Ok(Some(decoded)) => self.marks.on_mark(&decoded, pos)?,
                // A damaged mark loses nothing: the record count places what follows.
                _ => self.marks.batch = None,
            }
            if self.remaining == 0 {
                return Err(FrameError::Torn {
                    needed: FRAME_HEADER_LEN,
                    remaining: 0,
                });
            }
            header = self.read_header()?;
            mark_len = MARK_LEN;
        }
        if header.iter().all(|&b| b == 0) {
            return Err(FrameError::Zeroed);
        }
        let len = u32::from_le_bytes(arr(&header[0..4]));
        let stored = u32::from_le_bytes(arr(&header[4..8]));
        if len > MAX_RECORD_BYTES {
            return Err(FrameError::TooLong { len });
        }
        if u64::from(len) > self.remaining {
            return Err(FrameError::Torn {
                needed: FRAME_HEADER_LEN + u64::from(len),
                remaining: self.remaining + FRAME_HEADER_LEN,
            });
        }
        self.payload.clear();
        self.payload.resize(len as usize, 0);
        self.inner.read_exact(&mut self.payload)?;
        self.remaining -= u64::from(len);
        let computed = pieces_crc(&header[0..4], &header[8..16], &self.payload);
        if computed != stored {
            return Err(FrameError::Crc { stored, computed });
        }
        self.marks.on_record();
        Ok(Some(FrameMeta {
            time_ms: u64::from_le_bytes(arr(&header[8..16])),
            frame_len: mark_len + FRAME_HEADER_LEN + u64::from(len),
        }))
    }

    fn read_header(&mut self) -> Result<[u8; FRAME_HEADER_LEN as usize], FrameError> {
        if self.remaining < FRAME_HEADER_LEN {
            return Err(FrameError::Torn {
                needed: FRAME_HEADER_LEN,
                remaining: self.remaining,
            });
        }
        let mut header = [0u8; FRAME_HEADER_LEN as usize];
        self.inner.read_exact(&mut header)?;
        self.remaining -= FRAME_HEADER_LEN;
        Ok(header)
    }
}

/// Slack around a segment's lifetime for the append times of its records (clock steps).
pub(crate) const TIME_SLACK_MS: u64 = 24 * 3600 * 1000;

/// Where reading can resume after damage, with the offset of the record there.
///
/// `rest` holds the bytes from the damaged frame (or mark) to the end of the segment;
/// the damaged record has offset `damaged`. `batch` is the batch the damage is in (or
/// that ends right at it), when its mark was read (positions relative to `rest`). `end` is the segment's end offset
/// when known (a sealed segment). Append times of frames are plausible within
/// `[lo, hi]`. In order:
///
/// 1. Inside a known batch, the frames that parse cleanly, CRC by CRC, from some byte
///    after the damage exactly to the batch's end are its last `k` records: reading
///    resumes at the first such byte with offset `batch end - k`, or at the batch's end.
/// 2. Otherwise, at the first valid mark after the damage whose offset the bytes can
///    hold, the same way: frames that chain cleanly to that mark are the records just
///    before it.
/// 3. With no mark (a version-1 segment, or damage in the last batch), frames that
///    chain cleanly to the end of the file, when the segment's end offset is known.
///
/// Damage right at a known batch's end is to the next batch's mark: reading resumes
/// after the mark at offset `damaged`, losing nothing. A valid mark naming another
/// offset than `damaged` (a misplaced batch) is skipped to the next valid mark whole.
///
/// `None` when nothing after the damage can be placed. Offsets after the damage never
/// shift: every record given an offset here has it provably.
pub(crate) fn find_resync(
    rest: &[u8],
    damaged: u64,
    batch: Option<BatchEnd>,
    end: Option<u64>,
    lo: u64,
    hi: u64,
) -> Option<(usize, u64)> {
    let at_damage = decode_mark(rest);
    // A valid mark naming another offset: its batch is not where it belongs, and its
    // frames must not be placed by the count or by chaining (they may be a copy of
    // other records).
    let misplaced = matches!(at_damage, Ok(Some(m)) if m.first != damaged);
    // At the end of a batch known from its mark, the next batch's mark starts: damage
    // there is to that mark, whose length is fixed, so the record count places the
    // frames after it. Nothing is lost (they are checked as they are read).
    if !misplaced
        && batch.is_some_and(|b| b.pos == 0 && b.offset == damaged)
        && rest.len() > (MARK_LEN + FRAME_HEADER_LEN) as usize
    {
        return Some((MARK_LEN as usize, damaged));
    }
    let batch = batch.filter(|b| b.pos > 0);
    // A valid mark right at the damage, naming it: the damage is inside that batch.
    let (start, batch) = match at_damage {
        Ok(Some(m)) if m.first == damaged => (
            MARK_LEN as usize,
            Some(BatchEnd {
                pos: MARK_LEN + u64::from(m.bytes),
                offset: m.end(),
            }),
        ),
        _ => (0, batch),
    };
    if let Some(b) = batch
        && let Ok(batch_end) = usize::try_from(b.pos)
        && b.offset > damaged
        && batch_end > start
        && batch_end <= rest.len()
    {
        let records = b.offset - damaged - 1;
        return Some(match chain_to(&rest[start..batch_end], records, lo, hi) {
            Some((p, k)) => (start + p, b.offset - k),
            None => (batch_end, b.offset),
        });
    }
    if let Some((q, m)) = next_mark(rest, damaged, end) {
        if misplaced {
            return Some((q, m));
        }
        // No frame of a chain starting after byte 0 can be the record at byte 0, so the
        // whole range up to the mark may be placed (the damage was then the mark's tag).
        let records = m - damaged;
        return Some(match chain_to(&rest[..q], records, lo, hi) {
            Some((p, k)) => (p, m - k),
            None => (q, m),
        });
    }
    if misplaced {
        return None;
    }
    let end = end?;
    let records = end.checked_sub(damaged + 1)?;
    chain_to(rest, records, lo, hi).map(|(p, k)| (p, end - k))
}

/// The first valid mark after byte 0 of `rest` whose first offset lies after `damaged`,
/// no further than the bytes before it can hold (a record takes at least a frame
/// header), and not past `end`: its position and first offset.
fn next_mark(rest: &[u8], damaged: u64, end: Option<u64>) -> Option<(usize, u64)> {
    let tag = MARK_TAG.to_le_bytes();
    let mut q = 1;
    while q + MARK_LEN as usize <= rest.len() {
        let found = rest[q..].windows(4).position(|w| w == tag).map(|i| q + i)?;
        if let Ok(Some(m)) = decode_mark(&rest[found..])
            && m.first > damaged
            && m.first - damaged <= found as u64 / FRAME_HEADER_LEN
            && end.is_none_or(|e| m.first <= e)
        {
            return Some((found, m.first));
        }
        q = found + 1;
    }
    None
}

/// In `bytes`: the first position after 0 from which frames parse cleanly exactly to
/// the end, and how many there are (at most `max_records`); append times within
/// `[lo, hi]`.
fn chain_to(bytes: &[u8], max_records: u64, lo: u64, hi: u64) -> Option<(usize, u64)> {
    let header = FRAME_HEADER_LEN as usize;
    let plausible = |p: usize| -> Option<usize> {
        let h = bytes.get(p..p + header)?;
        let time = u64::from_le_bytes(arr(&h[8..16]));
        if time < lo || time > hi {
            return None;
        }
        let len = u32::from_le_bytes(arr(&h[0..4]));
        if len > MAX_RECORD_BYTES {
            return None;
        }
        let frame = header + len as usize;
        let whole = bytes.get(p..p + frame)?;
        let stored = u32::from_le_bytes(arr(&h[4..8]));
        (frame_crc(&whole[0..4], &whole[8..]) == stored).then_some(frame)
    };
    'candidates: for start in 1..bytes.len() {
        let mut p = start;
        let mut k = 0u64;
        while p < bytes.len() {
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

/// What [`scan_segment_bytes`] found in a segment image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentImageScan {
    /// The header, or why it was refused.
    pub header: Result<SegmentHeader, HeaderError>,
    /// CRC-valid records before the first problem.
    pub records: u64,
    /// Bytes up to the end of the last valid record (header included).
    pub good_len: u64,
    /// The first problem, if the image does not end cleanly after a record.
    pub problem: Option<String>,
}

/// Checks a whole segment image held in memory: its header, then every frame until the
/// first problem. This is what recovery and `weir wal verify` do to a file; the fuzz
/// target and the property tests feed it arbitrary bytes. It never panics and never
/// allocates more than the largest frame it has bounded by the bytes present.
pub fn scan_segment_bytes(bytes: &[u8]) -> SegmentImageScan {
    let header = SegmentHeader::decode(bytes);
    let mut scan = SegmentImageScan {
        header,
        records: 0,
        good_len: 0,
        problem: None,
    };
    if scan.header.is_err() {
        return scan;
    }
    let body = &bytes[SEGMENT_HEADER_LEN as usize..];
    scan.good_len = SEGMENT_HEADER_LEN;
    let first = scan.header.as_ref().map_or(0, |h| h.first_offset);
    let mut reader = FrameReader::new(body, body.len() as u64).at_offset(first);
    loop {
        match reader.next_frame() {
            Ok(None) => return scan,
            Ok(Some(meta)) => {
                scan.records += 1;
                scan.good_len += meta.frame_len;
            }
            Err(e) => {
                scan.problem = Some(e.to_string());
                return scan;
            }
        }
    }
}

/// Encodes a cursor file.
pub(crate) fn encode_cursor(offset: u64) -> [u8; CURSOR_FILE_LEN] {
    let mut b = [0u8; CURSOR_FILE_LEN];
    b[0..8].copy_from_slice(&CURSOR_MAGIC);
    b[8..10].copy_from_slice(&CURSOR_VERSION.to_le_bytes());
    b[16..24].copy_from_slice(&offset.to_le_bytes());
    let crc = crc32c::crc32c(&b[0..24]);
    b[24..28].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a cursor file; `None` if it is not a valid version-1 cursor file.
pub(crate) fn decode_cursor(b: &[u8]) -> Option<u64> {
    if b.len() != CURSOR_FILE_LEN || b[0..8] != CURSOR_MAGIC {
        return None;
    }
    if u16::from_le_bytes(arr(&b[8..10])) != CURSOR_VERSION {
        return None;
    }
    let stored = u32::from_le_bytes(arr(&b[24..28]));
    if crc32c::crc32c(&b[0..24]) != stored {
        return None;
    }
    Some(u64::from_le_bytes(arr(&b[16..24])))
}

/// The file name of the segment whose first offset is `first`.
pub(crate) fn segment_file_name(first: u64) -> String {
    format!("{first:020}.seg")
}

/// The first offset encoded in a segment file name, if it is one.
pub(crate) fn parse_segment_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".seg")?;
    if digits.len() != 20 || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_crc_is_crc32c_of_the_frame_without_its_crc_field_at_every_length() {
        let bytes: Vec<u8> = (0..4200u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        for len in (0..1100).chain([4095, 4096, 4097, 4192]) {
            let frame = &bytes[..8 + len];
            let mut joined = frame[0..4].to_vec();
            joined.extend_from_slice(&frame[8..]);
            assert_eq!(
                frame_crc(&frame[0..4], &frame[8..]),
                crc32c::crc32c(&joined),
                "rest of {len} bytes"
            );
        }
    }

    #[test]
    fn header_round_trips_and_rejects_damage() {
        let h = SegmentHeader {
            first_offset: 42,
            created_ms: 7,
            version: FORMAT_VERSION,
        };
        let b = h.encode();
        assert_eq!(SegmentHeader::decode(&b), Ok(h));
        let mut bad = b;
        bad[20] ^= 1;
        assert!(matches!(
            SegmentHeader::decode(&bad),
            Err(HeaderError::Crc { .. })
        ));
        let mut v3 = b;
        v3[8] = 3;
        assert_eq!(
            SegmentHeader::decode(&v3),
            Err(HeaderError::Version { found: 3 })
        );
        let v1 = SegmentHeader { version: 1, ..h };
        assert_eq!(SegmentHeader::decode(&v1.encode()), Ok(v1));
        assert_eq!(
            SegmentHeader::decode(&b[..10]),
            Err(HeaderError::Short { found: 10 })
        );
    }

    #[test]
    fn frames_round_trip_and_zero_tail_is_refused() {
        let mut buf = Vec::new();
        encode_frame(&mut buf, 5, b"hello");
        encode_frame(&mut buf, 6, b"");
        buf.extend_from_slice(&[0u8; 16]);
        let len = buf.len() as u64;
        let mut r = FrameReader::new(&buf[..], len);
        let m = r.next_frame().unwrap().unwrap();
        assert_eq!((m.time_ms, r.payload()), (5, &b"hello"[..]));
        let m = r.next_frame().unwrap().unwrap();
        assert_eq!((m.time_ms, m.frame_len), (6, 16));
        assert!(matches!(r.next_frame(), Err(FrameError::Zeroed)));
    }

    #[test]
    fn marks_round_trip_are_checked_against_the_count_and_damaged_ones_are_stepped_over() {
        let frames = |first: u64, n: u64| {
            let mut frames = Vec::new();
            for i in first..first + n {
                encode_frame(&mut frames, 5, format!("r{i}").as_bytes());
            }
            let mark = BatchMark {
                first,
                records: n as u32,
                bytes: frames.len() as u32,
            };
            assert_eq!(decode_mark(&mark.encode()).unwrap(), Some(mark));
            let mut out = mark.encode().to_vec();
            out.extend_from_slice(&frames);
            out
        };
        let mut buf = frames(7, 2);
        buf.extend_from_slice(&frames(9, 1));
        let read_all = |buf: &[u8], first: u64| {
            let mut r = FrameReader::new(buf, buf.len() as u64).at_offset(first);
            let mut got = Vec::new();
            loop {
                match r.next_frame() {
                    Ok(Some(_)) => got.push(String::from_utf8(r.payload().to_vec()).unwrap()),
                    Ok(None) => return Ok(got),
                    Err(e) => return Err((got, e)),
                }
            }
        };
        assert_eq!(read_all(&buf, 7).unwrap(), ["r7", "r8", "r9"]);
        // Started at another offset than the first mark names: refused, not renumbered.
        let (got, err) = read_all(&buf, 6).unwrap_err();
        assert!(got.is_empty());
        assert!(
            matches!(
                err,
                FrameError::Misplaced {
                    expected: 6,
                    found: 7
                }
            ),
            "{err}"
        );
        // A damaged mark (its first offset here) costs nothing: the count goes on.
        let mut damaged = buf.clone();
        damaged[MARK_LEN as usize + 2 * (FRAME_HEADER_LEN as usize + 2) + 9] ^= 1;
        assert_eq!(read_all(&damaged, 7).unwrap(), ["r7", "r8", "r9"]);
    }

    #[test]
    fn cursor_file_round_trips() {
        assert_eq!(decode_cursor(&encode_cursor(99)), Some(99));
        let mut b = encode_cursor(99);
        b[17] ^= 4;
        assert_eq!(decode_cursor(&b), None);
    }

    #[test]
    fn segment_names_round_trip() {
        assert_eq!(
            parse_segment_file_name(&segment_file_name(1234)),
            Some(1234)
        );
        assert_eq!(parse_segment_file_name("12.seg"), None);
    }
}
