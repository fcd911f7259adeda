//! The sans-IO ordered stage: sequence numbers, the reorder buffer, timeouts, retries.

use std::collections::VecDeque;
use std::time::Duration;

use super::config::OrderedConfig;
use super::error::{OrderedConfigError, OrderedError};
use crate::{FlowStats, Timestamp};

/// One attempt of one operation: its sequence number (assigned at submit, in
/// submission order from 0) and its attempt number (the first is 1). Report the
/// attempt's outcome with this value; outcomes of superseded attempts are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attempt {
    /// The operation's sequence number.
    pub seq: u64,
    /// The attempt number, from 1.
    pub number: u32,
    /// When this attempt times out, if the stage has an attempt timeout.
    pub deadline: Option<Timestamp>,
}

/// What the core did with an attempt's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a RetryAt outcome asks the caller to start a new attempt at that time"]
pub enum Completion {
    /// The operation's result (a success or its final failure) is stored and will be
    /// released by [`OrderedCore::pop_ready`] in submission order.
    Done,
    /// The attempt failed; start the next attempt at this time with
    /// [`OrderedCore::begin_retry`] (or [`OrderedCore::poll_retry`]).
    RetryAt(Timestamp),
    /// The attempt is not the operation's current one (it timed out and was retried,
    /// or its result is already in): nothing changed.
    Stale,
}

#[derive(Debug)]
enum Slot<O, E> {
    Running {
        attempt: u32,
        deadline: Option<Timestamp>,
    },
    Backoff {
        failed: u32,
        retry_at: Timestamp,
    },
    Done {
        result: Result<O, OrderedError<E>>,
        weight: u64,
    },
}

#[derive(Debug)]
struct Entry<O, E> {
    submitted: Timestamp,
    slot: Slot<O, E>,
}

/// Up to `max_in_flight` operations at once, results released strictly in submission
/// order, with a bounded reorder buffer, per-attempt timeouts and retries.
///
/// The caller runs the operations; the core keeps the books:
///
/// 1. [`try_submit`](Self::try_submit) admits an operation if
///    [`can_admit`](Self::can_admit) — `in_flight < max_in_flight`, `in_flight +
///    held < max_held` and `held_bytes < max_held_bytes` — and returns its first
///    [`Attempt`].
/// 2. The caller reports each attempt's outcome with [`complete`](Self::complete) (or
///    [`fail_permanently`](Self::fail_permanently), or [`time_out`](Self::time_out) /
///    [`expire`](Self::expire) for deadlines). A failure with attempts left returns
///    [`Completion::RetryAt`]; the next attempt starts with
///    [`begin_retry`](Self::begin_retry) / [`poll_retry`](Self::poll_retry).
/// 3. [`pop_ready`](Self::pop_ready) releases results in submission order: a result
///    waits (is *held back*) while an earlier operation is unfinished.
///
/// "In flight" counts operations admitted and not finished (running or waiting to
/// retry); "held" counts finished results not yet popped, whether blocked behind an
/// earlier operation or ready at the head. `held <= max_held` always holds, because
/// every admitted operation reserves its place.
///
/// # Examples
///
/// ```
/// use std::num::NonZeroUsize;
/// use weir_flow::Timestamp;
/// use weir_flow::ordered::{Completion, OrderedConfig, OrderedCore};
///
/// let config = OrderedConfig::new(NonZeroUsize::new(2).unwrap());
/// let mut stage: OrderedCore<&str, String> = OrderedCore::new(config).unwrap();
/// let now = Timestamp::ZERO;
/// let a = stage.try_submit(now).unwrap();
/// let b = stage.try_submit(now).unwrap();
/// assert!(!stage.can_admit(), "two in flight");
///
/// // b finishes first: it is held back until a is done.
/// assert_eq!(stage.complete(b, Ok("b"), 10, now), Completion::Done);
/// assert!(stage.pop_ready(now).is_none());
/// assert_eq!(stage.complete(a, Ok("a"), 10, now), Completion::Done);
/// assert_eq!(stage.pop_ready(now), Some((0, Ok("a"))));
/// assert_eq!(stage.pop_ready(now), Some((1, Ok("b"))));
/// ```
#[derive(Debug)]
pub struct OrderedCore<O, E> {
    config: OrderedConfig,
    entries: VecDeque<Entry<O, E>>,
    head_seq: u64,
    in_flight: usize,
    held: usize,
    held_bytes: u64,
    max_held_seen: usize,
    max_held_bytes_seen: u64,
    /// State of the jitter draws (splitmix64).
    jitter_state: u64,
    retries: u64,
    timeouts: u64,
    stats: FlowStats,
}

impl<O, E> OrderedCore<O, E> {
    /// An empty stage.
    pub fn new(config: OrderedConfig) -> Result<Self, OrderedConfigError> {
        config.validate()?;
        Ok(OrderedCore {
            jitter_state: config.retry.jitter_seed,
            entries: VecDeque::with_capacity(config.max_held.min(1_024)),
            config,
            head_seq: 0,
            in_flight: 0,
            held: 0,
            held_bytes: 0,
            max_held_seen: 0,
            max_held_bytes_seen: 0,
            retries: 0,
            timeouts: 0,
            stats: FlowStats::default(),
        })
    }

