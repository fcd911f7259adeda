//! The HTTP sink benchmark's two helpers (`scripts/bench-http-sink.sh`; not a test):
//!
//! * `serve ADDR`: a fast endpoint that answers every `POST /ingest` with 200 and counts
//!   its NDJSON lines; `GET /count` returns the total. `POST /hold` makes requests wait
//!   unanswered until `POST /release` (so that a backlog builds in the WAL first).
//!   `GET /wait/N` answers once N lines have been counted (so that the bench waits for
//!   a drain without polling, which would take CPU from what it measures).
//! * `client URL SECONDS CONCURRENCY RECORDS SIZE`: a bare client (hyper-util's pooled
//!   client, as the sink uses) posting the same NDJSON body of RECORDS envelopes with
//!   SIZE-byte payloads from CONCURRENCY tasks for SECONDS; prints `records/s` and its
//!   own CPU time in clock ticks.
//! * `client-encode URL SECONDS CONCURRENCY RECORDS SIZE`: the same, but every request's
//!   body is encoded anew from RECORDS records in memory with weir's own NDJSON encoder
//!   (what any forwarder of records must do, without a WAL, order or retries).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use weir::record::Record;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => serve(args.get(1).map_or("127.0.0.1:19466", String::as_str)).await,
        Some(mode @ ("client" | "client-encode")) => {
            let n = |i: usize| -> anyhow::Result<u64> {
                Ok(args
                    .get(i)
                    .ok_or_else(|| anyhow::anyhow!("missing argument {i}"))?
                    .parse()?)
            };
            let encode = mode == "client-encode";
            client(&args[1], n(2)?, n(3)?, n(4)?, n(5)?, encode).await
        }
        _ => anyhow::bail!(
            "usage: http_sink_bench serve ADDR | client[-encode] URL SECONDS CONCURRENCY RECORDS SIZE"
        ),
    }
}

/// The endpoint's state: lines counted, and whether requests are held.
struct Endpoint {
    count: AtomicU64,
    /// The count, for `/wait`.
    counted: tokio::sync::watch::Sender<u64>,
    held: tokio::sync::watch::Sender<bool>,
}

async fn serve(addr: &str) -> anyhow::Result<()> {
    let state = Arc::new(Endpoint {
        count: AtomicU64::new(0),
        counted: tokio::sync::watch::Sender::new(0),
        held: tokio::sync::watch::Sender::new(false),
    });
    let app = Router::new()
        .route(
            "/ingest",
            post(|State(s): State<Arc<Endpoint>>, body: Bytes| async move {
                let mut held = s.held.subscribe();
                let _ = held.wait_for(|h| !*h).await;
                let lines = body.iter().filter(|b| **b == b'\n').count() as u64;
                let total = s.count.fetch_add(lines, Ordering::Relaxed) + lines;
                s.counted.send_if_modified(|c| {
                    let more = total > *c;
                    *c = (*c).max(total);
                    more
                });
            }),
        )
        .route(
            "/wait/{lines}",
            get(
                |State(s): State<Arc<Endpoint>>, Path(lines): Path<u64>| async move {
                    let mut counted = s.counted.subscribe();
                    let _ = counted.wait_for(|c| *c >= lines).await;
                    s.count.load(Ordering::Relaxed).to_string()
                },
            ),
        )
        .route(
            "/count",
            get(|State(s): State<Arc<Endpoint>>| async move {
                s.count.load(Ordering::Relaxed).to_string()
            }),
        )
        .route(
            "/hold",
            post(|State(s): State<Arc<Endpoint>>| async move {
                s.held.send_replace(true);
            }),
        )
        .route(
            "/release",
            post(|State(s): State<Arc<Endpoint>>| async move {
                s.held.send_replace(false);
            }),
        )
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, app).await?;
    Ok(())
}

async fn client(
    url: &str,
    secs: u64,
    concurrency: u64,
    records: u64,
    size: u64,
    encode: bool,
) -> anyhow::Result<()> {
    // The generator's records: `{"seq":N,"pad":"xx…"}` payloads of SIZE bytes.
    let source: Arc<str> = Arc::from("gen");
    let batch: Arc<Vec<Record>> = Arc::new(
        (0..records)
            .map(|seq| {
                let head = format!("{{\"seq\":{seq},\"pad\":\"");
                let pad = (size as usize).saturating_sub(head.len() + 2);
                Record {
                    source: Arc::clone(&source),
                    key: format!("key-{}", seq % 16),
                    timestamp_ms: 1_700_000_000_000,
                    payload: Bytes::from(format!("{head}{}\"}}", "x".repeat(pad))),
                    attributes: Vec::new(),
                }
            })
            .collect(),
    );
    let encode_all = move |batch: &[Record]| {
        let mut body = Vec::with_capacity(batch.len() * (size as usize + 96));
        for record in batch {
            record.write_ndjson(&mut body).expect("JSON payloads");
        }
        Bytes::from(body)
    };
    let body = encode_all(&batch);
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .build(hyper_util::client::legacy::connect::HttpConnector::new());
    let uri: hyper::Uri = url.parse()?;
    let deadline = Instant::now() + Duration::from_secs(secs);
    let sent = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (client, uri, body, sent, batch) = (
            client.clone(),
            uri.clone(),
            body.clone(),
            Arc::clone(&sent),
            Arc::clone(&batch),
        );
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let body = if encode {
                    encode_all(&batch)
                } else {
                    body.clone()
                };
                let mut request = hyper::Request::new(Full::new(body));
                *request.method_mut() = hyper::Method::POST;
                *request.uri_mut() = uri.clone();
                request.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("application/x-ndjson"),
                );
                let Ok(response) = client.request(request).await else {
                    continue;
                };
                let ok = response.status().is_success();
                let _ = response.into_body().collect().await;
                if ok {
                    sent.fetch_add(records, Ordering::Relaxed);
                }
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    let rate = sent.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
    println!("{rate:.0} {}", cpu_ticks()?);
    Ok(())
}

/// This process's CPU time so far (user + system), in clock ticks (`getconf CLK_TCK`).
fn cpu_ticks() -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The fields after the command name (which is in parentheses and may hold spaces):
    // utime and stime are the 14th and 15th fields of the whole line.
    let after = stat
        .rsplit_once(')')
        .ok_or_else(|| anyhow::anyhow!("/proc/self/stat without a command name"))?
        .1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| -> anyhow::Result<u64> {
        Ok(fields
            .get(i)
            .ok_or_else(|| anyhow::anyhow!("/proc/self/stat is short"))?
            .parse()?)
    };
    Ok(field(11)? + field(12)?)
}
