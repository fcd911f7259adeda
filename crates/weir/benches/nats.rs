//! JetStream → weir (nats source → WAL, fsynced → blackhole) next to a bare async-nats
//! pull consumer that acks each message at once and keeps nothing, in the same run on
//! the same server. Not a test; `scripts/bench-nats.sh` runs it in release.
//!
//! `cargo bench -p weir --bench nats` starts its own `nats-server -js` (the
//! distribution's, or `$WEIR_NATS_SERVER`) on a free loopback port, and for 100 B and
//! 1 KiB messages: publishes `WEIR_BENCH_N` messages (default 200,000) to a fresh
//! stream, then times each consumer alone from its start until it has acked all of
//! them: the bare consumer (a child process: this binary re-run with
//! `WEIR_NATS_BARE=1`) and `weir run` (until `/status` `sources.js.nats.acked` reaches
//! N). Both fetch 1024 messages at a time; weir holds at most 4096 not yet durable.
//! Printed: msg/s, MB/s of payload, the ratio weir / bare, CPU per message (user +
//! system time of the process) and peak RSS (VmHWM) of each.

#[path = "../tests/run_support/mod.rs"]
mod run_support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use run_support::nats::{Js, NatsServer, nats_bin};
use run_support::process::{
    Figures, cpu_secs, markdown, md_header, md_row, peak_rss, report, run_child, say,
};
use run_support::{Daemon, free_addr, write_config};

const FETCH: usize = 1024;

fn main() {
    if std::env::var_os("WEIR_NATS_BARE").is_some() {
        bare();
        return;
    }
    let n: usize = std::env::var("WEIR_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let server = NatsServer::start(nats_bin());
    let js = Js::connect(&[server.url()]);
    let version = js.client.server_info().version;
    say(&format!(
        "JetStream ({version}) → consumer, {n} messages per case, fetch {FETCH}; figures are noisy (a shared 2-core machine)"
    ));
    md_header(&[
        "messages",
        "weir msg/s",
        "weir MB/s",
        "bare msg/s",
        "bare MB/s",
        "weir / bare",
        "weir µs CPU/msg",
        "bare µs CPU/msg",
        "weir RSS",
        "bare RSS",
    ]);
    say(&format!(
        "{:<6} {:>12} {:>9} {:>12} {:>9} {:>6} {:>12} {:>12} {:>10} {:>10}",
        "size",
        "weir msg/s",
        "weir MB/s",
        "bare msg/s",
        "bare MB/s",
        "ratio",
        "weir µs/msg",
        "bare µs/msg",
        "weir RSS",
        "bare RSS"
    ));
    for size in [100usize, 1024] {
        let stream = format!("B{size}");
        js.stream(&stream, &[&format!("b{size}.>")], 1);
        js.publish(n, |i| format!("b{size}.{}", i % 8), |_| vec![b'x'; size]);
        let bare = run_bare(&server.url(), &stream, n);
        let weir = run_weir(&server.url(), &stream, n);
        let mb = |r: &Figures| (n * size) as f64 / r.secs / 1e6;
        let rate = |r: &Figures| n as f64 / r.secs;
        let cpu = |r: &Figures| r.cpu_secs / n as f64 * 1e6;
        let label = if size == 100 { "100 B" } else { "1 KiB" };
        say(&format!(
            "{:<6} {:>12.0} {:>9.1} {:>12.0} {:>9.1} {:>6.2} {:>12.2} {:>12.2} {:>7} MiB {:>7} MiB",
            label,
            rate(&weir),
            mb(&weir),
            rate(&bare),
            mb(&bare),
            rate(&weir) / rate(&bare),
            cpu(&weir),
            cpu(&bare),
            weir.peak_rss >> 20,
            bare.peak_rss >> 20,
        ));
        md_row(&[
            label.to_owned(),
            format!("{:.0}", rate(&weir)),
            format!("{:.1}", mb(&weir)),
            format!("{:.0}", rate(&bare)),
            format!("{:.1}", mb(&bare)),
            format!("{:.2}", rate(&weir) / rate(&bare)),
            format!("{:.2}", cpu(&weir)),
            format!("{:.2}", cpu(&bare)),
            format!("{} MiB", weir.peak_rss >> 20),
            format!("{} MiB", bare.peak_rss >> 20),
        ]);
    }
    if markdown() {
        println!("\nnats-server {version}, {n} messages per case, fetch {FETCH}.");
    }
}

/// The bare consumer in a child process.
fn run_bare(url: &str, stream: &str, n: usize) -> Figures {
    run_child(&[
        ("WEIR_NATS_BARE", "1".to_owned()),
        ("BARE_URL", url.to_owned()),
        ("BARE_STREAM", stream.to_owned()),
        ("BARE_N", n.to_string()),
    ])
}

/// A pull consumer that fetches 1024 at a time and acks each message at once.
fn bare() {
    let url = std::env::var("BARE_URL").expect("BARE_URL");
    let stream = std::env::var("BARE_STREAM").expect("BARE_STREAM");
    let n: usize = std::env::var("BARE_N").expect("BARE_N").parse().expect("n");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let pid = std::process::id();
    let cpu0 = cpu_secs(pid);
    let started = Instant::now();
    rt.block_on(async {
        let client = async_nats::connect(url).await.expect("connect");
        let js = async_nats::jetstream::new(client);
        let s = js.get_stream(&stream).await.expect("stream");
        let consumer: async_nats::jetstream::consumer::PullConsumer = s
            .create_consumer(async_nats::jetstream::consumer::pull::Config {
                durable_name: Some("bare".into()),
                ack_policy: async_nats::jetstream::consumer::AckPolicy::Explicit,
                max_ack_pending: 8192,
                ..Default::default()
            })
            .await
            .expect("consumer");
        let mut got = 0;
        while got < n {
            let mut batch = consumer
                .batch()
                .max_messages(FETCH)
                .expires(Duration::from_secs(1))
                .messages()
                .await
                .expect("fetch");
            while let Some(m) = batch.next().await {
                let m = m.expect("message");
                m.ack().await.expect("ack");
                got += 1;
            }
        }
        js.client().flush().await.expect("flush");
    });
    report(started, cpu0);
}

/// `weir run` with the nats source → WAL → blackhole, timed until it acked `n`.
fn run_weir(url: &str, stream: &str, n: usize) -> Figures {
    let dir = tempfile::tempdir().expect("temp dir");
    let status = free_addr();
    let config = format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "2 GiB"
segment_bytes = "64 MiB"
on_full = "block"

[sources.js]
type = "nats"
url = "{url}"
stream = "{stream}"
consumer = "weir"
max_ack_pending = 8192
max_inflight = 4096
fetch_batch = {FETCH}
max_message_bytes = "4 KiB"

[sinks.null]
type = "blackhole"
inputs = ["js"]
"#,
        data = dir.path().join("data").display(),
    );
    let path = write_config(dir.path(), &config);
    let started = Instant::now();
    let daemon = Daemon::start(dir.path(), &path, status, &[]);
    let pid = daemon.child.id();
    let cpu0 = 0.0;
    loop {
        let s = daemon.status();
        if s["sources"]["js"]["nats"]["acked"].as_u64().unwrap_or(0) >= n as u64 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "weir did not finish: {s:#}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let secs = started.elapsed().as_secs_f64();
    let run = Figures {
        secs,
        cpu_secs: cpu_secs(pid) - cpu0,
        peak_rss: peak_rss(pid),
    };
    let _ = daemon.stop();
    run
}
