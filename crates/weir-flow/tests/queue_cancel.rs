//! Cancellation of waiting sends and reservations: dropping a future at any point loses
//! nothing queued and strands no other waiter.
//!
//! Futures are polled by hand with a waker that records whether it was woken, so each
//! test controls exactly when a future is polled, granted or dropped.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use futures::task::{ArcWake, waker};
use weir_flow::queue::{Capacity, OnFull, QueueConfig, Receiver, SendError, Sender, channel};

/// A waker that remembers being woken.
#[derive(Default)]
struct Flag(AtomicBool);

impl ArcWake for Flag {
    fn wake_by_ref(flag: &Arc<Self>) {
        flag.0.store(true, Ordering::SeqCst);
    }
}

impl Flag {
    fn take(&self) -> bool {
        self.0.swap(false, Ordering::SeqCst)
    }
}

/// A future with its own recording waker.
struct Polled<F> {
    future: Pin<Box<F>>,
    flag: Arc<Flag>,
}

impl<F: Future> Polled<F> {
    fn new(future: F) -> Self {
        Polled {
            future: Box::pin(future),
            flag: Arc::new(Flag::default()),
        }
    }

    fn poll(&mut self) -> Poll<F::Output> {
        let waker = waker(self.flag.clone());
        self.future.as_mut().poll(&mut Context::from_waker(&waker))
    }

    fn woken(&self) -> bool {
        self.flag.take()
    }
}

fn full_queue() -> (Sender<u32>, Receiver<u32>) {
    let (tx, rx) = channel(QueueConfig::new(Capacity::items(1), OnFull::Block));
    tx.try_send(0).expect("room for the first item");
    (tx, rx)
}

fn drain(rx: &mut Receiver<u32>) -> Vec<u32> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

#[test]
fn dropping_a_waiting_send_at_any_position_loses_nothing() {
    for dropped in 0..3 {
        let (tx, mut rx) = full_queue();
        let mut sends: Vec<_> = (1..=3).map(|i| Some(Polled::new(tx.send(i)))).collect();
        for send in sends.iter_mut().flatten() {
            assert!(send.poll().is_pending(), "the queue is full");
        }
        sends[dropped] = None;

        let mut received = Vec::new();
        for _ in 0..2 {
            received.extend(rx.try_recv());
            // The first send still waiting was granted the freed slot and woken.
            let first = sends.iter_mut().flatten().next().expect("a send waits");
            assert!(
                first.woken(),
                "next in line is woken (dropped at {dropped})"
            );
            assert!(matches!(first.poll(), Poll::Ready(Ok(_))));
            let done = sends.iter().position(Option::is_some).expect("found above");
            sends[done] = None;
            // The ones behind it stay parked and unwoken.
            for send in sends.iter_mut().flatten() {
                assert!(!send.woken());
                assert!(send.poll().is_pending());
            }
        }
        received.extend(drain(&mut rx));
        let expected: Vec<u32> = [0, 1, 2, 3]
            .into_iter()
            .filter(|&i| i != dropped as u32 + 1)
            .collect();
        assert_eq!(
            received, expected,
            "FIFO, nothing lost (dropped at {dropped})"
        );
        let stats = rx.stats();
        assert_eq!((stats.offered, stats.delivered, stats.depth), (3, 3, 0));
        assert!(stats.is_conserved());
    }
}

#[test]
fn dropping_a_granted_send_passes_the_room_on() {
    let (tx, mut rx) = full_queue();
    let mut first = Polled::new(tx.send(1));
    let mut second = Polled::new(tx.send(2));
    assert!(first.poll().is_pending());
    assert!(second.poll().is_pending());

    assert_eq!(rx.try_recv(), Ok(0));
    assert!(first.woken(), "room is granted to the first in line");
    assert!(!second.woken());
    drop(first);
    assert!(
        second.woken(),
        "the dropped grant passes to the next in line"
    );
    assert!(matches!(second.poll(), Poll::Ready(Ok(_))));
    assert_eq!(drain(&mut rx), [2]);
    assert!(rx.stats().is_conserved());
}

#[test]
fn a_new_send_queues_behind_waiting_ones() {
    let (tx, mut rx) = full_queue();
    let mut waiting = Polled::new(tx.send(1));
    assert!(waiting.poll().is_pending());
    assert_eq!(rx.try_recv(), Ok(0));
    // Room exists but is granted to the waiting send: a newcomer must not take it.
    assert!(matches!(tx.try_send(9), Err(SendError::WouldBlock(9))));
    let mut newcomer = Polled::new(tx.send(2));
    assert!(newcomer.poll().is_pending());
    assert!(matches!(waiting.poll(), Poll::Ready(Ok(_))));
    assert_eq!(rx.try_recv(), Ok(1));
    assert!(newcomer.woken());
    assert!(matches!(newcomer.poll(), Poll::Ready(Ok(_))));
    assert_eq!(drain(&mut rx), [2]);
    // The refused try_send was never counted.
    let stats = rx.stats();
    assert_eq!((stats.offered, stats.rejected), (3, 0));
}

