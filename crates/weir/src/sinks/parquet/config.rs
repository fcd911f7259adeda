//! `type = "parquet"`: its keys and its bounds, and the row-group settings the
//! object-store sink shares.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::keys::units::string_enum;
use crate::keys::{Bounds, ByteSize, Section};
use crate::sinks::SinkKeys;
use crate::sinks::layout::Partitioning;
use crate::sinks::rotate::{DEFAULT_ROTATE_AGE, Rotate, parse_rotate};
use crate::sinks::schema::SchemaConfig;

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
    /// `row_group_rows`: rows per row group.
    pub row_group_rows: NonZeroU32,
    /// `row_group_bytes`: bytes a row group may buffer before it is flushed.
    pub row_group_bytes: ByteSize,
    /// `compression`: column compression.
    pub compression: Compression,
}

/// `type = "parquet"`: files written under a temporary name, then renamed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParquetConfig {
    /// `path`: the output directory.
    pub path: PathBuf,
    /// `rotate`: when a file is closed and the next one started.
    pub rotate: Rotate,
    /// Row groups and compression.
    #[serde(flatten)]
    pub encoding: ParquetEncoding,
    /// Typed columns, when a `schema` is given.
    pub schema: Option<SchemaConfig>,
    /// `layout` and `max_open_partitions`: with a layout, files go in its folders under
    /// `path`, written by the object-store sink's engine over the directory (a journal,
    /// several files open).
    #[serde(flatten, skip_serializing_if = "Partitioning::is_default")]
    pub partitioning: Partitioning,
}

impl SinkKeys for ParquetConfig {
    const TYPE: &'static str = "parquet";
    const ABOUT: &'static str = "Parquet files, written under a temporary name and renamed once closed; rotated by size, age and the WAL they pin.";

    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let path = s
            .key("path", "Output directory (the sink's own).")
            .example("./weir-out/lake")
            .req("the output directory");
        let rotate = parse_rotate(s, Some(DEFAULT_ROTATE_AGE), true);
        let (row_group_rows, row_group_bytes) = parse_row_groups(s, true);
        let compression = s
            .key("compression", "Column compression.")
            .or(Compression::Zstd);
        let schema = SchemaConfig::parse(s, true, "");
        let partitioning = Partitioning::parse(
            s,
            "every file in `path`, named `<sink>-<first offset>.parquet`, one open at a time",
            schema
                .as_ref()
                .and_then(|schema| schema.event_time.as_ref()),
        );
        Some(Self {
            rotate,
            schema,
            partitioning,
            encoding: ParquetEncoding {
                row_group_rows,
                row_group_bytes,
                compression,
            },
            path: path?,
        })
    }

    fn bounds(&self, bounds: &mut Bounds<'_>) {
        if self.partitioning.layout.is_some() {
            return self.as_object_store().bounds(bounds);
        }
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

    fn early_close_note(&self, name: &str, max_disk: u64) -> Option<String> {
        crate::sinks::rotate::early_close_note(name, "file", &self.rotate, max_disk, None)
    }
}

/// Reads `row_group_rows` and `row_group_bytes`, declared whether or not they `apply`
/// (an object-store sink writing NDJSON refuses them).
pub fn parse_row_groups(s: &mut Section<'_>, apply: bool) -> (NonZeroU32, ByteSize) {
    const ONLY_PARQUET: &str = "only applies to format = \"parquet\"";
    let rows = s
        .key("row_group_rows", "Rows per Parquet row group.")
        .only_if(apply, ONLY_PARQUET)
        .or(NonZeroU32::new(65_536).expect("65536 > 0"));
    let bytes = s
        .key(
            "row_group_bytes",
            "Bytes a Parquet row group may buffer before it is flushed.",
        )
        .only_if(apply, ONLY_PARQUET)
        .or(ByteSize::mib(8));
    (rows, bytes)
}

impl ParquetConfig {
    /// The object-store sink that writes this sink's files when it has a layout: a
    /// `file://` store over `path` (each file written under a temporary name, fsynced
    /// and renamed), with the object-store sink's journal, so that several files can be
    /// open at once and every record is in exactly one of them across crashes.
    pub fn as_object_store(&self) -> crate::sinks::object_store::ObjectStoreConfig {
        use crate::sinks::object_store::{Format, Location, NdjsonCompression, ObjectStoreConfig};
        ObjectStoreConfig {
            url: format!("file://{}", self.path.display()),
            location: Location::File {
                dir: self.path.clone(),
            },
            format: Format::Parquet,
            ndjson_compression: NdjsonCompression::None,
            upload_concurrency: NonZeroU32::new(2).expect("2 > 0"),
            part_size: ByteSize::mib(8),
            timeout: crate::keys::Duration::secs(30),
            max_attempts: NonZeroU32::new(6).expect("6 > 0"),
            endpoint: None,
            region: None,
            allow_http: false,
            path_style: true,
            rotate: self.rotate,
            parquet: Some(self.encoding),
            schema: self.schema.clone(),
            line: crate::record::Line::Envelope,
            partitioning: self.partitioning.clone(),
        }
    }
}
