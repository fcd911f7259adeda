//! The sans-IO bounded queue: a synchronous state machine that takes `now` as an
//! argument and touches no clock, thread or socket.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use super::config::{Capacity, KeyFn, OnFull, QueueConfig, WeighFn};
use super::outcome::{Evicted, Offer, Popped, Reservation, ReserveRefused, Taken};
use crate::{FlowStats, Timestamp};

/// Preallocate at most this many slots up front; a larger queue grows on demand (up to
/// its bound).
const MAX_PREALLOCATED_SLOTS: usize = 4096;

/// One queued item as the consumer gets it: the item and when it was enqueued.
pub(crate) struct Entry<T> {
    pub(crate) item: T,
    pub(crate) enqueued_at: Timestamp,
}

/// What the queue keeps about one queued item besides the item itself. Kept apart from
/// the items so that the items can be lent to the async receiver in one swap (see
/// [`QueueCore::lend`]) while the accounting stays here.
struct Meta<K> {
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
// `repr(C)` to keep the fields every offer and take touches (the first ones) on as few
// cache lines as possible: the async shell's senders and receiver run on different
// threads and each cache line they both write moves between cores.
#[repr(C)]
pub struct QueueCore<T, K = ()> {
    /// The queued items not lent out, oldest first: `items[i]` goes with
    /// `meta[lent + i]`.
    items: VecDeque<Entry<T>>,
    /// Every queued item's accounting, oldest first, lent ones included.
    meta: VecDeque<Meta<K>>,
    /// How many items at the front of `meta` were lent to the receiver (moved out of
    /// `items` by [`QueueCore::lend`]) and not yet [settled](QueueCore::settle). They
    /// still count as queued: for the bounds, the depth, the weight and the head's age.
    lent: usize,
    /// The item bound, lowered to `max_keys` under `Conflate`.
    item_limit: usize,
    reserved_items: usize,
    weight: u64,
    reserved_weight: u64,
    /// The hot counters, kept apart from the others (see [`QueueCore::stats`]).
    offered: u64,
    accepted: u64,
    max_depth: u64,
    capacity: Capacity,
    weigh: Option<WeighFn<T>>,
    closed: bool,
    conflate: bool,
    on_full: OnFull,
    key_of: KeyFn<T, K>,
    /// Conflation key → sequence number of its slot. Slots are numbered in arrival
    /// order and leave only from the front, so slot index = `seq - head_seq`.
    keys: HashMap<K, u64>,
    head_seq: u64,
    /// The other counters; `offered`, `accepted`, `max_depth`, `depth`, `bytes` and
    /// `oldest_age` are filled in by [`QueueCore::stats`].
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
            items: VecDeque::with_capacity(preallocated_slots(item_limit)),
            meta: VecDeque::with_capacity(preallocated_slots(item_limit)),
            lent: 0,
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
            offered: 0,
            accepted: 0,
            max_depth: 0,
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
            self.offered += 1;
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

