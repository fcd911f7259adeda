//! `weir run` end to end: a slow required sink fills the WAL and `on_full` acts as
//! configured, while a second sink with `required = false` keeps flowing.

mod run_support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use run_support::{Daemon, Response, free_addr, header, post, write_config};

fn config(
    dir: &Path,
    status: SocketAddr,
    http: SocketAddr,
    on_full: &str,
    admission_timeout: &str,
) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "1s"

[wal]
max_disk = "256 KiB"
segment_bytes = "32 KiB"
max_pending_bytes = "64 KiB"
on_full = "{on_full}"

[sources.api]
type = "http"
listen = "{http}"
admission_timeout = "{admission_timeout}"
max_body = "16 KiB"

[sinks.slow]
type = "blackhole"
inputs = ["api"]
rate = 20
read_batch_records = 10

[sinks.copy]
type = "file"
inputs = ["api"]
path = "{out}"
required = false
"#,
        data = dir.join("data").display(),
        out = dir.join("out").display(),
    )
}

/// A 2 KiB NDJSON body of 32 records.
fn body() -> Vec<u8> {
    (0..32)
        .map(|i| format!("{{\"i\":{i},\"pad\":\"{}\"}}\n", "p".repeat(48)))
        .collect::<String>()
        .into_bytes()
}

/// Starts weir on `dir` with the HTTP source → slow + copy sinks config; returns it and
/// the HTTP source's address.
fn start(dir: &Path, on_full: &str, admission_timeout: &str) -> (Daemon, SocketAddr) {
    let (status, http) = (free_addr(), free_addr());
    let path = write_config(dir, &config(dir, status, http, on_full, admission_timeout));
    (Daemon::start(dir, &path, status, &[]), http)
}

/// Posts until a request is refused; returns it and how long it took. Panics if the
/// WAL never fills.
fn post_until_refused(http: SocketAddr, daemon: &Daemon) -> (Response, Duration) {
    let body = body();
    for _ in 0..2000 {
        let started = Instant::now();
        let r = post(http, "/ingest", &[], &body).unwrap();
        if r.0 != 200 {
            return (r, started.elapsed());
        }
    }
    panic!("the WAL never filled: {:#}", daemon.status());
}

fn copy_keeps_up(daemon: &Daemon) {
    daemon.wait_for(
        "the required = false sink to store everything acknowledged",
        Duration::from_secs(10),
        |s| s["sinks"]["copy"]["records"] == s["sources"]["api"]["records"],
    );
}

#[test]
fn block_answers_503_after_the_admission_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let (daemon, http) = start(tmp.path(), "block", "300ms");

    let (refused, took) = post_until_refused(http, &daemon);
    assert_eq!(refused.0, 503, "{}", String::from_utf8_lossy(&refused.2));
    assert_eq!(header(&refused, "retry-after"), Some("1"));
    assert!(
        took >= Duration::from_millis(300),
        "refused after {took:?}, before the admission timeout"
    );
    assert!(
        took < Duration::from_secs(5),
        "held {took:?}, far past the admission timeout"
    );
    let s = daemon.status();
    assert!(s["wal"]["budget_used"].as_f64().unwrap() > 0.5, "{s:#}");
    copy_keeps_up(&daemon);
}

