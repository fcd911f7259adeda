//! `weir run` end to end with the `nats` source and sink against real nats-server
//! processes that each test starts on free loopback ports with their own store
//! directories: the distribution's 2.9.10 (what users run) for the main tests, a 2.10+
//! server for multiple filter subjects.
//!
//! How a test stalls the pipeline: a required `blackhole` sink (`gate`) at 1 record/s
//! holds WAL retention, so the small WAL (`on_full = "block"`) fills and admission
//! blocks; the source then gets no credits and stops pulling.

mod run_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use run_support::instance::Instance;
use run_support::nats::{Js, NatsServer, nats_bin, nats_new_bin};
use run_support::{Daemon, free_addr, ndjson_lines, post, run_to_exit, write_config};
use serde_json::Value;

/// The source's name in every config.
const SOURCE: &str = "js";

/// One weir: its directory, status address.
struct Weir(Instance);

impl Weir {
    fn new(root: &Path, name: &str) -> Weir {
        Weir(Instance::new(root, name))
    }

    fn out(&self) -> PathBuf {
        self.0.out()
    }

    /// The config: `[wal]` with `max_disk`, the nats source with `source` keys, a file
    /// sink `out`, and a required blackhole `gate` at `gate` records/s when given.
    fn config(&self, urls: &[String], max_disk: &str, source: &str, gate: Option<u64>) -> PathBuf {
        let keys = format!(
            "type = \"nats\"\nurl = {urls:?}\nstream = \"S\"\nconsumer = \"weir\"\n{source}"
        );
        self.0.config(SOURCE, &keys, max_disk, gate)
    }

    fn start(&self, config: &Path) -> Daemon {
        self.0.start(config)
    }
}

/// `/status` → `sources.js.nats`.
fn nats(status: &Value) -> &Value {
    let m = &status["sources"][SOURCE]["nats"];
    assert!(m.is_object(), "no sources.{SOURCE}.nats in {status:#}");
    m
}

fn field(status: &Value, name: &str) -> u64 {
    nats(status)[name]
        .as_u64()
        .unwrap_or_else(|| panic!("sources.{SOURCE}.nats.{name} is not a u64: {status:#}"))
}

/// `(subject, n)` of every line in the file sink: payloads are `"<subject>:<n>"`.
fn lines_of(out: &Path) -> Vec<(String, u64)> {
    ndjson_lines(out)
        .iter()
        .map(|v| {
            let p = v["payload"]
                .as_str()
                .expect("a string payload")
                .trim_start();
            let (s, n) = p.rsplit_once(':').expect("subject:n");
            assert_eq!(v["key"].as_str(), Some(s), "key = subject: {v}");
            (s.to_owned(), n.parse().expect("n"))
        })
        .collect()
}

