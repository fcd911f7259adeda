//! `weir run` end to end: the HTTP source's `body_timeout`. A client that sends its
//! request head and then stalls gets 408 and a closed connection once the body is
//! late, instead of holding a request slot forever; a body that arrives in pieces
//! within the timeout is accepted.

mod run_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use run_support::{Daemon, free_addr, post, run_to_exit, write_config};

fn config(dir: &Path, status: SocketAddr, http: SocketAddr, extra: &str) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "16 MiB"
segment_bytes = "1 MiB"
on_full = "reject"

[sources.api]
type = "http"
listen = "{http}"
max_concurrent_requests = 1
{extra}

[sinks.out]
type = "blackhole"
inputs = ["api"]
"#,
        data = dir.join("data").display(),
    )
}

/// Opens a POST of `len` declared body bytes and sends `first` of them.
fn start_post(http: SocketAddr, len: usize, first: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect_timeout(&http, Duration::from_secs(2)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let head = format!(
        "POST /ingest HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: {len}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(first).unwrap();
    stream
}

/// Reads to EOF; the status code and the raw response text.
fn read_response(stream: &mut TcpStream) -> (u16, String) {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {text:?}"));
    (code, text)
}

#[test]
fn a_stalled_body_gets_408_and_frees_its_slot() {
    let tmp = tempfile::tempdir().unwrap();
    let (status, http) = (free_addr(), free_addr());
    let path = write_config(
        tmp.path(),
        &config(tmp.path(), status, http, r#"body_timeout = "1s""#),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);

    // Half a body, then nothing: 408 after body_timeout (not before), connection closed
    // (read_to_end returns).
    let body = b"{\"a\":1}\n{\"b\":2}\n";
    let started = Instant::now();
    let mut stalled = start_post(http, body.len(), &body[..5]);
    let (code, text) = read_response(&mut stalled);
    let waited = started.elapsed();
    assert_eq!(code, 408, "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    assert!(text.contains("body_timeout"), "{text}");
    assert!(
        waited >= Duration::from_secs(1),
        "answered after {waited:?}"
    );

    // The only request slot (max_concurrent_requests = 1) is free again.
    let r = post(http, "/ingest", &[], body).unwrap();
    assert_eq!(r.0, 200, "{}", String::from_utf8_lossy(&r.2));

    // A body that arrives in pieces within the timeout is accepted.
    let mut slow = start_post(http, body.len(), &body[..5]);
    std::thread::sleep(Duration::from_millis(300));
    slow.write_all(&body[5..]).unwrap();
    let (code, text) = read_response_keep_alive(&mut slow);
    assert_eq!(code, 200, "{text}");

    // Only the complete bodies became records; the 408 is counted as refused.
    let s = daemon.wait_for("the sink to take 4 records", Duration::from_secs(10), |s| {
        s["sinks"]["out"]["records"].as_u64() == Some(4)
    });
    assert_eq!(s["sources"]["api"]["records"], 4, "{s:#}");
    assert_eq!(s["sources"]["api"]["refused_requests"], 1, "{s:#}");
    assert_eq!(daemon.stop(), Some(0));
}

/// Reads one response on a keep-alive connection: up to the end of its JSON body.
fn read_response_keep_alive(stream: &mut TcpStream) -> (u16, String) {
    let mut raw = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).unwrap();
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw).into_owned();
        if n == 0 || (text.contains("\r\n\r\n") && text.ends_with('}')) {
            let code = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
            return (code, text);
        }
    }
}

#[test]
fn body_timeout_must_be_a_positive_duration() {
    let tmp = tempfile::tempdir().unwrap();
    for (value, expected) in [
        ("\"0s\"", "this must be longer than zero"),
        ("\"soon\"", "expected a duration like"),
    ] {
        let path = write_config(
            tmp.path(),
            &config(
                tmp.path(),
                free_addr(),
                free_addr(),
                &format!("body_timeout = {value}"),
            ),
        );
        let (code, stderr) = run_to_exit(&path, &[]);
        assert_eq!(code, Some(1), "{stderr}");
        let line = stderr
            .lines()
            .find(|l| l.contains("sources.api.body_timeout"))
            .unwrap_or_else(|| panic!("no error names the key: {stderr}"));
        assert!(line.contains(expected), "{stderr}");
    }
}
