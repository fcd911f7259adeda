//! The `http` source's tokio task (see the [module docs](super)).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use hyper_util::service::TowerToHyperService;
use tokio::sync::watch;
use weir_flow::semaphore::{Semaphore, SemaphoreConfig};
use weir_wal::{AppendError, Batch};

use super::config::HttpSourceConfig;
use super::core::{
    BodyKind, SUPPORTED_ENCODINGS, authorized, body_kind, split_ndjson, unsupported_encoding,
};
use crate::pipeline::ingest::{AdmitError, Ingest};
use crate::pipeline::stats::add;
use crate::record::Record;
use crate::serve::{CONNECTION_MEMORY_BYTES, Limits, Server};
use crate::sources::{SourceContext, StartSource};

/// What `Retry-After` says, in seconds.
const RETRY_AFTER_SECS: &str = "1";

struct Shared {
    name: Arc<str>,
    ingest: Ingest,
    max_body: u64,
    admission_timeout: Duration,
    body_timeout: Duration,
    token: Option<String>,
    requests: Semaphore,
}

/// Reads the bearer token from `auth_token_env` (at startup, so a missing variable is a
/// startup error).
///
/// # Errors
///
/// A message naming the key and the variable if it is not set.
pub fn token(name: &str, config: &HttpSourceConfig) -> Result<Option<String>, String> {
    let Some(var) = &config.auth_token_env else {
        return Ok(None);
    };
    match std::env::var(var) {
        Ok(token) if !token.is_empty() => Ok(Some(token)),
        _ => Err(format!(
            "sources.{name}.auth_token_env: the environment variable {var} is not set (or empty); \
             export it with the bearer token clients must send"
        )),
    }
}

impl StartSource for HttpSourceConfig {
    /// The bound listener and the bearer token, if one is configured.
    type Checked = (tokio::net::TcpListener, Option<String>);

    async fn check(&self, name: &str) -> anyhow::Result<Self::Checked> {
        use anyhow::Context as _;
        let token = token(name, self).map_err(anyhow::Error::msg)?;
        let listener = tokio::net::TcpListener::bind(self.listen)
            .await
            .with_context(|| format!("sources.{name}.listen: binding {}", self.listen))?;
        Ok((listener, token))
    }

    async fn start(self, (listener, token): Self::Checked, cx: SourceContext) {
        {
            let stats = Arc::clone(cx.ingest.stats_arc());
            let name = Arc::clone(&cx.name);
            let server = server(&name, &self);
            let connections = server.connections();
            cx.telemetry.register_queue(
                &format!("sources.{name}.connections"),
                Some(connections.max()),
                Some(connections.max().saturating_mul(CONNECTION_MEMORY_BYTES)),
                move || connections.flow_stats(),
            );
            match run(cx.name, self, token, listener, server, cx.ingest, cx.stop).await {
                Err(e) => {
                    tracing::error!("source {name}: serving failed: {e}");
                    stats
                        .component
                        .set_state(crate::telemetry::State::Failed(e.to_string()));
                }
                Ok(()) => stats.component.set_state(crate::telemetry::State::Stopped),
            }
        }
    }
}

/// The source's bounded server: `max_connections`, `header_timeout`.
pub fn server(name: &str, config: &HttpSourceConfig) -> Server {
    Server::new(
        format!("source {name}"),
        "max_connections",
        Limits {
            max_connections: config.max_connections,
            header_timeout: config.header_timeout.get(),
        },
    )
}

/// Serves the source on `listener` through `server` until `stop` turns true;
/// in-flight requests are answered before it returns.
///
/// # Cancel safety
///
/// Not meant to be cancelled; stop it through `stop`.
pub async fn run(
    name: Arc<str>,
    config: HttpSourceConfig,
    token: Option<String>,
    listener: tokio::net::TcpListener,
    server: Server,
    ingest: Ingest,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let shared = Arc::new(Shared {
        name,
        ingest,
        max_body: config.max_body.bytes(),
        admission_timeout: config.admission_timeout,
        body_timeout: config.body_timeout.get(),
        token,
        requests: Semaphore::new(SemaphoreConfig::new(u64::from(
            config.max_concurrent_requests.get(),
        ))),
    });
    let app = axum::Router::new()
        .route(&config.path, axum::routing::post(ingest_handler))
        .with_state(shared);
    let shutdown = async move { crate::pipeline::stopped(&mut stop).await };
    server
        .serve(listener, TowerToHyperService::new(app), shutdown)
        .await;
    Ok(())
}

fn answer(status: StatusCode, body: serde_json::Value) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            header::HeaderValue::from_static(RETRY_AFTER_SECS),
        );
    }
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
    }
    response
}

fn error(status: StatusCode, message: impl std::fmt::Display) -> Response {
    answer(status, serde_json::json!({ "error": message.to_string() }))
}

async fn ingest_handler(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let stats = shared.ingest.stats();
    let response = handle(&shared, &headers, body).await;
    if response.status() != StatusCode::OK {
        add(&stats.refused_requests, 1);
    }
    response
}

