//! loom models of weir-flow's concurrency code. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p weir-flow --release --test loom`.
#![cfg(loom)]

mod credit;
mod queue;
mod semaphore;
