//! Soak: kill -9 cycles and sustained overload, end to end through `weir run`.
//!
//! Short by default (part of the suite); long with `WEIR_SOAK=1` (`scripts/soak.sh`):
//!
//! - **kill -9 cycles** of HTTP → WAL → file: 5 cycles, 1,000 with `WEIR_SOAK=1`
//!   (`WEIR_SOAK_CYCLES` sets it; `WEIR_SEED` replays a run). Each cycle starts the
//!   daemon, posts while it runs, and kills it at a seeded random moment: at startup,
//!   mid-stream, or in the middle of a graceful shutdown. Every acknowledged record
//!   must reach the sink.
//! - **10× overload** for each `on_full` policy: clients offer ten times what a
//!   rate-limited sink takes, for 4 s (60 s with `WEIR_SOAK=1`, `WEIR_SOAK_SECS` sets
//!   it), then stop; once the sink has drained, every offered record is accounted for,
//!   exactly, on both sides: offered = delivered + refused + expired + dropped + busy,
//!   the client's answers match `/status`'s counters, and each policy answers the way
//!   it promises (`block` never refuses or drops, `reject` never drops, `drop_oldest`
//!   drops and never refuses).
//!
//! Each test prints one summary line (`SOAK ...`) that `scripts/soak.sh` collects.

mod run_support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use run_support::{Daemon, free_addr, ndjson_lines, post, write_config};

fn soak() -> bool {
    std::env::var_os("WEIR_SOAK").is_some_and(|v| v == "1")
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// splitmix64: a seeded sequence, so that a failing run can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn ndjson(first: u64, lines: u64, pad: usize) -> String {
    let pad = "x".repeat(pad);
    (first..first + lines)
        .map(|id| format!("{{\"id\":{id},\"pad\":\"{pad}\"}}\n"))
        .collect()
}

/// One POST of `lines` records: its status and error text (empty on 200).
fn post_batch(http: SocketAddr, first: u64, lines: u64, pad: usize) -> Option<(u16, String)> {
    let body = ndjson(first, lines, pad);
    let (code, _, body) = post(
        http,
        "/ingest",
        &["Content-Type: application/x-ndjson"],
        body.as_bytes(),
    )
    .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    if code == 200 {
        assert_eq!(v["accepted"], lines, "a 200 accepts the whole request");
    }
    Some((code, v["error"].as_str().unwrap_or_default().to_owned()))
}

fn kill_config(dir: &Path, status: SocketAddr, http: SocketAddr) -> String {
    run_support::http_to_file_config(dir, status, http, "5s", "256 KiB")
}

