//! The async queue on tokio: timeouts on the paused clock, every policy through the
//! shell, and many producers.

use std::hash::Hash;
use std::time::Duration;

use weir_flow::Clock;
use weir_flow::queue::{
    Capacity, Fallback, OnFull, QueueConfig, Receiver, ReserveError, SendError, Sent, TryRecvError,
    channel, channel_with_clock,
};

/// A queue on tokio's clock, for tests that measure ages on the paused clock
/// (`channel` uses the coarse clock, which does not follow it).
fn tokio_clock_channel<T, K: Hash + Eq + Clone>(
    config: QueueConfig<T, K>,
) -> (weir_flow::queue::Sender<T, K>, Receiver<T, K>) {
    channel_with_clock(config, Clock::new())
}

#[tokio::test(start_paused = true)]
async fn send_timeout_gives_up_counts_and_hands_back() {
    let (tx, mut rx) = channel::<u32, ()>(QueueConfig::new(Capacity::items(1), OnFull::Block));
    tx.send(0).await.expect("room");
    let started = tokio::time::Instant::now();
    match tx.send_timeout(1, Duration::from_millis(100)).await {
        Err(SendError::Timeout(item)) => assert_eq!(item, 1),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(started.elapsed(), Duration::from_millis(100));
    let stats = rx.stats();
    assert_eq!((stats.offered, stats.rejected, stats.depth), (2, 1, 1));
    assert!(stats.is_conserved());
    // The timed-out send left no waiter behind: the next send goes straight in.
    assert_eq!(rx.recv().await, Some(0));
    tx.send_timeout(2, Duration::from_millis(100))
        .await
        .expect("room now");
    assert_eq!(rx.recv().await, Some(2));
}

#[tokio::test(start_paused = true)]
async fn send_timeout_succeeds_when_room_comes_in_time() {
    let (tx, mut rx) =
        tokio_clock_channel::<u32, ()>(QueueConfig::new(Capacity::items(1), OnFull::Block));
    tx.send(0).await.expect("room");
    let consumer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let first = rx.recv().await;
        (first, rx.recv().await, rx)
    });
    assert!(matches!(
        tx.send_timeout(1, Duration::from_millis(100)).await,
        Ok(Sent::Queued)
    ));
    drop(tx);
    let (first, second, rx) = consumer.await.expect("consumer");
    assert_eq!((first, second), (Some(0), Some(1)));
    let stats = rx.stats();
    assert_eq!((stats.offered, stats.delivered, stats.rejected), (2, 2, 0));
    assert_eq!(stats.max_queue_wait, Duration::from_millis(50));
}

#[tokio::test(start_paused = true)]
async fn expired_items_are_discarded_counted_and_seen() {
    let policy = OnFull::Expire {
        max_age: Duration::from_millis(500),
        when_full: Fallback::Reject,
    };
    let (tx, mut rx) = tokio_clock_channel::<u32, ()>(QueueConfig::new(Capacity::items(8), policy));
    tx.send(1).await.expect("room");
    tokio::time::advance(Duration::from_millis(100)).await;
    tx.send(2).await.expect("room");
    tokio::time::advance(Duration::from_millis(400)).await;
    // Item 1 is exactly 500 ms old: still delivered.
    assert_eq!(rx.recv().await, Some(1));
    tokio::time::advance(Duration::from_millis(101)).await;
    tx.send(3).await.expect("room");
    let mut expired = Vec::new();
    assert_eq!(rx.recv_with(|item, _| expired.push(item)).await, Some(3));
    assert_eq!(expired, [2]);
    let stats = rx.stats();
    assert_eq!((stats.expired, stats.delivered), (1, 2));
    assert!(stats.is_conserved());
}

