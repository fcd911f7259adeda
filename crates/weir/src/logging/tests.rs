//! The log writer: lines arrive, a stalled output never blocks the caller, drops and
//! truncations are counted.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::*;

/// Long enough for an unstalled writer thread to finish.
const WAIT: Duration = Duration::from_secs(10);

/// An output that collects what the writer thread writes.
#[derive(Clone, Default)]
struct Collect(Arc<Mutex<Vec<u8>>>);

impl Write for Collect {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("not poisoned").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Collect {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().expect("not poisoned").clone()).expect("valid UTF-8")
    }
}

/// An output that stalls on its first write until the gate opens (or 10 s pass).
struct Stalled {
    gate: Option<mpsc::Receiver<()>>,
    inner: Collect,
}

impl Write for Stalled {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(gate) = self.gate.take() {
            let _ = gate.recv_timeout(Duration::from_secs(10));
        }
        self.inner.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn subscriber(writer: BoundedLogWriter) -> impl tracing::Subscriber + Send + Sync {
    tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish()
}

#[test]
fn lines_reach_the_output_in_order() {
    let output = Collect::default();
    let (writer, handle) = bounded_writer(100, 1024, output.clone()).expect("writer");
    tracing::subscriber::with_default(subscriber(writer), || {
        for i in 0..10 {
            tracing::info!(record = i, "line number {i}");
        }
        tracing::debug!("filtered out");
    });
    assert!(handle.shutdown(WAIT));
    let text = output.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 10, "{text}");
    for (i, line) in lines.iter().enumerate() {
        assert!(line.contains(&format!("line number {i}")), "{line}");
    }
    assert_eq!(
        (handle.written(), handle.dropped(), handle.truncated()),
        (10, 0, 0)
    );
}

#[test]
fn a_stalled_output_never_blocks_the_caller_and_drops_are_counted() {
    let (open_gate, gate) = mpsc::channel();
    let output = Collect::default();
    let stalled = Stalled {
        gate: Some(gate),
        inner: output.clone(),
    };
    let queue_lines = 8;
    let (writer, handle) = bounded_writer(queue_lines, 1024, stalled).expect("writer");
    let started = Instant::now();
    tracing::subscriber::with_default(subscriber(writer), || {
        for i in 0..1000 {
            tracing::info!("event {i}");
        }
    });
    let logging_took = started.elapsed();
    // The output is still stalled (its gate waits 10 s): had logging waited for it,
    // 1000 events would have taken at least that long.
    assert!(
        logging_took < Duration::from_secs(5),
        "logging blocked for {logging_took:?}"
    );
    let stats = handle.queue_stats();
    assert!(stats.depth <= u64::from(queue_lines));
    open_gate.send(()).expect("the writer thread waits");
    assert!(handle.shutdown(WAIT));

    let (written, dropped) = (handle.written(), handle.dropped());
    assert_eq!(
        written + dropped,
        1000,
        "every line written or counted as dropped"
    );
    // At most one queue's worth in the writer's hands plus one queue's worth queued.
    assert!(written <= 2 * u64::from(queue_lines), "{written} written");
    assert_eq!(output.text().lines().count() as u64, written);
    assert_eq!(handle.queue_stats().dropped_newest, dropped);
}

#[test]
fn long_lines_are_cut_on_a_character_boundary() {
    let output = Collect::default();
    let (writer, handle) = bounded_writer(10, 64, output.clone()).expect("writer");
    tracing::subscriber::with_default(subscriber(writer), || {
        tracing::info!("{}", "é".repeat(200));
        tracing::info!("short");
    });
    assert!(handle.shutdown(WAIT));
    let text = output.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].ends_with("…[truncated]"), "{}", lines[0]);
    assert!(lines[0].len() < 64, "{} bytes", lines[0].len());
    assert!(lines[1].ends_with("short"));
    assert_eq!(handle.truncated(), 1);
}

#[test]
fn lines_after_shutdown_are_counted_as_dropped() {
    let output = Collect::default();
    let (writer, handle) = bounded_writer(10, 1024, output.clone()).expect("writer");
    assert!(handle.shutdown(WAIT));
    tracing::subscriber::with_default(subscriber(writer), || tracing::info!("too late"));
    assert_eq!((handle.written(), handle.dropped()), (0, 1));
    assert!(output.text().is_empty());
}

