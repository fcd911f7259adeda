//! Sinks: where records go once they are durable in the WAL.

pub mod parquet;
