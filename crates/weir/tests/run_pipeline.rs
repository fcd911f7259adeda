//! `weir run` end to end: a generator into Parquet, sinks that take only their
//! `inputs`, and the file source resuming at its saved position after a restart.

mod run_support;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use parquet::file::reader::{FileReader, SerializedFileReader};
use run_support::{Daemon, free_addr, get, ndjson_lines, post, write_config};

#[test]
fn generator_to_parquet_and_sinks_take_only_their_inputs() {
    let tmp = tempfile::tempdir().unwrap();
    let (status, http) = (free_addr(), free_addr());
    let config = format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "64 MiB"
segment_bytes = "1 MiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 0
count = 500
size = 64
seed = 7

[sources.api]
type = "http"
listen = "{http}"

[sinks.lake]
type = "parquet"
inputs = ["gen"]
path = "{lake}"
rotate = {{ bytes = "64 MiB", age = "1s" }}

[sinks.out]
type = "file"
inputs = ["api"]
path = "{out}"

[sinks.all]
type = "blackhole"
inputs = ["gen", "api"]
"#,
        data = tmp.path().join("data").display(),
        lake = tmp.path().join("lake").display(),
        out = tmp.path().join("out").display(),
    );
    let path = write_config(tmp.path(), &config);
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let r = post(http, "/ingest", &[], b"{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n").unwrap();
    assert_eq!(r.0, 200);

    let s = daemon.wait_for("every sink to catch up", Duration::from_secs(15), |s| {
        let caught_up = |name: &str| s["sinks"][name]["cursor"]["lag_records"] == 0;
        s["sources"]["gen"]["records"] == 500
            && caught_up("lake")
            && caught_up("out")
            && caught_up("all")
            && s["sinks"]["all"]["records"] == 503
    });
    assert_eq!(
        s["sinks"]["out"]["records"], 3,
        "the file sink takes only api: {s:#}"
    );
    assert_eq!(
        s["sinks"]["lake"]["records"], 500,
        "the Parquet sink takes only gen: {s:#}"
    );
    let states: BTreeMap<String, String> = s["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                format!(
                    "{}/{}",
                    c["kind"].as_str().unwrap(),
                    c["name"].as_str().unwrap()
                ),
                c["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        states["source/gen"], "stopped",
        "the generator reached its count: {states:?}"
    );
    assert_eq!(states["sink/lake"], "running", "{states:?}");
    assert_eq!(states["wal/wal"], "running", "{states:?}");
    assert!(
        s["queues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|q| q["name"] == "wal->lake")
    );
    assert_eq!(daemon.stop(), Some(0));

    // The closed Parquet files hold the 500 generated records and record on_full.
    let mut rows = 0;
    for entry in std::fs::read_dir(tmp.path().join("lake")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "parquet") {
            let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
            let meta = reader.metadata().file_metadata();
            rows += meta.num_rows();
            let kv = meta.key_value_metadata().expect("footer metadata");
            assert!(
                kv.iter()
                    .any(|k| k.key == "weir.on_full" && k.value.as_deref() == Some("block")),
                "{kv:?}"
            );
        }
    }
    assert_eq!(rows, 500);
    let lines = ndjson_lines(&tmp.path().join("out"));
    assert_eq!(lines.len(), 3);
    assert!(lines.iter().all(|l| l["source"] == "api"));
}

fn file_source_config(dir: &Path, status: std::net::SocketAddr) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "16 MiB"
segment_bytes = "1 MiB"
on_full = "block"

[sources.tail]
type = "file"
path = "{input}"
max_line_bytes = "64 B"
batch_size = 7

[sinks.out]
type = "file"
inputs = ["tail"]
path = "{out}"
"#,
        data = dir.join("data").display(),
        input = dir.join("input.log").display(),
        out = dir.join("out").display(),
    )
}

fn append_lines(path: &Path, range: std::ops::Range<u32>) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    for i in range {
        writeln!(f, "{{\"line\":{i}}}").unwrap();
    }
}

