//! `/status` and `/history` latency while the WAL is full, against the same requests to
//! a daemon that is keeping up.
//!
//! `cargo bench -p weir --bench status_latency` starts the real `weir run` twice on
//! free loopback ports:
//!
//! - **full**: a generator at 5,000 records/s into a 2 MiB WAL with `on_full = block`
//!   and a required sink that takes 20 records/s, so the WAL is full and the generator
//!   blocked for the whole run (the bench waits for `budget_used >= 0.9` and checks it
//!   again after the requests);
//! - **keeping up**: the same generator with both sinks unlimited.
//!
//! Against each it makes `WEIR_BENCH_REQUESTS` (default 1,000) sequential requests of
//! each kind, a new connection each, as a poller does: `GET /status`, `GET /history`
//! (the whole ring) and `GET /history?since=…` (the dashboard's once-a-second poll for
//! the newest samples). It prints p50, p99 and max per kind and the ratio of the full
//! daemon's p99 to the keeping-up one's. The target is a p99 under 100 ms while full.
//! The machine is shared with other builds: figures vary from run to run.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr")
}

/// `GET path`: the status code and body.
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let head_end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no header end"))?;
    let code = std::str::from_utf8(&response[9..12])
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, response[head_end + 4..].to_vec()))
}

fn json(addr: SocketAddr, path: &str) -> serde_json::Value {
    let (code, body) = get(addr, path).expect("GET");
    assert_eq!(code, 200, "{path}");
    // The body may be chunked; the JSON is the part between the first '{' and last '}'.
    let text = String::from_utf8_lossy(&body);
    let start = text.find('{').unwrap_or(0);
    let end = text.rfind('}').map_or(text.len(), |e| e + 1);
    serde_json::from_str(&text[start..end]).expect("JSON")
}

struct Daemon {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &Path, stalled: bool) -> Daemon {
    let addr = free_addr();
    let rate = if stalled { "rate = 20" } else { "" };
    let config = format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{addr}"
shutdown_timeout = "1s"

[wal]
max_disk = "{max_disk}"
segment_bytes = "256 KiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 5000
size = 200

[sinks.lake]
type = "blackhole"
inputs = ["gen"]

[sinks.slow]
type = "blackhole"
inputs = ["gen"]
{rate}
"#,
        data = dir.join("data").display(),
        max_disk = if stalled { "2 MiB" } else { "64 MiB" },
    );
    let path = dir.join("weir.toml");
    std::fs::write(&path, config).expect("write config");
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("run")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start weir run");
    let daemon = Daemon { child, addr };
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(addr, "/status").is_err() {
        assert!(Instant::now() < deadline, "weir did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    daemon
}

fn budget_used(addr: SocketAddr) -> f64 {
    json(addr, "/status")["wal"]["budget_used"]
        .as_f64()
        .unwrap_or(0.0)
}

/// p50, p99 and max of `n` requests for `path` (which may change each time).
fn measure(addr: SocketAddr, n: usize, mut path: impl FnMut() -> String) -> [Duration; 3] {
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let p = path();
            let started = Instant::now();
            let (code, _) = get(addr, &p).expect("GET");
            let took = started.elapsed();
            assert_eq!(code, 200, "{p}");
            took
        })
        .collect();
    times.sort();
    let at = |q: f64| times[((n as f64 * q).ceil() as usize).clamp(1, n) - 1];
    [at(0.5), at(0.99), times[n - 1]]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// The cost of answering `/history` with a full ring (900 samples), in process: the
