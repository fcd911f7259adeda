//! The `blackhole` sink: counts records and discards them, optionally at a limited
//! `rate` (records per second) to play a slow downstream.

mod config;
mod core;
mod shell;

pub use self::config::BlackholeConfig;
pub use self::core::Pacer;
pub use self::shell::BlackholeSink;
