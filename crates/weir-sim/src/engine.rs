//! The single-consumer engine: a producer, one strategy in the middle, one consumer, on a
//! virtual clock in whole milliseconds.
//!
//! The event-ordering rules are written down in the crate documentation; this module is
//! where they are implemented, in [`run`].

use weir_flow::{FlowStats, Timestamp};

use crate::clock::VirtualClock;
use crate::error::SimError;
use crate::workload::{ArrivalGaps, Workload};

/// The producer side of a run: which message is next, when it is due, and how long the
/// producer has waited so far.
#[derive(Debug, Clone)]
pub struct Producer {
    gaps: ArrivalGaps,
    total: u64,
    sent: u64,
    due_ms: u64,
    wait_ms: u64,
}

impl Producer {
    /// A producer that will send `workload.messages` messages, the first due at t=0.
    pub fn new(workload: &Workload) -> Self {
        Producer {
            gaps: ArrivalGaps::new(&workload.arrivals),
            total: workload.messages,
            sent: 0,
            due_ms: 0,
            wait_ms: 0,
        }
    }

    /// The index of the next message and the millisecond it is (or was) due, if any is
    /// left to send.
    pub fn next(&self) -> Option<(u64, u64)> {
        (self.sent < self.total).then_some((self.sent, self.due_ms))
    }

    /// The index of the next message if it is due at `now_ms`.
    pub fn due_at(&self, now_ms: u64) -> Option<u64> {
        self.next()
            .and_then(|(index, due_ms)| (due_ms <= now_ms).then_some(index))
    }

    /// Records that the next message left the producer at `now_ms` (accepted, refused or
    /// sent): the producer waited `now_ms - due`, and the next message is due one gap
    /// after `now_ms`.
    pub fn mark_sent(&mut self, now_ms: u64) {
        self.wait_ms += now_ms.saturating_sub(self.due_ms);
        self.sent += 1;
        self.due_ms = now_ms + self.gaps.next_gap_ms();
    }

    /// Messages that have left the producer.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Messages the producer sends in total.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether every message has left the producer.
    pub fn is_done(&self) -> bool {
        self.sent >= self.total
    }

    /// The producer's total wait: the sum over messages of (left − due).
    pub fn wait_ms(&self) -> u64 {
        self.wait_ms
    }
}

/// One strategy between the producer and the consumer, driving a real `weir-flow` core.
///
/// The engine calls the three phase methods in the order the crate documentation gives.
pub trait Lane {
    /// The strategy's name, as printed in the tables.
    fn name(&self) -> &str;

    /// The producer's turn at `now`: hand over every message that is due, if the strategy
    /// lets it.
    fn produce(&mut self, now: Timestamp, producer: &mut Producer);

    /// The consumer finished a message at `now` (before it picks the next one).
    fn completed(&mut self, now: Timestamp, producer: &mut Producer);

    /// The idle consumer asks for its next message at `now`; returns its index.
    fn pick(&mut self, now: Timestamp) -> Option<u64>;

    /// The statistics of the strategy's queue (or buffer) at `now`.
    fn stats(&self, now: Timestamp) -> FlowStats;

    /// A remark about the run for the lines under a table, if the strategy has one (the
    /// adaptive window's range, say).
    fn note(&self) -> Option<String> {
        None
    }
}

/// What a millisecond in which something happened looked like, after both phases.
///
/// The engine skips milliseconds in which nothing can happen (no arrival, no
/// completion, no waiting producer). In a skipped stretch nothing changes except the
/// age of the oldest waiting message, which grows with the clock.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// The millisecond.
    pub now_ms: u64,
    /// Messages that have left the producer so far.
    pub sent: u64,
    /// Messages the consumer has finished so far.
    pub completed: u64,
    /// Whether a message is in service at the end of the millisecond.
    pub in_service: bool,
    /// The strategy's queue statistics at the end of the millisecond.
    pub stats: FlowStats,
}

impl Step {
    /// Whether every message sent is accounted for: finished, in service, lost, or
    /// still queued.
    pub fn is_conserved(&self) -> bool {
        self.stats.is_conserved()
            && self.sent
                == self.completed
                    + u64::from(self.in_service)
                    + self.stats.lost()
                    + self.stats.depth
    }
}

