//! [`ParquetEncoder`]: records into one Parquet file written to any [`Write`] output.
//! The Parquet sink writes it to a local file, the object-store sink to the parts of an
//! upload; both get the same schema, row groups and footer.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;

use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression as ParquetCompression, Encoding, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use super::config::{Compression, ParquetEncoding};
use super::schema::{BatchBuilder, record_schema, record_weight};
use super::typed::{TypedBuilder, typed_schema};
use super::writer::{
    FooterMetadata, KEY_CONFIG_HASH, KEY_FIRST_OFFSET, KEY_LAST_OFFSET, KEY_ON_FULL,
    KEY_SOURCE_NAMES, KEY_WEIR_VERSION,
};
use crate::pipeline::Unencodable;
use crate::record::{EncodeError, Record};
use crate::sinks::schema::{SchemaConfig, Typed, TypedStats};

/// Largest batch converted to Arrow at once, whatever `row_group_bytes` says: Arrow's
/// string and binary columns use 32-bit offsets.
const MAX_CHUNK_BYTES: u64 = 512 * 1024 * 1024;

/// How every file of a sink is encoded: writer properties, row-group bounds, and the
/// schema (the envelope with the payload, or typed columns).
#[derive(Debug, Clone)]
pub struct EncoderSettings {
    properties: WriterProperties,
    row_group_rows: usize,
    row_group_bytes: u64,
    typed: Option<Arc<Typed>>,
}

impl EncoderSettings {
    /// The settings of `encoding` (`row_group_rows`, `row_group_bytes`, `compression`),
    /// with typed columns when a `schema` is given.
    pub fn new(encoding: &ParquetEncoding, schema: Option<&SchemaConfig>) -> Self {
        let row_group_rows = encoding.row_group_rows.get() as usize;
        let row_group_bytes = encoding.row_group_bytes.bytes();
        let typed = schema.map(|s| Arc::new(Typed::new(s.clone())));
        let file_schema = match &typed {
            Some(typed) => typed_schema(typed),
            None => record_schema(),
        };
        let mut builder = WriterProperties::builder()
            .set_compression(compression(encoding.compression))
            .set_max_row_group_row_count(Some(row_group_rows))
            .set_max_row_group_bytes(Some(usize::try_from(row_group_bytes).unwrap_or(usize::MAX)))
            .set_created_by(format!("weir {}", env!("CARGO_PKG_VERSION")));
        // Times mostly grow from row to row: their differences, bit-packed, take a
        // fraction of the plain values or a dictionary of them.
        for path in time_columns(file_schema.fields(), &[]) {
            builder = builder
                .set_column_dictionary_enabled(path.clone(), false)
                .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
        }
        Self {
            properties: builder.build(),
            row_group_rows,
            row_group_bytes,
            typed,
        }
    }

    /// The typed schema's counters, when there is one.
    pub fn typed_stats(&self) -> Option<&Arc<TypedStats>> {
        self.typed.as_ref().map(|t| t.stats())
    }
}

/// How records become batches: the envelope with the payload, or typed columns.
enum Rows {
    Envelope(Box<BatchBuilder>),
    Typed(TypedBuilder),
}

/// One Parquet file being encoded into `W`.
///
/// Row groups are flushed at `row_group_rows` rows or when the buffered row group
/// reaches `row_group_bytes`; records are converted to Arrow in chunks of at most those
/// bounds, so the encoder holds about two row groups (plus the encoders' fixed buffers,
/// about 80 KiB). Flushed row groups go to `W` at once.
pub struct ParquetEncoder<W: Write + Send> {
    writer: ArrowWriter<W>,
    rows_builder: Rows,
    row_group_rows: usize,
    row_group_bytes: u64,
    rows: u64,
    /// Names of the sources seen; bounded by the number of configured sources.
    sources: BTreeSet<Arc<str>>,
}

