//! Kafka → weir (kafka source → WAL, fsynced → blackhole) next to a bare librdkafka
//! consumer of the same client that commits at once and keeps nothing, in the same run
//! on the same broker; then seed 001's experiment on the real source: a slow sink, with
//! and without pause/resume. Not a test; `scripts/bench-kafka.sh` runs it in release.
//!
//! `cargo bench -p weir --bench kafka` starts its own tansu broker (`$WEIR_TANSU`,
//! in-memory storage) on a free loopback port.
//!
//! **Throughput**, for 100 B and 1 KiB records: produces `WEIR_BENCH_N` records
//! (default 200,000) over 4 partitions of a fresh topic, then times each consumer alone
//! from its start until it has everything:
//! - the bare consumer (a child process: this binary re-run with `WEIR_KAFKA_BARE=1`):
//!   a `BaseConsumer` in its own group that counts each record and commits its position
//!   asynchronously every 1024 records;
//! - `weir run`, until `/status` `sources.kf.kafka.durable` reaches N (less the
//!   records tansu 0.6.0 skipped when a fetch resumed inside a record batch after a
//!   pause, which weir counts as gaps and the table shows).
//!
//! Both fetch at most 1 MiB at a time with a 1 MiB prefetch queue. Printed: records/s,
//! MB/s of payload, the ratio weir / bare, CPU per record and peak RSS of each.
//!
//! **Slow sink** (seed 001: a downstream of 870 records/s): `WEIR_BENCH_SLOW_N` records
//! of 1 KiB (default 30,000) into a 4 MiB WAL (`block`) read by a blackhole at 870
//! records/s, once with the watermarks at 2 MiB / 512 KiB (about 2,000 records, seed
//! 001's bound) and once with them above all the data (1 GiB: never paused, the
//! unbounded buffering of seed 001's first run). Printed: `/status`'s fetch-to-durable
//! p50 / p99 / max, the most bytes held (sampled every 20 ms), pauses, rebalances and
//! peak RSS.

#[path = "../tests/run_support/mod.rs"]
mod run_support;

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{ClientConfig, Message};
use run_support::kafka::{Tansu, tansu_bin};
use run_support::process::{
    Figures, cpu_secs, markdown, md_header, md_row, peak_rss, report, run_child, say,
};
use run_support::{Daemon, free_addr, write_config};
use serde_json::Value;

const PARTITIONS: i32 = 4;
const SLOW_RATE: u64 = 870;