    /// The common case of [`QueueCore::offer`] without the [`Offer`] around it: queues
    /// `item` (counted as offered and accepted) if the queue is open, not conflating
    /// and has room, else hands it back untouched and uncounted for `offer` to decide.
    ///
    /// With items lent out it also hands the item back when the push would raise
    /// `max_depth`: lent items the receiver has already delivered still count as
    /// queued until settled, so the caller settles first (and then offers), keeping
    /// `max_depth` exact.
    #[inline]
    pub(crate) fn try_push(&mut self, item: T, now: Timestamp) -> Result<(), T> {
        if self.closed || self.conflate {
            return Err(item);
        }
        if self.lent > 0 && self.meta.len() as u64 >= self.max_depth {
            return Err(item);
        }
        let weight = self.weight_of(&item);
        if !self.fits(weight) {
            return Err(item);
        }
        self.push(item, weight, None, now);
        Ok(())
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
    ///
    /// # Panics
    ///
    /// If items are lent out (only the async shell lends, and it never pops then).
    #[inline]
    pub fn pop(&mut self, now: Timestamp) -> Option<Popped<T>> {
        assert_eq!(self.lent, 0, "pop with items lent out");
        let enqueued_at = self.items.front()?.enqueued_at;
        let age = now.saturating_duration_since(enqueued_at);
        let expired = self.on_full.max_age().is_some_and(|max_age| age > max_age);
        let entry = self.pop_front()?;
        let taken = Taken {
            item: entry.item,
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
        // Conflating queues never lend, so `items` and `meta` line up.
        let index = usize::try_from(seq - self.head_seq).unwrap_or(usize::MAX);
        let (Some(entry), Some(meta)) = (self.items.get_mut(index), self.meta.get_mut(index))
        else {
            // Unreachable: `keys` only holds sequence numbers of queued slots.
            return self.reject(item);
        };
        let old_weight = std::mem::replace(&mut meta.weight, weight);
        meta.enqueued_at = now;
        entry.enqueued_at = now;
        let old = std::mem::replace(&mut entry.item, item);
        self.weight = self.weight - old_weight + weight;
        self.offered += 1;
        self.accepted += 1;
        self.stats.superseded += 1;
        Offer::Superseded { old, evicted }
    }

    /// Whether replacing the slot numbered `seq` with an item of `weight` stays within
    /// the weight bound.
    fn replacement_fits(&self, seq: u64, weight: u64) -> bool {
        let index = usize::try_from(seq - self.head_seq).unwrap_or(usize::MAX);
        let old_weight = self.meta.get(index).map_or(0, |meta| meta.weight);
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
            let seq = self.head_seq + self.meta.len() as u64;
            self.keys.insert(key.clone(), seq);
        }
        self.items.push_back(Entry {
            item,
            enqueued_at: now,
        });
        self.meta.push_back(Meta {
            enqueued_at: now,
            weight,
            key,
        });
        // Written only when changed: an unchanged line stays shared between cores.
        if weight != 0 {
            self.weight += weight;
        }
        self.offered += 1;
        self.accepted += 1;
        if self.meta.len() as u64 > self.max_depth {
            self.max_depth = self.meta.len() as u64;
        }
    }

    /// Removes the head (nothing may be lent out).
    #[inline]
    fn pop_front(&mut self) -> Option<Entry<T>> {
        let entry = self.items.pop_front()?;
        if let Some(meta) = self.meta.pop_front() {
            self.head_seq += 1;
            self.weight -= meta.weight;
            if let Some(key) = &meta.key {
                self.keys.remove(key);
            }
        }
        Some(entry)
    }

    fn evict_front(&mut self, evicted: &mut Evicted<T>) {
        if let Some(entry) = self.pop_front() {
            self.stats.dropped_oldest += 1;
            evicted.push(entry.item);
        }
    }

    fn reject(&mut self, item: T) -> Offer<T> {
        self.offered += 1;
        self.stats.rejected += 1;
        Offer::Rejected(item)
    }

    fn drop_newest(&mut self, item: T) -> Offer<T> {
        self.offered += 1;
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
        self.offered += 1;
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
            .saturating_sub(self.meta.len() + self.reserved_items)
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
        self.meta.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.meta.is_empty()
    }

    /// Total weight of the queued items.
    pub fn weight(&self) -> u64 {
        self.weight
    }

    /// When the head item was enqueued, if any.
    pub fn oldest_enqueued_at(&self) -> Option<Timestamp> {
        self.meta.front().map(|meta| meta.enqueued_at)
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
            offered: self.offered,
            accepted: self.accepted,
            max_depth: self.max_depth,
            depth: self.meta.len() as u64,
            bytes: self.weight,
            oldest_age: self
                .oldest_enqueued_at()
                .map(|at| now.saturating_duration_since(at))
                .unwrap_or_default(),
            ..self.stats
        }
    }

    /// How many lent items are not settled yet (delivered or not).
    pub(crate) fn lent(&self) -> usize {
        self.lent
    }

    /// Whether settling first could change what happens to the next item of
    /// `weight`: items are lent (some of them may be delivered already, unknown to the
    /// core until settled) and by the core's count, which still includes them, the
    /// item would not fit or would raise `max_depth`.
    #[inline]
    pub(crate) fn needs_settling(&self, weight: u64) -> bool {
        self.lent > 0 && (self.meta.len() as u64 >= self.max_depth || !self.fits(weight))
    }

