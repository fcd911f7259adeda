//! The strategies a run can put between its producer and its consumer, with their limits.

use std::num::NonZeroU64;

/// A strategy and its limits: what happens to a message that arrives while the consumer
/// is busy.
///
/// Each one is a thin driver over a real `weir-flow` core; see the crate documentation
/// for which core and which policy.
///
/// # Examples
///
/// ```
/// use std::num::NonZeroU64;
/// use weir_sim::{Strategy, lesson, run};
///
/// let block = Strategy::Block { capacity: NonZeroU64::new(50).unwrap() };
/// assert_eq!(block.describe(), "block (capacity 50)");
/// let outcome = run(&lesson::workload(true), block.lane("bounded, block").as_mut(), &mut (), 1_000_000).unwrap();
/// assert_eq!((outcome.producer_wait_ms, outcome.finished_ms), (1_501, 7_496));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// An unbounded queue: nothing is refused; depth and waiting time grow.
    Unbounded,
    /// A bounded queue that refuses a message when `capacity` messages are waiting.
    Reject {
        /// Most messages waiting.
        capacity: NonZeroU64,
    },
    /// A bounded queue that drops the incoming message when full.
    DropNewest {
        /// Most messages waiting.
        capacity: NonZeroU64,
    },
    /// A bounded queue that evicts the oldest waiting message to make room.
    DropOldest {
        /// Most messages waiting.
        capacity: NonZeroU64,
    },
    /// An unbounded queue whose consumer discards, at each pick, waiting messages older
    /// than the deadline.
    Expire {
        /// The largest age a picked message may have.
        deadline_ms: u64,
    },
    /// A bounded queue whose producer waits for space.
    Block {
        /// Most messages waiting.
        capacity: NonZeroU64,
    },
    /// Reactive Streams credits: the consumer requests `window` up front and one more per
    /// finished message; the producer sends only against demand.
    Credit {
        /// Initial demand, and so the most messages ever buffered.
        window: NonZeroU64,
    },
    /// One waiting message per key (key = message index mod `keys`); a newer message
    /// replaces the waiting one of its key in place.
    LatestPerKey {
        /// Distinct keys.
        keys: NonZeroU64,
    },
    /// Credits whose window shrinks while the oldest buffered message ages past a target.
    AdaptiveCredit {
        /// The largest window.
        window: NonZeroU64,
        /// The oldest-message age above which the window shrinks.
        target_age_ms: u64,
    },
}

impl Strategy {
    /// A short description of the strategy and its limits, e.g. `reject (capacity 50)`.
    pub fn describe(&self) -> String {
        match self {
            Strategy::Unbounded => "unbounded queue".to_owned(),
            Strategy::Reject { capacity } => format!("reject (capacity {capacity})"),
            Strategy::DropNewest { capacity } => format!("drop newest (capacity {capacity})"),
            Strategy::DropOldest { capacity } => format!("drop oldest (capacity {capacity})"),
            Strategy::Expire { deadline_ms } => format!("expire (deadline {deadline_ms} ms)"),
            Strategy::Block { capacity } => format!("block (capacity {capacity})"),
            Strategy::Credit { window } => format!("credit (window {window})"),
            Strategy::LatestPerKey { keys } => format!("latest per key ({keys} keys)"),
            Strategy::AdaptiveCredit {
                window,
                target_age_ms,
            } => format!("adaptive credit (window up to {window}, target age {target_age_ms} ms)"),
        }
    }
}
