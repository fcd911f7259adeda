//! The HTTP sink's sans-IO policy: how an answer is classified, `Retry-After`, the
//! retry budget and backoff (bodies are built in [`super::body`]).

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};

/// What an answer (or the lack of one) means for the batch that was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// 2xx: stored.
    Delivered,
    /// 408, 429, 5xx, a timeout or a connection error: retried, never dropped.
    /// `overload` (429, 503, timeouts, connection errors) also cuts the concurrency
    /// limit.
    Transient {
        /// Cuts the concurrency limit.
        overload: bool,
        /// Why, for counters and `/status` (`"429"`, `"timeout"`, …).
        reason: &'static str,
    },
    /// 400 or 422: some records are refused; bisect until they are isolated.
    Refused,
    /// 413: the batch is too large; split it.
    TooLarge,
    /// 401, 403, 404 or 405 (and any other 4xx): the configuration is wrong (token,
    /// URL, method). The sink shows `failed`; nothing is dead-lettered.
    Config,
}

/// Classifies an HTTP status code.
pub fn classify(status: u16) -> Class {
    match status {
        200..=299 => Class::Delivered,
        400 | 422 => Class::Refused,
        413 => Class::TooLarge,
        408 => Class::Transient {
            overload: false,
            reason: "408",
        },
        429 => Class::Transient {
            overload: true,
            reason: "429",
        },
        503 => Class::Transient {
            overload: true,
            reason: "503",
        },
        500..=599 => Class::Transient {
            overload: false,
            reason: "5xx",
        },
        // 1xx/3xx are not followed (a redirect means the URL is wrong) and other 4xx say
        // the request is not acceptable as configured.
        _ => Class::Config,
    }
}

/// A `Retry-After` value: delay-seconds or an HTTP-date, as the time to wait from
/// `now`, capped at `max`. `None` when it does not parse. A delay of more digits than a
/// `u64` holds is a very long wait, so it is capped like any other, not ignored.
pub fn parse_retry_after(value: &str, now: SystemTime, max: Duration) -> Option<Duration> {
    let value = value.trim();
    let wait = if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        value
            .parse::<u64>()
            .map_or(Duration::MAX, Duration::from_secs)
    } else {
        let at = httpdate::parse_http_date(value).ok()?;
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(wait.min(max))
}

/// Capped exponential backoff: `min(max, initial × 2^(retry-1))` before retry number
/// `retry` (the first is 1).
pub fn backoff(retry: u32, initial: Duration, max: Duration) -> Duration {
    let factor = 2u32.saturating_pow(retry.saturating_sub(1).min(30));
    initial.saturating_mul(factor).min(max)
}

/// The retry budget: retries over a sliding window are at most `ratio` of the
/// requests in it, or `floor_per_s` per second of window, whichever allows more.
///
/// Kept per second in a ring of counters, so the window slides one second at a time.
#[derive(Debug)]
pub struct RetryBudget {
    ratio: f64,
    floor_per_s: f64,
    seconds: usize,
    /// `(second, first requests, retries)`, oldest first.
    buckets: VecDeque<(u64, u64, u64)>,
    origin: Instant,
}

impl RetryBudget {
    /// A budget of `ratio` (0.1 = retries at most 10% of requests) over the last
    /// `window_secs` seconds (at least 1), with `floor_per_s` retries per second always
    /// allowed.
    pub fn new(ratio: f64, floor_per_s: f64, window_secs: u32, origin: Instant) -> Self {
        let seconds = window_secs.max(1) as usize;
        RetryBudget {
            ratio,
            floor_per_s,
            seconds,
            buckets: VecDeque::with_capacity(seconds + 1),
            origin,
        }
    }

    /// The window's length in seconds.
    pub fn window_secs(&self) -> usize {
        self.seconds
    }

    fn second(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_secs()
    }

    fn bucket(&mut self, now: Instant) -> &mut (u64, u64, u64) {
        let second = self.second(now);
        let oldest = second.saturating_sub(self.seconds as u64 - 1);
        while self.buckets.front().is_some_and(|b| b.0 < oldest) {
            self.buckets.pop_front();
        }
        if self.buckets.back().is_none_or(|b| b.0 != second) {
            self.buckets.push_back((second, 0, 0));
        }
        self.buckets.back_mut().expect("just pushed")
    }

    /// Counts a first attempt (a batch's first request).
    pub fn record_request(&mut self, now: Instant) {
        self.bucket(now).1 += 1;
    }

    /// Takes one retry if the budget allows it now; otherwise how long until it may
    /// (when the oldest second leaves the window).
    pub fn try_retry(&mut self, now: Instant) -> Result<(), Duration> {
        self.bucket(now);
        let (requests, retries) = self
            .buckets
            .iter()
            .fold((0, 0), |(r, t), b| (r + b.1, t + b.2));
        #[allow(clippy::cast_precision_loss)]
        let allowed = (self.ratio * requests as f64).max(self.floor_per_s * self.seconds as f64);
        #[allow(clippy::cast_precision_loss)]
        if (retries as f64) < allowed {
            self.bucket(now).2 += 1;
            return Ok(());
        }
        // The next second boundary frees the oldest bucket's retries.
        let elapsed = now.saturating_duration_since(self.origin);
        let next = Duration::from_secs(elapsed.as_secs() + 1);
        Err(next.saturating_sub(elapsed).max(Duration::from_millis(1)))
    }

    /// Retries and first requests in the window now.
    pub fn window(&mut self, now: Instant) -> (u64, u64) {
        self.bucket(now);
        self.buckets
            .iter()
            .fold((0, 0), |(r, t), b| (r + b.1, t + b.2))
    }
}

