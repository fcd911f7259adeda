//! AIMD limiters: additive increase while latency stays on target, multiplicative
//! decrease above it or on an explicit overload signal.
//!
//! Seed 001's adaptive limiter: when the downstream's capacity moves (cache hit rate,
//! database load, a third party's limits), steer by its observed latency instead of a
//! fixed pause/resume. Two forms share one control law ([`AimdController`]):
//!
//! * [`AimdRate`] — a token bucket whose rate in permits per second is steered;
//!   [`RateLimiter`] is its async shell (`acquire().await` sleeps, FIFO).
//! * [`AimdConcurrency`] — a limit on operations in flight; [`ConcurrencyLimiter`] is
//!   its async shell (`acquire().await` waits FIFO for a slot and returns a
//!   [`Permit`]).
//!
//! Defaults ([`AimdConfig::rate`] / [`AimdConfig::concurrency`]):
//!
//! | parameter | rate form | concurrency form |
//! |---|---|---|
//! | `target_latency` | optional (`None`: overload signals only) | optional |
//! | `initial` | required | required |
//! | `min` | 20 /s | 1 |
//! | `max` | 50,000 /s | 1,000 |
//! | `increase` (per window) | +20 /s | +1 |
//! | `increase_per_round_trip` | — | `false` (`true`: `increase / limit` per operation finished while the limit was in full use) |
//! | `decrease_factor` | × 0.8 | × 0.8 |
//! | `window` | 1 s | 1 s |
//! | `quantile` | p99 | p99 |
//! | `burst` | 1 s of rate | — |
//!
//! Measure latency after the downstream call returns and exclude time spent queued
//! before it, or the limiter will steer by its own queue and talk itself down.

mod concurrency;
mod core;
mod error;
mod rate;
mod shell;

pub use self::concurrency::{AimdConcurrency, Token};
pub use self::core::{AimdConfig, AimdController};
pub use self::error::AimdConfigError;
pub use self::rate::AimdRate;
pub use self::shell::{ConcurrencyLimiter, Permit, RateLimiter};
