//! `type = "object_store"`: its keys, their checks and its bounds.

use std::num::NonZeroU32;

use serde::Serialize;

use crate::keys::units::string_enum;
use crate::keys::{Bounds, ByteSize, Duration, Section, times};
use crate::sinks::SinkKeys;
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

/// Compression of NDJSON objects (Parquet objects compress their columns instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdjsonCompression {
    /// Plain text (default).
    None,
    /// gzip (`.ndjson.gz`).
    Gzip,
    /// Zstandard (`.ndjson.zst`).
    Zstd,
}

string_enum!(NdjsonCompression { "none" => None, "gzip" => Gzip, "zstd" => Zstd });

/// Where objects go: the store and the prefix under which the sink names them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "scheme", rename_all = "snake_case")]
pub enum Location {
    /// `s3://bucket/prefix`.
    S3 {
        /// The bucket.
        bucket: String,
        /// The prefix (may be empty).
        prefix: String,
    },
    /// `gs://bucket/prefix`.
    Gcs {
        /// The bucket.
        bucket: String,
        /// The prefix (may be empty).
        prefix: String,
    },
    /// `az://container/prefix` (the account comes from the environment).
    Azure {
        /// The container.
        container: String,
        /// The prefix (may be empty).
        prefix: String,
    },
    /// `file:///dir`: a local directory, written with fsync before the cursor moves.
    File {
        /// The directory.
        dir: std::path::PathBuf,
    },
    /// `memory://prefix`: the process's memory, lost at exit; for tests.
    Memory {
        /// The prefix (may be empty).
        prefix: String,
    },
}

impl Location {
    /// Reads a URL; the error says what was expected.
    pub fn parse(url: &str) -> Result<Self, String> {
        let expected = || {
            format!(
                "expected a URL like \"s3://bucket/prefix\" (s3, gs, az, file or memory), found {url:?}"
            )
        };
        let (scheme, rest) = url.split_once("://").ok_or_else(expected)?;
        let split = |rest: &str| -> Result<(String, String), String> {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(format!("{url:?} names no bucket or container"));
            }
            let prefix = prefix.trim_matches('/');
            if prefix.split('/').any(|part| part == "." || part == "..") {
                return Err(format!(
                    "{url:?}: the prefix may not contain \".\" or \"..\""
                ));
            }
            Ok((bucket.to_owned(), prefix.to_owned()))
        };
        match scheme {
            "s3" => split(rest).map(|(bucket, prefix)| Location::S3 { bucket, prefix }),
            "gs" => split(rest).map(|(bucket, prefix)| Location::Gcs { bucket, prefix }),
            "az" => split(rest).map(|(container, prefix)| Location::Azure { container, prefix }),
            "file" => {
                if !rest.starts_with('/') || rest.len() < 2 {
                    return Err(format!(
                        "expected an absolute path like \"file:///var/lib/weir/lake\", found {url:?}"
                    ));
                }
                Ok(Location::File {
                    dir: std::path::PathBuf::from(rest),
                })
            }
            "memory" => Ok(Location::Memory {
                prefix: rest.trim_matches('/').to_owned(),
            }),
            _ => Err(expected()),
        }
    }

    /// Whether the store takes multipart parts of at least 5 MiB only (S3 and GCS).
    fn has_min_part(&self) -> bool {
        matches!(self, Location::S3 { .. } | Location::Gcs { .. })
    }

    /// Whether the store is reached over the network.
    pub fn is_remote(&self) -> bool {
        matches!(
            self,
            Location::S3 { .. } | Location::Gcs { .. } | Location::Azure { .. }
        )
    }
}

/// `type = "object_store"`: Parquet or NDJSON objects, uploaded concurrently through
/// the ordered stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectStoreConfig {
    /// Destination, as written (`url`). Required.
    pub url: String,
    /// The destination, read.
    pub location: Location,
    /// Object encoding. Default parquet.
    pub format: Format,
    /// Compression of NDJSON objects. Default none.
    pub ndjson_compression: NdjsonCompression,
    /// Parts and objects uploading at once. Default 4.
    pub upload_concurrency: NonZeroU32,
    /// Multipart part size (S3 and GCS need at least 5 MiB). Default 8 MiB. An object
    /// smaller than this is sent in one PUT.
    pub part_size: ByteSize,
    /// Time one request may take (an attempt). Default 30 s.
    pub timeout: Duration,
    /// Attempts per part or object before the sink gives up on it, aborts its upload
    /// and reads again from its cursor. Default 6.
    pub max_attempts: NonZeroU32,
    /// S3-compatible servers: the endpoint URL; Azure: the account URL (an emulator's
    /// is `http://host:port/account`).
    pub endpoint: Option<String>,
    /// S3: the region.
    pub region: Option<String>,
    /// Allow `http://` endpoints. Default false.
    pub allow_http: bool,
    /// S3: path-style addressing (`endpoint/bucket/key`) rather than virtual-hosted
    /// (`bucket.endpoint/key`). Default true.
    pub path_style: bool,
    /// Rotation of objects. Default 128 MiB or 5 min, or half of the WAL pinned.
    pub rotate: Rotate,
    /// Row groups and compression when `format = "parquet"`.
    pub parquet: Option<ParquetEncoding>,
}

