//! Unit tests of the sans-IO core: every policy edge.

use std::time::Duration;

use super::QueueCore;
use crate::Timestamp;
use crate::queue::{Capacity, Fallback, Offer, OnFull, Popped, QueueConfig, ReserveRefused};

fn t(ms: u64) -> Timestamp {
    Timestamp::from_millis(ms)
}

fn queue(capacity: Capacity, on_full: OnFull) -> QueueCore<u32> {
    QueueCore::new(QueueConfig::new(capacity, on_full))
}

/// Items are `(key, weight)` pairs; the key conflates, the weight weighs.
fn keyed(capacity: Capacity, on_full: OnFull) -> QueueCore<(u32, u64), u32> {
    QueueCore::new(
        QueueConfig::new(capacity, on_full)
            .weigh_by(|item: &(u32, u64)| item.1)
            .key_by(|item: &(u32, u64)| item.0),
    )
}

fn drain<T, K: std::hash::Hash + Eq + Clone>(q: &mut QueueCore<T, K>, now: Timestamp) -> Vec<T> {
    std::iter::from_fn(|| q.take(now).map(|taken| taken.item)).collect()
}

#[test]
fn fifo_and_enqueue_times() {
    let mut q = queue(Capacity::items(3), OnFull::Reject);
    for (i, ms) in [(1, 0), (2, 5), (3, 9)] {
        assert!(matches!(q.offer(i, t(ms)), Offer::Accepted));
    }
    let first = q.take(t(20)).expect("queued");
    assert_eq!((first.item, first.enqueued_at), (1, t(0)));
    assert_eq!(drain(&mut q, t(20)), [2, 3]);
    let stats = q.stats(t(20));
    assert_eq!(stats.max_queue_wait, Duration::from_millis(20));
    assert_eq!((stats.delivered, stats.max_depth, stats.depth), (3, 3, 0));
    assert!(stats.is_conserved());
}

#[test]
fn block_hands_the_item_back_uncounted() {
    let mut q = queue(Capacity::items(1), OnFull::Block);
    assert!(q.offer(1, t(0)).is_accepted());
    assert!(matches!(q.offer(2, t(1)), Offer::WouldBlock(2)));
    assert!(matches!(q.offer(2, t(2)), Offer::WouldBlock(2)));
    let stats = q.stats(t(2));
    assert_eq!((stats.offered, stats.rejected), (1, 0));
    assert!(stats.is_conserved());
    q.record_abandoned();
    let stats = q.stats(t(3));
    assert_eq!((stats.offered, stats.rejected), (2, 1));
    assert!(stats.is_conserved());
}

#[test]
fn reject_hands_the_item_back() {
    let mut q = queue(Capacity::items(1), OnFull::Reject);
    assert!(q.offer(1, t(0)).is_accepted());
    assert!(matches!(q.offer(2, t(0)), Offer::Rejected(2)));
    let stats = q.stats(t(0));
    assert_eq!((stats.offered, stats.accepted, stats.rejected), (2, 1, 1));
    assert!(stats.is_conserved());
}

#[test]
fn drop_newest_counts_and_hands_back() {
    let mut q = queue(Capacity::items(1), OnFull::DropNewest);
    assert!(q.offer(1, t(0)).is_accepted());
    assert!(matches!(q.offer(2, t(0)), Offer::DroppedNewest(2)));
    assert_eq!(drain(&mut q, t(1)), [1]);
    let stats = q.stats(t(1));
    assert_eq!(stats.dropped_newest, 1);
    assert!(stats.is_conserved());
}

#[test]
fn drop_oldest_evicts_the_head() {
    let mut q = queue(Capacity::items(2), OnFull::DropOldest);
    for i in 1..=2 {
        assert!(q.offer(i, t(0)).is_accepted());
    }
    match q.offer(3, t(1)) {
        Offer::Evicted(evicted) => assert_eq!(evicted.into_iter().collect::<Vec<_>>(), [1]),
        other => panic!("expected an eviction, got {other:?}"),
    }
    assert_eq!(drain(&mut q, t(2)), [2, 3]);
    let stats = q.stats(t(2));
    assert_eq!((stats.dropped_oldest, stats.delivered), (1, 2));
    assert!(stats.is_conserved());
}

