//! The concurrency form: a limit on operations in flight, steered by AIMD.

use std::time::Duration;

use super::core::{AimdConfig, AimdController};
use super::error::AimdConfigError;
use crate::Timestamp;

/// One admitted operation. Hand it back exactly once, with
/// [`AimdConcurrency::finish`], [`AimdConcurrency::dropped`] or
/// [`AimdConcurrency::ignore`]; a token never handed back keeps its slot for good.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a token holds an in-flight slot until it is handed back"]
pub struct Token {
    started: Timestamp,
}

impl Token {
    /// When the operation was admitted.
    pub fn started(&self) -> Timestamp {
        self.started
    }
}

/// A limit on operations in flight that grows by `increase` per on-target window in
/// which it was fully used, and is multiplied by `decrease_factor` when a window's
/// latency quantile is above target or an operation is dropped for overload.
///
/// The limit is the controller's value rounded down (at least one). When the limit
/// shrinks below the number in flight, nothing is revoked: new starts are refused
/// until enough operations finish. See [`AimdController`] for the rule and
/// [`AimdConfig::concurrency`] for the defaults.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use weir_flow::Timestamp;
/// use weir_flow::aimd::{AimdConcurrency, AimdConfig};
///
/// let mut limiter = AimdConcurrency::new(AimdConfig::concurrency(Duration::from_millis(50), 2)).unwrap();
/// let t = Timestamp::from_millis;
/// let a = limiter.try_start(t(0)).unwrap();
/// let b = limiter.try_start(t(0)).unwrap();
/// assert!(limiter.try_start(t(0)).is_none(), "limit 2 reached");
/// limiter.finish(t(20), a); // 20 ms: on target
/// limiter.dropped(t(30), b); // overload: 2 × 0.8 = 1.6, so the limit is 1
/// assert_eq!(limiter.limit(), 1);
/// assert_eq!(limiter.in_flight(), 0);
/// ```
#[derive(Debug, Clone)]
pub struct AimdConcurrency {
    ctl: AimdController,
    in_flight: u64,
    max_in_flight: u64,
    started: u64,
    refused: u64,
    /// The last time the limit was in full use (a start refused, or the limit reached).
    last_full: Option<Timestamp>,
}

impl AimdConcurrency {
    /// A limiter at `config.initial` operations in flight.
    pub fn new(config: AimdConfig) -> Result<Self, AimdConfigError> {
        Ok(AimdConcurrency {
            ctl: AimdController::new(config)?,
            in_flight: 0,
            max_in_flight: 0,
            started: 0,
            refused: 0,
            last_full: None,
        })
    }

    /// Admits one operation if fewer than [`limit`](Self::limit) are in flight.
    pub fn try_start(&mut self, now: Timestamp) -> Option<Token> {
        self.ctl.roll(now);
        if self.in_flight >= self.limit() {
            self.refused += 1;
            self.last_full = Some(now);
            self.ctl.mark_saturated(now);
            return None;
        }
        self.in_flight += 1;
        self.started += 1;
        self.max_in_flight = self.max_in_flight.max(self.in_flight);
        if self.in_flight == self.limit() {
            self.last_full = Some(now);
            self.ctl.mark_saturated(now);
        }
        Some(Token { started: now })
    }

    /// The operation finished; its latency is `now - token.started()`.
    pub fn finish(&mut self, now: Timestamp, token: Token) {
        self.finish_with_latency(now, token, None);
    }

    /// The operation finished with a latency measured by the caller (e.g. excluding
    /// time spent queued before the downstream call).
    pub fn finish_with_latency(&mut self, now: Timestamp, token: Token, latency: Option<Duration>) {
        // In full use while this operation was in flight.
        let saturated = self.last_full.is_some_and(|at| at >= token.started);
        self.release();
        let latency = latency.unwrap_or_else(|| now.saturating_duration_since(token.started));
        let before = self.ctl.decreases();
        self.ctl.observe(now, latency);
        let on_target = self
            .ctl
            .config()
            .target_latency
            .is_none_or(|target| latency <= target);
        // Like TCP's recovery: an operation that started before the last decrease
        // ran under the old limit and says nothing about the new one.
        let after_cut = self
            .ctl
            .last_decrease()
            .is_none_or(|cut| token.started > cut);
        if self.ctl.config().increase_per_round_trip
            && saturated
            && on_target
            && after_cut
            && self.ctl.decreases() == before
        {
            self.ctl.increase_per_ack();
        }
    }

