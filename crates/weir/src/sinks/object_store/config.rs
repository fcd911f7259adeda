//! `type = "object_store"`: its keys, their checks and its bounds.

use std::num::NonZeroU32;

use serde::Serialize;

use crate::keys::units::string_enum;
use crate::keys::{Bounds, ByteSize, Duration, Section, times};
use crate::record::Line;
use crate::sinks::SinkKeys;
use crate::sinks::layout::Partitioning;
use crate::sinks::lines::parse_line;
use crate::sinks::parquet::{Compression, ParquetEncoding, parse_row_groups};
use crate::sinks::rotate::{DEFAULT_ROTATE_AGE, Rotate, parse_rotate};
use crate::sinks::schema::SchemaConfig;

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
                "expected a URL like \"s3://bucket/prefix\" (s3, gs, az, file or memory), found {:?}",
                crate::keys::redact::url(url)
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
    /// `url`: the destination, as written.
    pub url: String,
    /// The destination, read.
    pub location: Location,
    /// `format`: the object encoding.
    pub format: Format,
    /// `compression` of NDJSON objects.
    pub ndjson_compression: NdjsonCompression,
    /// `upload_concurrency`: parts and objects uploading at once.
    pub upload_concurrency: NonZeroU32,
    /// `part_size`: the multipart part size.
    pub part_size: ByteSize,
    /// `timeout`: the time one request may take.
    pub timeout: Duration,
    /// `max_attempts`: attempts per part or object before the sink gives up on it.
    pub max_attempts: NonZeroU32,
    /// `endpoint`: an S3-compatible server's endpoint, or Azure's account URL.
    pub endpoint: Option<String>,
    /// `region`: S3's region.
    pub region: Option<String>,
    /// `allow_http`: whether `http://` endpoints are allowed.
    pub allow_http: bool,
    /// `path_style`: S3 path-style addressing.
    pub path_style: bool,
    /// `rotate`: when an object is closed and the next one started.
    pub rotate: Rotate,
    /// Row groups and `compression` when `format = "parquet"`.
    pub parquet: Option<ParquetEncoding>,
    /// Typed columns, when `format = "parquet"` and a `schema` is given.
    pub schema: Option<SchemaConfig>,
    /// What each line is, when `format = "ndjson"`.
    pub line: Line,
    /// `layout` and `max_open_partitions`.
    #[serde(flatten, skip_serializing_if = "Partitioning::is_default")]
    pub partitioning: Partitioning,
}

/// S3's and GCS's smallest part (all but the last part of a multipart upload).
const MIN_PART_BYTES: u64 = 5 * 1024 * 1024;

