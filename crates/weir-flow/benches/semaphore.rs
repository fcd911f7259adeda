//! weir's FIFO semaphore against `tokio::sync::Semaphore`, in the same run.
//!
//! - `uncontended`: one task acquires and releases a permit, `OPS` times per sample
//!   (the fast path: nobody waits).
//! - `contended`: `TASKS` tasks on a multi-thread runtime share `PERMITS` permits and
//!   acquire and release `OPS / TASKS` times each per sample, in two shapes:
//!   `busy` (release at once: the tasks fight over the lock and wait now and then) and
//!   `waiting` (yield while holding, so nearly every acquire queues and is woken).
//!
//! weir's permits own a handle (`'static`), so the like-for-like baseline is tokio's
//! `acquire_owned` (an `Arc` clone per permit too); tokio's borrowed `acquire` is shown
//! for the uncontended case as well. After divan's tables, `main` measures each pair
//! again, alternating rounds, and prints `tokio time / weir time` (above 1: weir is
//! faster).
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

fn tokio_sem(total: u64) -> Arc<tokio::sync::Semaphore> {
    Arc::new(tokio::sync::Semaphore::new(total as usize))
}

/// The workloads, each running `OPS` acquire/release pairs.
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

    /// `TASKS` tasks; each yields while holding its permit if `hold`.
    pub async fn weir_contended(sem: &Semaphore, hold: bool) {
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let sem = sem.clone();
                tokio::spawn(async move {
                    for _ in 0..OPS / TASKS {
                        let permit = sem.acquire(1).await.expect("open");
                        if hold {
                            tokio::task::yield_now().await;
                        }
                        drop(black_box(permit));
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
    }

    /// `TASKS` tasks; each yields while holding its permit if `hold`.
    pub async fn tokio_contended(sem: &Arc<tokio::sync::Semaphore>, hold: bool) {
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let sem = Arc::clone(sem);
                tokio::spawn(async move {
                    for _ in 0..OPS / TASKS {
                        let permit = Arc::clone(&sem).acquire_owned().await.expect("open");
                        if hold {
                            tokio::task::yield_now().await;
                        }
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
        let (rt, sem) = (current_thread(), tokio_sem(1));
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

    #[divan::bench(args = ["busy", "waiting"])]
    fn weir_semaphore(bencher: Bencher, shape: &str) {
        let (rt, sem, hold) = (multi_thread(), weir(PERMITS), shape == "waiting");
        bencher
            .counter(ItemsCount::new(OPS))
            .bench_local(|| rt.block_on(work::weir_contended(&sem, hold)));
    }

    #[divan::bench(args = ["busy", "waiting"])]
    fn tokio_acquire_owned(bencher: Bencher, shape: &str) {
        let (rt, sem, hold) = (multi_thread(), tokio_sem(PERMITS), shape == "waiting");
        bencher
            .counter(ItemsCount::new(OPS))
            .bench_local(|| rt.block_on(work::tokio_contended(&sem, hold)));
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
        "{name:<44} weir {:>7.1} ns/op   tokio {:>7.1} ns/op   tokio/weir = {:.2}",
        per_op(weir),
        per_op(tokio),
        tokio.as_secs_f64() / weir.as_secs_f64()
    );
}

/// Measures each pair again, alternating rounds, and prints the ratios.
fn print_ratios() {
    const ROUNDS: usize = 101;
    println!("\nratios (median of {ROUNDS} alternating rounds of {OPS} acquire/release pairs):");

    let rt = current_thread();
    let (weir_sem, tokio_owned) = (weir(1), tokio_sem(1));
    let (mut weir_times, mut owned_times, mut borrowed_times) = (vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        weir_times.push(time(|| rt.block_on(work::weir_uncontended(&weir_sem))));
        owned_times.push(time(|| {
            rt.block_on(work::tokio_owned_uncontended(&tokio_owned))
        }));
        borrowed_times.push(time(|| {
            rt.block_on(work::tokio_borrowed_uncontended(&tokio_owned))
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
    for (shape, hold) in [("busy", false), ("waiting", true)] {
        let (weir_sem, tokio_owned) = (weir(PERMITS), tokio_sem(PERMITS));
        let (mut weir_times, mut tokio_times) = (vec![], vec![]);
        for _ in 0..ROUNDS {
            weir_times.push(time(|| rt.block_on(work::weir_contended(&weir_sem, hold))));
            tokio_times.push(time(|| {
                rt.block_on(work::tokio_contended(&tokio_owned, hold))
            }));
        }
        print_ratio(
            &format!("contended {shape} ({TASKS} tasks, {PERMITS} permits)"),
            median(weir_times),
            median(tokio_times),
        );
    }
}
