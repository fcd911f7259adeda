//! `type = "object_store"`: Parquet or NDJSON objects in S3, GCS, Azure or a local
//! directory, uploaded concurrently through the ordered stage. Not built yet:
//! [`ObjectStoreConfig`] reads and checks its keys, and the registry refuses the type.

mod config;

pub use self::config::{Format, ObjectStoreConfig};