impl SinkKeys for ObjectStoreConfig {
    const TYPE: &'static str = "object_store";
    const ABOUT: &'static str = "Parquet or NDJSON objects in S3, GCS, Azure or a directory, uploaded concurrently and named deterministically; durable in WAL order.";

    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let url = s
            .key(
                "url",
                "Destination: `s3://bucket/prefix`, `gs://…`, `az://container/prefix`, `file:///dir` or `memory://prefix`.",
            )
            .example("s3://bucket/prefix")
            .req::<String>("e.g. \"s3://bucket/prefix\"");
        let location = match url.as_deref().map(Location::parse) {
            Some(Ok(location)) => Some(location),
            Some(Err(message)) => {
                s.error("url", message);
                None
            }
            None => None,
        };
        let format = s.key("format", "Object encoding.").or(Format::Parquet);
        let part_size = s
            .key(
                "part_size",
                "Multipart part size (S3 and GCS need at least 5 MiB); a smaller object is sent in one PUT.",
            )
            .or(ByteSize::mib(8));
        if location.as_ref().is_some_and(Location::has_min_part)
            && part_size.bytes() < MIN_PART_BYTES
        {
            s.error(
                "part_size",
                format!("S3 and GCS need parts of at least 5 MiB, found {part_size}"),
            );
        }
        let parquet = format == Format::Parquet;
        let (row_group_rows, row_group_bytes) = parse_row_groups(s, parquet);
        let schema = SchemaConfig::parse(s, parquet, "only applies to format = \"parquet\"");
        let line = parse_line(s, !parquet, "only applies to format = \"ndjson\"");
        let partitioning = Partitioning::parse(
            s,
            "dt=YYYY-MM-DD/hour=HH of each object's first record's WAL append time, one object open at a time",
            schema
                .as_ref()
                .and_then(|schema| schema.event_time.as_ref()),
        );
        // One key whose values depend on `format`: Parquet compresses its columns,
        // NDJSON the whole object.
        let compression = s
            .key(
                "compression",
                "Parquet: column compression; NDJSON: compression of the whole object (`.ndjson.gz`, `.ndjson.zst`).",
            )
            .default_text(r#""zstd" for Parquet, "none" for NDJSON"#)
            .example("zstd")
            .raw(r#"one of "zstd" | "snappy" | "none" (Parquet), "none" | "gzip" | "zstd" (NDJSON)"#);
        let (parquet, ndjson_compression) = match format {
            Format::Parquet => (
                Some(ParquetEncoding {
                    row_group_rows,
                    row_group_bytes,
                    compression: compression
                        .and_then(|v| s.convert("compression", v))
                        .unwrap_or(Compression::Zstd),
                }),
                NdjsonCompression::None,
            ),
            Format::Ndjson => (
                None,
                compression
                    .and_then(|v| s.convert("compression", v))
                    .unwrap_or(NdjsonCompression::None),
            ),
        };
        s.refuse(
            "max_open_files",
            "objects open at once are one per partition of the layout, up to \
             max_open_partitions; upload_concurrency sets the parts and objects uploading at once",
        );
        let endpoint: Option<String> = s
            .key(
                "endpoint",
                "S3-compatible servers: the endpoint URL; Azure: the account URL (an emulator's is `http://host:port/account`).",
            )
            .example("https://minio.example:9000")
            .opt();
        let region: Option<String> = s
            .key("region", "S3: the region.")
            .default_text("from the environment")
            .example("eu-west-1")
            .opt();
        let path_style: Option<bool> = s
            .key(
                "path_style",
                "S3: path-style addressing (`endpoint/bucket/key`) rather than virtual-hosted (`bucket.endpoint/key`).",
            )
            .default(&true)
            .opt();
        let allow_http = s.key("allow_http", "Allow `http://` endpoints.").or(false);
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
                format!(
                    "{:?} is plain HTTP: set allow_http = true to use it",
                    crate::keys::redact::url(endpoint)
                ),
            );
        }
        let upload_concurrency = s
            .key("upload_concurrency", "Parts and objects uploading at once.")
            .or(NonZeroU32::new(4).expect("4 > 0"));
        let timeout = s
            .key("timeout", "Time one request (an attempt) may take.")
            .or(Duration::secs(30));
        let max_attempts = s
            .key(
                "max_attempts",
                "Attempts per part or object before the sink gives up on it, aborts its upload and reads again from its cursor.",
            )
            .or(NonZeroU32::new(6).expect("6 > 0"));
        Some(Self {
            format,
            ndjson_compression,
            upload_concurrency,
            part_size,
            timeout,
            max_attempts,
            endpoint,
            region,
            allow_http,
            path_style: path_style.unwrap_or(true),
            rotate: parse_rotate(s, Some(DEFAULT_ROTATE_AGE), true),
            parquet,
            schema,
            line,
            partitioning,
            url: url?,
            location: location?,
        })
    }

    fn bounds(&self, bounds: &mut Bounds<'_>) {
        let (bytes, note) = self.encoder_bytes();
        let open = self.partitioning.max_open();
        if open > 1 {
            bounds.add(
                "encoder",
                Some(open.into()),
                times(open, bytes),
                format!(
                    "max_open_partitions {open} open {}, each with {}",
                    if self.directory().is_some() {
                        "files"
                    } else {
                        "objects"
                    },
                    note.trim_start_matches("the open object: ")
                ),
            );
        } else {
            bounds.add("encoder", Some(1), bytes, note);
        }
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

    fn early_close_note(&self, name: &str, max_disk: u64) -> Option<String> {
        crate::sinks::rotate::early_close_note(name, "object", &self.rotate, max_disk, None)
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
