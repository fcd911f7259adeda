//! Throughput of weir's bounded queue (`OnFull::Block`) against `tokio::sync::mpsc`,
//! `flume` and `async-channel`, all bounded at 1024 items of 64 bytes, on a
//! two-worker tokio runtime: 1 producer → 1 consumer and 4 producers → 1 consumer,
//! 100,000 items per iteration.
//!
//! A second pair of cases receives with `recv_many` (batches of 64) for weir and tokio;
//! another runs weir on tokio's clock (`Clock::new`, two `CLOCK_MONOTONIC` readings per
//! item) instead of the default coarse clock.
//!
//! `cargo bench -p weir-flow --bench queue` runs divan, then a short timed comparison
//! that prints throughput ratios (weir / each alternative; above 1.0 means weir is
//! faster). `QUEUE_BENCH_RUNS` sets the comparison's runs per case (default 15; the
//! median is reported). `QUEUE_BENCH_PROFILE=case:producers[:runs]` runs a single case
//! for a profiler (see [`profile`]).

use std::hint::black_box;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use weir_flow::Clock;
use weir_flow::queue::{Capacity, OnFull, QueueConfig, channel, channel_with_clock};

const ITEMS: usize = 100_000;
const CAPACITY: usize = 1024;
const PRODUCERS: [usize; 2] = [1, 4];
/// Items per `recv_many` call in the batched cases.
const BATCH: usize = 64;

type Item = [u8; 64];

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("a tokio runtime")
});

fn item(i: usize) -> Item {
    [i as u8; 64]
}

/// Spawns a consumer that receives with `recv` and `producers` producers that each send
/// their share with `send`; waits for the consumer's checksum.
macro_rules! run {
    ($producers:expr, $tx:ident, $rx:ident, |$i:ident| $send:expr, $recv:expr) => {{
        let per_producer = ITEMS / $producers;
        let consumer = tokio::spawn(async move {
            let mut checksum = 0usize;
            while let Some(item) = $recv {
                checksum = checksum.wrapping_add(usize::from(black_box(item)[0]));
            }
            checksum
        });
        for _ in 0..$producers {
            let $tx = $tx.clone();
            tokio::spawn(async move {
                for $i in 0..per_producer {
                    $send;
                }
            });
        }
        drop($tx);
        consumer.await.expect("the consumer finishes")
    }};
}

async fn weir(producers: usize) -> usize {
    let (tx, mut rx) =
        channel::<Item, ()>(QueueConfig::new(Capacity::items(CAPACITY), OnFull::Block));
    run!(
        producers,
        tx,
        rx,
        |i| tx.send(item(i)).await.expect("open"),
        rx.recv().await
    )
}

/// As [`weir`], timed by tokio's clock ([`Clock::new`]: full resolution, two
/// `CLOCK_MONOTONIC` readings per item) instead of the default coarse clock.
async fn weir_tokio_clock(producers: usize) -> usize {
    let config = QueueConfig::new(Capacity::items(CAPACITY), OnFull::Block);
    let (tx, mut rx) = channel_with_clock::<Item, ()>(config, Clock::new());
    run!(
        producers,
        tx,
        rx,
        |i| tx.send(item(i)).await.expect("open"),
        rx.recv().await
    )
}

async fn tokio_mpsc(producers: usize) -> usize {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Item>(CAPACITY);
    run!(
        producers,
        tx,
        rx,
        |i| tx.send(item(i)).await.expect("open"),
        rx.recv().await
    )
}

async fn flume(producers: usize) -> usize {
    let (tx, rx) = flume::bounded::<Item>(CAPACITY);
    run!(
        producers,
        tx,
        rx,
        |i| tx.send_async(item(i)).await.expect("open"),
        rx.recv_async().await.ok()
    )
}

async fn async_channel(producers: usize) -> usize {
    let (tx, rx) = async_channel::bounded::<Item>(CAPACITY);
    run!(
        producers,
        tx,
        rx,
        |i| tx.send(item(i)).await.expect("open"),
        rx.recv().await.ok()
    )
}

/// Spawns `producers` producers sending their share of the items with `send`.
macro_rules! produce {
    ($producers:expr, $tx:ident, |$i:ident| $send:expr) => {{
        let per_producer = ITEMS / $producers;
        for _ in 0..$producers {
            let $tx = $tx.clone();
            tokio::spawn(async move {
                for $i in 0..per_producer {
                    $send;
                }
            });
        }
        drop($tx);
    }};
}

/// The consumer takes up to `BATCH` items per call (`recv_many`).
async fn weir_batched(producers: usize) -> usize {
    let (tx, mut rx) =
        channel::<Item, ()>(QueueConfig::new(Capacity::items(CAPACITY), OnFull::Block));
    let consumer = tokio::spawn(async move {
        let (mut checksum, mut buffer) = (0usize, Vec::with_capacity(BATCH));
        while rx.recv_many(&mut buffer, BATCH).await > 0 {
            for item in buffer.drain(..) {
                checksum = checksum.wrapping_add(usize::from(black_box(item)[0]));
            }
        }
        checksum
    });
    produce!(producers, tx, |i| tx.send(item(i)).await.expect("open"));
    consumer.await.expect("the consumer finishes")
}

/// The consumer takes up to `BATCH` items per call (`recv_many`).
async fn tokio_mpsc_batched(producers: usize) -> usize {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Item>(CAPACITY);
    let consumer = tokio::spawn(async move {
        let (mut checksum, mut buffer) = (0usize, Vec::with_capacity(BATCH));
        while rx.recv_many(&mut buffer, BATCH).await > 0 {
            for item in buffer.drain(..) {
                checksum = checksum.wrapping_add(usize::from(black_box(item)[0]));
            }
        }
        checksum
    });
    produce!(producers, tx, |i| tx.send(item(i)).await.expect("open"));
    consumer.await.expect("the consumer finishes")
}