#[test]
fn dropping_an_unused_permit_releases_the_slot() {
    let (tx, mut rx) = channel::<u32, ()>(QueueConfig::new(Capacity::items(1), OnFull::Block));
    let mut reserve = Polled::new(tx.reserve());
    let permit = match reserve.poll() {
        Poll::Ready(Ok(permit)) => permit,
        other => panic!("room for a permit, got {:?}", other.map(|r| r.map(|_| ()))),
    };
    let mut send = Polled::new(tx.send(1));
    assert!(send.poll().is_pending(), "the permit holds the only slot");
    drop(permit);
    assert!(send.woken(), "dropping the permit lets the waiting send in");
    assert!(matches!(send.poll(), Poll::Ready(Ok(_))));
    assert_eq!(drain(&mut rx), [1]);
    let stats = rx.stats();
    assert_eq!(
        (stats.offered, stats.delivered),
        (1, 1),
        "an unused permit is not counted"
    );
}

#[test]
fn a_used_permit_queues_its_item() {
    let (tx, mut rx) = channel::<u32, ()>(QueueConfig::new(Capacity::items(2), OnFull::Block));
    let mut reserve = Polled::new(tx.reserve());
    let Poll::Ready(Ok(permit)) = reserve.poll() else {
        panic!("room for a permit");
    };
    tx.try_send(1).expect("one slot is left");
    assert!(
        matches!(tx.try_send(2), Err(SendError::WouldBlock(2))),
        "the other is reserved"
    );
    permit.send(7).expect("the reserved slot takes the item");
    assert_eq!(drain(&mut rx), [1, 7]);
}

#[test]
fn dropping_a_waiting_reserve_strands_nobody() {
    let (tx, mut rx) = full_queue();
    let mut reserve = Polled::new(tx.reserve());
    let mut send = Polled::new(tx.send(1));
    assert!(reserve.poll().is_pending());
    assert!(send.poll().is_pending());
    drop(reserve);
    assert_eq!(rx.try_recv(), Ok(0));
    assert!(send.woken());
    assert!(matches!(send.poll(), Poll::Ready(Ok(_))));
    assert_eq!(drain(&mut rx), [1]);
}

#[test]
fn close_fails_every_waiting_send_with_its_item() {
    let (tx, mut rx) = full_queue();
    let mut sends: Vec<_> = (1..=3).map(|i| Polled::new(tx.send(i))).collect();
    for send in &mut sends {
        assert!(send.poll().is_pending());
    }
    tx.close();
    for (i, send) in (1..=3).zip(&mut sends) {
        assert!(send.woken());
        match send.poll() {
            Poll::Ready(Err(SendError::Closed(item))) => assert_eq!(item, i),
            other => panic!(
                "expected Closed({i}), got {:?}",
                other.map(|r| r.map(|_| ()))
            ),
        }
    }
    // The receiver drains what was queued, then sees the end.
    let mut recv = Polled::new(rx.recv());
    assert_eq!(recv.poll(), Poll::Ready(Some(0)));
    drop(recv);
    let mut recv = Polled::new(rx.recv());
    assert_eq!(recv.poll(), Poll::Ready(None));
}

#[test]
fn dropping_the_receiver_fails_waiting_and_later_sends() {
    let (tx, rx) = full_queue();
    let mut send = Polled::new(tx.send(1));
    assert!(send.poll().is_pending());
    drop(rx);
    assert!(send.woken());
    assert!(matches!(
        send.poll(),
        Poll::Ready(Err(SendError::Closed(1)))
    ));
    assert!(matches!(tx.try_send(2), Err(SendError::Closed(2))));
    assert!(tx.is_closed());
}

#[test]
fn the_receiver_is_woken_by_a_send_and_by_the_last_sender_leaving() {
    let (tx, mut rx) = channel::<u32, ()>(QueueConfig::new(Capacity::items(4), OnFull::Block));
    let tx2 = tx.clone();
    {
        let mut recv = Polled::new(rx.recv());
        assert!(recv.poll().is_pending());
        tx.try_send(5).expect("room");
        assert!(recv.woken());
        assert_eq!(recv.poll(), Poll::Ready(Some(5)));
    }
    let mut recv = Polled::new(rx.recv());
    assert!(recv.poll().is_pending());
    drop(tx);
    assert!(!recv.woken(), "one sender is left");
    drop(tx2);
    assert!(recv.woken());
    assert_eq!(recv.poll(), Poll::Ready(None));
}
