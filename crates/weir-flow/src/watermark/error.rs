//! Errors of the watermark controller.

use thiserror::Error;

/// The watermarks are inconsistent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum WatermarkError {
    /// `low` is not below `high`, so there is no hysteresis band.
    #[error(
        "the low watermark ({low}) must be below the high watermark ({high}); \
         choose low < high, e.g. high 1600 and low 400"
    )]
    LowNotBelowHigh {
        /// The configured low watermark.
        low: u64,
        /// The configured high watermark.
        high: u64,
    },
}