fn main() {
    if std::env::var_os("WEIR_KAFKA_BARE").is_some() {
        bare();
        return;
    }
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let n = env("WEIR_BENCH_N", 200_000);
    let slow_n = env("WEIR_BENCH_SLOW_N", 30_000);
    let bin = tansu_bin().expect("WEIR_TANSU: run through scripts/bench-kafka.sh");
    let broker = Tansu::start(bin);
    say(&format!(
        "tansu 0.6.0 (in-memory) → consumer, {n} records per case over {PARTITIONS} partitions; figures are noisy (a shared 2-core machine)"
    ));
    md_header(&[
        "records",
        "weir rec/s",
        "bare rec/s",
        "weir / bare",
        "weir µs CPU/rec",
        "bare µs CPU/rec",
        "weir RSS",
        "bare RSS",
    ]);
    say(&format!(
        "{:<6} {:>11} {:>9} {:>11} {:>9} {:>6} {:>11} {:>11} {:>9} {:>9}",
        "size",
        "weir rec/s",
        "weir MB/s",
        "bare rec/s",
        "bare MB/s",
        "ratio",
        "weir µs/rec",
        "bare µs/rec",
        "weir RSS",
        "bare RSS"
    ));
    for size in [100usize, 1024] {
        let topic = format!("b{size}");
        broker.create_topic(&topic, PARTITIONS as u32);
        broker.produce(&topic, PARTITIONS, n / PARTITIONS as u64, size);
        let total = n / PARTITIONS as u64 * PARTITIONS as u64;
        let bare = run_bare(&broker.brokers(), &topic, total);
        let weir = run_weir(&broker.brokers(), &topic, total, &Case::fast());
        let mb = |secs: f64| (total as f64 * size as f64) / secs / 1e6;
        let rate = |secs: f64| total as f64 / secs;
        let cpu = |c: f64| c / total as f64 * 1e6;
        let label = if size == 100 { "100 B" } else { "1 KiB" };
        say(&format!(
            "{:<6} {:>11.0} {:>9.1} {:>11.0} {:>9.1} {:>6.2} {:>11.2} {:>11.2} {:>5} MiB {:>5} MiB",
            label,
            rate(weir.f.secs),
            mb(weir.f.secs),
            rate(bare.f.secs),
            mb(bare.f.secs),
            rate(weir.f.secs) / rate(bare.f.secs),
            cpu(weir.f.cpu_secs),
            cpu(bare.f.cpu_secs),
            weir.f.peak_rss >> 20,
            bare.f.peak_rss >> 20,
        ));
        md_row(&[
            label.to_owned(),
            format!("{:.0}", rate(weir.f.secs)),
            format!("{:.0}", rate(bare.f.secs)),
            format!("{:.2}", rate(weir.f.secs) / rate(bare.f.secs)),
            format!("{:.1}", cpu(weir.f.cpu_secs)),
            format!("{:.1}", cpu(bare.f.cpu_secs)),
            format!("{} MiB", weir.f.peak_rss >> 20),
            format!("{} MiB", bare.f.peak_rss >> 20),
        ]);
    }

    let slow = format!(
        "slow sink (seed 001): {slow_n} records of 1 KiB, 4 MiB WAL (block), a blackhole at {SLOW_RATE} records/s"
    );
    say(&format!("\n{slow}"));
    if markdown() {
        println!("\nThe {slow}:\n");
    }
    md_header(&[
        "watermarks",
        "fetch → durable p50",
        "p99",
        "most bytes held",
        "pauses",
        "rebalances",
        "RSS",
        "gap records",
    ]);
    say(&format!(
        "{:<28} {:>9} {:>9} {:>9} {:>11} {:>7} {:>10} {:>9} {:>7} {:>9}",
        "watermarks",
        "p50 ms",
        "p99 ms",
        "max ms",
        "held max",
        "pauses",
        "rebalances",
        "RSS",
        "secs",
        "gap recs"
    ));
    for (label, case) in [
        ("2 MiB / 512 KiB (paused)", Case::slow("2 MiB", "512 KiB")),
        ("1 GiB (never paused)", Case::slow("1 GiB", "256 MiB")),
    ] {
        let topic = format!("slow{}", case.high.replace(' ', ""));
        broker.create_topic(&topic, PARTITIONS as u32);
        broker.produce(&topic, PARTITIONS, slow_n / PARTITIONS as u64, 1024);
        let total = slow_n / PARTITIONS as u64 * PARTITIONS as u64;
        let r = run_weir(&broker.brokers(), &topic, total, &case);
        let l = &r.kafka["fetch_to_durable"];
        let f = |k: &str| l[k].as_u64().unwrap_or(0);
        say(&format!(
            "{label:<28} {:>9} {:>9} {:>9} {:>7} KiB {:>7} {:>10} {:>5} MiB {:>7.1} {:>9}",
            f("p50_ms"),
            f("p99_ms"),
            f("max_ms"),
            r.held_max >> 10,
            r.kafka["pauses"].as_u64().unwrap_or(0),
            r.kafka["rebalances"].as_u64().unwrap_or(0),
            r.f.peak_rss >> 20,
            r.f.secs,
            r.kafka["gap_offsets"].as_u64().unwrap_or(0),
        ));
        md_row(&[
            label.to_owned(),
            format!("{} ms", f("p50_ms")),
            format!("{} ms", f("p99_ms")),
            format!("{} KiB", r.held_max >> 10),
            r.kafka["pauses"].as_u64().unwrap_or(0).to_string(),
            r.kafka["rebalances"].as_u64().unwrap_or(0).to_string(),
            format!("{} MiB", r.f.peak_rss >> 20),
            r.kafka["gap_offsets"].as_u64().unwrap_or(0).to_string(),
        ]);
    }
}

struct Run {
    /// Elapsed, CPU and peak RSS.
    f: Figures,
    /// The most bytes held, as sampled.
    held_max: u64,
    /// `/status` `sources.kf.kafka` at the end.
    kafka: Value,
}

/// The bare consumer in a child process.
fn run_bare(brokers: &str, topic: &str, n: u64) -> Run {
    let f = run_child(&[
        ("WEIR_KAFKA_BARE", "1".to_owned()),
        ("BARE_BROKERS", brokers.to_owned()),
        ("BARE_TOPIC", topic.to_owned()),
        ("BARE_N", n.to_string()),
    ]);
    Run {
        f,
        held_max: 0,
        kafka: Value::Null,
    }
}

