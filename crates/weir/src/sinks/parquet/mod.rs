//! The Parquet sink's file writer: records from the WAL into Parquet files that pyarrow,
//! DuckDB and Spark read as they are.
//!
//! [`ParquetFileWriter`] is synchronous (the runtime runs it on a blocking thread). It
//! writes the [schema](record_schema) documented in `schema.rs`, flushes row groups by
//! rows and bytes, rotates files by bytes and age, writes each file under a temporary
//! name and renames it only once it is complete and fsynced, and records in every
//! footer's key-value metadata the configuration hash and the WAL's `on_full` choice
//! ([`KEY_CONFIG_HASH`], [`KEY_ON_FULL`]) next to the WAL offsets it covers.
//!
//! A file whose rename was reported as [`Committed`] holds every record of its sink
//! through [`Committed::through_offset`]: the sink's cursor may move there.
//!
//! # Examples
//!
//! ```no_run
//! # use weir::sinks::parquet::{FooterMetadata, ParquetFileWriter, ParquetConfig};
//! # fn demo(dir: &std::path::Path, sink_config: &ParquetConfig, records: &[weir::record::Record], last_offset: u64, cursor_next_offset: u64) -> Result<(), Box<dyn std::error::Error>> {
//! use weir_wal::OnFull;
//! let footer = FooterMetadata { config_hash: "sha256:…".into(), on_full: OnFull::Block };
//! let mut writer = ParquetFileWriter::new(&dir, "lake", &sink_config, footer)?;
//! writer.resume_at(cursor_next_offset);
//! if let Some(done) = writer.write(records, last_offset)? {
//!     println!("the cursor may move to {}", done.through_offset);
//! }
//! writer.finish()?; // on shutdown
//! # Ok(())
//! # }
//! ```

mod config;
mod encoder;
mod error;
mod schema;
mod shell;
mod typed;
mod writer;

#[cfg(test)]
mod properties;
#[cfg(test)]
pub(crate) mod python_tests;
#[cfg(test)]
mod tests;

pub use self::config::{Compression, ParquetConfig, ParquetEncoding, parse_row_groups};
pub use self::encoder::{EncoderSettings, ParquetEncoder};
pub use self::error::ParquetSinkError;
pub use self::schema::record_schema;
pub use self::shell::{ParquetOutput, ParquetSink};
pub use self::typed::typed_schema;
pub use self::writer::{
    Committed, FooterMetadata, KEY_CONFIG_HASH, KEY_FIRST_OFFSET, KEY_LAST_OFFSET, KEY_ON_FULL,
    KEY_SOURCE_NAMES, KEY_WEIR_VERSION, ParquetFileWriter,
};
