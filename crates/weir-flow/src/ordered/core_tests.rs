use std::num::{NonZeroU32, NonZeroUsize};
use std::time::Duration;

use super::*;
use crate::ordered::RetryPolicy;

fn ms(n: u64) -> Timestamp {
    Timestamp::from_millis(n)
}

fn config(n: usize) -> OrderedConfig {
    let mut c = OrderedConfig::new(NonZeroUsize::new(n).unwrap());
    c.attempt_timeout = Some(Duration::from_millis(100));
    c.retry = RetryPolicy {
        max_attempts: NonZeroU32::new(3).unwrap(),
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(15),
        multiplier: 2.0,
        ..RetryPolicy::default()
    };
    c
}

/// Full jitter: every wait lies in `[0, backoff]`, the waits differ, and the same seed
/// draws the same waits.
#[test]
fn full_jitter_spreads_retries_within_the_backoff_and_is_seeded() {
    let waits = |seed: u64| {
        let mut c = config(64);
        c.retry = RetryPolicy {
            max_attempts: NonZeroU32::new(2).unwrap(),
            initial_backoff: Duration::from_millis(1_000),
            max_backoff: Duration::from_millis(1_000),
            ..RetryPolicy::default()
        }
        .with_full_jitter(seed);
        let mut stage: OrderedCore<u32, &str> = OrderedCore::new(c).unwrap();
        (0..64)
            .map(|_| {
                let a = stage.try_submit(ms(0)).unwrap();
                match stage.complete(a, Err("x"), 0, ms(0)) {
                    Completion::RetryAt(at) => at.as_millis(),
                    other => panic!("expected a retry, got {other:?}"),
                }
            })
            .collect::<Vec<u64>>()
    };
    let first = waits(7);
    assert!(first.iter().all(|&w| w <= 1_000), "{first:?}");
    let distinct: std::collections::BTreeSet<u64> = first.iter().copied().collect();
    assert!(distinct.len() > 32, "waits should spread: {first:?}");
    assert!(first.iter().any(|&w| w < 500) && first.iter().any(|&w| w >= 500));
    assert_eq!(first, waits(7), "seeded");
    assert_ne!(first, waits(8));
}

#[test]
fn failures_are_retried_with_capped_backoff_then_released_in_order() {
    let mut stage: OrderedCore<u32, &str> = OrderedCore::new(config(2)).unwrap();
    let a = stage.try_submit(ms(0)).unwrap();
    let b = stage.try_submit(ms(0)).unwrap();
    assert_eq!(stage.complete(b, Ok(2), 0, ms(1)), Completion::Done);

    assert_eq!(
        stage.complete(a, Err("x"), 0, ms(5)),
        Completion::RetryAt(ms(15))
    );
    assert_eq!(stage.begin_retry(0, ms(14)), None, "backoff not over");
    let a2 = stage.begin_retry(0, ms(15)).unwrap();
    assert_eq!((a2.number, a2.deadline), (2, Some(ms(115))));
    assert_eq!(
        stage.complete(a, Ok(9), 0, ms(16)),
        Completion::Stale,
        "old attempt"
    );

    assert_eq!(
        stage.complete(a2, Err("y"), 0, ms(20)),
        Completion::RetryAt(ms(35)),
        "capped at 15 ms"
    );
    let a3 = stage.poll_retry(ms(35)).unwrap();
    assert_eq!(a3.number, 3);
    assert_eq!(stage.complete(a3, Err("z"), 0, ms(40)), Completion::Done);

    assert_eq!(
        stage.pop_ready(ms(41)),
        Some((
            0,
            Err(OrderedError::Failed {
                error: "z",
                attempts: 3
            })
        ))
    );
    assert_eq!(stage.pop_ready(ms(41)), Some((1, Ok(2))));
    assert_eq!(stage.retries(), 2);
    assert!(stage.is_empty());
}

#[test]
fn deadlines_expire_into_retries_and_a_final_timeout() {
    let mut stage: OrderedCore<u32, &str> = OrderedCore::new(config(1)).unwrap();
    let a = stage.try_submit(ms(0)).unwrap();
    assert_eq!(stage.next_wakeup(), Some(ms(100)));
    assert_eq!(stage.expire(ms(99)), 0);
    assert_eq!(stage.expire(ms(100)), 1);
    assert_eq!(stage.complete(a, Ok(1), 0, ms(101)), Completion::Stale);
    assert_eq!(stage.next_wakeup(), Some(ms(110)));
    let a2 = stage.poll_retry(ms(110)).unwrap();
    assert_eq!(stage.time_out(a2, ms(210)), Completion::RetryAt(ms(225)));
    let a3 = stage.poll_retry(ms(225)).unwrap();
    assert_eq!(stage.time_out(a3, ms(325)), Completion::Done);
    assert_eq!(
        stage.pop_ready(ms(325)),
        Some((0, Err(OrderedError::TimedOut { attempts: 3 })))
    );
    assert_eq!(stage.timeouts(), 3);
}

#[test]
fn permanent_failures_skip_the_retries() {
    let mut stage: OrderedCore<u32, &str> = OrderedCore::new(config(1)).unwrap();
    let a = stage.try_submit(ms(0)).unwrap();
    assert_eq!(stage.fail_permanently(a, "bad request"), Completion::Done);
    assert!(matches!(
        stage.pop_ready(ms(1)),
        Some((0, Err(OrderedError::Failed { attempts: 1, .. })))
    ));
}

#[test]
fn held_count_reserves_a_place_per_admission() {
    let mut c = config(2);
    c.max_held = 3;
    let mut stage: OrderedCore<u32, ()> = OrderedCore::new(c).unwrap();
    let a = stage.try_submit(ms(0)).unwrap();
    let b = stage.try_submit(ms(0)).unwrap();
    let _ = stage.complete(b, Ok(1), 0, ms(1));
    let c3 = stage.try_submit(ms(1)).unwrap();
    let _ = stage.complete(c3, Ok(2), 0, ms(2));
    // a is stuck; 2 held, 1 in flight: 3 = max_held, nothing more is admitted even
    // though only one operation is in flight.
    assert_eq!(
        (stage.in_flight(), stage.held(), stage.held_back()),
        (1, 2, 2)
    );
    assert!(!stage.can_admit());
    let _ = stage.complete(a, Ok(0), 0, ms(3));
    assert_eq!(stage.held_back(), 0);
    assert!(!stage.can_admit(), "3 held and unpopped");
    let _ = stage.pop_ready(ms(3));
    assert!(stage.can_admit());
    assert_eq!(stage.max_held_seen(), 3);
}

#[test]
fn held_bytes_stop_admission_until_popped() {
    let mut c = config(4);
    c.max_held_bytes = 100;
    let mut stage: OrderedCore<u32, ()> = OrderedCore::new(c).unwrap();
    let a = stage.try_submit(ms(0)).unwrap();
    let b = stage.try_submit(ms(0)).unwrap();
    let _ = stage.complete(b, Ok(1), 100, ms(1));
    assert!(!stage.can_admit(), "100 bytes held back");
    let _ = stage.complete(a, Ok(0), 5, ms(1));
    assert_eq!(stage.held_bytes(), 105, "in-flight results may overshoot");
    let _ = stage.pop_ready(ms(2));
    let _ = stage.pop_ready(ms(2));
    assert_eq!(stage.held_bytes(), 0);
    assert!(stage.can_admit());
    let stats = stage.stats(ms(2));
    assert_eq!((stats.offered, stats.delivered, stats.depth), (2, 2, 0));
    assert_eq!(stats.max_queue_wait, Duration::from_millis(2));
    assert!(stats.is_conserved());
}
