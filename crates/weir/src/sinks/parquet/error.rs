//! Errors of the Parquet sink.

use std::path::{Path, PathBuf};

/// Why a [`ParquetFileWriter`](super::ParquetFileWriter) call failed. The records of a
/// failed write are still the caller's (they are borrowed): re-send them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParquetSinkError {
    /// A file-system operation failed.
    #[error(
        "parquet sink: cannot {op} {path}: {source}; check the sink's path, permissions and free disk space"
    )]
    Io {
        /// What was being done (`create`, `fsync`, `rename`, ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Arrow conversion or Parquet encoding failed.
    #[error("parquet sink: encoding {path} failed: {source}")]
    Encode {
        /// The temporary file being written.
        path: PathBuf,
        /// The encoder's error.
        source: parquet::errors::ParquetError,
    },
    /// A batch's `last_offset` was below an earlier one.
    #[error(
        "parquet sink: expected WAL offsets that never go backwards, found last_offset {found} after {previous}; batches must be written in WAL order"
    )]
    OffsetRegression {
        /// The highest offset written before.
        previous: u64,
        /// The offending offset.
        found: u64,
    },
    /// The file-name prefix is unusable.
    #[error(
        "parquet sink: expected a file-name prefix without '/' or '\\' that does not start with '.', found {0:?}"
    )]
    Prefix(String),
}

impl ParquetSinkError {
    pub(super) fn io(op: &'static str, path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            op,
            path: path.to_owned(),
            source,
        }
    }

    pub(super) fn encode(path: &Path, source: parquet::errors::ParquetError) -> Self {
        Self::Encode {
            path: path.to_owned(),
            source,
        }
    }
}
