//! The async semaphore on tokio: FIFO, bounds, timeouts (paused clock), close, resize,
//! split, forget, oversize, the dual form and the blocking wrapper.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_flow::Clock;
use weir_flow::semaphore::{
    AcquireError, DualAmount, DualSemaphore, DualSemaphoreConfig, Oversize, Permit, Semaphore,
    SemaphoreConfig, TryAcquireError,
};

/// On tokio's clock, so that the stats follow the paused test clock exactly.
fn semaphore(total: u64, max_waiters: usize, oversize: Oversize) -> Semaphore {
    Semaphore::with_clock(
        SemaphoreConfig {
            total,
            max_waiters,
            oversize,
        },
        Clock::new(),
    )
}

/// The default semaphore reads its stats on the coarse clock, but its timeouts still run
/// on tokio's timer: exact, and following the paused clock.
#[tokio::test(start_paused = true)]
async fn timeouts_run_on_tokios_timer_whatever_the_stats_clock() {
    let sem = Semaphore::new(SemaphoreConfig::new(1));
    let _held = sem.acquire(1).await.expect("free");
    let started = tokio::time::Instant::now();
    let result = sem.acquire_timeout(1, Duration::from_secs(30)).await;
    assert!(
        matches!(result, Err(AcquireError::Timeout { .. })),
        "{result:?}"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(30));
    assert_eq!(sem.semaphore_stats().rejected_timeout, 1);
}

/// Spawns an acquire of `amount` that records `name` when granted and holds the permit
/// until the returned sender fires (or is dropped).
fn spawn_waiter(
    sem: &Semaphore,
    amount: u64,
    name: &'static str,
    log: &Arc<Mutex<Vec<&'static str>>>,
) -> (
    tokio::task::JoinHandle<Result<(), AcquireError>>,
    tokio::sync::oneshot::Sender<()>,
) {
    let (done, release) = tokio::sync::oneshot::channel::<()>();
    let (sem, log) = (sem.clone(), Arc::clone(log));
    let task = tokio::spawn(async move {
        let permit = sem.acquire(amount).await?;
        log.lock().expect("log lock").push(name);
        let _ = release.await;
        drop(permit);
        Ok(())
    });
    (task, done)
}

/// Lets every spawned task run until it waits (current-thread runtime).
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

fn assert_conserved(sem: &Semaphore) {
    let stats = sem.semaphore_stats();
    assert!(stats.flow.is_conserved(), "{stats:?}");
    assert_eq!(stats.flow.depth, stats.waiters as u64);
}

#[tokio::test(start_paused = true)]
async fn grants_in_arrival_order_and_a_large_head_is_not_overtaken() {
    let sem = semaphore(10, 16, Oversize::Reject);
    let log = Arc::new(Mutex::new(Vec::new()));
    let holder = sem.acquire(6).await.expect("free");
    let (big, big_done) = spawn_waiter(&sem, 8, "big", &log);
    settle().await;
    let (small, small_done) = spawn_waiter(&sem, 1, "small", &log);
    settle().await;
    // 4 are free and "small" would fit, but it arrived after "big".
    assert!(log.lock().expect("log").is_empty());
    assert_eq!(sem.try_acquire(1).unwrap_err(), TryAcquireError::NoPermits);
    assert_eq!(sem.stats().depth, 2);
    drop(holder);
    settle().await;
    assert_eq!(*log.lock().expect("log"), ["big", "small"]);
    drop((big_done, small_done));
    big.await.expect("join").expect("granted");
    small.await.expect("join").expect("granted");
    assert_eq!(sem.available(), 10);
    assert_conserved(&sem);
}

