//! Seed 001's shape: fetching fast does not process faster; pause/resume keeps the
//! queue and the dwell small; the AIMD limiter backs off when the downstream slows.

use std::time::Duration;

use weir_sim::kafka::{AimdExperiment, HandOff, HandOffConfig, run_aimd, run_handoff};

#[test]
fn pause_resume_bounds_the_queue_and_the_dwell_without_costing_throughput() {
    let config = HandOffConfig::default();
    let unbounded = run_handoff(&config, HandOff::Unbounded).unwrap();
    let bounded = run_handoff(&config, HandOff::Watermarked).unwrap();

    // The unbounded loop fetches everything in a few seconds at ~8,000/s.
    assert!(
        unbounded.fetch_all < Duration::from_secs(5),
        "{unbounded:?}"
    );
    assert!(unbounded.fetch_phase_rate(config.records) > 7_000.0);
    // The downstream sets the pace either way: 30,000 × 1 ms ≈ 30 s.
    for r in [&unbounded, &bounded] {
        let total = r.total.as_secs_f64();
        assert!((30.0..31.0).contains(&total), "{r:?}");
    }
    // The watermarks keep the queue at most one poll above the high mark.
    assert!(
        bounded.max_queue <= config.high + config.max_poll_records,
        "{bounded:?}"
    );
    assert!(unbounded.max_queue > 20_000, "{unbounded:?}");
    // p99 dwell falls by an order of magnitude; fetching ends much later.
    assert!(
        bounded.p99_dwell * 10 < unbounded.p99_dwell,
        "{bounded:?} vs {unbounded:?}"
    );
    assert!(bounded.fetch_all > Duration::from_secs(25));
    assert!(bounded.pauses > 10);
    assert_eq!(unbounded.pauses, 0);
}

#[test]
fn the_paused_loop_does_not_fetch() {
    let bounded = run_handoff(&HandOffConfig::default(), HandOff::Watermarked).unwrap();
    // Between a pause and the next resume, `fetched` does not move (seed 001's log).
    let fetched = |line: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix("fetched="))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap()
    };
    let paused = bounded
        .log
        .iter()
        .position(|l| l.contains("paused"))
        .unwrap();
    let resumed = bounded
        .log
        .iter()
        .position(|l| l.contains("resumed"))
        .unwrap();
    assert!(paused < resumed);
    assert_eq!(
        fetched(&bounded.log[paused]),
        fetched(&bounded.log[resumed])
    );
}

#[test]
fn inconsistent_watermarks_are_refused() {
    let config = HandOffConfig {
        low: 1_600,
        high: 400,
        ..HandOffConfig::default()
    };
    assert!(run_handoff(&config, HandOff::Watermarked).is_err());
}

#[test]
fn the_aimd_limiter_backs_off_when_the_downstream_slows_and_recovers() {
    let experiment = AimdExperiment::default();
    let result = run_aimd(&experiment).unwrap();
    let rate_at = |s: u64| {
        result
            .trace
            .iter()
            .find(|r| r.at == Duration::from_secs(s))
            .map(|r| r.rate)
            .unwrap()
    };
    // Slow phase (400/s from 20 s): the limit ends up below the capacity.
    assert!(rate_at(30) < 400.0, "{:?}", result.trace);
    // Fast phase again: the limit climbs additively.
    assert!(rate_at(60) > rate_at(42) + 300.0, "{:?}", result.trace);
    assert!(result.decreases > 0 && result.increases > 0);
    // Once it has backed off, the latency is back under the target.
    let last = result.trace.last().unwrap();
    assert!(last.p99_latency <= experiment.target_latency);
}

#[test]
fn the_kafka_report_is_the_same_every_time() {
    let a = weir_sim::kafka::report(&HandOffConfig::default(), &AimdExperiment::default());
    let b = weir_sim::kafka::report(&HandOffConfig::default(), &AimdExperiment::default());
    assert_eq!(a.unwrap(), b.unwrap());
}
