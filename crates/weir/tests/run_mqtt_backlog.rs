//! A QoS 1 backlog after a kill -9 drains against both brokers: the distribution's
//! Mosquitto (Debian 12's 2.0.11, which stops holding its inflight window once acks
//! flow and sends the whole backlog at once) and one that holds it (2.0.21). weir stops
//! reading the socket while the messages it holds that are not yet durable exceed its
//! bounds (TCP backpressure), so it makes steady progress and its memory stays within
//! `weir validate`'s estimate.

mod run_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use run_support::mosquitto::{
    Mosquitto, MosquittoOpts, Publisher, distro_mosquitto_bin, fixed_mosquitto_bin,
    mosquitto_version, sequenced,
};
use run_support::{Daemon, free_addr, ndjson_lines, write_config};
use serde_json::Value;

const SOURCE: &str = "mq";
const TOPICS: usize = 4;
const PER_TOPIC: u64 = 5_000;
const N: u64 = TOPICS as u64 * PER_TOPIC;
/// Padding of each payload: about 2.1 KB each, 42 MB of backlog: far above what weir
/// may hold (`expected_broker_window` × `max_message_bytes` = 320 KiB), and above
/// `weir validate`'s whole estimate, so a source that read it all would show in RSS.
const PAD: usize = 2048;
/// The broker's `max_inflight_messages` and weir's `expected_broker_window`.
const WINDOW: u32 = 20;
const MAX_MESSAGE_BYTES: u64 = 16 * 1024;
/// The drain must end within this (issue 16: 30 s).
const DRAIN_LIMIT: Duration = Duration::from_secs(30);

#[test]
fn a_20000_message_backlog_after_kill_9_drains_from_the_distributions_broker() {
    backlog_after_kill_9_drains("distribution", &distro_mosquitto_bin(), "3.1.1");
}

/// Mosquitto 2.0.11 ignores MQTT 5's receive maximum as it ignores its own window
/// once acks flow: announcing one is no remedy, the pause is.
#[test]
fn a_20000_message_backlog_after_kill_9_drains_from_the_distributions_broker_under_mqtt_5() {
    backlog_after_kill_9_drains("distribution", &distro_mosquitto_bin(), "5");
}

#[test]
fn a_20000_message_backlog_after_kill_9_drains_from_a_broker_that_holds_its_window() {
    backlog_after_kill_9_drains("window-holding", &fixed_mosquitto_bin(), "3.1.1");
}

fn config(dir: &Path, status: SocketAddr, url: &str, protocol: &str) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "1s"

[wal]
max_disk = "64 MiB"
segment_bytes = "4 MiB"
on_full = "block"

[sources.{SOURCE}]
type = "mqtt"
url = "{url}"
client_id = "weir-backlog"
protocol = "{protocol}"
topics = ["t/#"]
qos = 1
keepalive = "5s"
max_message_bytes = "{MAX_MESSAGE_BYTES}"
expected_broker_window = {WINDOW}

[sinks.out]
type = "file"
inputs = ["{SOURCE}"]
path = "{out}"
"#,
        data = dir.join("data").display(),
        out = dir.join("out").display(),
    )
}

/// The same pipeline behind a stalled WAL: a small one (256 KiB) whose retention a
/// required blackhole sink at 1 record/s holds, so admission blocks and nothing
/// becomes durable; keepalive 2 s. With `rate` unset, the gate is open.
fn stalled_config(dir: &Path, status: SocketAddr, url: &str, rate: Option<u64>) -> String {
    let base = config(dir, status, url, "3.1.1")
        .replace(
            "max_disk = \"64 MiB\"\nsegment_bytes = \"4 MiB\"",
            "max_disk = \"256 KiB\"\nsegment_bytes = \"32 KiB\"\nmax_pending_bytes = \"64 KiB\"",
        )
        .replace("keepalive = \"5s\"", "keepalive = \"2s\"");
    let rate = rate.map(|r| format!("rate = {r}")).unwrap_or_default();
    format!(
        "{base}\n[sinks.gate]\ntype = \"blackhole\"\ninputs = [\"{SOURCE}\"]\nread_batch_records = 10\n{rate}\n"
    )
}