impl<W: Write + Send> std::fmt::Debug for ParquetEncoder<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetEncoder")
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl<W: Write + Send> ParquetEncoder<W> {
    /// Starts a file in `output` (the header is written at once).
    ///
    /// # Errors
    ///
    /// The encoder's error if the header cannot be written.
    pub fn new(output: W, settings: &EncoderSettings) -> Result<Self, ParquetError> {
        let (schema, rows_builder) = match &settings.typed {
            Some(typed) => (
                typed_schema(typed),
                Rows::Typed(TypedBuilder::new(Arc::clone(typed))),
            ),
            None => (
                record_schema(),
                Rows::Envelope(Box::new(BatchBuilder::new())),
            ),
        };
        let writer = ArrowWriter::try_new(output, schema, Some(settings.properties.clone()))?;
        Ok(Self {
            writer,
            rows_builder,
            row_group_rows: settings.row_group_rows,
            row_group_bytes: settings.row_group_bytes,
            rows: 0,
            sources: BTreeSet::new(),
        })
    }

    /// Appends `records` (row groups that fill up are flushed to the output). With a
    /// schema, the records that do not fit it go to `rejects`, with why.
    ///
    /// # Errors
    ///
    /// The encoder's or the output's error; the file is then unusable.
    pub fn append(
        &mut self,
        records: &[Record],
        rejects: &mut Vec<Unencodable>,
    ) -> Result<(), ParquetError> {
        let chunk_bytes = self.row_group_bytes.min(MAX_CHUNK_BYTES);
        let mut rest = records;
        while !rest.is_empty() {
            let mut len = 0;
            let mut bytes = 0;
            while len < rest.len() && len < self.row_group_rows && (len == 0 || bytes < chunk_bytes)
            {
                bytes += record_weight(&rest[len]);
                len += 1;
            }
            let (chunk, tail) = rest.split_at(len);
            rest = tail;
            let batch = match &mut self.rows_builder {
                Rows::Envelope(b) => b.build(chunk).map_err(ParquetError::from)?,
                Rows::Typed(b) => {
                    let built = b.build(chunk).map_err(ParquetError::from)?;
                    for (i, reason) in built.rejected {
                        rejects.push(Unencodable {
                            record: chunk[i].clone(),
                            reason: EncodeError::Schema(reason),
                        });
                    }
                    built.batch
                }
            };
            self.rows += batch.num_rows() as u64;
            self.writer.write(&batch)?;
            if self.writer.memory_size() as u64 >= self.row_group_bytes {
                self.writer.flush()?;
            }
            for record in chunk {
                if !self.sources.contains(&record.source) {
                    self.sources.insert(Arc::clone(&record.source));
                }
            }
        }
        Ok(())
    }

    /// Rows appended.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Bytes the unflushed row group holds in memory.
    pub fn buffered_bytes(&self) -> u64 {
        self.writer.memory_size() as u64
    }

    /// The file's size so far: bytes written plus the row group in progress.
    pub fn size(&self) -> u64 {
        (self.writer.bytes_written() + self.writer.in_progress_size()) as u64
    }

    /// The output, e.g. to take the bytes flushed so far.
    pub fn output_mut(&mut self) -> &mut W {
        self.writer.inner_mut()
    }

    /// Writes the last row group and the footer, whose key-value metadata records
    /// `footer`, the WAL offsets `first..=last` the file covers, its sources and weir's
    /// version; returns the output.
    ///
    /// # Errors
    ///
    /// The encoder's or the output's error.
    pub fn finish(
        mut self,
        footer: &FooterMetadata,
        first: u64,
        last: u64,
    ) -> Result<W, ParquetError> {
        let sources: Vec<&str> = self.sources.iter().map(|name| &**name).collect();
        let entries = [
            (KEY_CONFIG_HASH, footer.config_hash.clone()),
            (KEY_ON_FULL, footer.on_full.as_str().to_owned()),
            (KEY_FIRST_OFFSET, first.to_string()),
            (KEY_LAST_OFFSET, last.to_string()),
            (
                KEY_SOURCE_NAMES,
                serde_json::to_string(&sources).expect("a list of strings serializes"),
            ),
            (KEY_WEIR_VERSION, env!("CARGO_PKG_VERSION").to_owned()),
        ];
        for (key, value) in entries {
            self.writer
                .append_key_value_metadata(KeyValue::new(key.to_owned(), value));
        }
        self.writer.into_inner()
    }
}

/// The Parquet paths of the timestamp columns among `fields` (in structs too).
fn time_columns(fields: &arrow_schema::Fields, prefix: &[String]) -> Vec<ColumnPath> {
    let mut paths = Vec::new();
    for f in fields {
        let mut path = prefix.to_vec();
        path.push(f.name().clone());
        match f.data_type() {
            arrow_schema::DataType::Timestamp(..) => paths.push(ColumnPath::new(path)),
            arrow_schema::DataType::Struct(children) => paths.extend(time_columns(children, &path)),
            _ => {}
        }
    }
    paths
}

fn compression(compression: Compression) -> ParquetCompression {
    match compression {
        Compression::Zstd => ParquetCompression::ZSTD(ZstdLevel::default()),
        Compression::Snappy => ParquetCompression::SNAPPY,
        Compression::None => ParquetCompression::UNCOMPRESSED,
    }
}
