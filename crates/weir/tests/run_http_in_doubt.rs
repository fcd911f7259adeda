//! `weir run` end to end: a 503 is all-or-nothing (issue 16, item 10).
//!
//! The WAL fails in the middle of a request's batch: the daemon runs with its file
//! size limited (`prlimit --fsize`, SIGXFSZ ignored), so a write past the limit is
//! short and the next one fails with EFBIG. Whole frames of that batch are on disk and
//! recovery keeps them, so answering it 503 ("refused, retry") was wrong: some of its
//! records were delivered after the restart. That request must get a distinct 500
//! saying the outcome is unknown; every 503 must be a request of which nothing is
//! ever delivered, and every 200 one that is delivered whole.

mod run_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use run_support::{Daemon, free_addr, post, write_config};

/// Bytes the first run may write to one file.
const FSIZE: u64 = 300_000;
const RECORDS_PER_REQUEST: usize = 200;

fn config(dir: &Path, status: SocketAddr, http: SocketAddr, sink: &str) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "64 MiB"
segment_bytes = "4 MiB"
on_full = "reject"

[sources.api]
type = "http"
listen = "{http}"

{sink}
"#,
        data = dir.join("data").display(),
    )
}

fn body(request: usize) -> Vec<u8> {
    let mut body = Vec::new();
    for i in 0..RECORDS_PER_REQUEST {
        body.extend_from_slice(
            format!(
                "{{\"req\":{request},\"i\":{i},\"pad\":\"{}\"}}\n",
                "x".repeat(60)
            )
            .as_bytes(),
        );
    }
    body
}

#[test]
fn a_503_is_never_followed_by_delivery_and_a_torn_batch_is_a_distinct_500() {
    let tmp = tempfile::tempdir().unwrap();
    let (status, http) = (free_addr(), free_addr());

    // Run 1: the WAL's segment cannot grow past FSIZE bytes. The sink is a blackhole
    // under its own cursor; run 2 reads everything again through a new one.
    let path = write_config(
        tmp.path(),
        &config(
            tmp.path(),
            status,
            http,
            "[sinks.discard]\ntype = \"blackhole\"\ninputs = [\"api\"]",
        ),
    );
    let limit = format!("trap '' XFSZ; exec prlimit --fsize={FSIZE} \"$@\"");
    let daemon = Daemon::start_wrapped(
        tmp.path(),
        &["sh", "-c", &limit, "sh"],
        &path,
        status,
        &[],
        Stdio::null(),
    );
    let mut answers = BTreeMap::new();
    for request in 0..40 {
        let r = post(http, "/ingest", &[], &body(request))
            .unwrap_or_else(|e| panic!("POST {request}: {e}\n{}", daemon.stderr()));
        answers.insert(request, (r.0, String::from_utf8_lossy(&r.2).into_owned()));
    }
    let source = daemon.status()["sources"]["api"].clone();
    daemon.kill9();
    let codes: Vec<u16> = answers.values().map(|(code, _)| *code).collect();
    // The torn request's records are counted in doubt, not refused.
    let torn = codes.iter().filter(|&&c| c == 500).count();
    assert_eq!(
        source["in_doubt_records"].as_u64(),
        Some((torn * RECORDS_PER_REQUEST) as u64),
        "{source:#}"
    );
    let first_failure = codes
        .iter()
        .position(|&c| c != 200)
        .expect("the file size limit made the WAL fail");
    assert_eq!(
        codes[first_failure], 500,
        "the request whose batch was torn by the failed write: {:?}",
        answers[&first_failure]
    );
    assert!(
        answers[&first_failure]
            .1
            .contains("\"outcome\":\"unknown\""),
        "{:?}",
        answers[&first_failure]
    );
    assert!(
        codes[first_failure + 1..].iter().all(|&c| c == 503),
        "after the failure the WAL is poisoned: {codes:?}"
    );

    // Run 2, without the limit: recovery keeps the whole frames; a file sink under a
    // new cursor delivers everything the WAL holds.
    let out = tmp.path().join("out");
    let path = write_config(
        tmp.path(),
        &config(
            tmp.path(),
            status,
            http,
            &format!(
                "[sinks.all]\ntype = \"file\"\ninputs = [\"api\"]\npath = \"{}\"",
                out.display()
            ),
        ),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let durable = daemon.status()["wal"]["durable_end"].as_u64().unwrap();
    daemon.wait_for("the sink to catch up", Duration::from_secs(20), |s| {
        s["sinks"]["all"]["records"].as_u64() == Some(durable)
    });
    assert_eq!(daemon.stop(), Some(0));

    let mut delivered: BTreeMap<usize, usize> = BTreeMap::new();
    for entry in std::fs::read_dir(&out).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            *delivered
                .entry(v["payload"]["req"].as_u64().unwrap() as usize)
                .or_default() += 1;
        }
    }
    for (request, (code, _)) in &answers {
        let n = delivered.get(request).copied().unwrap_or(0);
        match code {
            200 => assert_eq!(n, RECORDS_PER_REQUEST, "request {request} answered 200"),
            503 => assert_eq!(n, 0, "request {request} answered 503 was delivered"),
            _ => assert!(n <= RECORDS_PER_REQUEST, "request {request}: {n}"),
        }
    }
}
