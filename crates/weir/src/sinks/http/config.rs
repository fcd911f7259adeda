//! `type = "http"` (a sink): its keys, checks and bounds.

use std::num::NonZeroU32;
use std::path::PathBuf;

use serde::Serialize;

use crate::keys::units::string_enum;
use crate::keys::{Bounds, ByteSize, Duration, Section, check_env_name, times};
use crate::sinks::SinkKeys;

/// The request method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `POST` (the default).
    Post,
    /// `PUT`.
    Put,
}
string_enum!(Method { "POST" => Post, "PUT" => Put });

/// What a request body holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// One envelope (`{"source","key","ts","payload","attributes"}`) per line (the
    /// default; `Content-Type: application/x-ndjson`).
    Ndjson,
    /// One JSON array of envelopes (`application/json`).
    JsonArray,
    /// Each record's payload only, as received, one per line
    /// (`application/x-ndjson`): for endpoints that take their own documents.
    Payload,
}
string_enum!(Encoding { "ndjson" => Ndjson, "json_array" => JsonArray, "payload" => Payload });

/// How a request body is compressed (`Content-Encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyCompression {
    /// Not compressed (the default).
    None,
    /// `Content-Encoding: gzip`.
    Gzip,
    /// `Content-Encoding: zstd`.
    Zstd,
}
string_enum!(BodyCompression { "none" => None, "gzip" => Gzip, "zstd" => Zstd });

/// One request header: its value as written, or read from an environment variable
/// when the sink opens (for secrets: the value never goes in the file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Header {
    /// The header's name.
    pub name: String,
    /// Where its value comes from.
    pub value: HeaderValue,
}

/// Where a header's value comes from.
#[derive(Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeaderValue {
    /// Written in the file (`headers = { "X-Tenant" = "a" }`).
    Literal(String),
    /// The value of this environment variable when the sink opens
    /// (`headers_env = { Authorization = "WEIR_HTTP_AUTH" }`).
    Env(String),
}

impl std::fmt::Debug for HeaderValue {
    /// A value written in the file is shown as `***`: it may be a credential
    /// (`Authorization = "Bearer ${TOKEN}"`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderValue::Literal(_) => f
                .debug_tuple("Literal")
                .field(&crate::keys::redact::MASK)
                .finish(),
            HeaderValue::Env(name) => f.debug_tuple("Env").field(name).finish(),
        }
    }
}

/// `type = "http"`: batches of records sent to an HTTP endpoint, with adaptive
/// concurrency, `Retry-After`, a retry budget and dead letters (see the
/// [module docs](super)).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HttpSinkConfig {
    /// `url`: the endpoint.
    pub url: String,
    /// `method`: `POST` or `PUT`.
    pub method: Method,
    /// `headers`, then `headers_env`, in the order written.
    pub headers: Vec<Header>,
    /// `encoding`: what a body holds.
    pub encoding: Encoding,
    /// `fields`: each record as an object of these payload fields instead of its
    /// envelope (with `encoding = "ndjson"` or `"json_array"`).
    pub fields: Option<Vec<(String, String)>>,
    /// `compression`: how a body is compressed.
    pub compression: BodyCompression,
    /// `batch_records`: records per request, at most.
    pub batch_records: NonZeroU32,
    /// `batch_bytes`: encoded bytes per request (before compression), at most, as
    /// estimated before encoding (exact for compact JSON payloads; a string payload that
    /// needs escaping encodes a little larger); a single larger record goes alone.
    pub batch_bytes: ByteSize,
    /// `batch_linger`: how long a request that is not full waits for more records.
    pub batch_linger: Duration,
    /// `timeout`: connecting, sending and reading the answer.
    pub timeout: Duration,
    /// `target_latency`: the round-trip time above which the limit is cut (judged on the
    /// p99 of each second); `None`: only overload answers (429, 503), timeouts and
    /// connection errors cut.
    pub target_latency: Option<Duration>,
    /// `min_concurrency`: the smallest concurrency limit, and where it starts.
    pub min_concurrency: NonZeroU32,
    /// `max_concurrency`: the largest concurrency limit (requests in flight).
    pub max_concurrency: NonZeroU32,
    /// `retry_budget`: retries as a share of first attempts over the last
    /// `retry_budget_window`, at most.
    pub retry_budget: f64,
    /// `retry_budget_floor`: retries per second the budget always allows.
    pub retry_budget_floor: f64,
    /// `retry_budget_window`: the window the budget counts over, in whole seconds.
    pub retry_budget_window: u32,
    /// `max_retry_after`: the longest `Retry-After` honoured.
    pub max_retry_after: Duration,
    /// `ca_file`: for `https://`, the CA certificates to trust instead of the system's.
    pub ca_file: Option<PathBuf>,
}