/// Something that watches a run, one [`Step`] per millisecond in which something
/// happened (see [`Step`] for the stretches in between).
pub trait Observer {
    /// Called after the consumer's phase of every millisecond the engine stops at.
    fn step(&mut self, step: &Step);
}

impl Observer for () {
    fn step(&mut self, _step: &Step) {}
}

/// The result of one run: one row of the lab's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    /// Messages the producer sent (accepted or not).
    pub offered: u64,
    /// Messages the consumer finished.
    pub completed: u64,
    /// Messages refused because the queue was full.
    pub rejected: u64,
    /// Messages dropped (newest or oldest) because the queue was full.
    pub dropped: u64,
    /// Messages discarded because they were older than the deadline.
    pub expired: u64,
    /// Messages replaced by a newer message with the same key.
    pub superseded: u64,
    /// The most messages ever waiting (not counting the one in service).
    pub max_depth: u64,
    /// The longest time a message waited between entering the queue and being picked.
    pub max_queue_wait_ms: u64,
    /// The producer's total wait.
    pub producer_wait_ms: u64,
    /// When the last message was finished.
    pub finished_ms: u64,
}

/// Runs `workload` through `lane` until every message is finished or lost.
///
/// `horizon_ms` bounds the run: a strategy that stops making progress (a credit window
/// of zero, say) ends with [`SimError::Stalled`] instead of looping forever.
///
/// # Errors
///
/// [`SimError::Stalled`] when the run is not over at `horizon_ms`.
pub fn run(
    workload: &Workload,
    lane: &mut dyn Lane,
    observer: &mut dyn Observer,
    horizon_ms: u64,
) -> Result<Outcome, SimError> {
    let mut clock = VirtualClock::new();
    let mut producer = Producer::new(workload);
    let mut busy_until_ms: Option<u64> = None;
    let mut completed = 0;
    let mut finished_ms = 0;
    loop {
        let now_ms = clock.now_ms();
        let now = clock.now();
        // 1. The producer acts first.
        lane.produce(now, &mut producer);
        // 2. The consumer: a completion, then the next pick.
        if busy_until_ms == Some(now_ms) {
            busy_until_ms = None;
            completed += 1;
            finished_ms = now_ms;
            lane.completed(now, &mut producer);
        }
        if busy_until_ms.is_none() && lane.pick(now).is_some() {
            busy_until_ms = Some(now_ms + workload.service.service_ms(now_ms));
        }
        let stats = lane.stats(now);
        let step = Step {
            now_ms,
            sent: producer.sent(),
            completed,
            in_service: busy_until_ms.is_some(),
            stats,
        };
        observer.step(&step);
        if producer.is_done() && busy_until_ms.is_none() && stats.depth == 0 {
            let max_queue_wait_ms =
                u64::try_from(stats.max_queue_wait.as_millis()).unwrap_or(u64::MAX);
            return Ok(Outcome {
                offered: producer.sent(),
                completed,
                rejected: stats.rejected,
                dropped: stats.dropped(),
                expired: stats.expired,
                superseded: stats.superseded,
                max_depth: stats.max_depth,
                max_queue_wait_ms,
                producer_wait_ms: producer.wait_ms(),
                finished_ms,
            });
        }
        if now_ms >= horizon_ms {
            return Err(SimError::Stalled {
                strategy: lane.name().to_owned(),
                horizon_ms,
                sent: producer.sent(),
                completed,
            });
        }
        // Skip the milliseconds in which nothing can happen: the next one is the next
        // arrival or completion, or the very next millisecond while a due message is
        // still waiting to leave the producer (a blocked put, a paced item without
        // demand).
        let next_ms = if producer.due_at(now_ms).is_some() {
            now_ms + 1
        } else {
            [producer.next().map(|(_, due_ms)| due_ms), busy_until_ms]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now_ms + 1)
                .min(horizon_ms.max(now_ms + 1))
        };
        clock.advance_to(next_ms);
    }
}