#[test]
fn metrics_export_the_drops_and_the_queue() {
    let (open_gate, gate) = mpsc::channel();
    let stalled = Stalled {
        gate: Some(gate),
        inner: Collect::default(),
    };
    let (writer, handle) = bounded_writer(2, 1024, stalled).expect("writer");
    let telemetry = Telemetry::new("h".into());
    handle.register_metrics(&telemetry, 2, 2048);
    tracing::subscriber::with_default(subscriber(writer), || {
        for i in 0..50 {
            tracing::info!("event {i}");
        }
    });
    let dropped = handle.dropped();
    assert!(dropped > 0);
    let text = telemetry.render_metrics();
    assert!(
        text.contains(&format!("weir_log_dropped_total {dropped}")),
        "{text}"
    );
    assert!(text.contains("weir_log_truncated_total 0"), "{text}");
    assert!(
        text.contains(r#"weir_queue_bound_items{queue="log"} 2"#),
        "{text}"
    );
    open_gate.send(()).expect("the writer thread waits");
    assert!(handle.shutdown(WAIT));
}

fn stalled() -> (mpsc::Sender<()>, Stalled, Collect) {
    let (open_gate, gate) = mpsc::channel();
    let output = Collect::default();
    let stalled = Stalled {
        gate: Some(gate),
        inner: output.clone(),
    };
    (open_gate, stalled, output)
}

const CLEAR: &str = "\r\x1b[2K";

#[test]
fn status_lines_never_block_the_caller_and_the_newest_replaces_the_rest() {
    let (open_gate, stalled, output) = stalled();
    let (writer, handle) = bounded_writer(8, 1024, stalled).expect("writer");
    tracing::subscriber::with_default(subscriber(writer), || tracing::info!("a log line"));
    let started = Instant::now();
    for i in 0..1000 {
        handle.status_line(&format!("status {i}"));
    }
    let took = started.elapsed();
    // The output is stalled for 10 s: had a status line waited for it, this would too.
    assert!(
        took < Duration::from_secs(5),
        "status lines blocked for {took:?}"
    );
    // One in the writer's hands at most, one waiting: the rest were replaced.
    assert!(
        handle.status_dropped() >= 998,
        "{}",
        handle.status_dropped()
    );
    open_gate.send(()).expect("the writer thread waits");
    assert!(handle.shutdown(WAIT));
    let text = output.text();
    assert!(text.contains("a log line"), "{text:?}");
    assert!(
        text.ends_with(&format!("{CLEAR}status 999\n")),
        "the newest is drawn last and ended at shutdown: {text:?}"
    );
}

#[test]
fn log_lines_clear_the_status_line_and_draw_it_again_after() {
    let output = Collect::default();
    let (writer, handle) = bounded_writer(10, 1024, output.clone()).expect("writer");
    handle.status_line("in 5/s\nout 3/s");
    tracing::subscriber::with_default(subscriber(writer), || tracing::info!("hello"));
    assert!(handle.shutdown(WAIT));
    let text = output.text();
    let status = format!("{CLEAR}in 5/s out 3/s");
    let log = text
        .strip_prefix(&format!("{status}{CLEAR}"))
        .and_then(|rest| rest.strip_suffix(&format!("{status}\n")))
        .unwrap_or_else(|| panic!("status, cleared, log line, status again: {text:?}"));
    assert!(log.ends_with("hello\n") && !log.contains('\r'), "{log:?}");
    assert_eq!((handle.written(), handle.status_dropped()), (1, 0));
}

#[test]
fn an_ended_status_line_keeps_its_text_and_later_ones_are_ignored() {
    let output = Collect::default();
    let (writer, handle) = bounded_writer(10, 1024, output.clone()).expect("writer");
    handle.status_line("last");
    handle.end_status_line();
    handle.status_line("too late");
    tracing::subscriber::with_default(subscriber(writer), || tracing::info!("after"));
    assert!(handle.shutdown(WAIT));
    let text = output.text();
    let log = text
        .strip_prefix(&format!("{CLEAR}last\n"))
        .unwrap_or_else(|| panic!("the status line, then a newline: {text:?}"));
    assert!(log.ends_with("after\n") && !log.contains('\r'), "{log:?}");
    assert_eq!(handle.status_dropped(), 1);
}

#[test]
fn dropping_the_last_handle_does_not_wait_for_a_stalled_writer_but_stops_it() {
    let (open_gate, stalled, output) = stalled();
    let (writer, handle) = bounded_writer(8, 1024, stalled).expect("writer");
    let shared = Arc::clone(&writer.shared);
    tracing::subscriber::with_default(subscriber(writer), || tracing::info!("queued"));
    let started = Instant::now();
    drop(handle);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "the drop waited {took:?}");
    // Told to stop: once the output moves, the thread writes what it holds and ends.
    open_gate.send(()).expect("the writer thread waits");
    let state = shared.lock();
    let (state, _) = shared
        .finished
        .wait_timeout_while(state, WAIT, |state| !state.finished)
        .expect("not poisoned");
    assert!(state.finished, "the writer thread did not stop");
    drop(state);
    assert!(output.text().contains("queued"));
}

