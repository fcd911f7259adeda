use super::*;

fn config() -> LedgerConfig {
    LedgerConfig {
        source: Arc::from("m"),
        window: 3,
        guard_limit: 6,
        max_message_bytes: 100,
        qos0_max_bytes: 25,
    }
}

fn msg(qos: u8, pkid: u16, payload: &str) -> Message {
    Message {
        topic: "t".to_owned(),
        payload: bytes::Bytes::copy_from_slice(payload.as_bytes()),
        qos,
        retain: false,
        dup: false,
        pkid,
        user_properties: Vec::new(),
    }
}

fn attrs(work: &Work) -> Vec<(String, String)> {
    match work {
        Work::Append(r) => r.to_record("m").attributes,
        Work::Quarantine { .. } => panic!("expected a record"),
    }
}

fn connected() -> Ledger {
    let mut l = Ledger::new(config());
    l.on_connect(false);
    l
}

#[test]
fn acks_wait_for_durability_and_leave_in_arrival_order() {
    let mut l = connected();
    for pkid in 1..=3 {
        assert_eq!(l.offer(msg(1, pkid, "x"), 0), Offer::Queued);
    }
    assert!(l.ready_acks(1).is_empty(), "nothing durable yet");
    let first = l.take(2, u64::MAX).unwrap();
    let second = l.take(10, u64::MAX).unwrap();
    assert_eq!((first.work.len(), second.work.len()), (2, 1));
    l.complete(&first.done());
    let acks: Vec<u16> = l.ready_acks(5).iter().map(|t| t.pkid).collect();
    assert_eq!(acks, [1, 2]);
    l.complete(&second.done());
    assert_eq!(l.ready_acks(9)[0], AckToken { qos: 1, pkid: 3 });
    let s = l.status();
    assert_eq!((s.acked, s.unacked, s.max_unacked), (3, 0, 3));
    assert_eq!(s.ack_latency_ms_max, 9);
    assert!((s.ack_latency_ms_mean - 19.0 / 3.0).abs() < 1e-9);
}

#[test]
fn paused_while_the_window_is_full() {
    let mut l = connected();
    l.offer(msg(1, 1, "a"), 10);
    l.offer(msg(1, 2, "b"), 11);
    assert_eq!(l.status().paused_since_ms, None);
    l.offer(msg(2, 3, "c"), 12);
    assert_eq!(l.status().paused_since_ms, Some(12));
    let unit = l.take(1, u64::MAX).unwrap();
    l.complete(&unit.done());
    assert_eq!(l.ready_acks(20).len(), 1);
    assert_eq!(l.status().paused_since_ms, None);
}

#[test]
fn guard_trips_above_the_limit_and_forgets_the_connections_acks() {
    let mut l = connected();
    for pkid in 1..=6 {
        assert_eq!(l.offer(msg(1, pkid, "x"), 0), Offer::Queued);
    }
    assert_eq!(l.offer(msg(1, 7, "x"), 0), Offer::Guard);
    let s = l.status();
    assert_eq!((s.guard_disconnects, s.unacked, s.connected), (1, 0, false));
    assert_eq!(l.orphans_len(), 6);
    // The six taken before the guard still become durable, but their acks belong to
    // a connection that is gone: none is sent.
    let unit = l.take(100, u64::MAX).unwrap();
    assert_eq!(unit.work.len(), 6, "the seventh was not kept");
    l.complete(&unit.done());
    assert!(l.ready_acks(1).is_empty());
}

#[test]
fn redeliveries_do_not_count_against_the_guard_so_a_reconnect_makes_progress() {
    let mut l = connected();
    for pkid in 1..=6 {
        l.offer(msg(1, pkid, &format!("m{pkid}")), 0);
    }
    let unit = l.take(100, u64::MAX).unwrap();
    l.complete(&unit.done());
    // The broker's window is larger than the guard: the seventh trips it before the
    // acks of the first six went out.
    assert_eq!(l.offer(msg(1, 7, "m7"), 0), Offer::Guard);
    l.on_connect(true);
    // The broker redelivers the six (durable, held by nobody) and sends new ones.
    for pkid in 1..=6 {
        let mut dup = msg(1, pkid, &format!("m{pkid}"));
        dup.dup = true;
        assert_eq!(l.offer(dup, 1), Offer::Duplicate);
    }
    for pkid in 7..=12 {
        assert_eq!(
            l.offer(msg(1, pkid, "new"), 1),
            Offer::Queued,
            "pkid {pkid}"
        );
    }
    assert_eq!(l.status().unacked, 12);
    assert_eq!(
        l.offer(msg(1, 13, "new"), 1),
        Offer::Guard,
        "six new ones hold payloads"
    );
    l.on_connect(true);
    let acks = {
        let mut again = msg(1, 1, "m1");
        again.dup = true;
        assert_eq!(
            l.offer(again, 2),
            Offer::Duplicate,
            "still an orphan after the second drop"
        );
        l.ready_acks(3)
    };
    assert_eq!(
        acks,
        [AckToken { qos: 1, pkid: 1 }],
        "progress: acked at once"
    );
}

