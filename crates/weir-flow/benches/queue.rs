//! Throughput of weir's bounded queue (`OnFull::Block`) against `tokio::sync::mpsc`,
//! `flume` and `async-channel`, all bounded at 1024 items of 64 bytes, on a
//! two-worker tokio runtime: 1 producer → 1 consumer and 4 producers → 1 consumer,
//! 100,000 items per iteration.
//!
//! `cargo bench -p weir-flow --bench queue` runs divan, then a short timed comparison
//! that prints throughput ratios (weir / each alternative; above 1.0 means weir is
//! faster). `QUEUE_BENCH_RUNS` sets the comparison's runs per case (default 15; the
//! median is reported).

use std::hint::black_box;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use weir_flow::queue::{Capacity, OnFull, QueueConfig, channel};

const ITEMS: usize = 100_000;
const CAPACITY: usize = 1024;
const PRODUCERS: [usize; 2] = [1, 4];

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

/// Median wall time of `runs` runs of `case` (after one warm-up run).
fn median<F: std::future::Future<Output = usize>>(runs: usize, case: impl Fn() -> F) -> Duration {
    RUNTIME.block_on(case());
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            black_box(RUNTIME.block_on(case()));
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn compare() {
    let runs = std::env::var("QUEUE_BENCH_RUNS")
        .ok()
        .and_then(|runs| runs.parse().ok())
        .unwrap_or(15usize)
        .max(1);
    println!();
    println!(
        "Bounded queue, Block, capacity {CAPACITY}, 64-byte items, {ITEMS} items per run, median of {runs} runs"
    );
    println!(
        "{:<12} {:>14} {:>14} {:>14} {:>14}",
        "producers", "weir", "tokio mpsc", "flume", "async-channel"
    );
    for producers in PRODUCERS {
        let weir = median(runs, || weir(producers));
        let tokio = median(runs, || tokio_mpsc(producers));
        let flume = median(runs, || flume(producers));
        let async_channel = median(runs, || async_channel(producers));
        let rate = |d: Duration| format!("{:.1} M/s", ITEMS as f64 / d.as_secs_f64() / 1e6);
        println!(
            "{:<12} {:>14} {:>14} {:>14} {:>14}",
            format!("{producers} → 1"),
            rate(weir),
            rate(tokio),
            rate(flume),
            rate(async_channel)
        );
        let ratio = |other: Duration| other.as_secs_f64() / weir.as_secs_f64();
        println!(
            "{:<12} {:>14} {:>14.2} {:>14.2} {:>14.2}",
            "  ratio",
            "weir / x:",
            ratio(tokio),
            ratio(flume),
            ratio(async_channel)
        );
    }
}

fn main() {
    divan::main();
    compare();
}
