//! The file source's formats, multi-line records and exclusions, end to end: `weir run`
//! reads files into a file sink, and the envelopes are checked.

mod run_support;

use std::time::Duration;

use run_support::tail::config;
use run_support::{Daemon, free_addr, ndjson_lines};

/// Starts weir on `path` with `source` keys, waits for `records`, stops it, and returns
/// the envelopes and the final status.
fn run(
    dir: &std::path::Path,
    path: &str,
    source: &str,
    records: u64,
) -> (Vec<serde_json::Value>, serde_json::Value) {
    let status = free_addr();
    let config = config(dir, status, path, source);
    let daemon = Daemon::start(dir, &config, status, &[]);
    let s = daemon.wait_for("the records", Duration::from_secs(10), |s| {
        s["sinks"]["out"]["records"] == records
    });
    std::thread::sleep(Duration::from_millis(300));
    let s2 = daemon.status();
    assert_eq!(
        s2["sinks"]["out"]["records"], s["sinks"]["out"]["records"],
        "no more than expected"
    );
    assert_eq!(daemon.stop(), Some(0));
    (ndjson_lines(&dir.join("out")), s2)
}

const NGINX_LOG: &str = r#"203.0.113.7 - - [10/Oct/2024:13:55:36 +0200] "GET /api/v1/items?id=3 HTTP/1.1" 200 2326 "-" "curl/8.5.0"
198.51.100.23 - alice [10/Oct/2024:13:55:37 +0200] "POST /login HTTP/2.0" 302 0 "https://example.com/" "Mozilla/5.0 (X11; Linux x86_64)"
this line is not an access log line
192.0.2.1 - - [10/Oct/2024:13:56:01 +0200] "GET /health HTTP/1.1" 503 19 "-" "kube-probe/1.29"
"#;

#[test]
fn regex_parses_an_nginx_access_log_into_typed_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("access.log");
    std::fs::write(&log, NGINX_LOG).unwrap();
    let pattern = r#"^(?P<remote_addr>\S+) - (?P<remote_user>\S+) \[(?P<time>[^\]]+)\] "(?P<method>\S+) (?P<path>\S+) (?P<protocol>[^"]+)" (?P<status>\d{3}) (?P<bytes>\d+) "(?P<referer>[^"]*)" "(?P<agent>[^"]*)"$"#;
    let source = format!(
        "format = \"regex\"\npattern = '{pattern}'\ntypes = {{ status = \"int\", bytes = \"int\", time = \"timestamp:%d/%b/%Y:%H:%M:%S %z\" }}"
    );
    let (lines, s) = run(tmp.path(), &log.display().to_string(), &source, 3);
    let first = &lines[0];
    assert_eq!(
        first["key"],
        log.display().to_string(),
        "keyed by the file's path"
    );
    assert_eq!(first["attributes"]["file.name"], "access.log");
    assert_eq!(first["attributes"]["file.path"], log.display().to_string());
    assert!(
        first["attributes"]["host"]
            .as_str()
            .is_some_and(|h| !h.is_empty())
    );
    assert_eq!(
        first["payload"],
        serde_json::json!({
            "remote_addr": "203.0.113.7", "remote_user": "-", "time": "2024-10-10T11:55:36Z",
            "method": "GET", "path": "/api/v1/items?id=3", "protocol": "HTTP/1.1",
            "status": 200, "bytes": 2326, "referer": "-", "agent": "curl/8.5.0"
        })
    );
    assert_eq!(lines[1]["payload"]["remote_user"], "alice");
    assert_eq!(lines[2]["payload"]["status"], 503);
    // The line that does not match is in the quarantine, with the reason and where.
    assert_eq!(
        s["sources"]["tail"]["mismatches"], 1,
        "{:#}",
        s["sources"]["tail"]
    );
    let q =
        std::fs::read_to_string(tmp.path().join("data/quarantine/tail/quarantine.ndjson")).unwrap();
    let entry: serde_json::Value = serde_json::from_str(q.lines().next().unwrap()).unwrap();
    let reason = entry["reason"].as_str().unwrap();
    assert!(reason.starts_with("does not match pattern"), "{reason}");
    assert!(
        reason.contains(&format!("of {}", log.display())),
        "{reason}"
    );
}

