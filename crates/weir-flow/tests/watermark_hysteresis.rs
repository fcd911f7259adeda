//! The watermark controller: alternation, exactly one transition per crossing, and
//! seed 001's pause/resume consumer.

use std::time::Duration;

use proptest::prelude::*;
use weir_flow::Timestamp;
use weir_flow::watermark::{Transition, Watermark, WatermarkGate};

proptest! {
    /// Transitions alternate Pause, Resume, Pause, ...; a Pause happens exactly at an
    /// observation with `depth >= high` made while running, a Resume exactly at one
    /// with `depth <= low` made while paused, and nothing else changes the state.
    #[test]
    fn transitions_alternate_once_per_crossing(
        low in 0u64..50,
        band in 1u64..50,
        depths in proptest::collection::vec(0u64..120, 1..400),
        resets in proptest::collection::vec(any::<bool>(), 400),
    ) {
        let high = low + band;
        let mut w = Watermark::new(low, high).unwrap();
        let mut last: Option<Transition> = None;
        let mut paused = false;
        for (i, depth) in depths.into_iter().enumerate() {
            let now = Timestamp::from_millis(i as u64);
            if resets[i] && i % 7 == 0 {
                w.reset(now);
                paused = false;
                last = None;
            }
            let got = w.observe(now, depth);
            let expected = if !paused && depth >= high {
                Some(Transition::Pause)
            } else if paused && depth <= low {
                Some(Transition::Resume)
            } else {
                None
            };
            prop_assert_eq!(got, expected, "depth {} paused {}", depth, paused);
            if let Some(t) = got {
                prop_assert_ne!(Some(t), last, "two {:?} in a row", t);
                if last.is_none() {
                    prop_assert_eq!(t, Transition::Pause, "the first transition is a Pause");
                }
                last = Some(t);
                paused = t == Transition::Pause;
            }
            prop_assert_eq!(w.is_paused(), paused);
        }
        prop_assert!(w.pauses() >= w.resumes());
        prop_assert!(w.pauses() - w.resumes() <= w.resets() + 1);
    }

    /// A depth that crosses the high watermark once and stays above it, however it
    /// wobbles, pauses exactly once.
    #[test]
    fn wobbling_above_high_pauses_once(wobble in proptest::collection::vec(100u64..200, 1..200)) {
        let mut w = Watermark::new(10, 100).unwrap();
        let transitions: Vec<_> = wobble
            .into_iter()
            .filter_map(|d| w.observe(Timestamp::ZERO, d))
            .collect();
        prop_assert_eq!(transitions, vec![Transition::Pause]);
    }
}

/// Seed 001's bounded consumer: 500 records per poll, 1,000 µs per record downstream,
/// pause at 1600, resume at 400. The queue peaks at about one poll above the high
/// watermark (the seed saw 1995), never near the 30,000 an unbounded hand-off takes in.
#[test]
fn seed_001_pause_resume_bounds_the_hand_off_queue() {
    let mut w = Watermark::new(400, 1_600).unwrap();
    let (mut fetched, mut processed, mut queue, mut max_queue) = (0u64, 0u64, 0u64, 0u64);
    let mut log = Vec::new();
    let mut now_ms = 0u64;
    while processed < 30_000 {
        // The poll loop runs every 10 ms and keeps polling while paused (heartbeats).
        if let Some(t) = w.observe(Timestamp::from_millis(now_ms), queue) {
            log.push((t, queue));
        }
        if !w.is_paused() && fetched < 30_000 {
            let batch = 500.min(30_000 - fetched);
            fetched += batch;
            queue += batch;
            max_queue = max_queue.max(queue);
        }
        // 10 ms of downstream work at 1 ms per record.
        let done = 10.min(queue);
        queue -= done;
        processed += done;
        now_ms += 10;
    }
    assert_eq!(processed, 30_000);
    assert!(max_queue <= 1_600 + 500, "max queue {max_queue}");
    assert!(max_queue >= 1_600);
    assert!(log.windows(2).all(|p| p[0].0 != p[1].0), "alternating");
    assert!(log.iter().all(|(t, depth)| match t {
        Transition::Pause => *depth >= 1_600,
        Transition::Resume => *depth <= 400,
    }));
    let paused = w.paused_time(Timestamp::from_millis(now_ms));
    assert!(paused > Duration::from_secs(10), "paused for {paused:?}");
    assert_eq!(
        w.pauses(),
        log.iter().filter(|(t, _)| *t == Transition::Pause).count() as u64
    );
}

#[tokio::test(start_paused = true)]
async fn gate_holds_producers_until_resume_and_reset_releases_them() {
    let gate = WatermarkGate::new(Watermark::new(1, 5).unwrap());
    gate.wait_running().await; // running: returns at once
    assert_eq!(gate.observe(5), Some(Transition::Pause));
    let waiter = {
        let gate = gate.clone();
        tokio::spawn(async move { gate.wait_running().await })
    };
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(!waiter.is_finished());
    assert_eq!(gate.observe(3), None);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(!waiter.is_finished(), "inside the band: still paused");
    gate.reset();
    waiter.await.unwrap();
    assert!(!gate.is_paused());
    let (pauses, resumes, paused) = gate.counts();
    assert_eq!((pauses, resumes), (1, 0));
    assert_eq!(paused, Duration::from_millis(31));
}