impl HttpSinkConfig {
    /// The default `max_concurrency`.
    pub const DEFAULT_MAX_CONCURRENCY: u32 = 32;

    /// Reads the keys of a `type = "http"` sink.
    pub fn parse(s: &mut Section<'_>) -> Option<Self> {
        let url = s
            .key("url", "Endpoint, `http://` or `https://`.")
            .example("http://127.0.0.1:8080/ingest")
            .req::<String>("e.g. \"http://127.0.0.1:8080/ingest\"");
        if let Some(url) = &url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                s.error(
                    "url",
                    format!(
                        "expected a URL starting with http:// or https://, found {:?}",
                        crate::keys::redact::url(url)
                    ),
                );
            } else if let Err(e) = url.parse::<hyper::Uri>() {
                s.error(
                    "url",
                    format!(
                        "{:?} is not a valid URL: {e}",
                        crate::keys::redact::url(url)
                    ),
                );
            }
        }
        let ca_file = s
            .key(
                "ca_file",
                "For `https://`: PEM file of the CA certificates to trust instead of the system's (a private CA).",
            )
            .default_text("the system's CA certificates")
            .example("/etc/weir/ca.pem")
            .opt::<PathBuf>();
        if ca_file.is_some() && url.as_ref().is_some_and(|u| u.starts_with("http://")) {
            s.error(
                "ca_file",
                "only applies to https:// URLs; use https:// or remove ca_file",
            );
        }
        let mut headers = Vec::new();
        let literal = s
            .key("headers", "Request headers, by name.")
            .example(toml::Table::from_iter([(
                "X-Tenant".to_owned(),
                toml::Value::from("a"),
            )]))
            .raw("table of header names to strings");
        read_headers(s, "headers", literal, &mut headers, HeaderValue::Literal);
        let from_env = s
            .key(
                "headers_env",
                "Request headers whose values are read from environment variables when the sink opens (for secrets).",
            )
            .example(toml::Table::from_iter([(
                "Authorization".to_owned(),
                toml::Value::from("WEIR_HTTP_AUTH"),
            )]))
            .raw("table of header names to environment variable names");
        read_headers(s, "headers_env", from_env, &mut headers, HeaderValue::Env);
        let one = NonZeroU32::MIN;
        let min_concurrency = s
            .key(
                "min_concurrency",
                "The smallest concurrency limit, and where it starts.",
            )
            .unit("requests")
            .or(one);
        let max_concurrency = s
            .key(
                "max_concurrency",
                "The largest concurrency limit (requests in flight).",
            )
            .unit("requests")
            .or(NonZeroU32::new(Self::DEFAULT_MAX_CONCURRENCY).unwrap_or(one));
        if min_concurrency > max_concurrency {
            s.error(
                "min_concurrency",
                format!(
                    "min_concurrency ({min_concurrency}) is above max_concurrency \
                     ({max_concurrency}); lower it or raise max_concurrency"
                ),
            );
        }
        let retry_budget = s
            .key(
                "retry_budget",
                "Retries as a share of first attempts over the last `retry_budget_window`, at most (above 0, at most 1).",
            )
            .unit("retries per first attempt")
            .or(0.1_f64);
        if !(retry_budget > 0.0 && retry_budget <= 1.0) {
            s.error(
                "retry_budget",
                format!(
                    "expected a share of requests above 0 and at most 1 (0.1 = 10%), found \
                     {retry_budget}"
                ),
            );
        }
        let retry_budget_floor = s
            .key(
                "retry_budget_floor",
                "Retries per second the budget always allows, whatever the traffic (so that a quiet sink can still retry).",
            )
            .unit("retries per second")
            .or(3.0_f64);
        if !(0.0..=1_000.0).contains(&retry_budget_floor) {
            s.error(
                "retry_budget_floor",
                format!(
                    "expected retries per second from 0 to 1000 (0: no retry without \
                     traffic), found {retry_budget_floor}"
                ),
            );
        }
        let window: Duration = s
            .key(
                "retry_budget_window",
                "The window the retry budget counts over, in whole seconds (1s to 300s).",
            )
            .or(Duration::secs(10));
        let retry_budget_window = window.get().as_secs();
        if window.get().subsec_nanos() != 0 || !(1..=300).contains(&retry_budget_window) {
            s.error(
                "retry_budget_window",
                format!(
                    "expected whole seconds from 1s to 300s, found {:?}",
                    window.get()
                ),
            );
        }
        let method = s.key("method", "The request method.").or(Method::Post);
        let encoding = s
            .key(
                "encoding",
                "What a body holds: envelopes one per line, a JSON array of envelopes, or each record's payload as received, one per line.",
            )
            .or(Encoding::Ndjson);
        let fields = crate::sinks::lines::parse_fields(s, true, "");
        if fields.is_some() && encoding == Encoding::Payload {
            s.error(
                "fields",
                "writes each record as an object of payload fields, not its payload: use encoding = \"ndjson\" or \"json_array\" with it",
            );
        }
        let compression = s
            .key(
                "compression",
                "How a body is compressed (`Content-Encoding`).",
            )
            .or(BodyCompression::None);
        let batch_records = s
            .key("batch_records", "Records per request, at most.")
            .unit("records")
            .or(NonZeroU32::new(500).unwrap_or(one));
        let batch_bytes = s
            .key(
                "batch_bytes",
                "Encoded bytes per request (before compression), at most, as estimated before encoding; a larger record goes alone.",
            )
            .or(ByteSize::mib(1));
        let batch_linger = s
            .key(
                "batch_linger",
                "How long a request that is not full waits for more records.",
            )
            .or(Duration::millis(200));
        let timeout = s
            .key(
                "timeout",
                "Request timeout: connecting, sending and reading the answer.",
            )
            .or(Duration::secs(10));
        let target_latency = s
            .key(
                "target_latency",
                "Round-trip time above which the concurrency limit is cut (judged on each second's p99).",
            )
            .default_text("none: only 429, 503, timeouts and connection errors cut")
            .example("500ms")
            .opt();
        let max_retry_after = s
            .key(
                "max_retry_after",
                "The longest `Retry-After` honoured; a longer one is cut to this.",
            )
            .or(Duration::secs(60));
        Some(Self {
            method,
            headers,
            encoding,
            fields,
            compression,
            batch_records,
            batch_bytes,
            batch_linger,
            timeout,
            target_latency,
            min_concurrency,
            max_concurrency,
            retry_budget,
            retry_budget_floor,
            retry_budget_window: u32::try_from(retry_budget_window.clamp(1, 300)).unwrap_or(10),
            max_retry_after,
            ca_file,
            url: url?,
        })
    }
}

