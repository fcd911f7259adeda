//! Flow-control primitives for weir.
//!
//! Every place where a faster side can outrun a slower one needs a bound and a named,
//! counted answer: wait, refuse, drop, or never produce. This crate holds the
//! primitives that give those answers:
//!
//! | module | answer | primitive |
//! |---|---|---|
//! | [`queue`] | buffer (bounded), shed | bounded queue with an [`queue::OnFull`] policy |
//! | [`credit`] | never produced | credit channel with Reactive Streams demand rules |
//! | [`semaphore`] | the producer waits | async FIFO semaphore / memory limiter |
//! | [`watermark`] | pause / resume | high/low hysteresis controller |
//! | [`aimd`] | adapt | AIMD rate and concurrency limiters |
//! | [`ordered`] | concurrency, order kept | ordered concurrent stage |
//!
//! Each primitive is a **sans-IO core** — a synchronous state machine that takes the
//! current [`Timestamp`] as an argument and touches no clock, thread or socket — plus a
//! thin async shell on tokio. The simulator (`weir-sim`) drives the same cores on a
//! virtual clock, so what `weir lab` shows is what production code does.
//!
//! Every primitive reports [`FlowStats`], and the conservation law
//! `offered = delivered + rejected + dropped + expired + superseded + queued` holds at
//! every instant.
#![warn(missing_docs)]

pub mod aimd;
pub mod credit;
pub mod ordered;
pub mod queue;
pub mod semaphore;
mod stats;
mod sync;
mod time;
pub mod watermark;

pub use stats::FlowStats;
pub use time::{Clock, Timestamp};