#[tokio::test]
async fn refusing_policies_answer_at_once() {
    let (tx, mut rx) = channel::<u32, ()>(QueueConfig::new(Capacity::items(1), OnFull::Reject));
    tx.send(1).await.expect("room");
    assert!(matches!(tx.send(2).await, Err(SendError::Full(2))));

    let (tx, _rx) = channel::<u32, ()>(QueueConfig::new(Capacity::items(1), OnFull::DropNewest));
    tx.send(1).await.expect("room");
    assert!(matches!(tx.send(2).await, Err(SendError::DroppedNewest(2))));
    assert_eq!(tx.stats().dropped_newest, 1);

    let (tx, mut oldest) =
        channel::<u32, ()>(QueueConfig::new(Capacity::items(1), OnFull::DropOldest));
    tx.send(1).await.expect("room");
    match tx.send(2).await {
        Ok(Sent::Evicted(evicted)) => assert_eq!(evicted.into_iter().collect::<Vec<_>>(), [1]),
        other => panic!("expected an eviction, got {other:?}"),
    }
    assert_eq!(oldest.recv().await, Some(2));
    assert_eq!(rx.recv().await, Some(1));
}

#[tokio::test]
async fn conflation_through_the_shell() {
    let policy = OnFull::Conflate {
        max_keys: 2,
        when_full: Fallback::Reject,
    };
    let config = QueueConfig::new(Capacity::items(16), policy).key_by(|item: &(char, u32)| item.0);
    let (tx, mut rx) = channel(config);
    tx.send(('a', 1)).await.expect("room");
    tx.send(('b', 1)).await.expect("room");
    match tx.send(('a', 2)).await {
        Ok(Sent::Superseded { old, evicted }) => {
            assert_eq!(old, ('a', 1));
            assert!(evicted.is_empty());
        }
        other => panic!("expected supersession, got {other:?}"),
    }
    assert!(matches!(
        tx.send(('c', 1)).await,
        Err(SendError::Full(('c', 1)))
    ));
    assert_eq!(rx.recv().await, Some(('a', 2)));
    assert_eq!(rx.recv().await, Some(('b', 1)));
    assert_eq!(rx.stats().superseded, 1);
}

#[tokio::test]
async fn too_heavy_is_refused_even_behind_waiting_senders() {
    let config = QueueConfig::new(Capacity::items_and_weight(4, 10), OnFull::Block)
        .weigh_by(|item: &Vec<u8>| item.len() as u64);
    let (tx, mut rx) = channel(config);
    tx.send(vec![0; 10]).await.expect("room");
    let tx2 = tx.clone();
    let waiting = tokio::spawn(async move { tx2.send(vec![1; 3]).await.map(|_| ()) });
    tokio::task::yield_now().await;
    match tx.send(vec![2; 11]).await {
        Err(SendError::TooHeavy(item)) => assert_eq!(item.len(), 11),
        other => panic!("expected TooHeavy, got {other:?}"),
    }
    assert_eq!(
        tx.reserve_weight(11).await.err(),
        Some(ReserveError::TooHeavy)
    );
    assert_eq!(rx.recv().await.map(|item| item.len()), Some(10));
    waiting.await.expect("task").expect("sent after room freed");
    assert_eq!(rx.recv().await.map(|item| item.len()), Some(3));
    let stats = rx.stats();
    assert_eq!((stats.offered, stats.rejected, stats.delivered), (3, 1, 2));
}

#[tokio::test]
async fn try_recv_tells_empty_from_closed() {
    let (tx, mut rx) = channel::<u32, ()>(QueueConfig::new(Capacity::items(2), OnFull::Block));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    tx.send(1).await.expect("room");
    drop(tx);
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
}

