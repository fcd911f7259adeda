//! `[sinks.NAME]`: where records go. Each sink reads its `inputs` from the WAL through
//! its own cursor; the sink type is tagged by `type`.

use std::num::{NonZeroU32, NonZeroU64};
use std::path::PathBuf;

use serde::Serialize;

use super::units::{ByteSize, Duration, string_enum};
use super::walk::{Section, closest};

/// One configured sink: the keys every sink has, and its type's own.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SinkConfig {
    /// Source names this sink reads. Required, not empty, each a configured source.
    pub inputs: Vec<String>,
    /// Whether WAL retention waits for this sink. Default true.
    pub required: bool,
    /// A required sink further behind than this is evicted from retention (a counted
    /// loss for this sink only). Only for required sinks.
    pub max_lag: Option<MaxLag>,
    /// Where a sink with no cursor starts. Default `earliest`.
    pub start_from: StartFrom,
    /// Records per WAL read. Default 1024.
    pub read_batch_records: NonZeroU32,
    /// Bytes per WAL read (a single larger record is still read alone). Default 1 MiB.
    pub read_batch_bytes: ByteSize,
    /// Read batches the driver channel holds; its byte cap is `channel_batches ×
    /// read_batch_bytes`. Default 2.
    pub channel_batches: NonZeroU32,
    /// Backoff between retries of a failed write.
    pub retry: Retry,
    /// The sink type and its own keys.
    #[serde(flatten)]
    pub kind: SinkKind,
}

/// `max_lag = { bytes, age }`: at least one of the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MaxLag {
    /// Largest distance, in WAL bytes, behind the durable end.
    pub bytes: Option<ByteSize>,
    /// Largest age of the oldest unread record.
    pub age: Option<Duration>,
}

/// `retry = { initial, max }`: exponential backoff bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Retry {
    /// First delay. Default 100 ms.
    pub initial: Duration,
    /// Largest delay. Default 30 s.
    pub max: Duration,
}

/// `rotate = { bytes, age }`: when an output file is closed and a new one started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rotate {
    /// Size of an output file. Default 128 MiB.
    pub bytes: ByteSize,
    /// Age of an output file; files are readable only once closed.
    pub age: Option<Duration>,
}

/// Where a sink without a cursor starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    /// The oldest retained record.
    Earliest,
    /// The current durable end.
    Latest,
}

string_enum!(StartFrom { "earliest" => Earliest, "latest" => Latest });

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

/// Object encoding of an `object_store` sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Parquet files (default).
    Parquet,
    /// Newline-delimited JSON.
    Ndjson,
}

string_enum!(Format { "parquet" => Parquet, "ndjson" => Ndjson });

/// The `type` key's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SinkType {
    File,
    Parquet,
    ObjectStore,
    Http,
    Blackhole,
}

string_enum!(SinkType {
    "file" => File,
    "parquet" => Parquet,
    "object_store" => ObjectStore,
    "http" => Http,
    "blackhole" => Blackhole,
});

const SINK_TYPES: [&str; 5] = ["file", "parquet", "object_store", "http", "blackhole"];

/// A sink type with its own keys.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SinkKind {
    /// NDJSON files.
    File(FileSink),
    /// Local Parquet files.
    Parquet(ParquetSink),
    /// Objects in S3, GCS, Azure or a local directory.
    ObjectStore(ObjectStoreSink),
    /// POSTed batches.
    Http(HttpSink),
    /// Counts and discards, optionally slowly.
    Blackhole(BlackholeSink),
}

/// `type = "file"`: NDJSON, one JSON object per record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileSink {
    /// Output directory. Required.
    pub path: PathBuf,
    /// Rotation. Default 128 MiB, no age.
    pub rotate: Rotate,
}

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
pub struct ParquetSink {
    /// Output directory. Required.
    pub path: PathBuf,
    /// Rotation. Default 128 MiB or 5 min.
    pub rotate: Rotate,
    /// Row groups and compression.
    #[serde(flatten)]
    pub encoding: ParquetEncoding,
    /// Files open (and encoding) at once. Default 4.
    pub max_open_files: NonZeroU32,
}

