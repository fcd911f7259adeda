//! `where` end to end: a file source → WAL → sinks of three types with filters; which
//! records arrive, what `/status` and `/metrics` count, and a filter error dropped or
//! kept.

mod run_support;

use std::io::Write;
use std::time::Duration;

use run_support::{Daemon, free_addr, get, ndjson_lines};

const LINES: &str = r#"{"device":"d1","temp":35}
{"device":"d2","temp":40}
{"device":"d1","temp":20}
plain text, not JSON
{"device":"d1","temp":31}
[1, 2]
"#;

#[test]
fn sinks_get_only_what_their_filter_passes_and_count_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("readings.ndjson");
    std::fs::write(&log, LINES).unwrap();
    let status = free_addr();
    // The file source `tail` into the file sink `out` (no filter), and four more sinks.
    let path = run_support::tail::config(tmp.path(), status, &log.display().to_string(), "");
    let sinks = format!(
        r#"
# The payload's fields; the line that is not JSON and the array are errors, dropped.
[sinks.hot]
type = "file"
inputs = ["tail"]
path = "{hot}"
where = '.temp > 30 and .device == "d1"'

# The same errors kept.
[sinks.kept]
type = "file"
inputs = ["tail"]
path = "{kept}"
where = '.temp > 30'
on_filter_error = "keep"

# The record's variables, on a sink that takes the WAL form: every record passes.
[sinks.named]
type = "blackhole"
inputs = ["tail"]
where = '$source == "tail" and $attributes["file.name"] == "readings.ndjson" and ($key | endswith("readings.ndjson"))'

# None passes.
[sinks.none]
type = "blackhole"
inputs = ["tail"]
where = '$key == "elsewhere"'
"#,
        hot = tmp.path().join("hot").display(),
        kept = tmp.path().join("kept").display(),
    );
    let mut config = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    config.write_all(sinks.as_bytes()).unwrap();
    drop(config);
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let s = daemon.wait_for("every sink to catch up", Duration::from_secs(15), |s| {
        s["sources"]["tail"]["records"] == 6
            && ["out", "hot", "kept", "named", "none"]
                .iter()
                .all(|name| s["sinks"][name]["cursor"]["lag_records"] == 0)
    });
    let sink = |name: &str| {
        let n = &s["sinks"][name];
        (
            n["records"].as_u64().unwrap(),
            n["filtered"].as_u64().unwrap(),
            n["filter_errors"].as_u64().unwrap(),
        )
    };
    assert_eq!(sink("out"), (6, 0, 0), "{:#}", s["sinks"]["out"]);
    assert_eq!(sink("hot"), (2, 2, 2), "{:#}", s["sinks"]["hot"]);
    assert_eq!(sink("kept"), (5, 1, 2), "{:#}", s["sinks"]["kept"]);
    assert_eq!(sink("named"), (6, 0, 0), "{:#}", s["sinks"]["named"]);
    assert_eq!(sink("none"), (0, 6, 0), "{:#}", s["sinks"]["none"]);
    // Filtered records advance the cursor: nothing is left to read, none is retried.
    for name in ["out", "hot", "kept", "named", "none"] {
        assert_eq!(s["sinks"][name]["cursor"]["committed"], 6, "{name}: {s:#}");
    }

    let (code, _, body) = get(status, "/metrics").expect("metrics");
    assert_eq!(code, 200);
    let metrics = String::from_utf8(body).unwrap();
    for line in [
        r#"weir_sink_filtered_records_total{sink="hot"} 2"#,
        r#"weir_sink_filtered_records_total{sink="none"} 6"#,
        r#"weir_sink_filter_errors_total{sink="kept"} 2"#,
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
    let stderr = daemon.stderr_path.clone();
    assert_eq!(daemon.stop(), Some(0));
    let log = std::fs::read_to_string(stderr).unwrap();

    let temps = |dir: &str| -> Vec<serde_json::Value> {
        ndjson_lines(&tmp.path().join(dir))
            .into_iter()
            .map(|line| line["payload"].clone())
            .collect()
    };
    assert_eq!(
        temps("hot"),
        [
            serde_json::json!({"device": "d1", "temp": 35}),
            serde_json::json!({"device": "d1", "temp": 31}),
        ]
    );
    assert_eq!(
        temps("kept"),
        [
            serde_json::json!({"device": "d1", "temp": 35}),
            serde_json::json!({"device": "d2", "temp": 40}),
            serde_json::json!("plain text, not JSON"),
            serde_json::json!({"device": "d1", "temp": 31}),
            serde_json::json!([1, 2]),
        ]
    );
    // The errors were logged: the first at once, the second (within the summary
    // interval) counted for the summary written at shutdown.
    assert_eq!(
        log.matches("sink hot: 1 record dropped: its `where` filter failed")
            .count(),
        1,
        "{log}"
    );
    assert!(
        log.contains(
            "sink hot: 1 record dropped: its `where` filter failed (on_filter_error = drop): \
             WAL record 3: "
        ),
        "{log}"
    );
    assert!(
        log.contains("sink hot: 1 more record dropped: its `where` filter failed")
            && log.contains("(2 in all); the first of them: WAL record "),
        "the second error is in the summary written at shutdown: {log}"
    );
    assert!(
        log.contains("sink kept: 1 record kept though its `where` filter failed"),
        "{log}"
    );
}
