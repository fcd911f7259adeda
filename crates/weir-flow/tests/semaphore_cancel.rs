//! Cancellation: dropping a waiting acquire at every queue position (head, middle,
//! tail) wakes the waiters that can now proceed, and nothing leaks.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use weir_flow::semaphore::{AcquireError, Oversize, Permit, Semaphore, SemaphoreConfig};

type Acquire<'a> = Pin<Box<dyn Future<Output = Result<Permit, AcquireError>> + 'a>>;

/// A waker that counts its wake-ups.
#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A queued acquire, polled by hand.
struct Waiter<'a> {
    future: Acquire<'a>,
    wakes: Arc<CountingWaker>,
}

impl<'a> Waiter<'a> {
    fn start(future: Acquire<'a>) -> Self {
        let mut waiter = Waiter {
            future,
            wakes: Arc::default(),
        };
        assert!(waiter.poll().is_pending(), "expected the acquire to wait");
        waiter
    }

    fn poll(&mut self) -> Poll<Result<Permit, AcquireError>> {
        let waker = Waker::from(Arc::clone(&self.wakes));
        self.future.as_mut().poll(&mut Context::from_waker(&waker))
    }

    fn woken(&self) -> bool {
        self.wakes.0.load(Ordering::SeqCst) > 0
    }

    fn granted(&mut self) -> Permit {
        assert!(self.woken(), "a granted waiter must have been woken");
        match self.poll() {
            Poll::Ready(Ok(permit)) => permit,
            other => panic!("expected a permit, found {other:?}"),
        }
    }
}

fn semaphore(total: u64) -> Semaphore {
    Semaphore::new(SemaphoreConfig {
        total,
        max_waiters: 16,
        oversize: Oversize::Reject,
    })
}

/// 4 of 10 held; waiters of 8 (head), 3 (middle), 2 (tail). Dropping `position` must
/// wake exactly the waiters that now fit, in FIFO order, and leak nothing.
fn drop_at(position: usize) {
    let sem = semaphore(10);
    let holder = sem.try_acquire(4).expect("free");
    let mut waiters: Vec<Option<Waiter<'_>>> = [8, 3, 2]
        .into_iter()
        .map(|need| Some(Waiter::start(Box::pin(sem.acquire(need)))))
        .collect();
    assert_eq!(sem.stats().depth, 3);

    drop(waiters[position].take());
    let stats = sem.semaphore_stats();
    assert_eq!(stats.cancelled, 1);
    assert!(stats.flow.is_conserved(), "{stats:?}");

    let mut permits = Vec::new();
    if position == 0 {
        // The head held the others back: 3 + 2 fit in the 6 free, both are woken.
        for waiter in waiters.iter_mut().flatten() {
            permits.push(waiter.granted());
        }
        assert_eq!(sem.available(), 1);
        drop(holder);
    } else {
        // The head still waits: nobody may overtake it, nobody is woken.
        for waiter in waiters.iter_mut().flatten() {
            assert!(!waiter.woken());
            assert!(waiter.poll().is_pending());
        }
        assert_eq!(sem.stats().depth, 2);
        drop(holder);
        let mut rest = waiters.iter_mut().flatten();
        let head = rest.next().expect("the head is still queued");
        let other = rest.next().expect("one more is queued");
        let head_permit = head.granted(); // 8 of 10: 2 left
        if position == 1 {
            // The tail's 2 fit in what is left.
            permits.push(other.granted());
            assert_eq!(sem.available(), 0);
            permits.push(head_permit);
        } else {
            // The middle's 3 do not fit in the 2 left: not woken until the head is done.
            assert!(!other.woken());
            assert!(other.poll().is_pending());
            drop(head_permit);
            permits.push(other.granted());
            assert_eq!(sem.available(), 7);
        }
    }
    drop(permits);
    drop(waiters);
    let stats = sem.semaphore_stats();
    assert_eq!(sem.available(), 10, "nothing leaks: {stats:?}");
    assert_eq!(stats.held, 0);
    assert!(stats.flow.is_conserved(), "{stats:?}");
}

#[test]
fn dropping_the_head_wakes_the_waiters_behind_it_that_fit() {
    drop_at(0);
}

#[test]
fn dropping_a_middle_waiter_wakes_nobody_and_leaks_nothing() {
    drop_at(1);
}

#[test]
fn dropping_the_tail_wakes_nobody_and_leaks_nothing() {
    drop_at(2);
}

#[test]
fn dropping_every_position_of_a_longer_queue_leaks_nothing() {
    for len in 1..=6 {
        for position in 0..len {
            let sem = semaphore(len as u64);
            let holder = sem.try_acquire(len as u64).expect("free");
            let mut waiters: Vec<Option<Waiter<'_>>> = (0..len)
                .map(|_| Some(Waiter::start(Box::pin(sem.acquire(1)))))
                .collect();
            drop(waiters[position].take());
            drop(holder);
            let permits: Vec<Permit> = waiters.iter_mut().flatten().map(Waiter::granted).collect();
            assert_eq!(permits.len(), len - 1);
            assert_eq!(sem.available(), 1);
            drop(permits);
            assert_eq!(
                sem.available(),
                len as u64,
                "len {len}, position {position}"
            );
            assert!(sem.stats().is_conserved());
        }
    }
}

#[test]
fn dropping_a_granted_but_unpolled_acquire_returns_its_amount_to_the_next_waiter() {
    let sem = semaphore(10);
    let holder = sem.try_acquire(10).expect("free");
    let first = Waiter::start(Box::pin(sem.acquire(10)));
    let mut second = Waiter::start(Box::pin(sem.acquire(10)));
    drop(holder);
    assert!(first.woken());
    assert!(!second.woken());
    // `first` was granted but its future is dropped before it saw the permit.
    drop(first);
    let permit = second.granted();
    assert_eq!(permit.amount(), 10);
    drop(permit);
    let stats = sem.semaphore_stats();
    assert_eq!(
        (sem.available(), stats.cancelled, stats.flow.delivered),
        (10, 0, 3)
    );
    assert!(stats.flow.is_conserved());
}

#[test]
fn dropping_a_growing_resize_keeps_the_permit_and_wakes_the_next_waiter() {
    let sem = semaphore(10);
    let mut permit = sem.try_acquire(6).expect("free");
    let other = sem.try_acquire(4).expect("free");
    let mut grow = Waiter {
        future: Box::pin(async {
            permit.resize(9).await?;
            Err(AcquireError::Closed) // never reached in this test
        }),
        wakes: Arc::default(),
    };
    assert!(grow.poll().is_pending());
    let mut behind = Waiter::start(Box::pin(sem.acquire(1)));
    drop(grow);
    // The growth was the head; the 1 behind it does not fit yet (all 10 are held).
    assert!(!behind.woken());
    drop(other);
    assert_eq!(behind.granted().amount(), 1);
    assert_eq!(permit.amount(), 6);
    assert_eq!(sem.available(), 4);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_timed_acquire_before_its_deadline_counts_a_cancellation() {
    let sem = semaphore(1);
    let _holder = sem.try_acquire(1).expect("free");
    let timed = tokio::time::timeout(
        Duration::from_millis(50),
        sem.acquire_timeout(1, Duration::from_secs(10)),
    )
    .await;
    assert!(timed.is_err(), "the outer timeout fires first");
    let stats = sem.semaphore_stats();
    assert_eq!(
        (stats.cancelled, stats.rejected_timeout, stats.waiters),
        (1, 0, 0)
    );
    assert!(stats.flow.is_conserved());
}
