//! Watermark controller: high/low hysteresis that turns a depth into `Pause` and
//! `Resume` transitions.
//!
//! This is the Kafka consumer's pause/resume pattern of seed 001: pause fetching when
//! the hand-off queue reaches the high watermark (1600 there), resume when it has
//! drained to the low one (400), keep polling meanwhile. The band between the two
//! stops the flapping a single threshold would cause. [`Watermark`] is the sans-IO
//! core; [`WatermarkGate`] shares one between a consumer and a producer that waits.

mod core;
mod error;
mod shell;

pub use self::core::{Transition, Watermark};
pub use self::error::WatermarkError;
pub use self::shell::WatermarkGate;
