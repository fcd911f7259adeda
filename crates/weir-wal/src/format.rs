//! The on-disk format: segment headers, record frames and cursor files, byte by byte.
//!
//! Everything is little-endian. CRCs are CRC32C (Castagnoli).
//!
//! # Segment file `<dir>/<first offset as 20 decimal digits>.seg`
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0..8 | magic | `b"WEIRWAL\0"` |
//! | 8..10 | version | `u16`, [`FORMAT_VERSION`] (1) |
//! | 10..12 | flags | `u16`, 0 (reserved) |
//! | 12..16 | reserved | 0 |
//! | 16..24 | first offset | `u64`, offset of the first record; equals the file name |
//! | 24..32 | created | `u64`, creation time in ms since the UNIX epoch |
//! | 32..36 | reserved | 0 |
//! | 36..40 | header CRC | `u32`, CRC32C of bytes 0..36 |
//!
//! Then frames, back to back, until the end of the file ([`SEGMENT_HEADER_LEN`] = 40).
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
//! | 8..10 | version | `u16`, [`FORMAT_VERSION`] |
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
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u16 = 1;
/// Length of a segment header in bytes.
pub const SEGMENT_HEADER_LEN: u64 = 40;
/// Length of a record frame's header in bytes.
pub const FRAME_HEADER_LEN: u64 = 16;
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
        "segment format version {found} is not supported (this build reads version {FORMAT_VERSION}); \
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
        b[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
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
        if version != FORMAT_VERSION {
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
    let mut crc = crc32c::crc32c(&len_bytes);
    crc = crc32c::crc32c_append(crc, &time_bytes);
    crc = crc32c::crc32c_append(crc, payload);
    out.extend_from_slice(&len_bytes);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&time_bytes);
    out.extend_from_slice(payload);
}

/// Frames from this many bytes on are checked with `crc_fast` (folding with carry-less
/// multiplies), shorter ones with `crc32c` (one `crc32` instruction per 8 bytes), which
/// is as fast or faster below it on x86-64.
const FOLD_FROM_BYTES: usize = 512;

/// A frame's CRC: CRC32C of its bytes 0..4 (`len`) followed by its bytes 8.. (`rest`:
/// the time and the payload).
pub(crate) fn frame_crc(len: &[u8], rest: &[u8]) -> u32 {
    let head = crc32c::crc32c(len);
    if rest.len() < FOLD_FROM_BYTES {
        return crc32c::crc32c_append(head, rest);
    }
    // Both continue from the register value before the final inversion.
    let mut digest =
        crc_fast::Digest::new_with_init_state(crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(!head));
    digest.update(rest);
    digest.finalize() as u32
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
    /// Reading failed.
    #[error("reading the segment failed: {0}")]
    Io(#[from] io::Error),
}

/// One frame's metadata; the payload is in the reader's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameMeta {
    /// Append time in ms since the UNIX epoch.
    pub time_ms: u64,
    /// Frame length including its header.
    pub frame_len: u64,
}

/// Reads frames one by one from a byte stream whose remaining length is known.
///
/// It never reads past `remaining`, never allocates more than the verified frame length,
/// and reuses its payload buffer.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    remaining: u64,
    payload: Vec<u8>,
}

impl<R: Read> FrameReader<R> {
    /// A reader over `inner`, which holds exactly `remaining` more bytes of frames.
    pub fn new(inner: R, remaining: u64) -> Self {
        FrameReader {
            inner,
            remaining,
            payload: Vec::new(),
        }
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> u64 {
        self.remaining
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
        if self.remaining < FRAME_HEADER_LEN {
            return Err(FrameError::Torn {
                needed: FRAME_HEADER_LEN,
                remaining: self.remaining,
            });
        }
        let mut header = [0u8; FRAME_HEADER_LEN as usize];
        self.inner.read_exact(&mut header)?;
        self.remaining -= FRAME_HEADER_LEN;
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
        let mut computed = crc32c::crc32c(&header[0..4]);
        computed = crc32c::crc32c_append(computed, &header[8..16]);
        computed = crc32c::crc32c_append(computed, &self.payload);
        if computed != stored {
            return Err(FrameError::Crc { stored, computed });
        }
        Ok(Some(FrameMeta {
            time_ms: u64::from_le_bytes(arr(&header[8..16])),
            frame_len: FRAME_HEADER_LEN + u64::from(len),
        }))
    }
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
    let mut reader = FrameReader::new(body, body.len() as u64);
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
    b[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
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
    if u16::from_le_bytes(arr(&b[8..10])) != FORMAT_VERSION {
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
        };
        let b = h.encode();
        assert_eq!(SegmentHeader::decode(&b), Ok(h));
        let mut bad = b;
        bad[20] ^= 1;
        assert!(matches!(
            SegmentHeader::decode(&bad),
            Err(HeaderError::Crc { .. })
        ));
        let mut v2 = b;
        v2[8] = 2;
        assert_eq!(
            SegmentHeader::decode(&v2),
            Err(HeaderError::Version { found: 2 })
        );
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
