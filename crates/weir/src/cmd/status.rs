//! `weir status [--addr ADDR] [--json]`: asks a running daemon for `GET /status` and
//! prints it as tables (or the raw JSON with `--json`).
//!
//! The request is a minimal HTTP/1.1 GET over a std `TcpStream` with timeouts; the
//! response is read up to [`MAX_RESPONSE_BYTES`].

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};

use crate::config::format_bytes;
use crate::telemetry::StatusReport;

/// The largest `/status` response read.
pub const MAX_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;

/// Arguments of `weir status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The daemon's `runtime.status_addr`.
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub addr: String,
    /// Print the raw JSON instead of tables.
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
        println!("{}", fetch_status_body(addr, args.timeout)?);
        return Ok(ExitCode::SUCCESS);
    }
    let report = fetch_status(addr, args.timeout)?;
    print!("{}", render(&addr.to_string(), &report));
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
/// # Errors
///
/// When nothing listens, nothing answers within `timeout`, the answer is not HTTP, is
/// not 200, or is larger than [`MAX_RESPONSE_BYTES`].
pub fn fetch_status_body(addr: SocketAddr, timeout: Duration) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(|err| {
        if err.kind() == std::io::ErrorKind::ConnectionRefused {
            anyhow!(
                "nothing listens on {addr} (connection refused): is `weir run` running, and is \
                 its runtime.status_addr {addr}? Pass the right one with --addr"
            )
        } else {
            anyhow!("cannot connect to {addr}: {err}")
        }
    })?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let request = format!(
        "GET /status HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .with_context(|| format!("sending the request to {addr}"))?;
    let mut response = Vec::new();
    stream
        .take(MAX_RESPONSE_BYTES + 1)
        .read_to_end(&mut response)
        .with_context(|| format!("no complete answer from {addr} within {timeout:?}"))?;
    if response.len() as u64 > MAX_RESPONSE_BYTES {
        bail!("{addr} sent more than {MAX_RESPONSE_BYTES} bytes for /status; is this weir?");
    }
    parse_response(&response).with_context(|| format!("reading the answer of {addr}"))
}

/// Splits an HTTP/1.1 response into status and body, decoding a chunked body.
fn parse_response(response: &[u8]) -> anyhow::Result<String> {
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("expected an HTTP response, found no end of headers"))?;
    let head = std::str::from_utf8(&response[..split])
        .map_err(|_| anyhow!("expected HTTP headers, found bytes that are not UTF-8"))?;
    let body = &response[split + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let code = status_line
        .strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(2..5))
        .ok_or_else(|| anyhow!("expected an HTTP/1.x status line, found {status_line:?}"))?;
    if code != "200" {
        bail!(
            "expected 200 from GET /status, found {status_line:?}: is this weir's status address?"
        );
    }
    let chunked = lines.any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.eq_ignore_ascii_case("transfer-encoding")
                && value.trim().eq_ignore_ascii_case("chunked")
        })
    });
    let body = if chunked {
        decode_chunked(body)?
    } else {
        body.to_vec()
    };
    String::from_utf8(body).map_err(|_| anyhow!("expected a UTF-8 JSON body"))
}

fn decode_chunked(mut body: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| anyhow!("truncated chunked body"))?;
        let size_text = std::str::from_utf8(&body[..line_end]).unwrap_or_default();
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| anyhow!("expected a chunk size, found {size_text:?}"))?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = body
            .get(..size)
            .ok_or_else(|| anyhow!("truncated chunk of {size} bytes"))?;
        out.extend_from_slice(chunk);
        body = body.get(size + 2..).unwrap_or_default();
    }
}

