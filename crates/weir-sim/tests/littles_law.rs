//! Seed 002's shape on the real ordered stage.

use std::time::Duration;

use weir_sim::littles_law::{Latency, LittlesLaw, report, run_depth};

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn one_at_a_time_is_pinned_at_one_over_latency() {
    let experiment = LittlesLaw {
        operations: 200,
        ..LittlesLaw::default()
    };
    let r = run_depth(&experiment, Latency::Fixed(SECOND), 1).unwrap();
    // Each operation takes 10 ms on the link plus 1 s: 1 / 1.01 s.
    assert!((r.throughput - 1.0 / 1.01).abs() < 0.01, "{r:?}");
    assert_eq!(r.max_held_back, 0);
}

#[test]
fn throughput_grows_with_depth_until_the_link_binds() {
    let experiment = LittlesLaw::default();
    let throughputs: Vec<f64> = experiment
        .depths
        .iter()
        .map(|&d| {
            run_depth(&experiment, Latency::Fixed(SECOND), d)
                .unwrap()
                .throughput
        })
        .collect();
    // Doubling the depth doubles throughput while depth/latency is below the link.
    for (i, pair) in throughputs.windows(2).enumerate() {
        let depth = experiment.depths[i];
        if depth * 2 <= 64 {
            assert!(pair[1] > 1.9 * pair[0], "depth {depth}: {throughputs:?}");
        }
    }
    // Never above the link's 100/s, and close to it at the top.
    assert!(throughputs.iter().all(|&t| t <= 100.0));
    assert!(
        throughputs.last().copied().unwrap() > 90.0,
        "{throughputs:?}"
    );
}

#[test]
fn a_heavy_tail_holds_results_back_within_the_reorder_bound() {
    let experiment = LittlesLaw {
        operations: 500,
        ..LittlesLaw::default()
    };
    let latency = Latency::LogNormal {
        median: SECOND,
        sigma: 0.8,
        seed: 7,
    };
    for depth in [1, 8, 64] {
        let r = run_depth(&experiment, latency, depth).unwrap();
        assert!(r.max_held_back < 2 * depth, "{r:?}");
        if depth > 1 {
            assert!(r.max_held_back > 0, "{r:?}");
        }
        assert!(r.p99 >= r.p50);
    }
}

#[test]
fn a_zero_depth_is_refused() {
    assert!(run_depth(&LittlesLaw::default(), Latency::Fixed(SECOND), 0).is_err());
}

#[test]
fn the_report_is_the_same_every_time_and_changes_with_the_seed() {
    let experiment = LittlesLaw {
        operations: 300,
        ..LittlesLaw::default()
    };
    let a = report(&experiment, SECOND, 1).unwrap();
    assert_eq!(a, report(&experiment, SECOND, 1).unwrap());
    assert_ne!(a, report(&experiment, SECOND, 2).unwrap());
}

#[test]
fn held_back_over_time_is_recorded_and_bounded() {
    let experiment = LittlesLaw {
        operations: 300,
        ..LittlesLaw::default()
    };
    let heavy = Latency::LogNormal {
        median: SECOND,
        sigma: 0.8,
        seed: 7,
    };
    let depth = 8;
    let r = run_depth(&experiment, heavy, depth).unwrap();
    // One point per completion, in time order.
    assert_eq!(r.held_back_over_time.len(), 300);
    assert!(r.held_back_over_time.windows(2).all(|w| w[0].0 <= w[1].0));
    // Never above the reorder bound (2 × depth), never above the reported maximum,
    // and a heavy tail does hold results back at some point.
    let peak = r.held_back_over_time.iter().map(|&(_, h)| h).max().unwrap();
    assert!(peak <= r.max_held_back && peak <= 2 * depth);
    assert!(peak > 0);
    // Everything is released at the end.
    assert_eq!(r.held_back_over_time.last().unwrap().1, 0);
    let csv = r.held_back_csv();
    assert!(csv.starts_with("t_ms,held_back\n"));
    assert_eq!(csv.lines().count(), 301);

    // A fixed latency completes in order: nothing is ever held back.
    let fixed = run_depth(&experiment, Latency::Fixed(SECOND), depth).unwrap();
    assert!(fixed.held_back_over_time.iter().all(|&(_, h)| h == 0));
}
