//! `[sources.NAME]`: where records come from. Each source is tagged by `type`.

use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroU64};
use std::path::PathBuf;

use serde::Serialize;

use super::mqtt::MqttSource;
use super::units::{ByteSize, Duration, serialize_std_duration, string_enum};
use super::walk::Section;

/// One configured source.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceConfig {
    /// Batches appended to the WAL but not yet durable (commit tickets this source may
    /// hold). Default 64.
    pub max_uncommitted_tickets: NonZeroU32,
    /// The source type and its own keys.
    #[serde(flatten)]
    pub kind: SourceKind,
}

/// A source type with its own keys.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SourceKind {
    /// Synthetic records, for demos and load tests.
    Generator(GeneratorSource),
    /// NDJSON lines from a file or standard input.
    File(FileSource),
    /// NDJSON over HTTP POST.
    Http(HttpSource),
    /// An MQTT subscription.
    Mqtt(Box<MqttSource>),
    /// A NATS JetStream pull consumer.
    Nats(NatsSource),
}

/// The `type` key's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SourceType {
    Generator,
    File,
    Http,
    Mqtt,
    Nats,
}

string_enum!(SourceType {
    "generator" => Generator,
    "file" => File,
    "http" => Http,
    "mqtt" => Mqtt,
    "nats" => Nats,
});

const SOURCE_TYPES: [&str; 5] = ["generator", "file", "http", "mqtt", "nats"];

impl SourceConfig {
    /// Default `max_uncommitted_tickets`.
    pub const DEFAULT_MAX_UNCOMMITTED_TICKETS: NonZeroU32 = NonZeroU32::new(64).expect("64 > 0");

    /// Reads one source; `name` is its key under `[sources]`. Unknown keys are
    /// reported only when the type is known (otherwise every key would look unknown).
    pub(super) fn parse(mut s: Section<'_>, name: &str) -> Option<Self> {
        let kind = s.tag::<SourceType>("type", &SOURCE_TYPES);
        let max_uncommitted_tickets = s.or(
            "max_uncommitted_tickets",
            Self::DEFAULT_MAX_UNCOMMITTED_TICKETS,
        );
        let kind = match kind? {
            SourceType::Generator => GeneratorSource::parse(&mut s).map(SourceKind::Generator),
            SourceType::File => FileSource::parse(&mut s).map(SourceKind::File),
            SourceType::Http => HttpSource::parse(&mut s).map(SourceKind::Http),
            SourceType::Mqtt => {
                MqttSource::parse(&mut s, name).map(|m| SourceKind::Mqtt(Box::new(m)))
            }
            SourceType::Nats => NatsSource::parse(&mut s).map(SourceKind::Nats),
        };
        s.finish();
        Some(Self {
            max_uncommitted_tickets,
            kind: kind?,
        })
    }

    /// The largest unit this source must hand the WAL whole, in bytes, and the keys that
    /// set it: what the WAL's byte semaphore must be able to admit at once. Sources that
    /// take records one by one (MQTT, NATS) cut their batches by bytes, so for them it is
    /// one record; an HTTP body is acknowledged whole, so it is the body.
    pub fn max_batch_bytes(&self) -> (u64, &'static str) {
        match &self.kind {
            SourceKind::Generator(g) => (
                u64::from(g.batch_size.get()).saturating_mul(g.size.bytes()),
                "batch_size × size",
            ),
            SourceKind::File(f) => (f.batch_bytes.bytes(), "batch_bytes"),
            SourceKind::Http(h) => (h.max_body.bytes(), "max_body"),
            SourceKind::Mqtt(m) => (m.max_message_bytes.bytes(), "max_message_bytes"),
            SourceKind::Nats(n) => (n.max_message_bytes.bytes(), "max_message_bytes"),
        }
    }
}

/// `type = "generator"`: synthetic records at a set rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GeneratorSource {
    /// Records per second; 0 means as fast as the WAL admits them. Required.
    pub rate: u64,
    /// Records to produce before stopping; unlimited when absent.
    pub count: Option<NonZeroU64>,
    /// Payload bytes per record. Default 100 B.
    pub size: ByteSize,
    /// Number of distinct keys (`key-0` … `key-{keys-1}`). Default 16.
    pub keys: NonZeroU32,
    /// Seed of the payload and key sequence. Default 0.
    pub seed: u64,
    /// Records per batch handed to the WAL. Default 100.
    pub batch_size: NonZeroU32,
}

impl GeneratorSource {
    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let rate = s.req(
            "rate",
            "records per second, 0 for as fast as the WAL admits",
        );
        Some(Self {
            count: s.opt("count"),
            size: s.or("size", ByteSize::new(100).expect("100 > 0")),
            keys: s.or("keys", NonZeroU32::new(16).expect("16 > 0")),
            seed: s.or("seed", 0),
            batch_size: s.or("batch_size", NonZeroU32::new(100).expect("100 > 0")),
            rate: rate?,
        })
    }
}

/// `type = "file"`: NDJSON lines from a file, or standard input for `-`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileSource {
    /// The file, or `-` for standard input. Required.
    pub path: PathBuf,
    /// Longest line accepted; a longer line is quarantined, never buffered whole.
    /// Default 1 MiB, at most `batch_bytes`.
    pub max_line_bytes: ByteSize,
    /// Lines per batch handed to the WAL. Default 256.
    pub batch_size: NonZeroU32,
    /// Bytes per batch handed to the WAL; a batch is cut before it would pass this.
    /// Default 1 MiB.
    pub batch_bytes: ByteSize,
}

