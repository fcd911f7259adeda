//! Typed files: the `schema` of a Parquet sink (or an object-store sink writing
//! Parquet) turns each record's JSON payload into declared, typed columns, when the
//! sink reads the WAL. The WAL keeps records as they arrived, so a sink added later, or
//! a schema changed later, replays the same records.
//!
//! - [`config`]: the keys (`schema.columns`, `schema.envelope`, `on_mismatch`,
//!   `unknown_fields`, `event_time`).
//! - [`decode`]: payloads into columns ([`Typed::decode`]), with the records that do
//!   not fit, and why.

pub mod config;
pub mod decode;
mod shape;
mod status;
mod tape;
mod types;

pub use self::decode::{Decoded, EXTRA, Typed, TypedStats};
pub use self::shape::output_field;
pub use self::status::register;
pub use self::types::{
    Column, ColumnType, Envelope, EventTime, OnMismatch, OnMissing, SchemaConfig, TimeFormat,
    UnknownFields, pointer_keys,
};

#[cfg(test)]
mod tests;
