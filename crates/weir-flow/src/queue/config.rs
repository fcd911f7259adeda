//! What bounds a queue and what the bound does: [`Capacity`], [`OnFull`], [`Fallback`]
//! and [`QueueConfig`].

use std::fmt;
use std::time::Duration;

/// How much a queue may hold: a number of items, a total weight, both, or (for
/// simulation only) nothing.
///
/// The queue is full when one more item would exceed either bound. Weight is whatever
/// the queue's weight function says (see [`QueueConfig::weigh_by`]), typically payload
/// bytes.
///
/// # Examples
///
/// ```
/// use weir_flow::queue::Capacity;
///
/// let by_count = Capacity::items(1024);
/// assert_eq!(by_count.max_items(), Some(1024));
/// assert_eq!(by_count.max_weight(), None);
///
/// let both = Capacity::items_and_weight(1024, 8 << 20);
/// assert_eq!(both.max_weight(), Some(8 << 20));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    max_items: usize,
    max_weight: u64,
}

impl Capacity {
    /// At most `max_items` items.
    ///
    /// # Panics
    ///
    /// If `max_items` is zero: a queue that can never hold anything would make every
    /// blocking send wait forever. Validate configured values before building a queue.
    pub const fn items(max_items: usize) -> Self {
        assert!(max_items > 0, "a queue's item capacity must be at least 1");
        Capacity {
            max_items,
            max_weight: u64::MAX,
        }
    }

    /// At most `max_weight` in total weight, any number of items.
    ///
    /// # Panics
    ///
    /// If `max_weight` is zero.
    pub const fn weight(max_weight: u64) -> Self {
        assert!(
            max_weight > 0,
            "a queue's weight capacity must be at least 1"
        );
        Capacity {
            max_items: usize::MAX,
            max_weight,
        }
    }

    /// At most `max_items` items and at most `max_weight` in total weight.
    ///
    /// # Panics
    ///
    /// If either bound is zero.
    pub const fn items_and_weight(max_items: usize, max_weight: u64) -> Self {
        assert!(max_items > 0, "a queue's item capacity must be at least 1");
        assert!(
            max_weight > 0,
            "a queue's weight capacity must be at least 1"
        );
        Capacity {
            max_items,
            max_weight,
        }
    }

    /// No bound at all. **For simulation and measurement only** (the lab's "unbounded
    /// queue" strategy, which shows why bounds matter): every weir data path uses a
    /// bounded capacity.
    pub const fn unbounded() -> Self {
        Capacity {
            max_items: usize::MAX,
            max_weight: u64::MAX,
        }
    }

    /// The item bound, if any.
    pub const fn max_items(&self) -> Option<usize> {
        if self.max_items == usize::MAX {
            None
        } else {
            Some(self.max_items)
        }
    }

    /// The weight bound, if any.
    pub const fn max_weight(&self) -> Option<u64> {
        if self.max_weight == u64::MAX {
            None
        } else {
            Some(self.max_weight)
        }
    }

    /// Whether neither bound is set (see [`Capacity::unbounded`]).
    pub const fn is_unbounded(&self) -> bool {
        self.max_items == usize::MAX && self.max_weight == u64::MAX
    }

    /// The item bound, `usize::MAX` when unbounded.
    pub(crate) const fn item_limit(&self) -> usize {
        self.max_items
    }

    /// The weight bound, `u64::MAX` when unbounded.
    pub(crate) const fn weight_limit(&self) -> u64 {
        self.max_weight
    }
}

/// What a full queue does with the next item.
///
/// `Expire` and `Conflate` add behaviour that applies whether or not the queue is full
/// (discarding stale items at take, replacing items of the same key), and carry a
/// [`Fallback`] for when the queue is still full.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use weir_flow::queue::{Fallback, OnFull};
///
/// let stale_after_half_a_second = OnFull::Expire {
///     max_age: Duration::from_millis(500),
///     when_full: Fallback::Reject,
/// };
/// assert_eq!(stale_after_half_a_second.fallback(), Fallback::Reject);
/// assert_eq!(OnFull::DropOldest.fallback(), Fallback::DropOldest);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnFull {
    /// The sender waits for room (FIFO among senders). The sans-IO core answers
    /// [`Offer::WouldBlock`](super::Offer::WouldBlock) and the caller retries later.
    Block,
    /// The incoming item is refused and handed back.
    Reject,
    /// The incoming item is dropped, counted and handed back.
    DropNewest,
    /// Items at the head are evicted (counted, handed back) until the new one fits.
    DropOldest,
    /// When the consumer takes, items at the head whose age is **strictly greater**
    /// than `max_age` are discarded and counted (an item exactly `max_age` old is
    /// delivered). When the queue is full, `when_full` applies.
    Expire {
        /// The oldest an item may be and still be delivered.
        max_age: Duration,
        /// What to do with a new item when the queue is full.
        when_full: Fallback,
    },
    /// Latest per key: a new item replaces the queued item with the same key in place
    /// (keeping its position, taking the new item's enqueue time); the replaced item is
    /// counted as superseded and handed back. At most `max_keys` distinct keys are
    /// queued; a new key arriving when that bound (or the capacity) is reached gets
    /// `when_full`. The key comes from [`QueueConfig::key_by`].
    Conflate {
        /// The most distinct keys queued at once (at least 1).
        max_keys: usize,
        /// What to do with a new key when the queue is full.
        when_full: Fallback,
    },
}

