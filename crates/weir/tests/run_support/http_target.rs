//! An HTTP endpoint for the HTTP sink's end-to-end tests: an axum server on a free
//! loopback port whose behaviour a test changes while weir sends to it (capacity,
//! latency, forced answers with `Retry-After`, dropped connections, 400 for marked
//! records, a required token). It records every request it saw.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Version};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// One request as the server answered it.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    /// When it arrived, since the server started.
    pub arrived: Duration,
    /// When it was answered.
    pub answered: Duration,
    /// The status sent.
    pub status: u16,
    /// Records in the body.
    pub records: usize,
    /// Requests being served when it arrived (itself included).
    pub concurrent: usize,
    /// The HTTP version it came over.
    pub version: Version,
}

/// What the server does; change it at any time.
#[derive(Debug, Default)]
pub struct Behaviour {
    /// Requests served at once; above it, 429 at once. 0: unlimited.
    pub capacity: AtomicUsize,
    /// Time to serve a request.
    pub latency_ms: AtomicU64,
    /// Up to this much more, varying from request to request (so that requests in
    /// flight finish out of order).
    pub jitter_ms: AtomicU64,
    /// Answer every request with this status (0: serve normally).
    pub force_status: AtomicU16,
    /// Answer only the next request with this status (0: none), then serve normally:
    /// one atomic swap, so two requests at once never both get it.
    pub force_next: AtomicU16,
    /// `Retry-After` sent with forced answers.
    pub retry_after: Mutex<Option<String>>,
    /// Records whose `seq` is a multiple of this are refused with 400 (0: none).
    pub refuse_every: AtomicU64,
    /// Required `Authorization` value (401 otherwise).
    pub token: Mutex<Option<String>>,
    /// Drop the connection of this many next requests without answering.
    pub drop_next: AtomicUsize,
    /// Records per request above which the answer is 413 (0: any number).
    pub max_records: AtomicUsize,
    /// A request holding the record with `seq` 0 waits this much longer (a slow head
    /// of the stream, while the requests after it finish).
    pub seq0_extra_ms: AtomicU64,
}

/// The server's state.
#[derive(Debug)]
pub struct Shared {
    pub behaviour: Behaviour,
    start: Instant,
    in_flight: AtomicUsize,
    /// Requests seen (the jitter's seed).
    arrivals: AtomicU64,
    /// The `seq` of every record delivered (answered 200), in arrival order.
    pub seqs: Mutex<Vec<u64>>,
    pub events: Mutex<Vec<Event>>,
}

impl Shared {
    pub fn since_start(&self) -> Duration {
        self.start.elapsed()
    }

    pub fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }

    pub fn seqs(&self) -> Vec<u64> {
        self.seqs.lock().unwrap().clone()
    }

    /// Distinct delivered seqs.
    pub fn distinct(&self) -> std::collections::BTreeSet<u64> {
        self.seqs().into_iter().collect()
    }
}

/// The running server (stopped when dropped).
pub struct Target {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
    https: bool,
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Target {
    /// Serves plain HTTP/1.1.
    pub fn start() -> Target {
        Self::serve(None)
    }

    /// Serves HTTPS with the PEM certificate chain `cert` and key `key`, offering
    /// HTTP/2 and HTTP/1.1 by ALPN (as a real endpoint does).
    pub fn start_tls(cert: &Path, key: &Path) -> Target {
        let certs = CertificateDer::pem_file_iter(cert)
            .expect("read the certificate")
            .collect::<Result<Vec<_>, _>>()
            .expect("PEM certificates");
        let key = PrivateKeyDer::from_pem_file(key).expect("read the key");
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("a server certificate");
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Self::serve(Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))))
    }

    fn serve(tls: Option<tokio_rustls::TlsAcceptor>) -> Target {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let shared = Arc::new(Shared {
            behaviour: Behaviour::default(),
            start: Instant::now(),
            in_flight: AtomicUsize::new(0),
            arrivals: AtomicU64::new(0),
            seqs: Mutex::new(Vec::new()),
            events: Mutex::new(Vec::new()),
        });
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let app = Router::new()
            .route("/ingest", post(ingest))
            .with_state(Arc::clone(&shared));
        let https = tls.is_some();
        match tls {
            None => {
                runtime.spawn(async move {
                    let _ = axum::serve(listener, app).await;
                });
            }
            Some(acceptor) => {
                runtime.spawn(async move {
                    while let Ok((tcp, _)) = listener.accept().await {
                        let (acceptor, app) = (acceptor.clone(), app.clone());
                        tokio::spawn(async move {
                            let Ok(stream) = acceptor.accept(tcp).await else {
                                return;
                            };
                            let _ = auto::Builder::new(TokioExecutor::new())
                                .serve_connection(
                                    TokioIo::new(stream),
                                    TowerToHyperService::new(app),
                                )
                                .await;
                        });
                    }
                });
            }
        }
        Target {
            addr,
            shared,
            runtime: Some(runtime),
            https,
        }
    }

    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}/ingest", self.addr)
    }

    pub fn behaviour(&self) -> &Behaviour {
        &self.shared.behaviour
    }
}

