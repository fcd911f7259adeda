//! The queue strategies on [`QueueCore`].

use std::time::Duration;

use weir_flow::queue::{Capacity, Fallback, Offer, OnFull, QueueConfig, QueueCore};
use weir_flow::{FlowStats, Timestamp};

use super::items;
use crate::engine::{Lane, Producer};
use crate::strategy::Strategy;

/// A queue between producer and consumer; items are message indices, keyed by
/// `index mod keys` (the key matters only to `LatestPerKey`).
pub(crate) struct QueueLane {
    name: String,
    queue: QueueCore<u64, u64>,
}

impl QueueLane {
    /// The lane for one of the queue strategies (the credit ones have their own lane).
    pub(crate) fn new(name: &str, strategy: Strategy) -> Self {
        let (capacity, on_full, keys) = match strategy {
            Strategy::Reject { capacity } => (Capacity::items(items(capacity)), OnFull::Reject, 1),
            Strategy::DropNewest { capacity } => {
                (Capacity::items(items(capacity)), OnFull::DropNewest, 1)
            }
            Strategy::DropOldest { capacity } => {
                (Capacity::items(items(capacity)), OnFull::DropOldest, 1)
            }
            Strategy::Block { capacity } => (Capacity::items(items(capacity)), OnFull::Block, 1),
            Strategy::Expire { deadline_ms } => (
                Capacity::unbounded(),
                OnFull::Expire {
                    max_age: Duration::from_millis(deadline_ms),
                    when_full: Fallback::Reject,
                },
                1,
            ),
            Strategy::LatestPerKey { keys } => (
                Capacity::unbounded(),
                OnFull::Conflate {
                    max_keys: items(keys),
                    when_full: Fallback::Reject,
                },
                keys.get(),
            ),
            Strategy::Unbounded | Strategy::Credit { .. } | Strategy::AdaptiveCredit { .. } => {
                (Capacity::unbounded(), OnFull::Reject, 1)
            }
        };
        let config = QueueConfig::new(capacity, on_full).key_by(move |index: &u64| index % keys);
        QueueLane {
            name: name.to_owned(),
            queue: QueueCore::new(config),
        }
    }
}

impl Lane for QueueLane {
    fn name(&self) -> &str {
        &self.name
    }

    fn produce(&mut self, now: Timestamp, producer: &mut Producer) {
        while let Some(index) = producer.due_at(now.as_millis()) {
            if let Offer::WouldBlock(_) = self.queue.offer(index, now) {
                // Full under `Block`: the producer keeps the message and tries again in
                // the next millisecond.
                return;
            }
            producer.mark_sent(now.as_millis());
        }
    }

    fn completed(&mut self, _now: Timestamp, _producer: &mut Producer) {}

    fn pick(&mut self, now: Timestamp) -> Option<u64> {
        self.queue.take(now).map(|taken| taken.item)
    }

    fn stats(&self, now: Timestamp) -> FlowStats {
        self.queue.stats(now)
    }
}
