//! Property tests of the sans-IO queue core.
//!
//! 1. Against a reference model (item bound only, every policy): the same outcomes,
//!    the same handed-back items, the same delivery order.
//! 2. With weights and reservations: conservation after every step, bounds never
//!    exceeded, every counted item accounted for exactly once, FIFO order.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use proptest::prelude::*;
use weir_flow::Timestamp;
use weir_flow::queue::{
    Capacity, Fallback, Offer, OnFull, Popped, QueueConfig, QueueCore, Reservation,
};

/// An item: a unique id, a conflation key and a weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Item {
    id: u64,
    key: u8,
    weight: u64,
}

#[derive(Debug, Clone)]
enum Op {
    Offer { key: u8, weight: u64, dt: u64 },
    Take { dt: u64 },
    Pop { dt: u64 },
    Reserve { weight: u64 },
    OfferReserved { key: u8 },
    Release,
    Abandon,
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..5, 0u64..6, 0u64..40).prop_map(|(key, weight, dt)| Op::Offer { key, weight, dt }),
        4 => (0u64..40).prop_map(|dt| Op::Take { dt }),
        2 => (0u64..40).prop_map(|dt| Op::Pop { dt }),
        1 => (0u64..6).prop_map(|weight| Op::Reserve { weight }),
        1 => (0u8..5).prop_map(|key| Op::OfferReserved { key }),
        1 => Just(Op::Release),
        1 => Just(Op::Abandon),
        1 => Just(Op::Close),
    ]
}

fn fallback() -> impl Strategy<Value = Fallback> {
    prop_oneof![
        Just(Fallback::Block),
        Just(Fallback::Reject),
        Just(Fallback::DropNewest),
        Just(Fallback::DropOldest),
    ]
}

fn policy() -> impl Strategy<Value = OnFull> {
    prop_oneof![
        Just(OnFull::Block),
        Just(OnFull::Reject),
        Just(OnFull::DropNewest),
        Just(OnFull::DropOldest),
        (0u64..60, fallback()).prop_map(|(ms, when_full)| OnFull::Expire {
            max_age: Duration::from_millis(ms),
            when_full
        }),
        (1usize..5, fallback()).prop_map(|(max_keys, when_full)| OnFull::Conflate {
            max_keys,
            when_full
        }),
    ]
}

fn capacity() -> impl Strategy<Value = Capacity> {
    prop_oneof![
        (1usize..6).prop_map(Capacity::items),
        (1u64..12).prop_map(Capacity::weight),
        (1usize..6, 1u64..12).prop_map(|(items, weight)| Capacity::items_and_weight(items, weight)),
        Just(Capacity::unbounded()),
    ]
}

fn core(capacity: Capacity, policy: OnFull) -> QueueCore<Item, u8> {
    QueueCore::new(
        QueueConfig::new(capacity, policy)
            .weigh_by(|item: &Item| item.weight)
            .key_by(|item: &Item| item.key),
    )
}

/// The reference model: item bound only, all weights 0.
struct Model {
    queue: VecDeque<(Item, u64)>,
    limit: usize,
    policy: OnFull,
    closed: bool,
}

