//! The ordered concurrent stage: order under any completion order, the held-back
//! bound, timeouts and retries on tokio's paused clock, and Little's law.

use std::num::{NonZeroU32, NonZeroUsize};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use weir_flow::Timestamp;
use weir_flow::ordered::{
    Completion, OrderedConfig, OrderedCore, OrderedError, OrderedStage, SubmitError,
    littles_law_depth,
};

fn nz(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap()
}

#[derive(Debug, Clone)]
enum Op {
    Submit,
    /// Finish the in-flight attempt at this index (modulo), failing if `fail`.
    Complete {
        pick: usize,
        fail: bool,
        weight: u64,
    },
    Pop,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Submit),
        4 => (any::<usize>(), proptest::bool::weighted(0.2), 0u64..50)
            .prop_map(|(pick, fail, weight)| Op::Complete { pick, fail, weight }),
        2 => Just(Op::Pop),
    ]
}

proptest! {
    /// Whatever order operations complete (and fail and retry) in, results come out
    /// in submission order, every operation exactly once, and the bounds hold at
    /// every step.
    #[test]
    fn output_order_is_submission_order(
        n in 1usize..6,
        extra_held in 0usize..6,
        max_held_bytes in 20u64..200,
        ops in proptest::collection::vec(op(), 1..400),
    ) {
        let mut config = OrderedConfig::new(nz(n));
        config.max_held = n + extra_held;
        config.max_held_bytes = max_held_bytes;
        config.attempt_timeout = None;
        config.retry.max_attempts = NonZeroU32::new(2).unwrap();
        config.retry.initial_backoff = Duration::from_millis(1);
        config.retry.max_backoff = Duration::from_millis(1);
        config.retry.multiplier = 1.0;
        let mut stage: OrderedCore<u64, u64> = OrderedCore::new(config).unwrap();
        let mut running = Vec::new();
        let mut submitted = 0u64;
        let mut popped = Vec::new();
        for (step, op) in ops.into_iter().enumerate() {
            let now = Timestamp::from_millis(step as u64);
            while let Some(retry) = stage.poll_retry(now) {
                running.push(retry);
            }
            match op {
                Op::Submit => {
                    let admissible = stage.can_admit();
                    match stage.try_submit(now) {
                        Some(attempt) => {
                            prop_assert_eq!(attempt.seq, submitted);
                            submitted += 1;
                            running.push(attempt);
                        }
                        None => prop_assert!(!admissible),
                    }
                }
                Op::Complete { pick, fail, weight } if !running.is_empty() => {
                    let attempt = running.swap_remove(pick % running.len());
                    let result = if fail { Err(attempt.seq) } else { Ok(attempt.seq) };
                    match stage.complete(attempt, result, weight, now) {
                        Completion::Done | Completion::RetryAt(_) => {}
                        Completion::Stale => prop_assert!(false, "no stale attempts here"),
                    }
                }
                Op::Complete { .. } => {}
                Op::Pop => {
                    if let Some((seq, result)) = stage.pop_ready(now) {
                        let payload = match result {
                            Ok(v) => v,
                            Err(OrderedError::Failed { error, attempts }) => {
                                prop_assert_eq!(attempts, 2);
                                error
                            }
                            Err(other) => return Err(TestCaseError::fail(format!("{other:?}"))),
                        };
                        prop_assert_eq!(payload, seq, "the result belongs to its operation");
                        popped.push(seq);
                    }
                }
            }
            prop_assert!(stage.in_flight() <= n);
            prop_assert!(stage.held() <= n + extra_held, "held {} > max_held", stage.held());
            prop_assert!(stage.held_back() <= stage.held());
            // Bytes: admission stops at the bound; only in-flight results overshoot.
            prop_assert!(stage.held_bytes() < max_held_bytes + 50 * n as u64);
            prop_assert!(stage.stats(now).is_conserved());
        }
        let expected: Vec<u64> = (0..popped.len() as u64).collect();
        prop_assert_eq!(popped, expected);
    }
}

