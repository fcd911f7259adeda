//! The Arrow schema of weir's Parquet files, and the conversion of records into
//! Arrow record batches.
//!
//! | column | Arrow type | Parquet physical / logical type | nullable |
//! |---|---|---|---|
//! | `source` | `Utf8` | `BYTE_ARRAY` / `STRING` | no |
//! | `key` | `Utf8` | `BYTE_ARRAY` / `STRING` | no |
//! | `timestamp` | `Timestamp(Millisecond, "UTC")` | `INT64` / `TIMESTAMP(MILLIS, UTC)` | no |
//! | `payload` | `Binary` | `BYTE_ARRAY` | no |
//! | `attributes` | `Map<Utf8, Utf8>` (entries `key_value`, fields `key`, `value`) | `MAP` | no |
//!
//! The map's field names follow the Parquet specification (`key_value` / `key` /
//! `value`), so pyarrow, DuckDB and Spark read it as a map without renaming.

use std::sync::{Arc, LazyLock};

use arrow_array::builder::{
    BinaryBuilder, MapBuilder, MapFieldNames, StringBuilder, TimestampMillisecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

use crate::record::Record;

/// The name of the entries field of the `attributes` map.
const MAP_ENTRIES: &str = "key_value";

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("source", DataType::Utf8, false),
        Field::new("key", DataType::Utf8, false),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            false,
        ),
        Field::new("payload", DataType::Binary, false),
        Field::new("attributes", attributes_type(), false),
    ]))
});

/// The schema every weir Parquet file has (see the module docs for the table).
pub fn record_schema() -> SchemaRef {
    Arc::clone(&SCHEMA)
}

fn map_key_field() -> Field {
    Field::new("key", DataType::Utf8, false)
}

fn map_value_field() -> Field {
    Field::new("value", DataType::Utf8, false)
}

fn attributes_type() -> DataType {
    let entries = Field::new(
        MAP_ENTRIES,
        DataType::Struct(Fields::from(vec![map_key_field(), map_value_field()])),
        false,
    );
    DataType::Map(Arc::new(entries), false)
}

/// Builds one record batch from records, reusing its builders' buffers between
/// batches where Arrow allows.
pub(super) struct BatchBuilder {
    source: StringBuilder,
    key: StringBuilder,
    timestamp: TimestampMillisecondBuilder,
    payload: BinaryBuilder,
    attributes: MapBuilder<StringBuilder, StringBuilder>,
}

/// A builder of the `attributes` map column.
pub(super) fn attributes_builder() -> MapBuilder<StringBuilder, StringBuilder> {
    let names = MapFieldNames {
        entry: MAP_ENTRIES.to_owned(),
        key: "key".to_owned(),
        value: "value".to_owned(),
    };
    MapBuilder::new(Some(names), StringBuilder::new(), StringBuilder::new())
        .with_keys_field(map_key_field())
        .with_values_field(map_value_field())
}

/// The `attributes` map column's field.
pub(super) fn attributes_field() -> Field {
    Field::new("attributes", attributes_type(), false)
}

impl BatchBuilder {
    pub(super) fn new() -> Self {
        let attributes = attributes_builder();
        Self {
            source: StringBuilder::new(),
            key: StringBuilder::new(),
            timestamp: TimestampMillisecondBuilder::new().with_timezone("UTC"),
            payload: BinaryBuilder::new(),
            attributes,
        }
    }

    /// Converts `records` into one batch of the [`record_schema`].
    pub(super) fn build(&mut self, records: &[Record]) -> Result<RecordBatch, ArrowError> {
        for record in records {
            self.source.append_value(&record.source);
            self.key.append_value(&record.key);
            self.timestamp.append_value(record.timestamp_ms);
            self.payload.append_value(&record.payload);
            for (name, value) in &record.attributes {
                self.attributes.keys().append_value(name);
                self.attributes.values().append_value(value);
            }
            self.attributes.append(true)?;
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.source.finish()),
            Arc::new(self.key.finish()),
            Arc::new(self.timestamp.finish()),
            Arc::new(self.payload.finish()),
            Arc::new(self.attributes.finish()),
        ];
        RecordBatch::try_new(record_schema(), columns)
    }
}

/// The bytes a record adds to a batch being built: what the chunking of a write
/// counts against `row_group_bytes`.
pub(super) fn record_weight(record: &Record) -> u64 {
    let attributes: usize = record
        .attributes
        .iter()
        .map(|(name, value)| name.len() + value.len() + 8)
        .sum();
    // Offsets (4 bytes each for source, key, payload, map) and the 8-byte timestamp.
    let fixed = 4 * 4 + 8;
    (record.source.len() + record.key.len() + record.payload.len() + attributes + fixed) as u64
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::TimestampMillisecondType;

    use super::*;

    fn record(key: &str, attributes: &[(&str, &str)]) -> Record {
        Record {
            source: "gen".into(),
            key: key.to_owned(),
            timestamp_ms: 1_700_000_000_123,
            payload: bytes::Bytes::from_static(b"\x00\xffpayload"),
            attributes: attributes
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn batches_match_the_schema_and_keep_every_field() {
        let mut builder = BatchBuilder::new();
        let records = [
            record("a", &[]),
            record("b", &[("mqtt.qos", "1"), ("x", "y")]),
        ];
        let batch = builder.build(&records).expect("valid batch");
        assert_eq!(batch.schema(), record_schema());
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(batch.column(1).as_string::<i32>().value(1), "b");
        let ts = batch.column(2).as_primitive::<TimestampMillisecondType>();
        assert_eq!(ts.value(0), 1_700_000_000_123);
        assert_eq!(
            batch.column(3).as_binary::<i32>().value(0),
            b"\x00\xffpayload"
        );
        let map = batch.column(4).as_map();
        assert_eq!(map.value_length(0), 0);
        assert_eq!(map.value_length(1), 2);
        let entries = map.value(1);
        assert_eq!(entries.column(0).as_string::<i32>().value(0), "mqtt.qos");
        assert_eq!(entries.column(1).as_string::<i32>().value(1), "y");
    }

    #[test]
    fn builders_are_reset_between_batches() {
        let mut builder = BatchBuilder::new();
        builder.build(&[record("a", &[("k", "v")])]).expect("first");
        let second = builder.build(&[record("b", &[])]).expect("second");
        assert_eq!(second.num_rows(), 1);
        assert_eq!(second.column(4).as_map().value_length(0), 0);
    }

    #[test]
    fn weight_counts_payload_and_attributes() {
        let small = record_weight(&record("a", &[]));
        let larger = record_weight(&record("a", &[("name", "value")]));
        assert_eq!(larger - small, 4 + 5 + 8);
        // "gen" + "a" + 9 payload bytes + 4 offsets of 4 bytes + an 8-byte timestamp.
        assert_eq!(small, 3 + 1 + 9 + 16 + 8);
    }
}
