//! The publishes of one write awaiting their PubAck, sans IO: each has a deadline that
//! starts when it is published, so a window whose acks are all lost costs one
//! `ack_timeout`, not one per publish.
//!
//! The shell publishes, reports each PubAck (or its error) with the send it belongs
//! to, and asks at the earliest deadline which publishes are due again. A due publish
//! is sent again with the same `Nats-Msg-Id` (the server deduplicates it); a PubAck
//! from any of its sends settles it, once. After `retries` timeouts or errors of one
//! publish the write fails. A reconnection re-sends every unsettled publish at once
//! without counting it as a retry: what was in flight on the old connection is lost.

use std::collections::{BTreeMap, VecDeque};

/// Which send of a publish a PubAck belongs to (1 for the first).
pub type SendId = u32;

/// What a PubAck error means for its publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failed {
    /// It is sent again when [`AckWindow::due`] says so (after a short backoff).
    Retry,
    /// It failed `retries` times already: the write fails.
    GiveUp,
    /// The error is of an earlier send, already superseded: nothing to do.
    Stale,
}

/// Why the write must fail: publish `index` was not acked after `retries` retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted {
    /// The publish's index in the batch.
    pub index: usize,
}

/// The publishes due again at one time.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Due {
    /// Their indices in the batch, in order: send each again.
    pub resend: Vec<usize>,
    /// How many of them timed out (the others' backoff after an error ended).
    pub timed_out: usize,
}

/// One unsettled publish.
#[derive(Debug)]
struct Entry {
    /// Its current send.
    send: SendId,
    /// Retries used: timeouts and errors.
    retries: u32,
    /// When it is due again (ms): its PubAck's deadline, or the end of the backoff after an
    /// error.
    due_ms: u64,
    /// It failed and waits for its backoff: the deadline does not count as a timeout.
    failed: bool,
}

/// The publishes of one write awaiting their PubAck. See the [module docs](self).
#[derive(Debug)]
pub struct AckWindow {
    ack_timeout_ms: u64,
    retries: u32,
    entries: BTreeMap<usize, Entry>,
    /// `(due_ms, index, send)` in the order they were set; an item whose publish settled
    /// or was sent again since is skipped. Times only grow, so the front is the earliest.
    deadlines: VecDeque<(u64, usize, SendId)>,
}

impl AckWindow {
    /// An empty window: each PubAck may take `ack_timeout_ms`, each publish is sent at
    /// most `retries` more times.
    pub fn new(ack_timeout_ms: u64, retries: u32) -> Self {
        Self {
            ack_timeout_ms: ack_timeout_ms.max(1),
            retries,
            entries: BTreeMap::new(),
            deadlines: VecDeque::new(),
        }
    }

    /// Publishes awaiting their PubAck.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none awaits its PubAck.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Publish `index` was sent (first, or again) at `now_ms`: its PubAck is due by
    /// `now_ms + ack_timeout`. Returns the send a PubAck of it belongs to.
    pub fn sent(&mut self, index: usize, now_ms: u64) -> SendId {
        let due_ms = now_ms.saturating_add(self.ack_timeout_ms);
        let entry = self.entries.entry(index).or_insert(Entry {
            send: 0,
            retries: 0,
            due_ms,
            failed: false,
        });
        entry.send += 1;
        entry.due_ms = due_ms;
        entry.failed = false;
        let send = entry.send;
        self.deadlines.push_back((due_ms, index, send));
        send
    }

    /// A PubAck of publish `index` (any of its sends) came back: `true` the first time,
    /// when it counts as published; `false` for one already settled.
    pub fn acked(&mut self, index: usize) -> bool {
        self.entries.remove(&index).is_some()
    }

    /// A PubAck error for send `send` of publish `index` at `now_ms`.
    pub fn failed(&mut self, index: usize, send: SendId, now_ms: u64) -> Failed {
        let Some(entry) = self.entries.get_mut(&index) else {
            return Failed::Stale;
        };
        if entry.send != send || entry.failed {
            return Failed::Stale;
        }
        if entry.retries >= self.retries {
            return Failed::GiveUp;
        }
        entry.retries += 1;
        entry.failed = true;
        // 100 ms, 200 ms, … but never longer than a timeout would have taken.
        let backoff_ms = (50u64 << entry.retries.min(10)).min(self.ack_timeout_ms);
        entry.due_ms = now_ms.saturating_add(backoff_ms);
        let (due_ms, send) = (entry.due_ms, entry.send);
        self.deadlines.push_back((due_ms, index, send));
        Failed::Retry
    }

