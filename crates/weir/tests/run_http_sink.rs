//! `weir run` end to end with an HTTP sink sending to a real axum server whose
//! behaviour changes during the test: dead letters, `Retry-After`, a bad token, an
//! outage, a crash with requests in flight, and capacity steps.

mod run_support;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use run_support::http_sink::{config, generator, http, lag, quarantined, sink, start, wait_failed};
use run_support::http_target::Target;
use run_support::{Daemon, free_addr, write_config};

fn payload_seq(entry: &serde_json::Value) -> u64 {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(entry["payload_base64"].as_str().unwrap())
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    v["seq"].as_u64().unwrap()
}

#[test]
fn refused_records_are_dead_lettered_and_the_rest_delivered() {
    let tmp = tempfile::tempdir().unwrap();
    let target = Target::start();
    target.behaviour().refuse_every.store(97, Ordering::SeqCst);
    let status = free_addr();
    let path = write_config(
        tmp.path(),
        &config(
            tmp.path(),
            status,
            &target.url(),
            &generator(5_000, Some(2_000)),
            "batch_records = 100\nmax_concurrency = 8\n",
        ),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let st = daemon.wait_for("all records settled", Duration::from_secs(30), |s| {
        s["sources"]["gen"]["records"] == 2_000 && lag(s) == 0
    });
    let refused: BTreeSet<u64> = (0..2_000).filter(|n| n % 97 == 0).collect();
    let delivered = target.shared.distinct();
    let expected: BTreeSet<u64> = (0..2_000).filter(|n| n % 97 != 0).collect();
    assert_eq!(
        delivered, expected,
        "every other record of the batches arrives"
    );
    let dead = quarantined(tmp.path());
    let dead_seqs: BTreeSet<u64> = dead.iter().map(payload_seq).collect();
    assert_eq!(dead_seqs, refused);
    assert_eq!(dead.len(), refused.len(), "each refused record once");
    let seq = payload_seq(&dead[0]);
    assert_eq!(
        dead[0]["reason"],
        format!("HTTP 400: refused seq {seq}"),
        "{:#}",
        dead[0]
    );
    let h = http(&st);
    assert_eq!(h["dead_letters"]["400"], refused.len(), "{h:#}");
    assert!(
        h["splits"]["400"].as_u64().unwrap() >= refused.len() as u64,
        "{h:#}"
    );
    assert_eq!(h["records_delivered"], expected.len(), "{h:#}");
    for key in ["limit", "in_flight", "srtt_ms", "retry_after_wait_ms"] {
        assert!(h.get(key).is_some(), "{key} missing from {h:#}");
    }
    let metrics = run_support::get(status, "/metrics").unwrap();
    let text = String::from_utf8_lossy(&metrics.2);
    for series in [
        "weir_http_sink_concurrency_limit{sink=\"out\"}",
        "weir_http_sink_in_flight{sink=\"out\"}",
        "weir_http_sink_srtt_seconds{sink=\"out\"}",
        "weir_http_sink_retry_after_seconds{sink=\"out\"}",
        "weir_http_sink_dead_letters_total{sink=\"out\",status=\"400\"} 21",
    ] {
        assert!(
            text.contains(series),
            "{series} missing from /metrics:\n{text}"
        );
    }
    assert_eq!(daemon.stop(), Some(0));
}

/// A slow request at the head does not hold the other slots empty: the sink keeps
/// sending behind it until the stage's held bound (2 × max_concurrency admitted), and
/// the cursor waits for the head.
#[test]
fn a_slow_head_request_does_not_stall_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let target = Target::start();
    let head_ms = 4_000;
    target
        .behaviour()
        .seq0_extra_ms
        .store(head_ms, Ordering::SeqCst);
    let started = Instant::now();
    let daemon = start(
        tmp.path(),
        &target.url(),
        &generator(0, Some(2_000)),
        "batch_records = 20\nmin_concurrency = 4\nmax_concurrency = 4\n",
    );
    // 4 slots, 8 admitted at most: the head and 7 more, all answered but the head.
    let st = daemon.wait_for("7 requests behind the head", Duration::from_secs(3), |s| {
        http(s)["held_back"] == 7
    });
    assert!(
        started.elapsed() < Duration::from_millis(head_ms),
        "while the head was still held"
    );
    // Requests before the slow one (if it is not the first) were answered and
    // released; the 7 behind it are held.
    let h = http(&st);
    assert_eq!(
        (h["batches"].as_u64(), h["in_flight"].as_u64()),
        (Some(8), Some(1)),
        "{h:#}"
    );
    let answered = target.shared.events().len() as u64;
    let before_head = answered - 7;
    assert_eq!(h["requests_ok"], answered, "{h:#}");
    let committed = sink(&st)["cursor"]["committed"].as_u64().unwrap();
    assert!(
        committed <= before_head * 20,
        "the cursor waits for the head: committed {committed}, {before_head} requests before it"
    );
    // No more than the bound while the head is held.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(target.shared.events().len() as u64, answered);
    let st = daemon.wait_for("all records delivered", Duration::from_secs(30), |s| {
        lag(s) == 0 && s["sources"]["gen"]["records"] == 2_000
    });
    assert_eq!(target.shared.distinct().len(), 2_000, "{:#}", http(&st));
    assert_eq!(daemon.stop(), Some(0));
}

