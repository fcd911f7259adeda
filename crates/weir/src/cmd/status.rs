//! `weir status [--addr ADDR] [--json]`: asks a running daemon for `GET /status` and
//! prints it as tables and lines in human units ([`render`]), or, with `--json`, the
//! document exactly as the daemon sent it.
//!
//! The request goes through hyper's HTTP/1.1 client on a small current-thread tokio
//! runtime built for the one request. One deadline, `--timeout`, covers the whole
//! exchange: connecting, sending, and reading the last byte of the body, so a daemon
//! that answers slowly byte by byte fails as surely as one that never answers. The body
//! is read up to [`MAX_RESPONSE_BYTES`] and refused above it.

mod render;

use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use hyper::StatusCode;
use hyper::header::{ACCEPT, CONNECTION, HOST};
use hyper_util::rt::TokioIo;

use crate::telemetry::StatusReport;

pub use self::render::render;

/// The largest `/status` response read.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// Arguments of `weir status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The daemon's `runtime.status_addr`.
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub addr: String,
    /// Print the `/status` document exactly as the daemon sent it (JSON) instead of
    /// tables.
    #[arg(long)]
    pub json: bool,
    /// How long to wait for the connection and for the answer.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

/// Runs `weir status`.
pub fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let addr = args
        .addr
        .to_socket_addrs()
        .with_context(|| {
            format!(
                "--addr {:?}: expected HOST:PORT, e.g. 127.0.0.1:9464",
                args.addr
            )
        })?
        .next()
        .ok_or_else(|| anyhow!("--addr {:?} resolves to no address", args.addr))?;
    if args.json {
        out!("{}\n", fetch_status_body(addr, args.timeout)?);
        return Ok(ExitCode::SUCCESS);
    }
    let report = fetch_status(addr, args.timeout)?;
    out!("{}", render(&addr.to_string(), &report));
    Ok(ExitCode::SUCCESS)
}

/// Fetches and parses `GET /status` from `addr`.
///
/// # Errors
///
/// As for [`fetch_status_body`], or when the body is not a [`StatusReport`].
pub fn fetch_status(addr: SocketAddr, timeout: Duration) -> anyhow::Result<StatusReport> {
    let body = fetch_status_body(addr, timeout)?;
    serde_json::from_str(&body).with_context(|| {
        format!("{addr} answered /status with something other than weir's status JSON")
    })
}

/// `GET /status` from `addr`: the body of a 200 answer.
///
/// `timeout` bounds the whole exchange, from connecting to the body's last byte.
///
/// # Errors
///
/// When nothing listens, the whole answer does not arrive within `timeout`, the answer
/// is not HTTP, is not 200, is larger than [`MAX_RESPONSE_BYTES`] or is not UTF-8.
pub fn fetch_status_body(addr: SocketAddr, timeout: Duration) -> anyhow::Result<String> {
    fetch_body(addr, timeout, MAX_RESPONSE_BYTES)
}

/// [`fetch_status_body`] with the body bound as a parameter, for tests.
fn fetch_body(
    addr: SocketAddr,
    timeout: Duration,
    max_body_bytes: usize,
) -> anyhow::Result<String> {
    fetch_path(addr, "/status", timeout, max_body_bytes)
}

/// `GET path` (`/status`, `/history?since=…`) from `addr`: the body of a 200 answer,
/// at most `max_body_bytes`, all within `timeout`. `weir top` reads both endpoints
/// through it.
///
/// # Errors
///
/// As for [`fetch_status_body`].
pub fn fetch_path(
    addr: SocketAddr,
    path: &str,
    timeout: Duration,
    max_body_bytes: usize,
) -> anyhow::Result<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .with_context(|| format!("starting the runtime for the {path} request"))?;
    let body = runtime
        .block_on(async {
            tokio::time::timeout(timeout, get_path(addr, path, max_body_bytes)).await
        })
        .map_err(|_| {
            anyhow!(
                "no complete answer from {addr} within {timeout:?}: is `weir run` running, and \
                 is its runtime.status_addr {addr}? Pass the right one with --addr, or a longer \
                 --timeout"
            )
        })??;
    String::from_utf8(body.into()).map_err(|_| {
        anyhow!("{addr} answered {path} with bytes that are not UTF-8; expected weir's JSON")
    })
}