/// `type = "object_store"`: concurrent multipart uploads through the ordered stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectStoreSink {
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

/// `type = "http"`: POST NDJSON batches; 429/503 with `Retry-After` slow it down.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HttpSink {
    /// Endpoint, `http://` or `https://`. Required.
    pub url: String,
    /// Records per request. Default 500.
    pub batch_records: NonZeroU32,
    /// Request timeout. Default 10 s.
    pub timeout: Duration,
}

/// `type = "blackhole"`: counts records and drops them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlackholeSink {
    /// Records per second it accepts, to play a slow downstream; unlimited when absent.
    pub rate: Option<NonZeroU64>,
}

const DEFAULT_ROTATE_AGE: Duration = Duration::secs(300);

impl SinkConfig {
    /// Default `read_batch_bytes`.
    pub const DEFAULT_READ_BATCH_BYTES: ByteSize = ByteSize::mib(1);

    /// Reads one sink. Unknown keys are reported only when the type is known.
    /// `sources` are the names under `[sources]`, whether or not they parsed.
    pub(super) fn parse(mut s: Section<'_>, sources: &[&str]) -> Option<Self> {
        let kind = s.tag::<SinkType>("type", &SINK_TYPES);
        let inputs = parse_inputs(&mut s, sources);
        let required = s.or("required", true);
        let max_lag = s.table("max_lag").and_then(parse_max_lag);
        if max_lag.is_some() && !required {
            s.error("max_lag", "only applies to required sinks; a sink with required = false never holds WAL retention");
        }
        let start_from = s.or("start_from", StartFrom::Earliest);
        let read_batch_records = s.or(
            "read_batch_records",
            NonZeroU32::new(1024).expect("1024 > 0"),
        );
        let read_batch_bytes = s.or("read_batch_bytes", Self::DEFAULT_READ_BATCH_BYTES);
        let channel_batches = s.or("channel_batches", NonZeroU32::new(2).expect("2 > 0"));
        let retry = parse_retry(&mut s);
        let kind = match kind? {
            SinkType::File => FileSink::parse(&mut s).map(SinkKind::File),
            SinkType::Parquet => ParquetSink::parse(&mut s).map(SinkKind::Parquet),
            SinkType::ObjectStore => ObjectStoreSink::parse(&mut s).map(SinkKind::ObjectStore),
            SinkType::Http => HttpSink::parse(&mut s).map(SinkKind::Http),
            SinkType::Blackhole => Some(SinkKind::Blackhole(BlackholeSink {
                rate: s.opt("rate"),
            })),
        };
        s.finish();
        Some(Self {
            inputs: inputs?,
            required,
            max_lag,
            start_from,
            read_batch_records,
            read_batch_bytes,
            channel_batches,
            retry,
            kind: kind?,
        })
    }

    /// Byte cap of the driver channel: `channel_batches × read_batch_bytes`.
    pub fn channel_bytes(&self) -> u64 {
        u64::from(self.channel_batches.get()).saturating_mul(self.read_batch_bytes.bytes())
    }
}

fn parse_inputs(s: &mut Section<'_>, sources: &[&str]) -> Option<Vec<String>> {
    if !s.has("inputs") {
        s.error(
            "inputs",
            r#"missing required key (expected a list of source names, e.g. inputs = ["gen"])"#,
        );
        return None;
    }
    if let Some(value) = s.raw("inputs")
        && !value.is_array()
    {
        let hint = value
            .as_str()
            .map_or_else(String::new, |name| format!(": write inputs = [{name:?}]"));
        s.error(
            "inputs",
            format!(
                "expected a list of source names, found {}{hint}",
                super::units::describe(value)
            ),
        );
        return None;
    }
    let inputs = s.list::<String>("inputs")?;
    if inputs.is_empty() {
        s.error(
            "inputs",
            "expected at least one source name, found an empty list",
        );
        return None;
    }
    let path = s.key_path("inputs");
    let mut ok = true;
    for (i, input) in inputs.iter().enumerate() {
        let element = format!("{path}[{i}]");
        if inputs[..i].contains(input) {
            s.diagnostics()
                .error(&element, format!("{input:?} is listed twice"));
            ok = false;
        } else if !sources.contains(&input.as_str()) {
            let mut message = format!("no source named {input:?}; ");
            if sources.is_empty() {
                message.push_str("no sources are configured");
            } else {
                message.push_str(&format!("configured sources: {}", sources.join(", ")));
            }
            if let Some(close) = closest(input, sources) {
                message.push_str(&format!(" (did you mean \"{close}\"?)"));
            }
            s.diagnostics().error(&element, message);
            ok = false;
        }
    }
    ok.then_some(inputs)
}

