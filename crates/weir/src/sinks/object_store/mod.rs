//! `type = "object_store"`: Parquet or NDJSON objects in S3, GCS, Azure, a local
//! directory or memory, uploaded concurrently through weir-flow's ordered stage, with
//! no loss and no duplicate objects across crashes.
//!
//! - [`config`](ObjectStoreConfig): its keys.
//! - `naming`: object names from the WAL's identity and each object's first offset.
//! - `journal`: each object's boundaries, key and upload id, durable before the store
//!   sees them.
//! - `shape`: the keys that shape an object's bytes or name, recorded with it, and the
//!   refusal to replay a recorded object under a config that would write it otherwise.
//! - `encode`: the open object's encoder (the Parquet sink's, or NDJSON).
//! - `store`: the stores, with the `object_store` crate's own retries off.
//! - `healthcheck`: the startup check, a probe PUT and DELETE of `_weir_healthcheck`;
//!   `credentials`: S3's credential chain, named in its failures.
//! - `shell`: the running sink ([`ObjectStoreSink`]): opening, the cursor's marks,
//!   failures and the [`Sink`](crate::pipeline::Sink) calls.
//! - `object`: the open object, from its first record to its close.
//! - `upload`: the upload stage's operations and the retry policy of every request.
//! - `recovery`: the journal at run time: appends, recovery, compaction.
//! - `stats`: the counters ([`ObjectStoreStats`]) and the `/status` details.

mod config;
mod credentials;
mod encode;
mod healthcheck;
mod journal;
mod naming;
mod object;
mod recovery;
mod shape;
mod shell;
mod stats;
mod store;
mod upload;

#[cfg(test)]
mod tests;

pub use self::config::{Format, Location, NdjsonCompression, ObjectStoreConfig};
pub use self::credentials::{AwsChain, AwsSource};
pub use self::healthcheck::PROBE;
pub use self::journal::JOURNAL_FILE;
pub use self::shell::ObjectStoreSink;
pub use self::stats::ObjectStoreStats;
pub use self::store::{LOCAL_UPLOADS_DIR, Store, StoreError};
