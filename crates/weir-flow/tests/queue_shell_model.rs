//! Property test of the async shell against the sans-IO core it wraps.
//!
//! The shell's receiver borrows queued items in batches under the lending policies
//! (`Block`, `Reject`, `DropNewest`) and serves them without the lock, while the core
//! keeps counting them as queued until they are delivered. Driven one step at a time on
//! a paused clock, the shell must be indistinguishable from a plain [`QueueCore`] fed
//! the same operations at the same timestamps: the same outcome for every send,
//! reserve and receive, the same items in the same order, and the same stats (every
//! field, ages and waits included) whenever they are read.

use std::time::Duration;

use futures::FutureExt;
use proptest::prelude::*;
use weir_flow::queue::{
    Capacity, Fallback, Offer, OnFull, Permit, QueueConfig, QueueCore, Reservation, ReserveError,
    ReserveRefused, SendError, Sent, TryRecvError, channel_with_clock,
};
use weir_flow::{Clock, FlowStats};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Item {
    id: u64,
    key: u8,
    weight: u64,
}

#[derive(Debug, Clone)]
enum Op {
    Send {
        key: u8,
        weight: u64,
    },
    TryRecv,
    Recv,
    RecvMany {
        limit: usize,
    },
    Reserve {
        weight: u64,
    },
    PermitSend {
        key: u8,
        weight: u64,
    },
    PermitDrop,
    Advance {
        ms: u64,
    },
    Close,
    /// Compare the stats (which settles the core: not after every step, so that sends
    /// and receives also meet a core that still counts delivered lent items).
    Stats,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0u8..4, 0u64..5).prop_map(|(key, weight)| Op::Send { key, weight }),
        3 => Just(Op::TryRecv),
        3 => Just(Op::Recv),
        2 => (0usize..4).prop_map(|limit| Op::RecvMany { limit }),
        1 => (0u64..5).prop_map(|weight| Op::Reserve { weight }),
        1 => (0u8..4, 0u64..5).prop_map(|(key, weight)| Op::PermitSend { key, weight }),
        1 => Just(Op::PermitDrop),
        3 => (0u64..30).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Close),
        3 => Just(Op::Stats),
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
        // The lending policies, most of the cases.
        3 => Just(OnFull::Block),
        3 => Just(OnFull::Reject),
        3 => Just(OnFull::DropNewest),
        1 => Just(OnFull::DropOldest),
        1 => (0u64..40, fallback()).prop_map(|(ms, when_full)| OnFull::Expire {
            max_age: Duration::from_millis(ms),
            when_full
        }),
        1 => (1usize..4, fallback()).prop_map(|(max_keys, when_full)| OnFull::Conflate {
            max_keys,
            when_full
        }),
    ]
}

fn capacity() -> impl Strategy<Value = Capacity> {
    prop_oneof![
        (1usize..12).prop_map(Capacity::items),
        (1u64..16).prop_map(Capacity::weight),
        (1usize..12, 1u64..16)
            .prop_map(|(items, weight)| Capacity::items_and_weight(items, weight)),
    ]
}

fn config(capacity: Capacity, policy: OnFull) -> QueueConfig<Item, u8> {
    QueueConfig::new(capacity, policy)
        .weigh_by(|item: &Item| item.weight)
        .key_by(|item: &Item| item.key)
}

