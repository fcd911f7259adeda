//! What the tailer hands the source's task: chunks of records in the WAL's form, with
//! the positions they carry each file to.
//!
//! A chunk is one WAL batch (at most `batch_size` records and `batch_bytes`), the lines
//! that go to the quarantine instead (written durably before the batch is appended),
//! and, per file, the position every byte before which is then durable. Positions
//! advance in chunk order, so a file's saved position never passes a line that is not
//! yet durable.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use weir_wal::Batch;

use super::format::{Miss, Parsed, Parser};
use super::identity::{Fingerprint, Inode};
use super::status::{Counters, Shared};
use crate::quarantine::Rejected;

/// A file's identity as the position store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileUpdate {
    /// The tracker's id for the file.
    pub id: u64,
    /// Its path now.
    pub path: PathBuf,
    /// Its fingerprint now.
    pub fingerprint: Fingerprint,
    /// Its device and inode.
    pub inode: Inode,
    /// The saved entry (of an earlier run) this file was matched to, if any.
    pub replaces: Option<u64>,
}

/// One unit for the WAL.
#[derive(Debug, Default)]
pub struct Chunk {
    /// The records.
    pub batch: Batch,
    /// Records in `batch`.
    pub records: u64,
    /// Lines for the quarantine, written before `batch` is appended.
    pub rejected: Vec<Rejected>,
    /// Identity changes of files (new, renamed, re-fingerprinted), before `positions`.
    pub files: Vec<FileUpdate>,
    /// `(file id, position)`: once this chunk is durable, every byte before the
    /// position is; at most one per file.
    pub positions: Vec<(u64, u64)>,
    /// Files read to their end and closed.
    pub released: Vec<u64>,
}

impl Chunk {
    fn is_empty(&self) -> bool {
        self.records == 0
            && self.rejected.is_empty()
            && self.files.is_empty()
            && self.positions.is_empty()
            && self.released.is_empty()
    }
}

/// A record's attributes, sorted by name: `file.name`, `file.path`, `host` (standard
/// input's: `host`).
fn attributes<'a>(
    origin: &'a Origin,
    host: &'a str,
) -> impl Iterator<Item = (&'a str, &'a str)> + Clone {
    let file = origin.id.map(|_| {
        [
            ("file.name", origin.name.as_str()),
            ("file.path", origin.path.as_str()),
        ]
    });
    file.into_iter()
        .flatten()
        .chain(std::iter::once(("host", host)))
}

/// Where records come from: a file (with the id its position is saved under), or
/// standard input (no position).
#[derive(Debug, Clone)]
pub struct Origin {
    /// The file's id; `None` for standard input.
    pub id: Option<u64>,
    /// The record key and `file.path` attribute.
    pub path: String,
    /// The `file.name` attribute.
    pub name: String,
}

/// Builds chunks; see the [module docs](self).
pub struct Builder {
    source: Arc<str>,
    host: String,
    parser: Parser,
    max_line_bytes: usize,
    batch_records: u64,
    batch_bytes: u64,
    shared: Arc<Shared>,
    chunk: Chunk,
    /// Encoded bytes of the chunk's batch and rejected lines.
    bytes: u64,
    ready: VecDeque<Chunk>,
    scratch: Vec<u8>,
    now_ms: i64,
}

/// A builder's limits and attributes.
#[derive(Debug, Clone)]
pub struct Limits {
    /// `max_line_bytes`.
    pub max_line_bytes: usize,
    /// `batch_size`.
    pub batch_records: u64,
    /// `batch_bytes`.
    pub batch_bytes: u64,
}

impl Builder {
    /// A builder for source `source` on host `host`.
    pub fn new(
        source: Arc<str>,
        host: String,
        parser: Parser,
        limits: &Limits,
        shared: Arc<Shared>,
    ) -> Self {
        Builder {
            source,
            host,
            parser,
            max_line_bytes: limits.max_line_bytes,
            batch_records: limits.batch_records,
            batch_bytes: limits.batch_bytes,
            shared,
            chunk: Chunk {
                batch: Batch::with_capacity(
                    usize::try_from(limits.batch_bytes)
                        .unwrap_or(usize::MAX)
                        .saturating_add(64),
                ),
                ..Chunk::default()
            },
            bytes: 0,
            ready: VecDeque::new(),
            scratch: Vec::new(),
            now_ms: 0,
        }
    }

    /// The timestamp of the records built from now on.
    pub fn set_now(&mut self, now_ms: i64) {
        self.now_ms = now_ms;
    }

    fn count(&self, counter: fn(&Counters) -> &std::sync::atomic::AtomicU64) {
        self.shared.count(counter, 1);
    }