    /// The operation was dropped for overload (rejected downstream, timed out): cut
    /// the limit now, at most once per window. With
    /// [`increase_per_round_trip`](AimdConfig::increase_per_round_trip), at most once
    /// per round trip instead: an operation that started after the last decrease cuts
    /// again (the smaller limit still overloads), one that started before it does not.
    pub fn dropped(&mut self, now: Timestamp, token: Token) {
        self.release();
        if self.ctl.config().increase_per_round_trip {
            let after_cut = self
                .ctl
                .last_decrease()
                .is_none_or(|cut| token.started > cut);
            if after_cut {
                self.ctl.decrease_now(now);
            }
        } else {
            self.ctl.overload(now);
        }
    }

    /// The operation ended without telling anything about the downstream (cancelled,
    /// failed for an unrelated reason): free its slot, record nothing.
    pub fn ignore(&mut self, token: Token) {
        let _ = token;
        self.release();
    }

    fn release(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// The current limit on operations in flight (at least one).
    pub fn limit(&self) -> u64 {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let limit = self.ctl.value() as u64;
        limit.max(1)
    }

    /// Operations in flight now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// The most operations ever in flight at once.
    pub fn max_in_flight(&self) -> u64 {
        self.max_in_flight
    }

    /// Operations admitted so far.
    pub fn started(&self) -> u64 {
        self.started
    }

    /// `try_start` calls refused so far.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// The control law, for its counters and configuration.
    pub fn controller(&self) -> &AimdController {
        &self.ctl
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shrunk_limit_revokes_nothing() {
        let mut limiter =
            AimdConcurrency::new(AimdConfig::concurrency(Duration::from_millis(10), 5)).unwrap();
        let now = Timestamp::ZERO;
        let mut tokens: Vec<Token> = (0..5).map(|_| limiter.try_start(now).unwrap()).collect();
        limiter.dropped(now, tokens.pop().unwrap());
        assert_eq!(limiter.limit(), 4);
        assert_eq!(limiter.in_flight(), 4);
        assert!(limiter.try_start(now).is_none());
        limiter.ignore(tokens.pop().unwrap());
        assert!(limiter.try_start(now).is_some());
    }

    #[test]
    fn per_round_trip_increase_grows_like_a_congestion_window() {
        let mut config = AimdConfig::concurrency(None, 5);
        config.max = 40.0;
        config.increase_per_round_trip = true;
        let mut limiter = AimdConcurrency::new(config).unwrap();
        let t = Timestamp::from_millis;
        // Round trips of 10 ms with the limit always in full use: 5 → 40 takes about
        // 35 round trips (each adds one), well under a second.
        let mut now = 0;
        let mut round_trips = 0;
        while limiter.limit() < 40 {
            let tokens: Vec<Token> = std::iter::from_fn(|| limiter.try_start(t(now))).collect();
            now += 10;
            for token in tokens {
                limiter.finish(t(now), token);
            }
            round_trips += 1;
            assert!(
                round_trips < 60,
                "limit {} after {round_trips} round trips",
                limiter.limit()
            );
        }
        assert!(now < 1_000, "reached 40 after {now} ms");
        // Not in full use: no growth.
        let a = limiter.try_start(t(now)).unwrap();
        limiter.finish(t(now + 10), a);
        assert_eq!(limiter.limit(), 40);
        // No latency target: slow operations do not cut, overload does.
        let a = limiter.try_start(t(now + 20)).unwrap();
        limiter.finish(t(now + 20_000), a);
        let _ = limiter
            .try_start(t(now + 22_000))
            .map(|tok| limiter.ignore(tok));
        assert_eq!(limiter.limit(), 40);
        let a = limiter.try_start(t(now + 23_000)).unwrap();
        let before_cut = limiter.try_start(t(now + 23_000)).unwrap();
        limiter.dropped(t(now + 23_001), a);
        assert_eq!(limiter.limit(), 32);
        // Once per round trip: an operation that started before the cut neither cuts
        // again nor grows the limit; one started after it cuts at once.
        limiter.dropped(t(now + 23_002), before_cut);
        assert_eq!(limiter.limit(), 32);
        let after_cut = limiter.try_start(t(now + 23_010)).unwrap();
        limiter.dropped(t(now + 23_020), after_cut);
        assert_eq!(limiter.limit(), 25);
    }

    #[test]
    fn a_fully_used_on_target_window_raises_the_limit() {
        let mut limiter =
            AimdConcurrency::new(AimdConfig::concurrency(Duration::from_millis(10), 2)).unwrap();
        let t = Timestamp::from_millis;
        let a = limiter.try_start(t(0)).unwrap();
        let b = limiter.try_start(t(0)).unwrap();
        limiter.finish(t(5), a);
        limiter.finish(t(6), b);
        let _c = limiter.try_start(t(1_000)).unwrap(); // rolls the window
        assert_eq!(limiter.limit(), 3);
    }
}