/// What the model expects of an offer: the outcome's name and the items handed back.
type Expected = (&'static str, Vec<u64>);

impl Model {
    fn offer(&mut self, item: Item, now: u64) -> Expected {
        if self.closed {
            return ("closed", vec![item.id]);
        }
        let conflating = matches!(self.policy, OnFull::Conflate { .. });
        let same_key = self
            .queue
            .iter_mut()
            .find(|(queued, _)| queued.key == item.key);
        if let (true, Some(slot)) = (conflating, same_key) {
            let old = std::mem::replace(slot, (item, now));
            return ("superseded", vec![old.0.id]);
        }
        if self.queue.len() < self.limit {
            self.queue.push_back((item, now));
            return ("accepted", vec![]);
        }
        match self.policy.fallback() {
            Fallback::Block => ("would_block", vec![item.id]),
            Fallback::Reject => ("rejected", vec![item.id]),
            Fallback::DropNewest => ("dropped_newest", vec![item.id]),
            _ => {
                let (old, _) = self.queue.pop_front().expect("full means non-empty");
                self.queue.push_back((item, now));
                ("evicted", vec![old.id])
            }
        }
    }

    /// Returns (expired ids, delivered id).
    fn take(&mut self, now: u64) -> (Vec<u64>, Option<u64>) {
        let mut expired = Vec::new();
        while let Some((item, at)) = self.queue.pop_front() {
            match self.policy.max_age() {
                Some(max_age) if Duration::from_millis(now - at) > max_age => expired.push(item.id),
                _ => return (expired, Some(item.id)),
            }
        }
        (expired, None)
    }
}

fn describe(outcome: Offer<Item>) -> Expected {
    match outcome {
        Offer::Accepted => ("accepted", vec![]),
        Offer::Evicted(evicted) => ("evicted", evicted.into_iter().map(|item| item.id).collect()),
        Offer::Superseded { old, evicted } => {
            assert!(evicted.is_empty());
            ("superseded", vec![old.id])
        }
        Offer::WouldBlock(item) => ("would_block", vec![item.id]),
        Offer::Rejected(item) => ("rejected", vec![item.id]),
        Offer::DroppedNewest(item) => ("dropped_newest", vec![item.id]),
        Offer::TooHeavy(item) => ("too_heavy", vec![item.id]),
        Offer::Closed(item) => ("closed", vec![item.id]),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn core_matches_the_reference_model(
        items in 1usize..6,
        policy in policy(),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let mut queue = core(Capacity::items(items), policy);
        let limit = match policy {
            OnFull::Conflate { max_keys, .. } => items.min(max_keys),
            _ => items,
        };
        let mut model = Model { queue: VecDeque::new(), limit, policy, closed: false };
        let (mut now, mut next_id) = (0u64, 0u64);
        for op in ops {
            let offer = match op {
                Op::Offer { key, dt, .. } => Some((key, dt)),
                Op::OfferReserved { key } => Some((key, 0)),
                _ => None,
            };
            match op {
                Op::Offer { .. } | Op::OfferReserved { .. } => {
                    let (key, dt) = offer.unwrap_or_default();
                    now += dt;
                    let item = Item { id: next_id, key, weight: 0 };
                    next_id += 1;
                    let got = describe(queue.offer(item, Timestamp::from_millis(now)));
                    prop_assert_eq!(got, model.offer(item, now));
                }
                Op::Take { dt } | Op::Pop { dt } => {
                    now += dt;
                    let mut expired = Vec::new();
                    let taken = queue.take_with(Timestamp::from_millis(now), |item, _| expired.push(item.id));
                    let (want_expired, want_taken) = model.take(now);
                    prop_assert_eq!(expired, want_expired);
                    prop_assert_eq!(taken.map(|taken| taken.item.id), want_taken);
                }
                Op::Close => {
                    queue.close();
                    model.closed = true;
                }
                Op::Reserve { .. } | Op::Release | Op::Abandon => {}
            }
            prop_assert_eq!(queue.len(), model.queue.len());
            prop_assert!(queue.stats(Timestamp::from_millis(now)).is_conserved());
        }
    }

    #[test]
    fn conservation_bounds_and_fifo_hold_at_every_step(
        capacity in capacity(),
        policy in policy(),
        ops in prop::collection::vec(op(), 1..150),
    ) {
        let mut queue = core(capacity, policy);
        let conflating = matches!(policy, OnFull::Conflate { .. });
        let max_keys = match policy { OnFull::Conflate { max_keys, .. } => max_keys, _ => usize::MAX };
        // Every counted item's fate, by id; ids of items that left the head, in order.
        let mut fates: BTreeMap<u64, &'static str> = BTreeMap::new();
        let mut left_head: Vec<u64> = Vec::new();
        let mut reservations: Vec<Reservation> = Vec::new();
        let mut blocked = 0usize;
        // Abandoned offers have no item left; they get ids counting down from the top.
        let mut abandoned = 0u64;
        let (mut now, mut next_id) = (0u64, 0u64);
        let settle = |fates: &mut BTreeMap<u64, &'static str>, id: u64, fate: &'static str| {
            let previous = fates.insert(id, fate);
            assert!(matches!(previous, None | Some("queued")), "item {id} was already {previous:?}");
        };
        for op in ops {
            let offered = match op {
                Op::Offer { key, weight, dt } => {
                    now += dt;
                    Some((Item { id: next_id, key, weight }, None))
                }
                Op::OfferReserved { key } => reservations.pop().map(|reservation| {
                    let weight = reservation.weight();
                    (Item { id: next_id, key, weight }, Some(reservation))
                }),
                _ => None,
            };
            if let Some((item, reservation)) = offered {
                next_id += 1;
                let at = Timestamp::from_millis(now);
                let outcome = match reservation {
                    Some(reservation) => queue.offer_reserved(item, reservation, at),
                    None => queue.offer(item, at),
                };
                match outcome {
                    Offer::Accepted => settle(&mut fates, item.id, "queued"),
                    Offer::Evicted(evicted) => {
                        prop_assert!(!evicted.is_empty());
                        for old in evicted {
                            left_head.push(old.id);
                            settle(&mut fates, old.id, "evicted");
                        }
                        settle(&mut fates, item.id, "queued");
                    }
                    Offer::Superseded { old, evicted } => {
                        prop_assert!(conflating);
                        prop_assert_eq!(old.key, item.key);
                        for evicted in evicted {
                            left_head.push(evicted.id);
                            settle(&mut fates, evicted.id, "evicted");
                        }
                        settle(&mut fates, old.id, "superseded");
                        settle(&mut fates, item.id, "queued");
                    }
                    Offer::WouldBlock(_) => blocked += 1,
                    Offer::Rejected(back) | Offer::TooHeavy(back) => {
                        prop_assert_eq!(back, item);
                        settle(&mut fates, item.id, "rejected");
                    }
                    Offer::DroppedNewest(back) => {
                        prop_assert_eq!(back, item);
                        settle(&mut fates, item.id, "dropped_newest");
                    }
                    Offer::Closed(_) => prop_assert!(queue.is_closed()),
                }
            }
            match op {
                Op::Take { dt } => {
                    now += dt;
                    let mut expired = Vec::new();
                    let taken = queue.take_with(Timestamp::from_millis(now), |item, _| expired.push(item.id));
                    for id in expired {
                        left_head.push(id);
                        settle(&mut fates, id, "expired");
                    }
                    if let Some(taken) = taken {
                        prop_assert!(taken.enqueued_at <= Timestamp::from_millis(now));
                        left_head.push(taken.item.id);
                        settle(&mut fates, taken.item.id, "delivered");
                    }
                }
                Op::Pop { dt } => {
                    now += dt;
                    match queue.pop(Timestamp::from_millis(now)) {
                        Some(Popped::Delivered(taken)) => {
                            left_head.push(taken.item.id);
                            settle(&mut fates, taken.item.id, "delivered");
                        }
                        Some(Popped::Expired(taken)) => {
                            left_head.push(taken.item.id);
                            settle(&mut fates, taken.item.id, "expired");
                        }
                        None => prop_assert!(queue.is_empty()),
                    }
                }
                Op::Reserve { weight } => {
                    if let Ok(reservation) = queue.try_reserve(weight) {
                        reservations.push(reservation);
                    }
                }
                Op::Release => {
                    if let Some(reservation) = reservations.pop() {
                        queue.release(reservation);
                    }
                }
                Op::Abandon => {
                    if blocked > 0 {
                        blocked -= 1;
                        queue.record_abandoned();
                        abandoned += 1;
                        settle(&mut fates, u64::MAX - abandoned, "rejected");
                    }
                }
                Op::Close => queue.close(),
                Op::Offer { .. } | Op::OfferReserved { .. } => {}
            }

            let stats = queue.stats(Timestamp::from_millis(now));
            prop_assert!(stats.is_conserved(), "{stats:?}");
            let reserved: u64 = reservations.iter().map(Reservation::weight).sum();
            prop_assert!(queue.len() + reservations.len() <= capacity.max_items().unwrap_or(usize::MAX));
            prop_assert!(queue.len() + reservations.len() <= max_keys);
            prop_assert!(queue.weight() + reserved <= capacity.max_weight().unwrap_or(u64::MAX));
            prop_assert!(stats.max_depth <= capacity.max_items().unwrap_or(usize::MAX) as u64);
            let count = |fate: &str| fates.values().filter(|&&f| f == fate).count() as u64;
            prop_assert_eq!(count("queued"), stats.depth);
            prop_assert_eq!(count("delivered"), stats.delivered);
            prop_assert_eq!(count("expired"), stats.expired);
            prop_assert_eq!(count("superseded"), stats.superseded);
            prop_assert_eq!(count("evicted"), stats.dropped_oldest);
            prop_assert_eq!(count("dropped_newest"), stats.dropped_newest);
            prop_assert_eq!(count("rejected"), stats.rejected);
        }
        if !conflating {
            // Without conflation nothing changes place: items leave the head in arrival order.
            prop_assert!(left_head.windows(2).all(|pair| pair[0] < pair[1]), "{left_head:?}");
        }
    }
}