    /// Whether a new operation would be admitted now.
    pub fn can_admit(&self) -> bool {
        self.in_flight < self.config.max_in_flight.get()
            && self.in_flight + self.held < self.config.max_held
            && self.held_bytes < self.config.max_held_bytes
    }

    /// Admits a new operation and returns its first attempt, or `None` at a bound.
    pub fn try_submit(&mut self, now: Timestamp) -> Option<Attempt> {
        if !self.can_admit() {
            return None;
        }
        let seq = self.head_seq + self.entries.len() as u64;
        let deadline = self.deadline(now);
        self.entries.push_back(Entry {
            submitted: now,
            slot: Slot::Running {
                attempt: 1,
                deadline,
            },
        });
        self.in_flight += 1;
        self.stats.offered += 1;
        self.stats.accepted += 1;
        self.stats.depth += 1;
        self.stats.max_depth = self.stats.max_depth.max(self.stats.depth);
        Some(Attempt {
            seq,
            number: 1,
            deadline,
        })
    }

    fn deadline(&self, now: Timestamp) -> Option<Timestamp> {
        self.config.attempt_timeout.map(|t| now + t)
    }

    fn slot_mut(&mut self, seq: u64) -> Option<&mut Slot<O, E>> {
        let index = usize::try_from(seq.checked_sub(self.head_seq)?).ok()?;
        self.entries.get_mut(index).map(|e| &mut e.slot)
    }

    fn is_current(&mut self, attempt: Attempt) -> bool {
        matches!(
            self.slot_mut(attempt.seq),
            Some(Slot::Running { attempt: n, .. }) if *n == attempt.number
        )
    }

    /// Reports an attempt's outcome. An error is retried after the policy's backoff
    /// while attempts remain; otherwise the result (or final error) is stored with
    /// `weight` (e.g. bytes) counted against `max_held_bytes` until it is popped.
    pub fn complete(
        &mut self,
        attempt: Attempt,
        result: Result<O, E>,
        weight: u64,
        now: Timestamp,
    ) -> Completion {
        if !self.is_current(attempt) {
            return Completion::Stale;
        }
        match result {
            Ok(output) => self.finish(attempt.seq, Ok(output), weight),
            Err(error) if attempt.number >= self.config.retry.max_attempts.get() => {
                let failure = OrderedError::Failed {
                    error,
                    attempts: attempt.number,
                };
                self.finish(attempt.seq, Err(failure), weight)
            }
            Err(_) => self.schedule_retry(attempt, now),
        }
    }

    /// Reports a failure that must not be retried: it is stored as the final result.
    pub fn fail_permanently(&mut self, attempt: Attempt, error: E) -> Completion {
        if !self.is_current(attempt) {
            return Completion::Stale;
        }
        let failure = OrderedError::Failed {
            error,
            attempts: attempt.number,
        };
        self.finish(attempt.seq, Err(failure), 0)
    }

    /// Gives up on an attempt that ended without an outcome (e.g. its task
    /// panicked): the operation is released in order as [`OrderedError::Abandoned`],
    /// so the stage does not wait for it for ever.
    pub fn abandon(&mut self, attempt: Attempt) -> Completion {
        if !self.is_current(attempt) {
            return Completion::Stale;
        }
        let failure = OrderedError::Abandoned {
            attempts: attempt.number,
        };
        self.finish(attempt.seq, Err(failure), 0)
    }

    /// Reports that `attempt` timed out (the caller's timer fired at its deadline):
    /// retried while attempts remain, otherwise released as
    /// [`OrderedError::TimedOut`].
    pub fn time_out(&mut self, attempt: Attempt, now: Timestamp) -> Completion {
        if !self.is_current(attempt) {
            return Completion::Stale;
        }
        self.timeouts += 1;
        if attempt.number >= self.config.retry.max_attempts.get() {
            let failure = OrderedError::TimedOut {
                attempts: attempt.number,
            };
            return self.finish(attempt.seq, Err(failure), 0);
        }
        self.schedule_retry(attempt, now)
    }

    /// Times out every running attempt whose deadline is at or before `now` (for
    /// drivers that sweep instead of keeping a timer per attempt). Returns how many.
    /// Later outcomes of those attempts are [`Completion::Stale`].
    pub fn expire(&mut self, now: Timestamp) -> u64 {
        let mut expired = 0;
        for index in 0..self.entries.len() {
            let seq = self.head_seq + index as u64;
            if let Slot::Running {
                attempt,
                deadline: Some(deadline),
            } = self.entries[index].slot
                && deadline <= now
            {
                let attempt = Attempt {
                    seq,
                    number: attempt,
                    deadline: Some(deadline),
                };
                let _ = self.time_out(attempt, now);
                expired += 1;
            }
        }
        expired
    }

