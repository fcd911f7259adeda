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
