//! Ordered appends with several units in flight, for a source that acknowledges what
//! it made durable (MQTT's PUBACKs in arrival order, a file's saved position, NATS's
//! acks, Kafka's committed offsets).
//!
//! With one unit in flight a source waits for unit k's fsync before it appends unit
//! k+1, and receiving, appending and fsyncing take turns. [`OrderedAppends`] submits
//! unit k+1 while unit k is still being written or fsynced, through one
//! [`weir_wal::Chain`], so that:
//!
//! - the WAL holds the units' records in the order they were submitted (per-key order
//!   for the sinks), and the WAL's group commit makes several units durable with one
//!   fsync;
//! - units are reported durable in submission order ([`Event::Durable`]), so the
//!   caller's acks go out in order, each only after its unit is durable;
//! - what is in flight is bounded: at most [`InFlight::units`] units and about
//!   [`InFlight::bytes`] encoded bytes (one unit is always allowed, whatever its size);
//! - a refusal (`on_full = "reject"`) never reorders: the chain refuses everything
//!   behind the refused batch, this module takes every refused batch back in order,
//!   and after [`OrderedAppends::resubmit`] they go again, first, in their order.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesOrdered;
use weir_wal::{AppendError, Batch, Chain};

use super::ingest::{Appending, Ingest};

/// How long to wait before resubmitting after a refusal, or before retrying a
/// submission the WAL was too busy to queue.
pub const REFUSED_RETRY: Duration = Duration::from_millis(200);

/// The bound on what is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlight {
    /// Units submitted and not yet reported.
    pub units: usize,
    /// Their encoded bytes (the batches are held until answered).
    pub bytes: u64,
}

/// What became of the oldest unit in flight.
#[derive(Debug)]
pub enum Event<T> {
    /// Every batch of the unit is durable: the caller may acknowledge it.
    Durable(T),
    /// A batch was refused and every unit in flight has been taken back: wait and call
    /// [`OrderedAppends::resubmit`] (or [`give_up`](OrderedAppends::give_up)).
    Refused,
    /// The WAL failed (closed, poisoned, or in doubt): nothing more becomes durable
    /// through it.
    Failed(T, String),
}

/// See the [module docs](self).
pub struct OrderedAppends<T> {
    ingest: Ingest,
    chain: Chain,
    limit: InFlight,
    /// Encoded bytes submitted and not yet reported, refused ones included.
    bytes: u64,
    in_flight: FuturesOrdered<BoxFuture<'static, Outcome<T>>>,
    /// Units taken back after a refusal, in submission order, to go again first.
    refused: VecDeque<Unit<T>>,
}

impl<T> std::fmt::Debug for OrderedAppends<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrderedAppends")
            .field("in_flight", &self.in_flight.len())
            .field("bytes", &self.bytes)
            .field("refused", &self.refused.len())
            .finish_non_exhaustive()
    }
}

/// A unit: its tag and, while refused, the batches still to write.
struct Unit<T> {
    tag: T,
    batches: Vec<Batch>,
    bytes: u64,
}

/// A unit's batches as answered, in order.
struct Outcome<T> {
    tag: T,
    bytes: u64,
    results: Vec<Result<Range<u64>, AppendError>>,
}

