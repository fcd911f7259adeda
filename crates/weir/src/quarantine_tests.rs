//! Quarantine: the file format, the budget (also under concurrent puts and across
//! restarts), and the metrics.

use std::fs;
use std::path::Path;

use super::*;
use crate::telemetry::{ComponentKind, State};

fn lines(path: &Path) -> Vec<serde_json::Value> {
    fs::read_to_string(path)
        .expect("quarantine file")
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect()
}

fn file_of(dir: &Path, sink: &str) -> PathBuf {
    dir.join(sink).join(FILE_NAME)
}

#[test]
fn entries_keep_the_reason_and_the_exact_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let quarantine = Quarantine::new(dir.path(), 1 << 20).expect("new");
    quarantine
        .put("lake", "payload is not valid UTF-8", b"\xff\x00binary")
        .expect("fits");
    quarantine.put("lake", "second", b"{}").expect("fits");
    quarantine.sync().expect("sync");

    let entries = lines(&file_of(dir.path(), "lake"));
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["sink"], "lake");
    assert_eq!(entries[0]["reason"], "payload is not valid UTF-8");
    let payload = entries[0]["payload_base64"].as_str().expect("a string");
    assert_eq!(BASE64.decode(payload).expect("base64"), b"\xff\x00binary");
    assert!(
        entries[1]["ts_ms"]
            .as_u64()
            .is_some_and(|ts| ts > 1_600_000_000_000)
    );

    let stats = quarantine.stats();
    let on_disk = fs::metadata(file_of(dir.path(), "lake"))
        .expect("stat")
        .len();
    assert_eq!(stats.used_bytes, on_disk);
    assert_eq!(stats.max_disk_bytes, 1 << 20);
    assert_eq!(
        stats.sinks["lake"],
        SinkQuarantineStats {
            records: 2,
            dropped: 0
        }
    );
}

#[test]
fn lines_are_fsynced_in_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let quarantine = Quarantine::new(dir.path(), 1 << 20).expect("new");
    for i in 0..SYNC_EVERY_RECORDS {
        quarantine.put("lake", "bad", &[i as u8]).expect("fits");
    }
    // The batch boundary flushed and fsynced the whole batch without a sync call.
    assert_eq!(
        lines(&file_of(dir.path(), "lake")).len(),
        SYNC_EVERY_RECORDS as usize
    );
    quarantine.put("lake", "bad", b"one more").expect("fits");
    quarantine.sync().expect("sync");
    assert_eq!(
        lines(&file_of(dir.path(), "lake")).len(),
        SYNC_EVERY_RECORDS as usize + 1
    );
}

#[test]
fn over_budget_entries_are_refused_and_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let quarantine = Quarantine::new(dir.path(), 400).expect("new");
    let mut written = 0;
    let err = loop {
        match quarantine.put("lake", "bad", &[7; 32]) {
            Ok(()) => written += 1,
            Err(err) => break err,
        }
        assert!(written < 100, "the budget must run out");
    };
    assert!(written >= 1);
    let QuarantineError::Full {
        needed,
        used,
        max_disk,
        ..
    } = &err
    else {
        panic!("expected Full, found {err}");
    };
    assert!(used + needed > *max_disk && *used <= *max_disk);
    assert!(
        err.to_string().contains("raise [quarantine] max_disk"),
        "{err}"
    );
    quarantine
        .put("lake", "bad", &[7; 32])
        .expect_err("still full");
    quarantine.sync().expect("sync");
    let stats = quarantine.stats();
    assert_eq!(
        stats.sinks["lake"],
        SinkQuarantineStats {
            records: written,
            dropped: 2
        }
    );
    assert_eq!(
        stats.used_bytes,
        fs::metadata(file_of(dir.path(), "lake"))
            .expect("stat")
            .len()
    );
    assert!(stats.used_bytes <= 400);
}

#[test]
fn files_of_earlier_runs_count_against_the_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let quarantine = Quarantine::new(dir.path(), 10_000).expect("new");
        quarantine.put("lake", "bad", &[1; 100]).expect("fits");
        quarantine.put("http", "bad", &[1; 100]).expect("fits");
        quarantine.sync().expect("sync");
    }
    let before = quarantine_bytes(dir.path());
    let reopened = Quarantine::new(dir.path(), 10_000).expect("reopen");
    assert_eq!(reopened.stats().used_bytes, before);
    reopened.put("lake", "bad", b"x").expect("fits");
    reopened.sync().expect("sync");
    assert_eq!(
        lines(&file_of(dir.path(), "lake")).len(),
        2,
        "appended, not truncated"
    );
    assert_eq!(reopened.stats().used_bytes, quarantine_bytes(dir.path()));
}

