//! `weir run` end to end across configuration reloads (SIGHUP, `weir reload`,
//! `POST /reload`): under MQTT and HTTP load nothing is lost and the unchanged HTTP
//! source answers every request; a broken file changes nothing; a sink added by a
//! reload starts at its `start_from`; a removed sink stops holding the WAL.

mod run_support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use run_support::mosquitto::{Mosquitto, MosquittoOpts};
use run_support::{Daemon, free_addr, ndjson_lines, post, write_config};
use serde_json::Value;

/// Waits until `/status` → `config.last_reload` is newer than `after_ms`; returns it.
fn wait_reload(daemon: &Daemon, after_ms: u64) -> Value {
    let status = daemon.wait_for("the reload's outcome", Duration::from_secs(60), |s| {
        s["config"]["last_reload"]["at_unix_ms"]
            .as_u64()
            .is_some_and(|at| at >= after_ms)
    });
    status["config"]["last_reload"].clone()
}

fn now_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

fn weir(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .output()
        .expect("run weir");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

struct Load {
    dir: tempfile::TempDir,
    status: SocketAddr,
    http: SocketAddr,
    broker: String,
}

impl Load {
    fn out(&self, sink: &str) -> PathBuf {
        self.dir.path().join(sink)
    }

    /// `gen_rate` sets the generator's rate (a changed source restarts); `extra` is
    /// appended (sinks added); `max_disk` and `out_lag` apply live.
    fn config(&self, gen_rate: u32, max_disk: &str, out_lag: &str, extra: &str) -> String {
        format!(
            r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "10s"

[wal]
max_disk = "{max_disk}"
segment_bytes = "1 MiB"
on_full = "block"

[sources.api]
type = "http"
listen = "{http}"

[sources.mq]
type = "mqtt"
url = "{broker}"
client_id = "weir-reload"
topics = [{{ filter = "t/#", qos = 1 }}]

[sources.gen]
type = "generator"
rate = {gen_rate}
size = 40

[sinks.out]
type = "file"
inputs = ["api", "mq", "gen"]
path = "{out}"
max_lag = {{ bytes = "{out_lag}" }}
{extra}
"#,
            data = self.dir.path().join("data").display(),
            status = self.status,
            http = self.http,
            broker = self.broker,
            out = self.out("out").display(),
        )
    }
}

/// Every `(source, seq)` of the HTTP and MQTT records in `dir`.
fn seqs(dir: &Path) -> BTreeSet<(String, u64)> {
    ndjson_lines(dir)
        .iter()
        .filter_map(|r| {
            let source = r["source"].as_str()?;
            let seq = r["payload"]["seq"].as_u64()?;
            (source != "gen").then(|| (source.to_owned(), seq))
        })
        .collect()
}

/// MQTT and HTTP load runs while the configuration is reloaded twice (a sink added, a
/// source restarted, the budget and a `max_lag` changed live; then the sink removed):
/// every request is answered 200, every acknowledged record reaches the file sink, the
/// added sink receives everything from the start of the WAL, and the MQTT source keeps
/// its one connection.
#[test]
fn a_reload_under_mqtt_and_http_load_loses_nothing() {
    let broker = Mosquitto::start(MosquittoOpts::default());
    let load = Load {
        dir: tempfile::tempdir().unwrap(),
        status: free_addr(),
        http: free_addr(),
        broker: broker.url(),
    };
    let path = write_config(load.dir.path(), &load.config(50, "64 MiB", "32 MiB", ""));
    let daemon = Daemon::start(load.dir.path(), &path, load.status, &[]);
    // The subscription is made asynchronously: publish until one message arrives.
    let mut warm = broker.publisher("warm-up");
    let deadline = Instant::now() + Duration::from_secs(20);
    while daemon.status()["sources"]["mq"]["records"]
        .as_u64()
        .unwrap_or(0)
        == 0
    {
        assert!(Instant::now() < deadline, "the MQTT source never received");
        warm.publish_all(1, [("t/warm".to_owned(), b"{\"warm\":1}".to_vec())])
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    warm.disconnect();
    let hash_before = daemon.status()["config"]["hash"].clone();

    let stop = Arc::new(AtomicBool::new(false));
    let http = std::thread::spawn({
        let (stop, addr) = (Arc::clone(&stop), load.http);
        move || {
            let mut answered = Vec::new();
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let body = format!(r#"{{"seq":{seq}}}"#);
                let code = match post(addr, "/ingest", &[], body.as_bytes()) {
                    Ok(response) => response.0,
                    Err(e) => panic!("request {seq} was not answered: {e}"),
                };
                assert_eq!(code, 200, "request {seq}");
                answered.push(seq);
                seq += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            answered
        }
    });
    let mqtt = std::thread::spawn({
        let (stop, addr) = (Arc::clone(&stop), broker.addr);
        move || {
            let mut publisher = run_support::mosquitto::Publisher::connect(addr, "loader").unwrap();
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let batch = (seq..seq + 50).map(|s| {
                    (
                        "t/load".to_owned(),
                        format!(r#"{{"seq":{s}}}"#).into_bytes(),
                    )
                });
                publisher.publish_all(1, batch).unwrap();
                seq += 50;
                std::thread::sleep(Duration::from_millis(20));
            }
            publisher.disconnect();
            seq
        }
    });

    std::thread::sleep(Duration::from_secs(2));
    let copy = format!(
        "\n[sinks.copy]\ntype = \"file\"\ninputs = [\"api\", \"mq\"]\npath = \"{}\"\n",
        load.out("copy").display()
    );
    write_config(load.dir.path(), &load.config(80, "96 MiB", "48 MiB", &copy));
    let asked = now_ms();
    daemon.signal("HUP");
    let first = wait_reload(&daemon, asked);
    assert_eq!(first["result"], "applied", "{first:#}");
    assert_eq!(strings(&first["added"]), ["sinks.copy"], "{first:#}");
    assert_eq!(strings(&first["restarted"]), ["sources.gen"], "{first:#}");
    let live = strings(&first["live"]);
    assert!(
        live.contains(&"wal.max_disk".to_owned()) && live.contains(&"sinks.out.max_lag".to_owned()),
        "{first:#}"
    );
    assert_eq!(first["unchanged"], 2, "api and mq untouched: {first:#}");
    let status = daemon.status();
    assert_ne!(status["config"]["hash"], hash_before);
    assert_eq!(status["config"]["hash"], first["hash"]);
    assert_eq!(status["wal"]["max_disk"], 96 << 20);
    assert_eq!(
        status["sinks"]["out"]["max_lag"]["bytes"],
        48 << 20,
        "{:#}",
        status["sinks"]["out"]
    );

    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let answered = http.join().unwrap();
    let published = mqtt.join().unwrap();
    assert!(
        answered.len() > 100 && published > 1000,
        "{} {published}",
        answered.len()
    );

    // Everything reaches both sinks: `out` ran throughout, `copy` started at the
    // earliest record of the WAL, which still holds everything.
    let expected: BTreeSet<(String, u64)> = answered
        .iter()
        .map(|s| ("api".to_owned(), *s))
        .chain((0..published).map(|s| ("mq".to_owned(), s)))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (out, copy) = (seqs(&load.out("out")), seqs(&load.out("copy")));
        let missing_out = expected.difference(&out).count();
        let missing_copy = expected.difference(&copy).count();
        if missing_out == 0 && missing_copy == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "missing {missing_out} records in out and {missing_copy} in copy, e.g. {:?}",
            expected
                .difference(&out)
                .chain(expected.difference(&copy))
                .next()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = daemon.status();
    eprintln!(
        "reload under load: {} HTTP requests, each answered 200; {published} MQTT messages \
         acknowledged by the broker; all {} in `out` and in `copy` (added by the reload, \
         from the earliest record); {} generator records",
        answered.len(),
        expected.len(),
        status["sources"]["gen"]["records"]
    );
    let mq = &status["sources"]["mq"]["mqtt"];
    assert_eq!(mq["reconnects"], 0, "the MQTT session was kept: {mq:#}");
    assert_eq!(status["sources"]["api"]["refused_requests"], 0);

    // Removing the added sink: it stops, leaves /status, and its cursor no longer
    // holds retention (WARN).
    write_config(load.dir.path(), &load.config(80, "96 MiB", "48 MiB", ""));
    let asked = now_ms();
    daemon.signal("HUP");
    let second = wait_reload(&daemon, asked);
    assert_eq!(second["result"], "applied", "{second:#}");
    assert_eq!(strings(&second["removed"]), ["sinks.copy"], "{second:#}");
    let status = daemon.status();
    assert!(status["sinks"]["copy"].is_null(), "{:#}", status["sinks"]);
    assert!(
        !status["wal"]["cursors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "copy"),
        "{:#}",
        status["wal"]["cursors"]
    );
    let log = daemon.stderr();
    assert!(
        log.lines().any(|l| l.contains(" WARN ")
            && l.contains("sink copy removed")
            && l.contains("retention")),
        "{log}"
    );
    assert_eq!(daemon.stop(), Some(0));
}

fn generator_config(dir: &Path, status: SocketAddr, extra: &str) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
pid_file = "{pid}"

[wal]
max_disk = "16 MiB"
segment_bytes = "1 MiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 2000
size = 40

[sinks.early]
type = "file"
inputs = ["gen"]
path = "{out}"
{extra}
"#,
        data = dir.join("data").display(),
        pid = dir.join("run/weir.pid").display(),
        out = dir.join("early").display(),
    )
}

/// A file with errors (syntax, an unknown key, a key that cannot change live) changes
/// nothing: weir keeps running the configuration in force, and `/status` shows the
/// refusal with its errors. `weir reload` checks the file itself first.
#[test]
fn a_broken_file_leaves_the_old_config_running() {
    let tmp = tempfile::tempdir().unwrap();
    let status = free_addr();
    let good = generator_config(tmp.path(), status, "");
    let path = write_config(tmp.path(), &good);
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let before = daemon.wait_for("records", Duration::from_secs(10), |s| {
        s["sinks"]["early"]["records"].as_u64().unwrap_or(0) > 100
    });
    let hash = before["config"]["hash"].clone();

    // A syntax error.
    write_config(tmp.path(), &good.replace("rate = 2000", "rate = = 2000"));
    let asked = now_ms();
    daemon.signal("HUP");
    let refused = wait_reload(&daemon, asked);
    assert_eq!(refused["result"], "refused", "{refused:#}");
    assert!(
        strings(&refused["errors"])
            .iter()
            .any(|e| e.contains("line")),
        "{refused:#}"
    );
    // `weir reload` refuses it before sending anything.
    let (code, _, stderr) = weir(&["reload", path.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("invalid, not reloaded"), "{stderr}");

    // A key that cannot change while the log is open.
    write_config(
        tmp.path(),
        &good.replace("segment_bytes = \"1 MiB\"", "segment_bytes = \"2 MiB\""),
    );
    let (code, stdout, stderr) = weir(&["reload", path.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("reload refused"), "{stdout}");
    assert!(
        stdout.contains("wal.segment_bytes: cannot change while weir runs"),
        "{stdout}"
    );

    // An added sink whose destination cannot be reached: its startup check refuses the
    // reload, as it would refuse a start.
    let closed = free_addr();
    write_config(
        tmp.path(),
        &generator_config(
            tmp.path(),
            status,
            &format!(
                "[sinks.remote]\ntype = \"http\"\ninputs = [\"gen\"]\nurl = \"http://{closed}/ingest\"\n"
            ),
        ),
    );
    let (code, stdout, stderr) = weir(&["reload", path.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("reload refused"), "{stdout}");
    assert!(stdout.contains("sinks.remote"), "{stdout}");

    // Still running the old configuration.
    let after = daemon.status();
    assert_eq!(after["config"]["hash"], hash);
    assert_eq!(
        after["config"]["reloads_refused"], 3,
        "{:#}",
        after["config"]
    );
    let records = |s: &Value| s["sinks"]["early"]["records"].as_u64().unwrap_or(0);
    let n = records(&after);
    daemon.wait_for("records still flowing", Duration::from_secs(10), |s| {
        records(s) > n + 100
    });
    assert_eq!(
        after["components"].as_array().unwrap().len(),
        before["components"].as_array().unwrap().len()
    );
    assert_eq!(daemon.stop(), Some(0));
}

/// A sink added by a reload starts at its `start_from`: `earliest` reads the WAL from
/// its start, `latest` from the durable end at the reload. Both through `weir reload`:
/// the pid file (SIGHUP) and `--status-addr` (`POST /reload`).
#[test]
fn a_sink_added_by_reload_starts_at_its_start_from() {
    let tmp = tempfile::tempdir().unwrap();
    let status = free_addr();
    let path = write_config(tmp.path(), &generator_config(tmp.path(), status, ""));
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let records = |s: &Value, sink: &str| s["sinks"][sink]["records"].as_u64().unwrap_or(0);
    daemon.wait_for("records", Duration::from_secs(10), |s| {
        records(s, "early") > 4000
    });
    assert!(tmp.path().join("run/weir.pid").exists());

    let late = format!(
        "[sinks.late]\ntype = \"file\"\ninputs = [\"gen\"]\npath = \"{}\"\nstart_from = \"latest\"\n",
        tmp.path().join("late").display()
    );
    write_config(tmp.path(), &generator_config(tmp.path(), status, &late));
    let end_before = daemon.status()["wal"]["durable_end"].as_u64().unwrap();
    let (code, stdout, stderr) = weir(&["reload", path.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("reload applied"), "{stdout}");
    assert!(stdout.contains("added: sinks.late"), "{stdout}");
    let status_now = daemon.status();
    let late_cursor = status_now["wal"]["cursors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "late")
        .cloned()
        .expect("late's cursor");
    assert!(
        late_cursor["committed"].as_u64().unwrap() >= end_before,
        "latest: started at the end, not 0: {late_cursor:#}"
    );

    let again = format!(
        "{late}\n[sinks.again]\ntype = \"file\"\ninputs = [\"gen\"]\npath = \"{}\"\n",
        tmp.path().join("again").display()
    );
    write_config(tmp.path(), &generator_config(tmp.path(), status, &again));
    let addr = status.to_string();
    let (code, stdout, stderr) = weir(&["reload", "--status-addr", &addr]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("added: sinks.again"), "{stdout}");
    // `earliest` (the default): from the start of the WAL, which still holds all.
    let now = daemon.status();
    let early_total = records(&now, "early");
    daemon.wait_for("again caught up", Duration::from_secs(30), |s| {
        records(s, "again") >= early_total
    });
    let late_n = records(&daemon.status(), "late");
    assert!(late_n < early_total, "late {late_n} early {early_total}");
    assert_eq!(daemon.stop(), Some(0));
    assert!(!tmp.path().join("run/weir.pid").exists(), "removed at exit");
}

/// A sink that holds the WAL full (`on_full = "block"`, no `max_lag`) stalls the
/// generator; removing it by a reload lets the WAL delete what only it held, and the
/// generator goes on.
#[test]
fn a_removed_sink_no_longer_holds_the_wal() {
    let tmp = tempfile::tempdir().unwrap();
    let status = free_addr();
    let config = |extra: &str| {
        format!(
            r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "1s"

[wal]
max_disk = "2 MiB"
segment_bytes = "256 KiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 20000
size = 200

[sinks.fast]
type = "blackhole"
inputs = ["gen"]
{extra}
"#,
            data = tmp.path().join("data").display(),
        )
    };
    let slow = "[sinks.slow]\ntype = \"blackhole\"\ninputs = [\"gen\"]\nrate = 1\n";
    let path = write_config(tmp.path(), &config(slow));
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let gen_records = |s: &Value| s["sources"]["gen"]["records"].as_u64().unwrap_or(0);
    let full = daemon.wait_for("the WAL full", Duration::from_secs(30), |s| {
        s["wal"]["budget_used"].as_f64().unwrap_or(0.0) > 0.8
            && s["components"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["name"] == "gen" && c["state"] == "backpressured")
    });
    let stalled_at = gen_records(&full);
    write_config(tmp.path(), &config(""));
    let asked = now_ms();
    daemon.signal("HUP");
    let report = wait_reload(&daemon, asked);
    assert_eq!(strings(&report["removed"]), ["sinks.slow"], "{report:#}");
    daemon.wait_for("the generator going on", Duration::from_secs(20), |s| {
        gen_records(s) > stalled_at + 20_000
    });
    assert_eq!(daemon.stop(), Some(0));
}
