//! `weir run` end to end: what the HTTP source acknowledged reaches the file sink,
//! exactly once across a clean restart and at least once across a kill -9.

mod run_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use run_support::{Daemon, free_addr, ndjson_lines, post, write_config};

fn config(dir: &Path, status: SocketAddr, http: SocketAddr) -> String {
    run_support::http_to_file_config(dir, status, http, "10s", "64 KiB")
}

/// Posts `lines` NDJSON records with ids `first..first+lines`; true if acknowledged.
fn post_ids(http: SocketAddr, first: u64, lines: u64) -> bool {
    let body: String = (first..first + lines)
        .map(|id| format!("{{\"id\":{id},\"text\":\"record {id}\"}}\n"))
        .collect();
    match post(
        http,
        "/ingest",
        &["Content-Type: application/x-ndjson"],
        body.as_bytes(),
    ) {
        Ok((200, _, body)) => {
            let v: serde_json::Value = serde_json::from_slice(&body).expect("JSON answer");
            assert_eq!(v["accepted"], lines);
            true
        }
        _ => false,
    }
}

fn ids_in_sink(dir: &Path) -> BTreeMap<u64, usize> {
    let mut counts = BTreeMap::new();
    for line in ndjson_lines(&dir.join("out")) {
        assert_eq!(line["source"], "api");
        let id = line["payload"]["id"].as_u64().expect("payload.id");
        *counts.entry(id).or_default() += 1;
    }
    counts
}

#[test]
fn acknowledged_records_appear_exactly_once_after_a_clean_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let (status, http) = (free_addr(), free_addr());
    let path = write_config(tmp.path(), &config(tmp.path(), status, http));

    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    for batch in 0..20 {
        assert!(post_ids(http, batch * 50, 50), "{}", daemon.stderr());
    }
    assert_eq!(daemon.stop(), Some(0));

    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    for batch in 20..30 {
        assert!(post_ids(http, batch * 50, 50), "{}", daemon.stderr());
    }
    let stderr = daemon.stderr();
    assert_eq!(daemon.stop(), Some(0), "{stderr}");

    let counts = ids_in_sink(tmp.path());
    assert_eq!(counts.len(), 1500, "every acknowledged record arrives");
    assert!(
        counts.values().all(|&n| n == 1),
        "no duplicates after a clean restart"
    );
    assert_eq!(
        counts.keys().copied().collect::<Vec<_>>(),
        (0..1500).collect::<Vec<_>>()
    );
}

#[test]
fn a_kill_9_mid_stream_loses_no_acknowledged_record() {
    let tmp = tempfile::tempdir().unwrap();
    let (status, http) = (free_addr(), free_addr());
    let path = write_config(tmp.path(), &config(tmp.path(), status, http));

    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let running = Arc::new(AtomicBool::new(true));
    let writer = {
        let (acked, running) = (Arc::clone(&acked), Arc::clone(&running));
        std::thread::spawn(move || {
            let mut next = 0;
            while running.load(Ordering::Relaxed) {
                if post_ids(http, next, 20) {
                    acked.lock().unwrap().push(next);
                }
                next += 20;
            }
        })
    };
    // Kill mid-stream, once some requests were acknowledged.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while acked.lock().unwrap().len() < 5 {
        assert!(
            std::time::Instant::now() < deadline,
            "nothing acknowledged:\n{}",
            daemon.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    daemon.kill9();
    running.store(false, Ordering::Relaxed);
    writer.join().unwrap();
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 5,
        "the stream was running: {} requests acknowledged",
        acked.len()
    );

    // Restart: the sink catches up from its cursor.
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("the sink to catch up", Duration::from_secs(20), |s| {
        s["sinks"]["out"]["cursor"]["lag_records"] == 0
    });
    assert_eq!(daemon.stop(), Some(0));

    let counts = ids_in_sink(tmp.path());
    for first in acked {
        for id in first..first + 20 {
            assert!(
                counts.contains_key(&id),
                "acknowledged record {id} is missing"
            );
        }
    }
}