#[test]
fn shutdown_waits_for_a_stalled_writer_no_longer_than_its_timeout() {
    let (open_gate, stalled, output) = stalled();
    let (writer, handle) = bounded_writer(8, 1024, stalled).expect("writer");
    tracing::subscriber::with_default(subscriber(writer), || tracing::info!("queued"));
    let started = Instant::now();
    assert!(!handle.shutdown(Duration::from_millis(100)));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "shutdown waited {took:?}");
    open_gate.send(()).expect("the writer thread waits");
    assert!(handle.shutdown(WAIT), "finishes once the output moves");
    assert!(output.text().contains("queued"));
}

#[test]
fn init_refuses_a_bad_level() {
    let err = init("loud=sometimes=", LogFormat::Json, 10, 1024).expect_err("bad level");
    assert!(matches!(err, LogError::Level { .. }), "{err}");
    assert!(err.to_string().contains("expected a level"), "{err}");
}

fn json_subscriber(writer: BoundedLogWriter) -> impl tracing::Subscriber + Send + Sync {
    let format = writer.json_format();
    tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .event_format(format)
        .finish()
}

fn json_lines(text: &str) -> Vec<serde_json::Map<String, serde_json::Value>> {
    text.lines()
        .map(|line| match serde_json::from_str(line) {
            Ok(serde_json::Value::Object(map)) => map,
            other => panic!("not a JSON object: {line:?} ({other:?})"),
        })
        .collect()
}

#[test]
fn json_lines_carry_ts_level_target_component_message_and_fields() {
    let output = Collect::default();
    let (writer, handle) =
        bounded_writer_for(LogFormat::Json, 16, 4096, output.clone()).expect("writer");
    tracing::subscriber::with_default(json_subscriber(writer), || {
        tracing::info!(source = %"gen", records = 12_u64, ratio = 0.5, ok = true, "made durable");
        tracing::warn!("sink lake: write failed: disk full");
        tracing::error!(level = "shadowed", "the daemon as a whole");
    });
    // No status line between JSON lines.
    handle.status_line("in 5/s out 5/s");
    assert!(handle.shutdown(WAIT));
    let text = output.text();
    assert!(!text.contains('\r') && !text.contains("in 5/s"), "{text:?}");
    let lines = json_lines(&text);
    assert_eq!(lines.len(), 3, "{text}");
    let keys: Vec<&str> = lines[0].keys().map(String::as_str).collect();
    for key in [
        "ts",
        "level",
        "target",
        "component",
        "message",
        "source",
        "records",
    ] {
        assert!(keys.contains(&key), "{key} missing: {text}");
    }
    let ts = lines[0]["ts"].as_str().expect("ts");
    assert!(
        chrono::DateTime::parse_from_rfc3339(ts).is_ok() && ts.ends_with('Z'),
        "{ts}"
    );
    assert_eq!(lines[0]["level"], "INFO");
    assert_eq!(lines[0]["target"], "weir::logging::tests");
    assert_eq!(lines[0]["component"], "gen");
    assert_eq!(lines[0]["message"], "made durable");
    assert_eq!(lines[0]["records"], 12);
    assert_eq!(lines[0]["ratio"], 0.5);
    assert_eq!(lines[0]["ok"], true);
    // A component named in the message, the way most of weir's events name it.
    assert_eq!(lines[1]["component"], "lake");
    assert_eq!(lines[1]["sink"], "lake");
    assert_eq!(lines[1]["level"], "WARN");
    // No component; a field named like a key keeps its value under another name.
    assert!(!lines[2].contains_key("component"), "{text}");
    assert_eq!(lines[2]["level"], "ERROR");
    assert_eq!(lines[2]["field.level"], "shadowed");
}

#[test]
fn a_json_line_over_the_bound_is_shortened_and_still_parses() {
    let output = Collect::default();
    let (writer, handle) =
        bounded_writer_for(LogFormat::Json, 16, 300, output.clone()).expect("writer");
    let long = "x".repeat(5_000);
    tracing::subscriber::with_default(json_subscriber(writer), || {
        tracing::warn!(source = %"gen", detail = %long, "sink lake: {long}");
    });
    assert!(handle.shutdown(WAIT));
    let text = output.text();
    assert!(text.lines().all(|l| l.len() < 300), "{text}");
    let lines = json_lines(&text);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["truncated"], true);
    assert_eq!(lines[0]["component"], "gen");
    assert_eq!(handle.truncated(), 1);
    assert_eq!(handle.dropped(), 0);
    // A bound too small for any line: the line is dropped and counted, never cut.
    let output = Collect::default();
    let (writer, handle) =
        bounded_writer_for(LogFormat::Json, 16, 40, output.clone()).expect("writer");
    tracing::subscriber::with_default(json_subscriber(writer), || tracing::info!("{long}"));
    assert!(handle.shutdown(WAIT));
    assert_eq!(output.text(), "");
    assert_eq!((handle.truncated(), handle.dropped()), (1, 1));
}
