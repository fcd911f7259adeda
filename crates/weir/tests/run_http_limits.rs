//! `weir run` end to end: the HTTP source under a connection flood (issue 16, item 1).
//!
//! Clients that connect and send half a request head used to pile up until the
//! process reached its open-file limit; the next WAL segment then failed to open
//! (EMFILE) and poisoned the WAL, so every later POST got 503 until a restart. With
//! `max_connections` the flood waits in the listen backlog, `header_timeout` closes
//! the half-sent heads, and the WAL never sees EMFILE.

mod run_support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use run_support::{Daemon, free_addr, post, write_config};

fn config(dir: &Path, status: SocketAddr, http: SocketAddr) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "256 MiB"
segment_bytes = "256 KiB"
on_full = "reject"

[sources.api]
type = "http"
listen = "{http}"
max_body = "2 MiB"
max_connections = 64
header_timeout = "2s"

[sinks.out]
type = "file"
inputs = ["api"]
path = "{out}"
"#,
        data = dir.join("data").display(),
        out = dir.join("out").display(),
    )
}

/// A 1 MB NDJSON body of `lines` records, tagged with `n`.
fn body(n: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(1 << 20);
    let mut i = 0;
    while body.len() < 1_000_000 {
        body.extend_from_slice(
            format!("{{\"req\":{n},\"i\":{i},\"pad\":\"{}\"}}\n", "x".repeat(80)).as_bytes(),
        );
        i += 1;
    }
    body
}

#[test]
fn a_flood_of_half_sent_heads_does_not_exhaust_descriptors_or_poison_the_wal() {
    let tmp = tempfile::tempdir().unwrap();
    let (status, http) = (free_addr(), free_addr());
    let path = write_config(tmp.path(), &config(tmp.path(), status, http));
    let daemon = Daemon::start_wrapped(
        tmp.path(),
        &["prlimit", "--nofile=200:200"],
        &path,
        status,
        &[],
        Stdio::null(),
    );
    let stderr = daemon.stderr();
    assert!(
        stderr.contains("open-file limit is 200 (hard limit 200)"),
        "no warning about the low limit:\n{stderr}"
    );

    // 250 connections that each send a partial request head and stop there.
    let mut flood = Vec::new();
    for _ in 0..250 {
        let mut stream = TcpStream::connect_timeout(&http, Duration::from_secs(5)).unwrap();
        stream
            .write_all(b"POST /ingest HTTP/1.1\r\nHost: x\r\nX-P: ")
            .unwrap();
        flood.push(stream);
    }

    // 30 bodies of 1 MB (about 120 segment rotations at 256 KiB): every one durable.
    for n in 0..30 {
        let r = post(http, "/ingest", &[], &body(n))
            .unwrap_or_else(|e| panic!("POST {n}: {e}\n{}", daemon.stderr()));
        assert_eq!(
            r.0,
            200,
            "POST {n}: {}\n{}",
            String::from_utf8_lossy(&r.2),
            daemon.stderr()
        );
    }

    // The half-sent heads were closed by header_timeout (EOF or reset), not left open.
    run_support::assert_closed_within(&mut flood, Duration::from_secs(20), &daemon);

    let stderr = daemon.stderr();
    assert!(
        !stderr.contains("Too many open files") && !stderr.contains("poisoned"),
        "weir reached its open-file limit:\n{stderr}"
    );
    assert_eq!(daemon.stop(), Some(0));
}
