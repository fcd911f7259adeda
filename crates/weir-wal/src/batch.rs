//! [`Batch`]: records encoded into frames by the appender, written as one piece.

use crate::format::{
    BatchMark, FrameReader, MARK_LEN, MAX_RECORD_BYTES, encode_frame, encode_frame_with,
};

/// A batch of records, already framed (length, CRC, time, payload), ready to append.
///
/// Encoding (and CRC computation) happens on the appender's side, so the writer thread
/// only writes and fsyncs, after filling in the batch mark in front of the frames (24
/// bytes: the offsets it gives the batch, see [`format`](crate::format)). All records
/// of a batch carry the batch's append time.
///
/// # Examples
///
/// ```
/// use weir_wal::Batch;
///
/// let mut batch = Batch::with_time_ms(1_700_000_000_000);
/// batch.push(b"first").unwrap();
/// batch.push(b"second").unwrap();
/// assert_eq!(batch.len(), 2);
/// assert_eq!(batch.encoded_len(), 24 + 2 * 16 + 5 + 6);
/// let payloads: Vec<Vec<u8>> = batch.payloads().collect();
/// assert_eq!(payloads, [b"first".to_vec(), b"second".to_vec()]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    buf: Vec<u8>,
    records: u64,
    time_ms: u64,
}

/// A record larger than [`MAX_RECORD_BYTES`](crate::format::MAX_RECORD_BYTES).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "record of {len} bytes exceeds the maximum record size of {MAX_RECORD_BYTES} bytes; split it"
)]
pub struct RecordTooLarge {
    /// The record's length.
    pub len: usize,
}

impl Batch {
    /// An empty batch stamped with the current wall-clock time.
    pub fn new() -> Self {
        Batch::with_time_ms(crate::clock::now_ms())
    }

    /// An empty batch stamped with `time_ms` (ms since the UNIX epoch).
    pub fn with_time_ms(time_ms: u64) -> Self {
        Batch {
            buf: vec![0; MARK_LEN as usize],
            records: 0,
            time_ms,
        }
    }

    /// An empty batch stamped with the current wall-clock time, with room for
    /// `bytes` of frames before it grows (a source that fills batches to a known size
    /// allocates each once).
    pub fn with_capacity(bytes: usize) -> Self {
        let mut buf = Vec::with_capacity(MARK_LEN as usize + bytes);
        buf.resize(MARK_LEN as usize, 0);
        Batch {
            buf,
            records: 0,
            time_ms: crate::clock::now_ms(),
        }
    }

    /// Appends a record.
    ///
    /// # Errors
    ///
    /// [`RecordTooLarge`] if the payload exceeds the maximum record size.
    pub fn push(&mut self, payload: &[u8]) -> Result<(), RecordTooLarge> {
        if payload.len() > MAX_RECORD_BYTES as usize {
            return Err(RecordTooLarge { len: payload.len() });
        }
        encode_frame(&mut self.buf, self.time_ms, payload);
        self.records += 1;
        Ok(())
    }

    /// Appends a record that `write` writes straight into the batch (after its frame
    /// header, which is then filled in): no copy of the record is made.
    ///
    /// # Errors
    ///
    /// [`RecordTooLarge`] if what `write` wrote exceeds the maximum record size (it is
    /// taken back out).
    pub fn push_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Result<(), RecordTooLarge> {
        encode_frame_with(
            &mut self.buf,
            self.time_ms,
            MAX_RECORD_BYTES as usize,
            write,
        )
        .map_err(|len| RecordTooLarge { len })?;
        self.records += 1;
        Ok(())
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.records
    }

    /// Whether the batch has no records.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Bytes the batch takes in a segment (its mark and frame headers included).
    pub fn encoded_len(&self) -> u64 {
        self.buf.len() as u64
    }

    /// The append time of every record, in ms since the UNIX epoch.
    pub fn time_ms(&self) -> u64 {
        self.time_ms
    }

    /// Empties the batch, keeping its buffer, and restamps it with `time_ms`.
    pub fn clear(&mut self, time_ms: u64) {
        self.buf.truncate(MARK_LEN as usize);
        self.records = 0;
        self.time_ms = time_ms;
    }

    /// The payloads, in order (for a batch handed back by a refused append).
    pub fn payloads(&self) -> impl Iterator<Item = Vec<u8>> + '_ {
        let frames = &self.buf[MARK_LEN as usize..];
        let mut reader = FrameReader::new(frames, frames.len() as u64);
        std::iter::from_fn(move || match reader.next_frame() {
            Ok(Some(_)) => Some(reader.payload().to_vec()),
            _ => None,
        })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Fills in the mark: the batch's records get offsets from `first` on. Batches hold
    /// at most `u32::MAX` bytes (`max_pending_bytes` is bounded so).
    pub(crate) fn set_first_offset(&mut self, first: u64) {
        let frames = self.buf.len() - MARK_LEN as usize;
        let mark = BatchMark {
            first,
            records: u32::try_from(self.records).unwrap_or(u32::MAX),
            bytes: u32::try_from(frames).unwrap_or(u32::MAX),
        };
        self.buf[..MARK_LEN as usize].copy_from_slice(&mark.encode());
    }
}

impl Default for Batch {
    fn default() -> Self {
        Batch::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_written_in_place_is_the_same_frame_as_one_pushed() {
        let mut pushed = Batch::with_time_ms(7);
        let mut written = Batch::with_time_ms(7);
        for payload in [&b"first"[..], b"", &[9u8; 700]] {
            pushed.push(payload).unwrap();
            written
                .push_with(|buf| buf.extend_from_slice(payload))
                .unwrap();
        }
        assert_eq!(pushed, written);
        let len = written.encoded_len();
        let too_large =
            written.push_with(|buf| buf.resize(buf.len() + MAX_RECORD_BYTES as usize + 1, 0));
        assert_eq!(
            too_large,
            Err(RecordTooLarge {
                len: MAX_RECORD_BYTES as usize + 1
            })
        );
        assert_eq!(
            (written.len(), written.encoded_len()),
            (3, len),
            "taken back out"
        );
    }
}