#[test]
fn drop_oldest_under_weight_evicts_as_many_as_needed() {
    let mut q = keyed(Capacity::weight(10), OnFull::DropOldest);
    for (key, weight) in [(1, 3), (2, 3), (3, 3)] {
        assert!(q.offer((key, weight), t(0)).is_accepted());
    }
    match q.offer((4, 8), t(1)) {
        Offer::Evicted(evicted) => {
            assert_eq!(evicted.len(), 3);
            assert_eq!(evicted.first(), Some(&(1, 3)));
        }
        other => panic!("expected evictions, got {other:?}"),
    }
    assert_eq!(q.weight(), 8);
    assert!(q.stats(t(1)).is_conserved());
}

#[test]
fn expiry_is_strictly_older_than_the_deadline() {
    let max_age = Duration::from_millis(500);
    let policy = OnFull::Expire {
        max_age,
        when_full: Fallback::Reject,
    };
    let mut q = queue(Capacity::items(10), policy);
    assert!(q.offer(1, t(0)).is_accepted());
    assert!(q.offer(2, t(1)).is_accepted());
    // Item 1 is exactly 500 ms old: delivered.
    let taken = q.take(t(500)).expect("not expired at exactly max_age");
    assert_eq!(taken.item, 1);
    // Item 2 is 500 ms old at t=501: delivered; at t=502 it would be 501 ms: expired.
    assert!(q.offer(3, t(400)).is_accepted());
    let mut expired = Vec::new();
    let taken = q.take_with(t(502), |item, at| expired.push((item, at)));
    assert_eq!(taken.map(|taken| taken.item), Some(3));
    assert_eq!(expired, [(2, t(1))]);
    let stats = q.stats(t(502));
    assert_eq!((stats.expired, stats.delivered), (1, 2));
    // Expired items do not count in max_queue_wait.
    assert_eq!(stats.max_queue_wait, Duration::from_millis(500));
    assert!(stats.is_conserved());
}

#[test]
fn pop_reports_expired_items_one_by_one() {
    let max_age = Duration::from_millis(10);
    let policy = OnFull::Expire {
        max_age,
        when_full: Fallback::Block,
    };
    let mut q = queue(Capacity::unbounded(), policy);
    for i in 0..3 {
        assert!(q.offer(i, t(u64::from(i))).is_accepted());
    }
    assert!(matches!(q.pop(t(12)), Some(Popped::Expired(taken)) if taken.item == 0));
    assert!(matches!(q.pop(t(12)), Some(Popped::Expired(taken)) if taken.item == 1));
    assert!(matches!(q.pop(t(12)), Some(Popped::Delivered(taken)) if taken.item == 2));
    assert_eq!(q.pop(t(12)), None);
    assert!(q.stats(t(12)).is_conserved());
}

#[test]
fn expire_uses_its_fallback_when_full() {
    let policy = OnFull::Expire {
        max_age: Duration::from_secs(1),
        when_full: Fallback::DropOldest,
    };
    let mut q = queue(Capacity::items(1), policy);
    assert!(q.offer(1, t(0)).is_accepted());
    assert!(matches!(q.offer(2, t(0)), Offer::Evicted(_)));
    assert_eq!(q.stats(t(0)).dropped_oldest, 1);
}