#[tokio::test]
async fn receiver_close_drains_then_ends() {
    let (tx, mut rx) = channel::<u32, ()>(QueueConfig::new(Capacity::items(4), OnFull::Block));
    tx.send(1).await.expect("room");
    tx.send(2).await.expect("room");
    rx.close();
    assert!(matches!(tx.send(3).await, Err(SendError::Closed(3))));
    assert_eq!(rx.recv().await, Some(1));
    assert_eq!(rx.recv().await, Some(2));
    assert_eq!(rx.recv().await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_producers_lose_nothing_and_keep_each_order() {
    const PRODUCERS: u32 = 4;
    const EACH: u32 = 5_000;
    let (tx, mut rx) =
        channel::<(u32, u32), ()>(QueueConfig::new(Capacity::items(16), OnFull::Block));
    for producer in 0..PRODUCERS {
        let tx = tx.clone();
        tokio::spawn(async move {
            for i in 0..EACH {
                tx.send((producer, i)).await.expect("the receiver is alive");
            }
        });
    }
    drop(tx);
    let mut next = [0u32; PRODUCERS as usize];
    while let Some((producer, i)) = rx.recv().await {
        assert!(rx.len() <= 16);
        assert_eq!(
            next[producer as usize], i,
            "each producer's items arrive in order"
        );
        next[producer as usize] += 1;
    }
    assert_eq!(next, [EACH; PRODUCERS as usize]);
    let stats = rx.stats();
    assert_eq!(stats.delivered, u64::from(PRODUCERS * EACH));
    assert!(stats.max_depth <= 16);
    assert!(stats.is_conserved());
}

#[tokio::test]
async fn blocked_senders_are_served_in_arrival_order() {
    let (tx, mut rx) = channel::<u32, ()>(QueueConfig::new(Capacity::items(1), OnFull::Block));
    tx.send(0).await.expect("room");
    let mut tasks = Vec::new();
    for i in 1..=5 {
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move { tx.send(i).await.map(|_| ()) }));
        // Let this sender reach the line before the next one starts.
        tokio::task::yield_now().await;
    }
    drop(tx);
    let mut received = Vec::new();
    while let Some(item) = rx.recv().await {
        received.push(item);
    }
    assert_eq!(received, [0, 1, 2, 3, 4, 5]);
    for task in tasks {
        task.await.expect("task").expect("sent");
    }
}

#[tokio::test(start_paused = true)]
async fn recv_many_takes_a_batch_under_one_reading() {
    let policy = OnFull::Expire {
        max_age: Duration::from_millis(10),
        when_full: Fallback::Block,
    };
    let (tx, mut rx) = tokio_clock_channel::<u32, ()>(QueueConfig::new(Capacity::items(8), policy));
    tx.send(0).await.expect("room");
    tokio::time::advance(Duration::from_millis(11)).await;
    for i in 1..=5 {
        tx.send(i).await.expect("room");
    }
    let mut batch = Vec::new();
    // Item 0 expired on the way; the batch stops at the limit.
    assert_eq!(rx.recv_many(&mut batch, 3).await, 3);
    assert_eq!(batch, [1, 2, 3]);
    assert_eq!(rx.recv_many(&mut batch, 10).await, 2);
    assert_eq!(batch, [1, 2, 3, 4, 5]);
    assert_eq!(rx.recv_many(&mut batch, 0).await, 0);
    drop(tx);
    assert_eq!(rx.recv_many(&mut batch, 10).await, 0, "closed and drained");
    let stats = rx.stats();
    assert_eq!((stats.expired, stats.delivered), (1, 5));
    assert!(stats.is_conserved());
}

/// The default (coarse) clock never expires an item early: one younger than `max_age`
/// is delivered, one well past it (more than two ticks) is expired.
#[tokio::test]
async fn coarse_clock_never_expires_early() {
    let max_age = Duration::from_millis(30);
    let policy = OnFull::Expire {
        max_age,
        when_full: Fallback::Reject,
    };
    let (tx, mut rx) = channel::<u32, ()>(QueueConfig::new(Capacity::items(8), policy));
    let started = std::time::Instant::now();
    tx.send(1).await.expect("room");
    let young = rx.recv().await;
    if started.elapsed() <= max_age {
        assert_eq!(young, Some(1), "taken before max_age: must be delivered");
    }
    tx.send(2).await.expect("room");
    tx.send(3).await.expect("room");
    let tick = Clock::coarse().resolution();
    std::thread::sleep(max_age + tick * 3);
    drop(tx);
    assert_eq!(
        rx.recv().await,
        None,
        "both items are past max_age + 2 ticks"
    );
    let stats = rx.stats();
    // Under heavy load the first take may itself come after `max_age`.
    assert_eq!(stats.delivered, u64::from(young.is_some()));
    assert_eq!(stats.delivered + stats.expired, 3);
    assert!(stats.is_conserved());
}

