//! Errors of the ordered concurrent stage.

use thiserror::Error;

/// An operation's final failure, released in submission order in place of its result.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum OrderedError<E> {
    /// The last attempt failed with `error`.
    #[error("the operation failed after {attempts} attempt(s): {error}")]
    Failed {
        /// The last attempt's error.
        error: E,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The last attempt timed out.
    #[error(
        "the operation timed out on all {attempts} attempt(s); raise attempt_timeout or \
         max_attempts, or look at the downstream's latency"
    )]
    TimedOut {
        /// How many attempts were made.
        attempts: u32,
    },
    /// The attempt ended without an outcome (its task panicked); not retried.
    #[error(
        "attempt {attempts} of the operation ended without an outcome (it panicked); \
         the operation was given up, fix the operation"
    )]
    Abandoned {
        /// How many attempts were made.
        attempts: u32,
    },
}

/// The stage refused a submission; the input is handed back.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SubmitError<I> {
    /// The stage is at a bound (in flight, held back count or bytes): wait and retry,
    /// or use the waiting `submit`.
    #[error(
        "the stage is full (in-flight or held-back bound reached); wait for results to be taken"
    )]
    Full(I),
    /// The stage was closed; nothing more is accepted.
    #[error("the stage is closed; expected an open stage, stop submitting")]
    Closed(I),
}

impl<I> SubmitError<I> {
    /// The input that was not submitted.
    pub fn into_inner(self) -> I {
        match self {
            SubmitError::Full(input) | SubmitError::Closed(input) => input,
        }
    }
}

/// An [`OrderedConfig`](super::OrderedConfig) is inconsistent.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum OrderedConfigError {
    /// `max_held` is below `max_in_flight`, so the concurrency could never be reached.
    #[error(
        "max_held ({max_held}) must be at least max_in_flight ({max_in_flight}): every \
         admitted operation reserves a place for its result; raise max_held"
    )]
    HeldBelowInFlight {
        /// The configured held-back bound.
        max_held: usize,
        /// The configured concurrency.
        max_in_flight: usize,
    },
    /// `max_held_bytes` is zero: nothing could ever be admitted.
    #[error("max_held_bytes must be > 0")]
    ZeroHeldBytes,
    /// The retry policy is inconsistent.
    #[error(
        "retry: expected multiplier >= 1 and initial_backoff <= max_backoff, got multiplier {multiplier}"
    )]
    Retry {
        /// The configured multiplier.
        multiplier: f64,
    },
    /// `attempt_timeout` is zero.
    #[error("attempt_timeout must be > 0 (or None for no timeout)")]
    ZeroTimeout,
}