async fn handle(shared: &Shared, headers: &HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    let deadline = started + shared.admission_timeout;
    let Ok(_request) = shared.requests.try_acquire(1) else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many requests in flight (max_concurrent_requests); retry later",
        );
    };
    if let Some(token) = &shared.token
        && !authorized(
            headers.get(header::AUTHORIZATION).map(|v| v.as_bytes()),
            token,
        )
    {
        return error(
            StatusCode::UNAUTHORIZED,
            "expected Authorization: Bearer <token>",
        );
    }
    if let Some(coding) = unsupported_encoding(
        headers
            .get_all(header::CONTENT_ENCODING)
            .iter()
            .map(|v| v.as_bytes()),
    ) {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "Content-Encoding {coding} is not supported (supported: {SUPPORTED_ENCODINGS}); \
                 send the body uncompressed"
            ),
        );
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(len) = declared
        && len > shared.max_body
    {
        return too_large(shared.max_body, Some(len));
    }
    let read = tokio::time::timeout(shared.body_timeout, read_capped(body, shared.max_body));
    let body = match read.await {
        Ok(Ok(body)) => body,
        Err(_elapsed) => return body_timed_out(shared.body_timeout),
        Ok(Err(Capped::TooLarge)) => return too_large(shared.max_body, None),
        Ok(Err(Capped::Io(e))) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("reading the body failed: {e}"),
            );
        }
    };
    let kind = body_kind(
        headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    );
    let payloads = match kind {
        BodyKind::Raw => vec![body],
        BodyKind::Ndjson => match split_ndjson(&body) {
            Ok(p) => p,
            Err(bad) => return error(StatusCode::BAD_REQUEST, bad),
        },
    };
    if payloads.is_empty() {
        return answer(StatusCode::OK, serde_json::json!({ "accepted": 0 }));
    }
    let now_ms = crate::record::now_ms();
    let mut batch = Batch::new();
    let mut wire = Vec::new();
    for payload in &payloads {
        let record = Record {
            source: Arc::clone(&shared.name),
            key: String::new(),
            timestamp_ms: now_ms,
            payload: payload.clone(),
            attributes: Vec::new(),
        };
        wire.clear();
        record.encode_into(&mut wire);
        if let Err(e) = batch.push(&wire) {
            return error(StatusCode::PAYLOAD_TOO_LARGE, e);
        }
    }
    let admission = match shared
        .ingest
        .admit(batch.encoded_len(), Some(deadline))
        .await
    {
        Ok(a) => a,
        Err(e @ AdmitError::TooLarge { .. }) => return error(StatusCode::PAYLOAD_TOO_LARGE, e),
        Err(e) => {
            let stats = shared.ingest.stats();
            let records = payloads.len() as u64;
            if matches!(e, AdmitError::Timeout(_)) {
                add(&stats.expired_records, records);
            } else {
                add(&stats.refused_records, records);
                add(&stats.refused_batches, 1);
            }
            return error(StatusCode::SERVICE_UNAVAILABLE, e);
        }
    };
    match admission.append(batch).await {
        Ok(offsets) => answer(
            StatusCode::OK,
            serde_json::json!({ "accepted": offsets.end - offsets.start }),
        ),
        Err(e @ AppendError::TooLarge { .. }) => error(StatusCode::PAYLOAD_TOO_LARGE, e),
        // Written, then the WAL failed before the fsync: not a 503, which promises that
        // nothing of the request will be delivered.
        Err(e) if e.may_be_durable() => in_doubt(&shared.name, payloads.len(), &e),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e),
    }
}

/// 500 for a request whose records were written and then not made durable: whether
/// they will be delivered cannot be known, and the body says so.
fn in_doubt(source: &str, records: usize, e: &AppendError) -> Response {
    tracing::error!("source {source}: {records} records of a request are in doubt: {e}");
    let mut response = answer(
        StatusCode::INTERNAL_SERVER_ERROR,
        serde_json::json!({
            "error": format!(
                "outcome unknown: {e}. The {records} records of this request may or may not \
                 be delivered; a retry may duplicate them"
            ),
            "outcome": "unknown",
        }),
    );
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
}

/// 408, closing the connection: the rest of the body may still be on its way, so the
/// connection cannot carry another request.
fn body_timed_out(timeout: Duration) -> Response {
    let mut response = error(
        StatusCode::REQUEST_TIMEOUT,
        format!(
            "the body did not arrive within body_timeout ({}); send it faster, send less, \
             or raise body_timeout",
            humantime::format_duration(timeout)
        ),
    );
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
}

fn too_large(max: u64, declared: Option<u64>) -> Response {
    let found = declared.map_or_else(|| "more".to_owned(), |len| format!("{len} bytes"));
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the body is larger than max_body ({max} bytes): found {found}; split it"),
    )
}

enum Capped {
    TooLarge,
    Io(axum::Error),
}

/// Reads the body, refusing as soon as it passes `max` bytes.
async fn read_capped(body: Body, max: u64) -> Result<Bytes, Capped> {
    let mut stream = body.into_data_stream();
    let mut buf = BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(Capped::Io)?;
        if (buf.len() + chunk.len()) as u64 > max {
            return Err(Capped::TooLarge);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}
