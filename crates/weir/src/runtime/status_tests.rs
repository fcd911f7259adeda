//! The runtime's sections, read by the `/history` sampler: every series of the layout
//! finds its figure in the report the real registry produces, and the values are the
//! ones `/metrics` serves.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use weir_flow::semaphore::{DualSemaphore, DualSemaphoreConfig};
use weir_wal::{Batch, CursorConfig, OnFull, Wal, WalConfig};

use super::{Registry, SinkEntry};
use crate::pipeline::{SinkStats, SourceStats};
use crate::quarantine::Quarantine;
use crate::telemetry::history::{History, HistoryLayout, SAMPLE_INTERVAL};
use crate::telemetry::{ComponentKind, State, Telemetry};

/// The value of the sample line starting `name{labels}` in Prometheus text.
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{series} missing from\n{text}"))
        .parse()
        .expect("a number")
}

#[test]
fn every_history_series_is_read_from_the_runtime_report_and_agrees_with_metrics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = WalConfig::builder(dir.path().join("wal"))
        .max_disk(4 << 20)
        .segment_bytes(1 << 20)
        .on_full(OnFull::Block)
        .cursor("lake", CursorConfig::default())
        .build()
        .expect("wal config");
    let (wal, _) = Wal::open(config).expect("open the WAL");
    let telemetry = Telemetry::new("sha256:feed".into());
    telemetry
        .component(ComponentKind::Wal, "wal")
        .set_state(State::Running);
    let source = Arc::new(SourceStats::new(
        telemetry.component(ComponentKind::Source, "gen"),
    ));
    let sink = Arc::new(SinkStats::new(
        telemetry.component(ComponentKind::Sink, "lake"),
    ));
    source.records.store(1200, Ordering::Relaxed);
    source.bytes.store(34_000, Ordering::Relaxed);
    source.refused_records.store(7, Ordering::Relaxed);
    sink.records.store(1100, Ordering::Relaxed);
    sink.bytes.store(30_000, Ordering::Relaxed);
    sink.gap_records.store(3, Ordering::Relaxed);
    sink.retries.store(2, Ordering::Relaxed);
    let registry = Arc::new(Registry::new(
        wal.clone(),
        DualSemaphore::new(DualSemaphoreConfig::new(256, 8 << 20)),
    ));
    registry.add_source(&telemetry, ("gen".into(), "generator", Arc::clone(&source)));
    registry.add_sink(
        &telemetry,
        SinkEntry {
            name: "lake".into(),
            kind: "blackhole",
            stats: Arc::clone(&sink),
            channel_batches: 2,
            channel_bytes: 1 << 20,
            max_lag: serde_json::Value::Null,
        },
    );
    registry.register(&telemetry, serde_json::json!({}));
    let quarantine = Quarantine::new(&dir.path().join("quarantine"), 1 << 20).expect("quarantine");
    let q = quarantine.clone();
    telemetry.register_status("quarantine", move || {
        serde_json::to_value(q.stats()).unwrap_or_default()
    });
    // Something in the WAL, not yet read by the sink: a lag in records and bytes.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut batch = Batch::new();
    for _ in 0..10 {
        batch.push(&[7u8; 100]).expect("push");
    }
    runtime.block_on(wal.append(batch)).expect("append");

    let layout = HistoryLayout::pipeline(["gen"], ["lake"]);
    let history = telemetry.install_history(History::new(layout.clone(), SAMPLE_INTERVAL, 4));
    telemetry.sample_history();
    let report = history.report(None);
    let missing: Vec<&str> = report
        .series
        .iter()
        .filter(|s| s.values.last().copied().flatten().is_none())
        .map(|s| s.name.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "series absent from the runtime's report: {missing:?}"
    );

    let metrics = telemetry.render_metrics();
    for (series, line) in [
        (
            "sources.gen.records",
            r#"weir_source_records_total{source="gen"}"#,
        ),
        (
            "sources.gen.bytes",
            r#"weir_source_bytes_total{source="gen"}"#,
        ),
        (
            "sources.gen.refused_records",
            r#"weir_source_rejected_total{source="gen",reason="wal_refused"}"#,
        ),
        (
            "sinks.lake.records",
            r#"weir_sink_records_total{sink="lake"}"#,
        ),
        ("sinks.lake.bytes", r#"weir_sink_bytes_total{sink="lake"}"#),
        (
            "sinks.lake.gap_records",
            r#"weir_wal_gap_records_total{sink="lake"}"#,
        ),
        ("sinks.lake.retries", r#"weir_retry_total{sink="lake"}"#),
        (
            "sinks.lake.lag_records",
            r#"weir_sink_lag_records{sink="lake"}"#,
        ),
        ("wal.disk_bytes", "weir_wal_disk_used_bytes"),
        ("wal.max_disk", "weir_wal_disk_max_bytes"),
        ("wal.evicted_records", "weir_wal_evicted_records_total"),
    ] {
        assert_eq!(
            report.last(series),
            Some(metric(&metrics, line)),
            "{series} vs {line}"
        );
    }
    assert_eq!(report.last("sinks.lake.lag_records"), Some(10.0));
    assert!(report.last("sinks.lake.lag_bytes").unwrap_or(0.0) > 0.0);
    assert_eq!(report.last("sinks.lake.quarantine_dropped"), Some(0.0));
    assert_eq!(report.last("sources.gen.records"), Some(1200.0));
    // The writer's time in fsyncs and in writes, as the WAL counts it (no append since).
    let stats = wal.stats();
    assert!(
        stats.fsync_time_us >= stats.fsyncs && stats.fsyncs > 0,
        "{stats:?}"
    );
    assert_eq!(
        metric(&metrics, "weir_wal_fsync_microseconds_total"),
        stats.fsync_time_us as f64
    );
    assert_eq!(
        metric(&metrics, "weir_wal_write_microseconds_total"),
        stats.write_time_us as f64
    );
    runtime.block_on(wal.close());
}