/// Waits until the sink holds `n` distinct messages.
fn wait_distinct(out: &Path, n: usize, timeout: Duration, daemon: &Daemon) -> Vec<(String, u64)> {
    let deadline = Instant::now() + timeout;
    loop {
        let lines = lines_of(out);
        let distinct: BTreeSet<_> = lines.iter().collect();
        if distinct.len() >= n {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n} messages in the sink; status {:#}\n{}",
            distinct.len(),
            daemon.status(),
            daemon.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Publishes `n` messages over `subjects` subjects `in.0 … in.{k-1}`, payload
/// `"in.K:i"` with `i` counting per subject, padded to `size` bytes.
fn publish(js: &Js, n: usize, subjects: usize, size: usize) {
    js.publish(
        n,
        |i| format!("in.{}", i % subjects),
        |i| {
            let mut p = format!("in.{}:{}", i % subjects, i / subjects).into_bytes();
            if p.len() < size {
                let mut padded = vec![b' '; size - p.len()];
                padded.extend_from_slice(&p);
                p = padded;
            }
            p
        },
    );
}

/// Every message appears, at least once.
fn assert_complete(lines: &[(String, u64)], n: usize, subjects: usize) {
    let seen: BTreeSet<(&str, u64)> = lines.iter().map(|(s, i)| (s.as_str(), *i)).collect();
    assert_eq!(seen.len(), n, "every message, once at least");
    let per_subject = (n / subjects) as u64;
    for (s, i) in &seen {
        assert!(*i < per_subject + 1, "{s}:{i} was never published");
    }
}

/// Every message appears, and per subject in stream order (first appearances).
fn assert_complete_in_order(lines: &[(String, u64)], n: usize, subjects: usize) {
    let mut next: BTreeMap<&str, u64> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for (s, i) in lines {
        if !seen.insert((s.as_str(), *i)) {
            continue; // a redelivery written again
        }
        let expected = next.entry(s.as_str()).or_insert(0);
        assert_eq!(*i, *expected, "{s}: message {i} came before {expected}");
        *expected += 1;
    }
    assert_eq!(seen.len(), n, "every message, once at least");
    assert_eq!(next.len(), subjects);
}

fn one_server() -> (tempfile::TempDir, NatsServer, Js) {
    let root = tempfile::tempdir().expect("temp dir");
    let server = NatsServer::start(nats_bin());
    let js = Js::connect(&[server.url()]);
    js.stream("S", &["in.>"], 1);
    (root, server, js)
}

/// Peak resident set of process `pid` (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .expect("VmHWM")
        * 1024
}

/// Resident set of process `pid` now (VmRSS), in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

/// `weir validate`'s memory estimate, in bytes.
fn validate_estimate(config: &Path) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("validate")
        .arg(config)
        .output()
        .expect("weir validate");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|l| l.strip_prefix("memory estimate: "))
        .and_then(|l| {
            l.split_once('(')?
                .1
                .split_once(" bytes")
                .map(|(n, _)| n.to_owned())
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no memory estimate in:\n{text}"))
}

/// 100,000 messages in, all of them out, in stream order per subject; every one acked.
#[test]
fn a_round_trip_delivers_every_message_in_order() {
    let (root, _server, js) = one_server();
    const N: usize = 100_000;
    publish(&js, N - 1, 10, 0);
    // The last one (in.9:9999) carries headers.
    js.rt.block_on(async {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("X-Test", "yes");
        js.js
            .publish_with_headers("in.9", headers, "in.9:9999".into())
            .await
            .expect("publish")
            .await
            .expect("puback");
    });
    let weir = Weir::new(root.path(), "w");
    let config = weir.config(
        &[_server.url()],
        "256 MiB",
        "max_ack_pending = 4096\nmax_inflight = 4096\nfetch_batch = 1024",
        None,
    );
    let daemon = weir.start(&config);
    let lines = wait_distinct(&weir.out(), N, Duration::from_secs(120), &daemon);
    assert_complete_in_order(&lines, N, 10);
    let status = daemon.wait_for("every ack", Duration::from_secs(10), |s| {
        field(s, "acked") >= N as u64 && field(s, "credits_outstanding") == 0
    });
    assert_eq!(field(&status, "redelivered"), 0);
    // Units were appended while earlier ones were being fsynced, and the order held.
    assert!(field(&status, "max_units_in_flight") >= 2, "{status:#}");
    assert_eq!(field(&status, "units_in_flight"), 0, "{status:#}");
    assert_eq!(nats(&status)["server_version"], "2.9.10");
    let first = &ndjson_lines(&weir.out())[0];
    assert_eq!(first["attributes"]["nats.stream"], "S");
    assert_eq!(first["attributes"]["nats.seq"], "1");
    assert_eq!(first["attributes"]["nats.subject"], "in.0");
    assert_eq!(first["attributes"]["nats.redelivered"], "false");
    let last = ndjson_lines(&weir.out())
        .into_iter()
        .find(|v| v["payload"] == "in.9:9999")
        .expect("the message with headers");
    assert_eq!(last["attributes"]["nats.header.X-Test"], "yes", "{last}");
    assert_eq!(last["attributes"]["nats.seq"], N.to_string());
    assert_eq!(daemon.stop(), Some(0));
    let (ack_pending, redelivered, pending) = js.consumer_info("S", "weir");
    assert_eq!((ack_pending, redelivered, pending), (0, 0, 0));
}

/// A stalled sink: weir stops pulling. Ack pending stays at or below max_inflight, the
/// RSS grows from rest by no more than the validate estimate, and with ack_wait at 2 s nothing is redelivered
/// while the WAL is full (the progress acks). After release everything arrives.
#[test]
fn a_stalled_sink_stops_the_pulls_and_progress_acks_prevent_redelivery() {
    let (root, server, js) = one_server();
    const N: usize = 8_000;
    const INFLIGHT: u64 = 200;
    js.consumer("S", "weir", Duration::from_secs(2), 1000);
    let weir = Weir::new(root.path(), "w");
    let source =
        format!("max_inflight = {INFLIGHT}\nfetch_batch = 50\nmax_message_bytes = \"4 KiB\"");
    let stalled = weir.config(&[server.url()], "4 MiB", &source, Some(1));
    let estimate = validate_estimate(&stalled);
    let daemon = weir.start(&stalled);
    // The process at rest (code, runtime, client) before any message: the queues
    // the estimate bounds grow from there.
    std::thread::sleep(Duration::from_millis(500));
    let idle = rss(daemon.child.id());
    publish(&js, N, 4, 1024);
    // The WAL fills (4 MiB of 1 KiB messages) and the source runs out of credits.
    daemon.wait_for("the WAL to fill", Duration::from_secs(60), |s| {
        s["sources"][SOURCE]["state"] == "backpressured" || field(s, "progress_acks") > 0
    });
    let held_from = Instant::now();
    let mut max_pending = 0;
    while held_from.elapsed() < Duration::from_secs(7) {
        let (ack_pending, redelivered, _) = js.consumer_info("S", "weir");
        max_pending = max_pending.max(ack_pending);
        assert!(
            ack_pending as u64 <= INFLIGHT,
            "ack pending {ack_pending} above max_inflight {INFLIGHT}"
        );
        assert_eq!(redelivered, 0, "redelivered while the WAL was full");
        let status = daemon.status();
        assert!(field(&status, "credits_outstanding") <= INFLIGHT);
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = daemon.status();
    assert!(field(&status, "progress_acks") > 0, "{status:#}");
    assert_eq!(field(&status, "redelivered"), 0);
    assert!(
        field(&status, "fetched") < N as u64,
        "it stopped pulling: {status:#}"
    );
    let (_, _, backlog) = js.consumer_info("S", "weir");
    assert!(backlog > 0, "the stream keeps the backlog");
    let peak = peak_rss(daemon.child.id());
    let grown = peak.saturating_sub(idle);
    eprintln!(
        "stalled: ack pending at most {max_pending}; RSS at rest {} KiB, peak {} KiB: grew {} KiB under load, validate estimate {} KiB",
        idle >> 10,
        peak >> 10,
        grown >> 10,
        estimate >> 10
    );
    assert!(
        grown <= estimate,
        "RSS grew by {grown} bytes under load, above the validate estimate {estimate}"
    );
    assert_eq!(daemon.stop(), Some(0));
    // Release: the gate at full speed; what was not acked is redelivered.
    let open = weir.config(&[server.url()], "4 MiB", &source, None);
    let daemon = weir.start(&open);
    let lines = wait_distinct(&weir.out(), N, Duration::from_secs(90), &daemon);
    // What was not acked at the stop is redelivered after ack_wait, behind newer
    // messages: complete, not in order.
    assert_complete(&lines, N, 4);
    assert_eq!(daemon.stop(), Some(0));
}

/// kill -9 mid-stream, then a restart: every message is in the sink; redeliveries of
/// what weir had not acked are counted, nothing acked is lost.
#[test]
fn kill_9_mid_stream_then_a_restart_loses_nothing() {
    let (root, server, js) = one_server();
    const N: usize = 30_000;
    js.consumer("S", "weir", Duration::from_secs(2), 1000);
    publish(&js, N, 3, 200);
    let weir = Weir::new(root.path(), "w");
    // A slow gate keeps weir mid-stream when it is killed.
    let slow = weir.config(
        &[server.url()],
        "64 MiB",
        "max_inflight = 500\nfetch_batch = 100",
        Some(2000),
    );
    let daemon = weir.start(&slow);
    daemon.wait_for("some acks", Duration::from_secs(60), |s| {
        field(s, "acked") >= 3000
    });
    let acked_before = field(&daemon.status(), "acked");
    daemon.kill9();
    let (ack_pending, _, _) = js.consumer_info("S", "weir");
    let open = weir.config(
        &[server.url()],
        "64 MiB",
        "max_inflight = 500\nfetch_batch = 100",
        None,
    );
    let daemon = weir.start(&open);
    let lines = wait_distinct(&weir.out(), N, Duration::from_secs(90), &daemon);
    assert_complete(&lines, N, 3);
    let status = daemon.wait_for("redeliveries counted", Duration::from_secs(10), |s| {
        ack_pending == 0 || field(s, "redelivered") > 0
    });
    eprintln!(
        "acked before kill: {acked_before}; unacked at the kill: {ack_pending}; redelivered after: {}; lines {} for {N}",
        field(&status, "redelivered"),
        lines.len()
    );
    assert_eq!(daemon.stop(), Some(0));
}

/// Under `on_full = "reject"` a full WAL refuses units (several are in flight): each
/// goes again, first and in its order, and nothing of it is acked before it is durable.
/// A slow required gate frees room now and then, so the run goes on to the end: every
/// message arrives, in stream order per subject, and none is redelivered.
#[test]
fn units_the_wal_refuses_go_again_in_stream_order() {
    let (root, server, js) = one_server();
    const N: usize = 8_000;
    publish(&js, N, 4, 1024);
    let weir = Weir::new(root.path(), "w");
    let config = weir.config(
        &[server.url()],
        "4 MiB",
        "max_inflight = 2000\nfetch_batch = 200",
        Some(2000),
    );
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("on_full = \"block\""));
    std::fs::write(
        &config,
        text.replace("on_full = \"block\"", "on_full = \"reject\""),
    )
    .unwrap();
    let daemon = weir.start(&config);
    let lines = wait_distinct(&weir.out(), N, Duration::from_secs(120), &daemon);
    assert_complete_in_order(&lines, N, 4);
    let status = daemon.wait_for("every ack", Duration::from_secs(10), |s| {
        field(s, "acked") >= N as u64 && field(s, "credits_outstanding") == 0
    });
    let refused = status["sources"][SOURCE]["refused_batches"]
        .as_u64()
        .unwrap();
    assert!(refused > 0, "the WAL never refused a unit: {status:#}");
    assert!(field(&status, "max_units_in_flight") >= 2, "{status:#}");
    assert_eq!(field(&status, "redelivered"), 0, "{status:#}");
    eprintln!(
        "refused batches {refused}, units in flight at most {}",
        field(&status, "max_units_in_flight")
    );
    assert_eq!(daemon.stop(), Some(0));
}

/// Two subject filters on 2.9 are refused at startup (it would ignore them and deliver
/// the whole stream); so is a consumer whose ack policy is not explicit.
#[test]
fn startup_refuses_what_the_server_would_get_wrong() {
    let (root, server, js) = one_server();
    let weir = Weir::new(root.path(), "w");
    let two = weir.config(
        &[server.url()],
        "64 MiB",
        "subjects = [\"in.a\", \"in.b\"]",
        None,
    );
    let (code, err) = run_to_exit(&two, &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("sources.js.subjects") && err.contains("2.10"),
        "{err}"
    );
    js.rt.block_on(async {
        let stream = js.js.get_stream("S").await.expect("stream");
        stream
            .create_consumer(async_nats::jetstream::consumer::pull::Config {
                durable_name: Some("none".to_owned()),
                ack_policy: async_nats::jetstream::consumer::AckPolicy::None,
                ..Default::default()
            })
            .await
            .expect("consumer");
    });
    let none = weir.config(&[server.url()], "64 MiB", "", None);
    let text = std::fs::read_to_string(&none)
        .expect("config")
        .replace("consumer = \"weir\"", "consumer = \"none\"");
    std::fs::write(&none, text).expect("config");
    let (code, err) = run_to_exit(&none, &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("sources.js.consumer") && err.contains("explicit"),
        "{err}"
    );
}

/// On a 2.10+ server two filters work: only their subjects arrive, in order.
#[test]
fn several_filters_on_a_newer_server() {
    let root = tempfile::tempdir().expect("temp dir");
    let server = NatsServer::start(nats_new_bin());
    let js = Js::connect(&[server.url()]);
    js.stream("S", &["in.>"], 1);
    publish(&js, 3_000, 3, 0); // in.0, in.1, in.2
    let weir = Weir::new(root.path(), "w");
    let config = weir.config(
        &[server.url()],
        "64 MiB",
        "subjects = [\"in.0\", \"in.2\"]",
        None,
    );
    let daemon = weir.start(&config);
    let lines = wait_distinct(&weir.out(), 2_000, Duration::from_secs(60), &daemon);
    std::thread::sleep(Duration::from_millis(500));
    let lines = if lines.len() < 2_000 {
        lines
    } else {
        lines_of(&weir.out())
    };
    assert!(
        lines.iter().all(|(s, _)| s != "in.1"),
        "a filtered-out subject arrived"
    );
    assert_complete_in_order(&lines, 2_000, 2);
    let status = daemon.status();
    assert!(
        !nats(&status)["server_version"]
            .as_str()
            .unwrap_or("")
            .starts_with("2.9")
    );
    assert_eq!(daemon.stop(), Some(0));
}

/// The sink: HTTP → weir → JetStream. Killed with kill -9 mid-run and restarted, the
/// stream holds every record exactly once: the server deduplicates the replay by
/// `Nats-Msg-Id`.
#[test]
fn the_sink_publishes_each_record_once_across_kill_9() {
    let server = NatsServer::start(nats_bin());
    let js = Js::connect(&[server.url()]);
    js.stream("OUT", &["weir.>"], 1);
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path();
    let status = free_addr();
    let http = free_addr();
    let text = format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "64 MiB"
segment_bytes = "4 MiB"
on_full = "block"

[sources.api]
type = "http"
listen = "{http}"
max_body = "4 MiB"

[sinks.bus]
type = "nats"
inputs = ["api"]
url = "{url}"
subject = "weir.{{source}}.{{key}}"
stream = "OUT"
max_inflight = 1
"#,
        data = dir.join("data").display(),
        url = server.url(),
    );
    let config = write_config(dir, &text);
    let daemon = Daemon::start(dir, &config, status, &[]);
    const N: usize = 20_000;
    for chunk in 0..20 {
        let body: String = (0..N / 20)
            .map(|i| format!("{{\"n\":{}}}\n", chunk * (N / 20) + i))
            .collect();
        let r = post(http, "/ingest", &[], body.as_bytes()).expect("POST");
        assert_eq!(r.0, 200, "{}", String::from_utf8_lossy(&r.2));
    }
    let published = |s: &Value| s["sinks"]["bus"]["nats"]["published"].as_u64().unwrap_or(0);
    daemon.wait_for("publishing under way", Duration::from_secs(60), |s| {
        published(s) > 500
    });
    let before = published(&daemon.status());
    daemon.kill9();
    assert!(
        before < N as u64,
        "killed mid-run ({before} of {N} published)"
    );
    let daemon = Daemon::start(dir, &config, status, &[]);
    daemon.wait_for("every record published", Duration::from_secs(120), |s| {
        s["sinks"]["bus"]["cursor"]["lag_records"].as_u64() == Some(0) && published(s) > 0
    });
    let messages = js.read_all("OUT");
    let mut ids = BTreeSet::new();
    let mut ns = BTreeSet::new();
    for (subject, payload, headers) in &messages {
        assert_eq!(subject, "weir.api._", "the HTTP source's empty key");
        let id = headers
            .iter()
            .find(|(k, _)| k == "Nats-Msg-Id")
            .map(|(_, v)| v.clone())
            .expect("Nats-Msg-Id");
        assert!(ids.insert(id.clone()), "{id} twice");
        let v: Value = serde_json::from_slice(payload).expect("JSON payload");
        assert!(ns.insert(v["n"].as_u64().expect("n")), "record {v} twice");
    }
    assert_eq!(ns.len(), N, "every record exactly once in the stream");
    let status = daemon.status();
    eprintln!("sink after restart: {:#}", status["sinks"]["bus"]["nats"]);
    assert_eq!(daemon.stop(), Some(0));
}

/// A 3-node JetStream cluster, the stream at replicas 3, two weir instances sharing one
/// durable consumer. One NATS node and then one weir (kill -9) die mid-stream; that
/// weir restarts on its data directory. The union of both sinks holds every message,
/// and each instance's `/status` shows its share.
#[test]
fn two_instances_share_a_consumer_on_a_cluster() {
    let root = tempfile::tempdir().expect("temp dir");
    let mut nodes = NatsServer::cluster(&nats_bin(), root.path());
    let urls: Vec<String> = nodes.iter().map(NatsServer::url).collect();
    let js = Js::connect(&urls);
    js.stream("S", &["in.>"], 3);
    js.consumer("S", "weir", Duration::from_secs(3), 2000);
    const N: usize = 30_000;
    publish(&js, N, 3, 100);
    let source = "max_inflight = 500\nfetch_batch = 100\ninstances = 2\nmax_ack_pending = 2000";
    let a = Weir::new(root.path(), "a");
    let b = Weir::new(root.path(), "b");
    // The gate slows both so that they are mid-stream when the failures come.
    let a_slow = a.config(&urls, "64 MiB", source, Some(3000));
    let b_slow = b.config(&urls, "64 MiB", source, Some(3000));
    let da = a.start(&a_slow);
    let db = b.start(&b_slow);
    da.wait_for("a's share", Duration::from_secs(60), |s| {
        field(s, "acked") > 1000
    });
    db.wait_for("b's share", Duration::from_secs(60), |s| {
        field(s, "acked") > 1000
    });
    nodes[2].kill();
    std::thread::sleep(Duration::from_millis(500));
    db.kill9();
    let b_open = b.config(&urls, "64 MiB", source, None);
    let a_open = a.config(&urls, "64 MiB", source, None);
    let db = b.start(&b_open);
    let _ = da.stop();
    let da = a.start(&a_open);
    let deadline = Instant::now() + Duration::from_secs(120);
    let union = loop {
        let mut all: BTreeSet<(String, u64)> = lines_of(&a.out()).into_iter().collect();
        all.extend(lines_of(&b.out()));
        if all.len() >= N || Instant::now() > deadline {
            break all;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let (sa, sb) = (da.status(), db.status());
    assert_eq!(
        union.len(),
        N,
        "the union of both sinks; a: {:#}\nb: {:#}\n{}\n{}",
        nats(&sa),
        nats(&sb),
        da.stderr(),
        db.stderr()
    );
    let (share_a, share_b) = (lines_of(&a.out()).len(), lines_of(&b.out()).len());
    eprintln!("shares: a {share_a}, b {share_b} (of {N}; redeliveries counted twice)");
    // Each took more than 1,000 before the failures (the waits above). After the
    // restarts one may find nothing left for it: its new run's `acked` can be 0.
    assert!(share_a > 0 && share_b > 0, "both instances took a share");
    let _ = da.stop();
    let _ = db.stop();
}
