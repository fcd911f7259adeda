//! What a sink driver asks of a sink: the [`Sink`] trait, the batches it hands over and
//! what the sink answers.
//!
//! The driver ([`super::driver`]) reads the sink's cursor, decodes the records of the
//! sink's `inputs` and hands them to the sink in [`SinkBatch`]es. A sink answers with
//! the offset up to which everything is stored ([`Written::durable_through`]); only then
//! does the driver commit the cursor.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use crate::record::{DecodeError, EncodeError, Record, RecordRef};

/// Records read from the WAL for one sink, in offset order.
#[derive(Debug, Default)]
pub struct SinkBatch {
    /// The records of the sink's inputs (records of other sources are already skipped),
    /// decoded; empty for a sink that takes them in their WAL form
    /// ([`Sink::takes_wire`]), which finds them in [`SinkBatch::wire`].
    pub records: Vec<Record>,
    /// The same records in their WAL form, checked but not decoded, for a sink that
    /// encodes straight from them ([`Sink::takes_wire`]); empty otherwise.
    pub wire: Vec<WireRecord>,
    /// The offset after the last record read (skipped ones included): once the sink has
    /// stored `records`, the cursor may move here.
    pub next_offset: u64,
    /// Payload bytes of `records`.
    pub bytes: u64,
    /// Where each of `records` is in the WAL (same order and length): sinks that cut
    /// their output at recorded offsets (the object-store sink) need them.
    pub positions: Vec<Position>,
}

impl SinkBatch {
    /// Records held, decoded or in their WAL form.
    pub fn len(&self) -> usize {
        self.records.len() + self.wire.len()
    }

    /// Whether it holds no record (it may still move the cursor).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A record of a sink's inputs as the WAL holds it: the driver checked its lengths
/// ([`RecordRef::payload_at`]); a sink reads it in place with
/// [`WireRecord::view`], which costs no allocation (a decoded [`Record`] allocates its
/// key and attributes, and frees them on the thread that drops it).
#[derive(Debug, Clone)]
pub struct WireRecord {
    /// Its place in the WAL.
    pub position: Position,
    /// The record's WAL form (a slice of the chunk the WAL reader read).
    pub bytes: bytes::Bytes,
    /// Where its payload starts in `bytes` (it runs to the end).
    pub payload_at: usize,
}

impl WireRecord {
    /// Checks the lengths of the record in `bytes` and keeps it.
    ///
    /// # Errors
    ///
    /// [`DecodeError`] if the bytes are not one record by their lengths.
    pub fn new(position: Position, bytes: bytes::Bytes) -> Result<WireRecord, DecodeError> {
        let payload_at = RecordRef::payload_at(&bytes)?;
        Ok(WireRecord {
            position,
            bytes,
            payload_at,
        })
    }

    /// The record, read in place.
    ///
    /// # Errors
    ///
    /// [`DecodeError`] if a text field is not UTF-8 (weir writes only UTF-8 there, and
    /// the WAL's CRC protects it: not expected; the sink refuses such a record).
    pub fn view(&self) -> Result<RecordRef<'_>, DecodeError> {
        RecordRef::parse(&self.bytes)
    }

    /// The payload's length.
    pub fn payload_len(&self) -> usize {
        self.bytes.len() - self.payload_at
    }

    /// The payload, sharing the WAL chunk's buffer.
    pub fn payload(&self) -> bytes::Bytes {
        self.bytes.slice(self.payload_at..)
    }

    /// The record decoded (for the quarantine, which takes [`Record`]s).
    ///
    /// # Errors
    ///
    /// As [`WireRecord::view`].
    pub fn decode(&self) -> Result<Record, DecodeError> {
        Record::decode_with(self.bytes.clone(), |s| Arc::from(s))
    }
}

/// A record's place in the WAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Its offset.
    pub offset: u64,
    /// When the WAL appended it, in milliseconds since the Unix epoch: the same on
    /// every replay, unlike the clock at the sink.
    pub time_ms: u64,
}

/// What a write achieved.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// Everything below this offset is stored; `None` if nothing new became durable.
    pub durable_through: Option<u64>,
    /// Records the sink could not encode (not written, counted, reported).
    pub unencodable: u64,
    /// Bytes the sink holds in memory after the write (a Parquet row group being
    /// built), for `/status`.
    pub buffered_bytes: u64,
}