#[test]
fn block_never_holds_concurrent_requests_past_the_admission_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let (daemon, http) = start(tmp.path(), "block", "300ms");
    let _ = post_until_refused(http, &daemon);

    // The WAL is (nearly) full: 16 requests at once must each be answered, 200 or
    // 503, within the admission timeout plus scheduling slack; none may pass the
    // admission check together with the others and then wait inside the WAL.
    let answers: Vec<(u16, Duration)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|_| {
                scope.spawn(|| {
                    let started = Instant::now();
                    let r = post(http, "/ingest", &[], &body()).unwrap();
                    (r.0, started.elapsed())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (code, took) in &answers {
        assert!(*code == 200 || *code == 503, "{answers:?}");
        assert!(
            *took < Duration::from_millis(1300),
            "a request was held {took:?}, past the 300 ms admission timeout: {answers:?}"
        );
    }
    assert!(
        answers.iter().any(|(code, _)| *code == 503),
        "the WAL was full, some must be refused: {answers:?}"
    );
    copy_keeps_up(&daemon);
}

#[test]
fn reject_answers_503_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (daemon, http) = start(tmp.path(), "reject", "5s");

    let (refused, took) = post_until_refused(http, &daemon);
    assert_eq!(refused.0, 503);
    assert_eq!(header(&refused, "retry-after"), Some("1"));
    assert!(
        String::from_utf8_lossy(&refused.2).contains("disk budget is full"),
        "{}",
        String::from_utf8_lossy(&refused.2)
    );
    assert!(
        took < Duration::from_secs(2),
        "took {took:?}: reject must not wait for the 5 s admission timeout"
    );
    let s = daemon.status();
    assert!(
        s["sources"]["api"]["refused_batches"].as_u64().unwrap() >= 1,
        "{s:#}"
    );
    copy_keeps_up(&daemon);
}

#[test]
fn drop_oldest_gives_the_slow_sink_a_counted_gap() {
    let tmp = tempfile::tempdir().unwrap();
    let (daemon, http) = start(tmp.path(), "drop_oldest", "300ms");

    // Twice the budget: every request is accepted, the oldest segments are evicted.
    let body = body();
    for _ in 0..256 {
        let r = post(http, "/ingest", &[], &body).unwrap();
        assert_eq!(r.0, 200, "{}", String::from_utf8_lossy(&r.2));
    }
    let s = daemon.wait_for("a gap at the slow sink", Duration::from_secs(10), |s| {
        s["sinks"]["slow"]["gaps"].as_u64().unwrap_or(0) > 0
    });
    assert!(
        s["sinks"]["slow"]["gap_records"].as_u64().unwrap() > 0,
        "{s:#}"
    );
    assert!(
        s["sinks"]["slow"]["cursor"]["gaps"].as_u64().unwrap() > 0,
        "{s:#}"
    );
    assert!(s["wal"]["evicted_segments"].as_u64().unwrap() > 0, "{s:#}");
    copy_keeps_up(&daemon);
    let copy = daemon.status()["sinks"]["copy"].clone();
    assert_eq!(
        copy["gaps"], 0,
        "the fast sink read everything before eviction: {copy:#}"
    );
}

#[test]
fn a_blocked_generator_is_backpressured_and_a_second_signal_exits_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let status = free_addr();
    let config = format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "60s"

[wal]
max_disk = "256 KiB"
segment_bytes = "32 KiB"
max_pending_bytes = "64 KiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 0
size = 100
batch_size = 20

[sinks.slow]
type = "blackhole"
inputs = ["gen"]
rate = 10
read_batch_records = 10
"#,
        data = tmp.path().join("data").display(),
    );
    let path = write_config(tmp.path(), &config);
    let mut daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let s = daemon.wait_for(
        "the generator to be backpressured",
        Duration::from_secs(10),
        // Both at once: a slow fsync on a loaded machine can make it backpressured
        // for a moment before the WAL is full.
        |s| {
            s["wal"]["budget_used"].as_f64().unwrap_or(0.0) > 0.5
                && s["components"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c["name"] == "gen" && c["state"] == "backpressured")
        },
    );
    assert!(s["wal"]["budget_used"].as_f64().unwrap() > 0.5, "{s:#}");

    // The first signal starts a drain that cannot finish (the sink takes 10 records/s,
    // shutdown_timeout is 60 s); the second exits at once.
    daemon.signal("TERM");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        daemon.child.try_wait().unwrap().is_none(),
        "still draining after one signal"
    );
    let started = Instant::now();
    daemon.signal("TERM");
    let code = loop {
        if let Some(status) = daemon.child.try_wait().unwrap() {
            break status.code();
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no exit after the second signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(143), "{}", daemon.stderr());
}

/// Under `on_full = "reject"` with the WAL full behind a stalled sink, the generator
/// backs off after each refusal (10 ms doubling to 1 s) instead of spinning on records
/// it knows will be refused: over 3 s of refusals it makes a handful of attempts, not
/// thousands.
#[test]
fn a_refused_generator_backs_off_instead_of_spinning() {
    let tmp = tempfile::tempdir().unwrap();
    let status = free_addr();
    let config = format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "1s"

[wal]
max_disk = "256 KiB"
segment_bytes = "32 KiB"
max_pending_bytes = "64 KiB"
on_full = "reject"

[sources.gen]
type = "generator"
rate = 0
size = 100
batch_size = 20

[sinks.slow]
type = "blackhole"
inputs = ["gen"]
rate = 1
read_batch_records = 1
"#,
        data = tmp.path().join("data").display(),
    );
    let path = write_config(tmp.path(), &config);
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let refused = |s: &serde_json::Value| s["sources"]["gen"]["refused_batches"].as_u64().unwrap();
    let first = daemon.wait_for("refusals", Duration::from_secs(10), |s| refused(s) > 0);
    std::thread::sleep(Duration::from_secs(3));
    let later = daemon.status();
    let attempts = refused(&later) - refused(&first);
    assert!(
        attempts < 64,
        "{attempts} batches refused in 3 s: the generator spins instead of backing off"
    );
    assert!(
        refused(&later) > refused(&first),
        "still trying now and then (it resumes by itself when room returns)"
    );
    // The stalled sink cannot drain within the shutdown timeout (1 s): what it stored
    // is committed, the rest stays in the WAL, and the exit is clean.
    assert_eq!(daemon.stop(), Some(0));
}