impl OnFull {
    /// What happens to an item that does not fit.
    pub const fn fallback(&self) -> Fallback {
        match *self {
            OnFull::Block => Fallback::Block,
            OnFull::Reject => Fallback::Reject,
            OnFull::DropNewest => Fallback::DropNewest,
            OnFull::DropOldest => Fallback::DropOldest,
            OnFull::Expire { when_full, .. } | OnFull::Conflate { when_full, .. } => when_full,
        }
    }

    /// The expiry deadline, for [`OnFull::Expire`].
    pub const fn max_age(&self) -> Option<Duration> {
        match *self {
            OnFull::Expire { max_age, .. } => Some(max_age),
            _ => None,
        }
    }
}

/// The plain overflow answers, used directly as [`OnFull`] variants and as the
/// fallback of [`OnFull::Expire`] and [`OnFull::Conflate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fallback {
    /// Wait for room.
    Block,
    /// Refuse the incoming item and hand it back.
    Reject,
    /// Drop the incoming item, count it and hand it back.
    DropNewest,
    /// Evict from the head until the incoming item fits.
    DropOldest,
}

/// A function from an item to its weight.
pub(crate) type WeighFn<T> = Box<dyn Fn(&T) -> u64 + Send + Sync>;
/// A function from an item to its conflation key.
pub(crate) type KeyFn<T, K> = Box<dyn Fn(&T) -> K + Send + Sync>;

/// Everything needed to build a queue: its [`Capacity`], its [`OnFull`] policy, and
/// optionally a weight function and a key function.
///
/// Without [`weigh_by`](QueueConfig::weigh_by) every item weighs 0, so a weight bound
/// never bites and `bytes` stays 0. Without [`key_by`](QueueConfig::key_by) every item
/// has the key `()`, so [`OnFull::Conflate`] keeps only the latest item.
///
/// # Examples
///
/// ```
/// use weir_flow::queue::{Capacity, Fallback, OnFull, QueueConfig, QueueCore};
///
/// // Latest position per courier, at most 2,000 couriers, 1 MiB in total.
/// struct Ping { courier: u32, payload: Vec<u8> }
/// let config = QueueConfig::new(
///     Capacity::weight(1 << 20),
///     OnFull::Conflate { max_keys: 2_000, when_full: Fallback::DropOldest },
/// )
/// .weigh_by(|p: &Ping| p.payload.len() as u64)
/// .key_by(|p: &Ping| p.courier);
/// let queue = QueueCore::new(config);
/// assert!(queue.is_empty());
/// ```
pub struct QueueConfig<T, K = ()> {
    pub(crate) capacity: Capacity,
    pub(crate) on_full: OnFull,
    pub(crate) weigh: Option<WeighFn<T>>,
    pub(crate) key: KeyFn<T, K>,
}

impl<T: 'static> QueueConfig<T, ()> {
    /// A config with the given bound and policy, items weighing 0, all keys `()`.
    pub fn new(capacity: Capacity, on_full: OnFull) -> Self {
        QueueConfig {
            capacity,
            on_full,
            weigh: None,
            key: Box::new(|_: &T| ()),
        }
    }
}

impl<T, K> QueueConfig<T, K> {
    /// Weigh each item with `weigh` (e.g. its payload length in bytes). It is called
    /// once per offer, so it should be cheap.
    pub fn weigh_by(mut self, weigh: impl Fn(&T) -> u64 + Send + Sync + 'static) -> Self {
        self.weigh = Some(Box::new(weigh));
        self
    }

    /// Key each item with `key` for [`OnFull::Conflate`]. Ignored by other policies.
    pub fn key_by<K2>(self, key: impl Fn(&T) -> K2 + Send + Sync + 'static) -> QueueConfig<T, K2> {
        QueueConfig {
            capacity: self.capacity,
            on_full: self.on_full,
            weigh: self.weigh,
            key: Box::new(key),
        }
    }

    /// The configured capacity.
    pub fn capacity(&self) -> Capacity {
        self.capacity
    }

    /// The configured policy.
    pub fn on_full(&self) -> OnFull {
        self.on_full
    }
}

impl<T, K> fmt::Debug for QueueConfig<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueConfig")
            .field("capacity", &self.capacity)
            .field("on_full", &self.on_full)
            .field("weighed", &self.weigh.is_some())
            .finish()
    }
}