#[test]
fn conflate_replaces_in_place_with_the_new_enqueue_time() {
    let policy = OnFull::Conflate {
        max_keys: 10,
        when_full: Fallback::Reject,
    };
    let mut q = keyed(Capacity::items(10), policy);
    assert!(q.offer((1, 0), t(0)).is_accepted());
    assert!(q.offer((2, 0), t(1)).is_accepted());
    assert!(q.offer((3, 0), t(2)).is_accepted());
    match q.offer((2, 7), t(5)) {
        Offer::Superseded { old, evicted } => {
            assert_eq!(old, (2, 0));
            assert!(evicted.is_empty());
        }
        other => panic!("expected supersession, got {other:?}"),
    }
    assert_eq!(q.len(), 3);
    let order: Vec<_> = std::iter::from_fn(|| q.take(t(10))).collect();
    let items: Vec<_> = order.iter().map(|taken| taken.item).collect();
    assert_eq!(items, [(1, 0), (2, 7), (3, 0)], "position kept");
    assert_eq!(order[1].enqueued_at, t(5), "the new item's enqueue time");
    let stats = q.stats(t(10));
    assert_eq!(
        (stats.offered, stats.superseded, stats.delivered),
        (4, 1, 3)
    );
    assert_eq!(stats.max_queue_wait, Duration::from_millis(10));
    assert!(stats.is_conserved());
}

#[test]
fn conflate_key_bound_falls_back_for_a_new_key() {
    for (fallback, expect_dropped_oldest) in [
        (Fallback::Reject, false),
        (Fallback::DropNewest, false),
        (Fallback::DropOldest, true),
        (Fallback::Block, false),
    ] {
        let policy = OnFull::Conflate {
            max_keys: 2,
            when_full: fallback,
        };
        let mut q = keyed(Capacity::items(100), policy);
        assert!(q.offer((1, 0), t(0)).is_accepted());
        assert!(q.offer((2, 0), t(0)).is_accepted());
        // A known key still conflates when the key bound is reached.
        assert!(matches!(q.offer((1, 0), t(1)), Offer::Superseded { .. }));
        let outcome = q.offer((3, 0), t(2));
        match fallback {
            Fallback::Reject => assert!(matches!(outcome, Offer::Rejected((3, 0)))),
            Fallback::DropNewest => assert!(matches!(outcome, Offer::DroppedNewest((3, 0)))),
            Fallback::Block => assert!(matches!(outcome, Offer::WouldBlock((3, 0)))),
            Fallback::DropOldest => match outcome {
                Offer::Evicted(evicted) => assert_eq!(evicted.first(), Some(&(1, 0))),
                other => panic!("expected an eviction, got {other:?}"),
            },
        }
        assert!(q.len() <= 2);
        assert_eq!(q.stats(t(2)).dropped_oldest == 1, expect_dropped_oldest);
        assert!(q.stats(t(2)).is_conserved());
        // After eviction the evicted key is gone: offering it again is a new key.
        if expect_dropped_oldest {
            assert_eq!(drain(&mut q, t(3)), [(2, 0), (3, 0)]);
        }
    }
}

#[test]
fn conflate_heavier_replacement_under_weight_bound() {
    let rejecting = OnFull::Conflate {
        max_keys: 10,
        when_full: Fallback::Reject,
    };
    let mut q = keyed(Capacity::weight(10), rejecting);
    assert!(q.offer((1, 4), t(0)).is_accepted());
    assert!(q.offer((2, 4), t(0)).is_accepted());
    assert!(matches!(q.offer((2, 7), t(1)), Offer::Rejected((2, 7))));
    assert!(matches!(q.offer((2, 6), t(1)), Offer::Superseded { .. }));
    assert_eq!(q.weight(), 10);

    let evicting = OnFull::Conflate {
        max_keys: 10,
        when_full: Fallback::DropOldest,
    };
    let mut q = keyed(Capacity::weight(10), evicting);
    for key in 1..=3 {
        assert!(q.offer((key, 3), t(0)).is_accepted());
    }
    // Key 3 grows to 6: key 1 is evicted, key 3 keeps its place behind key 2.
    match q.offer((3, 6), t(1)) {
        Offer::Superseded { old, evicted } => {
            assert_eq!(old, (3, 3));
            assert_eq!(evicted.into_iter().collect::<Vec<_>>(), [(1, 3)]);
        }
        other => panic!("expected supersession, got {other:?}"),
    }
    // Key 2 grows to 9: key 2 itself reaches the head and is evicted, so the new item
    // is appended as a new key after key 3 is evicted too.
    match q.offer((2, 9), t(2)) {
        Offer::Evicted(evicted) => {
            assert_eq!(evicted.into_iter().collect::<Vec<_>>(), [(2, 3), (3, 6)]);
        }
        other => panic!("expected evictions, got {other:?}"),
    }
    assert_eq!(drain(&mut q, t(3)), [(2, 9)]);
    assert!(q.stats(t(3)).is_conserved());
}

