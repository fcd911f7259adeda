//! Ordered concurrent stage: up to N operations in flight, results released in
//! submission order.
//!
//! Seed 002's concurrency buffer: a slow stage (an object-store upload, a remote call)
//! caps throughput at `1 / latency` when run one at a time; Little's law says
//! `throughput × latency` must be in flight instead ([`littles_law_depth`]). Running
//! them concurrently loses the order, so results are restored to submission order by
//! sequence number before anything downstream sees them. The pieces that make it safe:
//!
//! * a bounded reorder buffer: completions held back behind a slow earlier operation
//!   count against `max_held` (hard) and `max_held_bytes`, and admission stops at
//!   either bound — backpressure at the stage's input, never unbounded memory;
//! * a per-attempt timeout and capped exponential retries, so one stuck operation
//!   cannot hold the buffer for ever; the final failure is released in order, as an
//!   error in its place.
//!
//! [`OrderedCore`] is the sans-IO core; [`OrderedStage`] runs operations on tokio.

mod config;
mod core;
mod error;
mod shell;

pub use self::config::{OrderedConfig, RetryPolicy, littles_law_depth};
pub use self::core::{Attempt, Completion, OrderedCore};
pub use self::error::{OrderedConfigError, OrderedError, SubmitError};
pub use self::shell::{OrderedStage, StageCounts, StageView};
