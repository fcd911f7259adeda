//! `weir run` end to end with an `mqtt` source against a real Mosquitto broker that each
//! test starts on a free loopback port: QoS 1/2 acks withheld until durable (zero loss
//! under a stalled sink and across kill -9), the broker window and the guard, QoS 0
//! counted drops, MQTT 5, oversized messages.
//!
//! How a test stalls the pipeline: a required `blackhole` sink (`gate`) at 1 record/s
//! holds WAL retention, so the small WAL (256 KiB, `on_full = "block"`) fills and
//! admission blocks; the source can then ack nothing. A graceful restart with the gate
//! at full speed lets everything go; the persistent session keeps what weir had not
//! acked at the broker.

mod run_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use run_support::mosquitto::{Mosquitto, MosquittoOpts, Publisher, sequenced};
use run_support::{Daemon, free_addr, get, ndjson_lines, write_config};
use serde_json::Value;

/// The source's name in every config.
const SOURCE: &str = "mq";
/// Keepalive of the MQTT 3.1.1 tests' source: short, so "no reconnect for 3 ×
/// keepalive" is quick to observe.
const KEEPALIVE_S: u64 = 2;
/// Keepalive under MQTT 5 (rumqttc's least).
const KEEPALIVE_V5_S: u64 = 5;

/// The gate sink at 1 record/s: the WAL fills, admission blocks, no ack goes out.
const STALLED: Option<u64> = Some(1);
/// The gate sink at full speed.
const OPEN: Option<u64> = None;

/// One test's weir: its directory, status address and the broker it reads.
struct Weir {
    dir: tempfile::TempDir,
    status: SocketAddr,
    broker_url: String,
}

impl Weir {
    fn new(broker: &Mosquitto) -> Weir {
        Weir {
            dir: tempfile::tempdir().expect("temp dir"),
            status: free_addr(),
            broker_url: broker.url(),
        }
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    fn quarantine(&self) -> PathBuf {
        self.dir.path().join("quarantine")
    }

    /// Writes the config and starts weir. `source` holds the MQTT keys besides `type`,
    /// `url` and `client_id`; `gate` is the rate of the required `gate` sink
    /// ([`STALLED`]: the WAL fills and stays full; [`OPEN`]: no limit).
    fn start(&self, source: &str, gate: Option<u64>) -> Daemon {
        let gate = gate.map(|r| format!("rate = {r}")).unwrap_or_default();
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
on_full = "block"

[quarantine]
dir = "{quarantine}"

[sources.{SOURCE}]
type = "mqtt"
url = "{url}"
client_id = "weir-test"
{source}

[sinks.out]
type = "file"
inputs = ["{SOURCE}"]
path = "{out}"

[sinks.gate]
type = "blackhole"
inputs = ["{SOURCE}"]
read_batch_records = 10
{gate}
"#,
            data = self.dir.path().join("data").display(),
            status = self.status,
            quarantine = self.quarantine().display(),
            url = self.broker_url,
            out = self.out().display(),
        );
        let path = write_config(self.dir.path(), &config);
        Daemon::start(self.dir.path(), &path, self.status, &[])
    }
}

/// `/status` → `sources.mq.mqtt`.
fn mqtt(status: &Value) -> &Value {
    let m = &status["sources"][SOURCE]["mqtt"];
    assert!(m.is_object(), "no sources.{SOURCE}.mqtt in {status:#}");
    m
}

/// An unsigned field of `sources.mq.mqtt`.
fn field(status: &Value, name: &str) -> u64 {
    mqtt(status)[name]
        .as_u64()
        .unwrap_or_else(|| panic!("sources.{SOURCE}.mqtt.{name} is not a u64: {status:#}"))
}

/// The value of the `/metrics` sample `name{labels…}` (labels in any order; others
/// allowed), or `None` if there is none.
fn metric(status_addr: SocketAddr, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let (code, _, body) = get(status_addr, "/metrics").expect("GET /metrics");
    assert_eq!(code, 200);
    let text = String::from_utf8(body).expect("UTF-8 metrics");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric_name, rest) = series.split_once('{').unwrap_or((series, "}"));
            if metric_name != name {
                return None;
            }
            let set = rest.strip_suffix('}')?;
            let have: Vec<&str> = set.split(',').collect();
            let matches = labels
                .iter()
                .all(|(k, v)| have.contains(&format!("{k}=\"{v}\"").as_str()));
            if matches { value.parse().ok() } else { None }
        })
}

/// How warm-up records show in the sink's NDJSON.
const WARMUP_KEY: &str = r#""key":"t/warmup""#;

/// Complete lines of every NDJSON file under `dir`, warm-ups left out (a cheap
/// progress check).
fn sink_lines(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            let name = p.to_string_lossy();
            name.ends_with(".ndjson") || name.ends_with(".ndjson.open")
        })
        .map(|p| {
            std::fs::read_to_string(&p)
                .map(|text| {
                    text.lines()
                        .filter(|l| l.ends_with('}') && !l.contains(WARMUP_KEY))
                        .count()
                })
                .unwrap_or(0)
        })
        .sum()
}