#[divan::bench(args = PRODUCERS)]
fn weir_queue_recv_many(producers: usize) -> usize {
    RUNTIME.block_on(weir_batched(producers))
}

#[divan::bench(args = PRODUCERS)]
fn tokio_mpsc_recv_many(producers: usize) -> usize {
    RUNTIME.block_on(tokio_mpsc_batched(producers))
}

#[divan::bench(args = PRODUCERS)]
fn weir_queue(producers: usize) -> usize {
    RUNTIME.block_on(weir(producers))
}

#[divan::bench(args = PRODUCERS)]
fn tokio_mpsc_channel(producers: usize) -> usize {
    RUNTIME.block_on(tokio_mpsc(producers))
}

#[divan::bench(args = PRODUCERS)]
fn flume_channel(producers: usize) -> usize {
    RUNTIME.block_on(flume(producers))
}

#[divan::bench(args = PRODUCERS)]
fn async_channel_channel(producers: usize) -> usize {
    RUNTIME.block_on(async_channel(producers))
}

/// The cases of the timed comparison, in the order they are run within each round.
const CASES: [&str; 7] = [
    "weir",
    "weir, tokio clock",
    "tokio mpsc",
    "flume",
    "async-channel",
    "weir recv_many",
    "tokio recv_many",
];

/// Runs case `case` once with `producers` producers; its wall time.
fn time_case(case: usize, producers: usize) -> Duration {
    let start = Instant::now();
    let checksum = RUNTIME.block_on(async move {
        match case {
            0 => weir(producers).await,
            1 => weir_tokio_clock(producers).await,
            2 => tokio_mpsc(producers).await,
            3 => flume(producers).await,
            4 => async_channel(producers).await,
            5 => weir_batched(producers).await,
            _ => tokio_mpsc_batched(producers).await,
        }
    });
    black_box(checksum);
    start.elapsed()
}

/// Median wall time of each case over `runs` rounds. Each round runs every case once,
/// one after the other, so load from elsewhere on the machine falls on all of them.
fn medians(runs: usize, producers: usize) -> [Duration; CASES.len()] {
    let mut times: [Vec<Duration>; CASES.len()] = Default::default();
    for case in 0..CASES.len() {
        time_case(case, producers); // warm-up
    }
    for _ in 0..runs {
        for (case, times) in times.iter_mut().enumerate() {
            times.push(time_case(case, producers));
        }
    }
    times.map(|mut times| {
        times.sort();
        times[times.len() / 2]
    })
}

fn compare() {
    let runs = std::env::var("QUEUE_BENCH_RUNS")
        .ok()
        .and_then(|runs| runs.parse().ok())
        .unwrap_or(15usize)
        .max(1);
    let rate = |d: Duration| ITEMS as f64 / d.as_secs_f64() / 1e6;
    println!();
    println!(
        "Bounded queue, Block, capacity {CAPACITY}, 64-byte items, {ITEMS} items per run; \
         median of {runs} interleaved rounds (M items/s; ratio = weir / x, above 1.0 = weir faster)"
    );
    for producers in PRODUCERS {
        let times = medians(runs, producers);
        let [
            weir,
            weir_tokio_clock,
            tokio,
            flume,
            async_channel,
            weir_many,
            tokio_many,
        ] = times.map(rate);
        println!(
            "{producers} → 1: weir {weir:.2}  tokio mpsc {tokio:.2}  flume {flume:.2}  \
             async-channel {async_channel:.2}  | ratio vs tokio {:.2}, vs flume {:.2}, \
             vs async-channel {:.2}",
            weir / tokio,
            weir / flume,
            weir / async_channel
        );
        println!(
            "{producers} → 1, weir on tokio's clock (Clock::new): {weir_tokio_clock:.2}  \
             | ratio vs tokio {:.2}",
            weir_tokio_clock / tokio
        );
        println!(
            "{producers} → 1, recv_many({BATCH}): weir {weir_many:.2}  tokio mpsc {tokio_many:.2}  \
             | ratio vs tokio {:.2}",
            weir_many / tokio_many
        );
    }
}

/// `QUEUE_BENCH_PROFILE=case:producers[:runs]` (e.g. `weir:1:200`): runs only that
/// case, `runs` times (default 100), for a profiler (`perf record`, `valgrind
/// --tool=callgrind`); prints nothing else.
fn profile(spec: &str) {
    let mut parts = spec.split(':');
    let name = parts.next().unwrap_or_default();
    let case = CASES
        .iter()
        .position(|case| *case == name)
        .unwrap_or_else(|| panic!("QUEUE_BENCH_PROFILE: unknown case {name:?}; one of {CASES:?}"));
    let producers = parts.next().and_then(|p| p.parse().ok()).unwrap_or(1);
    let runs = parts
        .next()
        .and_then(|r| r.parse().ok())
        .unwrap_or(100usize);
    let total: Duration = (0..runs).map(|_| time_case(case, producers)).sum();
    println!(
        "{name}, {producers} → 1: {runs} runs, {:.2} M items/s on average",
        (ITEMS * runs) as f64 / total.as_secs_f64() / 1e6
    );
}

fn main() {
    if let Ok(spec) = std::env::var("QUEUE_BENCH_PROFILE") {
        profile(&spec);
        return;
    }
    divan::main();
    compare();
}