/// A payload that is not UTF-8 cannot go in an envelope: each request's encoder
/// refuses it, it is counted in the sink's `unencodable` and put in the quarantine,
/// and every other record of its requests is delivered.
#[test]
fn payloads_that_are_not_utf8_are_counted_and_quarantined() {
    let tmp = tempfile::tempdir().unwrap();
    let target = Target::start();
    let input = tmp.path().join("input.ndjson");
    let mut lines = Vec::new();
    for seq in 0..300u64 {
        if seq % 50 == 7 {
            lines.extend_from_slice(format!("\u{fffd}{seq}").as_bytes());
            // Not UTF-8: a lone continuation byte.
            lines.extend_from_slice(b"\x80 bad\n");
        } else {
            lines.extend_from_slice(format!("{{\"seq\":{seq}}}\n").as_bytes());
        }
    }
    std::fs::write(&input, &lines).unwrap();
    let source = format!("type = \"file\"\npath = \"{}\"\n", input.display());
    let daemon = start(
        tmp.path(),
        &target.url(),
        &source,
        "batch_records = 40\nmax_concurrency = 4\n",
    );
    let st = daemon.wait_for("all lines settled", Duration::from_secs(30), |s| {
        s["sources"]["gen"]["records"] == 300 && lag(s) == 0
    });
    let bad: BTreeSet<u64> = (0..300).filter(|n| n % 50 == 7).collect();
    let expected: BTreeSet<u64> = (0..300).filter(|n| n % 50 != 7).collect();
    assert_eq!(target.shared.distinct(), expected, "{:#}", sink(&st));
    assert_eq!(sink(&st)["unencodable"], bad.len(), "{:#}", sink(&st));
    let dead = quarantined(tmp.path());
    assert_eq!(dead.len(), bad.len(), "{dead:#?}");
    for entry in &dead {
        use base64::Engine as _;
        let payload = base64::engine::general_purpose::STANDARD
            .decode(entry["payload_base64"].as_str().unwrap())
            .unwrap();
        assert!(payload.ends_with(b"\x80 bad"), "{entry:#}");
        assert!(
            entry["reason"].as_str().unwrap().contains("UTF-8"),
            "{entry:#}"
        );
    }
    let stderr = daemon.stderr_path.clone();
    assert_eq!(daemon.stop(), Some(0));
    // Logged: the first at once, the rest in the summary written at shutdown.
    let log = std::fs::read_to_string(stderr).unwrap();
    let warns = sink_lines(&log, "WARN");
    assert!(
        warns[0].contains("sink out: 1 record quarantined in ") && warns[0].contains("UTF-8"),
        "{log}"
    );
    assert!(
        warns
            .last()
            .unwrap()
            .contains(&format!("({} in all)", bad.len())),
        "{log}"
    );
}

