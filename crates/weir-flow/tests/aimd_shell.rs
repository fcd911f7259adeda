//! The async AIMD shells on tokio's paused clock: pacing, FIFO waiters, cancellation.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_flow::aimd::{AimdConfig, ConcurrencyLimiter, RateLimiter};

#[tokio::test(start_paused = true)]
async fn rate_limiter_paces_and_slows_down_on_overload() {
    let mut config = AimdConfig::rate(Duration::from_millis(50), 100.0);
    config.burst = Duration::from_millis(10);
    let limiter = RateLimiter::new(config).unwrap();
    let start = tokio::time::Instant::now();
    for _ in 0..11 {
        limiter.acquire().await;
    }
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(100),
        "100/s after one burst token"
    );

    limiter.overload();
    assert_eq!(limiter.rate(), 80.0);
    let start = tokio::time::Instant::now();
    for _ in 0..8 {
        limiter.acquire().await;
    }
    // 12.5 ms per permit; tokio's timer wakes on whole milliseconds, so allow for
    // rounding up (the half milliseconds carry over as accrued tokens).
    let elapsed = start.elapsed();
    assert!(
        (Duration::from_millis(100)..=Duration::from_millis(108)).contains(&elapsed),
        "80/s now: {elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn rate_limiter_serves_waiters_in_order_and_a_cancelled_waiter_takes_nothing() {
    let mut config = AimdConfig::rate(Duration::from_millis(50), 100.0);
    config.burst = Duration::from_millis(10);
    let limiter = RateLimiter::new(config).unwrap();
    limiter.acquire().await; // empty the bucket

    // A waiter that gives up after 5 ms: it must not consume the token due at 10 ms.
    let gave_up = tokio::time::timeout(Duration::from_millis(5), limiter.acquire()).await;
    assert!(gave_up.is_err());

    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..4 {
        let limiter = limiter.clone();
        let order = Arc::clone(&order);
        tasks.push(tokio::spawn(async move {
            limiter.acquire().await;
            order.lock().unwrap().push((i, tokio::time::Instant::now()));
        }));
        tokio::task::yield_now().await; // queue them in order
    }
    for task in tasks {
        task.await.unwrap();
    }
    let order = order.lock().unwrap();
    let ids: Vec<_> = order.iter().map(|(i, _)| *i).collect();
    assert_eq!(ids, vec![0, 1, 2, 3]);
    // The first waiter got the token due at 10 ms (5 ms after the give-up).
    let first = order[0].1;
    let last = order[3].1;
    assert_eq!(last - first, Duration::from_millis(30));
}

#[tokio::test(start_paused = true)]
async fn concurrency_limiter_waits_fifo_for_a_slot() {
    let limiter =
        ConcurrencyLimiter::new(AimdConfig::concurrency(Duration::from_millis(50), 2)).unwrap();
    let a = limiter.acquire().await;
    let b = limiter.acquire().await;
    assert!(limiter.try_acquire().is_none());

    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..3 {
        let limiter = limiter.clone();
        let order = Arc::clone(&order);
        tasks.push(tokio::spawn(async move {
            let permit = limiter.acquire().await;
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(10)).await;
            permit.finish();
        }));
        tokio::task::yield_now().await;
    }

    // A cancelled waiter takes no slot.
    assert!(
        tokio::time::timeout(Duration::from_millis(1), limiter.acquire())
            .await
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    a.finish();
    drop(b); // frees the slot, records nothing
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_permit_cuts_the_limit() {
    let limiter =
        ConcurrencyLimiter::new(AimdConfig::concurrency(Duration::from_millis(50), 10)).unwrap();
    limiter.acquire().await.dropped();
    assert_eq!(limiter.limit(), 8);
    limiter
        .acquire()
        .await
        .finish_with_latency(Duration::from_millis(5));
    assert_eq!(limiter.limit(), 8);
    assert_eq!(limiter.in_flight(), 0);
}