#[test]
fn too_heavy_is_refused_at_once() {
    for policy in [OnFull::Block, OnFull::Reject, OnFull::DropOldest] {
        let mut q = keyed(Capacity::items_and_weight(4, 100), policy);
        assert!(matches!(q.offer((1, 101), t(0)), Offer::TooHeavy((1, 101))));
        assert!(q.offer((1, 100), t(0)).is_accepted());
        let stats = q.stats(t(0));
        assert_eq!((stats.offered, stats.rejected), (2, 1));
        assert!(stats.is_conserved());
        assert_eq!(q.try_reserve(101), Err(ReserveRefused::TooHeavy));
    }
}

#[test]
fn close_refuses_offers_and_drains() {
    let mut q = queue(Capacity::items(4), OnFull::Block);
    assert!(q.offer(1, t(0)).is_accepted());
    assert!(q.offer(2, t(0)).is_accepted());
    q.close();
    q.close();
    assert!(q.is_closed());
    assert!(matches!(q.offer(3, t(1)), Offer::Closed(3)));
    assert_eq!(q.try_reserve(0), Err(ReserveRefused::Closed));
    assert_eq!(drain(&mut q, t(2)), [1, 2]);
    assert!(q.take(t(2)).is_none());
    let stats = q.stats(t(2));
    assert_eq!((stats.offered, stats.delivered), (2, 2));
    assert!(stats.is_conserved());
}

#[test]
fn reservations_hold_room_until_used_or_released() {
    let mut q = keyed(Capacity::items_and_weight(2, 10), OnFull::Block);
    let r1 = q.try_reserve(6).expect("room");
    assert_eq!(
        q.try_reserve(5),
        Err(ReserveRefused::Full),
        "weight is reserved"
    );
    let r2 = q.try_reserve(4).expect("room");
    assert_eq!(
        q.try_reserve(0),
        Err(ReserveRefused::Full),
        "items are reserved"
    );
    assert!(matches!(q.offer((9, 0), t(0)), Offer::WouldBlock(_)));
    q.release(r2);
    assert!(q.offer_reserved((1, 6), r1, t(0)).is_accepted());
    assert!(q.offer((2, 4), t(0)).is_accepted());
    assert_eq!((q.len(), q.weight()), (2, 10));
    assert!(q.stats(t(0)).is_conserved());
}

#[test]
fn drop_oldest_never_evicts_for_room_held_by_reservations() {
    let mut q = queue(Capacity::items(1), OnFull::DropOldest);
    let reservation = q.try_reserve(0).expect("room");
    assert!(matches!(q.offer(1, t(0)), Offer::DroppedNewest(1)));
    assert!(q.offer_reserved(2, reservation, t(0)).is_accepted());
    assert!(q.stats(t(0)).is_conserved());
}

#[test]
fn unbounded_takes_everything() {
    let mut q = queue(Capacity::unbounded(), OnFull::Reject);
    assert!(q.capacity().is_unbounded());
    for i in 0..10_000 {
        assert!(q.offer(i, t(0)).is_accepted());
    }
    let stats = q.stats(t(7));
    assert_eq!((stats.depth, stats.max_depth), (10_000, 10_000));
    assert_eq!(stats.oldest_age, Duration::from_millis(7));
}

#[test]
fn stats_report_bytes_and_oldest_age() {
    let mut q = keyed(Capacity::weight(1_000), OnFull::Reject);
    assert!(q.offer((1, 100), t(10)).is_accepted());
    assert!(q.offer((2, 50), t(20)).is_accepted());
    let stats = q.stats(t(35));
    assert_eq!(stats.bytes, 150);
    assert_eq!(stats.oldest_age, Duration::from_millis(25));
    assert!(q.take(t(40)).is_some());
    assert_eq!(q.stats(t(40)).bytes, 50);
}