/// An outcome as (name, ids handed back), comparable across the two layers.
type Outcome = (&'static str, Vec<u64>);

fn offer_outcome(offer: Offer<Item>) -> Outcome {
    match offer {
        Offer::Accepted => ("queued", vec![]),
        Offer::Evicted(evicted) => ("evicted", evicted.into_iter().map(|i| i.id).collect()),
        Offer::Superseded { old, evicted } => {
            let mut ids = vec![old.id];
            ids.extend(evicted.into_iter().map(|i| i.id));
            ("superseded", ids)
        }
        Offer::WouldBlock(item) => ("would_block", vec![item.id]),
        Offer::Rejected(item) => ("full", vec![item.id]),
        Offer::DroppedNewest(item) => ("dropped_newest", vec![item.id]),
        Offer::TooHeavy(item) => ("too_heavy", vec![item.id]),
        Offer::Closed(item) => ("closed", vec![item.id]),
    }
}

fn send_outcome(sent: Result<Sent<Item>, SendError<Item>>) -> Outcome {
    match sent {
        Ok(Sent::Queued) => ("queued", vec![]),
        Ok(Sent::Evicted(evicted)) => ("evicted", evicted.into_iter().map(|i| i.id).collect()),
        Ok(Sent::Superseded { old, evicted }) => {
            let mut ids = vec![old.id];
            ids.extend(evicted.into_iter().map(|i| i.id));
            ("superseded", ids)
        }
        Err(SendError::WouldBlock(item)) => ("would_block", vec![item.id]),
        Err(SendError::Full(item)) => ("full", vec![item.id]),
        Err(SendError::DroppedNewest(item)) => ("dropped_newest", vec![item.id]),
        Err(SendError::TooHeavy(item)) => ("too_heavy", vec![item.id]),
        Err(SendError::Closed(item)) => ("closed", vec![item.id]),
        Err(other) => panic!("unexpected send error {other:?}"),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
}

fn assert_same_stats(shell: FlowStats, core: FlowStats, step: usize) -> Result<(), TestCaseError> {
    prop_assert_eq!(shell, core, "stats differ after step {}", step);
    prop_assert!(shell.is_conserved());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    #[test]
    fn shell_matches_its_core(
        capacity in capacity(),
        policy in policy(),
        ops in prop::collection::vec(op(), 1..160),
    ) {
        runtime().block_on(async move {
            // Both on tokio's paused clock from the same origin: equal readings.
            let clock = Clock::new();
            let (tx, mut rx) = channel_with_clock(config(capacity, policy), clock);
            let mut core = QueueCore::new(config(capacity, policy));
            let mut permits: Vec<Permit<'_, Item, u8>> = Vec::new();
            let mut reservations: Vec<Reservation> = Vec::new();
            let mut next_id = 0u64;
            let mut item = |key, weight| {
                next_id += 1;
                Item { id: next_id, key, weight }
            };
            for (step, op) in ops.into_iter().enumerate() {
                let now = clock.now();
                match op {
                    Op::Send { key, weight } => {
                        let item = item(key, weight);
                        let got = send_outcome(tx.try_send(item));
                        let want = offer_outcome(core.offer(item, now));
                        prop_assert_eq!(got, want, "send at step {}", step);
                    }
                    Op::TryRecv => {
                        let got = match rx.try_recv() {
                            Ok(item) => Some(item.id),
                            Err(TryRecvError::Empty) => {
                                prop_assert!(!core.is_closed());
                                None
                            }
                            Err(_) => {
                                prop_assert!(core.is_closed());
                                None
                            }
                        };
                        let want = core.take(now).map(|taken| taken.item.id);
                        prop_assert_eq!(got, want, "try_recv at step {}", step);
                    }
                    Op::Recv => {
                        let got = rx.recv().now_or_never();
                        let want = core.take(now).map(|taken| taken.item.id);
                        match got {
                            Some(got) => {
                                prop_assert_eq!(got.map(|item| item.id), want, "recv at step {}", step);
                                prop_assert!(want.is_some() || core.is_closed());
                            }
                            None => prop_assert!(want.is_none() && !core.is_closed(), "recv pending at step {}", step),
                        }
                    }
                    Op::RecvMany { limit } => {
                        let mut buffer = Vec::new();
                        let got = rx.recv_many(&mut buffer, limit).now_or_never();
                        let mut want = Vec::new();
                        while want.len() < limit {
                            match core.take(now) {
                                Some(taken) => want.push(taken.item.id),
                                None => break,
                            }
                        }
                        match got {
                            Some(count) => {
                                prop_assert_eq!(count, buffer.len());
                                let got: Vec<u64> = buffer.iter().map(|item| item.id).collect();
                                prop_assert_eq!(got, want, "recv_many at step {}", step);
                            }
                            None => prop_assert!(
                                limit > 0 && want.is_empty() && !core.is_closed(),
                                "recv_many pending at step {}", step
                            ),
                        }
                    }
                    Op::Reserve { weight } => {
                        let got = tx.try_reserve_weight(weight);
                        let want = core.try_reserve(weight);
                        match (got, want) {
                            (Ok(permit), Ok(reservation)) => {
                                permits.push(permit);
                                reservations.push(reservation);
                            }
                            (Err(ReserveError::Full), Err(ReserveRefused::Full))
                            | (Err(ReserveError::TooHeavy), Err(ReserveRefused::TooHeavy))
                            | (Err(ReserveError::Closed), Err(ReserveRefused::Closed)) => {}
                            (got, want) => prop_assert!(false, "reserve at step {step}: {got:?} vs {want:?}"),
                        }
                    }
                    Op::PermitSend { key, weight } => {
                        if let (Some(permit), Some(reservation)) = (permits.pop(), reservations.pop()) {
                            let item = item(key, weight);
                            let got = send_outcome(permit.send(item));
                            let want = offer_outcome(core.offer_reserved(item, reservation, now));
                            prop_assert_eq!(got, want, "permit send at step {}", step);
                        }
                    }
                    Op::PermitDrop => {
                        if let (Some(permit), Some(reservation)) = (permits.pop(), reservations.pop()) {
                            drop(permit);
                            core.release(reservation);
                        }
                    }
                    Op::Advance { ms } => tokio::time::advance(Duration::from_millis(ms)).await,
                    Op::Close => {
                        tx.close();
                        core.close();
                    }
                    Op::Stats => {
                        assert_same_stats(tx.stats(), core.stats(now), step)?;
                        prop_assert_eq!(rx.len(), core.len());
                    }
                }
            }
            assert_same_stats(rx.stats(), core.stats(clock.now()), usize::MAX)?;
            Ok(())
        })?;
    }
}
