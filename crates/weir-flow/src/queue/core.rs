//! The sans-IO bounded queue: a synchronous state machine that takes `now` as an
//! argument and touches no clock, thread or socket.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::Hash;

use super::config::{Capacity, KeyFn, OnFull, QueueConfig, WeighFn};
use super::outcome::{Evicted, Offer, Popped, Reservation, ReserveRefused, Taken};
use crate::{FlowStats, Timestamp};

/// Preallocate at most this many slots up front; a larger queue grows on demand (up to
/// its bound).
const MAX_PREALLOCATED_SLOTS: usize = 4096;

/// One queued item with what the queue knows about it.
struct Slot<T, K> {
    item: T,
    enqueued_at: Timestamp,
    weight: u64,
    /// The conflation key, kept only under [`OnFull::Conflate`].
    key: Option<K>,
}

/// A bounded FIFO queue with an overflow policy, as a synchronous state machine.
///
/// The caller passes the current time to every call that needs it; the queue never
/// reads a clock. The async [`channel`](super::channel) wraps one of these in a mutex;
/// the simulator drives one directly on a virtual clock.
///
/// # Counting
///
/// An item is counted as `offered` when its fate is decided: when it is accepted,
/// rejected, dropped or refused as too heavy. [`Offer::WouldBlock`] (the `Block` policy
/// with a full queue) is not a fate: the item is handed back uncounted and the caller
/// retries later. [`Offer::Closed`] is not counted either: a closed queue takes no
/// offers. A blocked offer that the caller gives up on can be recorded as
/// offered + rejected with [`QueueCore::record_abandoned`]. So
/// `offered = delivered + rejected + dropped + expired + superseded + depth`
/// ([`FlowStats::is_conserved`]) holds after every call.
///
/// `max_depth` is the largest number of queued items, read right after each enqueue.
/// `max_queue_wait` is the longest `take time − enqueue time` of a delivered item
/// (expired items do not count).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use weir_flow::Timestamp;
/// use weir_flow::queue::{Capacity, Offer, OnFull, QueueConfig, QueueCore};
///
/// let mut queue = QueueCore::new(QueueConfig::new(Capacity::items(2), OnFull::Reject));
/// let t = Timestamp::from_millis;
/// assert!(matches!(queue.offer("a", t(0)), Offer::Accepted));
/// assert!(matches!(queue.offer("b", t(10)), Offer::Accepted));
/// assert!(matches!(queue.offer("c", t(20)), Offer::Rejected("c")));
///
/// let taken = queue.take(t(30)).expect("an item is queued");
/// assert_eq!((taken.item, taken.enqueued_at), ("a", t(0)));
///
/// let stats = queue.stats(t(30));
/// assert_eq!((stats.offered, stats.delivered, stats.rejected, stats.depth), (3, 1, 1, 1));
/// assert_eq!(stats.max_queue_wait, Duration::from_millis(30));
/// assert!(stats.is_conserved());
/// ```
pub struct QueueCore<T, K = ()> {
    slots: VecDeque<Slot<T, K>>,
    capacity: Capacity,
    on_full: OnFull,
    /// The item bound, lowered to `max_keys` under `Conflate`.
    item_limit: usize,
    weigh: Option<WeighFn<T>>,
    key_of: KeyFn<T, K>,
    conflate: bool,
    /// Conflation key → sequence number of its slot. Slots are numbered in arrival
    /// order and leave only from the front, so slot index = `seq - head_seq`.
    keys: HashMap<K, u64>,
    head_seq: u64,
    weight: u64,
    reserved_items: usize,
    reserved_weight: u64,
    closed: bool,
    /// Counters; `depth`, `bytes` and `oldest_age` are filled in by [`QueueCore::stats`].
    stats: FlowStats,
}

