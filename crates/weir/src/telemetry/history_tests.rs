//! The history ring: bounds, memory, the sample interval, and values read from the same
//! figures as `/status` and `/metrics`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::*;
use crate::telemetry::{ComponentKind, State, Telemetry};

/// A telemetry whose `sources`, `sinks` and `wal` sections and metrics read the same
/// atomics, as the runtime registers them.
fn wired(records: &Arc<AtomicU64>, lag: &Arc<AtomicU64>, disk: &Arc<AtomicU64>) -> Telemetry {
    let telemetry = Telemetry::new("sha256:feed".into());
    telemetry
        .component(ComponentKind::Source, "gen")
        .set_state(State::Backpressured);
    telemetry
        .component(ComponentKind::Sink, "lake")
        .set_state(State::Running);
    let r = Arc::clone(records);
    telemetry.register_status("sources", move || {
        serde_json::json!({"gen": {"records": r.load(Ordering::Relaxed), "bytes": 10, "waiting_ms": 3200,
                                    "mqtt": {"qos0_dropped": 5, "qos0_dropped_at_shutdown": 1, "unacked": 9}}})
    });
    let (l, r) = (Arc::clone(lag), Arc::clone(records));
    telemetry.register_status("sinks", move || {
        serde_json::json!({"lake": {"records": r.load(Ordering::Relaxed) / 2,
                                     "cursor": {"lag_records": l.load(Ordering::Relaxed)}}})
    });
    let d = Arc::clone(disk);
    telemetry.register_status("wal", move || {
        serde_json::json!({"disk_bytes": d.load(Ordering::Relaxed), "max_disk": 1000, "budget_used": 0.5})
    });
    let r = Arc::clone(records);
    telemetry.register_counter_fn(
        "weir_source_records_total",
        "Records.",
        &[("source", "gen")],
        move || r.load(Ordering::Relaxed),
    );
    let l = Arc::clone(lag);
    telemetry.register_gauge_fn(
        "weir_sink_lag_records",
        "Lag.",
        &[("sink", "lake")],
        move || l.load(Ordering::Relaxed) as f64,
    );
    let d = Arc::clone(disk);
    telemetry.register_gauge_fn("weir_wal_disk_used_bytes", "Disk.", &[], move || {
        d.load(Ordering::Relaxed) as f64
    });
    telemetry.register_queue("wal->lake", Some(4), None, weir_flow::FlowStats::default);
    telemetry
}

fn layout() -> HistoryLayout {
    HistoryLayout::pipeline(["gen"], ["lake"])
}

/// The value of the sample line `name{labels}` in Prometheus text.
fn metric(text: &str, line_start: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(line_start)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{line_start} missing from\n{text}"))
        .parse()
        .expect("a number")
}