#[test]
fn too_large_requests_are_split_and_compressed_bodies_arrive() {
    for (encoding, compression) in [("json_array", "gzip"), ("ndjson", "zstd")] {
        let tmp = tempfile::tempdir().unwrap();
        let target = Target::start();
        target.behaviour().max_records.store(30, Ordering::SeqCst);
        let status = free_addr();
        let path = write_config(
            tmp.path(),
            &config(
                tmp.path(),
                status,
                &target.url(),
                &generator(5_000, Some(1_000)),
                &format!(
                    "batch_records = 100\nencoding = \"{encoding}\"\ncompression = \"{compression}\"\n"
                ),
            ),
        );
        let daemon = Daemon::start(tmp.path(), &path, status, &[]);
        let st = daemon.wait_for("all records settled", Duration::from_secs(30), |s| {
            s["sources"]["gen"]["records"] == 1_000 && lag(s) == 0
        });
        assert_eq!(
            target.shared.distinct(),
            (0..1_000).collect::<BTreeSet<u64>>(),
            "{encoding}/{compression}"
        );
        assert!(
            http(&st)["splits"]["413"].as_u64().unwrap() > 0,
            "{:#}",
            http(&st)
        );
        assert!(quarantined(tmp.path()).is_empty());
        assert!(
            target
                .shared
                .events()
                .iter()
                .all(|e| e.status != 200 || e.records <= 30),
            "only requests of at most 30 records were accepted"
        );
        assert_eq!(daemon.stop(), Some(0));
    }
}

#[test]
fn retry_after_holds_back_every_new_request() {
    let tmp = tempfile::tempdir().unwrap();
    let target = Target::start();
    let b = target.behaviour();
    b.latency_ms.store(20, Ordering::SeqCst);
    let status = free_addr();
    let path = write_config(
        tmp.path(),
        &config(
            tmp.path(),
            status,
            &target.url(),
            &generator(2_000, None),
            "batch_records = 50\nbatch_linger = \"20ms\"\nmin_concurrency = 4\nmax_concurrency = 8\n",
        ),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("deliveries", Duration::from_secs(20), |s| {
        http(s)["requests_ok"].as_u64().unwrap_or(0) > 20
    });
    *b.retry_after.lock().unwrap() = Some("2".to_owned());
    b.force_next.store(503, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(300));
    let st = daemon.status();
    let wait = http(&st)["retry_after_wait_ms"].as_u64().unwrap();
    assert!(wait > 1_000 && wait <= 2_000, "{:#}", http(&st));
    std::thread::sleep(Duration::from_secs(3));
    let events = target.shared.events();
    let refusal = events
        .iter()
        .find(|e| e.status == 503)
        .expect("the 503 was sent");
    // Requests sent before the 503 reached weir may still arrive just after it.
    let allowance = Duration::from_millis(150);
    let quiet_from = refusal.answered + allowance;
    let quiet_until = refusal.answered + Duration::from_millis(1_950);
    let early: Vec<_> = events
        .iter()
        .filter(|e| e.arrived >= quiet_from && e.arrived < quiet_until)
        .collect();
    assert!(
        early.is_empty(),
        "requests started during Retry-After: {early:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.status == 200 && e.arrived >= quiet_until),
        "deliveries resumed after the pause"
    );
    assert_eq!(http(&daemon.status())["retry_after_pauses"], 1);
    assert_eq!(daemon.stop(), Some(0));
}

/// Starts weir on a load that grows the sink's concurrency limit to 8, and waits for it.
/// The limit grows only while it is in full use, so the offered load must need more
/// than 8 requests in flight: 20,000 records/s in batches of 20 at 20 ms each need about
/// 20. A machine too loaded to keep up builds a backlog, which saturates the limit just
/// as well.
fn grow_the_limit(dir: &Path, target: &Target, sink_extra: &str) -> (Daemon, serde_json::Value) {
    target.behaviour().latency_ms.store(20, Ordering::SeqCst);
    let status = free_addr();
    let path = write_config(
        dir,
        &config(
            dir,
            status,
            &target.url(),
            &generator(20_000, None),
            &format!("batch_records = 20\nmax_concurrency = 16\n{sink_extra}"),
        ),
    );
    let daemon = Daemon::start(dir, &path, status, &[]);
    let st = daemon.wait_for("the limit grows", Duration::from_secs(60), |s| {
        http(s)["limit"].as_u64().unwrap_or(0) >= 8
    });
    (daemon, st)
}

#[test]
fn latency_above_target_latency_cuts_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let target = Target::start();
    let b = target.behaviour();
    let (daemon, st) = grow_the_limit(tmp.path(), &target, "target_latency = \"100ms\"\n");
    // A loaded machine may push a 20 ms answer past 100 ms now and then; what matters
    // is that the cuts below come from the slower downstream.
    let before = http(&st)["limit_decreases"]["latency"]
        .as_u64()
        .unwrap_or(0);
    b.latency_ms.store(300, Ordering::SeqCst);
    let st = daemon.wait_for("a latency cut", Duration::from_secs(20), |s| {
        http(s)["last_decrease"]["reason"] == "latency"
            && http(s)["limit_decreases"]["latency"].as_u64().unwrap_or(0) > before
            && http(s)["limit"].as_u64().unwrap_or(u64::MAX) < 8
    });
    assert!(http(&st)["limit_decreases"]["latency"].as_u64().unwrap() > before);
    assert_eq!(daemon.stop(), Some(0));
}