impl<T, K: Hash + Eq + Clone> QueueCore<T, K> {
    /// An empty, open queue.
    ///
    /// # Panics
    ///
    /// If the policy is [`OnFull::Conflate`] with `max_keys == 0`.
    pub fn new(config: QueueConfig<T, K>) -> Self {
        let QueueConfig {
            capacity,
            on_full,
            weigh,
            key,
        } = config;
        let (conflate, item_limit) = match on_full {
            OnFull::Conflate { max_keys, .. } => {
                assert!(max_keys > 0, "a conflating queue needs max_keys >= 1");
                (true, capacity.item_limit().min(max_keys))
            }
            _ => (false, capacity.item_limit()),
        };
        QueueCore {
            slots: VecDeque::with_capacity(item_limit.min(MAX_PREALLOCATED_SLOTS)),
            capacity,
            on_full,
            item_limit,
            weigh,
            key_of: key,
            conflate,
            keys: HashMap::new(),
            head_seq: 0,
            weight: 0,
            reserved_items: 0,
            reserved_weight: 0,
            closed: false,
            stats: FlowStats::default(),
        }
    }

    /// Offers `item`, enqueued at `now`, and says what became of it (see [`Offer`]).
    ///
    /// Order of checks: a closed queue answers [`Offer::Closed`]; an item heavier than
    /// the whole weight capacity answers [`Offer::TooHeavy`]; under `Conflate` an item
    /// whose key is queued replaces that item in place; otherwise the item is appended
    /// if it fits, and the policy decides if it does not.
    #[inline]
    pub fn offer(&mut self, item: T, now: Timestamp) -> Offer<T> {
        if self.closed {
            return Offer::Closed(item);
        }
        let weight = self.weight_of(&item);
        if weight > self.capacity.weight_limit() {
            self.stats.offered += 1;
            self.stats.rejected += 1;
            return Offer::TooHeavy(item);
        }
        if !self.conflate {
            return self.insert(item, weight, None, now);
        }
        let key = (self.key_of)(&item);
        match self.keys.get(&key) {
            Some(&seq) => self.replace(seq, item, weight, now),
            None => self.insert(item, weight, Some(key), now),
        }
    }

    /// Takes the next deliverable item, discarding (and counting) expired ones on the
    /// way. Expired items are dropped; use [`QueueCore::take_with`] or
    /// [`QueueCore::pop`] to receive them. `None` when nothing deliverable is queued.
    pub fn take(&mut self, now: Timestamp) -> Option<Taken<T>> {
        self.take_with(now, |_, _| {})
    }

    /// Like [`QueueCore::take`], handing each expired item and its enqueue time to
    /// `on_expired` first (no allocation per take).
    #[inline]
    pub fn take_with(
        &mut self,
        now: Timestamp,
        mut on_expired: impl FnMut(T, Timestamp),
    ) -> Option<Taken<T>> {
        loop {
            match self.pop(now)? {
                Popped::Delivered(taken) => return Some(taken),
                Popped::Expired(expired) => on_expired(expired.item, expired.enqueued_at),
            }
        }
    }

    /// Removes the head item: [`Popped::Expired`] if it is older than the deadline
    /// (strictly: an item exactly `max_age` old is delivered), else
    /// [`Popped::Delivered`]. One item per call, for callers that want to see expired
    /// items one by one. `None` when the queue is empty.
    #[inline]
    pub fn pop(&mut self, now: Timestamp) -> Option<Popped<T>> {
        let enqueued_at = self.slots.front()?.enqueued_at;
        let age = now.saturating_duration_since(enqueued_at);
        let expired = self.on_full.max_age().is_some_and(|max_age| age > max_age);
        let slot = self.pop_front()?;
        let taken = Taken {
            item: slot.item,
            enqueued_at,
        };
        if expired {
            self.stats.expired += 1;
            Some(Popped::Expired(taken))
        } else {
            self.stats.delivered += 1;
            self.stats.max_queue_wait = self.stats.max_queue_wait.max(age);
            Some(Popped::Delivered(taken))
        }
    }

    /// Reserves room for one item of weight `weight`, so that a later
    /// [`QueueCore::offer_reserved`] of an item no heavier than that is accepted.
    /// Reserved room counts as used until it is offered into or
    /// [released](QueueCore::release). Reservations are not counted in the stats.
    pub fn try_reserve(&mut self, weight: u64) -> Result<Reservation, ReserveRefused> {
        if self.closed {
            return Err(ReserveRefused::Closed);
        }
        if weight > self.capacity.weight_limit() {
            return Err(ReserveRefused::TooHeavy);
        }
        if !self.fits(weight) {
            return Err(ReserveRefused::Full);
        }
        self.reserved_items += 1;
        self.reserved_weight += weight;
        Ok(Reservation { weight })
    }

