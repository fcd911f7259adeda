//! AIMD limiters against a simulated downstream whose capacity moves: the limit
//! converges near the capacity and the latency is held near the target.
//!
//! The downstream is a single FIFO server of `capacity_per_s` (a fluid model, 1 ms
//! steps): a request's latency is its wait in the downstream queue plus its service,
//! so pushing above capacity shows up as growing latency, as with a real database.

use std::collections::VecDeque;
use std::time::Duration;

use weir_flow::Timestamp;
use weir_flow::aimd::{AimdConcurrency, AimdConfig, AimdRate, Token};

/// Capacity in requests per second at time `ms`: 1000/s, then 400/s, then 1500/s.
fn capacity_per_s(ms: u64) -> f64 {
    match ms {
        0..60_000 => 1_000.0,
        60_000..120_000 => 400.0,
        _ => 1_500.0,
    }
}

/// A FIFO server working `capacity_per_s` requests per second.
struct Downstream<T> {
    queue: VecDeque<(u64, T)>, // (arrival ms, payload)
    credit: f64,
}

impl<T> Downstream<T> {
    fn new() -> Self {
        Downstream {
            queue: VecDeque::new(),
            credit: 0.0,
        }
    }

    /// Advances one millisecond; returns the requests completed, with their latency.
    fn step(&mut self, now_ms: u64, mut done: impl FnMut(u64, T)) {
        self.credit += capacity_per_s(now_ms) / 1_000.0;
        if self.queue.is_empty() {
            self.credit = self.credit.min(1.0); // an idle server banks no work
        }
        while self.credit >= 1.0 {
            let Some((arrived, payload)) = self.queue.pop_front() else {
                break;
            };
            self.credit -= 1.0;
            done(now_ms + 1 - arrived, payload);
        }
    }
}

/// Per phase (the last 20 s of each capacity level): completions per second and the
/// p99 latency in ms.
struct Phase {
    throughput_per_s: f64,
    p99_ms: u64,
    capacity_per_s: f64,
}

fn summarize(completions: &[(u64, u64)]) -> Vec<Phase> {
    [(40_000, 60_000), (100_000, 120_000), (160_000, 180_000)]
        .into_iter()
        .map(|(from, to)| {
            let mut latencies: Vec<u64> = completions
                .iter()
                .filter(|(at, _)| (from..to).contains(at))
                .map(|(_, latency)| *latency)
                .collect();
            latencies.sort_unstable();
            let p99 = latencies[(latencies.len() * 99).div_ceil(100) - 1];
            Phase {
                throughput_per_s: latencies.len() as f64 / ((to - from) as f64 / 1_000.0),
                p99_ms: p99,
                capacity_per_s: capacity_per_s(from),
            }
        })
        .collect()
}

#[test]
fn rate_form_converges_near_capacity_with_latency_near_target() {
    let target = Duration::from_millis(50);
    let mut config = AimdConfig::rate(target, 100.0);
    // Faster than the defaults so the test converges in minutes of virtual time.
    config.window = Duration::from_millis(250);
    config.increase = 25.0;
    config.burst = Duration::from_millis(10);
    let mut limiter = AimdRate::new(config).unwrap();
    let mut downstream = Downstream::<()>::new();
    let mut completions = Vec::new();
    for ms in 0..180_000u64 {
        let now = Timestamp::from_millis(ms);
        // The caller always has more to send.
        while limiter.try_acquire(now).is_ok() {
            downstream.queue.push_back((ms, ()));
        }
        downstream.step(ms, |latency_ms, ()| {
            limiter.observe(now, Duration::from_millis(latency_ms));
            completions.push((ms, latency_ms));
        });
    }
    for phase in summarize(&completions) {
        eprintln!(
            "rate: capacity {}/s -> throughput {:.0}/s, p99 {} ms",
            phase.capacity_per_s, phase.throughput_per_s, phase.p99_ms
        );
        assert!(
            phase.throughput_per_s >= 0.8 * phase.capacity_per_s,
            "throughput {:.0}/s below 80% of capacity {}/s",
            phase.throughput_per_s,
            phase.capacity_per_s
        );
        assert!(phase.throughput_per_s <= 1.001 * phase.capacity_per_s);
        assert!(
            phase.p99_ms <= 3 * 50,
            "p99 {} ms vs target 50 ms",
            phase.p99_ms
        );
    }
}

#[test]
fn concurrency_form_converges_near_capacity_with_latency_near_target() {
    let target = Duration::from_millis(50);
    let mut config = AimdConfig::concurrency(target, 1);
    config.window = Duration::from_millis(250);
    let mut limiter = AimdConcurrency::new(config).unwrap();
    let mut downstream = Downstream::<Token>::new();
    let mut completions = Vec::new();
    for ms in 0..180_000u64 {
        let now = Timestamp::from_millis(ms);
        while let Some(token) = limiter.try_start(now) {
            downstream.queue.push_back((ms, token));
        }
        let mut finished = Vec::new();
        downstream.step(ms, |latency_ms, token| {
            finished.push(token);
            completions.push((ms, latency_ms));
        });
        for token in finished {
            limiter.finish(now + Duration::from_millis(1), token);
        }
    }
    for phase in summarize(&completions) {
        eprintln!(
            "concurrency: capacity {}/s -> throughput {:.0}/s, p99 {} ms",
            phase.capacity_per_s, phase.throughput_per_s, phase.p99_ms
        );
        assert!(
            phase.throughput_per_s >= 0.8 * phase.capacity_per_s,
            "throughput {:.0}/s below 80% of capacity {}/s",
            phase.throughput_per_s,
            phase.capacity_per_s
        );
        assert!(
            phase.p99_ms <= 3 * 50,
            "p99 {} ms vs target 50 ms",
            phase.p99_ms
        );
    }
    // Little's law: at capacity C and latency near the target, the limit sits near
    // C × target (75 at 1500/s and 50 ms), far below the 1,000 maximum.
    assert!(limiter.limit() <= 150, "limit {}", limiter.limit());
}
