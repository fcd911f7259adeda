//! `weir run` end to end: the status server under a connection flood (issue 44, item 3).
//!
//! The status server is bounded like the HTTP source: at most
//! `runtime.status_max_connections` connections, each closed when its request head is
//! not in within `runtime.status_header_timeout`. A flood of half-sent requests to it,
//! more than the process's open-file limit, waits in the listen backlog and is closed
//! connection by connection; weir keeps descriptors for the HTTP source, whose
//! `POST /ingest` keeps answering, and `/status` answers once the flood has drained.

mod run_support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use run_support::{Daemon, free_addr, get, post, write_config};

/// The child's open-file limit (soft and hard, so weir cannot raise it).
const NOFILE: usize = 160;
/// Half-sent requests to the status server: more than the limit.
const FLOOD: usize = 200;

fn config(dir: &Path, status: SocketAddr, http: SocketAddr) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
status_max_connections = 64
status_header_timeout = "1s"

[wal]
max_disk = "16 MiB"
segment_bytes = "256 KiB"
on_full = "reject"

[sources.api]
type = "http"
listen = "{http}"
max_connections = 16

[sinks.out]
type = "file"
inputs = ["api"]
path = "{out}"
"#,
        data = dir.join("data").display(),
        out = dir.join("out").display(),
    )
}

#[test]
fn a_flood_of_half_sent_requests_to_the_status_server_is_bounded_and_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let (status, http) = (free_addr(), free_addr());
    let path = write_config(tmp.path(), &config(tmp.path(), status, http));
    let nofile = format!("--nofile={NOFILE}:{NOFILE}");
    let daemon = Daemon::start_wrapped(
        tmp.path(),
        &["prlimit", &nofile],
        &path,
        status,
        &[],
        Stdio::null(),
    );
    let report = daemon.status();
    let queue = report["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "status.connections")
        .unwrap_or_else(|| panic!("no status.connections queue: {report:#}"));
    assert_eq!(queue["bound_items"], 64, "{queue}");

    let mut flood = Vec::with_capacity(FLOOD);
    for _ in 0..FLOOD {
        let mut stream = TcpStream::connect_timeout(&status, Duration::from_secs(5)).unwrap();
        stream
            .write_all(b"GET /status HTTP/1.1\r\nHost: x\r\nX-Half: ")
            .unwrap();
        flood.push(stream);
    }

    // The HTTP source answers while the flood is held.
    for n in 0..5 {
        let body = format!("{{\"n\":{n}}}\n");
        let r = post(http, "/ingest", &[], body.as_bytes())
            .unwrap_or_else(|e| panic!("POST {n}: {e}\n{}", daemon.stderr()));
        assert_eq!(
            r.0,
            200,
            "POST {n}: {}\n{}",
            String::from_utf8_lossy(&r.2),
            daemon.stderr()
        );
    }

    // Every half-sent request is closed by weir (EOF or reset) after the header timeout.
    run_support::assert_closed_within(&mut flood, Duration::from_secs(30), &daemon);

    // /status answers again, and the flood's connections are gone.
    let (code, _, _) = get(status, "/status").expect("GET /status");
    assert_eq!(code, 200);
    daemon.wait_for(
        "the status server's connections to close",
        Duration::from_secs(10),
        |s| {
            s["queues"].as_array().is_some_and(|queues| {
                queues
                    .iter()
                    .any(|q| q["name"] == "status.connections" && q["depth"] == 1)
            })
        },
    );
    let stderr = daemon.stderr();
    assert!(
        !stderr.contains("Too many open files"),
        "weir reached its open-file limit:\n{stderr}"
    );
    assert_eq!(daemon.stop(), Some(0));
}
