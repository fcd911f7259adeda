//! loom models of the credit channel: demand granted, cancel and the end of the
//! stream race a sender or receiver that is waiting, over every interleaving. A waiter
//! that is never woken makes `block_on` deadlock, which loom reports.

use std::num::NonZeroUsize;

use loom::future::block_on;
use loom::thread;
use weir_flow::credit::{self, RecvError, SendError};

fn capacity(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).expect("non-zero")
}

/// The sender waits for demand that the receiver grants one item at a time.
#[test]
fn request_wakes_a_waiting_sender() {
    loom::model(|| {
        let (mut tx, mut rx) = credit::channel::<u32>(capacity(2));
        let sender = thread::spawn(move || {
            block_on(async {
                tx.send(1).await.expect("demand comes");
                tx.send(2).await.expect("demand comes");
                tx.complete();
            });
        });
        let _ = rx.request(1);
        assert_eq!(block_on(rx.recv()), Ok(1));
        let _ = rx.request(1);
        assert_eq!(block_on(rx.recv()), Ok(2));
        assert_eq!(block_on(rx.recv()), Err(RecvError::Completed));
        sender.join().expect("sender");
        assert!(rx.stats().is_conserved());
    });
}

/// A cancel races a sender waiting for demand: the send fails with the item handed
/// back, whichever runs first.
#[test]
fn cancel_wakes_a_waiting_sender() {
    loom::model(|| {
        let (mut tx, rx) = credit::channel::<u32>(capacity(1));
        let sender = thread::spawn(move || block_on(tx.send(7)));
        rx.cancel();
        assert_eq!(sender.join().expect("sender"), Err(SendError::Cancelled(7)));
    });
}

/// A send and a completion race a waiting receiver: it sees the item, then the end.
#[test]
fn send_then_complete_wakes_a_waiting_receiver() {
    loom::model(|| {
        let (mut tx, mut rx) = credit::channel::<u32>(capacity(1));
        let _ = rx.request(1);
        let sender = thread::spawn(move || {
            tx.try_send(3).expect("demand granted");
            tx.complete();
        });
        assert_eq!(block_on(rx.recv()), Ok(3));
        assert_eq!(block_on(rx.recv()), Err(RecvError::Completed));
        sender.join().expect("sender");
    });
}