    /// Offers `item` into room reserved by [`QueueCore::try_reserve`]. The reservation
    /// is used up whatever the outcome; an item no heavier than the reservation is
    /// accepted unless the queue was closed meanwhile.
    pub fn offer_reserved(
        &mut self,
        item: T,
        reservation: Reservation,
        now: Timestamp,
    ) -> Offer<T> {
        self.release(reservation);
        self.offer(item, now)
    }

    /// Appends a new slot if it fits, else applies the fallback.
    #[inline]
    fn insert(&mut self, item: T, weight: u64, key: Option<K>, now: Timestamp) -> Offer<T> {
        if self.fits(weight) {
            self.push(item, weight, key, now);
            return Offer::Accepted;
        }
        match self.on_full.fallback() {
            super::Fallback::Block => Offer::WouldBlock(item),
            super::Fallback::Reject => self.reject(item),
            super::Fallback::DropNewest => self.drop_newest(item),
            super::Fallback::DropOldest => {
                if !self.fits_after_evicting_all(weight) {
                    return self.drop_newest(item);
                }
                let mut evicted = Evicted::new();
                while !self.fits(weight) {
                    self.evict_front(&mut evicted);
                }
                self.push(item, weight, key, now);
                Offer::Evicted(evicted)
            }
        }
    }

    /// Replaces the slot numbered `seq` (same key) in place if the weight allows, else
    /// applies the fallback. Under `DropOldest` the head is evicted until the new item
    /// fits; if that evicts the slot of the same key too, the new item is appended.
    fn replace(&mut self, seq: u64, item: T, weight: u64, now: Timestamp) -> Offer<T> {
        let mut evicted = Evicted::new();
        if !self.replacement_fits(seq, weight) {
            match self.on_full.fallback() {
                super::Fallback::Block => return Offer::WouldBlock(item),
                super::Fallback::Reject => return self.reject(item),
                super::Fallback::DropNewest => return self.drop_newest(item),
                super::Fallback::DropOldest => {
                    if !self.fits_after_evicting_all(weight) {
                        return self.drop_newest(item);
                    }
                    while seq >= self.head_seq && !self.replacement_fits(seq, weight) {
                        self.evict_front(&mut evicted);
                    }
                    if seq < self.head_seq {
                        let key = (self.key_of)(&item);
                        while !self.fits(weight) {
                            self.evict_front(&mut evicted);
                        }
                        self.push(item, weight, Some(key), now);
                        return Offer::Evicted(evicted);
                    }
                }
            }
        }
        let index = usize::try_from(seq - self.head_seq).unwrap_or(usize::MAX);
        let Some(slot) = self.slots.get_mut(index) else {
            // Unreachable: `keys` only holds sequence numbers of queued slots.
            return self.reject(item);
        };
        let old_weight = std::mem::replace(&mut slot.weight, weight);
        slot.enqueued_at = now;
        let old = std::mem::replace(&mut slot.item, item);
        self.weight = self.weight - old_weight + weight;
        self.stats.offered += 1;
        self.stats.accepted += 1;
        self.stats.superseded += 1;
        Offer::Superseded { old, evicted }
    }

    /// Whether replacing the slot numbered `seq` with an item of `weight` stays within
    /// the weight bound.
    fn replacement_fits(&self, seq: u64, weight: u64) -> bool {
        let index = usize::try_from(seq - self.head_seq).unwrap_or(usize::MAX);
        let old_weight = self.slots.get(index).map_or(0, |slot| slot.weight);
        fits_weight(
            self.weight - old_weight,
            self.reserved_weight,
            weight,
            &self.capacity,
        )
    }

    #[inline]
    fn push(&mut self, item: T, weight: u64, key: Option<K>, now: Timestamp) {
        if let Some(key) = &key {
            let seq = self.head_seq + self.slots.len() as u64;
            self.keys.insert(key.clone(), seq);
        }
        self.slots.push_back(Slot {
            item,
            enqueued_at: now,
            weight,
            key,
        });
        self.weight += weight;
        self.stats.offered += 1;
        self.stats.accepted += 1;
        self.stats.max_depth = self.stats.max_depth.max(self.slots.len() as u64);
    }