/// Reads `raw`, the value of `key`: a table of header names to strings (`headers` or
/// `headers_env`).
fn read_headers(
    s: &Section<'_>,
    key: &'static str,
    raw: Option<&toml::Value>,
    out: &mut Vec<Header>,
    value: impl Fn(String) -> HeaderValue,
) {
    let Some(raw) = raw else { return };
    let Some(table) = raw.as_table() else {
        s.error(
            key,
            "expected a table of header names to strings, e.g. { \"X-Tenant\" = \"a\" }",
        );
        return;
    };
    for (name, v) in table {
        let path = format!("{key}.{name}");
        if hyper::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            s.diagnostics().error(
                &s.key_path(&path),
                format!("{name:?} is not a valid HTTP header name"),
            );
            continue;
        }
        let Some(text) = v.as_str() else {
            s.diagnostics()
                .error(&s.key_path(&path), "expected a string".to_owned());
            continue;
        };
        if key == "headers_env" {
            check_env_name(s, key, text);
        } else if hyper::header::HeaderValue::from_str(text).is_err() {
            s.diagnostics().error(
                &s.key_path(&path),
                "not a valid header value (visible ASCII only)".to_owned(),
            );
            continue;
        }
        out.push(Header {
            name: name.clone(),
            value: value(text.to_owned()),
        });
    }
}

impl SinkKeys for HttpSinkConfig {
    const TYPE: &'static str = "http";
    const ABOUT: &'static str = "Batches of records sent to an HTTP endpoint with adaptive concurrency, `Retry-After`, a retry budget and dead letters to the quarantine.";

    fn parse(s: &mut Section<'_>) -> Option<Self> {
        HttpSinkConfig::parse(s)
    }

    fn bounds(&self, bounds: &mut Bounds<'_>) {
        // Every batch admitted to the ordered stage (in flight, waiting to retry, or
        // done and held behind an earlier one) holds its records (in the WAL reads they
        // came in) and their encoding (the body is a slice of it, or its compressed
        // copy); plus the one being filled.
        let held = u64::from(self.max_concurrency.get()) * 2 + 1;
        bounds.add(
            "requests",
            Some(held),
            times(held, self.batch_bytes.bytes()) * 2,
            format!(
                "2 × max_concurrency ({}) batches in flight or held for order, and one \
                 being filled, each batch_bytes {} of records plus their encoding",
                self.max_concurrency, self.batch_bytes
            ),
        );
    }
}