/// S3's and GCS's smallest part (all but the last part of a multipart upload).
const MIN_PART_BYTES: u64 = 5 * 1024 * 1024;

impl SinkKeys for ObjectStoreConfig {
    const TYPE: &'static str = "object_store";

    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let url = s.req::<String>("url", "e.g. \"s3://bucket/prefix\"");
        let location = match url.as_deref().map(Location::parse) {
            Some(Ok(location)) => Some(location),
            Some(Err(message)) => {
                s.error("url", message);
                None
            }
            None => None,
        };
        let format = s.or("format", Format::Parquet);
        let part_size = s.or("part_size", ByteSize::mib(8));
        if location.as_ref().is_some_and(Location::has_min_part)
            && part_size.bytes() < MIN_PART_BYTES
        {
            s.error(
                "part_size",
                format!("S3 and GCS need parts of at least 5 MiB, found {part_size}"),
            );
        }
        let (parquet, ndjson_compression) = match format {
            Format::Parquet => (Some(parse_encoding(s)), NdjsonCompression::None),
            Format::Ndjson => {
                for key in ["row_group_rows", "row_group_bytes"] {
                    if s.has(key) {
                        s.error(key, "only applies to format = \"parquet\"");
                    }
                }
                (None, s.or("compression", NdjsonCompression::None))
            }
        };
        if s.has("max_open_files") {
            s.error(
                "max_open_files",
                "the sink writes one object at a time, so that objects never overlap; \
                 upload_concurrency sets the parts and objects uploading at once",
            );
        }
        let endpoint: Option<String> = s.opt("endpoint");
        let region: Option<String> = s.opt("region");
        let path_style: Option<bool> = s.opt("path_style");
        let allow_http = s.or("allow_http", false);
        if let Some(location) = &location {
            let s3_only = [
                ("region", region.is_some()),
                ("path_style", path_style.is_some()),
            ];
            for (key, set) in s3_only {
                if set && !matches!(location, Location::S3 { .. }) {
                    s.error(key, "only applies to s3:// URLs");
                }
            }
            if !location.is_remote() {
                for (key, set) in [("endpoint", endpoint.is_some()), ("allow_http", allow_http)] {
                    if set {
                        s.error(key, "only applies to s3://, gs:// and az:// URLs");
                    }
                }
            }
        }
        if let Some(endpoint) = &endpoint
            && endpoint.starts_with("http://")
            && !allow_http
        {
            s.error(
                "endpoint",
                format!("{endpoint:?} is plain HTTP: set allow_http = true to use it"),
            );
        }
        Some(Self {
            format,
            ndjson_compression,
            upload_concurrency: s.or("upload_concurrency", NonZeroU32::new(4).expect("4 > 0")),
            part_size,
            timeout: s.or("timeout", Duration::secs(30)),
            max_attempts: s.or("max_attempts", NonZeroU32::new(6).expect("6 > 0")),
            endpoint,
            region,
            allow_http,
            path_style: path_style.unwrap_or(true),
            rotate: parse_rotate(s, Some(DEFAULT_ROTATE_AGE), true),
            parquet,
            url: url?,
            location: location?,
        })
    }

    fn bounds(&self, bounds: &mut Bounds<'_>) {
        let (bytes, note) = self.encoder_bytes();
        bounds.add("encoder", Some(1), bytes, note);
        bounds.add(
            "uploads",
            Some(self.upload_concurrency.get().into()),
            self.upload_bytes(),
            format!(
                "parts uploading: upload_concurrency {} × part_size {}",
                self.upload_concurrency, self.part_size
            ),
        );
    }

    fn directory(&self) -> Option<&std::path::Path> {
        match &self.location {
            Location::File { dir } => Some(dir),
            _ => None,
        }
    }
}

impl ObjectStoreConfig {
    /// Bytes of parts uploading at most: `upload_concurrency × part_size`.
    pub fn upload_bytes(&self) -> u64 {
        times(self.upload_concurrency.get(), self.part_size.bytes())
    }

    /// Bytes the open object's encoder holds at most, and how that is made up: the
    /// part being filled (below `part_size`, plus what one write adds to it), and for
    /// Parquet the row group being built (`row_group_bytes`) and the one being flushed.
    pub fn encoder_bytes(&self) -> (u64, String) {
        match &self.parquet {
            Some(encoding) => {
                let row_group = encoding.row_group_bytes.bytes();
                (
                    self.part_size
                        .bytes()
                        .saturating_add(row_group.saturating_mul(2)),
                    format!(
                        "the open object: the part being filled (part_size {}) and two row groups (row_group_bytes {})",
                        self.part_size, encoding.row_group_bytes
                    ),
                )
            }
            None => (
                self.part_size.bytes().saturating_mul(2),
                format!(
                    "the open object: the part being filled and what one batch adds (2 × part_size {})",
                    self.part_size
                ),
            ),
        }
    }
}
