//! Credit channel: items flow only against demand the consumer granted.
//!
//! This is the "never produced" answer to a speed mismatch: the consumer says how
//! much it can take (`request(n)`) and the producer sends no more. It follows the
//! demand rules of Reactive Streams 1.0.4:
//!
//! | rule | what it says | where |
//! |---|---|---|
//! | 1.1 | never more items than requested | [`DemandCore::try_claim`] |
//! | 1.7 | nothing after a terminal signal | [`DemandCore::complete`], [`DemandCore::fail`] |
//! | 3.3 | a request from inside `onNext` does not recurse | [`DemandCore::drain`], [`DemandCore::begin_drain`] |
//! | 3.6 | a request after cancel is a no-op | [`DemandCore::cancel`] |
//! | 3.9 | `request(0)` ends the stream with an error | [`RequestOutcome::Errored`] |
//! | 3.17 | demand saturates at `u64::MAX`, which means unbounded | [`UNBOUNDED`] |
//!
//! The pieces:
//!
//! * [`DemandCore`] — the sans-IO state machine; a single-threaded publisher (and the
//!   simulator) is a thin loop over it.
//! * [`WindowedDemand`] — the subscriber's "window up front, one more per finished
//!   item" pattern; [`AdaptiveWindow`] steers that window by the age of the oldest
//!   unfinished item.
//! * [`channel`] — an async channel: [`CreditSender::send`] waits for demand,
//!   [`CreditReceiver`] requests, cancels and receives. The receiver's buffer holds no
//!   more than the demand it granted (and never more than the channel's capacity).

mod core;
mod error;
mod shell;
mod window;

pub use self::core::{DemandCore, IgnoreReason, RequestOutcome, StreamState, UNBOUNDED};
pub use self::error::{
    Closed, RecvError, RequestError, SendError, TryRecvError, TrySendError, WindowConfigError,
};
pub use self::shell::{CreditReceiver, CreditSender, channel};
pub use self::window::{AdaptiveWindow, AdaptiveWindowConfig, WindowedDemand};
