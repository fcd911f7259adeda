//! The server's bounds: the cap, the header and idle timeout, failed accepts.

use std::convert::Infallible;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::accept::{AcceptErrors, AcceptFailed, BACKOFF_MAX, BACKOFF_MIN, LOG_EVERY};
use super::{Limits, Listener, Server};

type Ok200 = hyper::Response<Full<Bytes>>;

fn ok() -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = Ok200,
    Error = Infallible,
    Future: Send,
> + Clone
+ Send
+ 'static {
    hyper::service::service_fn(|_request| async {
        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(b"ok"))))
    })
}

fn limits(max_connections: u32, header_timeout: Duration) -> Limits {
    Limits {
        max_connections: NonZeroU32::new(max_connections).expect("> 0"),
        header_timeout,
    }
}

/// A server on a loopback port; stopped when the sender is dropped.
async fn start(
    limits: Limits,
) -> (
    std::net::SocketAddr,
    super::Connections,
    tokio::sync::oneshot::Sender<()>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = Server::new("test server", "max_connections", limits);
    let connections = server.connections();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, ok(), async {
        let _ = stopped.await;
    }));
    (addr, connections, stop)
}

/// Reads until EOF (or a reset); what arrived.
async fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut got))
        .await
        .expect("the server closed the connection");
    got
}

#[tokio::test]
async fn a_half_sent_head_is_closed_after_the_header_timeout() {
    let (addr, connections, _stop) = start(limits(4, Duration::from_millis(300))).await;
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-Half: ")
        .await
        .expect("write");
    let started = Instant::now();
    read_to_close(&mut stream).await;
    assert!(started.elapsed() >= Duration::from_millis(250));
    // The permit is freed once the connection's task has ended.
    let deadline = Instant::now() + Duration::from_secs(5);
    while connections.open() > 0 {
        assert!(
            Instant::now() < deadline,
            "the connection's slot was not freed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_header_timeout() {
    let (addr, _connections, _stop) = start(limits(4, Duration::from_millis(300))).await;
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let got = read_to_close(&mut stream).await;
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(got.ends_with("ok"), "one response, then the close: {got}");
}

#[tokio::test]
async fn connections_above_the_cap_wait_until_one_closes() {
    let (addr, connections, _stop) = start(limits(2, Duration::from_secs(30))).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(TcpStream::connect(addr).await.expect("connect"));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while connections.open() < 2 {
        assert!(Instant::now() < deadline, "the two were not accepted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The third connects (the kernel's backlog) but is not served.
    let mut third = TcpStream::connect(addr).await.expect("connect");
    third
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(300), third.read(&mut buf)).await;
    assert!(early.is_err(), "served above the cap: {early:?}");
    assert_eq!(connections.open(), 2);
    drop(held.pop());
    let got = read_to_close(&mut third).await;
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
}

/// A listener whose accepts fail with EMFILE, counting them.
struct Exhausted(Arc<AtomicU64>);

impl Listener for Exhausted {
    type Io = tokio::io::DuplexStream;

    fn accept(&mut self) -> impl std::future::Future<Output = std::io::Result<Self::Io>> + Send {
        self.0.fetch_add(1, Ordering::Relaxed);
        std::future::ready(Err(std::io::Error::from_raw_os_error(24)))
    }
}

#[tokio::test(start_paused = true)]
async fn failed_accepts_back_off_instead_of_spinning() {
    let attempts = Arc::new(AtomicU64::new(0));
    let server = Server::new(
        "test server",
        "max_connections",
        limits(4, Duration::from_secs(1)),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(Exhausted(Arc::clone(&attempts)), ok(), async {
        let _ = stopped.await;
    }));
    tokio::time::sleep(Duration::from_secs(60)).await;
    let n = attempts.load(Ordering::Relaxed);
    // 0.1 + 0.2 + 0.4 + 0.8 s, then one a second: about 60 in a minute, not 600.
    assert!((50..=70).contains(&n), "{n} accepts in 60 s");
    stop.send(()).expect("serving");
    serving.await.expect("stopped");
}

#[test]
fn the_backoff_doubles_to_its_cap_and_restarts_after_a_success() {
    let mut errors = AcceptErrors::default();
    let now = Instant::now();
    let delays: Vec<Duration> = (0..6).map(|_| errors.failed(now).retry_in).collect();
    assert_eq!(delays[0], BACKOFF_MIN);
    assert_eq!(delays[1], BACKOFF_MIN * 2);
    assert_eq!(delays[5], BACKOFF_MAX);
    errors.succeeded();
    assert_eq!(errors.failed(now).retry_in, BACKOFF_MIN);
}

#[test]
fn failures_are_logged_first_at_once_then_at_most_every_ten_seconds_with_a_count() {
    let mut errors = AcceptErrors::default();
    let t0 = Instant::now();
    assert_eq!(errors.failed(t0).log, Some(1));
    let mut logged = 0;
    // 200 failures 100 ms apart (20 s): two more lines, covering every failure.
    let mut covered = 1;
    for i in 1..=200u32 {
        let AcceptFailed { log, .. } = errors.failed(t0 + Duration::from_millis(100) * i);
        if let Some(n) = log {
            logged += 1;
            covered += n;
        }
    }
    assert_eq!(logged, 2, "one line per {LOG_EVERY:?}");
    assert_eq!(covered, 1 + 100 + 100);
}
