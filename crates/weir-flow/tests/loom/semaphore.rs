//! loom models of the semaphore: the races between a release, a cancellation, a new
//! acquire and close, checked over every interleaving. A waiter that is never woken
//! makes `block_on` deadlock, which loom reports.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};

use loom::future::block_on;
use loom::thread;
use weir_flow::semaphore::{AcquireError, Oversize, Permit, Semaphore, SemaphoreConfig};

type Acquire = Pin<Box<dyn Future<Output = Result<Permit, AcquireError>> + Send>>;

/// Explores `f` under loom with at most three preemptions per execution (as tokio's own
/// loom CI does): enough for every race between two or three operations here, while
/// keeping each model to seconds.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

fn semaphore(total: u64) -> Semaphore {
    Semaphore::new(SemaphoreConfig {
        total,
        max_waiters: 8,
        oversize: Oversize::Reject,
    })
}

/// An acquire of `amount`, polled once so it is queued.
fn queued(sem: &Semaphore, amount: u64) -> Acquire {
    let sem = sem.clone();
    let mut future: Acquire = Box::pin(async move { sem.acquire(amount).await });
    let pending = future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending();
    assert!(pending, "expected the acquire to wait");
    future
}

fn assert_idle(sem: &Semaphore, total: u64) {
    let stats = sem.semaphore_stats();
    assert_eq!(stats.available, total, "{stats:?}");
    assert_eq!((stats.held, stats.waiters), (0, 0), "{stats:?}");
    assert!(stats.flow.is_conserved(), "{stats:?}");
}

/// A release and the cancellation of the head waiter race; the waiter behind it must be
/// granted and woken whichever wins, and nothing may leak.
#[test]
fn release_vs_cancel_of_the_head() {
    model(|| {
        let sem = semaphore(1);
        let held = sem.try_acquire(1).expect("free");
        let head = queued(&sem, 1);
        let next = queued(&sem, 1);
        let releaser = thread::spawn(move || drop(held));
        let canceller = thread::spawn(move || drop(head));
        let permit = block_on(next).expect("granted once the head is gone");
        releaser.join().expect("releaser");
        canceller.join().expect("canceller");
        assert_eq!(permit.amount(), 1);
        drop(permit);
        assert_idle(&sem, 1);
    });
}

/// A release races a new acquire on another thread: the acquire is granted at once or
/// queued and woken, never lost.
#[test]
fn release_vs_acquire() {
    model(|| {
        let sem = semaphore(1);
        let held = sem.try_acquire(1).expect("free");
        let acquirer = {
            let sem = sem.clone();
            thread::spawn(move || block_on(sem.acquire(1)).map(|p| p.amount()))
        };
        drop(held);
        assert_eq!(acquirer.join().expect("acquirer"), Ok(1));
        assert_idle(&sem, 1);
    });
}

/// Two acquirers race for one permit: one is granted at once, the other is queued and
/// woken by the first one's release.
#[test]
fn acquire_vs_acquire() {
    model(|| {
        let sem = semaphore(1);
        let acquirers: Vec<_> = (0..2)
            .map(|_| {
                let sem = sem.clone();
                thread::spawn(move || block_on(sem.acquire(1)).map(|p| p.amount()))
            })
            .collect();
        for acquirer in acquirers {
            assert_eq!(acquirer.join().expect("acquirer"), Ok(1));
        }
        assert_idle(&sem, 1);
    });
}

/// A shrinking resize races a queued waiter's cancellation and a new acquire; every
/// waiter that fits is woken, and what is held adds up.
#[test]
fn shrink_vs_cancel_vs_acquire() {
    model(|| {
        let sem = semaphore(2);
        let mut held = sem.try_acquire(2).expect("free");
        let cancelled = queued(&sem, 2);
        let waiter = {
            let sem = sem.clone();
            thread::spawn(move || block_on(sem.acquire(1)).map(|p| p.amount()))
        };
        let canceller = thread::spawn(move || drop(cancelled));
        block_on(held.resize(1)).expect("shrinking never waits");
        canceller.join().expect("canceller");
        assert_eq!(waiter.join().expect("waiter"), Ok(1));
        drop(held);
        assert_idle(&sem, 2);
    });
}

/// `close` races a waiter being queued: the waiter ends, granted or closed, never hung.
#[test]
fn close_vs_acquire() {
    model(|| {
        let sem = semaphore(1);
        let held = sem.try_acquire(1).expect("free");
        let waiter = {
            let sem = sem.clone();
            thread::spawn(move || block_on(sem.acquire(1)).map(|p| p.amount()))
        };
        let closer = {
            let sem = sem.clone();
            thread::spawn(move || sem.close())
        };
        closer.join().expect("closer");
        drop(held);
        match waiter.join().expect("waiter") {
            Ok(1) | Err(AcquireError::Closed) => {}
            other => panic!("unexpected outcome {other:?}"),
        }
        assert_idle(&sem, 1);
    });
}

/// The head is granted by one release while its future is being polled on another
/// thread: the poll sees the grant or is woken for it.
#[test]
fn grant_vs_poll() {
    model(|| {
        let sem = semaphore(1);
        let held = sem.try_acquire(1).expect("free");
        let head = queued(&sem, 1);
        let releaser = thread::spawn(move || drop(held));
        let permit = block_on(head).expect("granted");
        releaser.join().expect("releaser");
        drop(permit);
        assert_idle(&sem, 1);
    });
}
