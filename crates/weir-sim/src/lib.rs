//! Deterministic discrete-event simulator for weir's flow-control primitives: the engine
//! behind `weir lab`.
//!
//! The simulator drives the **real `weir-flow` cores** — [`weir_flow::queue::QueueCore`],
//! [`weir_flow::credit::DemandCore`] with [`weir_flow::credit::WindowedDemand`] and
//! [`weir_flow::credit::AdaptiveWindow`] — on a virtual clock. It re-implements no
//! policy: a strategy ([`Strategy`]) is a thin [`Lane`] that offers, takes and requests
//! on a core and reads the core's [`FlowStats`](weir_flow::FlowStats). What the lab
//! shows is what production code does.
//!
//! # Experiments
//!
//! | module | `weir lab …` | seed | cores driven |
//! |---|---|---|---|
//! | [`lesson`] | `lesson` (the default) | 000 | `QueueCore`, `DemandCore`, `WindowedDemand`, `AdaptiveWindow` |
//! | [`kafka`] | `kafka` | 001 | `QueueCore` (`Block`), `Watermark`, `AimdRate` |
//! | [`littles_law`] | `littles-law` | 002 | `OrderedCore`, `littles_law_depth` |
//! | [`scenario`] | `run FILE.toml` | — | as the lesson |
//!
//! The lesson and scenario files run on the millisecond engine ([`run`]); the Kafka
//! and Little's-law experiments need finer time (1,000 µs per record) and use small
//! event-driven loops on nanosecond [`Timestamp`](weir_flow::Timestamp)s that keep the
//! same ordering rule: within one instant the producer side acts before the consumer
//! side.
//!
//! # Determinism
//!
//! Nothing reads a real clock or an unseeded source of randomness. Time is a
//! [`VirtualClock`] in whole milliseconds; randomness (Poisson arrivals, heavy-tailed
//! latencies) comes from [`SimRng`], a SplitMix64 generator with a fixed algorithm, so
//! the same command prints the same bytes on every machine.
//!
//! # Event-ordering rules
//!
//! These rules reproduce the lesson's Java lab (seed 000) number for number. They are
//! the engine's rules for every strategy, not special cases per row:
//!
//! 1. **Time moves in whole milliseconds.** Within a millisecond the **producer acts
//!    first** (an arrival, an offer, a retried blocked put, a credit-paced emission),
//!    **then the consumer**: first a completion, then the next pick. An idle consumer
//!    takes a message the moment it is queued, in the same millisecond. (The engine
//!    skips milliseconds in which nothing can happen — no arrival, no completion, no
//!    producer waiting to retry — which changes no result.)
//! 2. **Arrivals.** Message 0 is due at t=0; message `i + 1` is due one arrival gap
//!    after message `i` *left the producer* (accepted, refused or sent). A producer that
//!    had to wait therefore shifts the rest of its schedule; it never catches up in a
//!    burst.
//! 3. **Depth counts waiting messages only**, not the one in service. `maxDepth` is read
//!    by the core right after each enqueue, before the consumer's pick in the same
//!    millisecond (so a healthy consumer still shows a depth of 1). Capacities bound
//!    waiting messages too.
//! 4. **A service's duration is fixed when it starts**, by the service schedule at that
//!    millisecond ([`ServiceSchedule::service_ms`]): in the lesson 20 ms if it starts in
//!    t=2000..=5999, else 5 ms.
//! 5. **Queue wait** is pick time − the time the message entered the queue. Expired
//!    messages do not count towards `maxQueueWait`.
//! 6. **Drop if too old** ([`Strategy::Expire`]): at each pick, head messages whose age
//!    is *strictly* greater than the deadline are discarded (a message exactly at the
//!    deadline is served).
//! 7. **Bounded, block** ([`Strategy::Block`]): the core answers `WouldBlock`, the
//!    producer keeps the message and retries at the start of every millisecond. Room
//!    freed by a pick at `q` is therefore used at `q + 1` (the producer moved before the
//!    consumer within `q`). `producerWait` sums `entry − due`.
//! 8. **Credit** ([`Strategy::Credit`]): the subscriber requests its window at t=0; on
//!    each completion it requests one more *before* taking its next message. The
//!    publisher ([`PacedPublisher`]) emits inside `request` when its next item is ready,
//!    and on each millisecond's producer turn. Item `i + 1` is ready one gap after item
//!    `i` was sent; `producerWait` sums `sent − ready`. Depth is the subscriber's buffer.
//! 9. **Latest per key** ([`Strategy::LatestPerKey`]): a replacing message keeps its
//!    key's slot (its position in the queue) and takes the new message's enqueue time.
//! 10. **`finished`** is the millisecond of the last completion.
//!
//! # Time series
//!
//! A [`Series`] folds every millisecond into buckets of [`DEFAULT_BUCKET_MS`] (10 ms, one
//! lesson message interval): the most messages waiting, the greatest age of the oldest
//! waiting message, completions, and messages lost (rejected, dropped, expired or
//! superseded) in the bucket. [`chart`] draws them as SVG.
//!
//! # Examples
//!
//! The lesson's "bounded, reject" row:
//!
//! ```
//! use weir_sim::{Strategy, lesson, run};
//!
//! let strategy = Strategy::Reject { capacity: std::num::NonZeroU64::new(50).unwrap() };
//! let mut lane = strategy.lane("bounded, reject");
//! let outcome = run(&lesson::workload(true), lane.as_mut(), &mut (), 1_000_000).unwrap();
//! assert_eq!((outcome.completed, outcome.rejected, outcome.max_depth), (450, 150, 50));
//! assert_eq!((outcome.max_queue_wait_ms, outcome.finished_ms), (990, 6_250));
//! ```
#![warn(missing_docs)]

pub mod chart;
mod clock;
mod engine;
mod error;
pub mod kafka;
mod lanes;
pub mod lesson;
pub mod littles_law;
mod paced;
mod report;
mod rng;
pub mod scenario;
mod series;
mod strategy;
mod workload;

pub use clock::VirtualClock;
pub use engine::{Lane, Observer, Outcome, Producer, Step, run};
pub use error::SimError;
pub use paced::{PacedPublisher, Subscriber};
pub use report::{TABLE_HEADER, TABLE_RULE, format_row, format_table};
pub use rng::SimRng;
pub use series::{Bucket, DEFAULT_BUCKET_MS, Series};
pub use strategy::Strategy;
pub use workload::{ArrivalGaps, Arrivals, ServicePeriod, ServiceSchedule, Workload};
