//! weir's FIFO semaphore against `tokio::sync::Semaphore`, in the same run.
//!
//! - `uncontended`: one task acquires and releases a permit, `OPS` times per sample
//!   (the fast path: nobody waits).
//! - `contended`: `TASKS` tasks on a multi-thread runtime share `PERMITS` permits; each
//!   acquires, yields while holding (so others queue and are woken), and releases,
//!   `OPS / TASKS` times per task per sample.
//!
//! weir's permits own a handle (`'static`), so the like-for-like baseline is tokio's
//! `acquire_owned` (an `Arc` clone per permit too); tokio's borrowed `acquire` is shown
//! as well. After divan's tables, `main` measures each pair again, interleaved, and
//! prints `tokio time / weir time` (above 1: weir is faster).
//!
//! Run: `cargo bench -p weir-flow --bench semaphore` (add `-- --sample-count 20` for a
//! quick look).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use divan::Bencher;
use divan::counter::ItemsCount;
use weir_flow::semaphore::{Semaphore, SemaphoreConfig};

const OPS: usize = 1_000;
const TASKS: usize = 8;
const PERMITS: u64 = 2;

fn main() {
    divan::main();
    print_ratios();
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime")
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .build()
        .expect("a multi-thread runtime")
}

fn weir(total: u64) -> Semaphore {
    Semaphore::new(SemaphoreConfig::new(total).max_waiters(TASKS))
}

/// The workloads, one function per (contender, shape), each running `OPS` operations.
mod work {
    use super::*;

    pub async fn weir_uncontended(sem: &Semaphore) {
        for _ in 0..OPS {
            let permit = sem.acquire(1).await.expect("open");
            drop(black_box(permit));
        }
    }

    pub async fn tokio_owned_uncontended(sem: &Arc<tokio::sync::Semaphore>) {
        for _ in 0..OPS {
            let permit = Arc::clone(sem).acquire_owned().await.expect("open");
            drop(black_box(permit));
        }
    }

    pub async fn tokio_borrowed_uncontended(sem: &tokio::sync::Semaphore) {
        for _ in 0..OPS {
            let permit = sem.acquire().await.expect("open");
            drop(black_box(permit));
        }
    }

    pub async fn weir_contended(sem: &Semaphore) {
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let sem = sem.clone();
                tokio::spawn(async move {
                    for _ in 0..OPS / TASKS {
                        let permit = sem.acquire(1).await.expect("open");
                        tokio::task::yield_now().await;
                        drop(black_box(permit));
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
    }

    pub async fn tokio_contended(sem: &Arc<tokio::sync::Semaphore>) {
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let sem = Arc::clone(sem);
                tokio::spawn(async move {
                    for _ in 0..OPS / TASKS {
                        let permit = Arc::clone(&sem).acquire_owned().await.expect("open");
                        tokio::task::yield_now().await;
                        drop(black_box(permit));
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
    }
}

mod uncontended {
    use super::*;

    #[divan::bench]
    fn weir_semaphore(bencher: Bencher) {
        let (rt, sem) = (current_thread(), weir(1));
        bencher
            .counter(ItemsCount::new(OPS))
            .bench_local(|| rt.block_on(work::weir_uncontended(&sem)));
    }

    #[divan::bench]
    fn tokio_acquire_owned(bencher: Bencher) {
        let (rt, sem) = (current_thread(), Arc::new(tokio::sync::Semaphore::new(1)));
        bencher
            .counter(ItemsCount::new(OPS))
            .bench_local(|| rt.block_on(work::tokio_owned_uncontended(&sem)));
    }

    #[divan::bench]
    fn tokio_acquire(bencher: Bencher) {
        let (rt, sem) = (current_thread(), tokio::sync::Semaphore::new(1));
        bencher
            .counter(ItemsCount::new(OPS))
            .bench_local(|| rt.block_on(work::tokio_borrowed_uncontended(&sem)));
    }
}

mod contended {
    use super::*;

    #[divan::bench]
    fn weir_semaphore(bencher: Bencher) {
        let (rt, sem) = (multi_thread(), weir(PERMITS));
        bencher
            .counter(ItemsCount::new(OPS))
            .bench_local(|| rt.block_on(work::weir_contended(&sem)));
    }

    #[divan::bench]
    fn tokio_acquire_owned(bencher: Bencher) {
        let (rt, sem) = (
            multi_thread(),
            Arc::new(tokio::sync::Semaphore::new(PERMITS as usize)),
        );
        bencher
            .counter(ItemsCount::new(OPS))
            .bench_local(|| rt.block_on(work::tokio_contended(&sem)));
    }
}

/// How long `run` takes.
fn time(run: impl FnOnce()) -> Duration {
    let start = Instant::now();
    run();
    start.elapsed()
}

/// The median of `times`.
fn median(mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn print_ratio(name: &str, weir: Duration, tokio: Duration) {
    let per_op = |d: Duration| d.as_nanos() as f64 / OPS as f64;
    println!(
        "{name:<40} weir {:>8.1} ns/op   tokio {:>8.1} ns/op   tokio/weir = {:.2}",
        per_op(weir),
        per_op(tokio),
        tokio.as_secs_f64() / weir.as_secs_f64()
    );
}

/// Measures each pair again, alternating rounds, and prints the ratios.
fn print_ratios() {
    const ROUNDS: usize = 101;
    println!("\nratios (median of {ROUNDS} rounds of {OPS} operations each):");

    let rt = current_thread();
    let weir_sem = weir(1);
    let tokio_sem = Arc::new(tokio::sync::Semaphore::new(1));
    let mut weir_times = Vec::new();
    let mut owned_times = Vec::new();
    let mut borrowed_times = Vec::new();
    for _ in 0..ROUNDS {
        weir_times.push(time(|| rt.block_on(work::weir_uncontended(&weir_sem))));
        owned_times.push(time(|| {
            rt.block_on(work::tokio_owned_uncontended(&tokio_sem))
        }));
        borrowed_times.push(time(|| {
            rt.block_on(work::tokio_borrowed_uncontended(&tokio_sem))
        }));
    }
    let weir_uncontended = median(weir_times);
    print_ratio(
        "uncontended vs tokio acquire_owned",
        weir_uncontended,
        median(owned_times),
    );
    print_ratio(
        "uncontended vs tokio acquire (borrowed)",
        weir_uncontended,
        median(borrowed_times),
    );

    let rt = multi_thread();
    let weir_sem = weir(PERMITS);
    let tokio_sem = Arc::new(tokio::sync::Semaphore::new(PERMITS as usize));
    let mut weir_times = Vec::new();
    let mut tokio_times = Vec::new();
    for _ in 0..ROUNDS {
        weir_times.push(time(|| rt.block_on(work::weir_contended(&weir_sem))));
        tokio_times.push(time(|| rt.block_on(work::tokio_contended(&tokio_sem))));
    }
    print_ratio(
        &format!("contended ({TASKS} tasks, {PERMITS} permits) vs acquire_owned"),
        median(weir_times),
        median(tokio_times),
    );
}