impl FileSource {
    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let path = s.req("path", "a file path, or \"-\" for standard input");
        let max_line_bytes = s.or("max_line_bytes", ByteSize::mib(1));
        let batch_bytes = s.or("batch_bytes", ByteSize::mib(1));
        if max_line_bytes > batch_bytes && !s.failed(&["max_line_bytes", "batch_bytes"]) {
            s.error(
                "max_line_bytes",
                format!("{max_line_bytes} is more than batch_bytes = {batch_bytes}; the longest line must fit in a batch"),
            );
        }
        Some(Self {
            max_line_bytes,
            batch_size: s.or("batch_size", NonZeroU32::new(256).expect("256 > 0")),
            batch_bytes,
            path: path?,
        })
    }
}

/// `type = "http"`: POST NDJSON; 200 once durable, 503 + `Retry-After` when admission
/// fails, 413 above `max_body`, 408 when the body is slower than `body_timeout`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HttpSource {
    /// Address to listen on. Required.
    pub listen: SocketAddr,
    /// Request path. Default `/ingest`.
    pub path: String,
    /// Largest request body; larger requests get 413. Default 1 MiB.
    pub max_body: ByteSize,
    /// How long a request may wait for WAL admission before 503 (zero: refuse at once).
    /// Default 100 ms.
    #[serde(serialize_with = "serialize_std_duration")]
    pub admission_timeout: std::time::Duration,
    /// Environment variable holding the bearer token; no authentication when absent.
    pub auth_token_env: Option<String>,
    /// Requests served at once; more wait in the accept queue. Default 16.
    pub max_concurrent_requests: NonZeroU32,
    /// How long the whole body may take to arrive once the request head is in; a
    /// slower body gets 408 and the connection is closed, freeing its request slot.
    /// Default 10 s.
    pub body_timeout: Duration,
}

impl HttpSource {
    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let listen = s.req("listen", "an address like \"127.0.0.1:8080\"");
        let path = s.or("path", "/ingest".to_owned());
        if !path.starts_with('/') {
            s.error(
                "path",
                format!("expected a path starting with '/', found {path:?}"),
            );
        }
        let auth_token_env = s.opt::<String>("auth_token_env");
        if let Some(name) = &auth_token_env {
            check_env_name(s, "auth_token_env", name);
        }
        Some(Self {
            path,
            max_body: s.or("max_body", ByteSize::mib(1)),
            admission_timeout: s.or("admission_timeout", std::time::Duration::from_millis(100)),
            auth_token_env,
            max_concurrent_requests: s.or(
                "max_concurrent_requests",
                NonZeroU32::new(16).expect("16 > 0"),
            ),
            body_timeout: s.or("body_timeout", Duration::secs(10)),
            listen: listen?,
        })
    }
}

/// Reports an environment variable name that the shell could not set.
pub(super) fn check_env_name(s: &Section<'_>, key: &str, name: &str) {
    let valid = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if !valid {
        s.error(
            key,
            format!("expected the name of an environment variable (letters, digits, _), found {name:?}; the secret itself never goes in the file"),
        );
    }
}

/// `type = "nats"`: a NATS JetStream durable pull consumer; credits are
/// `max_ack_pending`, acked once durable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NatsSource {
    /// Server URL, `nats://host:port` or `tls://host:port`. Required.
    pub url: String,
    /// JetStream stream name. Required.
    pub stream: String,
    /// Durable consumer name (several weir instances may share it). Required.
    pub consumer: String,
    /// Subject filters; the whole stream when empty.
    pub subjects: Vec<String>,
    /// Messages delivered but not yet acked: the credit window. Default 256.
    pub max_ack_pending: NonZeroU32,
    /// Messages asked for per fetch, at most `max_ack_pending`. Default 64.
    pub fetch_batch: NonZeroU32,
    /// Largest message accepted; larger ones are quarantined. Default 256 KiB.
    pub max_message_bytes: ByteSize,
}

impl NatsSource {
    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let url = s.req::<String>("url", "e.g. \"nats://127.0.0.1:4222\"");
        if let Some(url) = &url
            && !(url.starts_with("nats://") || url.starts_with("tls://"))
        {
            s.error(
                "url",
                format!("expected a URL starting with nats:// or tls://, found {url:?}"),
            );
        }
        let stream = s.req("stream", "the JetStream stream to consume");
        let consumer = s.req("consumer", "the durable consumer name");
        let subjects = s.list("subjects").unwrap_or_default();
        let max_ack_pending = s.or("max_ack_pending", NonZeroU32::new(256).expect("256 > 0"));
        let fetch_batch = s.or("fetch_batch", NonZeroU32::new(64).expect("64 > 0"));
        if fetch_batch > max_ack_pending && !s.failed(&["fetch_batch", "max_ack_pending"]) {
            s.error(
                "fetch_batch",
                format!("{fetch_batch} is more than max_ack_pending = {max_ack_pending}; a fetch can never return more than the free credits"),
            );
        }
        Some(Self {
            subjects,
            max_ack_pending,
            fetch_batch,
            max_message_bytes: s.or("max_message_bytes", ByteSize::kib(256)),
            url: url?,
            stream: stream?,
            consumer: consumer?,
        })
    }
}