#[test]
fn logfmt_lines_become_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("app.log");
    std::fs::write(
        &log,
        "ts=2024-12-06T10:00:00Z level=info msg=\"request done\" path=/api took=12ms\nts=2024-12-06T10:00:01Z level=warn msg=\"disk 91% full\" disk=/dev/sda1 retry\n",
    )
    .unwrap();
    let (lines, _) = run(
        tmp.path(),
        &log.display().to_string(),
        "format = \"logfmt\"",
        2,
    );
    assert_eq!(
        lines[0]["payload"],
        serde_json::json!({ "ts": "2024-12-06T10:00:00Z", "level": "info", "msg": "request done", "path": "/api", "took": "12ms" })
    );
    assert_eq!(lines[1]["payload"]["retry"], true);
    assert_eq!(lines[1]["payload"]["msg"], "disk 91% full");
}

#[test]
fn exclude_and_rotated_names_leave_files_out() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    std::fs::create_dir_all(logs.join("debug")).unwrap();
    for (name, line) in [
        ("app.log", "{\"f\":\"app\"}"),
        ("app.log.1", "{\"f\":\"rotated\"}"),
        ("app.log-20241205", "{\"f\":\"dated\"}"),
        ("noisy.log", "{\"f\":\"noisy\"}"),
        ("debug/x.log", "{\"f\":\"debug\"}"),
        ("sub.log", "{\"f\":\"sub\"}"),
    ] {
        std::fs::write(logs.join(name), format!("{line}\n")).unwrap();
    }
    let source = format!("exclude = [\"noisy*\", \"{}/debug/**\"]", logs.display());
    let (lines, _) = run(
        tmp.path(),
        &format!("{}/**/*.log*", logs.display()),
        &source,
        2,
    );
    let mut files: Vec<String> = lines
        .iter()
        .map(|l| l["payload"]["f"].as_str().unwrap().to_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["app", "sub"]);
}

/// One source per trace, each with its preset.
fn traces(preset: &str, file: &str, expected: usize) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join(format!("{preset}.log"));
    let trace = std::fs::read(format!(
        "{}/tests/data/traces/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    std::fs::write(&log, trace).unwrap();
    let source =
        format!("format = \"lines\"\nmultiline = {{ preset = \"{preset}\", timeout = \"200ms\" }}");
    let (lines, _) = run(
        tmp.path(),
        &log.display().to_string(),
        &source,
        expected as u64,
    );
    lines
        .iter()
        .map(|l| l["payload"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_java_stack_trace_is_one_record() {
    let records = traces("java", "java.log", 3);
    assert!(
        records[1].starts_with(
            "2026-12-06 15:51:33 SEVERE App main - request failed\njava.lang.IllegalStateException"
        ),
        "{records:#?}"
    );
    assert!(records[1].contains("\nCaused by: java.lang.NumberFormatException"));
    assert!(records[1].ends_with("... 1 more"));
}

#[test]
fn a_python_traceback_is_one_record() {
    let records = traces("python", "python.log", 3);
    assert!(
        records[1].contains("request failed\nTraceback (most recent call last):"),
        "{records:#?}"
    );
    assert!(records[1].ends_with("ValueError: could not load the config"));
    assert!(records[2].ends_with("still running"));
}

#[test]
fn go_panics_are_one_record_each() {
    let records = traces("go", "go.log", 5);
    assert!(
        records[1].starts_with("panic: runtime error: index out of range"),
        "{records:#?}"
    );
    assert!(records[1].contains("\ngoroutine 1 [running]:\nmain.(*Store).Get(...)\n"));
    assert!(
        records[4].starts_with("panic: worker failed")
            && records[4].contains("\ncreated by main.main\n")
    );
}