#[test]
fn the_file_source_resumes_where_it_left_off() {
    let tmp = tempfile::tempdir().unwrap();
    let status = free_addr();
    let input = tmp.path().join("input.log");
    append_lines(&input, 0..40);
    // A line longer than max_line_bytes goes to the quarantine (its head), counted.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&input)
        .unwrap()
        .write_all(&[b'x'; 100])
        .unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&input)
        .unwrap()
        .write_all(b"\n")
        .unwrap();
    let path = write_config(tmp.path(), &file_source_config(tmp.path(), status));

    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let s = daemon.wait_for("40 lines stored", Duration::from_secs(10), |s| {
        s["sinks"]["out"]["records"] == 40
    });
    assert_eq!(s["sources"]["tail"]["long_lines"], 1, "{s:#}");
    assert_eq!(s["sources"]["tail"]["quarantined"], 1, "{s:#}");
    assert!(
        daemon
            .stderr()
            .lines()
            .any(|l| l.contains(" WARN ") && l.contains("source tail: 1 record quarantined in ")),
        "the quarantined line is logged: {}",
        daemon.stderr()
    );
    // The source follows the file.
    append_lines(&input, 40..50);
    daemon.wait_for("50 lines stored", Duration::from_secs(10), |s| {
        s["sinks"]["out"]["records"] == 50
    });
    assert_eq!(daemon.stop(), Some(0));

    append_lines(&input, 50..60);
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let s = daemon.wait_for("the new lines stored", Duration::from_secs(10), |s| {
        s["sinks"]["out"]["records"] == 10
    });
    assert_eq!(
        s["sources"]["tail"]["records"], 10,
        "resumed at the saved position: {s:#}"
    );
    assert_eq!(daemon.stop(), Some(0));

    let mut seen: Vec<u64> = ndjson_lines(&tmp.path().join("out"))
        .iter()
        .map(|l| l["payload"]["line"].as_u64().unwrap())
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..60).collect::<Vec<_>>(), "every line exactly once");
}

#[test]
fn the_quickstart_shows_lag_and_the_wal_budget_within_seconds() {
    let tmp = tempfile::tempdir().unwrap();
    let status = free_addr();
    let quickstart = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart.toml"
    ))
    .unwrap();
    let config = quickstart
        .replace(
            "./weir-data",
            &tmp.path().join("data").display().to_string(),
        )
        .replace(
            "./weir-out/lake",
            &tmp.path().join("lake").display().to_string(),
        )
        .replace("127.0.0.1:9464", &status.to_string());
    assert_ne!(config, quickstart);
    let path = write_config(tmp.path(), &config);
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let s = daemon.wait_for(
        "the slow sink to lag and the WAL to fill",
        Duration::from_secs(10),
        |s| {
            s["sinks"]["slow"]["cursor"]["lag_records"]
                .as_u64()
                .unwrap_or(0)
                > 2000
                && s["wal"]["budget_used"].as_f64().unwrap_or(0.0) > 0.05
        },
    );
    assert!(
        s["sources"]["gen"]["records"].as_u64().unwrap() > 2000,
        "{s:#}"
    );
    assert!(
        s["queues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|q| q["name"] == "wal->slow" && q["depth"].as_u64().unwrap() > 0),
        "{s:#}"
    );
    // /metrics carries the documented names, labelled per source and sink.
    let (code, _, body) = get(status, "/metrics").expect("/metrics answers");
    assert_eq!(code, 200);
    let metrics = String::from_utf8(body).unwrap();
    for line in [
        r#"weir_source_records_total{source="gen"}"#,
        r#"weir_source_rejected_total{source="gen",reason="wal_refused"}"#,
        r#"weir_sink_lag_records{sink="slow"}"#,
        r#"weir_sink_lag_seconds{sink="slow"}"#,
        "weir_wal_disk_used_bytes ",
        r#"weir_queue_depth{queue="wal->slow"}"#,
    ] {
        assert!(metrics.contains(line), "no {line} in:\n{metrics}");
    }
    // The slow sink cannot drain within the quickstart's shutdown_timeout: a second
    // signal ends it.
    daemon.signal("TERM");
    std::thread::sleep(Duration::from_millis(200));
    daemon.signal("TERM");
}

#[test]
fn the_file_source_reads_standard_input_to_its_end() {
    let tmp = tempfile::tempdir().unwrap();
    let status = free_addr();
    let config = file_source_config(tmp.path(), status).replace(
        &format!("path = \"{}\"", tmp.path().join("input.log").display()),
        "path = \"-\"",
    );
    assert!(config.contains("path = \"-\""));
    let path = write_config(tmp.path(), &config);
    let mut daemon =
        Daemon::start_with_stdin(tmp.path(), &path, status, &[], std::process::Stdio::piped());
    {
        let mut stdin = daemon.child.stdin.take().unwrap();
        for i in 0..100 {
            writeln!(stdin, "{{\"line\":{i}}}").unwrap();
        }
        // The last line has no newline; dropping stdin ends the input.
        write!(stdin, "{{\"line\":100}}").unwrap();
    }
    let s = daemon.wait_for(
        "standard input to be read to its end",
        Duration::from_secs(10),
        |s| {
            s["sinks"]["out"]["records"] == 101
                && s["components"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c["name"] == "tail" && c["state"] == "stopped")
        },
    );
    assert_eq!(s["sources"]["tail"]["records"], 101);
    assert_eq!(daemon.stop(), Some(0));
    assert_eq!(ndjson_lines(&tmp.path().join("out")).len(), 101);
}

