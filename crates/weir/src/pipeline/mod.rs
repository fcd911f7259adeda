//! What every source and sink shares with the WAL, below all of them:
//!
//! - [`ingest`]: a source's way into the WAL: admission (tickets, the shared
//!   source → WAL channel), appends that resolve once durable;
//! - [`appends`]: ordered appends with several units in flight, reported durable in
//!   order (for sources that acknowledge in arrival order);
//! - [`driver`]: a sink's way out of the WAL: its cursor, reads, retries with backoff,
//!   rewinds, quarantining what it cannot encode, commits;
//! - [`filter`]: a sink's `where` expression, which the driver evaluates per record;
//! - [`sink`]: the [`Sink`] trait every sink implements for its driver;
//! - [`stats`]: the counters sources and sinks keep for `/status` and `/metrics`.
//!
//! Nothing here knows a source or sink type.

pub mod appends;
pub mod driver;
pub mod filter;
pub mod ingest;
pub mod sink;
pub mod stats;

pub use self::ingest::{AdmitError, Ingest, Reserved};
pub use self::sink::{Position, Sink, SinkBatch, SinkError, Unencodable, WireRecord, Written};
pub use self::stats::{Detail, SinkStats, SourceStats};

use tokio::sync::watch;

/// Resolves once `stop` turns true (or its sender is gone).
///
/// # Cancel safety
///
/// Cancel-safe: it only waits.
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
