//! Typed Parquet files: the envelope columns a schema keeps, then its declared columns
//! ([`crate::sinks::schema`]), one row per record that fits.
//!
//! | column | Arrow type | nullable |
//! |---|---|---|
//! | `source`, `key` | `Utf8` | no |
//! | `timestamp` | `Timestamp(Microsecond, "UTC")`: the event time, else the ingest time | no |
//! | `attributes` | the envelope's map | no |
//! | `payload` | `Binary` | no |
//! | the declared columns | their types | unless `required` |
//! | `_extra` | `Utf8` (a JSON object), with `unknown_fields = "extra"` | yes |

use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, StringBuilder, TimestampMicrosecondBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};

use super::schema::{attributes_builder, attributes_field};
use crate::record::Record;
use crate::sinks::schema::{Envelope, Typed};

/// Builds the record batches of a typed file.
pub(super) struct TypedBuilder {
    typed: Arc<Typed>,
    schema: SchemaRef,
}

/// The schema of a typed file for `typed`.
pub fn typed_schema(typed: &Typed) -> SchemaRef {
    let mut fields: Vec<Field> = typed
        .config()
        .envelope
        .iter()
        .map(|e| match e {
            Envelope::Source => Field::new("source", DataType::Utf8, false),
            Envelope::Key => Field::new("key", DataType::Utf8, false),
            Envelope::Timestamp => Field::new(
                "timestamp",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
            Envelope::Attributes => attributes_field(),
            Envelope::Payload => Field::new("payload", DataType::Binary, false),
        })
        .collect();
    fields.extend(typed.fields().iter().cloned());
    Arc::new(Schema::new(fields))
}

/// A batch of the records that fit, and the others with why.
pub(super) struct Built {
    pub batch: RecordBatch,
    pub rejected: Vec<(usize, String)>,
}

impl TypedBuilder {
    pub(super) fn new(typed: Arc<Typed>) -> Self {
        let schema = typed_schema(&typed);
        TypedBuilder { typed, schema }
    }

    /// Converts `records` into one batch; the ones that do not fit are left out.
    pub(super) fn build(&mut self, records: &[Record]) -> Result<Built, ArrowError> {
        let decoded = self.typed.decode(records)?;
        let kept: Vec<&Record> = match &decoded.keep {
            Some(keep) => records
                .iter()
                .zip(keep.values().iter())
                .filter_map(|(r, k)| k.then_some(r))
                .collect(),
            None => records.iter().collect(),
        };
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        for e in &self.typed.config().envelope {
            columns.push(match e {
                Envelope::Source => {
                    let mut b = StringBuilder::new();
                    kept.iter().for_each(|r| b.append_value(&r.source));
                    Arc::new(b.finish())
                }
                Envelope::Key => {
                    let mut b = StringBuilder::new();
                    kept.iter().for_each(|r| b.append_value(&r.key));
                    Arc::new(b.finish())
                }
                Envelope::Timestamp => {
                    let mut b =
                        TimestampMicrosecondBuilder::with_capacity(kept.len()).with_timezone("UTC");
                    match &decoded.event_time_us {
                        Some(times) => b.append_slice(times),
                        None => kept
                            .iter()
                            .for_each(|r| b.append_value(r.timestamp_ms.saturating_mul(1000))),
                    }
                    Arc::new(b.finish())
                }
                Envelope::Attributes => {
                    let mut b = attributes_builder();
                    for r in &kept {
                        for (name, value) in &r.attributes {
                            b.keys().append_value(name);
                            b.values().append_value(value);
                        }
                        b.append(true)?;
                    }
                    Arc::new(b.finish())
                }
                Envelope::Payload => {
                    let mut b = BinaryBuilder::new();
                    kept.iter().for_each(|r| b.append_value(&r.payload));
                    Arc::new(b.finish())
                }
            });
        }
        columns.extend(decoded.columns);
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns)?;
        Ok(Built {
            batch,
            rejected: decoded.rejected,
        })
    }
}