/// Under `on_full = "reject"` the WAL refuses the file source's batches while a slow
/// required sink holds the budget. The file keeps what is refused: the source waits and
/// retries in order, so every line arrives exactly once and in file order, and no
/// position past a refused batch is ever saved. (Saving the position of a later batch
/// that got in lost the refused lines for good.)
#[test]
fn the_file_source_waits_when_the_wal_refuses_and_loses_nothing() {
    const LINES: u32 = 12_000;
    let tmp = tempfile::tempdir().unwrap();
    let status = free_addr();
    let input = tmp.path().join("input.log");
    {
        let mut f = std::fs::File::create(&input).unwrap();
        for i in 0..LINES {
            writeln!(f, "{{\"line\":{i},\"pad\":\"{}\"}}", "x".repeat(80)).unwrap();
        }
    }
    let config = file_source_config(tmp.path(), status)
        .replace(r#"on_full = "block""#, r#"on_full = "reject""#)
        .replace(r#"max_disk = "16 MiB""#, r#"max_disk = "512 KiB""#)
        .replace(r#"segment_bytes = "1 MiB""#, r#"segment_bytes = "64 KiB""#)
        .replace(r#"max_line_bytes = "64 B""#, r#"max_line_bytes = "1 KiB""#)
        .replace("batch_size = 7", "batch_size = 100")
        + r#"
[sinks.gate]
type = "blackhole"
inputs = ["tail"]
rate = 4000
"#;
    let path = write_config(tmp.path(), &config);
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let s = daemon.wait_for("every line stored", Duration::from_secs(60), |s| {
        s["sinks"]["gate"]["records"] == LINES && s["sinks"]["out"]["records"] == LINES
    });
    assert!(
        s["sources"]["tail"]["refused_records"].as_u64().unwrap() > 0,
        "the WAL refused batches on the way (else the test proves nothing): {s:#}"
    );
    assert_eq!(daemon.stop(), Some(0));
    let seen: Vec<u64> = ndjson_lines(&tmp.path().join("out"))
        .iter()
        .map(|l| l["payload"]["line"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seen,
        (0..u64::from(LINES)).collect::<Vec<_>>(),
        "every line once, in order"
    );
}

/// A file source whose long lines overflow a small quarantine: what does not fit is
/// dropped, and that is an ERROR and a `degraded` source with the reason, not silence.
#[test]
fn a_source_whose_quarantine_is_full_is_degraded_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let status = free_addr();
    let input = tmp.path().join("input.log");
    let mut f = std::fs::File::create(&input).unwrap();
    for _ in 0..200 {
        f.write_all(&[b'x'; 100]).unwrap();
        f.write_all(b"\n").unwrap();
    }
    append_lines(&input, 0..10);
    let config = format!(
        "{}\n[quarantine]\nmax_disk = \"4 KiB\"\n",
        file_source_config(tmp.path(), status)
    );
    let path = write_config(tmp.path(), &config);
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let s = daemon.wait_for("the short lines stored", Duration::from_secs(10), |s| {
        s["sinks"]["out"]["records"] == 10
    });
    let q = &s["quarantine"]["sinks"]["tail"];
    let (kept, dropped) = (
        q["records"].as_u64().unwrap(),
        q["dropped"].as_u64().unwrap(),
    );
    assert_eq!(kept + dropped, 200, "{q:#}");
    assert!(kept > 0 && dropped > 0, "{q:#}");
    let tail = s["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "source" && c["name"] == "tail")
        .unwrap();
    assert_eq!(tail["state"], "degraded", "{tail:#}");
    assert!(
        tail["reason"]
            .as_str()
            .is_some_and(|r| r.contains("the quarantine is full")),
        "{tail:#}"
    );
    let log = daemon.stderr();
    assert!(
        log.lines().any(|l| l.contains(" ERROR ")
            && l.contains("source tail: 1 record dropped, not kept by the quarantine")),
        "{log}"
    );
    assert_eq!(daemon.stop(), Some(0));
}
