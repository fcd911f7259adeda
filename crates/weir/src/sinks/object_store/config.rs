//! `type = "object_store"`: its keys and its bounds. The sink itself is not built yet
//! (`weir validate` and `weir run` refuse the type); its keys are read so that a
//! configuration written for it is checked all the same.

use std::num::NonZeroU32;

use serde::Serialize;

use crate::keys::units::string_enum;
use crate::keys::{Bounds, ByteSize, Section, times};
use crate::sinks::parquet::{ParquetEncoding, parse_encoding};
use crate::sinks::rotate::{DEFAULT_ROTATE_AGE, Rotate, parse_rotate};

/// Object encoding of an `object_store` sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Parquet files (default).
    Parquet,
    /// Newline-delimited JSON.
    Ndjson,
}

string_enum!(Format { "parquet" => Parquet, "ndjson" => Ndjson });

/// `type = "object_store"`: concurrent multipart uploads through the ordered stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectStoreConfig {
    /// Destination, `s3://bucket/prefix`, `gs://…`, `az://…` or `file:///dir`. Required.
    pub url: String,
    /// Object encoding. Default parquet.
    pub format: Format,
    /// Parts uploading at once. Default 4.
    pub upload_concurrency: NonZeroU32,
    /// Multipart part size (S3 needs at least 5 MiB). Default 8 MiB.
    pub part_size: ByteSize,
    /// Objects open (and encoding) at once. Default 4.
    pub max_open_files: NonZeroU32,
    /// Rotation of objects. Default 128 MiB or 5 min.
    pub rotate: Rotate,
    /// Row groups and compression when `format = "parquet"`.
    pub parquet: Option<ParquetEncoding>,
}

/// S3's smallest part (all but the last part of a multipart upload).
const S3_MIN_PART_BYTES: u64 = 5 * 1024 * 1024;
const OBJECT_STORE_SCHEMES: [&str; 4] = ["s3", "gs", "az", "file"];

impl ObjectStoreConfig {
    /// Reads the keys of a `type = "object_store"` sink.
    pub fn parse(s: &mut Section<'_>) -> Option<Self> {
        let url = s.req::<String>("url", "e.g. \"s3://bucket/prefix\"");
        let scheme = url.as_deref().and_then(|u| u.split_once("://"));
        match scheme {
            Some((scheme, rest)) if OBJECT_STORE_SCHEMES.contains(&scheme) && !rest.is_empty() => {}
            _ => {
                if let Some(url) = &url {
                    s.error("url", format!("expected a URL like \"s3://bucket/prefix\" (s3, gs, az or file), found {url:?}"));
                }
            }
        }
        let format = s.or("format", Format::Parquet);
        let part_size = s.or("part_size", ByteSize::mib(8));
        if scheme.is_some_and(|(scheme, _)| scheme == "s3") && part_size.bytes() < S3_MIN_PART_BYTES
        {
            s.error(
                "part_size",
                format!("S3 needs parts of at least 5 MiB, found {part_size}"),
            );
        }
        let encoding_keys = ["row_group_rows", "row_group_bytes", "compression"];
        let parquet = match format {
            Format::Parquet => Some(parse_encoding(s)),
            Format::Ndjson => {
                for key in encoding_keys {
                    if s.has(key) {
                        s.error(key, "only applies to format = \"parquet\"");
                    }
                }
                None
            }
        };
        Some(Self {
            format,
            upload_concurrency: s.or("upload_concurrency", NonZeroU32::new(4).expect("4 > 0")),
            part_size,
            max_open_files: s.or("max_open_files", NonZeroU32::new(4).expect("4 > 0")),
            rotate: parse_rotate(s, Some(DEFAULT_ROTATE_AGE)),
            parquet,
            url: url?,
        })
    }

    /// Its buffers and their bounds, for the memory inventory once the sink runs.
    pub fn bounds(&self, bounds: &mut Bounds<'_>) {
        let (per_file, what) = match (self.format, &self.parquet) {
            (Format::Parquet, Some(encoding)) => (encoding.row_group_bytes, "row_group_bytes"),
            _ => (self.part_size, "part_size"),
        };
        bounds.add(
            "encoders",
            Some(self.max_open_files.get().into()),
            times(self.max_open_files.get(), per_file.bytes()),
            format!(
                "objects being encoded: max_open_files {} × {what} {per_file}",
                self.max_open_files
            ),
        );
        bounds.add(
            "uploads",
            Some(self.upload_concurrency.get().into()),
            times(self.upload_concurrency.get(), self.part_size.bytes()),
            format!(
                "parts uploading: upload_concurrency {} × part_size {}",
                self.upload_concurrency, self.part_size
            ),
        );
    }
}
