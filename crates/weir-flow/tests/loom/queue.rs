//! loom models of the bounded queue's wake-up paths: every interleaving of a blocked
//! sender, the receiver, close and the last sender leaving.

use loom::future::block_on;
use loom::thread;
use weir_flow::queue::{Capacity, OnFull, QueueConfig, SendError, channel};

fn block_queue(items: usize) -> QueueConfig<u32> {
    QueueConfig::new(Capacity::items(items), OnFull::Block)
}

/// A full queue, one sender blocked on it, and the receiver: the sender is always let
/// in and the receiver always gets both items, in order.
#[test]
fn blocked_sender_and_receiver() {
    loom::model(|| {
        let (tx, mut rx) = channel(block_queue(1));
        tx.try_send(0).expect("room for the first item");
        let sender = thread::spawn(move || {
            block_on(tx.send(1)).expect("the receiver makes room");
        });
        assert_eq!(block_on(rx.recv()), Some(0));
        assert_eq!(block_on(rx.recv()), Some(1));
        sender.join().expect("sender thread");
        assert_eq!(block_on(rx.recv()), None);
        assert!(rx.stats().is_conserved());
    });
}

/// Two senders blocked on a full queue: both get in, nothing is lost. Three threads
/// make the full search too long, so preemptions are bounded (3, as in tokio's loom CI).
#[test]
fn two_blocked_senders() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let (tx, mut rx) = channel(block_queue(1));
        tx.try_send(0).expect("room for the first item");
        let tx2 = tx.clone();
        let first = thread::spawn(move || block_on(tx.send(1)).is_ok());
        let second = thread::spawn(move || block_on(tx2.send(2)).is_ok());
        let mut received = Vec::new();
        while let Some(item) = block_on(rx.recv()) {
            received.push(item);
        }
        assert!(first.join().expect("first"));
        assert!(second.join().expect("second"));
        received.sort_unstable();
        assert_eq!(received, [0, 1, 2]);
    });
}

/// Close while a sender waits: the sender always wakes with its item back, and the
/// receiver drains what was queued.
#[test]
fn close_while_a_sender_waits() {
    loom::model(|| {
        let (tx, mut rx) = channel(block_queue(1));
        tx.try_send(0).expect("room for the first item");
        let closer = tx.clone();
        let sender = thread::spawn(move || match block_on(tx.send(1)) {
            Err(SendError::Closed(item)) => item,
            other => panic!("expected Closed(1), got {other:?}"),
        });
        closer.close();
        assert_eq!(sender.join().expect("sender thread"), 1);
        assert_eq!(block_on(rx.recv()), Some(0));
        assert_eq!(block_on(rx.recv()), None);
    });
}

/// The receiver waits while the only sender sends one item and leaves: the receiver
/// gets the item, then the end.
#[test]
fn last_sender_leaves_while_the_receiver_waits() {
    loom::model(|| {
        let (tx, mut rx) = channel(block_queue(2));
        let sender = thread::spawn(move || {
            tx.try_send(7).expect("room");
        });
        assert_eq!(block_on(rx.recv()), Some(7));
        assert_eq!(block_on(rx.recv()), None);
        sender.join().expect("sender thread");
    });
}

/// The receiver is dropped while a sender waits: the sender wakes with its item back.
#[test]
fn receiver_dropped_while_a_sender_waits() {
    loom::model(|| {
        let (tx, rx) = channel(block_queue(1));
        tx.try_send(0).expect("room for the first item");
        let sender =
            thread::spawn(move || matches!(block_on(tx.send(1)), Err(SendError::Closed(1))));
        drop(rx);
        assert!(sender.join().expect("sender thread"));
    });
}

/// A sender waits behind a permit holding the only slot; dropping the unused permit
/// always lets it in.
#[test]
fn dropped_permit_lets_a_waiting_sender_in() {
    loom::model(|| {
        let (tx, mut rx) = channel(block_queue(1));
        let sender_tx = tx.clone();
        let permit = tx.try_reserve_weight(0).expect("room for a permit");
        let sender = thread::spawn(move || block_on(sender_tx.send(1)).is_ok());
        drop(permit);
        assert!(sender.join().expect("sender thread"));
        drop(tx);
        assert_eq!(block_on(rx.recv()), Some(1));
        assert_eq!(block_on(rx.recv()), None);
    });
}

/// The receiver borrows both queued items and delivers the first while a sender
/// blocks on the full queue: the sender is let in without another `recv` (the
/// delivered item made room), whichever of the two reaches the queue first.
#[test]
fn delivering_a_lent_item_lets_a_waiting_sender_in() {
    loom::model(|| {
        let (tx, mut rx) = channel(block_queue(2));
        tx.try_send(0).expect("room");
        tx.try_send(1).expect("room");
        let sender = thread::spawn(move || block_on(tx.send(2)).is_ok());
        assert_eq!(block_on(rx.recv()), Some(0));
        // No further recv until the sender is in.
        assert!(sender.join().expect("sender thread"));
        assert_eq!(block_on(rx.recv()), Some(1));
        assert_eq!(block_on(rx.recv()), Some(2));
        assert_eq!(block_on(rx.recv()), None);
        let stats = rx.stats();
        assert!(stats.is_conserved());
        assert_eq!((stats.offered, stats.delivered, stats.depth), (3, 3, 0));
    });
}

/// Stats read while the receiver delivers lent items are conserved at every instant
/// and count each item exactly once, as queued or as delivered.
#[test]
fn stats_while_lent_items_are_delivered() {
    loom::model(|| {
        let (tx, mut rx) = channel(block_queue(4));
        tx.try_send(0).expect("room");
        tx.try_send(1).expect("room");
        let reader = thread::spawn(move || {
            let stats = tx.stats();
            assert!(stats.is_conserved());
            assert_eq!(stats.offered, 2);
            assert_eq!(stats.delivered + stats.depth, 2);
            assert!(stats.max_depth == 2);
            stats.delivered
        });
        assert_eq!(block_on(rx.recv()), Some(0));
        assert_eq!(block_on(rx.recv()), Some(1));
        assert!(reader.join().expect("reader thread") <= 2);
        assert_eq!(rx.stats().delivered, 2);
    });
}

/// A sender that finds the queue full by the core's count, while the receiver
/// delivers a lent item, either gets in at once or waits and is let in: never stuck.
#[test]
fn full_by_lent_items_while_the_receiver_delivers() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let (tx, mut rx) = channel(block_queue(1));
        tx.try_send(0).expect("room");
        let second = tx.clone();
        let receiver = thread::spawn(move || {
            let mut received = Vec::new();
            while let Some(item) = block_on(rx.recv()) {
                received.push(item);
            }
            received
        });
        block_on(second.send(1)).expect("the receiver makes room");
        drop((tx, second));
        assert_eq!(receiver.join().expect("receiver thread"), [0, 1]);
    });
}
