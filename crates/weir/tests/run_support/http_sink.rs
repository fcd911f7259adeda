//! The HTTP sink's end-to-end tests' shared setup: a generator feeding a sink `out` of
//! `type = "http"`, and readers of its `/status` section and quarantine.

use std::net::SocketAddr;
use std::path::Path;

/// A generator (`count` records at `rate`/s, or forever) feeding an HTTP sink.
pub fn config(dir: &Path, status: SocketAddr, url: &str, source: &str, sink_extra: &str) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "10s"

[wal]
max_disk = "64 MiB"
segment_bytes = "4 MiB"
on_full = "block"

[sources.gen]
{source}

[sinks.out]
type = "http"
inputs = ["gen"]
url = "{url}"
retry = {{ initial = "50ms", max = "1s" }}
{sink_extra}
"#,
        data = dir.join("data").display(),
    )
}

/// Writes [`config`] into `dir` and starts `weir run` on it.
pub fn start(dir: &Path, url: &str, source: &str, sink_extra: &str) -> super::Daemon {
    let status = super::free_addr();
    let path = super::write_config(dir, &config(dir, status, url, source, sink_extra));
    super::Daemon::start(dir, &path, status, &[])
}

pub fn generator(rate: u64, count: Option<u64>) -> String {
    let count = count.map_or(String::new(), |n| format!("count = {n}\n"));
    format!("type = \"generator\"\nrate = {rate}\n{count}size = \"64 B\"\n")
}

pub fn sink(status: &serde_json::Value) -> &serde_json::Value {
    &status["sinks"]["out"]
}

pub fn http(status: &serde_json::Value) -> &serde_json::Value {
    &sink(status)["http"]
}

pub fn lag(status: &serde_json::Value) -> u64 {
    sink(status)["cursor"]["lag_records"]
        .as_u64()
        .unwrap_or(u64::MAX)
}

pub fn quarantined(dir: &Path) -> Vec<serde_json::Value> {
    let path = dir.join("data/quarantine/out/quarantine.ndjson");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a quarantine line"))
        .collect()
}

/// Waits until the sink `out` shows `failed`; returns the status and its component.
pub fn wait_failed(daemon: &super::Daemon) -> (serde_json::Value, serde_json::Value) {
    let st = daemon.wait_for("the sink failed", std::time::Duration::from_secs(20), |s| {
        s["components"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["name"] == "out" && c["state"] == "failed")
    });
    let component = st["components"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "out"))
        .cloned()
        .expect("the sink's component");
    (st, component)
}
