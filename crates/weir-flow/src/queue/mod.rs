//! A bounded queue with a named, counted answer for the item that does not fit.
//!
//! The queue is bounded by item count, by total weight (e.g. payload bytes, from a
//! weight function), or both ([`Capacity`]). When it is full, its [`OnFull`] policy
//! decides:
//!
//! | policy | the incoming item | counted as |
//! |---|---|---|
//! | [`OnFull::Block`] | waits for room (async senders FIFO) | — until its fate is decided |
//! | [`OnFull::Reject`] | handed back | `rejected` |
//! | [`OnFull::DropNewest`] | dropped and handed back | `dropped_newest` |
//! | [`OnFull::DropOldest`] | accepted; the head is evicted and handed back | `dropped_oldest` |
//! | [`OnFull::Expire`] | its fallback applies; stale heads are discarded at take | `expired` |
//! | [`OnFull::Conflate`] | replaces its key's item in place, else its fallback | `superseded` |
//!
//! An item heavier than the whole weight capacity is refused at once
//! ([`Offer::TooHeavy`]), never left waiting.
//!
//! # Layers
//!
//! - [`QueueCore`] is the sans-IO core: a synchronous state machine that takes
//!   `now: Timestamp` and reads no clock. The simulator drives it on a virtual clock.
//!   Its outcomes are plain enums ([`Offer`], [`Taken`], [`Popped`]).
//! - [`channel`] is the thin tokio shell: the core behind a `Mutex`, a [`Sender`]
//!   (clone it for more producers) and a [`Receiver`]. Under `Block`, [`Sender::send`]
//!   waits for room, FIFO among senders, cancel-safe; [`Sender::send_timeout`] gives
//!   up after a timeout; [`Sender::reserve`] holds room in a [`Permit`]. Other
//!   policies answer at once and hand refused or evicted items back ([`SendError`],
//!   [`Sent`]). [`Receiver::recv`] takes one item, [`Receiver::recv_many`] a batch
//!   under one clock reading. Under `Block`, `Reject` and `DropNewest` the receiver
//!   borrows every queued item in one swap under the lock and serves them without it,
//!   while the core keeps counting them as queued until they are delivered, so bounds
//!   and stats stay exact (see the crate README).
//!
//! Every item is stamped with its enqueue time (one clock reading per send) so the
//! queue can report the age of its oldest item and the longest wait, and apply
//! `Expire`. Multi-producer, single-consumer.
//!
//! # Stats
//!
//! Every queue keeps [`FlowStats`](crate::FlowStats); conservation
//! (`offered = delivered + rejected + dropped + expired + superseded + depth`) holds
//! after every call. See [`QueueCore`] for when an item is counted.
//!
//! # Examples
//!
//! A lab-style run on a virtual clock: a queue of 2 that discards items older than
//! 500 ms when the consumer takes.
//!
//! ```
//! use std::time::Duration;
//! use weir_flow::Timestamp;
//! use weir_flow::queue::{Capacity, Fallback, Offer, OnFull, QueueConfig, QueueCore};
//!
//! let policy = OnFull::Expire { max_age: Duration::from_millis(500), when_full: Fallback::Reject };
//! let mut queue = QueueCore::new(QueueConfig::new(Capacity::items(2), policy));
//! let t = Timestamp::from_millis;
//! assert!(queue.offer("old", t(0)).is_accepted());
//! assert!(queue.offer("fresh", t(400)).is_accepted());
//! assert!(matches!(queue.offer("late", t(450)), Offer::Rejected("late")));
//!
//! let mut expired = Vec::new();
//! let taken = queue.take_with(t(501), |item, _enqueued_at| expired.push(item));
//! assert_eq!(taken.map(|t| t.item), Some("fresh"));
//! assert_eq!(expired, ["old"]);
//! assert!(queue.stats(t(501)).is_conserved());
//! ```

mod config;
mod core;
mod error;
mod outcome;
mod receiver;
mod shared;
mod shell;

pub use self::config::{Capacity, Fallback, OnFull, QueueConfig};
pub use self::core::QueueCore;
pub use self::error::{ReserveError, SendError, Sent, TryRecvError};
pub use self::outcome::{Evicted, Offer, Popped, Reservation, ReserveRefused, Taken};
pub use self::receiver::Receiver;
pub use self::shell::{Permit, Sender, channel, channel_with_clock};
