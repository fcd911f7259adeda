//! `weir status` against a running daemon: `--json` prints the `/status` document as
//! the daemon sent it; the default prints tables and lines in human units, no JSON.

mod run_support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use run_support::{Daemon, free_addr, get, write_config};

/// 20,000 records from a generator into a sink that keeps up and one that reads 100 a
/// second (so it lags), each with a `max_lag`.
fn config(dir: &Path, status: SocketAddr) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "1s"

[wal]
max_disk = "64 MiB"
segment_bytes = "1 MiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 10000
size = 200
count = 20000

[sinks.fast]
type = "blackhole"
inputs = ["gen"]
max_lag = {{ bytes = "24 MiB" }}

[sinks.slow]
type = "blackhole"
inputs = ["gen"]
rate = 100
max_lag = {{ bytes = "32 MiB", age = "1h" }}
"#,
        data = dir.join("data").display(),
    )
}

fn weir_status(addr: SocketAddr, json: bool) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weir"));
    command.args(["status", "--addr", &addr.to_string()]);
    if json {
        command.arg("--json");
    }
    let output = command.output().expect("weir status");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    text
}

#[test]
fn status_prints_tables_in_human_units_and_json_only_when_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let status_addr = free_addr();
    let path = write_config(dir.path(), &config(dir.path(), status_addr));
    let daemon = Daemon::start(dir.path(), &path, status_addr, &[]);
    daemon.wait_for(
        "every record durable and the fast sink caught up",
        Duration::from_secs(30),
        |s| s["sources"]["gen"]["records"] == 20_000 && s["sinks"]["fast"]["records"] == 20_000,
    );

    // --json: the document itself.
    let printed: serde_json::Value =
        serde_json::from_str(&weir_status(status_addr, true)).expect("--json prints JSON");
    let (code, _, body) = get(status_addr, "/status").expect("GET /status");
    assert_eq!(code, 200);
    let served: serde_json::Value = serde_json::from_slice(&body).expect("status JSON");
    let keys = |v: &serde_json::Value| -> Vec<String> {
        v.as_object().expect("an object").keys().cloned().collect()
    };
    assert_eq!(keys(&printed), keys(&served));
    // Taken a moment apart: what does not move is equal, field for field.
    for pointer in [
        "/config_hash",
        "/started_unix_ms",
        "/sources/gen",
        "/sinks/fast/records",
        "/sinks/fast/max_lag",
        "/sinks/slow/max_lag",
        "/wal/max_disk",
        "/wal/on_full",
        "/wal/appended_records",
        "/wal_recovery",
    ] {
        assert_eq!(
            printed.pointer(pointer),
            served.pointer(pointer),
            "{pointer}"
        );
        assert!(printed.pointer(pointer).is_some(), "{pointer}");
    }
    let names = |v: &serde_json::Value| -> Vec<(String, String)> {
        v["components"]
            .as_array()
            .expect("components")
            .iter()
            .map(|c| (c["kind"].to_string(), c["name"].to_string()))
            .collect()
    };
    assert_eq!(names(&printed), names(&served));

    // The tables: no JSON, every part, the lag and max_lag in human units.
    let text = weir_status(status_addr, false);
    assert!(!text.contains('{') && !text.contains('}'), "{text}");
    for wanted in [
        "COMPONENT",
        "QUEUE",
        "WAL: ",
        "SOURCE",
        "SINK",
        "LAG BYTES",
        "history:",
        "quarantine:",
    ] {
        assert!(text.contains(wanted), "{wanted:?} missing:\n{text}");
    }
    let slow = text
        .lines()
        .find(|l| l.starts_with("slow ") && l.contains(" blackhole "))
        .unwrap_or_else(|| panic!("no row for the slow sink:\n{text}"));
    assert!(slow.contains("32 MiB, 1h"), "{slow}");
    assert!(
        [" KiB ", " MiB "].iter().any(|unit| slow.contains(unit)),
        "the lag in bytes, in a unit: {slow}"
    );
    assert!(
        [" ms ", " s ", " min "]
            .iter()
            .any(|unit| slow.contains(unit)),
        "the lag's age, in a unit: {slow}"
    );
    let fast = text
        .lines()
        .find(|l| l.starts_with("fast ") && l.contains(" blackhole "))
        .unwrap_or_else(|| panic!("no row for the fast sink:\n{text}"));
    assert!(fast.contains(" 24 MiB "), "{fast}");
    assert!(
        !text.contains("25165824") && !text.contains("33554432"),
        "{text}"
    );
    assert_eq!(daemon.stop(), Some(0));
}
