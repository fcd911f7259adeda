//! Sources: where records come from. Each writes into the WAL through an
//! [`Ingest`](crate::runtime::ingest::Ingest) handle and acknowledges (or answers) only
//! after the WAL reports its batch durable.
//!
//! One folder per source, with the same file names: `mod.rs` (the async shell: the
//! task that runs the source) and `core.rs` (its sans-IO logic, tested without a
//! runtime).
//!
//! | source | under backpressure |
//! |---|---|
//! | [`generator`] | waits for admission |
//! | [`file`] | waits for admission; remembers its byte position after each durable batch |
//! | [`http`] | answers 503 + `Retry-After` when admission fails within `admission_timeout` |
//! | [`mqtt`] | withholds QoS 1/2 acks (the broker stops at its window); QoS 0 drops the newest, counted |

pub mod file;
pub mod generator;
pub mod http;
pub mod mqtt;

use tokio::sync::watch;

/// Resolves once `stop` turns true (or its sender is gone).
///
/// # Cancel safety
///
/// Cancel-safe: it only waits.
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
