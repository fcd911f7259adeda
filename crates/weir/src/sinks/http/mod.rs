//! `type = "http"` (a sink): batches of records sent to an HTTP endpoint.
//!
//! Records are gathered into requests of at most `batch_records` records and
//! `batch_bytes` bytes (a request that is not full goes after `batch_linger`), encoded
//! as `ndjson` envelopes, a `json_array` of them, or the `payload`s alone, and
//! optionally compressed (`gzip`, `zstd`). Each request's own task encodes its records
//! straight from their WAL form ([`crate::pipeline::Sink::takes_wire`]: nothing is
//! decoded into owned strings first). One kept client (hyper-util's pooled client
//! over rustls: HTTP/1.1, and HTTP/2 where TLS negotiates it) sends them. A payload
//! an envelope cannot hold (not UTF-8) is refused by that encoder, counted in the
//! sink's `unencodable` ([`crate::sinks::SinkContext::unencodable`]) and put in the
//! quarantine; the rest of its request is sent.
//!
//! **Order and the cursor.** Requests run concurrently through weir-flow's ordered
//! stage ([`weir_flow::ordered`]): each batch is one operation; completions are
//! released in WAL order, so the cursor only moves past the contiguous prefix of
//! delivered batches ([`crate::pipeline::Sink::settled`]). At most
//! `2 × max_concurrency` batches are admitted (in flight, waiting to retry, or done
//! and held behind an earlier one); past that `write` waits. A slot that any request
//! frees is refilled at once, so a slow request at the head does not hold the other
//! slots empty (up to that bound); `/status` shows `batches` and `held_back` as they
//! are when asked.
//!
//! **Concurrency** is weir-flow's AIMD limiter ([`weir_flow::aimd`]), starting at
//! `min_concurrency`: each answered request while the limit was in full use adds
//! `1 / limit` (one per round trip, like TCP's congestion window); 429, 503,
//! timeouts and connection errors multiply it by 0.8 (at most once per round trip);
//! with `target_latency` set, a second whose p99 round trip is above it cuts too.
//!
//! **Failures** are classified ([`core::classify`]):
//!
//! | answer | what happens |
//! |---|---|
//! | 2xx | delivered |
//! | 408, 429, 5xx, timeout, connection error | retried, never dropped |
//! | 400, 422 | the batch is bisected until the refused records are alone; they go to the quarantine with the status and body, the rest is delivered |
//! | 413 | the batch is split; a single record refused with 413 is dead-lettered |
//! | 401, 403, 404, 405 (any other 4xx) | the sink shows `failed` with the answer; nothing is dead-lettered; sent again every `retry.max` |
//!
//! **Retries.** A batch's `k`-th retry waits `min(retry.max, retry.initial × 2^(k-1))`
//! (the sink's shared `retry` keys), then for any `Retry-After` pause (429/503,
//! seconds or HTTP-date, capped at `max_retry_after`: no request of the sink starts
//! before it expires), then for the retry budget: retries are at most `retry_budget`
//! of the first attempts over the last `retry_budget_window` (10 s), with a floor of
//! `retry_budget_floor` (3) per second. When the budget is spent, retries wait for it
//! (backpressure: the lag grows, the WAL's `on_full` and `max_lag` decide upstream);
//! nothing transient is dropped.
//!
//! **Startup check** (`healthcheck = true`): the host resolves, a connection opens and,
//! for `https://`, the TLS handshake succeeds (`healthcheck.rs`); no request is sent.

mod body;
mod config;
mod core;
mod deliver;
mod healthcheck;
mod service;
mod shell;
mod stats;

pub use self::config::{BodyCompression, Encoding, Header, HeaderValue, HttpSinkConfig, Method};
pub use self::shell::HttpSink;
pub use self::stats::HttpStats;