/// A stage whose operation sleeps `delays[n]` ms and counts concurrency.
#[tokio::test(start_paused = true)]
async fn shell_keeps_order_and_bounds_under_random_latencies() {
    let running = Arc::new(AtomicUsize::new(0));
    let max_running = Arc::new(AtomicUsize::new(0));
    // A fixed pseudo-random latency per input (deterministic: xorshift).
    let delay_ms = |n: u64| {
        let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        5 + x % 200
    };
    let mut config = OrderedConfig::new(nz(8));
    config.max_held = 12;
    let stage = {
        let (running, max_running) = (Arc::clone(&running), Arc::clone(&max_running));
        Arc::new(
            OrderedStage::new(config, move |n: u64| {
                let (running, max_running) = (Arc::clone(&running), Arc::clone(&max_running));
                async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    max_running.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(delay_ms(n))).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    Ok::<u64, ()>(n)
                }
            })
            .unwrap(),
        )
    };
    let producer = {
        let stage = Arc::clone(&stage);
        tokio::spawn(async move {
            for n in 0..300u64 {
                stage.submit(n).await.unwrap();
                assert!(stage.held() <= 12);
            }
            stage.close();
        })
    };
    let mut out = Vec::new();
    while let Some(result) = stage.next().await {
        out.push(result.unwrap());
        assert!(stage.held() <= 12);
    }
    producer.await.unwrap();
    assert_eq!(out, (0..300).collect::<Vec<_>>());
    assert_eq!(max_running.load(Ordering::SeqCst), 8);
    assert!(stage.max_held_seen() <= 12);
    let stats = stage.stats();
    assert_eq!((stats.offered, stats.delivered, stats.depth), (300, 300, 0));
}

#[tokio::test(start_paused = true)]
async fn a_hung_attempt_times_out_and_the_retry_succeeds_in_order() {
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let mut config = OrderedConfig::new(nz(4));
    config.attempt_timeout = Some(Duration::from_millis(100));
    config.retry.max_attempts = NonZeroU32::new(3).unwrap();
    config.retry.initial_backoff = Duration::from_millis(10);
    config.retry.max_backoff = Duration::from_millis(40);
    config.retry.multiplier = 2.0;
    let start = tokio::time::Instant::now();
    let stage = {
        let attempts = Arc::clone(&attempts);
        OrderedStage::new(config, move |n: u32| {
            let attempts = Arc::clone(&attempts);
            async move {
                let tries = {
                    let mut attempts = attempts.lock().unwrap();
                    attempts.push((n, start.elapsed()));
                    attempts.iter().filter(|(m, _)| *m == n).count()
                };
                match n {
                    // Hangs on its first attempt, then works.
                    0 if tries == 1 => std::future::pending().await,
                    // Always fails: released in order as an error after 3 attempts.
                    1 => Err(format!("input {n} is bad")),
                    // Always hangs: times out on every attempt.
                    2 => std::future::pending().await,
                    _ => Ok(n),
                }
            }
        })
        .unwrap()
    };
    for n in 0..4 {
        stage.submit(n).await.unwrap();
    }
    stage.close();

    assert_eq!(stage.next().await, Some(Ok(0)));
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(110),
        "timeout 100 + backoff 10"
    );
    assert_eq!(
        stage.next().await,
        Some(Err(OrderedError::Failed {
            error: "input 1 is bad".to_owned(),
            attempts: 3
        }))
    );
    assert_eq!(
        stage.next().await,
        Some(Err(OrderedError::TimedOut { attempts: 3 }))
    );
    // 100 + 10 + 100 + 20 + 100: three timeouts and two backoffs.
    assert_eq!(start.elapsed(), Duration::from_millis(330));
    assert_eq!(stage.next().await, Some(Ok(3)));
    assert_eq!(stage.next().await, None);

    let attempts = attempts.lock().unwrap();
    let times = |n| -> Vec<u64> {
        attempts
            .iter()
            .filter(|(m, _)| *m == n)
            .map(|(_, at)| at.as_millis() as u64)
            .collect()
    };
    assert_eq!(times(0), vec![0, 110]);
    assert_eq!(times(1), vec![0, 10, 30], "backoff 10 then 20 ms");
    assert_eq!(times(2), vec![0, 110, 230]);
    assert_eq!(stage.retries(), 5);
}