/// Why a sink write failed; the driver retries the batch with capped backoff.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// A filesystem operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The sink dropped records it had accepted but not yet made durable (the Parquet
    /// writer abandons its open file), so the driver must read again from the sink's
    /// committed cursor ([`SinkError::needs_rewind`]).
    #[error("{0}")]
    Abandoned(String),
    /// A blocking task was cancelled by runtime shutdown.
    #[error("the sink's blocking task was cancelled by runtime shutdown")]
    Cancelled,
    /// The destination refuses the sink for a reason retrying soon will not fix (bad
    /// credentials, a missing bucket, a 403): the sink shows `failed` with this
    /// message, logged at ERROR, and the driver retries only every `retry.max`, so
    /// that fixing the destination resumes it without a restart. Its cursor stays
    /// where it is; the WAL's `required` and `max_lag` decide what that does upstream.
    #[error("{0}")]
    Permanent(String),
}

impl SinkError {
    /// Whether the sink lost records it had accepted but not made durable, so that its
    /// driver must read again from the committed cursor instead of retrying the batch.
    pub fn needs_rewind(&self) -> bool {
        matches!(self, SinkError::Abandoned(_))
    }

    /// Whether retrying soon cannot help ([`SinkError::Permanent`]).
    pub fn is_permanent(&self) -> bool {
        matches!(self, SinkError::Permanent(_))
    }

    /// A failed filesystem operation.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SinkError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// A record that could not be encoded, and why: the driver hands it to the quarantine.
#[derive(Debug)]
pub struct Unencodable {
    /// The record.
    pub record: Record,
    /// Why.
    pub reason: EncodeError,
}

/// A running sink, as its driver uses it. Each sink type implements it in its
/// `sinks/<type>/shell.rs`; the registry (`sinks/mod.rs`) dispatches to them.
pub trait Sink: Send + 'static {
    /// Whether it takes its records in their WAL form ([`SinkBatch::wire`]) rather than
    /// decoded ([`SinkBatch::records`]): a sink that encodes each record straight into
    /// its output spends no allocation per record then. Asked once per driver run.
    fn takes_wire(&self) -> bool {
        false
    }

    /// Stores a batch; records it cannot encode are pushed to `rejects`.
    ///
    /// # Errors
    ///
    /// [`SinkError`]: nothing of the batch counts as stored; the driver retries it (or,
    /// after [`SinkError::Abandoned`], reads again from the committed cursor).
    ///
    /// # Cancel safety
    ///
    /// Cancelling may leave part of the batch written but not acknowledged; a retry
    /// writes it again (at-least-once). Nothing acknowledged is lost.
    fn write(
        &mut self,
        batch: &Arc<SinkBatch>,
        rejects: &mut Vec<Unencodable>,
    ) -> impl Future<Output = Result<Written, SinkError>> + Send;

    /// Time-based work (rotation by age); called about once a second. Returns a new
    /// durable offset if the work made one.
    ///
    /// # Errors
    ///
    /// [`SinkError`] if closing a file failed.
    ///
    /// # Cancel safety
    ///
    /// Implementations finish their work on a blocking thread either way.
    fn tick(&mut self) -> impl Future<Output = Result<Option<u64>, SinkError>> + Send {
        async { Ok(None) }
    }

    /// Closes what is open so that everything written is durable (shutdown).
    ///
    /// # Errors
    ///
    /// [`SinkError`] if closing a file failed.
    ///
    /// # Cancel safety
    ///
    /// As [`Sink::tick`].
    fn finish(&mut self) -> impl Future<Output = Result<Option<u64>, SinkError>> + Send {
        async { Ok(None) }
    }

    /// Waits until more of what was handed to [`Sink::write`] is stored, and returns
    /// the new durable offset. For sinks that work concurrently: their `write` hands a
    /// batch to uploads or requests in flight and returns before it is stored (waiting
    /// only while all of them are busy), and this reports each completion, released in
    /// WAL order. The default never resolves (a sink whose `write` reports its own
    /// durability).
    ///
    /// # Errors
    ///
    /// As [`Sink::write`]: after [`SinkError::Abandoned`] the driver reads again from
    /// the committed cursor; other errors mark the sink `failed` until it recovers.
    ///
    /// # Cancel safety
    ///
    /// Must be cancel-safe: the driver polls it next to new batches and drops it when
    /// one arrives. Nothing may be lost by dropping it.
    fn settled(&mut self) -> impl Future<Output = Result<Option<u64>, SinkError>> + Send {
        std::future::pending()
    }

    /// Tells the sink where its cursor resumes (before the first write, and after a
    /// rewind).
    fn resume_at(&mut self, next_offset: u64) {
        let _ = next_offset;
    }

    /// Why the sink is failing although its calls return: work it carries on in the
    /// background (uploads being retried) keeps failing. `None` once that work
    /// succeeds again. The driver shows the sink `failed` with this reason meanwhile,
    /// rather than `running` because a batch was handed over.
    fn failing(&self) -> Option<String> {
        None
    }
}