/// Waits until the file sink holds at least `lines` lines besides warm-ups.
fn wait_for_lines(daemon: &Daemon, out: &Path, lines: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let have = sink_lines(out);
        if have >= lines {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the sink holds {have} of {lines} lines after {timeout:?}; status: {:#}\n{}",
            daemon.status(),
            daemon.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the sink holds each of `n` sequenced messages (`t/0`, `t/1`, …, by
/// topic and seq) at least once. After a restart the count of lines is no measure:
/// redeliveries and warm-ups add lines, so it can reach `n` while some messages are
/// still on their way.
fn wait_for_messages(daemon: &Daemon, out: &Path, n: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let mut distinct = std::collections::BTreeSet::new();
        let files = std::fs::read_dir(out)
            .into_iter()
            .flatten()
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| {
                let name = p.to_string_lossy();
                name.ends_with(".ndjson") || name.ends_with(".ndjson.open")
            });
        for file in files {
            // A file may be renamed (closed) between the listing and the read: the
            // next round sees it under its new name.
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            for line in text.lines() {
                let Ok(r) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                if let (Some(key), Some(seq)) = (r["key"].as_str(), r["payload"]["seq"].as_u64())
                    && key != "t/warmup"
                {
                    distinct.insert((key.to_owned(), seq));
                }
            }
        }
        if distinct.len() >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the sink holds {} of {n} messages after {timeout:?}; status: {:#}\n{}",
            distinct.len(),
            daemon.status(),
            daemon.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Publishes QoS `qos` warm-up messages on `t/warmup` until weir has received one, so
/// the subscription is in place (and, for a persistent session, the broker queues for
/// it). A warm-up published before the subscription is never delivered, so the count
/// of those delivered is not known exactly: checks leave them out.
fn warm_up(broker: &Mosquitto, daemon: &Daemon, qos: u8) {
    let mut publisher = broker.publisher("warm-up");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut published = 0;
    loop {
        publisher
            .publish_all(
                qos,
                [(
                    "t/warmup".to_owned(),
                    format!(r#"{{"warmup":{published}}}"#).into_bytes(),
                )],
            )
            .expect("publish a warm-up message");
        published += 1;
        let wait = Instant::now() + Duration::from_millis(300);
        while Instant::now() < wait {
            if field(&daemon.status(), "received") > 0 {
                publisher.disconnect();
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            Instant::now() < deadline,
            "weir never received a message; status: {:#}\n{}\nbroker log:\n{}",
            daemon.status(),
            daemon.stderr(),
            broker.log()
        );
    }
}

/// Publishes `messages` at `qos` on a new connection; returns the count once the
/// broker acknowledged them all.
fn publish(
    broker: &Mosquitto,
    qos: u8,
    messages: impl IntoIterator<Item = (String, Vec<u8>)>,
) -> u64 {
    let mut publisher = broker.publisher("test-publisher");
    let n = publisher.publish_all(qos, messages).expect("publish");
    assert_eq!(publisher.acked, n, "the broker acknowledged every message");
    publisher.disconnect();
    n
}

/// The sink's records of the sequenced topics (`t/0`, `t/1`, …; warm-ups left out):
/// per topic, the `seq` of each record in file order.
fn seqs_by_topic(records: &[Value]) -> BTreeMap<String, Vec<u64>> {
    let mut by_topic: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in records {
        let key = r["key"].as_str().expect("key");
        if key == "t/warmup" {
            continue;
        }
        assert_eq!(r["source"], SOURCE, "{r}");
        assert_eq!(r["payload"]["topic"], key, "the key is the topic: {r}");
        let seq = r["payload"]["seq"]
            .as_u64()
            .unwrap_or_else(|| panic!("seq: {r}"));
        by_topic.entry(key.to_owned()).or_default().push(seq);
    }
    by_topic
}

/// Checks that each of `topics` topics holds every seq `0..per_topic` at least once,
/// and that the first occurrences come in publishing order. Returns the number of
/// duplicates.
fn check_complete_in_order(records: &[Value], topics: usize, per_topic: u64) -> u64 {
    let by_topic = seqs_by_topic(records);
    assert_eq!(
        by_topic.len(),
        topics,
        "topics in the sink: {:?}",
        by_topic.keys()
    );
    let mut duplicates = 0;
    for (topic, seqs) in &by_topic {
        let mut seen = vec![false; per_topic as usize];
        let mut firsts = Vec::with_capacity(per_topic as usize);
        for &seq in seqs {
            assert!(seq < per_topic, "{topic}: seq {seq} was never published");
            if std::mem::replace(&mut seen[seq as usize], true) {
                duplicates += 1;
            } else {
                firsts.push(seq);
            }
        }
        let missing: Vec<usize> = (0..seen.len()).filter(|&i| !seen[i]).collect();
        assert!(
            missing.is_empty(),
            "{topic}: {} of {per_topic} messages lost, first {:?}",
            missing.len(),
            &missing[..missing.len().min(20)]
        );
        let out_of_order = firsts.windows(2).position(|w| w[0] > w[1]);
        assert!(
            out_of_order.is_none(),
            "{topic}: seq {} first arrived after seq {}",
            firsts[out_of_order.unwrap_or(0) + 1],
            firsts[out_of_order.unwrap_or(0)]
        );
    }
    duplicates
}

/// Polls `/status` for `duration`, handing each report to `check`.
fn watch(daemon: &Daemon, duration: Duration, mut check: impl FnMut(&Value)) {
    let end = Instant::now() + duration;
    while Instant::now() < end {
        check(&daemon.status());
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Peak resident set of process `pid` (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmHWM");
    kb * 1024
}

/// While the sink is stalled: unacked never above the window, no reconnect, connected,
/// for `duration`.
fn hold_stalled(daemon: &Daemon, window: u64, duration: Duration) {
    let mut samples = 0;
    watch(daemon, duration, |s| {
        samples += 1;
        let m = mqtt(s);
        assert!(
            field(s, "unacked") <= window,
            "unacked above the window: {m:#}"
        );
        assert_eq!(
            field(s, "reconnects"),
            0,
            "reconnected while acks were withheld: {m:#}"
        );
        assert_eq!(m["connected"], true, "{m:#}");
        assert_eq!(field(s, "guard_disconnects"), 0, "{m:#}");
    });
    assert!(samples >= 20, "only {samples} status samples");
    let s = daemon.status();
    assert_eq!(
        field(&s, "unacked"),
        window,
        "still stalled with a full window: {:#}",
        mqtt(&s)
    );
    assert!(field(&s, "max_unacked") <= window, "{:#}", mqtt(&s));
}

#[test]
fn qos1_zero_loss_under_a_stalled_sink() {
    const TOPICS: usize = 4;
    const PER_TOPIC: u64 = 12_500;
    const N: u64 = TOPICS as u64 * PER_TOPIC;
    const WINDOW: u64 = 20;
    let broker = Mosquitto::start(MosquittoOpts {
        max_inflight_messages: WINDOW as u32,
        ..MosquittoOpts::default()
    });
    let weir = Weir::new(&broker);
    let source = format!(
        r#"topics = ["t/#"]
qos = 1
keepalive = "{KEEPALIVE_S}s"
max_message_bytes = "16 KiB"
expected_broker_window = {WINDOW}"#
    );
    let daemon = weir.start(&source, STALLED);
    warm_up(&broker, &daemon, 1);

    // Publish everything (the broker acknowledges it all: it queues what weir cannot
    // take) while watching the window.
    let publisher = {
        let addr = broker.addr;
        std::thread::spawn(move || {
            let mut p = Publisher::connect(addr, "test-publisher").expect("connect");
            let n = p
                .publish_all(1, sequenced(TOPICS, PER_TOPIC, 0))
                .expect("publish");
            assert_eq!(p.acked, n);
            p.disconnect();
            n
        })
    };
    while !publisher.is_finished() {
        let s = daemon.status();
        assert!(field(&s, "unacked") <= WINDOW, "{:#}", mqtt(&s));
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(publisher.join().expect("publisher"), N);
    daemon.wait_for("the window to fill", Duration::from_secs(20), |s| {
        field(s, "unacked") == WINDOW
    });
    // At least 3 × keepalive with acks withheld: the connection holds.
    hold_stalled(&daemon, WINDOW, Duration::from_millis(3500 * KEEPALIVE_S));
    let stalled_lines = sink_lines(&weir.out());
    assert!(
        (stalled_lines as u64) < N / 4,
        "the sink was not stalled: {stalled_lines} lines"
    );
    assert!(
        daemon.status()["wal"]["budget_used"]
            .as_f64()
            .expect("budget_used")
            > 0.5,
        "the WAL is what stalls the source"
    );

    // Let it go: restart with the gate at full speed.
    daemon.stop();
    let daemon = weir.start(&source, OPEN);
    wait_for_messages(&daemon, &weir.out(), N as usize, Duration::from_secs(120));
    let s = daemon.wait_for("every ack sent", Duration::from_secs(10), |s| {
        field(s, "unacked") == 0
    });
    assert!(field(&s, "max_unacked") <= WINDOW, "{:#}", mqtt(&s));
    assert_eq!(field(&s, "reconnects"), 0, "{:#}", mqtt(&s));

    let records = ndjson_lines(&weir.out());
    for r in &records {
        assert_eq!(r["attributes"]["mqtt.qos"], "1", "{r}");
        assert_eq!(r["attributes"]["mqtt.retain"], "false", "{r}");
    }
    let duplicates = check_complete_in_order(&records, TOPICS, PER_TOPIC);
    // A graceful stop may leave at most one window durable but not yet acked; the
    // broker redelivers it (at-least-once), unless deduplicated.
    assert!(duplicates <= WINDOW, "{duplicates} duplicates");
    daemon.stop();
}

#[test]
fn kill_9_mid_stream_loses_nothing_the_broker_saw_acked() {
    kill_9_mid_stream(20);
}

/// With the broker's window at 1000, messages keep arriving while a unit is fsynced, so
/// several units are on their way to the WAL at once (appended in arrival order): a
/// kill -9 among them still loses nothing acked and keeps per-topic order.
#[test]
fn kill_9_with_several_units_in_flight_loses_nothing_and_keeps_order() {
    let s = kill_9_mid_stream(1000);
    assert!(
        field(&s, "max_units_in_flight") >= 2,
        "several units were on their way at once: {s:#}"
    );
}

/// Publishes 2 × 10,000 QoS 1 messages, kills weir with SIGKILL once a fifth is acked,
/// restarts it, and checks every message arrived in order per topic. Returns the
/// status seen just before the kill.
fn kill_9_mid_stream(window: u32) -> Value {
    const TOPICS: usize = 2;
    const PER_TOPIC: u64 = 10_000;
    const N: u64 = TOPICS as u64 * PER_TOPIC;
    let broker = Mosquitto::start(MosquittoOpts {
        max_inflight_messages: window,
        ..MosquittoOpts::default()
    });
    let weir = Weir::new(&broker);
    let source = format!(
        r#"topics = ["t/#"]
qos = 1
keepalive = "{KEEPALIVE_S}s"
max_message_bytes = "16 KiB"
expected_broker_window = {window}"#
    );
    let daemon = weir.start(&source, OPEN);
    warm_up(&broker, &daemon, 1);

    let publisher = {
        let addr = broker.addr;
        std::thread::spawn(move || {
            let mut p = Publisher::connect(addr, "test-publisher").expect("connect");
            let n = p
                .publish_all(1, sequenced(TOPICS, PER_TOPIC, 64))
                .expect("publish");
            assert_eq!(p.acked, n);
            p.disconnect();
            n
        })
    };
    let s = daemon.wait_for("a fifth acked", Duration::from_secs(60), |s| {
        field(s, "acked") >= N / 5
    });
    daemon.kill9();
    let acked_before = field(&s, "acked");
    assert!(
        acked_before < N,
        "weir took everything before the kill: not mid-stream"
    );
    assert_eq!(publisher.join().expect("publisher"), N);
    assert!(
        (sink_lines(&weir.out()) as u64) < N,
        "not mid-stream: the sink already holds everything"
    );

    // What weir acked is durable; what it had not acked the broker redelivers.
    let daemon = weir.start(&source, OPEN);
    wait_for_messages(&daemon, &weir.out(), N as usize, Duration::from_secs(120));
    daemon.wait_for("every ack sent", Duration::from_secs(10), |s| {
        field(s, "unacked") == 0
    });
    let records = ndjson_lines(&weir.out());
    let duplicates = check_complete_in_order(&records, TOPICS, PER_TOPIC);
    eprintln!("{duplicates} duplicates after kill -9 (at-least-once)");
    daemon.stop();
    s
}

#[test]
fn qos0_flood_drops_are_counted_exactly_and_memory_stays_bounded() {
    // One topic, one publisher: the broker forwards in publishing order, so a gap in
    // `seq` is exactly the drops the next record reports.
    const FLOOD: u64 = 60_000;
    const PAD: usize = 1000;
    const QUEUE: u64 = 64 * 1024;
    let broker = Mosquitto::start(MosquittoOpts::default());
    let weir = Weir::new(&broker);
    let source = format!(
        r#"topics = [{{ filter = "t/#", qos = 0 }}]
keepalive = "{KEEPALIVE_S}s"
max_message_bytes = "16 KiB"
qos0_queue_bytes = "{QUEUE} B""#
    );
    // The gate drains 2000 records/s: far slower than the flood arrives, so the WAL
    // fills, the queue fills and the newest messages are dropped; then it catches up.
    let daemon = weir.start(&source, Some(2000));
    let msg = |seq: u64| {
        (
            "t/0".to_owned(),
            format!(
                r#"{{"topic":"t/0","seq":{seq},"pad":"{}"}}"#,
                "p".repeat(PAD)
            )
            .into_bytes(),
        )
    };
    // Warm up on the sequenced topic itself. A message published before the subscription
    // is never delivered to weir (not a drop), so the count starts after the warm-up.
    let mut publisher = broker.publisher("test-publisher");
    let mut next = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while field(&daemon.status(), "received") == 0 {
        assert!(
            Instant::now() < deadline,
            "never subscribed: {:#}",
            daemon.status()
        );
        publisher.publish_all(1, [msg(next)]).expect("publish");
        next += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    let received_before = field(&daemon.status(), "received");
    assert_eq!(
        received_before,
        field(&daemon.status(), "received"),
        "warm-up still arriving"
    );
    let first = next;

    // The flood: the broker takes it all (the publisher's QoS 1 acks say so) and
    // forwards it at QoS 0, faster than the WAL takes it.
    publisher
        .publish_all(1, (first..first + FLOOD).map(msg))
        .expect("publish the flood");
    let s = daemon.wait_for(
        "every flood message received and the queue drained",
        Duration::from_secs(60),
        |s| field(s, "received") >= received_before + FLOOD && field(s, "qos0_queue_bytes") == 0,
    );
    let rss = peak_rss(daemon.child.id());
    assert_eq!(
        field(&s, "received"),
        received_before + FLOOD,
        "the broker delivered every message once: {:#}",
        mqtt(&s)
    );
    assert!(
        field(&s, "qos0_dropped") > 0,
        "the flood caused no drop: {:#}",
        mqtt(&s)
    );
    assert!(field(&s, "qos0_queue_max_bytes") <= QUEUE, "{:#}", mqtt(&s));
    // One more message after the flood carries the gap of the last drops.
    let last = first + FLOOD;
    publisher
        .publish_all(1, [msg(last)])
        .expect("publish the last");
    publisher.disconnect();
    let published = last + 1 - first;

    let deadline = Instant::now() + Duration::from_secs(30);
    let records = loop {
        let records: Vec<Value> = ndjson_lines(&weir.out());
        if records.iter().any(|r| r["payload"]["seq"] == last) {
            break records;
        }
        assert!(
            Instant::now() < deadline,
            "the last message never arrived: {:#}",
            daemon.status()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let s = daemon.status();
    let dropped = field(&s, "qos0_dropped");
    let flood: Vec<&Value> = records
        .iter()
        .filter(|r| r["payload"]["seq"].as_u64().expect("seq") >= first)
        .collect();
    assert_eq!(
        flood.len() as u64 + dropped,
        published,
        "published = delivered + counted drops ({:#})",
        mqtt(&s)
    );
    assert_eq!(
        metric(
            daemon.status_addr,
            "weir_source_dropped_total",
            &[("source", SOURCE), ("reason", "qos0_queue_full")]
        ),
        Some(dropped as f64),
        "the metric counts the same drops"
    );

    // Each gap in seq is announced on the record after it, with its exact size.
    let mut prev = first - 1;
    let mut announced = 0;
    for r in flood {
        let seq = r["payload"]["seq"].as_u64().expect("seq");
        assert!(seq > prev, "QoS 0 out of order or duplicated at {r}");
        let gap = seq - prev - 1;
        let attrs = &r["attributes"];
        assert_eq!(attrs["mqtt.qos"], "0", "{attrs}");
        if gap > 0 {
            assert_eq!(
                attrs["mqtt.gap"], "true",
                "{gap} dropped before seq {seq}: {attrs}"
            );
            assert_eq!(
                attrs["mqtt.gap_dropped"],
                gap.to_string(),
                "before seq {seq}: {attrs}"
            );
            announced += gap;
        } else {
            assert!(
                attrs.get("mqtt.gap").is_none(),
                "no gap before seq {seq}: {attrs}"
            );
            assert!(attrs.get("mqtt.gap_dropped").is_none(), "{attrs}");
        }
        prev = seq;
    }
    assert_eq!(prev, last);
    assert_eq!(
        announced, dropped,
        "the gap attributes add up to the counted drops"
    );

    // Memory: the flood (60 MB) went through without weir holding it.
    eprintln!(
        "peak RSS {} MiB during a {} MiB QoS 0 flood",
        rss >> 20,
        (FLOOD * PAD as u64) >> 20
    );
    assert!(
        rss < 64 << 20,
        "peak RSS {} MiB: more than 64 MiB for a source bounded to a 64 KiB QoS 0 queue",
        rss >> 20
    );
    daemon.stop();
}

#[test]
fn qos2_end_to_end_exactly_once() {
    const TOPICS: usize = 2;
    const PER_TOPIC: u64 = 1000;
    let broker = Mosquitto::start(MosquittoOpts::default());
    let weir = Weir::new(&broker);
    let source = format!(
        r#"topics = [{{ filter = "t/#", qos = 2 }}]
keepalive = "{KEEPALIVE_S}s"
max_message_bytes = "16 KiB""#
    );
    let daemon = weir.start(&source, OPEN);
    warm_up(&broker, &daemon, 2);
    let n = publish(&broker, 2, sequenced(TOPICS, PER_TOPIC, 16));
    wait_for_lines(&daemon, &weir.out(), n as usize, Duration::from_secs(60));
    let s = daemon.wait_for("every QoS 2 exchange done", Duration::from_secs(10), |s| {
        field(s, "unacked") == 0
    });
    let records = ndjson_lines(&weir.out());
    assert_eq!(
        check_complete_in_order(&records, TOPICS, PER_TOPIC),
        0,
        "exactly once"
    );
    for r in &records {
        assert_eq!(r["attributes"]["mqtt.qos"], "2", "{r}");
    }
    assert_eq!(field(&s, "reconnects"), 0, "{:#}", mqtt(&s));
    assert!(field(&s, "received") > n, "{:#}", mqtt(&s));
    daemon.stop();
}

#[test]
fn mqtt5_receive_maximum_bounds_the_window_below_the_brokers() {
    const WINDOW: u64 = 10;
    const TOPICS: usize = 2;
    const PER_TOPIC: u64 = 1000;
    // The broker would send 100 at once; MQTT 5's receive maximum says 10.
    let broker = Mosquitto::start(MosquittoOpts {
        max_inflight_messages: 100,
        ..MosquittoOpts::default()
    });
    let weir = Weir::new(&broker);
    let source = format!(
        r#"protocol = "5"
topics = ["t/#"]
qos = 1
keepalive = "{KEEPALIVE_V5_S}s"
max_message_bytes = "16 KiB"
expected_broker_window = {WINDOW}"#
    );
    let daemon = weir.start(&source, STALLED);
    warm_up(&broker, &daemon, 1);
    // 2000 × 300 B: more than the 256 KiB WAL holds.
    let n = publish(&broker, 1, sequenced(TOPICS, PER_TOPIC, 250));
    daemon.wait_for("the window to fill", Duration::from_secs(20), |s| {
        field(s, "unacked") == WINDOW
    });
    hold_stalled(&daemon, WINDOW, Duration::from_secs(2));

    daemon.stop();
    let daemon = weir.start(&source, OPEN);
    wait_for_messages(&daemon, &weir.out(), n as usize, Duration::from_secs(60));
    let records = ndjson_lines(&weir.out());
    let duplicates = check_complete_in_order(&records, TOPICS, PER_TOPIC);
    assert!(duplicates <= WINDOW, "{duplicates} duplicates");
    let s = daemon.status();
    assert!(field(&s, "max_unacked") <= WINDOW, "{:#}", mqtt(&s));
    daemon.stop();
}

#[test]
fn mqtt5_user_properties_and_retain_become_attributes() {
    let broker = Mosquitto::start(MosquittoOpts::default());
    // Retained before weir subscribes: delivered with the retain flag.
    broker.mosquitto_pub(&["-q", "1", "-r", "-t", "t/retained", "-m", "kept"]);
    let weir = Weir::new(&broker);
    let source = format!(
        r#"protocol = "5"
topics = ["t/#"]
qos = 1
keepalive = "{KEEPALIVE_V5_S}s"
max_message_bytes = "16 KiB""#
    );
    let daemon = weir.start(&source, OPEN);
    warm_up(&broker, &daemon, 1);
    broker.mosquitto_pub(&[
        "-V",
        "mqttv5",
        "-q",
        "1",
        "-t",
        "t/props",
        "-m",
        r#"{"reading":21.5}"#,
        "-D",
        "publish",
        "user-property",
        "unit",
        "celsius",
        "-D",
        "publish",
        "user-property",
        "site",
        "north-3",
    ]);
    wait_for_lines(&daemon, &weir.out(), 2, Duration::from_secs(20));
    let records = ndjson_lines(&weir.out());
    let props = records
        .iter()
        .find(|r| r["key"] == "t/props")
        .expect("the t/props record");
    assert_eq!(props["payload"]["reading"], 21.5, "{props}");
    let attrs = &props["attributes"];
    assert_eq!(attrs["mqtt.user.unit"], "celsius", "{attrs}");
    assert_eq!(attrs["mqtt.user.site"], "north-3", "{attrs}");
    assert_eq!(attrs["mqtt.qos"], "1", "{attrs}");
    assert_eq!(attrs["mqtt.retain"], "false", "{attrs}");
    let retained = records
        .iter()
        .find(|r| r["key"] == "t/retained")
        .expect("the retained record");
    assert_eq!(retained["payload"], "kept");
    assert_eq!(retained["attributes"]["mqtt.retain"], "true", "{retained}");
    assert!(
        retained["attributes"]
            .as_object()
            .expect("attributes")
            .keys()
            .all(|k| !k.starts_with("mqtt.user.")),
        "{retained}"
    );
    daemon.stop();
}

/// MQTT keys of a source that expects a window of 5 (the guard at 10) from a broker
/// whose window is 100.
fn misconfigured() -> String {
    format!(
        r#"topics = ["t/#"]
qos = 1
keepalive = "{KEEPALIVE_S}s"
max_message_bytes = "16 KiB"
expected_broker_window = 5
unacked_guard_multiple = 2"#
    )
}

/// A broker sending beyond the guard's count: reading pauses (TCP backpressure)
/// until the WAL makes room, so everything flows without a disconnect and weir never
/// holds more than one message past its bounds.
#[test]
fn a_broker_window_above_the_guard_pauses_reading_and_everything_flows() {
    const TOPICS: usize = 2;
    const PER_TOPIC: u64 = 500;
    let broker = Mosquitto::start(MosquittoOpts {
        max_inflight_messages: 100,
        ..MosquittoOpts::default()
    });
    let weir = Weir::new(&broker);
    let daemon = weir.start(&misconfigured(), OPEN);
    warm_up(&broker, &daemon, 1);
    let n = publish(&broker, 1, sequenced(TOPICS, PER_TOPIC, 0));
    wait_for_lines(&daemon, &weir.out(), n as usize, Duration::from_secs(60));
    let s = daemon.wait_for("every ack sent", Duration::from_secs(10), |s| {
        field(s, "unacked") == 0
    });
    let m = mqtt(&s);
    assert!(field(&s, "read_pauses") >= 1, "{m:#}");
    assert_eq!(field(&s, "guard_disconnects"), 0, "{m:#}");
    assert_eq!(field(&s, "reconnects"), 0, "{m:#}");
    assert!(
        field(&s, "max_unacked") <= 10 + 1,
        "one past the guard at most: {m:#}"
    );
    assert_eq!(field(&s, "held_limit_bytes"), 5 * 16 * 1024, "{m:#}");
    let records = ndjson_lines(&weir.out());
    assert_eq!(check_complete_in_order(&records, TOPICS, PER_TOPIC), 0);
    daemon.stop();
}

/// Reading paused behind a stalled WAL for a keepalive: pings cannot go out, so the
/// guard drops the connection (counted) instead of letting the broker time it out;
/// nothing is lost.
#[test]
fn the_guard_disconnects_when_reading_stays_paused_for_a_keepalive_and_nothing_is_lost() {
    const TOPICS: usize = 2;
    const PER_TOPIC: u64 = 500;
    let broker = Mosquitto::start(MosquittoOpts {
        max_inflight_messages: 100,
        ..MosquittoOpts::default()
    });
    let weir = Weir::new(&broker);
    let mut daemon = weir.start(&misconfigured(), STALLED);
    warm_up(&broker, &daemon, 1);
    // 1 MB, four times the WAL: it fills and stays full.
    let n = publish(&broker, 1, sequenced(TOPICS, PER_TOPIC, 1000));
    let s = daemon.wait_for("a guard disconnect", Duration::from_secs(30), |s| {
        field(s, "guard_disconnects") >= 1
    });
    assert_eq!(field(&s, "guard_limit"), 10, "{:#}", mqtt(&s));
    assert!(
        field(&s, "max_held_bytes") <= field(&s, "held_limit_bytes") + 16 * 1024,
        "held no more than one message past the bound: {:#}",
        mqtt(&s)
    );
    let counted = metric(
        daemon.status_addr,
        "weir_mqtt_disconnects_total",
        &[("source", SOURCE), ("reason", "unacked_guard")],
    )
    .expect("weir_mqtt_disconnects_total{reason=\"unacked_guard\"}");
    assert!(counted >= 1.0, "{counted}");
    // No hang: the daemon keeps answering, and the guard keeps acting.
    let started = Instant::now();
    watch(&daemon, Duration::from_secs(2), |_| {});
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "/status answered slowly"
    );
    assert!(
        daemon.child.try_wait().expect("try_wait").is_none(),
        "weir exited"
    );

    // Corrected config (the broker's real window) and the gate at full speed.
    daemon.stop();
    let fixed = format!(
        r#"topics = ["t/#"]
qos = 1
keepalive = "{KEEPALIVE_S}s"
max_message_bytes = "16 KiB"
expected_broker_window = 100"#
    );
    let daemon = weir.start(&fixed, OPEN);
    wait_for_messages(&daemon, &weir.out(), n as usize, Duration::from_secs(60));
    let records = ndjson_lines(&weir.out());
    let duplicates = check_complete_in_order(&records, TOPICS, PER_TOPIC);
    eprintln!("{duplicates} duplicates after guard disconnects (at-least-once)");
    let s = daemon.status();
    assert_eq!(field(&s, "guard_disconnects"), 0, "{:#}", mqtt(&s));
    daemon.stop();
}

#[test]
fn an_oversized_message_is_acked_and_quarantined_and_the_rest_flows() {
    let broker = Mosquitto::start(MosquittoOpts::default());
    let weir = Weir::new(&broker);
    let source = format!(
        r#"topics = ["t/#"]
qos = 1
keepalive = "{KEEPALIVE_S}s"
max_message_bytes = "1 KiB""#
    );
    let daemon = weir.start(&source, OPEN);
    warm_up(&broker, &daemon, 1);
    let msg = |seq: u64, pad: usize| {
        (
            "t/0".to_owned(),
            format!(
                r#"{{"topic":"t/0","seq":{seq},"pad":"{}"}}"#,
                "p".repeat(pad)
            )
            .into_bytes(),
        )
    };
    // Above max_message_bytes (1 KiB), within the client's packet limit (which leaves
    // room for the topic; a packet above that breaks the connection and is redelivered,
    // see client::packet_limit).
    let big = msg(50, 1500);
    let messages: Vec<_> = (0..50)
        .map(|i| msg(i, 10))
        .chain([big.clone()])
        .chain((51..101).map(|i| msg(i, 10)))
        .collect();
    let n = publish(&broker, 1, messages);
    assert_eq!(n, 101);
    wait_for_lines(&daemon, &weir.out(), 100, Duration::from_secs(20));
    let s = daemon.wait_for("every message acked", Duration::from_secs(10), |s| {
        field(s, "unacked") == 0 && field(s, "acked") > n
    });
    assert_eq!(field(&s, "oversized"), 1, "{:#}", mqtt(&s));
    assert_eq!(
        field(&s, "reconnects"),
        0,
        "the window did not wedge: {:#}",
        mqtt(&s)
    );
    let records = ndjson_lines(&weir.out());
    let seqs = &seqs_by_topic(&records)["t/0"];
    let expected: Vec<u64> = (0..50).chain(51..101).collect();
    assert_eq!(seqs, &expected);

    // The quarantine holds the oversized message under the source's name, with a reason.
    let files = files_under(&weir.quarantine());
    let entry = files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .expect("quarantine file")
                .lines()
                .map(|l| {
                    (
                        f.clone(),
                        serde_json::from_str::<Value>(l).expect("quarantine JSON"),
                    )
                })
                .collect::<Vec<_>>()
        })
        .find(|(_, e)| {
            e["payload_base64"]
                .as_str()
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .is_some_and(|p| p == big.1)
        });
    let (file, entry) = entry
        .unwrap_or_else(|| panic!("no quarantine entry for the oversized message in {files:?}"));
    assert!(
        file.starts_with(weir.quarantine().join(SOURCE)),
        "quarantined under {}, not under the source's name",
        file.display()
    );
    assert!(
        entry["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{entry}"
    );
    let log = daemon.stderr();
    assert!(
        log.lines().any(|l| l.contains(" WARN ")
            && l.contains(&format!("source {SOURCE}: 1 record quarantined in "))),
        "the quarantined message is logged: {log}"
    );
    daemon.stop();
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries {
        let path = e.expect("dir entry").path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_burst_larger_than_max_pending_bytes_is_appended_in_pieces() {
    // The broker sends up to 1000 messages of 1 KiB at once; the source appends what
    // arrived while the previous append was made durable (up to 1 MiB), more than the
    // WAL's channel admits at once (wal.max_pending_bytes = 64 KiB).
    const TOPICS: usize = 2;
    const PER_TOPIC: u64 = 2500;
    let broker = Mosquitto::start(MosquittoOpts {
        max_inflight_messages: 1000,
        ..MosquittoOpts::default()
    });
    let weir = Weir::new(&broker);
    let source = format!(
        r#"topics = ["t/#"]
qos = 1
keepalive = "{KEEPALIVE_S}s"
max_message_bytes = "16 KiB"
expected_broker_window = 1000"#
    );
    let daemon = weir.start(&source, OPEN);
    warm_up(&broker, &daemon, 1);
    let n = publish(&broker, 1, sequenced(TOPICS, PER_TOPIC, 1000));
    wait_for_lines(&daemon, &weir.out(), n as usize, Duration::from_secs(60));
    let s = daemon.wait_for("every ack sent", Duration::from_secs(10), |s| {
        field(s, "unacked") == 0
    });
    assert_ne!(s["components"][0]["state"], "failed", "{s:#}");
    // Not failed, and running once the last admission wait is over: the state follows
    // the waits every 100 ms, so it may still say backpressured just after the last
    // ack.
    daemon.wait_for("the source running", Duration::from_secs(2), |s| {
        s["components"][0]["state"] == "running"
    });
    let records = ndjson_lines(&weir.out());
    assert_eq!(check_complete_in_order(&records, TOPICS, PER_TOPIC), 0);
    daemon.stop();
}

#[test]
fn a_message_whose_record_exceeds_max_pending_bytes_is_quarantined_not_wedging() {
    let broker = Mosquitto::start(MosquittoOpts::default());
    let weir = Weir::new(&broker);
    // The payload is within max_message_bytes (60 KiB ≤ max_pending_bytes 64 KiB), but
    // with an 8 KB topic its record does not fit one admission.
    let source = format!(
        r#"topics = ["t/#"]
qos = 1
keepalive = "{KEEPALIVE_S}s"
max_message_bytes = "60 KiB""#
    );
    let daemon = weir.start(&source, OPEN);
    warm_up(&broker, &daemon, 1);
    let long_topic = format!("t/{}", "l".repeat(8000));
    let small = |seq: u64| {
        (
            "t/0".to_owned(),
            format!(r#"{{"topic":"t/0","seq":{seq}}}"#).into_bytes(),
        )
    };
    let messages: Vec<_> = (0..10)
        .map(small)
        .chain([(long_topic, vec![b'x'; 60_000])])
        .chain((10..20).map(small))
        .collect();
    assert_eq!(publish(&broker, 1, messages), 21);
    wait_for_lines(&daemon, &weir.out(), 20, Duration::from_secs(20));
    let s = daemon.wait_for("every message acked", Duration::from_secs(10), |s| {
        field(s, "unacked") == 0
    });
    assert_eq!(s["sources"][SOURCE]["type"], "mqtt", "{s:#}");
    assert_ne!(
        s["components"]
            .as_array()
            .expect("components")
            .iter()
            .find(|c| c["name"] == SOURCE)
            .expect("the source")["state"],
        "failed",
        "{s:#}"
    );
    assert_eq!(field(&s, "reconnects"), 0, "{:#}", mqtt(&s));
    let records = ndjson_lines(&weir.out());
    assert_eq!(
        seqs_by_topic(&records)["t/0"],
        (0..20).collect::<Vec<u64>>()
    );
    let quarantined: usize = files_under(&weir.quarantine())
        .iter()
        .map(|f| {
            std::fs::read_to_string(f)
                .expect("quarantine file")
                .lines()
                .filter(|l| l.contains("max_pending_bytes"))
                .count()
        })
        .sum();
    assert_eq!(
        quarantined, 1,
        "the big record is quarantined with its reason"
    );
    daemon.stop();
}
