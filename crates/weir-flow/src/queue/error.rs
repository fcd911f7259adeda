//! Errors of the async queue. Each hands the refused item back.

use std::fmt;

use super::Evicted;

/// What a successful send did to the queue.
///
/// Under `Block`, `Reject` and `DropNewest` a successful send is always
/// [`Sent::Queued`]; the other variants hand back items that left the queue to make
/// room for this one.
pub enum Sent<T> {
    /// Appended at the tail.
    Queued,
    /// Appended after evicting these items from the head (`DropOldest`).
    Evicted(Evicted<T>),
    /// Replaced the queued item of the same key in place (`Conflate`).
    Superseded {
        /// The replaced item.
        old: T,
        /// Items evicted from the head to make weight room, usually none.
        evicted: Evicted<T>,
    },
}

impl<T> fmt::Debug for Sent<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sent::Queued => f.write_str("Queued"),
            Sent::Evicted(evicted) => write!(f, "Evicted({} items)", evicted.len()),
            Sent::Superseded { evicted, .. } => {
                write!(f, "Superseded {{ evicted: {} items, .. }}", evicted.len())
            }
        }
    }
}

/// Why a send did not queue its item. The item is handed back in every variant.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum SendError<T> {
    /// The queue is closed (`close()` was called or the receiver is gone).
    #[error(
        "queue closed: expected an open queue, found it closed (close() was called or the \
         receiver was dropped); the item is handed back, stop sending"
    )]
    Closed(T),
    /// The queue is full and its policy is `Reject`; counted as `rejected`.
    #[error(
        "queue full: expected room, found the queue at its bound under the Reject policy; \
         the item is handed back: retry later, shed it, or raise the capacity"
    )]
    Full(T),
    /// The queue is full and its policy is `DropNewest`; counted as `dropped_newest`.
    #[error(
        "queue full: expected room, found the queue at its bound under the DropNewest \
         policy; the item was dropped (counted) and is handed back"
    )]
    DroppedNewest(T),
    /// The item weighs more than the whole weight capacity, so it can never fit;
    /// counted as `rejected`.
    #[error(
        "item too heavy: expected at most the queue's weight capacity, found an item \
         heavier than all of it; split the item or raise the capacity"
    )]
    TooHeavy(T),
    /// No room came before the timeout; counted as offered and `rejected`.
    #[error(
        "send timed out: expected room within the timeout, found the queue still full; \
         the item is handed back (counted as rejected): retry later or shed it"
    )]
    Timeout(T),
    /// `try_send` under `Block` with a full queue (or senders already waiting); not
    /// counted: retry later or use `send`.
    #[error(
        "queue full: expected room, found the queue full (or senders waiting) under the \
         Block policy; the item is handed back uncounted: await send() instead"
    )]
    WouldBlock(T),
}

impl<T> SendError<T> {
    /// The item that was not queued.
    pub fn into_inner(self) -> T {
        match self {
            SendError::Closed(item)
            | SendError::Full(item)
            | SendError::DroppedNewest(item)
            | SendError::TooHeavy(item)
            | SendError::Timeout(item)
            | SendError::WouldBlock(item) => item,
        }
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            SendError::Closed(_) => "Closed",
            SendError::Full(_) => "Full",
            SendError::DroppedNewest(_) => "DroppedNewest",
            SendError::TooHeavy(_) => "TooHeavy",
            SendError::Timeout(_) => "Timeout",
            SendError::WouldBlock(_) => "WouldBlock",
        };
        write!(f, "{name}(..)")
    }
}

/// Why a reservation was not granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReserveError {
    /// The queue is closed.
    #[error(
        "queue closed: expected an open queue to reserve room in, found it closed; stop \
         sending"
    )]
    Closed,
    /// The requested weight is more than the whole weight capacity.
    #[error(
        "reservation too heavy: expected at most the queue's weight capacity, found a \
         larger request; split the item or raise the capacity"
    )]
    TooHeavy,
    /// No room came before the timeout (not counted: nothing was offered).
    #[error("reservation timed out: expected room within the timeout, found the queue still full")]
    Timeout,
    /// `try_reserve` found no room now.
    #[error("queue full: expected room to reserve now, found none; await reserve() instead")]
    Full,
}

/// Why [`Receiver::try_recv`](super::Receiver::try_recv) returned nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TryRecvError {
    /// Nothing is queued now, but senders remain.
    #[error("queue empty: expected an item, found none yet; await recv() to wait for one")]
    Empty,
    /// Nothing is queued and nothing more will come.
    #[error("queue closed and drained: no item will arrive any more")]
    Closed,
}