fn quarantine_bytes(dir: &Path) -> u64 {
    ["lake", "http"]
        .iter()
        .filter_map(|sink| fs::metadata(file_of(dir, sink)).ok())
        .map(|m| m.len())
        .sum()
}

#[test]
fn sink_names_must_be_directory_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let quarantine = Quarantine::new(dir.path(), 1 << 20).expect("new");
    for bad in ["", ".", "..", "a/b", "..\\x"] {
        let err = quarantine.put(bad, "bad", b"x").expect_err(bad);
        assert!(
            matches!(err, QuarantineError::SinkName(_)),
            "{bad:?}: {err}"
        );
    }
    assert_eq!(quarantine.stats().used_bytes, 0);
}

#[test]
fn concurrent_puts_never_exceed_the_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let quarantine = Quarantine::new(dir.path(), 20_000).expect("new");
    let attempts_per_thread = 200;
    std::thread::scope(|scope| {
        for t in 0..4 {
            let quarantine = quarantine.clone();
            scope.spawn(move || {
                let sink = format!("sink{}", t % 2);
                for i in 0..attempts_per_thread {
                    let _ = quarantine.put(&sink, "bad", &vec![1; 10 + i % 50]);
                }
            });
        }
    });
    quarantine.sync().expect("sync");
    let stats = quarantine.stats();
    let on_disk: u64 = ["sink0", "sink1"]
        .iter()
        .map(|sink| fs::metadata(file_of(dir.path(), sink)).expect("stat").len())
        .sum();
    assert_eq!(stats.used_bytes, on_disk);
    assert!(on_disk <= 20_000, "{on_disk}");
    let total: u64 = stats.sinks.values().map(|s| s.records + s.dropped).sum();
    assert_eq!(total, 4 * attempts_per_thread as u64);
    let kept: u64 = stats.sinks.values().map(|s| s.records).sum();
    let lines_on_disk =
        lines(&file_of(dir.path(), "sink0")).len() + lines(&file_of(dir.path(), "sink1")).len();
    assert_eq!(kept, lines_on_disk as u64);
    assert!(
        stats.sinks.values().any(|s| s.dropped > 0),
        "the budget ran out"
    );
}

#[test]
fn telemetry_reports_the_budget_and_the_drops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let telemetry = Telemetry::new("h".into());
    let quarantine = Quarantine::new(dir.path(), 300)
        .expect("new")
        .with_telemetry(&telemetry);
    while quarantine.put("lake", "bad", &[0; 40]).is_ok() {}
    let text = telemetry.render_metrics();
    let stats = quarantine.stats();
    let records = stats.sinks["lake"].records;
    assert!(
        text.contains(r#"weir_quarantine_dropped_total{sink="lake",reason="quarantine_full"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "weir_quarantine_records_total{{sink=\"lake\"}} {records}"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "weir_quarantine_disk_used_bytes {}",
            stats.used_bytes
        )),
        "{text}"
    );
    assert!(
        text.contains("weir_quarantine_disk_max_bytes 300"),
        "{text}"
    );
}

fn rejected(reason: &str, payload: &'static [u8]) -> Rejected {
    Rejected {
        reason: reason.to_owned(),
        payload: Bytes::from_static(payload),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn put_durable_resolves_with_the_entries_on_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let quarantine = Quarantine::new(dir.path(), 1 << 20).expect("new");
    // Fewer than SYNC_EVERY_RECORDS: only put_durable's own flush and fsync put them
    // in the file, with no sync call.
    let entries = vec![rejected("not UTF-8", b"\xff"), rejected("too large", b"{}")];
    quarantine
        .put_durable("lake", entries)
        .await
        .expect("written");
    let on_disk = lines(&file_of(dir.path(), "lake"));
    assert_eq!(on_disk.len(), 2);
    assert_eq!(on_disk[1]["reason"], "too large");
    assert_eq!(quarantine.stats().sinks["lake"].records, 2);
}

#[tokio::test(flavor = "current_thread")]
async fn put_durable_over_budget_is_refused_and_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let quarantine = Quarantine::new(dir.path(), 150).expect("new");
    let entries = vec![rejected("bad", &[0; 40]), rejected("bad", &[0; 40])];
    let result = quarantine.put_durable("lake", entries).await;
    assert!(
        matches!(result, Err(QuarantineError::Full { .. })),
        "{result:?}"
    );
    // The first fitted and is on disk; the second was dropped and counted.
    assert_eq!(lines(&file_of(dir.path(), "lake")).len(), 1);
    assert_eq!(
        quarantine.stats().sinks["lake"],
        SinkQuarantineStats {
            records: 1,
            dropped: 1
        }
    );
}

