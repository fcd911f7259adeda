//! Deterministic discrete-event simulator for weir's flow-control primitives.
//!
//! It drives the real `weir-flow` cores on a virtual clock in integer milliseconds and
//! reproduces the experiments of the seed documents (`weir lab`).
#![warn(missing_docs)]

pub mod chart;
mod clock;
mod engine;
mod error;
mod lanes;
pub mod lesson;
mod report;
mod rng;
mod series;
mod strategy;
mod workload;

pub use clock::VirtualClock;
pub use engine::{Lane, Observer, Outcome, Producer, Step, run};
pub use error::SimError;
pub use report::{TABLE_HEADER, TABLE_RULE, format_row, format_table};
pub use rng::SimRng;
pub use series::{Bucket, DEFAULT_BUCKET_MS, Series};
pub use strategy::Strategy;
pub use workload::{ArrivalGaps, Arrivals, ServicePeriod, ServiceSchedule, Workload};