#[tokio::test(start_paused = true)]
async fn a_stalled_head_stops_admission_at_the_held_bound() {
    let mut config = OrderedConfig::new(nz(4));
    config.max_held = 6;
    config.attempt_timeout = None;
    let stage = OrderedStage::new(config, |n: u32| async move {
        let ms = if n == 0 { 1_000 } else { 1 };
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok::<u32, ()>(n)
    })
    .unwrap();
    for n in 0..6 {
        stage.submit(n).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!((stage.in_flight(), stage.held_back()), (1, 5));
    // 1 in flight + 5 held = max_held: the stage admits nothing, though only one
    // operation runs.
    assert!(matches!(stage.try_submit(6), Err(SubmitError::Full(6))));
    let waited = tokio::time::timeout(Duration::from_millis(100), stage.submit(6)).await;
    assert!(waited.is_err(), "submit waits for room");
    assert_eq!(
        stage.stats().offered,
        6,
        "the cancelled submit submitted nothing"
    );

    assert_eq!(stage.next().await, Some(Ok(0)));
    assert_eq!(stage.submit(6).await, Ok(6));
    stage.close();
    assert!(matches!(stage.try_submit(7), Err(SubmitError::Closed(7))));
    let mut rest = Vec::new();
    while let Some(result) = stage.next().await {
        rest.push(result.unwrap());
    }
    assert_eq!(rest, vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(stage.max_held_seen(), 6);
}

/// `room` resolves when any operation finishes, not only the head: a caller that keeps
/// its input (try_submit) refills the freed slot while a slow head still runs, up to
/// the held bound, and then waits for a result to be taken.
#[tokio::test(start_paused = true)]
async fn room_opens_when_any_operation_finishes_and_closes_at_the_held_bound() {
    let mut config = OrderedConfig::new(nz(2));
    config.max_held = 4;
    config.attempt_timeout = None;
    let stage = OrderedStage::new(config, |n: u32| async move {
        let ms = if n == 0 { 1_000 } else { 10 };
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok::<u32, ()>(n)
    })
    .unwrap();
    assert_eq!(stage.try_submit(0), Ok(0));
    assert_eq!(stage.try_submit(1), Ok(1));
    assert!(matches!(stage.try_submit(2), Err(SubmitError::Full(2))));
    // Input 1 finishes after 10 ms while the head (0) runs for 1 s: room opens then,
    // though `next` has nothing to give.
    let start = tokio::time::Instant::now();
    stage.room().await;
    assert_eq!(start.elapsed(), Duration::from_millis(10));
    assert_eq!(stage.try_next(), None, "the head is still running");
    assert_eq!(stage.try_submit(2), Ok(2));
    stage.room().await;
    assert_eq!(start.elapsed(), Duration::from_millis(20));
    assert_eq!(stage.try_submit(3), Ok(3));
    // 0 in flight, 1 and 2 held, 3 in flight: 4 = max_held, so no room until the head
    // is done and taken (3 finishes and is held too).
    let waited = tokio::time::timeout(Duration::from_millis(500), stage.room()).await;
    assert!(waited.is_err(), "no room at the held bound");
    assert!(matches!(stage.try_submit(4), Err(SubmitError::Full(4))));
    assert_eq!(stage.next().await, Some(Ok(0)));
    assert_eq!(start.elapsed(), Duration::from_millis(1_000));
    stage.room().await;
    assert_eq!(stage.try_submit(4), Ok(4));
    stage.close();
    // A closed stage never waits for room.
    stage.room().await;
    let mut rest = Vec::new();
    while let Some(result) = stage.next().await {
        rest.push(result.unwrap());
    }
    assert_eq!(rest, vec![1, 2, 3, 4]);
}

#[tokio::test(start_paused = true)]
async fn held_bytes_bound_stops_admission() {
    let mut config = OrderedConfig::new(nz(4));
    config.max_held_bytes = 1_000;
    config.attempt_timeout = None;
    let stage = OrderedStage::new(config, |n: u32| async move {
        let ms = if n == 0 { 500 } else { 1 };
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok::<Vec<u8>, ()>(vec![0; 600])
    })
    .unwrap()
    .weigh_with(|bytes: &Vec<u8>| bytes.len() as u64);
    for n in 0..3 {
        stage.submit(n).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    // Two 600-byte results held back behind input 0: over 1,000 bytes.
    assert_eq!(stage.stats().bytes, 1_200);
    assert!(matches!(stage.try_submit(3), Err(SubmitError::Full(3))));
    for _ in 0..3 {
        assert_eq!(stage.next().await.unwrap().unwrap().len(), 600);
    }
    assert_eq!(stage.try_submit(3), Ok(3));
}

#[tokio::test(start_paused = true)]
async fn littles_law_depth_delivers_the_target_throughput() {
    // 100 operations per second through a 100 ms stage needs 10 in flight.
    let depth = littles_law_depth(100.0, Duration::from_millis(100));
    assert_eq!(depth, 10);
    let run = |depth: usize| async move {
        let mut config = OrderedConfig::new(nz(depth));
        config.max_held = depth;
        let stage = Arc::new(
            OrderedStage::new(config, |n: u32| async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok::<u32, ()>(n)
            })
            .unwrap(),
        );
        let start = tokio::time::Instant::now();
        let producer = {
            let stage = Arc::clone(&stage);
            tokio::spawn(async move {
                for n in 0..200 {
                    stage.submit(n).await.unwrap();
                }
                stage.close();
            })
        };
        let mut count = 0;
        while let Some(result) = stage.next().await {
            assert_eq!(result, Ok(count));
            count += 1;
        }
        producer.await.unwrap();
        200.0 / start.elapsed().as_secs_f64()
    };
    let at_depth = run(depth).await;
    let serial = run(1).await;
    assert!((95.0..=100.0).contains(&at_depth), "{at_depth:.1}/s");
    assert!(
        (9.5..=10.0).contains(&serial),
        "{serial:.1}/s: capped at 1 / latency"
    );
}

#[tokio::test(start_paused = true)]
async fn a_panicking_operation_is_released_in_order_as_abandoned() {
    let mut config = OrderedConfig::new(nz(2));
    config.attempt_timeout = None;
    let stage = OrderedStage::new(config, |n: u32| async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_ne!(n, 1, "operation {n} panics (expected by the test)");
        Ok::<u32, ()>(n)
    })
    .unwrap();
    for n in 0..3 {
        stage.submit(n).await.unwrap();
    }
    stage.close();
    assert_eq!(stage.next().await, Some(Ok(0)));
    assert_eq!(
        stage.next().await,
        Some(Err(OrderedError::Abandoned { attempts: 1 }))
    );
    assert_eq!(stage.next().await, Some(Ok(2)));
    assert_eq!(stage.next().await, None);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_stage_cancels_running_operations() {
    let finished = Arc::new(AtomicUsize::new(0));
    let stage = {
        let finished = Arc::clone(&finished);
        OrderedStage::new(OrderedConfig::new(nz(4)), move |_: u32| {
            let finished = Arc::clone(&finished);
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                finished.fetch_add(1, Ordering::SeqCst);
                Ok::<(), ()>(())
            }
        })
        .unwrap()
    };
    for n in 0..4 {
        stage.submit(n).await.unwrap();
    }
    drop(stage);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(finished.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn errors_the_predicate_rejects_are_final_at_once() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut config = OrderedConfig::new(nz(2));
    config.retry.initial_backoff = Duration::from_millis(10);
    let stage = {
        let calls = Arc::clone(&calls);
        OrderedStage::new(config, move |status: u16| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { Err::<(), u16>(status) }
        })
        .unwrap()
        .retry_if(|status: &u16| *status >= 500)
    };
    stage.submit(400).await.unwrap();
    stage.submit(503).await.unwrap();
    assert_eq!(
        stage.next().await,
        Some(Err(OrderedError::Failed {
            error: 400,
            attempts: 1
        }))
    );
    assert_eq!(
        stage.next().await,
        Some(Err(OrderedError::Failed {
            error: 503,
            attempts: 3
        }))
    );
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}