/// Smoothed round-trip time, as TCP keeps it: `srtt = 7/8 srtt + 1/8 sample`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Srtt(Option<Duration>);

impl Srtt {
    /// Adds a sample.
    pub fn observe(&mut self, sample: Duration) {
        self.0 = Some(match self.0 {
            None => sample,
            Some(srtt) => (srtt * 7 + sample) / 8,
        });
    }

    /// The smoothed value, if any sample was seen.
    pub fn get(self) -> Option<Duration> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_classes() {
        assert_eq!(classify(200), Class::Delivered);
        assert_eq!(classify(204), Class::Delivered);
        assert_eq!(classify(400), Class::Refused);
        assert_eq!(classify(422), Class::Refused);
        assert_eq!(classify(413), Class::TooLarge);
        for status in [401, 403, 404, 405, 301] {
            assert_eq!(classify(status), Class::Config, "{status}");
        }
        assert!(matches!(
            classify(429),
            Class::Transient { overload: true, .. }
        ));
        assert!(matches!(
            classify(503),
            Class::Transient { overload: true, .. }
        ));
        for status in [408, 500, 502, 504] {
            assert!(
                matches!(
                    classify(status),
                    Class::Transient {
                        overload: false,
                        ..
                    }
                ),
                "{status}"
            );
        }
    }

    #[test]
    fn retry_after_seconds_dates_and_cap() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let max = Duration::from_secs(60);
        assert_eq!(
            parse_retry_after("2", now, max),
            Some(Duration::from_secs(2))
        );
        assert_eq!(parse_retry_after(" 3600 ", now, max), Some(max));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(5));
        assert_eq!(
            parse_retry_after(&later, now, max),
            Some(Duration::from_secs(5))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(5));
        assert_eq!(parse_retry_after(&past, now, max), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now, max), None);
        assert_eq!(parse_retry_after("-1", now, max), None);
    }

    #[test]
    fn a_retry_after_too_large_for_u64_is_capped_not_ignored() {
        let (now, max) = (SystemTime::now(), Duration::from_secs(60));
        assert_eq!(
            parse_retry_after("99999999999999999999999", now, max),
            Some(max)
        );
        assert_eq!(
            parse_retry_after("18446744073709551616", now, max),
            Some(max)
        );
        assert_eq!(parse_retry_after("", now, max), None);
        assert_eq!(parse_retry_after("+5", now, max), None);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let (i, m) = (Duration::from_millis(100), Duration::from_secs(2));
        assert_eq!(backoff(1, i, m), Duration::from_millis(100));
        assert_eq!(backoff(3, i, m), Duration::from_millis(400));
        assert_eq!(backoff(10, i, m), m);
        assert_eq!(backoff(u32::MAX, i, m), m);
    }

    #[test]
    fn budget_holds_retries_to_the_ratio_with_a_floor() {
        let t0 = Instant::now();
        let mut budget = RetryBudget::new(0.1, 3.0, 10, t0);
        // No traffic: the floor, 3/s over 10 s, allows 30 retries in the window.
        let mut taken = 0;
        while budget.try_retry(t0).is_ok() {
            taken += 1;
        }
        assert_eq!(taken, 30);
        let wait = budget
            .try_retry(t0 + Duration::from_millis(300))
            .unwrap_err();
        assert_eq!(wait, Duration::from_millis(700));
        // The window slides: 10 s later those retries are forgotten.
        let t10 = t0 + Duration::from_secs(10);
        assert!(budget.try_retry(t10).is_ok());
        // Heavy traffic: 10% of 1,000 requests allows 100 (above the floor's 30).
        let t20 = t0 + Duration::from_secs(20);
        let mut budget = RetryBudget::new(0.1, 3.0, 10, t0);
        for _ in 0..1_000 {
            budget.record_request(t20);
        }
        let mut taken = 0;
        while budget.try_retry(t20).is_ok() {
            taken += 1;
        }
        assert_eq!(taken, 100);
        assert_eq!(budget.window(t20), (1_000, 100));
    }

    #[test]
    fn the_floor_and_window_are_the_configured_ones() {
        let t0 = Instant::now();
        // No floor: without first attempts no retry is allowed at all.
        let mut budget = RetryBudget::new(0.5, 0.0, 4, t0);
        assert!(budget.try_retry(t0).is_err());
        for _ in 0..10 {
            budget.record_request(t0);
        }
        let mut taken = 0;
        while budget.try_retry(t0).is_ok() {
            taken += 1;
        }
        assert_eq!(taken, 5, "50% of 10 requests");
        // A 4 s window forgets them 4 s later (a 10 s one would not).
        assert!(budget.try_retry(t0 + Duration::from_secs(3)).is_err());
        budget.record_request(t0 + Duration::from_secs(4));
        budget.record_request(t0 + Duration::from_secs(4));
        assert!(budget.try_retry(t0 + Duration::from_secs(4)).is_ok());
        // A floor of 1/s over 4 s: 4 retries with no traffic.
        let mut budget = RetryBudget::new(0.1, 1.0, 4, t0);
        let mut taken = 0;
        while budget.try_retry(t0).is_ok() {
            taken += 1;
        }
        assert_eq!(taken, 4);
        assert_eq!(budget.window_secs(), 4);
    }

    #[test]
    fn srtt_smooths() {
        let mut s = Srtt::default();
        assert_eq!(s.get(), None);
        s.observe(Duration::from_millis(80));
        assert_eq!(s.get(), Some(Duration::from_millis(80)));
        s.observe(Duration::from_millis(160));
        assert_eq!(s.get(), Some(Duration::from_millis(90)));
    }
}