#[test]
fn kill_9_cycles_lose_no_acknowledged_record() {
    let cycles = env_u64("WEIR_SOAK_CYCLES").unwrap_or(if soak() { 1000 } else { 5 });
    let seed = env_u64("WEIR_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    eprintln!("kill -9 cycles: {cycles}, WEIR_SEED={seed}");
    let mut rng = Rng(seed);
    let tmp = tempfile::tempdir().unwrap();
    let (status, http) = (free_addr(), free_addr());
    let path = write_config(tmp.path(), &kill_config(tmp.path(), status, http));

    let acked = Arc::new(Mutex::new(Vec::<u64>::new()));
    let next_id = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let (mut mid_stream, mut at_startup, mut in_shutdown) = (0, 0, 0);
    for cycle in 0..cycles {
        let daemon = Daemon::start(tmp.path(), &path, status, &[]);
        let running = Arc::new(AtomicBool::new(true));
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let (acked, running, next_id) = (
                    Arc::clone(&acked),
                    Arc::clone(&running),
                    Arc::clone(&next_id),
                );
                std::thread::spawn(move || {
                    while running.load(Ordering::Relaxed) {
                        let first = next_id.fetch_add(20, Ordering::Relaxed);
                        if let Some((200, _)) = post_batch(http, first, 20, 40) {
                            acked.lock().unwrap().push(first);
                        }
                    }
                })
            })
            .collect();
        match rng.below(10) {
            // Right after startup (recovery just done, sinks starting).
            0 => {
                at_startup += 1;
                std::thread::sleep(Duration::from_millis(rng.below(20)));
                daemon.kill9();
            }
            // In the middle of a graceful shutdown.
            1 => {
                in_shutdown += 1;
                std::thread::sleep(Duration::from_millis(50 + rng.below(200)));
                daemon.signal("TERM");
                std::thread::sleep(Duration::from_millis(rng.below(30)));
                daemon.kill9();
            }
            _ => {
                mid_stream += 1;
                std::thread::sleep(Duration::from_millis(20 + rng.below(300)));
                daemon.kill9();
            }
        }
        running.store(false, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        if cycle % 100 == 99 {
            eprintln!(
                "cycle {}: {} requests acknowledged so far",
                cycle + 1,
                acked.lock().unwrap().len()
            );
        }
    }
    // A last run: the sink catches up from its cursor.
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("the sink to catch up", Duration::from_secs(60), |s| {
        s["sinks"]["out"]["cursor"]["lag_records"] == 0
    });
    assert_eq!(daemon.stop(), Some(0));

    let mut seen = BTreeSet::new();
    let mut lines = 0u64;
    for line in ndjson_lines(&tmp.path().join("out")) {
        seen.insert(line["payload"]["id"].as_u64().expect("payload.id"));
        lines += 1;
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        !acked.is_empty(),
        "nothing was acknowledged in {cycles} cycles"
    );
    let mut missing = Vec::new();
    for first in &acked {
        missing.extend((*first..first + 20).filter(|id| !seen.contains(id)));
    }
    assert!(
        missing.is_empty(),
        "{} acknowledged records missing (WEIR_SEED={seed}), first {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    let records = acked.len() as u64 * 20;
    println!(
        "SOAK kill9 cycles={cycles} (mid-stream {mid_stream}, at startup {at_startup}, in shutdown {in_shutdown}) \
         acknowledged={records} missing=0 duplicates={} seed={seed} secs={:.0}",
        lines - seen.len() as u64,
        started.elapsed().as_secs_f64()
    );
}

/// The sink takes this many records per second; the clients offer ten times as many.
const SINK_RATE: u64 = 2_000;
const BATCH: u64 = 100;
const CLIENTS: u64 = 16;

fn overload_config(dir: &Path, status: SocketAddr, http: SocketAddr, on_full: &str) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "1 MiB"
segment_bytes = "64 KiB"
on_full = "{on_full}"

[sources.api]
type = "http"
listen = "{http}"
admission_timeout = "100ms"
max_concurrent_requests = {CLIENTS}

[sinks.slow]
type = "blackhole"
inputs = ["api"]
rate = {SINK_RATE}
"#,
        data = dir.join("data").display(),
    )
}

/// What the clients saw, in records.
#[derive(Debug, Default)]
struct Answers {
    offered: AtomicU64,
    accepted: AtomicU64,
    /// 503: the WAL refused (`reject`), or was not admitting.
    refused: AtomicU64,
    /// 503: admission did not succeed within `admission_timeout`.
    expired: AtomicU64,
    /// 503 before the body was read: `max_concurrent_requests` in flight.
    busy: AtomicU64,
    /// Requests answered other than 200.
    refused_requests: AtomicU64,
}