#[test]
fn redelivery_of_a_durable_message_is_acked_not_written_again() {
    let mut l = connected();
    l.offer(msg(1, 7, "same"), 0);
    l.offer(msg(1, 8, "other"), 0);
    let unit = l.take(100, u64::MAX).unwrap();
    l.on_disconnect(Some("reset".to_owned()));
    l.complete(&unit.done());
    assert!(l.ready_acks(1).is_empty());
    l.on_connect(true);
    let mut dup = msg(1, 7, "same");
    dup.dup = true;
    assert_eq!(l.offer(dup, 2), Offer::Duplicate);
    // Same packet id, different content: a new message, written.
    let mut changed = msg(1, 8, "changed");
    changed.dup = true;
    assert_eq!(l.offer(changed, 2), Offer::Queued);
    assert_eq!(l.pending_len(), 1, "only the changed message is written");
    let acks: Vec<u16> = l.ready_acks(3).iter().map(|t| t.pkid).collect();
    assert_eq!(acks, [7], "the duplicate's original is durable; 8 waits");
    let s = l.status();
    assert_eq!(
        (s.duplicates_skipped, s.reconnects, s.connection_errors),
        (1, 1, 1)
    );
    assert_eq!(s.last_error.as_deref(), Some("reset"));
}

#[test]
fn redelivery_of_a_message_still_in_flight_waits_for_it() {
    let mut l = connected();
    l.offer(msg(2, 1, "p"), 0);
    let unit = l.take(100, u64::MAX).unwrap();
    l.on_disconnect(Some("gone".to_owned()));
    l.on_connect(true);
    let mut dup = msg(2, 1, "p");
    dup.dup = true;
    assert_eq!(l.offer(dup, 1), Offer::Duplicate);
    assert!(
        l.ready_acks(1).is_empty(),
        "the original is not durable yet"
    );
    l.complete(&unit.done());
    assert_eq!(l.ready_acks(2), [AckToken { qos: 2, pkid: 1 }]);
}

#[test]
fn a_session_lost_at_the_broker_forgets_orphans() {
    let mut l = connected();
    l.offer(msg(1, 1, "a"), 0);
    l.on_disconnect(Some("x".to_owned()));
    l.on_connect(false);
    let mut again = msg(1, 1, "a");
    again.dup = true;
    assert_eq!(
        l.offer(again, 1),
        Offer::Queued,
        "at least once: written again"
    );
}

#[test]
fn qos0_drops_the_newest_when_full_and_marks_the_gap() {
    let mut l = connected();
    assert_eq!(l.offer(msg(0, 0, "0123456789"), 0), Offer::Queued);
    assert_eq!(l.offer(msg(0, 0, "0123456789"), 0), Offer::Queued);
    assert_eq!(l.offer(msg(0, 0, "0123456789"), 0), Offer::Dropped);
    assert_eq!(l.offer(msg(0, 0, "0123456789"), 0), Offer::Dropped);
    assert_eq!(l.offer(msg(0, 0, "01234"), 0), Offer::Queued, "still fits");
    let unit = l.take(100, u64::MAX).unwrap();
    assert_eq!(unit.qos0_bytes, 25);
    assert_eq!(l.status().qos0_queue_bytes, 25, "held until durable");
    assert_eq!(l.status().qos0_queue_messages, 3);
    let gap: Vec<_> = unit.work.iter().map(attrs).collect();
    assert!(!gap[0].iter().any(|(k, _)| k == GAP_ATTRIBUTE));
    assert!(gap[2].contains(&(GAP_ATTRIBUTE.to_owned(), "true".to_owned())));
    assert!(gap[2].contains(&(GAP_DROPPED_ATTRIBUTE.to_owned(), "2".to_owned())));
    l.complete(&unit.done());
    let s = l.status();
    assert_eq!((s.qos0_dropped, s.qos0_queue_bytes, s.received), (2, 0, 5));
    assert_eq!((s.qos0_received, s.qos0_queue_messages), (5, 0));
    assert_eq!(
        l.offer(msg(0, 0, "0123456789"), 0),
        Offer::Queued,
        "room again"
    );
    let unit = l.take(100, u64::MAX).unwrap();
    assert!(!attrs(&unit.work[0]).iter().any(|(k, _)| k == GAP_ATTRIBUTE));
}

#[test]
fn messages_after_shutdown_are_counted_not_kept() {
    let mut l = connected();
    l.discard_at_shutdown(&msg(0, 0, "a"));
    l.discard_at_shutdown(&msg(1, 1, "b"));
    let s = l.status();
    assert_eq!(
        (s.received, s.qos0_dropped_at_shutdown, s.unacked),
        (2, 1, 0)
    );
    assert!(l.take(10, u64::MAX).is_none());
    l.offer(msg(0, 0, "c"), 0);
    l.offer(msg(1, 2, "d"), 0);
    let unit = l.take(10, u64::MAX).unwrap();
    l.lost_at_shutdown(&unit.done());
    let s = l.status();
    assert_eq!(
        (
            s.qos0_dropped_at_shutdown,
            s.qos0_queue_messages,
            s.qos0_queue_bytes
        ),
        (2, 0, 0)
    );
}