fn parse_max_lag(mut t: Section<'_>) -> Option<MaxLag> {
    let lag = MaxLag {
        bytes: t.opt("bytes"),
        age: t.opt("age"),
    };
    let given = t.has("bytes") || t.has("age");
    if !given {
        t.error_here(
            "expected bytes, age or both, e.g. max_lag = { bytes = \"1 GiB\", age = \"1h\" }",
        );
    }
    t.finish();
    (lag.bytes.is_some() || lag.age.is_some()).then_some(lag)
}

fn parse_retry(s: &mut Section<'_>) -> Retry {
    let default = Retry {
        initial: Duration::millis(100),
        max: Duration::secs(30),
    };
    let Some(mut t) = s.table("retry") else {
        return default;
    };
    let retry = Retry {
        initial: t.or("initial", default.initial),
        max: t.or("max", default.max),
    };
    if retry.initial > retry.max && !t.failed(&["initial", "max"]) {
        t.error(
            "initial",
            format!("{} is longer than retry.max = {}", retry.initial, retry.max),
        );
    }
    t.finish();
    retry
}

fn parse_rotate(s: &mut Section<'_>, default_age: Option<Duration>) -> Rotate {
    let default = Rotate {
        bytes: ByteSize::mib(128),
        age: default_age,
    };
    let Some(mut t) = s.table("rotate") else {
        return default;
    };
    let rotate = Rotate {
        bytes: t.or("bytes", default.bytes),
        age: t.opt("age").or(default.age),
    };
    t.finish();
    rotate
}

fn parse_encoding(s: &mut Section<'_>) -> ParquetEncoding {
    ParquetEncoding {
        row_group_rows: s.or(
            "row_group_rows",
            NonZeroU32::new(65_536).expect("65536 > 0"),
        ),
        row_group_bytes: s.or("row_group_bytes", ByteSize::mib(8)),
        compression: s.or("compression", Compression::Zstd),
    }
}

impl FileSink {
    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let path = s.req("path", "the output directory");
        let rotate = parse_rotate(s, None);
        Some(Self {
            path: path?,
            rotate,
        })
    }
}

impl ParquetSink {
    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let path = s.req("path", "the output directory");
        Some(Self {
            rotate: parse_rotate(s, Some(DEFAULT_ROTATE_AGE)),
            encoding: parse_encoding(s),
            max_open_files: s.or("max_open_files", NonZeroU32::new(4).expect("4 > 0")),
            path: path?,
        })
    }
}

/// S3's smallest part (all but the last part of a multipart upload).
const S3_MIN_PART_BYTES: u64 = 5 * 1024 * 1024;
const OBJECT_STORE_SCHEMES: [&str; 4] = ["s3", "gs", "az", "file"];

impl ObjectStoreSink {
    fn parse(s: &mut Section<'_>) -> Option<Self> {
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
}

impl HttpSink {
    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let url = s.req::<String>("url", "e.g. \"http://127.0.0.1:8080/ingest\"");
        if let Some(url) = &url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            s.error(
                "url",
                format!("expected a URL starting with http:// or https://, found {url:?}"),
            );
        }
        Some(Self {
            batch_records: s.or("batch_records", NonZeroU32::new(500).expect("500 > 0")),
            timeout: s.or("timeout", Duration::secs(10)),
            url: url?,
        })
    }
}
