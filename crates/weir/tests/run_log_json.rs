//! `weir run --log-format json` (and `WEIR_LOG_FORMAT=json`): every line on stderr is
//! one JSON object with `ts`, `level`, `target` and `message`, and `component` when the
//! event is about a source or a sink; configuration warnings and errors too.

mod run_support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use run_support::{Daemon, free_addr, write_config};

/// A generator into a Parquet sink whose files close early (a startup log line naming
/// the sink) and a slow blackhole released by its `max_lag` (a warning naming it), plus
/// a source no sink reads (a configuration warning).
fn config(dir: &Path, status: SocketAddr) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "1s"

[wal]
max_disk = "8 MiB"
segment_bytes = "256 KiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 20000
size = 200

[sources.unread]
type = "generator"
rate = 1
count = 1

[sinks.lake]
type = "parquet"
inputs = ["gen"]
path = "{lake}"
rotate = {{ bytes = "4 MiB", max_wal_share = "25%" }}

[sinks.slow]
type = "blackhole"
inputs = ["gen"]
rate = 10
max_lag = {{ bytes = "1 MiB" }}
"#,
        data = dir.join("data").display(),
        lake = dir.join("lake").display(),
    )
}

/// Every line of `stderr` as a JSON object, checked for the fields every line has.
fn json_lines(stderr: &str) -> Vec<serde_json::Map<String, serde_json::Value>> {
    stderr
        .lines()
        .map(|line| {
            let object = match serde_json::from_str(line) {
                Ok(serde_json::Value::Object(object)) => object,
                other => panic!("not a JSON object: {line:?} ({other:?})\n{stderr}"),
            };
            for key in ["ts", "level", "target", "message"] {
                assert!(
                    object.get(key).is_some_and(serde_json::Value::is_string),
                    "{key} missing in {line}"
                );
            }
            let ts = object["ts"].as_str().unwrap_or_default();
            assert!(
                ts.len() == "2026-12-06T10:15:02.123Z".len() && ts.ends_with('Z'),
                "ts is RFC 3339 in UTC: {ts}"
            );
            let level = object["level"].as_str().unwrap_or_default();
            assert!(
                ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&level),
                "{line}"
            );
            object
        })
        .collect()
}

#[test]
fn every_stderr_line_is_a_json_object_with_its_component() {
    let dir = tempfile::tempdir().expect("tempdir");
    let status_addr = free_addr();
    let path = write_config(dir.path(), &config(dir.path(), status_addr));
    // `weir --log-format json run CONFIG`: the flag, over an environment that says text.
    let env = [("WEIR_LOG_FORMAT", "text")];
    let daemon = Daemon::start_wrapped(
        dir.path(),
        &["sh", "-c", r#"exec "$0" --log-format json "$@""#],
        &path,
        status_addr,
        &env,
        std::process::Stdio::null(),
    );
    daemon.wait_for("the slow sink released", Duration::from_secs(60), |s| {
        s["sinks"]["slow"]["gaps"].as_u64().unwrap_or(0) >= 1
    });
    let stderr_path = daemon.stderr_path.clone();
    assert_eq!(daemon.stop(), Some(0));
    let stderr = std::fs::read_to_string(&stderr_path).expect("stderr");
    let lines = json_lines(&stderr);
    let message = |needle: &str| {
        lines
            .iter()
            .find(|l| l["message"].as_str().is_some_and(|m| m.contains(needle)))
            .unwrap_or_else(|| panic!("no line with {needle:?}:\n{stderr}"))
    };
    // A configuration warning, before logging starts, names its component too.
    let unread = message("no sink reads this source");
    assert_eq!(unread["level"], "WARN");
    assert_eq!(unread["component"], "unread");
    // The sink's startup line: the bound in force.
    let early = message("closes once the WAL records it holds reach 2 MiB");
    assert_eq!(early["component"], "lake");
    assert_eq!(early["sink"], "lake");
    assert_eq!(early["level"], "INFO");
    // A sink's warning, named in its message.
    let gap = message("deleted before it read them");
    assert_eq!(gap["component"], "slow");
    assert_eq!(gap["level"], "WARN");
    // The daemon as a whole has no component.
    let running = message("running (");
    assert!(!running.contains_key("component"), "{running:?}");
    assert_eq!(running["target"], "weir::runtime");
    // No live status line, no text line.
    assert!(!stderr.contains('\r'), "{stderr:?}");
}

#[test]
fn configuration_errors_are_json_lines_too_and_a_bad_format_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(
        dir.path(),
        "[runtime]\ndata_dir = \"./d\"\n[wal]\nmax_disk = \"1 GiB\"\n[sinks.lake]\ntype = \"parquet\"\n",
    );
    let output = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("run")
        .arg(&path)
        .env("WEIR_LOG_FORMAT", "json")
        .output()
        .expect("weir run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines = json_lines(&stderr);
    assert!(lines.len() >= 2, "{stderr}");
    assert!(lines.iter().all(|l| l["level"] == "ERROR"), "{stderr}");
    assert!(
        lines.iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("wal.on_full"))),
        "{stderr}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.get("component").is_some_and(|c| c == "lake")),
        "an error under sinks.lake names it: {stderr}"
    );
    assert!(
        lines
            .last()
            .and_then(|l| l["message"].as_str())
            .is_some_and(|m| m.ends_with("invalid, not started")),
        "{stderr}"
    );
    // A format that is neither text nor json: refused, naming the variable.
    let output = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("run")
        .arg(&path)
        .env("WEIR_LOG_FORMAT", "yaml")
        .output()
        .expect("weir run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("WEIR_LOG_FORMAT") && stderr.contains("expected text or json"),
        "{stderr}"
    );
}