#[tokio::test(start_paused = true)]
async fn beyond_max_waiters_acquire_fails_at_once() {
    let sem = semaphore(1, 2, Oversize::Reject);
    let log = Arc::new(Mutex::new(Vec::new()));
    let _all = sem.acquire(1).await.expect("free");
    let _a = spawn_waiter(&sem, 1, "a", &log);
    let _b = spawn_waiter(&sem, 1, "b", &log);
    settle().await;
    let refused = sem.acquire(1).await.unwrap_err();
    assert_eq!(refused, AcquireError::TooManyWaiters { max_waiters: 2 });
    assert!(refused.to_string().contains("at most 2 acquires may wait"));
    assert_eq!(sem.semaphore_stats().rejected_too_many_waiters, 1);
    assert_conserved(&sem);
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_head_is_refused_and_lets_the_next_one_through() {
    let sem = semaphore(10, 16, Oversize::Reject);
    let holder = sem.acquire(5).await.expect("free");
    let head = tokio::spawn({
        let sem = sem.clone();
        async move {
            let started = tokio::time::Instant::now();
            let result = sem.acquire_timeout(8, Duration::from_millis(100)).await;
            (result.map(|p| p.amount()), started.elapsed())
        }
    });
    settle().await;
    let next = tokio::spawn({
        let sem = sem.clone();
        async move { sem.acquire(5).await.map(|p| p.amount()) }
    });
    settle().await;
    assert_eq!(sem.stats().depth, 2);
    let (result, elapsed) = head.await.expect("join");
    assert_eq!(elapsed, Duration::from_millis(100));
    assert!(
        matches!(result, Err(AcquireError::Timeout { waited }) if waited == Duration::from_millis(100))
    );
    assert_eq!(next.await.expect("join"), Ok(5));
    let stats = sem.semaphore_stats();
    assert_eq!((stats.rejected_timeout, stats.flow.delivered), (1, 2));
    drop(holder);
    assert_eq!(sem.available(), 10);
    assert_conserved(&sem);
}

#[tokio::test(start_paused = true)]
async fn a_timed_acquire_granted_in_time_is_not_refused() {
    let sem = semaphore(1, 16, Oversize::Reject);
    let holder = sem.acquire(1).await.expect("free");
    let waiter = tokio::spawn({
        let sem = sem.clone();
        async move {
            sem.acquire_timeout(1, Duration::from_secs(1))
                .await
                .map(|p| p.amount())
        }
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    drop(holder);
    assert_eq!(waiter.await.expect("join"), Ok(1));
    let stats = sem.stats();
    assert_eq!(stats.max_queue_wait, Duration::from_millis(400));
    assert_eq!(stats.rejected, 0);
}

#[tokio::test(start_paused = true)]
async fn close_fails_only_this_semaphores_waiters() {
    let sem = semaphore(1, 16, Oversize::Reject);
    let other = semaphore(1, 16, Oversize::Reject);
    let log = Arc::new(Mutex::new(Vec::new()));
    let held = sem.acquire(1).await.expect("free");
    let other_held = other.acquire(1).await.expect("free");
    let (mine, _mine_done) = spawn_waiter(&sem, 1, "mine", &log);
    let (theirs, theirs_done) = spawn_waiter(&other, 1, "theirs", &log);
    settle().await;
    sem.close();
    assert!(sem.is_closed() && !other.is_closed());
    assert_eq!(mine.await.expect("join"), Err(AcquireError::Closed));
    assert_eq!(sem.acquire(1).await.unwrap_err(), AcquireError::Closed);
    assert_eq!(sem.try_acquire(0).unwrap_err(), TryAcquireError::Closed);
    // The other semaphore's waiter still waits, then gets its permit.
    assert_eq!(other.stats().depth, 1);
    drop(other_held);
    settle().await;
    assert_eq!(*log.lock().expect("log"), ["theirs"]);
    drop(theirs_done);
    theirs.await.expect("join").expect("granted");
    // Held permits stay valid and come back.
    assert_eq!(held.amount(), 1);
    drop(held);
    assert_eq!(sem.available(), 1);
    assert_eq!(sem.semaphore_stats().rejected_closed, 3);
    assert_conserved(&sem);
}

#[tokio::test(start_paused = true)]
async fn resize_shrinks_at_once_and_grows_in_fifo_turn() {
    let sem = semaphore(10, 16, Oversize::Reject);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut permit = sem.acquire(8).await.expect("free");
    let (waiter, waiter_done) = spawn_waiter(&sem, 5, "waiter", &log);
    settle().await;
    permit.resize(5).await.expect("shrinking never waits");
    settle().await;
    assert_eq!(*log.lock().expect("log"), ["waiter"]);
    assert_eq!((permit.amount(), sem.available()), (5, 0));
    // Growing waits behind whoever is queued, and for room.
    let (late, late_done) = spawn_waiter(&sem, 2, "late", &log);
    settle().await;
    {
        let grow = permit.resize(7);
        tokio::pin!(grow);
        assert!(futures::poll!(grow.as_mut()).is_pending());
        drop(waiter_done); // frees 5: "late" is first in line, then the growth
        waiter.await.expect("join").expect("granted");
        settle().await;
        assert_eq!(*log.lock().expect("log"), ["waiter", "late"]);
        grow.await.expect("granted after late");
    }
    assert_eq!((permit.amount(), sem.available()), (7, 1));
    assert_eq!(
        permit.resize(11).await.unwrap_err(),
        AcquireError::TooLarge {
            requested: 11,
            total: 10
        }
    );
    assert_eq!(permit.amount(), 7, "a refused resize keeps the amount");
    drop((late_done, permit));
    late.await.expect("join").expect("granted");
    assert_eq!(sem.available(), 10);
    assert_conserved(&sem);
}

#[tokio::test]
async fn split_and_forget() {
    let sem = semaphore(10, 16, Oversize::Reject);
    let mut permit = sem.acquire(6).await.expect("free");
    assert!(permit.split(7).is_none());
    let part: Permit = permit.split(2).expect("6 >= 2");
    assert_eq!((permit.amount(), part.amount(), sem.available()), (4, 2, 4));
    drop(part);
    assert_eq!(sem.available(), 6);
    permit.forget();
    assert_eq!((sem.total(), sem.available()), (6, 6));
    assert_eq!(
        sem.try_acquire(7).unwrap_err(),
        TryAcquireError::TooLarge {
            requested: 7,
            total: 6
        }
    );
    sem.add_permits(4);
    assert_eq!((sem.total(), sem.available()), (10, 10));
}

#[tokio::test(start_paused = true)]
async fn forget_refuses_waiters_that_no_longer_fit() {
    let sem = semaphore(10, 16, Oversize::Reject);
    let held = sem.acquire(4).await.expect("free");
    let _other = sem.acquire(4).await.expect("free");
    let waiter = tokio::spawn({
        let sem = sem.clone();
        async move { sem.acquire(9).await.map(|p| p.amount()) }
    });
    settle().await;
    held.forget();
    assert_eq!(
        waiter.await.expect("join"),
        Err(AcquireError::TooLarge {
            requested: 9,
            total: 6
        })
    );
    assert_conserved(&sem);
}

#[tokio::test(start_paused = true)]
async fn an_oversize_request_is_admitted_alone_when_idle() {
    let sem = semaphore(10, 16, Oversize::AdmitAloneWhenIdle);
    let log = Arc::new(Mutex::new(Vec::new()));
    let small = sem.acquire(1).await.expect("free");
    let (huge, huge_done) = spawn_waiter(&sem, 25, "huge", &log);
    settle().await;
    let (after, after_done) = spawn_waiter(&sem, 1, "after", &log);
    settle().await;
    assert!(
        log.lock().expect("log").is_empty(),
        "huge waits for idle, after waits for huge"
    );
    drop(small);
    settle().await;
    assert_eq!(*log.lock().expect("log"), ["huge"]);
    assert_eq!(sem.available(), 0);
    drop(huge_done);
    huge.await.expect("join").expect("granted");
    settle().await;
    assert_eq!(*log.lock().expect("log"), ["huge", "after"]);
    drop(after_done);
    after.await.expect("join").expect("granted");
    assert_eq!(sem.available(), 10);
    let strict = semaphore(10, 16, Oversize::Reject);
    assert_eq!(
        strict.acquire(25).await.unwrap_err(),
        AcquireError::TooLarge {
            requested: 25,
            total: 10
        }
    );
}

#[tokio::test(start_paused = true)]
async fn dual_semaphore_takes_items_and_bytes_together_in_fifo_order() {
    let sem = DualSemaphore::new(DualSemaphoreConfig::new(3, 100));
    let a = sem.acquire(1, 80).await.expect("free");
    // Two items are free but only 20 bytes: this waits, and nothing overtakes it.
    let wide = tokio::spawn({
        let sem = sem.clone();
        async move { sem.acquire(1, 50).await.map(|p| p.amount()) }
    });
    settle().await;
    assert!(sem.try_acquire(1, 1).is_err());
    assert_eq!(sem.stats().bytes, 50);
    drop(a);
    assert_eq!(wide.await.expect("join"), Ok(DualAmount::new(1, 50)));
    let mut b = sem.acquire(2, 10).await.expect("free");
    b.resize(1, 60).await.expect("one item back, 50 bytes more");
    assert_eq!(sem.available(), DualAmount::new(2, 40));
    let part = b.split(1, 30).expect("holds that much");
    assert_eq!(part.amount(), DualAmount::new(1, 30));
    assert!(matches!(
        sem.acquire(4, 1).await,
        Err(AcquireError::TooLarge { requested, .. }) if requested == DualAmount::new(4, 1)
    ));
    drop((b, part));
    assert_eq!(sem.available(), DualAmount::new(3, 100));
    assert!(sem.stats().is_conserved());
    sem.close();
    assert_eq!(sem.acquire(1, 1).await.unwrap_err(), AcquireError::Closed);
}

#[test]
fn acquire_blocking_parks_a_plain_thread_until_released() {
    let sem = semaphore(4, 16, Oversize::Reject);
    let held = sem.acquire_blocking(4).expect("free");
    let waiter = std::thread::spawn({
        let sem = sem.clone();
        move || sem.acquire_blocking(3).map(|p| p.amount())
    });
    while sem.stats().depth == 0 {
        std::thread::yield_now();
    }
    drop(held);
    assert_eq!(waiter.join().expect("thread"), Ok(3));
    assert_eq!(sem.available(), 4);
}

#[tokio::test]
#[should_panic(expected = "called on a tokio runtime thread")]
async fn acquire_blocking_refuses_to_park_a_runtime_thread() {
    let sem = semaphore(4, 16, Oversize::Reject);
    let _ = sem.acquire_blocking(1);
}
