//! [`Chain`]: ordered appends with several batches in flight.
//!
//! [`Wal::append`] answers a batch after the fsync that covers it; an appender that
//! must keep its records in order (a source whose sinks need per-key order) can then
//! only hand over the next batch once the previous one is durable, and the disk idles
//! between the two. Through a chain it hands batch k+1 to the writer while batch k is
//! still being written or fsynced: the writer takes batches in the order they were
//! handed over, so the log holds them in that order, and the group commit makes them
//! durable together.
//!
//! The one way order could still break is a refusal: under `on_full = "reject"` batch
//! k may not fit the budget while a smaller batch k+1 behind it does. So once the
//! writer refuses a batch of a chain, it refuses every later batch of the chain
//! already handed over ([`AppendError::Behind`], batch handed back), until the
//! appender, having taken back everything it had in flight, calls
//! [`Chain::restart`] and resubmits them in their order.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::batch::Batch;
use crate::error::AppendError;
use crate::inbox::{ChainState, Link};
use crate::wal::{Queued, Submitted, Wal};

/// An ordered appender on a [`Wal`]: see the [module docs](self).
#[derive(Debug)]
pub struct Chain {
    wal: Wal,
    state: Arc<ChainState>,
    epoch: u64,
}

/// A batch handed to a chain: [`durable`](Pending::durable) waits for its answer.
#[derive(Debug)]
#[must_use = "a batch is acknowledged only once `durable` returns Ok"]
pub struct Pending(Inner);

#[derive(Debug)]
enum Inner {
    Done(std::ops::Range<u64>),
    Queued(Queued),
}

impl Pending {
    /// The batch's offsets once it is durable.
    ///
    /// # Errors
    ///
    /// [`AppendError`], as [`Wal::append`], and [`AppendError::Behind`] when an
    /// earlier batch of the chain was refused.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future does not withdraw the batch: it may still become durable,
    /// so treat it as not stored.
    pub async fn durable(self) -> Result<std::ops::Range<u64>, AppendError> {
        match self.0 {
            Inner::Done(range) => Ok(range),
            Inner::Queued(queued) => queued.durable().await,
        }
    }
}

impl Wal {
    /// An ordered appender on this log (see [`Chain`]).
    pub fn chain(&self) -> Chain {
        Chain {
            wal: self.clone(),
            state: Arc::default(),
            epoch: 0,
        }
    }
}

impl Chain {
    /// Waits (FIFO) for pending room and hands the batch to the writer; returns as soon
    /// as it is queued there, before it is written. Batches submitted one after the
    /// other through a chain (each `submit` awaited before the next) are written in
    /// that order, or refused: see the [module docs](self).
    ///
    /// # Errors
    ///
    /// What [`Wal::append`] refuses before the writer has the batch ([`AppendError::Busy`],
    /// [`AppendError::TooLarge`], [`AppendError::Closed`], [`AppendError::Poisoned`]):
    /// the batch was not queued, and nothing submitted after it may be either until
    /// it is.
    ///
    /// # Cancel safety
    ///
    /// Cancelling while waiting for pending room drops the batch unqueued; the next
    /// submission then goes ahead of it.
    pub async fn submit(&self, batch: Batch) -> Result<Pending, AppendError> {
        let link = Link {
            state: Arc::clone(&self.state),
            epoch: self.epoch,
        };
        Ok(Pending(match self.wal.submit(batch, Some(link)).await? {
            Submitted::Done(range) => Inner::Done(range),
            Submitted::Queued(queued) => Inner::Queued(queued),
        }))
    }

    /// Starts a new epoch after a refusal: batches submitted from now on are written
    /// again. Call it only once every batch submitted before has been answered (the
    /// refused one and those [`Behind`](AppendError::Behind) it), then resubmit them
    /// first, in their order.
    pub fn restart(&mut self) {
        self.epoch = self
            .epoch
            .max(self.state.refused_below.load(Ordering::Acquire));
    }

    /// The log this chain appends to.
    pub fn wal(&self) -> &Wal {
        &self.wal
    }
}

#[cfg(test)]
#[path = "chain_tests.rs"]
mod tests;