/// Connects to `addr`, sends `GET path` and reads a 200 answer's body, at most
/// `max_body_bytes` of it. Has no deadline of its own: the caller puts one around it.
///
/// # Cancel safety
///
/// Cancel safe: dropping the future drops the connection; nothing else is left behind.
async fn get_path(addr: SocketAddr, path: &str, max_body_bytes: usize) -> anyhow::Result<Bytes> {
    let stream = tokio::net::TcpStream::connect(addr).await.map_err(|err| {
        if err.kind() == std::io::ErrorKind::ConnectionRefused {
            anyhow!(
                "nothing listens on {addr} (connection refused): is `weir run` running, and \
                     is its runtime.status_addr {addr}? Pass the right one with --addr"
            )
        } else {
            anyhow!("cannot connect to {addr}: {err}")
        }
    })?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .with_context(|| format!("starting HTTP/1.1 with {addr}"))?;
    // The connection does the I/O; it ends with the runtime when the answer is read.
    tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header(HOST, addr.to_string())
        .header(ACCEPT, "application/json")
        .header(CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .with_context(|| format!("building the {path} request"))?;
    let response = sender.send_request(request).await.map_err(|err| {
        anyhow!("{addr} gave no HTTP answer to GET {path} ({err}): is this weir's status address?")
    })?;
    let status = response.status();
    if status != StatusCode::OK {
        bail!(
            "expected 200 from GET {path} on {addr}, found {status}: is this weir's status \
             address?"
        );
    }
    let body = Limited::new(response.into_body(), max_body_bytes)
        .collect()
        .await
        .map_err(|err| {
            if err.is::<LengthLimitError>() {
                anyhow!("{addr} sent more than {max_body_bytes} bytes for {path}; is this weir?")
            } else {
                anyhow!("reading the {path} body from {addr}: {err}")
            }
        })?;
    Ok(body.to_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::Instant;

    /// A one-connection fake server on a loopback port: `answer` gets the accepted
    /// stream after the request's headers were read.
    fn serve_once(answer: impl FnOnce(TcpStream) + Send + 'static) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("local addr");
        std::thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            answer(stream);
        });
        addr
    }

    /// A fake server that writes `response` and closes.
    fn answering(response: &'static [u8]) -> SocketAddr {
        serve_once(move |mut stream| {
            let _ = stream.write_all(response);
        })
    }

    /// Keeps the connection open without answering until the client hangs up.
    fn holding(mut stream: TcpStream) {
        let mut buf = [0u8; 64];
        while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
    }

    #[test]
    fn plain_and_chunked_bodies_are_read() {
        let timeout = Duration::from_secs(5);
        let plain = answering(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}");
        assert_eq!(fetch_status_body(plain, timeout).expect("plain"), "{}");
        let chunked = answering(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4;x=y\r\n\":1}\r\n0\r\n\r\n",
        );
        assert_eq!(
            fetch_status_body(chunked, timeout).expect("chunked"),
            r#"{"a":1}"#
        );
        let bad_chunk = answering(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
        assert!(fetch_status_body(bad_chunk, timeout).is_err());
    }

    #[test]
    fn a_non_200_answer_is_an_error_naming_the_status() {
        let addr = answering(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
        let err = fetch_status_body(addr, Duration::from_secs(5)).expect_err("404");
        let text = err.to_string();
        assert!(
            text.contains("expected 200") && text.contains("404 Not Found"),
            "{text}"
        );
    }

    #[test]
    fn an_answer_that_is_not_http_is_an_error() {
        let addr = answering(b"SSH-2.0-OpenSSH_9.6\r\n");
        let err = fetch_status_body(addr, Duration::from_secs(5)).expect_err("not HTTP");
        assert!(err.to_string().contains("no HTTP answer"), "{err}");
    }

    #[test]
    fn a_body_above_the_bound_is_refused() {
        let declared = answering(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n{\"a\":123}");
        let err = fetch_body(declared, Duration::from_secs(5), 8).expect_err("too large");
        assert!(err.to_string().contains("more than 8 bytes"), "{err}");
        let chunked = answering(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n4\r\n123}\r\n0\r\n\r\n",
        );
        let err = fetch_body(chunked, Duration::from_secs(5), 8).expect_err("too large");
        assert!(err.to_string().contains("more than 8 bytes"), "{err}");
        let fits = answering(b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\n{\"a\":12}");
        assert_eq!(
            fetch_body(fits, Duration::from_secs(5), 8).expect("at the bound"),
            r#"{"a":12}"#
        );
    }

    #[test]
    fn a_server_that_never_answers_fails_within_the_deadline() {
        let addr = serve_once(holding);
        let started = Instant::now();
        let err = fetch_status_body(addr, Duration::from_millis(300)).expect_err("silent");
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
        assert!(err.to_string().contains("within 300ms"), "{err}");
    }

    #[test]
    fn a_server_answering_byte_by_byte_past_the_deadline_fails_within_it() {
        // Every byte comes well within any per-read timeout, the whole answer only
        // after about 3 s: only a deadline on the whole exchange stops it.
        let addr = serve_once(|mut stream| {
            let response =
                b"HTTP/1.1 200 OK\r\ncontent-length: 38\r\n\r\n{\"config_hash\": \"sha256:feed\", \"x\": 1}";
            for byte in response {
                if stream.write_all(&[*byte]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(30));
            }
        });
        let started = Instant::now();
        let err = fetch_status_body(addr, Duration::from_millis(300)).expect_err("slow");
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
        assert!(err.to_string().contains("within 300ms"), "{err}");
    }

    #[test]
    fn nothing_listening_is_a_clear_error() {
        // Bind then drop to get a port nothing listens on.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let err = fetch_status_body(addr, Duration::from_secs(2)).expect_err("refused");
        let text = err.to_string();
        assert!(
            text.contains("nothing listens on") && text.contains("--addr"),
            "{text}"
        );
    }
}