    /// The earliest time (ms) something is due: call [`due`](Self::due) then.
    pub fn next_due_ms(&mut self) -> Option<u64> {
        self.drop_settled_deadlines();
        self.deadlines.front().map(|(due_ms, _, _)| *due_ms)
    }

    /// The publishes due at `now_ms`, in batch order, to send again (then report each
    /// with [`sent`](Self::sent)): those whose PubAck timed out (a retry each) and those
    /// whose backoff after an error ended.
    ///
    /// # Errors
    ///
    /// [`Exhausted`] when a publish timed out with no retries left: the write fails.
    pub fn due(&mut self, now_ms: u64) -> Result<Due, Exhausted> {
        let mut due = Vec::new();
        loop {
            self.drop_settled_deadlines();
            match self.deadlines.front() {
                Some(&(due_ms, index, _)) if due_ms <= now_ms => {
                    self.deadlines.pop_front();
                    due.push(index);
                }
                _ => break,
            }
        }
        due.sort_unstable();
        due.dedup();
        let mut timed_out = 0;
        for index in &due {
            let entry = self
                .entries
                .get_mut(index)
                .expect("a live deadline's entry");
            if !entry.failed {
                if entry.retries >= self.retries {
                    return Err(Exhausted { index: *index });
                }
                entry.retries += 1;
                timed_out += 1;
            }
        }
        Ok(Due {
            resend: due,
            timed_out,
        })
    }

    /// The connection came back: every unsettled publish, in batch order, to send again
    /// now (then report each with [`sent`](Self::sent)); not counted as retries.
    pub fn reconnected(&self) -> Vec<usize> {
        self.entries.keys().copied().collect()
    }