    /// [`QueueCore::needs_settling`] for an item offered into `reservation` (which
    /// [`QueueCore::offer_reserved`] gives back first).
    #[inline]
    pub(crate) fn needs_settling_reserved(&self, weight: u64, reservation: &Reservation) -> bool {
        if self.lent == 0 {
            return false;
        }
        let fits = self.meta.len() + self.reserved_items - 1 < self.item_limit
            && fits_weight(
                self.weight,
                self.reserved_weight - reservation.weight,
                weight,
                &self.capacity,
            );
        self.meta.len() as u64 >= self.max_depth || !fits
    }

    /// Whether the queue may lend its items to a receiver ([`QueueCore::lend`]): only
    /// when no policy reaches queued items after they were queued (`DropOldest`
    /// evicts the head, `Expire` discards it at take, `Conflate` replaces items in
    /// place), since lent items are out of the core's reach.
    pub(crate) fn can_lend(&self) -> bool {
        !self.conflate
            && self.on_full.max_age().is_none()
            && self.on_full.fallback() != super::Fallback::DropOldest
    }

    /// Lends every queued item not lent yet to the receiver: swaps them into `into`
    /// (empty, so no item is copied; its allocation comes back for the next items)
    /// and returns how many. Lent items stay queued for the accounting (bounds,
    /// depth, weight, head age) until [`QueueCore::settle`] records them as
    /// delivered; the receiver delivers them in order.
    pub(crate) fn lend(&mut self, into: &mut VecDeque<Entry<T>>) -> usize {
        debug_assert!(into.is_empty() && self.can_lend());
        std::mem::swap(&mut self.items, into);
        let count = into.len();
        self.lent += count;
        count
    }

    /// Records the next `count` lent items as delivered, `max_wait` being the longest
    /// wait among them (or any earlier value: only the maximum is kept).
    pub(crate) fn settle(&mut self, count: usize, max_wait: Duration) {
        let count = count.min(self.lent);
        if count == 0 {
            return;
        }
        let mut freed = 0;
        for meta in self.meta.drain(..count) {
            freed += meta.weight;
        }
        self.weight -= freed;
        self.lent -= count;
        self.head_seq += count as u64;
        self.stats.delivered += count as u64;
        self.stats.max_queue_wait = self.stats.max_queue_wait.max(max_wait);
    }

    /// How many of the lent items must still be settled before at least `min_room`
    /// items fit by count and one item of `weight` fits by weight; `None` if settling
    /// every lent item would not be enough (more room then needs a take).
    pub(crate) fn lent_needed_for(&self, min_room: usize, weight: u64) -> Option<usize> {
        let mut needed = min_room.saturating_sub(self.room());
        if needed > self.lent {
            return None;
        }
        if self.weigh.is_none() {
            // Every item weighs 0: only the count matters.
            return Some(needed);
        }
        let mut freed: u64 = self.meta.iter().take(needed).map(|meta| meta.weight).sum();
        while !fits_weight(
            self.weight - freed,
            self.reserved_weight,
            weight,
            &self.capacity,
        ) {
            let meta = self.meta.get(needed).filter(|_| needed < self.lent)?;
            freed += meta.weight;
            needed += 1;
        }
        Some(needed)
    }

    /// Whether one more item of `weight` fits beside the queued and reserved ones.
    #[inline]
    fn fits(&self, weight: u64) -> bool {
        self.meta.len() + self.reserved_items < self.item_limit
            && fits_weight(self.weight, self.reserved_weight, weight, &self.capacity)
    }

    /// Whether an item of `weight` could fit if every queued item were evicted (only
    /// reservations are in the way otherwise).
    fn fits_after_evicting_all(&self, weight: u64) -> bool {
        self.reserved_items < self.item_limit
            && fits_weight(0, self.reserved_weight, weight, &self.capacity)
    }
}

/// How many slots to allocate up front for an item bound of `item_limit`.
pub(crate) fn preallocated_slots(item_limit: usize) -> usize {
    item_limit.min(MAX_PREALLOCATED_SLOTS)
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
            .field("len", &self.meta.len())
            .field("lent", &self.lent)
            .field("weight", &self.weight)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