/// Releases an in-flight slot however the handler ends.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn ingest(
    State(s): State<Arc<Shared>>,
    version: Version,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let arrived = s.start.elapsed();
    let arrival = s.arrivals.fetch_add(1, Ordering::SeqCst);
    let b = &s.behaviour;
    let concurrent = s.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    let _slot = Slot(&s.in_flight);
    let body = decode_body(&headers, &body);
    // NDJSON lines, or the elements of a JSON array.
    let array: Vec<Vec<u8>> = if body.first() == Some(&b'[') {
        let values: Vec<serde_json::Value> = serde_json::from_slice(&body).unwrap_or_default();
        values
            .iter()
            .map(|v| serde_json::to_vec(v).unwrap())
            .collect()
    } else {
        Vec::new()
    };
    let lines: Vec<&[u8]> = if body.first() == Some(&b'[') {
        array.iter().map(Vec::as_slice).collect()
    } else {
        body.split(|c| *c == b'\n')
            .filter(|l| !l.is_empty())
            .collect()
    };
    let answer = |status: u16, extra: Option<String>, body: String| {
        s.events.lock().unwrap().push(Event {
            arrived,
            answered: s.start.elapsed(),
            status,
            records: lines.len(),
            concurrent,
            version,
        });
        let mut response = (StatusCode::from_u16(status).unwrap(), body).into_response();
        if let Some(value) = extra {
            response
                .headers_mut()
                .insert("retry-after", value.parse().unwrap());
        }
        response
    };
    if b.drop_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        s.events.lock().unwrap().push(Event {
            arrived,
            answered: arrived,
            status: 0,
            records: lines.len(),
            concurrent,
            version,
        });
        // Dropping the connection: the handler's task is cut off without an answer.
        panic!("http_target: dropping this connection on purpose");
    }
    let token = b.token.lock().unwrap().clone();
    if let Some(token) = token {
        let given = headers.get("authorization").and_then(|v| v.to_str().ok());
        if given != Some(token.as_str()) {
            return answer(401, None, "bad token".to_owned());
        }
    }
    let next = b.force_next.swap(0, Ordering::SeqCst);
    let forced = if next != 0 {
        next
    } else {
        b.force_status.load(Ordering::SeqCst)
    };
    if forced != 0 {
        let retry_after = b.retry_after.lock().unwrap().clone();
        return answer(forced, retry_after, "forced".to_owned());
    }
    let max_records = b.max_records.load(Ordering::SeqCst);
    if max_records > 0 && lines.len() > max_records {
        return answer(413, None, format!("at most {max_records} records"));
    }
    let capacity = b.capacity.load(Ordering::SeqCst);
    if capacity > 0 && concurrent > capacity {
        return answer(429, None, "over capacity".to_owned());
    }
    let jitter = b.jitter_ms.load(Ordering::SeqCst);
    // A fixed scramble of the arrival number: repeatable, and not monotonic.
    let extra = if jitter > 0 {
        arrival.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) % jitter
    } else {
        0
    };
    // Each line is parsed below anyway; this extra look happens only when asked for.
    let seq0_extra = b.seq0_extra_ms.load(Ordering::SeqCst);
    let head = if seq0_extra > 0
        && lines.iter().any(|line| {
            serde_json::from_slice::<serde_json::Value>(line)
                .is_ok_and(|v| v["payload"]["seq"].as_u64() == Some(0))
        }) {
        seq0_extra
    } else {
        0
    };
    let latency = b.latency_ms.load(Ordering::SeqCst) + extra + head;
    if latency > 0 {
        tokio::time::sleep(Duration::from_millis(latency)).await;
    }
    let mut seqs = Vec::with_capacity(lines.len());
    for line in &lines {
        let v: serde_json::Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => return answer(400, None, format!("not JSON: {e}")),
        };
        let seq = v["payload"]["seq"].as_u64().unwrap_or(u64::MAX);
        seqs.push(seq);
    }
    let every = b.refuse_every.load(Ordering::SeqCst);
    if every > 0
        && let Some(bad) = seqs.iter().find(|seq| *seq % every == 0)
    {
        return answer(400, None, format!("refused seq {bad}"));
    }
    s.seqs.lock().unwrap().extend(seqs);
    answer(200, None, String::new())
}

/// The body, decompressed as its `Content-Encoding` says (gzip, zstd).
fn decode_body(headers: &HeaderMap, body: &[u8]) -> Vec<u8> {
    use std::io::Read as _;
    match headers
        .get("content-encoding")
        .and_then(|v| v.to_str().ok())
    {
        Some("gzip") => {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .expect("a gzip body");
            out
        }
        Some("zstd") => zstd::stream::decode_all(body).expect("a zstd body"),
        _ => body.to_vec(),
    }
}
