//! Sinks: where records go after the WAL.
//!
//! A sink driver (`runtime::driver`) reads the sink's cursor, decodes the records of the
//! sink's `inputs` and hands them to a [`Sink`] in [`SinkBatch`]es. A sink answers with
//! the offset up to which everything is stored ([`Written::durable_through`]); only then
//! does the driver commit the cursor. Each sink lives in its own folder with the same
//! file names: `mod.rs` (the async shell) and `core.rs` (its sans-IO policy).
//!
//! | sink | stores | durable when |
//! |---|---|---|
//! | [`file`] | NDJSON files, rotated by bytes and age | the batch is written and fsynced |
//! | [`parquet`] (through [`parquet_shell`]) | Parquet files, rotated by bytes and age | the file holding the batch is closed and renamed |
//! | [`blackhole`] | nothing; counts, optionally at a limited rate | at once |

pub mod blackhole;
pub mod file;
#[allow(
    unused_imports,
    reason = "the Parquet writer's public API, partly used by the runtime"
)]
pub mod parquet;
pub mod parquet_shell;

use std::path::PathBuf;

use crate::config::{SinkConfig, SinkKind};
use crate::record::{EncodeError, Record};

/// Records read from the WAL for one sink, in offset order.
#[derive(Debug, Default)]
pub struct SinkBatch {
    /// The records of the sink's inputs (records of other sources are already skipped).
    pub records: Vec<Record>,
    /// The offset after the last record read (skipped ones included): once the sink has
    /// stored `records`, the cursor may move here.
    pub next_offset: u64,
    /// Payload bytes of `records`.
    pub bytes: u64,
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
    /// The Parquet writer failed; it abandoned its open file, so the driver must read
    /// again from the sink's committed cursor ([`SinkError::needs_rewind`]).
    #[error("parquet: {0}")]
    Parquet(String),
    /// This build of `weir run` cannot drive the sink type.
    #[error(
        "sinks.{name}.type: {kind:?} sinks are not supported by `weir run` in this build; \
         use a \"file\" or \"blackhole\" sink"
    )]
    Unsupported {
        /// The sink's name.
        name: String,
        /// Its type.
        kind: &'static str,
    },
    /// A blocking task was cancelled by runtime shutdown.
    #[error("the sink's blocking task was cancelled by runtime shutdown")]
    Cancelled,
}

impl SinkError {
    /// Whether the sink lost records it had accepted but not made durable, so that its
    /// driver must read again from the committed cursor instead of retrying the batch.
    pub fn needs_rewind(&self) -> bool {
        matches!(self, SinkError::Parquet(_))
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        SinkError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// One configured sink, ready to write.
#[derive(Debug)]
pub enum Sink {
    /// NDJSON files.
    File(file::FileSink),
    /// Parquet files.
    Parquet(parquet_shell::ParquetSink),
    /// Counts and discards.
    Blackhole(blackhole::BlackholeSink),
}

/// A record that could not be encoded, and why: the driver hands it to the quarantine.
#[derive(Debug)]
pub struct Unencodable {
    /// The record.
    pub record: Record,
    /// Why.
    pub reason: EncodeError,
}

impl Sink {
    /// Opens the sink `name` as configured (blocking file I/O: call it from a blocking
    /// context). `footer` is what Parquet files record about the configuration.
    ///
    /// # Errors
    ///
    /// [`SinkError::Unsupported`] for sink types this build does not drive;
    /// [`SinkError::Io`] or [`SinkError::Parquet`] if its directory cannot be prepared.
    pub fn open(
        name: &str,
        config: &SinkConfig,
        footer: &parquet::FooterMetadata,
    ) -> Result<Sink, SinkError> {
        match &config.kind {
            SinkKind::File(file) => Ok(Sink::File(file::FileSink::open(file)?)),
            SinkKind::Blackhole(b) => Ok(Sink::Blackhole(blackhole::BlackholeSink::new(b))),
            SinkKind::Parquet(p) => Ok(Sink::Parquet(parquet_shell::ParquetSink::open(
                name,
                p,
                footer.clone(),
            )?)),
            SinkKind::ObjectStore(_) => Err(unsupported(name, "object_store")),
            SinkKind::Http(_) => Err(unsupported(name, "http")),
        }
    }

    /// Stores a batch; records it cannot encode are pushed to `rejects`.
    ///
    /// # Errors
    ///
    /// [`SinkError`]: nothing of the batch counts as stored; the driver retries it.
    ///
    /// # Cancel safety
    ///
    /// Cancelling may leave part of the batch written but not acknowledged; a retry
    /// writes it again (at-least-once). Nothing acknowledged is lost.
    pub async fn write(
        &mut self,
        batch: &std::sync::Arc<SinkBatch>,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<Written, SinkError> {
        match self {
            Sink::File(s) => s.write(batch, rejects).await,
            Sink::Parquet(s) => s.write(batch).await,
            Sink::Blackhole(s) => Ok(s.write(batch).await),
        }
    }

    /// Time-based work (rotation by age); called about once a second.
    ///
    /// # Errors
    ///
    /// [`SinkError`] if closing a file failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the work finishes on a blocking thread either way.
    pub async fn tick(&mut self) -> Result<Option<u64>, SinkError> {
        match self {
            Sink::File(s) => s.tick().await,
            Sink::Parquet(s) => s.tick().await,
            Sink::Blackhole(_) => Ok(None),
        }
    }

    /// Closes what is open so that everything written is durable (shutdown).
    ///
    /// # Errors
    ///
    /// [`SinkError`] if closing a file failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe as [`Sink::tick`].
    pub async fn finish(&mut self) -> Result<Option<u64>, SinkError> {
        match self {
            Sink::File(s) => s.finish().await,
            Sink::Parquet(s) => s.finish().await,
            Sink::Blackhole(_) => Ok(None),
        }
    }

    /// Tells the sink where its cursor resumes (before the first write, and after a
    /// rewind).
    pub fn resume_at(&mut self, next_offset: u64) {
        if let Sink::Parquet(s) = self {
            s.resume_at(next_offset);
        }
    }

    /// The sink's type, as configured.
    pub fn kind(&self) -> &'static str {
        match self {
            Sink::File(_) => "file",
            Sink::Parquet(_) => "parquet",
            Sink::Blackhole(_) => "blackhole",
        }
    }
}

fn unsupported(name: &str, kind: &'static str) -> SinkError {
    SinkError::Unsupported {
        name: name.to_owned(),
        kind,
    }
}
