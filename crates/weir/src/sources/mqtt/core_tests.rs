use super::*;

fn config() -> LedgerConfig {
    LedgerConfig {
        source: Arc::from("m"),
        window: 3,
        guard_limit: 6,
        held_max_bytes: 40,
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
fn reading_pauses_above_the_guard_count_and_resumes_once_acks_are_due() {
    let mut l = connected();
    for pkid in 1..=6 {
        assert_eq!(l.offer(msg(1, pkid, "x"), 0), Offer::Queued);
        assert!(!l.must_pause(), "at most the guard's count: read on");
    }
    // A broker beyond its window: the seventh is kept (never refused), and reading
    // stops.
    assert_eq!(l.offer(msg(1, 7, "x"), 0), Offer::Queued);
    assert!(l.must_pause());
    assert!(l.must_pause(), "still paused: one pause");
    let s = l.status();
    assert_eq!((s.read_pauses, s.unacked, s.held_bytes), (1, 7, 7));
    assert!(s.reading_paused && s.connected);
    let unit = l.take(100, u64::MAX).unwrap();
    assert_eq!(unit.held_bytes, 7);
    assert!(l.must_pause(), "taken is not durable");
    l.complete(&unit.done());
    assert_eq!(l.status().held_bytes, 0);
    assert!(l.must_pause(), "durable but the acks are not due yet");
    assert_eq!(l.ready_acks(1).len(), 7);
    assert!(!l.must_pause());
    let s = l.status();
    assert_eq!((s.read_pauses, s.max_held_bytes, s.max_unacked), (1, 7, 7));
    assert!(!s.reading_paused);
}

#[test]
fn reading_pauses_above_the_held_bytes_and_a_guard_disconnect_orphans_the_acks() {
    let mut l = connected();
    for pkid in 1..=4 {
        l.offer(msg(1, pkid, "0123456789"), 0);
    }
    assert!(!l.must_pause(), "40 bytes: at the bound, not above");
    l.offer(msg(1, 5, "x"), 0);
    assert!(l.must_pause(), "41 bytes held");
    // QoS 0 has its own budget and does not count.
    let mut m = connected();
    m.offer(msg(0, 0, "0123456789"), 0);
    m.offer(msg(0, 0, "0123456789"), 0);
    m.offer(msg(1, 1, "0123456789".repeat(4).as_str()), 0);
    assert!(!m.must_pause());
    // The WAL made no room within a keepalive: the connection is dropped.
    l.guard_disconnect();
    let s = l.status();
    assert_eq!((s.guard_disconnects, s.unacked, s.connected), (1, 0, false));
    assert_eq!(s.held_bytes, 41, "still on their way to the WAL");
    assert_eq!(l.orphans_len(), 5);
    assert!(
        l.must_pause(),
        "held bytes alone keep it paused while disconnected"
    );
    let unit = l.take(100, u64::MAX).unwrap();
    l.complete(&unit.done());
    assert!(
        l.ready_acks(1).is_empty(),
        "acks of a connection that is gone"
    );
    assert!(!l.must_pause());
}

#[test]
fn redeliveries_do_not_count_against_the_guard_so_a_reconnect_makes_progress() {
    let mut l = connected();
    for pkid in 1..=7 {
        l.offer(msg(1, pkid, &format!("m{pkid}")), 0);
    }
    let unit = l.take(100, u64::MAX).unwrap();
    l.complete(&unit.done());
    assert!(l.must_pause(), "seven unacked, above the guard's six");
    l.guard_disconnect();
    l.on_connect(true);
    // The broker redelivers the seven (durable, held by nobody) and sends new ones.
    for pkid in 1..=7 {
        let mut dup = msg(1, pkid, &format!("m{pkid}"));
        dup.dup = true;
        assert_eq!(l.offer(dup, 1), Offer::Duplicate);
        assert!(!l.must_pause(), "redeliveries hold no payload");
    }
    for pkid in 8..=13 {
        assert_eq!(l.offer(msg(1, pkid, "new"), 1), Offer::Queued);
        assert!(!l.must_pause(), "pkid {pkid}");
    }
    assert_eq!(l.status().unacked, 13);
    l.offer(msg(1, 14, "new"), 1);
    assert!(l.must_pause(), "seven new ones hold payloads");
    let acks = l.ready_acks(3);
    assert_eq!(
        acks.len(),
        7,
        "progress: the redeliveries are acked at once"
    );
    assert_eq!(acks[0], AckToken { qos: 1, pkid: 1 });
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
    /// arrival order, only for durable messages of the live connection; a reader that
    /// stops when [`Ledger::must_pause`] says so never holds more than one message past
    /// the guard's count or the held bytes, `held_bytes` is exactly the payloads not yet
    /// durable, and the ledger counts the units in flight.
    #[test]
    fn acks_are_ordered_durable_and_bounded(
        ops in proptest::collection::vec((0u8..7, 1u8..20), 1..300),
    ) {
        let mut l = connected();
        let mut pkid = 0u16;
        let mut taken: VecDeque<Unit> = VecDeque::new();
        let mut durable_end = 0u64;
        let mut acked_seqs: Vec<u16> = Vec::new();
        let mut seq_of: HashMap<u16, u64> = HashMap::new();
        let mut next_seq = 0u64;
        // (sequence number after the message, payload bytes) of messages not durable.
        let mut held: VecDeque<(u64, u64)> = VecDeque::new();
        for (op, size) in ops {
            match op {
                0 | 1 => {
                    // The connection task reads only while the ledger allows it.
                    if l.must_pause() {
                        continue;
                    }
                    pkid = pkid.wrapping_add(1).max(1);
                    let payload = "m".repeat(usize::from(size));
                    let offer = l.offer(msg(1, pkid, &payload), 0);
                    proptest::prop_assert_eq!(offer, Offer::Queued);
                    seq_of.insert(pkid, next_seq);
                    next_seq += 1;
                    held.push_back((next_seq, u64::from(size)));
                    // Reading stops as soon as a bound is crossed: one message past it
                    // at most.
                    let s = l.status();
                    proptest::prop_assert!(s.unacked <= 6 + 1);
                    proptest::prop_assert!(s.held_bytes <= 40 + 20);
                }
                2 => if taken.len() < 4 && let Some(u) = l.take(2, u64::MAX) { taken.push_back(u) },
                3 => if let Some(u) = taken.pop_front() {
                    durable_end = u.end_seq;
                    l.complete(&u.done());
                    while held.front().is_some_and(|&(end, _)| end <= durable_end) {
                        held.pop_front();
                    }
                },
                4 => for t in l.ready_acks(0) {
                    let seq = seq_of[&t.pkid];
                    proptest::prop_assert!(seq < durable_end, "acked before durable");
                    if let Some(&last) = acked_seqs.last() {
                        proptest::prop_assert!(seq_of[&last] < seq, "out of order");
                    }
                    acked_seqs.push(t.pkid);
                },
                5 => {
                    l.on_disconnect(Some("e".to_owned()));
                    l.on_connect(true);
                }
                _ => {
                    // Paused for a keepalive with no room: the guard drops the connection.
                    if l.must_pause() {
                        l.guard_disconnect();
                        l.on_connect(true);
                    }
                }
            }
            // held_bytes is exactly the payloads offered and not yet durable.
            let s = l.status();
            proptest::prop_assert_eq!(s.held_bytes, held.iter().map(|&(_, b)| b).sum::<u64>());
            proptest::prop_assert_eq!(s.units_in_flight, taken.len() as u64);
        }
    }
}