#[test]
fn the_layout_names_every_component_and_its_memory_is_one_allocation() {
    let layout = layout();
    let names: Vec<&str> = layout.series().iter().map(|s| s.name.as_str()).collect();
    // 1 source × 7 + the WAL's 7 + 1 sink × 10 + 2 queues × 2.
    assert_eq!(names.len(), 28, "{names:?}");
    for name in [
        "sources.gen.records",
        "sources.gen.refused_records",
        "wal.budget_used",
        "wal.evicted_records",
        "sinks.lake.lag_bytes",
        "sinks.lake.lag_age_ms",
        "sinks.lake.gap_records",
        "queues.source->wal.fill",
        "queues.wal->lake.fill",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert_eq!(layout.memory_bytes(SAMPLES), 900 * 29 * 8);
    let history = History::new(layout.clone(), SAMPLE_INTERVAL, SAMPLES);
    assert_eq!(history.memory_bytes(), layout.memory_bytes(SAMPLES));
    assert_eq!(SAMPLES as u64 * SAMPLE_INTERVAL.as_secs(), WINDOW.as_secs());
}

#[test]
fn the_ring_keeps_the_newest_samples_in_order_and_never_grows() {
    let (records, lag, disk) = Default::default();
    let telemetry = wired(&records, &lag, &disk);
    let history = History::new(layout(), SAMPLE_INTERVAL, 5);
    let before = history.memory_bytes();
    for i in 0..12u64 {
        records.store(i * 100, Ordering::Relaxed);
        history.record(1_000 * (i + 1), &telemetry.status());
    }
    let report = history.report(None);
    assert_eq!((report.held, report.capacity), (5, 5));
    assert_eq!(report.t_unix_ms, [8_000, 9_000, 10_000, 11_000, 12_000]);
    let values = &report.series("sources.gen.records").expect("series").values;
    assert_eq!(
        values,
        &[
            Some(700.0),
            Some(800.0),
            Some(900.0),
            Some(1000.0),
            Some(1100.0)
        ]
    );
    let rate = report.rate("sources.gen.records").expect("a rate");
    assert!((rate - 100.0).abs() < 1e-9, "{rate}");
    assert_eq!(history.memory_bytes(), before, "allocated once");
    assert_eq!(report.memory_bytes, before);
    // `since` returns only what is newer: what the dashboard polls each second.
    let newer = history.report(Some(10_000));
    assert_eq!(newer.t_unix_ms, [11_000, 12_000]);
    assert!(newer.series.iter().all(|s| s.values.len() == 2));
    assert!(history.report(Some(12_000)).t_unix_ms.is_empty());
}

#[test]
fn values_agree_with_status_and_metrics_and_absent_ones_are_null() {
    let (records, lag, disk) = Default::default();
    let telemetry = wired(&records, &lag, &disk);
    records.store(4242, Ordering::Relaxed);
    lag.store(17, Ordering::Relaxed);
    disk.store(640, Ordering::Relaxed);
    let history = telemetry.install_history(History::new(layout(), SAMPLE_INTERVAL, 10));
    telemetry.sample_history();
    let report = history.report(None);
    let metrics = telemetry.render_metrics();
    assert_eq!(
        report.last("sources.gen.records"),
        Some(metric(
            &metrics,
            r#"weir_source_records_total{source="gen"}"#
        ))
    );
    assert_eq!(
        report.last("sinks.lake.lag_records"),
        Some(metric(&metrics, r#"weir_sink_lag_records{sink="lake"}"#))
    );
    assert_eq!(
        report.last("wal.disk_bytes"),
        Some(metric(&metrics, "weir_wal_disk_used_bytes"))
    );
    let status = telemetry.status();
    assert_eq!(report.last("sinks.lake.records"), Some(2121.0));
    assert_eq!(report.last("sources.gen.waiting_ms"), Some(3200.0));
    assert_eq!(
        report.last("sources.gen.dropped"),
        Some(6.0),
        "the details' drops summed"
    );
    let state = State::NAMES.iter().position(|s| *s == "backpressured");
    assert_eq!(report.last("sources.gen.state"), state.map(|i| i as f64));
    assert_eq!(
        report.last("queues.wal->lake.depth"),
        Some(status.queues[0].depth as f64)
    );
    // Not in the report: no cursor bytes, no source->wal queue, no WAL component.
    for absent in [
        "sinks.lake.lag_bytes",
        "queues.source->wal.fill",
        "wal.state",
    ] {
        assert_eq!(
            report.series(absent).expect("series").values,
            [None],
            "{absent}"
        );
    }
    let shown = &telemetry.status().sections["history"];
    assert_eq!(shown["held"], 1);
    assert_eq!(shown["capacity"], 10);
    assert_eq!(shown["interval_ms"], 1000);
    assert_eq!(shown["series"], 28);
    assert_eq!(shown["memory_bytes"], 10 * 29 * 8);
    let json = serde_json::to_value(&report).expect("json");
    assert!(
        json["series"]
            .as_array()
            .expect("array")
            .iter()
            .any(|s| s["values"][0].is_null())
    );
}

#[tokio::test(start_paused = true)]
async fn the_sampler_takes_one_sample_a_second() {
    let (records, lag, disk) = Default::default();
    let telemetry = wired(&records, &lag, &disk);
    let sampler = telemetry.start_history(layout());
    tokio::task::yield_now().await;
    let history = Arc::clone(telemetry.history().expect("installed"));
    assert_eq!(history.report(None).held, 1, "the first sample at once");
    for n in 2..=6 {
        tokio::time::sleep(SAMPLE_INTERVAL).await;
        tokio::task::yield_now().await;
        assert_eq!(history.report(None).held, n);
    }
    let report = history.report(None);
    let gaps: Vec<u64> = report.t_unix_ms.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps, [1000; 5], "{:?}", report.t_unix_ms);
    assert_eq!(report.interval_ms, 1000);
    sampler.abort();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(history.report(None).held, 6, "stopped with the task");
}

#[test]
fn the_forecast_extrapolates_the_net_rate_to_the_budget() {
    // +10 bytes/s with 500 of 1000 used: full in 50 s.
    let points: Vec<(u64, f64)> = (0..10)
        .map(|i| (i * 1000, 410.0 + 10.0 * i as f64))
        .collect();
    let f = forecast(&points, Some(1000.0));
    assert_eq!(f.net_bytes_per_second, Some(10.0));
    assert_eq!(f.trend, crate::telemetry::trend::Direction::Filling);
    assert_eq!(f.full_in_seconds, Some(50.0));
    assert_eq!(f.disk_bytes, Some(500.0));
    // Shrinking: no time to full.
    let shrinking = forecast(&[(0, 900.0), (1000, 800.0)], Some(1000.0));
    assert_eq!(shrinking.net_bytes_per_second, Some(-100.0));
    assert_eq!(shrinking.full_in_seconds, None);
    // Full already: zero, whatever the rate.
    assert_eq!(
        forecast(&[(0, 1000.0), (1000, 1000.0)], Some(1000.0)).full_in_seconds,
        Some(0.0)
    );
    // One point, or none: no rate.
    assert_eq!(forecast(&[(0, 5.0)], Some(10.0)).net_bytes_per_second, None);
    assert_eq!(forecast(&[], None), Forecast::default());
}

#[test]
fn the_report_carries_the_forecast_over_the_latest_samples() {
    let (records, lag, disk) = Default::default();
    let telemetry = wired(&records, &lag, &disk);
    let history = History::new(layout(), SAMPLE_INTERVAL, SAMPLES);
    for i in 0..100u64 {
        // Flat for 40 samples, then +5 bytes a second: only the latest 60 count.
        disk.store(
            if i < 40 { 100 } else { 100 + 5 * (i - 39) },
            Ordering::Relaxed,
        );
        history.record(i * 1000, &telemetry.status());
    }
    let f = history.report(Some(99_000)).wal_forecast;
    assert_eq!(f.max_disk, Some(1000.0));
    assert_eq!(f.disk_bytes, Some(400.0));
    let rate = f.net_bytes_per_second.expect("a rate");
    assert!((rate - 5.0).abs() < 1e-9, "{rate}");
    assert_eq!(f.trend, crate::telemetry::trend::Direction::Filling);
    let full_in = f.full_in_seconds.expect("filling");
    assert!((full_in - 120.0).abs() < 1e-6, "{full_in}");
}

/// A relayout (a reload added a sink and removed a source) keeps the samples of the
/// series in both layouts, reads a new series as absent before it, and forgets the
/// series of what was removed.
#[test]
fn a_relayout_keeps_the_samples_of_the_series_that_stay() {
    let (records, lag, disk) = Default::default();
    let telemetry = wired(&records, &lag, &disk);
    let history = History::new(layout(), SAMPLE_INTERVAL, 5);
    for i in 0..3u64 {
        records.store(i * 10, Ordering::Relaxed);
        history.record(1_000 * (i + 1), &telemetry.status());
    }
    history.relayout(HistoryLayout::pipeline(["other"], ["lake", "new"]));
    history.record(4_000, &telemetry.status());
    let report = history.report(None);
    assert_eq!(report.t_unix_ms, [1_000, 2_000, 3_000, 4_000]);
    assert!(report.series("sources.gen.records").is_none(), "forgotten");
    let kept = &report.series("wal.disk_bytes").expect("kept").values;
    assert_eq!(kept.len(), 4);
    assert!(kept.iter().all(Option::is_some), "{kept:?}");
    let new = &report.series("sinks.new.records").expect("added").values;
    assert_eq!(&new[..3], &[None, None, None], "absent before the reload");
    assert_eq!(
        history.layout(),
        HistoryLayout::pipeline(["other"], ["lake", "new"])
    );
    assert!(history.status()["series"].as_u64().unwrap() > layout().series().len() as u64);
}