#[test]
fn a_bad_token_fails_the_sink_and_quarantines_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let target = Target::start();
    *target.behaviour().token.lock().unwrap() = Some("Bearer good".to_owned());
    let status = free_addr();
    let path = write_config(
        tmp.path(),
        &config(
            tmp.path(),
            status,
            &target.url(),
            &generator(1_000, Some(500)),
            "headers_env = { Authorization = \"WEIR_TEST_HTTP_AUTH\" }\n",
        ),
    );
    let daemon = Daemon::start(
        tmp.path(),
        &path,
        status,
        &[("WEIR_TEST_HTTP_AUTH", "Bearer bad")],
    );
    let (_, component) = wait_failed(&daemon);
    let reason = component["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("HTTP 401"), "{component:#}");
    assert!(reason.contains("bad token"), "{component:#}");
    std::thread::sleep(Duration::from_secs(2));
    assert!(quarantined(tmp.path()).is_empty(), "nothing dead-lettered");
    assert!(target.shared.seqs().is_empty());
    // One probe per retry.max (1 s here), not every batch asking in turn.
    let asked = target.shared.events().len();
    assert!(asked <= 10, "{asked} requests with a bad token");
    assert_eq!(lag(&daemon.status()), 500, "the cursor stays put");
    assert!(daemon.stderr().contains("HTTP 401"), "logged");
    assert_eq!(daemon.stop(), Some(0));
}

#[test]
fn an_outage_is_ridden_out_within_the_retry_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let target = Target::start();
    let b = target.behaviour();
    b.latency_ms.store(10, Ordering::SeqCst);
    let status = free_addr();
    let path = write_config(
        tmp.path(),
        &config(
            tmp.path(),
            status,
            &target.url(),
            &generator(1_000, None),
            "batch_records = 50\nmax_concurrency = 8\n",
        ),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("deliveries", Duration::from_secs(20), |s| {
        http(s)["requests_ok"].as_u64().unwrap_or(0) > 10
    });
    b.force_status.store(503, Ordering::SeqCst);
    let outage_start = target.shared.since_start();
    let lag_before = lag(&daemon.status());
    // Two of the 30 s: also drop connections.
    b.drop_next.store(5, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(30));
    let outage_end = target.shared.since_start();
    let st = daemon.status();
    let lag_during = lag(&st);
    assert!(
        lag_during > lag_before + 10_000,
        "the lag grows: {lag_before} → {lag_during}"
    );
    assert!(
        http(&st)["retry_budget_exhausted"].as_u64().unwrap() > 0,
        "{:#}",
        http(&st)
    );
    b.force_status.store(0, Ordering::SeqCst);
    let during: Vec<_> = target
        .shared
        .events()
        .into_iter()
        .filter(|e| e.arrived >= outage_start && e.arrived < outage_end)
        .collect();
    // The budget: 3 retries/s (the floor, 10% of first attempts being less) over 30 s,
    // plus the first attempts of the batches admitted (2 × max_concurrency).
    let allowed = 3 * 30 + 2 * 8 + 10;
    assert!(
        during.len() <= allowed,
        "{} requests during the outage, budget {allowed}",
        during.len()
    );
    assert!(during.len() >= 30, "it kept trying: {}", during.len());
    // Recovery: stop the generator's growth by waiting for the lag to drain.
    daemon.wait_for("the lag drains", Duration::from_secs(60), |s| {
        lag(s) < 2_000
    });
    assert!(quarantined(tmp.path()).is_empty(), "nothing dead-lettered");
    assert_eq!(daemon.stop(), Some(0));
    let seqs = target.shared.distinct();
    let max = *seqs.last().unwrap();
    let holes: Vec<u64> = (0..=max).filter(|n| !seqs.contains(n)).take(10).collect();
    assert!(holes.is_empty(), "records lost: {holes:?} (of 0..={max})");
}

#[test]
fn kill_9_with_requests_in_flight_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let target = Target::start();
    let b = target.behaviour();
    // 300–500 ms per request, varying: the 8 requests in flight finish out of order.
    b.latency_ms.store(300, Ordering::SeqCst);
    b.jitter_ms.store(200, Ordering::SeqCst);
    let status = free_addr();
    let sink_keys = "batch_records = 100\nmin_concurrency = 8\nmax_concurrency = 8\n";
    let path = write_config(
        tmp.path(),
        &config(
            tmp.path(),
            status,
            &target.url(),
            &generator(5_000, Some(20_000)),
            sink_keys,
        ),
    );
    // The cursor never passes an undelivered batch: whenever /status is read, every
    // record below the committed cursor has reached the server (one source, so a
    // record's WAL offset is its seq). The status is read before the server's list.
    let cursor_behind_deliveries = |s: &serde_json::Value| {
        let committed = sink(s)["cursor"]["committed"].as_u64().unwrap_or(0);
        let delivered = target.shared.distinct();
        if let Some(missing) = (0..committed).find(|n| !delivered.contains(n)) {
            panic!("the cursor ({committed}) passed record {missing}, never delivered");
        }
    };
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("some deliveries", Duration::from_secs(20), |s| {
        cursor_behind_deliveries(s);
        http(s)["records_delivered"].as_u64().unwrap_or(0) > 2_000 && http(s)["in_flight"] != 0
    });
    daemon.kill9();
    let before = target.shared.distinct();
    // The second run's `gen` is an HTTP source nobody posts to: only the WAL's
    // records (the first run's) reach the sink.
    let http_source = format!("type = \"http\"\nlisten = \"{}\"\n", free_addr());
    let path = write_config(
        tmp.path(),
        &config(tmp.path(), status, &target.url(), &http_source, sink_keys),
    );
    b.latency_ms.store(5, Ordering::SeqCst);
    b.jitter_ms.store(20, Ordering::SeqCst);
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("the WAL delivered", Duration::from_secs(60), |s| {
        cursor_behind_deliveries(s);
        lag(s) == 0
    });
    assert_eq!(daemon.stop(), Some(0));
    let after = target.shared.distinct();
    let max = *after.last().unwrap();
    assert!(max >= *before.last().unwrap());
    let holes: Vec<u64> = (0..=max).filter(|n| !after.contains(n)).take(10).collect();
    assert!(
        holes.is_empty(),
        "records never delivered: {holes:?} (of 0..={max})"
    );
}

