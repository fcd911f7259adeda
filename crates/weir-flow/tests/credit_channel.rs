//! The async credit channel: sends wait for demand, the buffer is bounded by the
//! demand granted, cancel and the terminal signals behave as the rules say.

use std::num::NonZeroUsize;
use std::time::Duration;

use proptest::prelude::*;
use weir_flow::credit::{
    self, Closed, RecvError, RequestError, RequestOutcome, SendError, StreamState, TryRecvError,
    TrySendError,
};

fn cap(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap()
}

#[tokio::test(start_paused = true)]
async fn send_waits_for_demand_then_goes_through() {
    let (mut tx, mut rx) = credit::channel::<u32>(cap(8));
    let sender = tokio::spawn(async move {
        for i in 0..5 {
            tx.send(i).await.unwrap();
        }
        assert!(tx.complete());
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(rx.buffered(), 0, "nothing is sent without demand");

    let _ = rx.request(2);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(rx.buffered(), 2, "exactly the demand granted");
    assert_eq!(rx.demand(), 0);

    let _ = rx.request(3);
    let mut got = Vec::new();
    loop {
        match rx.recv().await {
            Ok(item) => got.push(item),
            Err(end) => {
                assert_eq!(end, RecvError::Completed);
                break;
            }
        }
    }
    assert_eq!(got, vec![0, 1, 2, 3, 4]);
    sender.await.unwrap();
    let stats = rx.stats();
    assert_eq!((stats.offered, stats.delivered, stats.depth), (5, 5, 0));
    assert!(stats.is_conserved());
    assert_eq!(stats.max_depth, 3);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_send_takes_no_demand_and_sends_nothing() {
    let (mut tx, rx) = credit::channel::<&str>(cap(4));
    let timed_out = tokio::time::timeout(Duration::from_millis(50), tx.send("lost")).await;
    assert!(timed_out.is_err(), "no demand: the send waits");
    let _ = rx.request(1);
    assert_eq!(rx.buffered(), 0, "the dropped send did not slip through");
    assert_eq!(rx.demand(), 1, "and took no demand");
    assert_eq!(tx.ready().await, Ok(1));
    tx.try_send("kept").unwrap();
    assert_eq!(rx.buffered(), 1);
}

#[tokio::test(start_paused = true)]
async fn cancel_wakes_a_waiting_sender_and_hands_the_item_back() {
    let (mut tx, mut rx) = credit::channel::<u32>(cap(4));
    let _ = rx.request(1);
    tx.send(1).await.unwrap();
    let waiting = tokio::spawn(async move {
        let refused = tx.send(2).await;
        (refused, tx)
    });
    tokio::time::sleep(Duration::from_millis(5)).await;
    rx.cancel();
    rx.cancel(); // idempotent
    let (refused, mut tx) = waiting.await.unwrap();
    assert_eq!(refused, Err(SendError::Cancelled(2)));
    assert_eq!(tx.try_send(3), Err(TrySendError::Cancelled(3)));
    assert_eq!(tx.ready().await, Err(Closed::Cancelled));
    assert_eq!(
        rx.request(5),
        RequestOutcome::Ignored(credit::IgnoreReason::Cancelled)
    );

    // Items sent before the cancel can still be received; then the end.
    assert_eq!(rx.recv().await, Ok(1));
    assert_eq!(rx.recv().await, Err(RecvError::Cancelled));
    let stats = rx.stats();
    assert_eq!((stats.offered, stats.rejected, stats.delivered), (3, 2, 1));
    assert!(stats.is_conserved());
    assert!(!tx.complete(), "no terminal signal after cancel");
}

#[tokio::test]
async fn request_zero_ends_the_stream_after_the_buffered_items() {
    let (mut tx, mut rx) = credit::channel::<u32>(cap(4));
    let _ = rx.request(2);
    tx.send(7).await.unwrap();
    assert_eq!(
        rx.request(0),
        RequestOutcome::Errored(RequestError::NonPositive(0))
    );
    assert_eq!(tx.send(8).await, Err(SendError::Terminated(8)));
    assert_eq!(rx.recv().await, Ok(7));
    assert_eq!(
        rx.recv().await,
        Err(RecvError::InvalidRequest(RequestError::NonPositive(0)))
    );
    assert_eq!(rx.state(), StreamState::InvalidRequest);
}

#[tokio::test]
async fn fail_and_disconnect_are_reported_after_the_buffered_items() {
    let (mut tx, mut rx) = credit::channel::<u32>(cap(4));
    let _ = rx.request(5);
    tx.send(1).await.unwrap();
    assert!(tx.fail("disk on fire"));
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(
        rx.try_recv(),
        Err(TryRecvError::Ended(RecvError::Failed {
            reason: "disk on fire".into()
        }))
    );

    let (tx, mut rx) = credit::channel::<u32>(cap(4));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    drop(tx);
    assert_eq!(rx.recv().await, Err(RecvError::Disconnected));
}

#[tokio::test]
async fn dropping_the_receiver_cancels() {
    let (mut tx, rx) = credit::channel::<u32>(cap(4));
    let _ = rx.request(5);
    drop(rx);
    assert_eq!(tx.send(1).await, Err(SendError::Cancelled(1)));
    assert_eq!(tx.state(), StreamState::Cancelled);
}

#[tokio::test(start_paused = true)]
async fn unbounded_demand_is_still_capped_by_the_channel_capacity() {
    let (mut tx, mut rx) = credit::channel::<u32>(cap(3));
    let _ = rx.request(u64::MAX);
    for i in 0..3 {
        tx.try_send(i).unwrap();
    }
    assert_eq!(tx.try_send(3), Err(TrySendError::NoDemand(3)));
    assert_eq!(rx.demand(), u64::MAX);
    let sender = tokio::spawn(async move { tx.send(3).await });
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(!sender.is_finished(), "waits for room");
    assert_eq!(rx.recv().await, Ok(0));
    sender.await.unwrap().unwrap();
    assert_eq!(rx.buffered(), 3);
}

proptest! {
    /// Whatever the receiver requests and takes, and the sender tries, the buffer never
    /// holds more than was granted and not yet received, and conservation holds.
    #[test]
    fn buffer_is_bounded_by_granted_demand(
        ops in proptest::collection::vec(0u8..3, 1..300),
        grants in proptest::collection::vec(1u64..5, 300),
    ) {
        let (mut tx, mut rx) = credit::channel::<usize>(cap(1_000));
        let mut granted: u64 = 0;
        let mut received: u64 = 0;
        for (i, op) in ops.into_iter().enumerate() {
            match op {
                0 => {
                    let _ = rx.request(grants[i]);
                    granted += grants[i];
                }
                1 => match tx.try_send(i) {
                    Ok(()) | Err(TrySendError::NoDemand(_)) => {}
                    Err(other) => prop_assert!(false, "unexpected {other:?}"),
                },
                _ => if rx.try_recv().is_ok() { received += 1 },
            }
            let buffered = rx.buffered() as u64;
            prop_assert!(buffered <= granted - received);
            prop_assert_eq!(buffered + rx.demand(), granted - received);
            prop_assert!(rx.stats().is_conserved());
        }
    }
}

/// Sender and receiver on different worker threads, demand granted in uneven chunks:
/// every item arrives once, in order, and no wakeup is lost (a lost one would hang
/// and trip the timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_lost_wakeups_across_threads() {
    for round in 0..50u64 {
        let (mut tx, mut rx) = credit::channel::<u64>(cap(4));
        let sender = tokio::spawn(async move {
            for i in 0..500 {
                tx.send(i).await.unwrap();
            }
            tx.complete();
        });
        let receiver = tokio::spawn(async move {
            let mut expected = 0;
            let _ = rx.request(1 + round % 7);
            loop {
                match rx.recv().await {
                    Ok(item) => {
                        assert_eq!(item, expected);
                        expected += 1;
                        if rx.demand() == 0 && rx.buffered() == 0 {
                            let _ = rx.request(1 + (expected + round) % 5);
                        }
                    }
                    Err(end) => {
                        assert_eq!(end, RecvError::Completed);
                        break expected;
                    }
                }
            }
        });
        let received = tokio::time::timeout(Duration::from_secs(10), receiver)
            .await
            .expect("no lost wakeup")
            .unwrap();
        sender.await.unwrap();
        assert_eq!(received, 500);
    }
}
