//! The `generator` source: seeded synthetic records at `rate` records per second.
//!
//! Batches of `batch_size` records are made on schedule (`rate = 0`: as fast as the WAL
//! admits). Under backpressure it waits for admission, and then catches up no faster
//! than admission allows, and by one second of records at most: after a longer stall
//! (backpressure, SIGSTOP) what it missed beyond that is never made, and counted
//! (`skipped_records`, `weir_generator_skipped_records_total`) and logged at WARN,
//! rate-limited. It never drops a record it made. With `count`, it stops after that
//! many records and shows `stopped`; the process keeps running, so the sinks drain and
//! `/status` stays up (stop it with SIGTERM). There is no setting to exit instead.

mod config;
mod core;
mod shell;

pub use self::config::GeneratorConfig;
pub use self::core::{RecordMaker, Schedule};
pub use self::shell::{Skipped, run};