/// Behind a stalled WAL, the distribution's broker sends beyond its window as soon
/// as acks flowed: weir reads no more than its bounds, the guard drops the connection
/// each keepalive (pings cannot go out while reading is paused), memory stays bounded
/// all along, and once the WAL moves again everything arrives.
#[test]
fn behind_a_stalled_wal_the_distributions_broker_costs_no_more_than_the_bound() {
    const STALL_TOPICS: usize = 2;
    const STALL_PER_TOPIC: u64 = 2_500;
    let bin = distro_mosquitto_bin();
    let version = mosquitto_version(&bin);
    let broker = Mosquitto::start(MosquittoOpts {
        max_inflight_messages: WINDOW,
        bin: Some(bin),
        ..MosquittoOpts::default()
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let status = free_addr();
    let stalled = write_config(
        dir.path(),
        &stalled_config(dir.path(), status, &broker.url(), Some(1)),
    );
    let daemon = Daemon::start(dir.path(), &stalled, status, &[]);
    warm_up(&broker, &daemon);
    // 10 MB, forty times the WAL.
    let mut publisher = Publisher::connect(broker.addr, "stall-publisher").expect("connect");
    let n = publisher
        .publish_all(1, sequenced(STALL_TOPICS, STALL_PER_TOPIC, PAD))
        .expect("publish");
    publisher.disconnect();
    let s = daemon.wait_for("a guard disconnect", Duration::from_secs(30), |s| {
        field(s, "guard_disconnects").unwrap_or(0) >= 1
    });
    let limit = field(&s, "held_limit_bytes").expect("held_limit_bytes");
    // Three more keepalives of pauses and guard disconnects: never above the bound.
    let end = Instant::now() + Duration::from_secs(6);
    let mut samples = 0;
    while Instant::now() < end {
        let s = daemon.status();
        let held = field(&s, "held_bytes").expect("held_bytes");
        assert!(
            held <= limit + MAX_MESSAGE_BYTES,
            "held {held} > {limit}: {:#}",
            mqtt(&s)
        );
        samples += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = daemon.status();
    let m = mqtt(&s).clone();
    let max_held = field(&s, "max_held_bytes").expect("max_held_bytes");
    assert!(max_held <= limit + MAX_MESSAGE_BYTES, "{m:#}");
    eprintln!(
        "stalled WAL, mosquitto {version}: {} guard disconnects, {} read pauses, max_unacked {}, \
         held at most {max_held} of {limit} bytes ({samples} samples)",
        m["guard_disconnects"], m["read_pauses"], m["max_unacked"]
    );
    daemon.stop();

    // The gate opens: everything arrives.
    let open = write_config(
        dir.path(),
        &stalled_config(dir.path(), status, &broker.url(), None),
    );
    let daemon = Daemon::start(dir.path(), &open, status, &[]);
    let out = dir.path().join("out");
    let deadline = Instant::now() + DRAIN_LIMIT;
    let per_topic = |by_topic: &BTreeMap<String, Vec<u64>>| {
        by_topic
            .values()
            .map(|seqs| {
                let mut seen = vec![false; STALL_PER_TOPIC as usize];
                seqs.iter().for_each(|&q| seen[q as usize] = true);
                seen.iter().filter(|&&b| b).count() as u64
            })
            .sum::<u64>()
    };
    loop {
        let have = per_topic(&seqs_by_topic(&out));
        if have == n {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{have} of {n} arrived after the gate opened: {:#}",
            mqtt(&daemon.status())
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    daemon.stop();
}

fn mqtt(status: &Value) -> &Value {
    &status["sources"][SOURCE]["mqtt"]
}

fn field(status: &Value, name: &str) -> Option<u64> {
    mqtt(status)[name].as_u64()
}

/// `weir validate`'s memory estimate of `config`, in bytes.
fn validate_estimate(config: &Path) -> u64 {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("validate")
        .arg(config)
        .output()
        .expect("run weir validate");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "weir validate failed:\n{text}");
    text.split(" bytes, the sum of the bounds above")
        .next()
        .and_then(|head| head.rsplit('(').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no memory estimate in:\n{text}"))
}

/// `VmRSS` or `VmHWM` of process `pid`, in bytes.
fn proc_kb(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{key} in /proc/{pid}/status"));
    kb * 1024
}

/// Records of the sequenced topics in the sink, as `topic → seqs in file order`.
fn seqs_by_topic(out: &Path) -> BTreeMap<String, Vec<u64>> {
    let mut by_topic: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in ndjson_lines(out) {
        let key = r["key"].as_str().expect("key");
        if key == "t/warmup" {
            continue;
        }
        let seq = r["payload"]["seq"].as_u64().expect("seq");
        by_topic.entry(key.to_owned()).or_default().push(seq);
    }
    by_topic
}

/// Distinct messages in the sink, and duplicates.
fn distinct(by_topic: &BTreeMap<String, Vec<u64>>) -> (u64, u64) {
    let (mut distinct, mut duplicates) = (0, 0);
    for seqs in by_topic.values() {
        let mut seen = vec![false; PER_TOPIC as usize];
        for &seq in seqs {
            if std::mem::replace(&mut seen[seq as usize], true) {
                duplicates += 1;
            } else {
                distinct += 1;
            }
        }
    }
    (distinct, duplicates)
}

/// Publishes on `t/warmup` until weir received one (the session's subscription is in
/// place).
fn warm_up(broker: &Mosquitto, daemon: &Daemon) {
    let mut publisher = broker.publisher("warm-up");
    let deadline = Instant::now() + Duration::from_secs(20);
    for i in 0.. {
        publisher
            .publish_all(
                1,
                [("t/warmup".to_owned(), format!("{{\"w\":{i}}}").into())],
            )
            .expect("publish a warm-up message");
        std::thread::sleep(Duration::from_millis(200));
        if field(&daemon.status(), "received").unwrap_or(0) > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "weir never received a message");
    }
}

fn backlog_after_kill_9_drains(label: &str, bin: &Path, protocol: &str) {
    let version = mosquitto_version(bin);
    let broker = Mosquitto::start(MosquittoOpts {
        max_inflight_messages: WINDOW,
        bin: Some(PathBuf::from(bin)),
        ..MosquittoOpts::default()
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let status = free_addr();
    let config = write_config(
        dir.path(),
        &config(dir.path(), status, &broker.url(), protocol),
    );
    let estimate = validate_estimate(&config);
    let out = dir.path().join("out");

    // The session and its subscription exist; then weir dies without a word.
    let daemon = Daemon::start(dir.path(), &config, status, &[]);
    warm_up(&broker, &daemon);
    daemon.kill9();

    // The broker queues the backlog for the session.
    let mut publisher = Publisher::connect(broker.addr, "backlog-publisher").expect("connect");
    let published = publisher
        .publish_all(1, sequenced(TOPICS, PER_TOPIC, PAD))
        .expect("publish the backlog");
    assert_eq!((published, publisher.acked), (N, N));
    publisher.disconnect();

    let daemon = Daemon::start(dir.path(), &config, status, &[]);
    let started = Instant::now();
    let pid = daemon.child.id();
    let rss_at_start = proc_kb(pid, "VmRSS:");
    let mut max_held = 0;
    let mut samples = 0u64;
    let (distinct_now, drained_in) = loop {
        let s = daemon.status();
        samples += 1;
        max_held = max_held.max(field(&s, "held_bytes").unwrap_or(0));
        let (distinct_now, _) = distinct(&seqs_by_topic(&out));
        if distinct_now >= N {
            break (distinct_now, started.elapsed());
        }
        if started.elapsed() > DRAIN_LIMIT {
            break (distinct_now, started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let s = daemon.status();
    let m = mqtt(&s).clone();
    assert!(
        distinct_now == N,
        "mosquitto {version}: {distinct_now} of {N} backlog messages arrived in {drained_in:?}; \
         status: {m:#}\nbroker log:\n{}",
        broker.log()
    );
    let by_topic = seqs_by_topic(&out);
    let (_, duplicates) = distinct(&by_topic);
    // Per-topic order: the first copy of each message comes in publishing order.
    for (topic, seqs) in &by_topic {
        let mut seen = vec![false; PER_TOPIC as usize];
        let firsts: Vec<u64> = seqs
            .iter()
            .copied()
            .filter(|&q| !std::mem::replace(&mut seen[q as usize], true))
            .collect();
        assert!(
            firsts.windows(2).all(|w| w[0] < w[1]),
            "{topic}: out of order"
        );
    }
    let peak_rss = proc_kb(pid, "VmHWM:");
    let limit = field(&s, "held_limit_bytes");
    let max_held = max_held.max(field(&s, "max_held_bytes").unwrap_or(0));
    eprintln!(
        "{label} broker (mosquitto {version}, MQTT {protocol}): {N} backlog messages drained in {:.2} s, \
         {duplicates} duplicates, max_unacked {}, read pauses {}, guard disconnects {}, \
         held at most {max_held} of {limit:?} bytes, RSS {} MiB at start, peak {} MiB, \
         validate estimate {} MiB ({samples} status samples)",
        drained_in.as_secs_f64(),
        m["max_unacked"],
        m["read_pauses"],
        m["guard_disconnects"],
        rss_at_start >> 20,
        peak_rss >> 20,
        estimate >> 20,
    );
    let limit = limit.expect("held_limit_bytes in /status");
    assert_eq!(
        limit,
        u64::from(WINDOW) * MAX_MESSAGE_BYTES,
        "the bound is validate's"
    );
    // At most one message past the bound: reading stops as soon as it is crossed.
    assert!(
        max_held <= limit + MAX_MESSAGE_BYTES,
        "held {max_held} bytes not yet durable, above {limit}: {m:#}"
    );
    assert!(
        peak_rss <= rss_at_start + estimate,
        "peak RSS {peak_rss} above {rss_at_start} at start + the estimate {estimate}"
    );
    assert_eq!(
        m["guard_disconnects"], 0,
        "steady progress needs no disconnect: {m:#}"
    );
    daemon.stop();
}