fn overload(on_full: &str) {
    let secs = env_u64("WEIR_SOAK_SECS").unwrap_or(if soak() { 60 } else { 4 });
    let tmp = tempfile::tempdir().unwrap();
    let (status, http) = (free_addr(), free_addr());
    let path = write_config(
        tmp.path(),
        &overload_config(tmp.path(), status, http, on_full),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);

    let answers = Arc::new(Answers::default());
    let next_id = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(secs);
    // Each client paces itself to a tenth of the total: 10 × SINK_RATE in all.
    let per_client =
        Duration::from_secs_f64(BATCH as f64 * CLIENTS as f64 / (10 * SINK_RATE) as f64);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (answers, next_id) = (Arc::clone(&answers), Arc::clone(&next_id));
            std::thread::spawn(move || {
                let mut due = Instant::now();
                while Instant::now() < until {
                    let first = next_id.fetch_add(BATCH, Ordering::Relaxed);
                    let (code, error) =
                        post_batch(http, first, BATCH, 100).expect("every request is answered");
                    answers.offered.fetch_add(BATCH, Ordering::Relaxed);
                    let counter = match code {
                        200 => &answers.accepted,
                        503 if error.contains("did not admit the batch within") => &answers.expired,
                        503 if error.contains("too many requests in flight") => &answers.busy,
                        503 => &answers.refused,
                        other => panic!("unexpected answer {other}: {error}"),
                    };
                    counter.fetch_add(BATCH, Ordering::Relaxed);
                    if code != 200 {
                        answers.refused_requests.fetch_add(1, Ordering::Relaxed);
                    }
                    due += per_client;
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    // Drain: the sink takes what the WAL still holds.
    let drain = Duration::from_secs(30 + (1 << 20) / 150 / SINK_RATE);
    let s = daemon.wait_for("the sink to drain", drain, |s| {
        s["sinks"]["slow"]["cursor"]["lag_records"] == 0
    });
    let get = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("counter {v}"));
    let a = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let source = &s["sources"]["api"];
    let sink = &s["sinks"]["slow"];
    let delivered = get(&sink["records"]);
    let dropped = get(&sink["cursor"]["gap_records"]);
    let (offered, accepted) = (a(&answers.offered), a(&answers.accepted));
    let (refused, expired, busy) = (a(&answers.refused), a(&answers.expired), a(&answers.busy));
    let line = format!(
        "SOAK overload on_full={on_full} secs={secs} offered={offered} ({:.0}/s, {:.1}x the sink) \
         delivered={delivered} refused={refused} expired={expired} dropped={dropped} busy={busy} \
         (WAL evicted {} in {} segments, appended {}; sink gaps {}, retries {})",
        offered as f64 / secs as f64,
        offered as f64 / secs as f64 / SINK_RATE as f64,
        s["wal"]["evicted_records"],
        s["wal"]["evicted_segments"],
        s["wal"]["appended_records"],
        sink["cursor"]["gaps"],
        sink["retries"],
    );
    // Every offered record has exactly one answer, on both sides.
    assert_eq!(offered, accepted + refused + expired + busy, "{line}");
    assert_eq!(
        accepted,
        delivered + dropped,
        "accepted = delivered + dropped: {line}"
    );
    assert_eq!(get(&source["records"]), accepted, "{line}");
    assert_eq!(get(&source["refused_records"]), refused, "{line}");
    assert_eq!(get(&source["expired_records"]), expired, "{line}");
    assert_eq!(
        get(&source["refused_requests"]),
        a(&answers.refused_requests),
        "{line}"
    );
    // The WAL also counts as evicted the records the sink had read and not committed
    // when their segment went: those were delivered, not dropped.
    assert!(get(&s["wal"]["evicted_records"]) >= dropped, "{line}");
    assert_eq!(
        get(&s["wal"]["cursors"][0]["gap_records"]),
        dropped,
        "{line}"
    );
    // It was an overload, and each policy answered it as it promises.
    assert!(
        offered >= 5 * SINK_RATE * secs,
        "the clients offered too little: {line}"
    );
    assert!(delivered > 0, "{line}");
    match on_full {
        "block" => {
            assert_eq!((refused, dropped), (0, 0), "block waits: {line}");
            assert!(expired > 0, "waits past admission_timeout expire: {line}");
        }
        "reject" => {
            assert_eq!(dropped, 0, "reject never drops: {line}");
            assert!(refused > 0, "{line}");
        }
        _ => {
            assert_eq!(refused, 0, "drop_oldest never refuses: {line}");
            assert!(dropped > 0, "{line}");
        }
    }
    let stderr = daemon.stderr();
    assert_eq!(daemon.stop(), Some(0), "{stderr}");
    println!("{line}");
}

#[test]
fn ten_times_overload_under_block_accounts_for_every_record() {
    overload("block");
}

#[test]
fn ten_times_overload_under_reject_accounts_for_every_record() {
    overload("reject");
}

#[test]
fn ten_times_overload_under_drop_oldest_accounts_for_every_record() {
    overload("drop_oldest");
}
