//! `type = "parquet"`: its keys and its bounds, and the row-group settings the
//! object-store sink shares.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::keys::units::string_enum;
use crate::keys::{Bounds, ByteSize, Section};
use crate::sinks::SinkKeys;
use crate::sinks::rotate::{DEFAULT_ROTATE_AGE, Rotate, parse_rotate};

/// Parquet column compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Zstandard (default).
    Zstd,
    /// Snappy.
    Snappy,
    /// Uncompressed.
    None,
}

string_enum!(Compression { "zstd" => Zstd, "snappy" => Snappy, "none" => None });

/// Row-group and compression settings of a Parquet writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ParquetEncoding {
    /// Rows per row group. Default 65536.
    pub row_group_rows: NonZeroU32,
    /// Bytes a row group may buffer before it is flushed. Default 8 MiB.
    pub row_group_bytes: ByteSize,
    /// Column compression. Default zstd.
    pub compression: Compression,
}

/// `type = "parquet"`: files written under a temporary name, then renamed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParquetConfig {
    /// Output directory. Required.
    pub path: PathBuf,
    /// Rotation. Default 128 MiB or 5 min.
    pub rotate: Rotate,
    /// Row groups and compression.
    #[serde(flatten)]
    pub encoding: ParquetEncoding,
}

impl SinkKeys for ParquetConfig {
    const TYPE: &'static str = "parquet";

    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let path = s.req("path", "the output directory");
        Some(Self {
            rotate: parse_rotate(s, Some(DEFAULT_ROTATE_AGE), true),
            encoding: parse_encoding(s),
            path: path?,
        })
    }

    fn bounds(&self, bounds: &mut Bounds<'_>) {
        bounds.add(
            "encoder",
            Some(1),
            self.encoding.row_group_bytes.bytes(),
            format!(
                "the open file's row group: row_group_bytes {} (one file is open at a time)",
                self.encoding.row_group_bytes
            ),
        );
    }

    fn directory(&self) -> Option<&Path> {
        Some(&self.path)
    }
}

/// Reads `row_group_rows`, `row_group_bytes` and `compression`.
pub fn parse_encoding(s: &mut Section<'_>) -> ParquetEncoding {
    ParquetEncoding {
        row_group_rows: s.or(
            "row_group_rows",
            NonZeroU32::new(65_536).expect("65536 > 0"),
        ),
        row_group_bytes: s.or("row_group_bytes", ByteSize::mib(8)),
        compression: s.or("compression", Compression::Zstd),
    }
}