#[test]
fn a_sink_busy_on_its_file_holds_up_neither_stats_nor_other_sinks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let quarantine = Quarantine::new(dir.path(), 1 << 20).expect("new");
    quarantine.put("lake", "bad", b"x").expect("fits");
    // As during a slow fsync of lake's file.
    let slot = quarantine.slot("lake");
    let busy = lock(&slot.file);
    let (tx, rx) = std::sync::mpsc::channel();
    let q = quarantine.clone();
    std::thread::spawn(move || {
        let stats = q.stats();
        let other = q
            .put("archive", "bad", b"y")
            .and_then(|()| q.sync_sink("archive"));
        let _ = tx.send((stats, other.is_ok()));
    });
    let (stats, other_ok) = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("stats and another sink's put do not wait for lake's file");
    drop(busy);
    assert_eq!(stats.sinks["lake"].records, 1);
    assert!(other_ok);
}

/// Every line logged while `f` runs, as `LEVEL message`.
fn logged(f: impl FnOnce()) -> Vec<String> {
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    // tracing caches each callsite's interest process-wide, and while one dispatcher
    // is registered it takes that of the registering thread's own: another test's
    // thread, with no subscriber, can cache "never" for the loss log's callsites and this
    // capture would miss their lines. A second dispatcher, registered for the life of
    // the process, turns that shortcut off; the rebuild below clears what was cached.
    static ANCHOR: OnceLock<tracing::Dispatch> = OnceLock::new();
    ANCHOR.get_or_init(|| tracing::Dispatch::new(tracing_subscriber::registry()));
    let capture = Capture::default();
    let writer = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        tracing::callsite::rebuild_interest_cache();
        f();
    });
    let text = String::from_utf8(lock(&capture.0).clone()).expect("UTF-8");
    text.lines().map(|l| l.trim().to_owned()).collect()
}

#[test]
fn an_attached_component_is_degraded_while_its_records_are_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let telemetry = Telemetry::new("h".into());
    let sink = telemetry.component(ComponentKind::Sink, "out");
    sink.set_state(State::Running);
    let quarantine = Quarantine::new(dir.path(), 300)
        .expect("new")
        .with_telemetry(&telemetry);
    quarantine.attach(&sink);

    quarantine.put("out", "HTTP 400", &[0; 40]).expect("fits");
    assert_eq!(telemetry.status().components[0].state, "running");
    while quarantine.put("out", "HTTP 400", &[0; 40]).is_ok() {}
    let status = telemetry.status();
    let out = &status.components[0];
    assert_eq!(out.state, "degraded");
    let reason = out
        .reason
        .as_deref()
        .expect("a degraded state has a reason");
    assert!(
        reason.contains("the quarantine is full") && reason.contains("max_disk"),
        "{reason}"
    );
    let metrics = telemetry.render_metrics();
    assert!(
        metrics.contains(r#"weir_component_state{component="out",kind="sink",state="degraded"} 1"#),
        "{metrics}"
    );

    // Failed wins over degraded.
    sink.set_state(State::Failed("gave up".into()));
    assert_eq!(telemetry.status().components[0].state, "failed");
}

#[test]
fn a_flood_of_dead_letters_is_a_few_lines_first_warn_then_error_for_drops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let telemetry = Telemetry::new("h".into());
    let sink = telemetry.component(ComponentKind::Sink, "out");
    let quarantine = Quarantine::new(dir.path(), 64 * 1024)
        .expect("new")
        .with_telemetry(&telemetry);
    quarantine.attach(&sink);
    let lines = logged(|| {
        for i in 0..1000 {
            let _ = quarantine.put("out", &format!("HTTP 400 for record {i}"), &[7; 200]);
        }
        quarantine.flush_logs();
    });
    let stats = quarantine.stats();
    let (kept, dropped) = (stats.sinks["out"].records, stats.sinks["out"].dropped);
    assert_eq!(kept + dropped, 1000);
    assert!(kept > 0 && dropped > 0, "kept {kept}, dropped {dropped}");
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(
        lines[0].starts_with("WARN sink out: 1 record quarantined in ")
            && lines[0].ends_with("HTTP 400 for record 0 (more are summarized at most every 10s)"),
        "{lines:#?}"
    );
    let errors: Vec<_> = lines.iter().filter(|l| l.starts_with("ERROR ")).collect();
    assert_eq!(errors.len(), 2, "{lines:#?}");
    assert!(
        errors[0].contains("sink out: 1 record dropped, not kept by the quarantine:")
            && errors[0].contains("max_disk"),
        "{lines:#?}"
    );
    assert!(
        errors[1].contains(&format!("{} more records dropped", dropped - 1))
            && errors[1].contains(&format!("({dropped} in all)")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("WARN ")
            && l.contains(&format!("{} more records quarantined", kept - 1))),
        "{lines:#?}"
    );
}