impl<T: Send + 'static> OrderedAppends<T> {
    /// Ordered appends for the source behind `ingest`.
    pub fn new(ingest: Ingest, limit: InFlight) -> Self {
        OrderedAppends {
            chain: ingest.chain(),
            ingest,
            limit: InFlight {
                units: limit.units.max(1),
                bytes: limit.bytes,
            },
            bytes: 0,
            in_flight: FuturesOrdered::new(),
            refused: VecDeque::new(),
        }
    }

    /// Whether another unit may be submitted now: nothing is waiting to be resubmitted,
    /// and the bound has room (one unit is always allowed).
    pub fn has_room(&self) -> bool {
        self.refused.is_empty()
            && (self.in_flight.is_empty()
                || (self.in_flight.len() < self.limit.units && self.bytes < self.limit.bytes))
    }

    /// Whether nothing is in flight or waiting to be resubmitted.
    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty() && self.refused.is_empty()
    }

    /// Units in flight (submitted, not yet reported), and their encoded bytes.
    pub fn in_flight(&self) -> (usize, u64) {
        (self.in_flight.len() + self.refused.len(), self.bytes)
    }

    /// Admits and submits a unit's batches in order (a unit with no batch, say one that
    /// went to the quarantine, is reported in its turn all the same). Returns once every
    /// batch is queued in the WAL, not once durable: [`next`](Self::next) reports it.
    /// Admission waits until `deadline` (none: as long as it takes).
    ///
    /// # Errors
    ///
    /// Admission failed (deadline passed, shutting down) or the WAL refused to queue a
    /// batch (closed, poisoned): the message and the unit's tag. The unit is not in
    /// flight, though batches of it submitted before the failure may still become
    /// durable.
    ///
    /// # Cancel safety
    ///
    /// Not cancel-safe: a unit cancelled half-submitted is lost to the caller. Await it
    /// in a `select!` handler, not as a branch.
    pub async fn submit(
        &mut self,
        tag: T,
        batches: Vec<Batch>,
        deadline: Option<Instant>,
    ) -> Result<(), (String, T)> {
        let bytes = batches.iter().map(Batch::encoded_len).sum();
        // Each batch's answer is awaited in a task of its own, so that its admission is
        // given back as soon as the WAL answers, whether or not `next` is being polled:
        // the next batch's admission (of this unit or the next) may wait for that room.
        let mut answers = Vec::with_capacity(batches.len());
        for batch in batches {
            match submit_batch(&self.ingest, &self.chain, batch, deadline).await {
                Ok(a) => answers.push(tokio::spawn(a.durable())),
                Err(message) => return Err((message, tag)),
            }
        }
        self.bytes += bytes;
        self.in_flight.push_back(Box::pin(async move {
            let mut results = Vec::with_capacity(answers.len());
            for answer in answers {
                results.push(answer.await.unwrap_or_else(|e| {
                    Err(AppendError::InDoubt {
                        cause: format!("the append task failed: {e}"),
                    })
                }));
            }
            Outcome {
                tag,
                bytes,
                results,
            }
        }));
        Ok(())
    }

    /// The oldest unit's fate, in submission order; `None` when nothing is in flight.
    /// A refused unit is not reported: it is taken back, with every unit behind it, and
    /// once all are back [`Event::Refused`] says so.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: use it as a `select!` branch.
    pub async fn next(&mut self) -> Option<Event<T>> {
        loop {
            let Some(outcome) = self.in_flight.next().await else {
                return (!self.refused.is_empty()).then_some(Event::Refused);
            };
            let Outcome {
                tag,
                bytes,
                results,
            } = outcome;
            let mut back = Vec::new();
            let mut failure = None;
            for result in results {
                match result {
                    Ok(_) => {}
                    Err(
                        AppendError::Full { batch, .. }
                        | AppendError::NoSpace { batch, .. }
                        | AppendError::Resource { batch, .. }
                        | AppendError::Behind(batch)
                        | AppendError::Busy(batch),
                    ) => back.push(batch),
                    Err(e) => {
                        failure.get_or_insert(format!("the WAL refused a batch: {e}"));
                    }
                }
            }
            if let Some(message) = failure {
                self.bytes -= bytes;
                return Some(Event::Failed(tag, message));
            }
            if back.is_empty() {
                self.bytes -= bytes;
                return Some(Event::Durable(tag));
            }
            // Keeps its bytes counted: it is still on its way.
            self.refused.push_back(Unit {
                tag,
                batches: back,
                bytes,
            });
            if self.in_flight.is_empty() {
                return Some(Event::Refused);
            }
        }
    }

    /// After [`Event::Refused`]: waits [`REFUSED_RETRY`], then submits the refused
    /// units again, first and in their order (the batches of them already durable are
    /// not written twice).
    ///
    /// # Errors
    ///
    /// As [`submit`](Self::submit); the unit that failed and those behind it are then
    /// dropped, and their tags returned (in order) with the message.
    ///
    /// # Cancel safety
    ///
    /// Not cancel-safe, as [`submit`](Self::submit).
    pub async fn resubmit(&mut self, deadline: Option<Instant>) -> Result<(), (String, Vec<T>)> {
        debug_assert!(
            self.in_flight.is_empty(),
            "resubmit only after Event::Refused"
        );
        tokio::time::sleep(REFUSED_RETRY).await;
        self.chain.restart();
        while let Some(unit) = self.refused.pop_front() {
            self.bytes -= unit.bytes;
            if let Err((message, tag)) = self.submit(unit.tag, unit.batches, deadline).await {
                let mut lost = vec![tag];
                lost.extend(self.give_up());
                return Err((message, lost));
            }
        }
        Ok(())
    }

    /// Drops the units taken back after a refusal (shutdown): their tags, in order.
    pub fn give_up(&mut self) -> Vec<T> {
        self.refused
            .drain(..)
            .map(|unit| {
                self.bytes -= unit.bytes;
                unit.tag
            })
            .collect()
    }
}

/// Admits and queues one batch; retries while the WAL is too busy to queue it.
async fn submit_batch(
    ingest: &Ingest,
    chain: &Chain,
    mut batch: Batch,
    deadline: Option<Instant>,
) -> Result<Appending, String> {
    loop {
        let admission = ingest
            .admit(batch.encoded_len(), deadline)
            .await
            .map_err(|e| format!("the WAL did not admit a batch: {e}"))?;
        match admission.submit(chain, batch).await {
            Ok(appending) => return Ok(appending),
            Err(AppendError::Busy(b)) => {
                // Too many appenders waiting for the WAL's pending room: nothing of
                // this batch was queued, so trying again keeps the order.
                batch = b;
                if deadline.is_some_and(|d| Instant::now() + REFUSED_RETRY > d) {
                    return Err("the WAL was too busy to take a batch before the deadline".into());
                }
                tokio::time::sleep(REFUSED_RETRY).await;
            }
            Err(e) => return Err(format!("the WAL refused a batch: {e}")),
        }
    }
}

#[cfg(test)]
#[path = "appends_tests.rs"]
mod tests;
