//! The adaptive credit window on seed 000's scenario: a paced source (one item every
//! 10 ms) and a consumer at 5 ms per item, 20 ms from t=2000 to t=5999.

use std::collections::VecDeque;
use std::num::NonZeroU64;
use std::time::Duration;

use weir_flow::Timestamp;
use weir_flow::credit::{AdaptiveWindow, AdaptiveWindowConfig, DemandCore, WindowedDemand};

struct Outcome {
    completed: u64,
    max_queue_wait_ms: u64,
    /// The longest queue wait from t=3000 on: after the first shrink has taken effect.
    settled_max_queue_wait_ms: u64,
    finished_ms: u64,
    min_window: u64,
}

/// A millisecond-step simulation of the lesson's credit row, with the window either
/// fixed or steered by `adaptive`.
fn run(window: u64, mut adaptive: Option<AdaptiveWindow>) -> Outcome {
    const TOTAL: u64 = 600;
    let mut core = DemandCore::new();
    let mut demand = WindowedDemand::new(NonZeroU64::new(window).unwrap());
    if let Some(n) = demand.top_up() {
        let _ = core.request(n.get());
    }
    let mut next_item = 0;
    let mut ready_at = 0;
    let mut queue: VecDeque<u64> = VecDeque::new(); // arrival times
    let mut busy_until: Option<u64> = None;
    let mut outcome = Outcome {
        completed: 0,
        max_queue_wait_ms: 0,
        settled_max_queue_wait_ms: 0,
        finished_ms: 0,
        min_window: window,
    };
    for now in 0..100_000u64 {
        if busy_until == Some(now) {
            busy_until = None;
            outcome.completed += 1;
            demand.finished();
            if let Some(adaptive) = adaptive.as_mut() {
                let oldest_age = queue.front().map_or(0, |at| now - at);
                let w = adaptive.observe(
                    Timestamp::from_millis(now),
                    Duration::from_millis(oldest_age),
                );
                demand.set_window(w);
                outcome.min_window = outcome.min_window.min(w.get());
            }
            if let Some(n) = demand.top_up() {
                let _ = core.request(n.get());
            }
        }
        // The paced publisher emits against demand.
        if next_item < TOTAL && now >= ready_at && core.try_claim() {
            queue.push_back(now);
            next_item += 1;
            ready_at = now + 10;
        }
        if busy_until.is_none()
            && let Some(arrived) = queue.pop_front()
        {
            outcome.max_queue_wait_ms = outcome.max_queue_wait_ms.max(now - arrived);
            if now >= 3_000 {
                outcome.settled_max_queue_wait_ms =
                    outcome.settled_max_queue_wait_ms.max(now - arrived);
            }
            let service = if (2_000..6_000).contains(&now) { 20 } else { 5 };
            busy_until = Some(now + service);
        }
        if outcome.completed == TOTAL {
            outcome.finished_ms = now;
            break;
        }
    }
    outcome
}

#[test]
fn fixed_window_matches_the_lessons_credit_row_shape() {
    let fixed = run(10, None);
    assert_eq!(fixed.completed, 600);
    // The lesson's credit row: max queue wait 180 ms with a window of 10.
    assert_eq!(fixed.max_queue_wait_ms, 180);
}

#[test]
fn adaptive_window_holds_the_oldest_age_near_its_target() {
    let config = AdaptiveWindowConfig::new(NonZeroU64::new(10).unwrap(), Duration::from_millis(60));
    let adaptive = run(10, Some(AdaptiveWindow::new(config).unwrap()));
    let fixed = run(10, None);
    assert_eq!(
        adaptive.completed, 600,
        "nothing is lost, only never produced early"
    );
    assert!(
        adaptive.max_queue_wait_ms < fixed.max_queue_wait_ms,
        "adaptive {} ms vs fixed {} ms",
        adaptive.max_queue_wait_ms,
        fixed.max_queue_wait_ms
    );
    eprintln!(
        "adaptive: max wait {} ms, settled {} ms, min window {}, finished {} ms; fixed: {} ms, settled {} ms, finished {} ms",
        adaptive.max_queue_wait_ms,
        adaptive.settled_max_queue_wait_ms,
        adaptive.min_window,
        adaptive.finished_ms,
        fixed.max_queue_wait_ms,
        fixed.settled_max_queue_wait_ms,
        fixed.finished_ms
    );
    assert!(
        adaptive.settled_max_queue_wait_ms <= 120,
        "{} ms",
        adaptive.settled_max_queue_wait_ms
    );
    assert!(
        adaptive.min_window < 10,
        "the window shrank in the slow period"
    );
    // Throughput is the consumer's either way: the finish time barely moves.
    assert!(adaptive.finished_ms.abs_diff(fixed.finished_ms) <= 200);
}

#[test]
fn adaptive_window_stays_open_for_a_healthy_consumer() {
    let config = AdaptiveWindowConfig::new(NonZeroU64::new(10).unwrap(), Duration::from_millis(60));
    let mut adaptive = AdaptiveWindow::new(config).unwrap();
    let mut now = Timestamp::ZERO;
    for _ in 0..100 {
        now = now + Duration::from_millis(10);
        assert_eq!(adaptive.observe(now, Duration::from_millis(5)).get(), 10);
    }
    assert_eq!(adaptive.shrinks(), 0);
}
