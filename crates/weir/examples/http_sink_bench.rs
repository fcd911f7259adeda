//! The HTTP sink benchmark's two helpers (`scripts/bench-http-sink.sh`; not a test):
//!
//! * `serve ADDR`: a fast endpoint that answers every `POST /ingest` with 200 and counts
//!   its NDJSON lines; `GET /count` returns the total.
//! * `client URL SECONDS CONCURRENCY RECORDS SIZE`: a bare client (hyper-util's pooled
//!   client, as the sink uses) posting the same NDJSON body of RECORDS envelopes with
//!   SIZE-byte payloads from CONCURRENCY tasks for SECONDS; prints `records/s`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::{get, post};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => serve(args.get(1).map_or("127.0.0.1:19466", String::as_str)).await,
        Some("client") => {
            let n = |i: usize| -> anyhow::Result<u64> {
                Ok(args
                    .get(i)
                    .ok_or_else(|| anyhow::anyhow!("missing argument {i}"))?
                    .parse()?)
            };
            client(&args[1], n(2)?, n(3)?, n(4)?, n(5)?).await
        }
        _ => anyhow::bail!(
            "usage: http_sink_bench serve ADDR | client URL SECONDS CONCURRENCY RECORDS SIZE"
        ),
    }
}

async fn serve(addr: &str) -> anyhow::Result<()> {
    let count = Arc::new(AtomicU64::new(0));
    let app =
        Router::new()
            .route(
                "/ingest",
                post(|State(c): State<Arc<AtomicU64>>, body: Bytes| async move {
                    let lines = body.iter().filter(|b| **b == b'\n').count() as u64;
                    c.fetch_add(lines, Ordering::Relaxed);
                }),
            )
            .route(
                "/count",
                get(|State(c): State<Arc<AtomicU64>>| async move {
                    c.load(Ordering::Relaxed).to_string()
                }),
            )
            .with_state(count);
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
) -> anyhow::Result<()> {
    let mut body = Vec::new();
    for seq in 0..records {
        let head = format!("{{\"seq\":{seq},\"pad\":\"");
        let pad = (size as usize).saturating_sub(head.len() + 2);
        body.extend_from_slice(
            format!(
                "{{\"source\":\"gen\",\"key\":\"key-{}\",\"ts\":1700000000000,\"payload\":{head}{}\"}},\"attributes\":{{}}}}\n",
                seq % 16,
                "x".repeat(pad)
            )
            .as_bytes(),
        );
    }
    let body = Bytes::from(body);
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .build(hyper_util::client::legacy::connect::HttpConnector::new());
    let uri: hyper::Uri = url.parse()?;
    let deadline = Instant::now() + Duration::from_secs(secs);
    let sent = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (client, uri, body, sent) =
            (client.clone(), uri.clone(), body.clone(), Arc::clone(&sent));
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let mut request = hyper::Request::new(Full::new(body.clone()));
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
    println!("{rate:.0}");
    Ok(())
}