/// librdkafka's consumer with weir's fetch limits, counting records and committing its
/// position asynchronously every 1024 records (no WAL, nothing kept).
fn bare() {
    let brokers = std::env::var("BARE_BROKERS").expect("BARE_BROKERS");
    let topic = std::env::var("BARE_TOPIC").expect("BARE_TOPIC");
    let n: u64 = std::env::var("BARE_N").expect("BARE_N").parse().expect("n");
    let pid = std::process::id();
    let cpu0 = cpu_secs(pid);
    let started = Instant::now();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", format!("bare-{topic}"))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.max.bytes", "1048576")
        .set("max.partition.fetch.bytes", "1048576")
        .set("queued.max.messages.kbytes", "1024")
        .set("queued.min.messages", "1")
        .create()
        .expect("consumer");
    consumer.subscribe(&[&topic]).expect("subscribe");
    let mut got = 0u64;
    let deadline = Instant::now() + Duration::from_secs(600);
    while got < n {
        assert!(Instant::now() < deadline, "bare consumer: {got} of {n}");
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                std::hint::black_box(m.payload());
                got += 1;
                if got.is_multiple_of(1024) {
                    let _ = consumer.commit_consumer_state(CommitMode::Async);
                }
            }
            Some(Err(e)) => eprintln!("bare consumer: {e}"),
            None => {}
        }
    }
    consumer
        .commit_consumer_state(CommitMode::Sync)
        .expect("last commit");
    report(started, cpu0);
}

/// What one `weir run` is configured with.
struct Case {
    max_disk: &'static str,
    segment: &'static str,
    high: &'static str,
    low: &'static str,
    /// The blackhole's rate, if slowed.
    rate: Option<u64>,
}

impl Case {
    /// As fast as it goes: a WAL that never fills, the default watermarks.
    fn fast() -> Case {
        Case {
            max_disk: "2 GiB",
            segment: "64 MiB",
            high: "32 MiB",
            low: "8 MiB",
            rate: None,
        }
    }

    /// A 4 MiB WAL read at 870 records/s, with these watermarks.
    fn slow(high: &'static str, low: &'static str) -> Case {
        Case {
            max_disk: "4 MiB",
            segment: "256 KiB",
            high,
            low,
            rate: Some(SLOW_RATE),
        }
    }
}

/// `weir run` with the kafka source → WAL → blackhole, timed until `n` are durable.
fn run_weir(brokers: &str, topic: &str, n: u64, case: &Case) -> Run {
    let dir = tempfile::tempdir().expect("temp dir");
    let status = free_addr();
    let rate = case.rate.map(|r| format!("rate = {r}")).unwrap_or_default();
    let config = format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
memory_target = "2 GiB"

[wal]
max_disk = "{max_disk}"
segment_bytes = "{segment}"
max_pending_bytes = "1 MiB"
on_full = "block"

[sources.kf]
type = "kafka"
brokers = "{brokers}"
topics = ["{topic}"]
group_id = "weir-{topic}"
high_watermark = "{high}"
low_watermark = "{low}"

[sinks.null]
type = "blackhole"
inputs = ["kf"]
{rate}
"#,
        data = dir.path().join("data").display(),
        max_disk = case.max_disk,
        segment = case.segment,
        high = case.high,
        low = case.low,
    );
    let path = write_config(dir.path(), &config);
    let started = Instant::now();
    let daemon = Daemon::start(dir.path(), &path, status, &[]);
    let pid = daemon.child.id();
    let mut held_max = 0;
    let kafka = loop {
        let s = daemon.status();
        let k = s["sources"]["kf"]["kafka"].clone();
        held_max = held_max.max(k["held_bytes"].as_u64().unwrap_or(0));
        // Records tansu skipped (see `Tansu::produce_unbatched`) are counted gaps.
        let f = |key: &str| k[key].as_u64().unwrap_or(0);
        if f("durable") + f("gap_offsets") >= n {
            break k;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "weir did not finish: {s:#}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let run = Run {
        f: Figures {
            secs: started.elapsed().as_secs_f64(),
            cpu_secs: cpu_secs(pid),
            peak_rss: peak_rss(pid),
        },
        held_max,
        kafka,
    };
    let _ = daemon.stop();
    run
}
