//! Errors of the credit channel.

use thiserror::Error;

/// Why a `request(n)` ended the stream (Reactive Streams rule 3.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RequestError {
    /// `request(n)` was called with `n = 0`; the specification requires `n > 0`.
    #[error(
        "request(n) needs n > 0, got {0}; the stream is now terminated with this error \
         (Reactive Streams rule 3.9): request at least one item"
    )]
    NonPositive(u64),
}

/// Why a [`CreditSender`](super::CreditSender) could not send an item. The item is
/// handed back.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SendError<T> {
    /// The receiver cancelled the subscription (or was dropped); nothing more may be sent.
    #[error("the receiver cancelled the stream; expected an active stream, stop sending")]
    Cancelled(T),
    /// The stream already ended (completed, failed, or errored by `request(0)`).
    #[error(
        "the stream already ended; expected an active stream, nothing may follow a terminal signal"
    )]
    Terminated(T),
}

impl<T> SendError<T> {
    /// The item that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            SendError::Cancelled(item) | SendError::Terminated(item) => item,
        }
    }
}

/// Why [`CreditSender::try_send`](super::CreditSender::try_send) refused an item. The
/// item is handed back.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TrySendError<T> {
    /// There is no outstanding demand (or the receiver's buffer is at its capacity):
    /// wait for the receiver to `request` more, e.g. with
    /// [`CreditSender::ready`](super::CreditSender::ready).
    #[error(
        "no outstanding demand; expected the receiver to have requested items, wait for demand"
    )]
    NoDemand(T),
    /// The receiver cancelled the subscription (or was dropped).
    #[error("the receiver cancelled the stream; expected an active stream, stop sending")]
    Cancelled(T),
    /// The stream already ended.
    #[error(
        "the stream already ended; expected an active stream, nothing may follow a terminal signal"
    )]
    Terminated(T),
}

impl<T> TrySendError<T> {
    /// The item that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::NoDemand(item)
            | TrySendError::Cancelled(item)
            | TrySendError::Terminated(item) => item,
        }
    }
}

/// Why [`CreditReceiver::recv`](super::CreditReceiver::recv) returned no item: the
/// stream's end, after every item sent before it was received.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RecvError {
    /// The sender completed the stream (`onComplete`).
    #[error("the stream completed; no more items will arrive")]
    Completed,
    /// The sender failed the stream (`onError`) with this reason.
    #[error("the sender failed the stream: {reason}")]
    Failed {
        /// What the sender said went wrong.
        reason: String,
    },
    /// The receiver called `request(0)`, which ends the stream with an error.
    #[error("{0}")]
    InvalidRequest(RequestError),
    /// The receiver cancelled the stream.
    #[error("the stream was cancelled by this receiver; no more items will arrive")]
    Cancelled,
    /// The sender was dropped without completing or failing the stream.
    #[error(
        "the sender was dropped without completing the stream; expected complete() or fail(), \
         treat the stream as failed"
    )]
    Disconnected,
}

/// Why [`CreditReceiver::try_recv`](super::CreditReceiver::try_recv) returned no item.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TryRecvError {
    /// Nothing is buffered yet, but the stream is still open: try again later, or
    /// `request` more if no demand is outstanding.
    #[error("no item is buffered yet; the stream is still open, try again or request more")]
    Empty,
    /// The stream has ended.
    #[error(transparent)]
    Ended(RecvError),
}

/// The configuration of an [`AdaptiveWindow`](super::AdaptiveWindow) is inconsistent.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum WindowConfigError {
    /// `min_window` is larger than `max_window`.
    #[error(
        "min_window ({min}) must be at most max_window ({max}); lower min_window or raise max_window"
    )]
    MinAboveMax {
        /// The configured minimum.
        min: u64,
        /// The configured maximum.
        max: u64,
    },
    /// `min_window` is zero, which would stall the stream for good.
    #[error("min_window must be at least 1, got 0; a zero window never requests anything")]
    ZeroMinWindow,
    /// `decrease_factor` is not strictly between 0 and 1.
    #[error("decrease_factor must be > 0 and < 1, got {0}; 0.5 halves the window on each shrink")]
    DecreaseFactor(f64),
    /// `target_age` is zero.
    #[error("target_age must be > 0; choose the oldest-item age you are willing to tolerate")]
    ZeroTargetAge,
}

/// The stream can take no more items: returned by
/// [`CreditSender::ready`](super::CreditSender::ready).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Closed {
    /// The receiver cancelled the subscription (or was dropped).
    #[error("the receiver cancelled the stream; expected an active stream, stop sending")]
    Cancelled,
    /// The stream already ended.
    #[error(
        "the stream already ended; expected an active stream, nothing may follow a terminal signal"
    )]
    Terminated,
}
