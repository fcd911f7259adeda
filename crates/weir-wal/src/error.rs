//! Errors of opening, appending, reading and committing.

use std::io;
use std::path::PathBuf;

use crate::batch::Batch;
use crate::format::HeaderError;

/// Why the WAL could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// A filesystem operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Another process (or another `Wal` in this one) holds the directory's lock.
    #[error(
        "the WAL directory {path} is locked by another process; stop it or use another directory"
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// A segment was written by a newer (or unknown) format version.
    #[error("segment {path}: {source}")]
    UnsupportedVersion {
        /// The segment file.
        path: PathBuf,
        /// The header error (always [`HeaderError::Version`]).
        source: HeaderError,
    },
}

impl OpenError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        OpenError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// Why an append was refused. Refused batches are handed back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppendError {
    /// `on_full = reject` and the batch does not fit the disk budget now.
    #[error(
        "the WAL disk budget is full ({used} of {max_disk} bytes used, batch needs {needed}); \
         retry after the sinks catch up"
    )]
    Full {
        /// The refused batch.
        batch: Batch,
        /// Bytes on disk.
        used: u64,
        /// The budget.
        max_disk: u64,
        /// Bytes the batch needed.
        needed: u64,
    },
    /// `on_full = reject` and the filesystem holding the log has no room for the batch
    /// (its reserve kept back), although `max_disk` would: the disk is smaller than the
    /// budget, or something else filled it. Nothing was written; the log is not poisoned
    /// and takes appends again once space returns.
    #[error(
        "the WAL's filesystem is full ({room} bytes left before its {reserve}-byte reserve, batch needs {needed}); \
         retry after the sinks catch up or disk space is freed (max_disk is larger than the disk)"
    )]
    NoSpace {
        /// The refused batch.
        batch: Batch,
        /// Bytes the filesystem could still take.
        room: u64,
        /// The reserve kept back.
        reserve: u64,
        /// Bytes the batch needed.
        needed: u64,
    },
    /// `on_full = reject` and the WAL could not open its next segment for want of a
    /// resource (disk space, inodes, file descriptors). Nothing was written; the log is
    /// not poisoned and opens the segment once the resource returns.
    #[error("the WAL could not open its next segment ({cause}); retry later")]
    Resource {
        /// The refused batch.
        batch: Batch,
        /// The OS error, with the file.
        cause: String,
    },
    /// The batch is larger than the largest batch the WAL accepts.
    #[error("batch of {len} bytes exceeds the maximum of {max} bytes; split it")]
    TooLarge {
        /// The refused batch.
        batch: Batch,
        /// Its encoded length.
        len: u64,
        /// [`WalConfig::max_batch_bytes`](crate::WalConfig::max_batch_bytes).
        max: u64,
    },
    /// Too many appenders are already waiting for pending room.
    #[error("too many appenders are waiting for the WAL; retry later")]
    Busy(Batch),
    /// A write or fsync failed earlier; the log accepts no more writes.
    #[error(
        "the WAL is poisoned after a failed write or fsync ({cause}); nothing more is written. \
         Fix the disk, then restart: recovery keeps every acknowledged record"
    )]
    Poisoned {
        /// The first failure.
        cause: String,
    },
    /// The batch was handed to the disk (wholly or in part) and then the write or the
    /// fsync failed, or the writer stopped before answering: it may or may not be
    /// durable. Recovery at the next start keeps whatever whole frames reached the
    /// disk, so some or all of its records may still be delivered; the log is poisoned.
    #[error(
        "the WAL failed after this batch was written and before it was made durable \
         ({cause}); its records may or may not be delivered after a restart"
    )]
    InDoubt {
        /// The failure.
        cause: String,
    },
    /// The WAL is shutting down.
    #[error("the WAL is closed")]
    Closed(Batch),
    /// Not written, so that nothing is written out of order: an earlier batch of the
    /// same [`Chain`](crate::Chain) was refused. Resubmit it, in order, after the
    /// earlier one (see [`Chain::restart`](crate::Chain::restart)).
    #[error("not written: an earlier batch of the same ordered chain was refused")]
    Behind(Batch),
}

impl AppendError {
    /// Whether the batch may have reached the log (only [`AppendError::InDoubt`]):
    /// every other error means none of its records was written.
    pub fn may_be_durable(&self) -> bool {
        matches!(self, AppendError::InDoubt { .. })
    }
}

/// Why a read failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// Reading a segment failed.
    #[error("reading segment {path}: {source}")]
    Io {
        /// The segment.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The blocking read task was cancelled by the runtime (shutdown).
    #[error("the read was cancelled by runtime shutdown")]
    Cancelled,
}

/// Why a cursor commit failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// The offset is past what this reader has read.
    #[error(
        "commit to offset {requested} refused: the reader has only read up to {read}; \
         commit only offsets of records you have read"
    )]
    AheadOfRead {
        /// The offset asked for.
        requested: u64,
        /// The reader's position.
        read: u64,
    },
    /// Writing the cursor file failed; the previous position stays saved.
    #[error("saving cursor file {path}: {source}")]
    Io {
        /// The cursor file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The blocking task was cancelled by the runtime (shutdown).
    #[error("the commit was cancelled by runtime shutdown")]
    Cancelled,
}

/// A reader for this cursor could not be handed out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CursorError {
    /// No cursor of that name was declared in the config.
    #[error("no cursor named {0:?} was declared; add it to the WAL config")]
    Unknown(String),
    /// A reader for it is already out.
    #[error("cursor {0:?} already has a reader; drop it first")]
    InUse(String),
}