/// The receiver holds lent items; delivering one of them frees its weight at once: a
/// sender waiting for that weight is let in without another `recv`.
#[tokio::test(start_paused = true)]
async fn a_delivered_lent_item_lets_a_weighted_sender_in_without_another_recv() {
    let config = QueueConfig::new(Capacity::weight(10), OnFull::Block).weigh_by(|w: &u64| *w);
    let (tx, mut rx) = channel(config);
    tx.send(4).await.expect("room");
    tx.send(4).await.expect("room");
    let sender = tokio::spawn({
        let tx = tx.clone();
        async move { tx.send(4).await.map(|_| ()) }
    });
    tokio::task::yield_now().await; // the sender waits: 8 + 4 > 10
    assert_eq!(rx.len(), 2);
    assert_eq!(rx.recv().await, Some(4)); // both lent, one delivered: 4 free
    tokio::time::timeout(Duration::from_secs(1), sender)
        .await
        .expect("let in without another recv")
        .expect("task")
        .expect("sent");
    let stats = rx.stats();
    assert_eq!((stats.delivered, stats.depth, stats.bytes), (1, 2, 8));
    assert!(stats.is_conserved());
}

/// Under `Reject`, room made by delivering a lent item is there for the next send at
/// once: nothing is rejected while the queue has room.
#[tokio::test]
async fn reject_sees_room_as_soon_as_a_lent_item_is_delivered() {
    let (tx, mut rx) = channel::<u32, ()>(QueueConfig::new(Capacity::items(3), OnFull::Reject));
    for i in 0..3 {
        tx.try_send(i).expect("room");
    }
    assert!(matches!(tx.try_send(3), Err(SendError::Full(3))));
    assert_eq!(rx.recv().await, Some(0)); // all three lent, one delivered
    tx.try_send(4).expect("room made by the delivery");
    assert!(matches!(tx.try_send(5), Err(SendError::Full(5))));
    let stats = tx.stats();
    assert_eq!(
        (
            stats.offered,
            stats.rejected,
            stats.delivered,
            stats.depth,
            stats.max_depth
        ),
        (6, 2, 1, 3, 3)
    );
    let mut rest = Vec::new();
    while let Ok(item) = rx.try_recv() {
        rest.push(item);
    }
    assert_eq!(rest, [1, 2, 4]);
}

/// Producers of weighted items and a consumer that pauses now and then, on two
/// threads: nothing is lost or reordered, the weight bound holds whenever it is read,
/// and the stats add up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_producers_and_a_pausing_consumer() {
    const PRODUCERS: u64 = 3;
    const EACH: u64 = 3_000;
    let config = QueueConfig::new(Capacity::items_and_weight(64, 100), OnFull::Block)
        .weigh_by(|&(_, i): &(u64, u64)| i % 7);
    let (tx, mut rx) = channel(config);
    for producer in 0..PRODUCERS {
        let tx = tx.clone();
        tokio::spawn(async move {
            for i in 0..EACH {
                tx.send((producer, i)).await.expect("the receiver is alive");
            }
        });
    }
    let observer = {
        let tx = tx.clone();
        tokio::spawn(async move {
            for _ in 0..200 {
                let stats = tx.stats();
                assert!(stats.is_conserved());
                assert!(stats.bytes <= 100 && stats.depth <= 64);
                tokio::task::yield_now().await;
            }
        })
    };
    drop(tx);
    let mut next = [0u64; PRODUCERS as usize];
    let mut received = 0u64;
    while let Some((producer, i)) = rx.recv().await {
        assert_eq!(next[producer as usize], i, "each producer's order");
        next[producer as usize] += 1;
        received += 1;
        if received.is_multiple_of(997) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    observer.await.expect("observer");
    assert_eq!(next, [EACH; PRODUCERS as usize]);
    let stats = rx.stats();
    assert_eq!(stats.delivered, PRODUCERS * EACH);
    assert_eq!((stats.depth, stats.bytes), (0, 0));
    assert!(stats.max_depth <= 64);
    assert!(stats.is_conserved());
}