    /// A line (or multi-line record) of `origin` ending at `end`: parsed, then batched
    /// or sent to the quarantine.
    pub fn record(&mut self, origin: &Origin, line: &[u8], start: u64, end: u64) {
        let mut scratch = std::mem::take(&mut self.scratch);
        let payload = match self.parser.parse(line, &mut scratch) {
            Parsed::Payload(p) => Ok(p),
            Parsed::Kept(p, miss) => {
                self.count_miss(miss);
                Ok(p)
            }
            Parsed::Refused(reason, miss) => {
                self.count_miss(miss);
                Err(reason)
            }
        };
        match payload {
            Ok(payload) => self.append(origin, payload, start),
            Err(reason) => {
                let reason = format!("{reason}: offset {start} of {}", origin.path);
                self.reject(reason, line);
            }
        }
        self.scratch = scratch;
        if let Some(id) = origin.id {
            self.position(id, end);
        }
    }

    fn count_miss(&self, miss: Miss) {
        match miss {
            Miss::NotJson => self.count(|c| &c.not_json),
            Miss::Mismatch => self.count(|c| &c.mismatches),
        }
    }

    fn append(&mut self, origin: &Origin, payload: &[u8], start: u64) {
        // The record's WAL form: its size is known before it is written.
        let size = crate::record::encoded_len(
            &self.source,
            &origin.path,
            attributes(origin, &self.host),
            payload,
        ) as u64
            + 16;
        if self.chunk.records > 0 && self.bytes + size > self.batch_bytes {
            self.cut();
        }
        let attributes = attributes(origin, &self.host);
        let (source, now_ms) = (&self.source, self.now_ms);
        let pushed = self.chunk.batch.push_with(|buf| {
            crate::record::encode_parts(buf, source, &origin.path, now_ms, attributes, payload);
        });
        if let Err(e) = pushed {
            let reason = format!(
                "a record of {} bytes is larger than the WAL takes: offset {start} of {}",
                e.len, origin.path
            );
            self.reject(reason, payload);
            return;
        }
        self.chunk.records += 1;
        self.bytes += size;
        if self.chunk.records >= self.batch_records || self.bytes >= self.batch_bytes {
            self.cut();
        }
    }

    /// A line longer than `max_line_bytes` of `origin`: its head to the quarantine.
    pub fn long_line(&mut self, origin: &Origin, head: &[u8], start: u64, len: u64, end: u64) {
        self.count(|c| &c.long_lines);
        let reason = format!(
            "line longer than max_line_bytes = {}: {len} bytes at offset {start} of {}; its first {} bytes kept",
            self.max_line_bytes,
            origin.path,
            head.len()
        );
        self.reject(reason, head);
        if let Some(id) = origin.id {
            self.position(id, end);
        }
    }

    fn reject(&mut self, reason: String, bytes: &[u8]) {
        self.count(|c| &c.quarantined);
        self.bytes += bytes.len() as u64 + reason.len() as u64;
        self.chunk.rejected.push(Rejected {
            reason,
            payload: Bytes::copy_from_slice(bytes),
        });
        if self.bytes >= self.batch_bytes {
            self.cut();
        }
    }

    /// File `id` is durable up to `position` once this chunk is.
    pub fn position(&mut self, id: u64, position: u64) {
        match self.chunk.positions.iter_mut().find(|(i, _)| *i == id) {
            Some(entry) => entry.1 = position,
            None => self.chunk.positions.push((id, position)),
        }
    }

    /// A file's identity changed (or it is new).
    pub fn update(&mut self, update: FileUpdate) {
        self.chunk.files.retain(|f| f.id != update.id);
        self.chunk.files.push(update);
    }

    /// File `id` was read to its end and closed.
    pub fn release(&mut self, id: u64) {
        self.chunk.released.push(id);
    }

    /// Ends the chunk being built (if it holds anything): it is ready to send.
    pub fn cut(&mut self) {
        if !self.chunk.is_empty() {
            let next = Chunk {
                batch: Batch::with_capacity(self.batch_capacity()),
                ..Chunk::default()
            };
            self.ready
                .push_back(std::mem::replace(&mut self.chunk, next));
            self.bytes = 0;
        }
    }

    /// The bytes a batch is allocated with: all it holds before it is cut, so it is
    /// allocated once (and, below the allocator's mmap threshold, from memory the
    /// thread freed before rather than from new pages).
    fn batch_capacity(&self) -> usize {
        usize::try_from(self.batch_bytes)
            .unwrap_or(usize::MAX)
            .saturating_add(64)
    }

    /// The next chunk ready to send.
    pub fn pop_ready(&mut self) -> Option<Chunk> {
        self.ready.pop_front()
    }
}