    #[inline]
    fn pop_front(&mut self) -> Option<Slot<T, K>> {
        let slot = self.slots.pop_front()?;
        self.head_seq += 1;
        self.weight -= slot.weight;
        if let Some(key) = &slot.key {
            self.keys.remove(key);
        }
        Some(slot)
    }

    fn evict_front(&mut self, evicted: &mut Evicted<T>) {
        if let Some(slot) = self.pop_front() {
            self.stats.dropped_oldest += 1;
            evicted.push(slot.item);
        }
    }

    fn reject(&mut self, item: T) -> Offer<T> {
        self.stats.offered += 1;
        self.stats.rejected += 1;
        Offer::Rejected(item)
    }

    fn drop_newest(&mut self, item: T) -> Offer<T> {
        self.stats.offered += 1;
        self.stats.dropped_newest += 1;
        Offer::DroppedNewest(item)
    }
}

impl<T, K> QueueCore<T, K> {
    /// Gives reserved room back without using it.
    pub fn release(&mut self, reservation: Reservation) {
        self.reserved_items -= 1;
        self.reserved_weight -= reservation.weight;
    }

    /// Records a blocked offer that the caller gave up on (for example a send that
    /// timed out) as offered and rejected, keeping the stats conserved.
    pub fn record_abandoned(&mut self) {
        self.stats.offered += 1;
        self.stats.rejected += 1;
    }

    /// Closes the queue: later offers answer [`Offer::Closed`]; what is queued can
    /// still be taken. Idempotent.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Whether [`QueueCore::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// How many more items fit by count now (reserved room counts as used; the
    /// weight bound is not considered). `usize::MAX`-ish when there is no item bound.
    pub fn room(&self) -> usize {
        self.item_limit
            .saturating_sub(self.slots.len() + self.reserved_items)
    }

    /// Whether a new item of weight `weight` would fit now without any eviction.
    pub fn has_room_for(&self, weight: u64) -> bool {
        self.fits(weight)
    }

    /// The weight of `item` per the configured weight function (0 without one).
    pub fn weight_of(&self, item: &T) -> u64 {
        self.weigh.as_ref().map_or(0, |weigh| weigh(item))
    }

    /// Number of queued items.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Total weight of the queued items.
    pub fn weight(&self) -> u64 {
        self.weight
    }

    /// When the head item was enqueued, if any.
    pub fn oldest_enqueued_at(&self) -> Option<Timestamp> {
        self.slots.front().map(|slot| slot.enqueued_at)
    }

    /// The bound.
    pub fn capacity(&self) -> Capacity {
        self.capacity
    }

    /// The policy.
    pub fn on_full(&self) -> OnFull {
        self.on_full
    }

    /// The stats as of `now` (`oldest_age` is measured against `now`).
    pub fn stats(&self, now: Timestamp) -> FlowStats {
        FlowStats {
            depth: self.slots.len() as u64,
            bytes: self.weight,
            oldest_age: self
                .oldest_enqueued_at()
                .map(|at| now.saturating_duration_since(at))
                .unwrap_or_default(),
            ..self.stats
        }
    }

    /// Whether one more item of `weight` fits beside the queued and reserved ones.
    #[inline]
    fn fits(&self, weight: u64) -> bool {
        self.slots.len() + self.reserved_items < self.item_limit
            && fits_weight(self.weight, self.reserved_weight, weight, &self.capacity)
    }

    /// Whether an item of `weight` could fit if every queued item were evicted (only
    /// reservations are in the way otherwise).
    fn fits_after_evicting_all(&self, weight: u64) -> bool {
        self.reserved_items < self.item_limit
            && fits_weight(0, self.reserved_weight, weight, &self.capacity)
    }
}

/// Whether `queued + reserved + extra` stays within the weight bound (no overflow).
fn fits_weight(queued: u64, reserved: u64, extra: u64, capacity: &Capacity) -> bool {
    u128::from(queued) + u128::from(reserved) + u128::from(extra)
        <= u128::from(capacity.weight_limit())
}

impl<T, K> fmt::Debug for QueueCore<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueCore")
            .field("capacity", &self.capacity)
            .field("on_full", &self.on_full)
            .field("len", &self.slots.len())
            .field("weight", &self.weight)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