fn seconds(s: f64) -> String {
    match s {
        s if s < 1.0 => format!("{:.0} ms", s * 1000.0),
        s if s < 120.0 => format!("{s:.1} s"),
        s if s < 7200.0 => format!("{:.1} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

/// Left-aligned columns, two spaces apart.
fn table(out: &mut String, rows: &[Vec<String>]) {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            let _ = write!(line, "{cell:<width$}  ");
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// The tables `weir status` prints.
fn render(addr: &str, report: &StatusReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "weir at {addr}: config {}, up {}\n",
        report.config_hash,
        seconds(report.uptime_seconds)
    );
    let mut rows = vec![
        ["COMPONENT", "KIND", "STATE", "FOR"]
            .map(String::from)
            .to_vec(),
    ];
    for c in &report.components {
        let state = match &c.reason {
            Some(reason) => format!("{} ({reason})", c.state),
            None => c.state.clone(),
        };
        rows.push(vec![
            c.name.clone(),
            c.kind.clone(),
            state,
            seconds(c.for_seconds),
        ]);
    }
    table(&mut out, &rows);
    out.push('\n');
    let header = [
        "QUEUE",
        "DEPTH/BOUND",
        "BYTES/BOUND",
        "FILL",
        "OLDEST",
        "DROPPED",
        "REJECTED",
        "EXPIRED",
    ];
    let mut rows = vec![header.map(String::from).to_vec()];
    for q in &report.queues {
        let items = q
            .bound_items
            .map_or_else(|| "-".to_owned(), |b| b.to_string());
        let bytes = q.bound_bytes.map_or_else(|| "-".to_owned(), format_bytes);
        rows.push(vec![
            q.name.clone(),
            format!("{}/{items}", q.depth),
            format!("{}/{bytes}", format_bytes(q.bytes)),
            q.fill
                .map_or_else(|| "-".to_owned(), |f| format!("{:.0}%", f * 100.0)),
            seconds(q.oldest_age_seconds),
            q.dropped.to_string(),
            q.rejected.to_string(),
            q.expired.to_string(),
        ]);
    }
    table(&mut out, &rows);
    for (name, value) in &report.sections {
        let pretty = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
        let _ = writeln!(out, "\n{name}:\n{pretty}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_parsed_plain_and_chunked() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(parse_response(plain).expect("plain"), "{}");
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4;x=y\r\n\":1}\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).expect("chunked"), r#"{"a":1}"#);
        let err = parse_response(b"HTTP/1.1 404 Not Found\r\n\r\n").expect_err("404");
        assert!(err.to_string().contains("expected 200"), "{err}");
        assert!(parse_response(b"SSH-2.0-OpenSSH\r\n").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
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

    #[test]
    fn the_tables_show_components_queues_and_sections() {
        let report: StatusReport = serde_json::from_value(serde_json::json!({
            "config_hash": "sha256:feed",
            "started_unix_ms": 0,
            "uptime_seconds": 75.0,
            "components": [{"name": "gen", "kind": "source", "state": "failed",
                            "reason": "broker gone", "since_unix_ms": 0, "for_seconds": 0.25}],
            "queues": [{"name": "wal.pending", "depth": 5, "bytes": 2048, "oldest_age_seconds": 2.5,
                        "bound_items": 10, "bound_bytes": null, "fill": 0.5, "max_depth": 7,
                        "offered": 20, "delivered": 10, "dropped": 5, "rejected": 0, "expired": 0}],
            "wal": {"disk_used_bytes": 4096}
        }))
        .expect("a report");
        let text = render("127.0.0.1:9464", &report);
        assert!(
            text.starts_with("weir at 127.0.0.1:9464: config sha256:feed, up 75.0 s"),
            "{text}"
        );
        assert!(
            text.contains("gen        source  failed (broker gone)  250 ms"),
            "{text}"
        );
        assert!(
            text.contains(
                "wal.pending  5/10         2 KiB/-      50%   2.5 s   5        0         0"
            ),
            "{text}"
        );
        assert!(
            text.contains("wal:\n{\n  \"disk_used_bytes\": 4096\n}"),
            "{text}"
        );
    }
}