/// Seed 001's experiment on the real sink: the server serves 20, then 5, then 40
/// requests at once (429 above that); the limit follows.
#[test]
fn capacity_steps_are_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let target = Target::start();
    let b = target.behaviour();
    let latency = Duration::from_millis(100);
    b.latency_ms
        .store(latency.as_millis() as u64, Ordering::SeqCst);
    b.capacity.store(20, Ordering::SeqCst);
    let status = free_addr();
    let path = write_config(
        tmp.path(),
        &config(
            tmp.path(),
            status,
            &target.url(),
            &generator(6_000, None),
            "batch_records = 10\nmin_concurrency = 5\nmax_concurrency = 64\n",
        ),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let step = Duration::from_secs(10);
    let mut trace = Vec::new();
    let mut steps = Vec::new();
    for capacity in [20usize, 5, 40] {
        b.capacity.store(capacity, Ordering::SeqCst);
        let start = target.shared.since_start();
        steps.push((capacity, start));
        let t0 = Instant::now();
        while t0.elapsed() < step {
            let st = daemon.status();
            let h = http(&st);
            trace.push((
                target.shared.since_start(),
                capacity,
                h["limit"].as_u64().unwrap_or(0),
                h["in_flight"].as_u64().unwrap_or(0),
            ));
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    let end = target.shared.since_start();
    let events = target.shared.events();
    write_trace(&trace, &events, end);
    let mut failures = Vec::new();
    for (i, (capacity, start)) in steps.iter().enumerate() {
        let until = steps.get(i + 1).map_or(end, |s| s.1);
        // Judged on the step's last 5 s (the limit has had 5 s to find the capacity).
        let from = until - Duration::from_secs(5);
        let window: Vec<_> = events
            .iter()
            .filter(|e| e.arrived >= from && e.arrived < until)
            .collect();
        let ok = window.iter().filter(|e| e.status == 200).count();
        let overload = window.iter().filter(|e| e.status == 429).count();
        let secs = (until - from).as_secs_f64();
        let throughput = ok as f64 / secs;
        let possible = *capacity as f64 / latency.as_secs_f64();
        let share = overload as f64 / window.len().max(1) as f64;
        eprintln!(
            "capacity {capacity} from {start:?}: {throughput:.0} req/s of {possible:.0} \
             ({:.0}%), overload {:.1}%",
            throughput / possible * 100.0,
            share * 100.0
        );
        // Margins for a loaded 2-core machine running a debug build: 60% (the issue
        // asks 80% on a quiet one) and overload below 10%.
        if throughput < 0.6 * possible || share >= 0.10 {
            failures.push(format!(
                "capacity {capacity}: {throughput:.0}/{possible:.0} req/s, overload {:.1}%",
                share * 100.0
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(daemon.stop(), Some(0));
}

/// A trace point: time (s), server capacity, limit, delivered requests/s ÷ 10.
type Point = (f64, f64, f64, f64);

/// Writes the capacity-step trace as CSV and SVG next to the test binaries
/// (`target/http-sink-capacity.{csv,svg}`).
fn write_trace(
    trace: &[(Duration, usize, u64, u64)],
    events: &[run_support::http_target::Event],
    end: Duration,
) {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let mut csv = String::from("t_s,capacity,limit,in_flight,ok_per_s,overload_per_s\n");
    let mut points = Vec::new();
    for &(t, capacity, limit, in_flight) in trace {
        let from = t.saturating_sub(Duration::from_millis(500));
        let ok = events
            .iter()
            .filter(|e| e.status == 200 && e.arrived >= from && e.arrived < t)
            .count() as f64
            * 2.0;
        let overload = events
            .iter()
            .filter(|e| e.status == 429 && e.arrived >= from && e.arrived < t)
            .count() as f64
            * 2.0;
        csv.push_str(&format!(
            "{:.2},{capacity},{limit},{in_flight},{ok:.0},{overload:.0}\n",
            t.as_secs_f64()
        ));
        points.push((t.as_secs_f64(), capacity as f64, limit as f64, ok / 10.0));
    }
    std::fs::write(dir.join("http-sink-capacity.csv"), csv).unwrap();
    let (w, h) = (800.0, 300.0);
    let t_max = end.as_secs_f64().max(1.0);
    let t_min = points.first().map_or(0.0, |p| p.0);
    let y_max = 70.0;
    let x = |t: f64| (t - t_min) / (t_max - t_min) * (w - 60.0) + 40.0;
    let y = |v: f64| h - 30.0 - v.min(y_max) / y_max * (h - 50.0);
    let line = |f: &dyn Fn(&Point) -> f64, color: &str, label: &str, n: usize| {
        let pts: Vec<String> = points
            .iter()
            .map(|p| format!("{:.1},{:.1}", x(p.0), y(f(p))))
            .collect();
        format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>\
             <text x=\"{}\" y=\"{}\" fill=\"{color}\" font-size=\"12\">{label}</text>\n",
            pts.join(" "),
            50 + n * 200,
            16
        )
    };
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\"><rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <line x1=\"40\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"#888\"/>\
         <line x1=\"40\" y1=\"20\" x2=\"40\" y2=\"{b}\" stroke=\"#888\"/>\
         <text x=\"4\" y=\"{t70}\" font-size=\"10\">70</text>\
         <text x=\"4\" y=\"{b}\" font-size=\"10\">0</text>\
         <text x=\"{r}\" y=\"{bb}\" font-size=\"10\" text-anchor=\"end\">{t_max:.0} s</text>\n\
         {}{}{}</svg>\n",
        line(&|p| p.1, "#999", "server capacity", 0),
        line(&|p| p.2, "#d62728", "concurrency limit", 1),
        line(&|p| p.3, "#1f77b4", "delivered req/s ÷ 10", 2),
        b = h - 30.0,
        bb = h - 15.0,
        r = w - 20.0,
        t70 = y(70.0),
    );
    std::fs::write(dir.join("http-sink-capacity.svg"), svg).unwrap();
    eprintln!(
        "trace: {}",
        dir.join("http-sink-capacity.{csv,svg}").display()
    );
}

/// The component `out`'s entry of `/status`'s `components`.
fn out_component(status: &serde_json::Value) -> serde_json::Value {
    status["components"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["kind"] == "sink" && c["name"] == "out")
        .cloned()
        .unwrap_or_default()
}

/// The lines of `log` at `level` that speak of sink `out`.
fn sink_lines<'a>(log: &'a str, level: &str) -> Vec<&'a str> {
    log.lines()
        .filter(|l| l.contains(&format!(" {level} ")) && l.contains("sink out: "))
        .collect()
}

/// An endpoint that refuses everything, with a quarantine too small for it: every record
/// is dead-lettered, the quarantine keeps what fits and drops the rest. Neither is
/// silent: the first dead letter is a WARN, the first drop an ERROR, the rest are
/// summarized in a few lines with exact counts, and the sink is `degraded` with the
/// reason in `/status` and `/metrics`.
#[test]
fn dead_letters_beyond_the_quarantine_are_logged_and_degrade_the_sink() {
    let tmp = tempfile::tempdir().unwrap();
    let target = Target::start();
    target.behaviour().refuse_every.store(1, Ordering::SeqCst);
    let status = free_addr();
    let body = config(
        tmp.path(),
        status,
        &target.url(),
        &generator(0, Some(1_000)),
        "batch_records = 100\n",
    );
    let path = write_config(
        tmp.path(),
        &format!("{body}\n[quarantine]\nmax_disk = \"64 KiB\"\n"),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let st = daemon.wait_for("every record settled", Duration::from_secs(30), |s| {
        s["sources"]["gen"]["records"] == 1_000 && lag(s) == 0
    });
    assert!(target.shared.distinct().is_empty(), "nothing was accepted");
    let q = &st["quarantine"]["sinks"]["out"];
    let (kept, dropped) = (
        q["records"].as_u64().unwrap(),
        q["dropped"].as_u64().unwrap(),
    );
    assert_eq!(kept + dropped, 1_000, "{q:#}");
    assert!(kept > 0 && dropped > 0, "{q:#}");
    assert_eq!(quarantined(tmp.path()).len() as u64, kept);

    let component = out_component(&st);
    assert_eq!(component["state"], "degraded", "{component:#}");
    let reason = component["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("the quarantine is full") && reason.contains("max_disk"),
        "{component:#}"
    );
    let (_, _, metrics) = run_support::get(status, "/metrics").unwrap();
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(
        metrics.contains(r#"weir_component_state{component="out",kind="sink",state="degraded"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            r#"weir_quarantine_dropped_total{{sink="out",reason="quarantine_full"}} {dropped}"#
        )),
        "{metrics}"
    );

    // The summaries still pending are written at shutdown.
    let stderr = daemon.stderr_path.clone();
    assert_eq!(daemon.stop(), Some(0));
    let log = std::fs::read_to_string(stderr).unwrap();
    let warns = sink_lines(&log, "WARN");
    let errors = sink_lines(&log, "ERROR");
    assert!(
        warns[0].contains("sink out: 1 record quarantined in ") && warns[0].contains("HTTP 400"),
        "{log}"
    );
    assert!(
        errors[0]
            .contains("sink out: 1 record dropped, not kept by the quarantine: quarantine full"),
        "{log}"
    );
    // Summaries, not one line per record: the last of each says how many in all.
    assert!(warns.len() <= 4 && errors.len() <= 4, "{log}");
    assert!(
        warns.last().unwrap().contains(&format!("({kept} in all)")),
        "{log}"
    );
    assert!(
        errors
            .last()
            .unwrap()
            .contains(&format!("({dropped} in all)")),
        "{log}"
    );
}

/// An endpoint that answers 413 to everything: each record is split down to itself and
/// dead-lettered. With room in the quarantine the sink stays `running`, and the dead
/// letters are one WARN and a summary, not 300 lines.
#[test]
fn records_too_large_for_the_endpoint_are_dead_lettered_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let target = Target::start();
    target.behaviour().force_status.store(413, Ordering::SeqCst);
    let daemon = start(
        tmp.path(),
        &target.url(),
        &generator(0, Some(300)),
        "batch_records = 50\n",
    );
    let st = daemon.wait_for("every record settled", Duration::from_secs(30), |s| {
        s["sources"]["gen"]["records"] == 300 && lag(s) == 0
    });
    assert_eq!(quarantined(tmp.path()).len(), 300);
    assert_eq!(out_component(&st)["state"], "running", "{st:#}");
    let log = daemon.stderr();
    assert_eq!(daemon.stop(), Some(0));
    let warns = sink_lines(&log, "WARN");
    assert!(
        warns
            .first()
            .is_some_and(|l| l.contains("sink out: 1 record quarantined in ") && l.contains("413")),
        "{log}"
    );
    assert!(warns.len() <= 3, "{log}");
    assert!(sink_lines(&log, "ERROR").is_empty(), "{log}");
}

/// While the endpoint refuses the configuration (401), one request probes it every
/// `retry.max`: the requests held behind it wait for its answer instead of each asking
/// in turn (with the limit grown to 8, 8 requests every `retry.max` before).
#[test]
fn a_configuration_error_is_probed_by_one_request_per_retry_max() {
    let tmp = tempfile::tempdir().unwrap();
    let target = Target::start();
    let b = target.behaviour();
    let (daemon, _) = grow_the_limit(tmp.path(), &target, "");
    // Now the endpoint wants a token the sink does not send.
    *b.token.lock().unwrap() = Some("Bearer good".to_owned());
    wait_failed(&daemon);
    let failed_at = target
        .shared
        .events()
        .iter()
        .filter(|e| e.status == 401)
        .map(|e| e.answered)
        .min()
        .unwrap();
    // retry.max is 1 s (run_support::http_sink::config): watch 4 of them.
    std::thread::sleep(Duration::from_secs(4));
    let events = target.shared.events();
    let last = events.iter().map(|e| e.arrived).max().unwrap();
    // The requests in flight when the first 401 came back are answered 401 too; after
    // them, one probe at a time, one per second.
    let settled_at = failed_at + Duration::from_millis(500);
    let probes: Vec<_> = events.iter().filter(|e| e.arrived > settled_at).collect();
    let seconds = (last - settled_at).as_secs_f64();
    assert!(
        probes.len() as f64 <= seconds + 1.0,
        "{} requests in {seconds:.1}s after the first 401",
        probes.len()
    );
    assert!(
        probes.iter().all(|e| e.status == 401 && e.concurrent == 1),
        "a probe is alone"
    );
    assert_eq!(daemon.stop(), Some(0));
}
