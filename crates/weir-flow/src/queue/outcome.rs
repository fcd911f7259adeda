//! What the sans-IO core answers: [`Offer`], [`Taken`], [`Popped`], [`Evicted`] and
//! the reservation token.

use std::fmt;

use crate::Timestamp;

/// What became of an offered item. Every item that does not stay in the queue is
/// handed back.
///
/// # Examples
///
/// ```
/// use weir_flow::Timestamp;
/// use weir_flow::queue::{Capacity, Offer, OnFull, QueueConfig, QueueCore};
///
/// let mut queue = QueueCore::new(QueueConfig::new(Capacity::items(1), OnFull::DropOldest));
/// let now = Timestamp::ZERO;
/// assert!(queue.offer(1, now).is_accepted());
/// match queue.offer(2, now) {
///     Offer::Evicted(evicted) => assert_eq!(evicted.into_iter().collect::<Vec<_>>(), [1]),
///     other => panic!("expected an eviction, got {other:?}"),
/// }
/// ```
#[must_use = "an offer may hand the item (or an evicted one) back"]
#[derive(Debug)]
pub enum Offer<T> {
    /// Appended at the tail.
    Accepted,
    /// Appended at the tail after evicting these items from the head
    /// ([`OnFull::DropOldest`](super::OnFull::DropOldest) or that fallback); counted
    /// as `dropped_oldest`.
    Evicted(Evicted<T>),
    /// Replaced the queued item of the same key in place
    /// ([`OnFull::Conflate`](super::OnFull::Conflate)); `old` is counted as
    /// `superseded`. `evicted` is empty unless the heavier new item needed head
    /// evictions under a `DropOldest` fallback.
    Superseded {
        /// The replaced item.
        old: T,
        /// Items evicted from the head to make weight room, usually none.
        evicted: Evicted<T>,
    },
    /// Full under a `Block` policy: not counted yet; offer it again later.
    WouldBlock(T),
    /// Full under a `Reject` policy; counted as `rejected`.
    Rejected(T),
    /// Full under a `DropNewest` policy; counted as `dropped_newest`.
    DroppedNewest(T),
    /// Heavier than the whole weight capacity, so it can never fit; counted as
    /// `rejected`.
    TooHeavy(T),
    /// The queue is closed; not counted.
    Closed(T),
}

impl<T> Offer<T> {
    /// Whether the offered item is now queued.
    pub fn is_accepted(&self) -> bool {
        matches!(
            self,
            Offer::Accepted | Offer::Evicted(_) | Offer::Superseded { .. }
        )
    }

    /// The offered item, if it was not queued.
    pub fn into_refused(self) -> Option<T> {
        match self {
            Offer::WouldBlock(item)
            | Offer::Rejected(item)
            | Offer::DroppedNewest(item)
            | Offer::TooHeavy(item)
            | Offer::Closed(item) => Some(item),
            Offer::Accepted | Offer::Evicted(_) | Offer::Superseded { .. } => None,
        }
    }
}

/// An item taken from the queue with the time it was enqueued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken<T> {
    /// The item.
    pub item: T,
    /// When it was enqueued (for a conflated slot: when its latest item arrived).
    pub enqueued_at: Timestamp,
}

/// One item removed from the head by [`QueueCore::pop`](super::QueueCore::pop).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Popped<T> {
    /// Delivered to the consumer; counted as `delivered`.
    Delivered(Taken<T>),
    /// Older than the deadline; counted as `expired`.
    Expired(Taken<T>),
}

/// Items evicted from the head by one offer, oldest first.
///
/// One eviction (the usual case) needs no allocation; several (a heavy item under a
/// weight bound) use a vector.
pub struct Evicted<T> {
    first: Option<T>,
    rest: Vec<T>,
}

impl<T> Evicted<T> {
    pub(crate) fn new() -> Self {
        Evicted {
            first: None,
            rest: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, item: T) {
        if self.first.is_none() {
            self.first = Some(item);
        } else {
            self.rest.push(item);
        }
    }

    /// How many items were evicted.
    pub fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    /// Whether nothing was evicted.
    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// The oldest evicted item.
    pub fn first(&self) -> Option<&T> {
        self.first.as_ref()
    }

    /// The evicted items, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.first.iter().chain(self.rest.iter())
    }
}

impl<T> IntoIterator for Evicted<T> {
    type Item = T;
    type IntoIter = std::iter::Chain<std::option::IntoIter<T>, std::vec::IntoIter<T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

impl<T: fmt::Debug> fmt::Debug for Evicted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Room reserved by [`QueueCore::try_reserve`](super::QueueCore::try_reserve): give it
/// to [`offer_reserved`](super::QueueCore::offer_reserved) or
/// [`release`](super::QueueCore::release) on the same queue.
#[must_use = "reserved room stays used until it is offered into or released"]
#[derive(Debug, PartialEq, Eq)]
pub struct Reservation {
    pub(crate) weight: u64,
}

impl Reservation {
    /// The weight reserved.
    pub fn weight(&self) -> u64 {
        self.weight
    }
}

/// Why [`QueueCore::try_reserve`](super::QueueCore::try_reserve) reserved nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReserveRefused {
    /// No room now.
    Full,
    /// More than the whole weight capacity: never.
    TooHeavy,
    /// The queue is closed.
    Closed,
}