/// daemons above have held their ring for seconds only. The layout is the quickstart's
/// (one source, two sinks: 40 series) with every value a number.
fn full_ring(n: usize) -> [Duration; 3] {
    use weir::telemetry::Telemetry;
    use weir::telemetry::history::{History, HistoryLayout, SAMPLE_INTERVAL, SAMPLES};
    let telemetry = Telemetry::new("sha256:bench".into());
    let counter = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let c = std::sync::Arc::clone(&counter);
    telemetry.register_status("sources", move || {
        let v = c.fetch_add(4999, std::sync::atomic::Ordering::Relaxed);
        serde_json::json!({"gen": {"records": v, "bytes": v * 243, "refused_records": 0, "refused_requests": 0, "waiting_ms": 1234}})
    });
    telemetry.register_status("sinks", || {
        let sink = serde_json::json!({"records": 123456, "bytes": 29_000_000, "gap_records": 0, "retries": 3, "unencodable": 0,
            "cursor": {"lag_records": 16188, "lag_bytes": 3_939_848, "lag_age_ms": 272_825}});
        serde_json::json!({"lake": sink.clone(), "slow": sink})
    });
    telemetry.register_status("wal", || {
        serde_json::json!({"appended_records": 1_000_000, "appended_bytes": 243_000_000, "disk_bytes": 4_186_517,
            "max_disk": 4_194_304, "budget_used": 0.998_143, "evicted_records": 0})
    });
    let history = telemetry.install_history(History::new(
        HistoryLayout::pipeline(["gen"], ["lake", "slow"]),
        SAMPLE_INTERVAL,
        SAMPLES,
    ));
    for _ in 0..SAMPLES {
        telemetry.sample_history();
    }
    let mut bytes = 0;
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let started = Instant::now();
            let body = serde_json::to_vec(&history.report(None)).expect("JSON");
            bytes = body.len();
            started.elapsed()
        })
        .collect();
    times.sort();
    println!("in process, a full ring ({SAMPLES} samples, 40 series, {bytes} bytes of JSON):");
    let at = |q: f64| times[((n as f64 * q).ceil() as usize).clamp(1, n) - 1];
    [at(0.5), at(0.99), times[n - 1]]
}

fn main() {
    // `cargo bench` passes `--bench`; a plain `cargo test` of benches passes nothing
    // else we use.
    let n: usize = std::env::var("WEIR_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let kinds = [
        "/status",
        "/history (whole ring)",
        "/history?since= (newest)",
    ];
    let mut results = Vec::new();
    for stalled in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let daemon = start(dir.path(), stalled);
        let addr = daemon.addr;
        let deadline = Instant::now() + Duration::from_secs(60);
        // Both daemons sample for a while, so /history holds more than a few samples.
        loop {
            let held = json(addr, "/history")["held"].as_u64().unwrap_or(0);
            let ready = held >= 10 && (!stalled || budget_used(addr) >= 0.9);
            if ready {
                break;
            }
            assert!(Instant::now() < deadline, "the daemon never got ready");
            std::thread::sleep(Duration::from_millis(200));
        }
        let status = measure(addr, n, || "/status".to_owned());
        let whole = measure(addr, n, || "/history".to_owned());
        let since = measure(addr, n, || {
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            format!("/history?since={}", now_ms.saturating_sub(2000))
        });
        let used = budget_used(addr);
        let label = if stalled { "WAL full" } else { "keeping up" };
        println!(
            "{label} (budget used {:.0}% after the requests):",
            used * 100.0
        );
        if stalled {
            assert!(used >= 0.9, "the WAL drained during the run: {used}");
        }
        for (kind, [p50, p99, max]) in kinds.iter().zip([status, whole, since]) {
            println!(
                "  {kind:<26} {n} requests  p50 {}  p99 {}  max {}",
                ms(p50),
                ms(p99),
                ms(max)
            );
        }
        results.push([status[1], whole[1], since[1]]);
    }
    let [p50, p99, max] = full_ring(n.min(200));
    println!(
        "  report + JSON              p50 {}  p99 {}  max {}",
        ms(p50),
        ms(p99),
        ms(max)
    );
    println!("p99 while the WAL is full / p99 while keeping up (target: full p99 < 100 ms):");
    for (i, kind) in kinds.iter().enumerate() {
        let (full, idle) = (results[0][i], results[1][i]);
        println!(
            "  {kind:<26} {} / {} = {:.2}×  {}",
            ms(full),
            ms(idle),
            full.as_secs_f64() / idle.as_secs_f64().max(1e-9),
            if full < Duration::from_millis(100) {
                "under target"
            } else {
                "OVER TARGET"
            }
        );
    }
}