#[test]
fn oversized_messages_are_quarantined_alone_then_acked() {
    let mut l = connected();
    l.offer(msg(1, 1, "ok"), 0);
    assert_eq!(l.offer(msg(1, 2, &"x".repeat(101)), 0), Offer::Oversized);
    l.offer(msg(1, 3, "ok"), 0);
    let a = l.take(100, u64::MAX).unwrap();
    let b = l.take(100, u64::MAX).unwrap();
    let c = l.take(100, u64::MAX).unwrap();
    assert_eq!((a.work.len(), b.work.len(), c.work.len()), (1, 1, 1));
    assert!(
        matches!(&b.work[0], Work::Quarantine { reason, .. } if reason.contains("max_message_bytes"))
    );
    for u in [a, b, c] {
        l.complete(&u.done());
    }
    assert_eq!(l.ready_acks(1).len(), 3);
    assert_eq!(l.status().oversized, 1);
}

#[test]
fn records_carry_topic_qos_retain_and_user_properties_sorted() {
    let mut l = connected();
    let mut m = msg(1, 1, "p");
    m.topic = "sensors/1".to_owned();
    m.retain = true;
    m.user_properties = vec![
        ("zone".to_owned(), "b".to_owned()),
        ("a".to_owned(), "1".to_owned()),
        ("zone".to_owned(), "ignored".to_owned()),
    ];
    l.offer(m, 42);
    let unit = l.take(1, u64::MAX).unwrap();
    let Work::Append(record) = &unit.work[0] else {
        panic!("expected a record")
    };
    let record = record.to_record("m");
    assert_eq!(record.key, "sensors/1");
    assert_eq!(record.timestamp_ms, 42);
    let names: Vec<(&str, &str)> = record
        .attributes
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("mqtt.qos", "1"),
            ("mqtt.retain", "true"),
            ("mqtt.user.a", "1"),
            ("mqtt.user.zone", "b")
        ]
    );
}

#[test]
fn units_respect_record_and_byte_limits() {
    let mut l = connected();
    for _ in 0..5 {
        l.offer(msg(0, 0, "12345"), 0);
    }
    assert_eq!(l.take(2, u64::MAX).unwrap().work.len(), 2);
    assert_eq!(
        l.take(10, 6).unwrap().work.len(),
        1,
        "a second would pass 6 bytes"
    );
    assert_eq!(l.take(10, 10).unwrap().work.len(), 2);
    assert!(l.take(10, 10).is_none());
}

proptest::proptest! {
    /// Whatever the interleaving of arrivals, takes (up to four units on their way at
    /// once, as the appender does), completions in order and reconnects: acks leave in
    /// arrival order, only for durable messages of the live connection, the unacked
    /// count never passes the guard, and the ledger counts the units in flight.
    #[test]
    fn acks_are_ordered_durable_and_bounded(ops in proptest::collection::vec(0u8..6, 1..200)) {
        let mut l = connected();
        let mut pkid = 0u16;
        let mut taken: VecDeque<Unit> = VecDeque::new();
        let mut durable_end = 0u64;
        let mut acked_seqs: Vec<u16> = Vec::new();
        let mut seq_of: HashMap<u16, u64> = HashMap::new();
        let mut next_seq = 0u64;
        for op in ops {
            match op {
                0 | 1 => {
                    pkid = pkid.wrapping_add(1).max(1);
                    let offer = l.offer(msg(1, pkid, "m"), 0);
                    if offer == Offer::Queued {
                        seq_of.insert(pkid, next_seq);
                        next_seq += 1;
                    }
                    proptest::prop_assert!(l.status().unacked <= 6);
                    if offer == Offer::Guard {
                        l.on_connect(true);
                    }
                }
                2 => if taken.len() < 4 && let Some(u) = l.take(2, u64::MAX) { taken.push_back(u) },
                3 => if let Some(u) = taken.pop_front() {
                    durable_end = u.end_seq;
                    l.complete(&u.done());
                },
                4 => for t in l.ready_acks(0) {
                    let seq = seq_of[&t.pkid];
                    proptest::prop_assert!(seq < durable_end, "acked before durable");
                    if let Some(&last) = acked_seqs.last() {
                        proptest::prop_assert!(seq_of[&last] < seq, "out of order");
                    }
                    acked_seqs.push(t.pkid);
                },
                _ => {
                    l.on_disconnect(Some("e".to_owned()));
                    l.on_connect(true);
                }
            }
            proptest::prop_assert_eq!(l.status().units_in_flight, taken.len() as u64);
        }
    }
}
