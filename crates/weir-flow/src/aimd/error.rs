//! Errors of the AIMD limiters.

use thiserror::Error;

/// An [`AimdConfig`](super::AimdConfig) is inconsistent.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum AimdConfigError {
    /// `target_latency` is zero: every observation would count as over target.
    #[error("target_latency must be > 0; a good start is half the downstream's latency SLO")]
    ZeroTargetLatency,
    /// `window` is zero.
    #[error("window must be > 0; the default is one second")]
    ZeroWindow,
    /// `min` is not above zero, or is above `max`.
    #[error("expected 0 < min <= max, got min {min} and max {max}; raise max or lower min")]
    Bounds {
        /// The configured minimum.
        min: f64,
        /// The configured maximum.
        max: f64,
    },
    /// `initial` is outside `min..=max`.
    #[error("initial ({initial}) must lie within min ({min}) ..= max ({max})")]
    InitialOutOfBounds {
        /// The configured starting value.
        initial: f64,
        /// The configured minimum.
        min: f64,
        /// The configured maximum.
        max: f64,
    },
    /// `decrease_factor` is not strictly between 0 and 1.
    #[error("decrease_factor must be > 0 and < 1, got {0}; 0.8 cuts by 20% per decrease")]
    DecreaseFactor(f64),
    /// `increase` is negative or not finite.
    #[error("increase must be a finite number >= 0, got {0}")]
    Increase(f64),
    /// `quantile` is not strictly between 0 and 1.
    #[error("quantile must be > 0 and < 1, got {0}; 0.99 steers by the p99")]
    Quantile(f64),
    /// `burst` is zero: the bucket could never hold a token.
    #[error("burst must be > 0; the default is one second of the current rate")]
    ZeroBurst,
}