    /// Drops deadlines at the front whose publish settled or was sent again since.
    fn drop_settled_deadlines(&mut self) {
        while let Some(&(due_ms, index, send)) = self.deadlines.front() {
            let live = self
                .entries
                .get(&index)
                .is_some_and(|e| e.send == send && e.due_ms == due_ms);
            if live {
                break;
            }
            self.deadlines.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_of_lost_acks_times_out_once_and_is_sent_again() {
        let mut w = AckWindow::new(1000, 3);
        for i in 0..256 {
            w.sent(i, i as u64); // published over 256 ms
        }
        assert_eq!(w.next_due_ms(), Some(1000));
        assert_eq!(w.due(999).unwrap(), Due::default());
        // One ack_timeout after the last publish, every one of them is due.
        let due = w.due(1255).unwrap();
        assert_eq!(due.resend, (0..256).collect::<Vec<_>>());
        assert_eq!(due.timed_out, 256);
        for i in due.resend {
            assert_eq!(w.sent(i, 1255), 2);
        }
        for i in 0..256 {
            assert!(w.acked(i));
        }
        assert!(w.is_empty());
        assert_eq!(w.next_due_ms(), None);
    }

    #[test]
    fn any_send_settles_a_publish_once() {
        let mut w = AckWindow::new(100, 3);
        assert_eq!(w.sent(7, 0), 1);
        assert_eq!(w.due(100).unwrap().resend, vec![7]);
        assert_eq!(w.sent(7, 100), 2);
        // The first send's PubAck arrives late: it settles the publish.
        assert!(w.acked(7));
        assert!(!w.acked(7), "the second send's PubAck is not counted again");
        // Its old deadline is gone too.
        assert_eq!(w.next_due_ms(), None);
        assert_eq!(w.due(10_000).unwrap(), Due::default());
    }

    #[test]
    fn timeouts_past_the_retries_fail_the_write() {
        let mut w = AckWindow::new(100, 2);
        w.sent(0, 0);
        w.sent(1, 50);
        let mut now = 0;
        for _ in 0..2 {
            now += 200;
            for i in w.due(now).unwrap().resend {
                w.sent(i, now);
            }
        }
        assert_eq!(w.due(now + 100), Err(Exhausted { index: 0 }));
    }

    #[test]
    fn an_error_is_retried_after_a_backoff_and_a_stale_one_is_ignored() {
        let mut w = AckWindow::new(5000, 1);
        let first = w.sent(3, 0);
        assert_eq!(w.failed(3, first, 10), Failed::Retry);
        assert_eq!(w.failed(3, first, 11), Failed::Stale, "counted once");
        assert_eq!(w.next_due_ms(), Some(110));
        assert_eq!(
            w.due(110).unwrap(),
            Due {
                resend: vec![3],
                timed_out: 0
            },
            "an error's backoff ended: not a timeout"
        );
        let second = w.sent(3, 110);
        // The first send's timeout after the second was sent says nothing.
        assert_eq!(w.failed(3, first, 120), Failed::Stale);
        assert_eq!(w.failed(3, second, 130), Failed::GiveUp);
        assert_eq!(w.failed(9, 1, 130), Failed::Stale, "never sent");
    }

    #[test]
    fn a_reconnection_sends_every_unsettled_publish_again_without_a_retry() {
        let mut w = AckWindow::new(100, 1);
        for i in 0..4 {
            w.sent(i, 0);
        }
        assert!(w.acked(1));
        let again = w.reconnected();
        assert_eq!(again, vec![0, 2, 3]);
        for i in again {
            w.sent(i, 50);
        }
        // Their earlier deadlines are gone; the new ones are one timeout away, and
        // the one retry is still there.
        assert_eq!(w.next_due_ms(), Some(150));
        assert_eq!(w.due(150).unwrap().resend, vec![0, 2, 3]);
        for i in [0, 2, 3] {
            w.sent(i, 150);
        }
        assert_eq!(w.due(250), Err(Exhausted { index: 0 }));
    }

    /// One step of the shell, as a property test drives it.
    #[derive(Debug, Clone)]
    enum Step {
        Publish,
        Ack(usize, bool),
        Fail(usize, bool),
        Wait(u64),
        Reconnect,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            3 => Just(Step::Publish),
            3 => (0..32usize, any::<bool>()).prop_map(|(i, old)| Step::Ack(i, old)),
            1 => (0..32usize, any::<bool>()).prop_map(|(i, old)| Step::Fail(i, old)),
            2 => (0..400u64).prop_map(Step::Wait),
            1 => Just(Step::Reconnect),
        ]
    }

    proptest::proptest! {
        /// Driven as the shell drives it, the window settles each publish at most once,
        /// counts exactly the unsettled ones, always has a deadline while one is
        /// unsettled (a write never waits forever), hands back due publishes in batch
        /// order, and never sends one more than `retries` times past its first after a
        /// timeout or an error.
        #[test]
        fn the_window_keeps_its_books(steps in proptest::collection::vec(step(), 1..300)) {
            const RETRIES: u32 = 3;
            let mut w = AckWindow::new(100, RETRIES);
            let mut now = 0u64;
            let mut sends: Vec<SendId> = Vec::new(); // per index: its current send
            let mut settled: Vec<bool> = Vec::new();
            for step in steps {
                match step {
                    Step::Publish => {
                        let index = sends.len();
                        sends.push(w.sent(index, now));
                        settled.push(false);
                    }
                    Step::Ack(i, old) if i < sends.len() => {
                        let _ = old; // any send settles it
                        let first = w.acked(i);
                        proptest::prop_assert_eq!(first, !settled[i], "index {}", i);
                        settled[i] = true;
                    }
                    Step::Fail(i, old) if i < sends.len() => {
                        let send = if old && sends[i] > 1 { sends[i] - 1 } else { sends[i] };
                        match w.failed(i, send, now) {
                            Failed::GiveUp => return Ok(()),
                            Failed::Retry => proptest::prop_assert!(!settled[i] && send == sends[i]),
                            Failed::Stale => {}
                        }
                    }
                    Step::Wait(ms) => {
                        now += ms;
                        match w.due(now) {
                            Err(Exhausted { index }) => {
                                proptest::prop_assert!(!settled[index]);
                                return Ok(());
                            }
                            Ok(due) => {
                                proptest::prop_assert!(due.resend.windows(2).all(|p| p[0] < p[1]));
                                proptest::prop_assert!(due.timed_out <= due.resend.len());
                                for i in due.resend {
                                    proptest::prop_assert!(!settled[i]);
                                    sends[i] = w.sent(i, now);
                                    proptest::prop_assert!(sends[i] <= RETRIES + 1 + 64);
                                }
                            }
                        }
                    }
                    Step::Reconnect => {
                        for i in w.reconnected() {
                            proptest::prop_assert!(!settled[i]);
                            sends[i] = w.sent(i, now);
                        }
                    }
                    Step::Ack(..) | Step::Fail(..) => {}
                }
                let unsettled = settled.iter().filter(|s| !**s).count();
                proptest::prop_assert_eq!(w.len(), unsettled);
                let next = w.next_due_ms();
                proptest::prop_assert_eq!(next.is_some(), unsettled > 0);
                if let Some(at) = next {
                    proptest::prop_assert!(at <= now + 100, "a deadline at most one timeout away");
                }
            }
        }
    }
}
