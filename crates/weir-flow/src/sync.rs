//! Synchronisation types, swapped for loom's models under `--cfg loom`.
//!
//! Concurrency code imports `Arc`, `Mutex` and atomics from here, so the loom tests
//! (`RUSTFLAGS="--cfg loom" cargo test -p weir-flow --test loom --release`) explore
//! the same code that ships.
#![allow(unused_imports, dead_code)]

#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard, atomic};

#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard, atomic};