    /// The wait before retrying after failed attempt `number`: the policy's backoff,
    /// or with full jitter a uniform draw in `[0, backoff]`.
    fn retry_wait(&mut self, number: u32) -> std::time::Duration {
        let backoff = self.config.retry.backoff(number);
        if !self.config.retry.jitter {
            return backoff;
        }
        self.jitter_state = self.jitter_state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.jitter_state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // 53 random bits as a fraction in [0, 1].
        #[allow(clippy::cast_precision_loss)]
        let fraction = (z >> 11) as f64 / ((1u64 << 53) - 1) as f64;
        backoff.mul_f64(fraction)
    }

    fn schedule_retry(&mut self, attempt: Attempt, now: Timestamp) -> Completion {
        let retry_at = now + self.retry_wait(attempt.number);
        if let Some(slot) = self.slot_mut(attempt.seq) {
            *slot = Slot::Backoff {
                failed: attempt.number,
                retry_at,
            };
        }
        Completion::RetryAt(retry_at)
    }

    fn finish(&mut self, seq: u64, result: Result<O, OrderedError<E>>, weight: u64) -> Completion {
        if let Some(slot) = self.slot_mut(seq) {
            *slot = Slot::Done { result, weight };
        }
        self.in_flight -= 1;
        self.held += 1;
        self.held_bytes = self.held_bytes.saturating_add(weight);
        self.max_held_seen = self.max_held_seen.max(self.held);
        self.max_held_bytes_seen = self.max_held_bytes_seen.max(self.held_bytes);
        Completion::Done
    }

    /// Starts the next attempt of operation `seq` if its backoff has elapsed at `now`.
    pub fn begin_retry(&mut self, seq: u64, now: Timestamp) -> Option<Attempt> {
        let deadline = self.deadline(now);
        let slot = self.slot_mut(seq)?;
        let Slot::Backoff { failed, retry_at } = *slot else {
            return None;
        };
        if retry_at > now {
            return None;
        }
        *slot = Slot::Running {
            attempt: failed + 1,
            deadline,
        };
        self.retries += 1;
        Some(Attempt {
            seq,
            number: failed + 1,
            deadline,
        })
    }

    /// Starts the next attempt of the earliest operation whose backoff has elapsed.
    pub fn poll_retry(&mut self, now: Timestamp) -> Option<Attempt> {
        let index = self
            .entries
            .iter()
            .position(|e| matches!(e.slot, Slot::Backoff { retry_at, .. } if retry_at <= now))?;
        self.begin_retry(self.head_seq + index as u64, now)
    }

    /// The earliest attempt deadline or retry time, for a driver's timer.
    pub fn next_wakeup(&self) -> Option<Timestamp> {
        self.entries
            .iter()
            .filter_map(|e| match e.slot {
                Slot::Running { deadline, .. } => deadline,
                Slot::Backoff { retry_at, .. } => Some(retry_at),
                Slot::Done { .. } => None,
            })
            .min()
    }

    /// Releases the next result in submission order, if it is finished: its sequence
    /// number and its output or final error.
    pub fn pop_ready(&mut self, now: Timestamp) -> Option<(u64, Result<O, OrderedError<E>>)> {
        if !matches!(self.entries.front()?.slot, Slot::Done { .. }) {
            return None;
        }
        let entry = self.entries.pop_front()?;
        let Slot::Done { result, weight } = entry.slot else {
            return None;
        };
        let seq = self.head_seq;
        self.head_seq += 1;
        self.held -= 1;
        self.held_bytes = self.held_bytes.saturating_sub(weight);
        self.stats.depth -= 1;
        self.stats.delivered += 1;
        self.stats.max_queue_wait = self
            .stats
            .max_queue_wait
            .max(now.saturating_duration_since(entry.submitted));
        Some((seq, result))
    }

    /// Operations admitted and not finished (running or waiting to retry).
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Finished results not yet popped.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Finished results not yet popped that wait behind an unfinished earlier one.
    pub fn held_back(&self) -> usize {
        let ready = self
            .entries
            .iter()
            .take_while(|e| matches!(e.slot, Slot::Done { .. }))
            .count();
        self.held - ready
    }

    /// The weight of the finished results not yet popped.
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    /// The most results ever held at once.
    pub fn max_held_seen(&self) -> usize {
        self.max_held_seen
    }

    /// The most weight ever held at once.
    pub fn max_held_bytes_seen(&self) -> u64 {
        self.max_held_bytes_seen
    }

    /// Attempts started after a failure or timeout.
    pub fn retries(&self) -> u64 {
        self.retries
    }

    /// Attempts that timed out.
    pub fn timeouts(&self) -> u64 {
        self.timeouts
    }

    /// Whether nothing is in flight or held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The configuration.
    pub fn config(&self) -> &OrderedConfig {
        &self.config
    }

    /// Flow statistics: `offered` = submitted, `delivered` = popped, `depth` =
    /// in flight + held, `bytes` = held bytes, `oldest_age` = age of the oldest
    /// unpopped operation, `max_queue_wait` = the longest submit-to-pop time.
    pub fn stats(&self, now: Timestamp) -> FlowStats {
        let mut stats = self.stats;
        stats.bytes = self.held_bytes;
        stats.oldest_age = self.entries.front().map_or(Duration::ZERO, |e| {
            now.saturating_duration_since(e.submitted)
        });
        stats
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
