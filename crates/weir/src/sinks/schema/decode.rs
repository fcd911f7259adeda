//! Payloads into typed columns: arrow-json's tape decoder reads every payload of a
//! batch at once into the JSON shape the pointers describe (nested objects), with two
//! decoders of weir's own for what arrow-json lacks (timestamps in a declared format,
//! and `json` columns that keep a value as JSON text); the declared columns are then
//! taken out of that shape, defaults filled, required values checked.
//!
//! One value that does not fit fails arrow-json's whole batch, so a failed batch is
//! decoded again record by record: a record that fails alone is the one, and its
//! error names the field. It goes to the quarantine with the column, the pointer and
//! the value's JSON type, or (`on_mismatch = "null"`) is decoded once more with the
//! values that do not fit read as null.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_array::builder::StringBuilder;
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, StructArray};
use arrow_json::ReaderBuilder;
use arrow_json::reader::Decoder;
use arrow_schema::{ArrowError, DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

use super::SchemaConfig;
use super::shape::{
    Node, add_leaves, data_type, fill, find_column, json_type, null_row, object_at, output_field,
    plain, utc, value_at,
};
use super::tape::{Factory, TIME};
use super::types::{Column, ColumnType, OnMismatch, UnknownFields};
use crate::record::Record;

/// The column of fields the schema does not name (`unknown_fields = "extra"`).
pub const EXTRA: &str = "_extra";

/// What [`Typed::decode`] made of a batch of records.
#[derive(Debug)]
pub struct Decoded {
    /// The declared columns (then `_extra`), for the kept records.
    pub columns: Vec<ArrayRef>,
    /// The event time of each kept record, in µs, when `event_time` is set.
    pub event_time_us: Option<Vec<i64>>,
    /// Which records are kept (all of them when `None`).
    pub keep: Option<BooleanArray>,
    /// The records that do not fit: their index and why.
    pub rejected: Vec<(usize, String)>,
    /// Records kept with values read as null (`on_mismatch = "null"`).
    pub nulled: u64,
    /// Records whose event time was missing and took their ingest time.
    pub ingest_timed: u64,
}

/// What a typed sink counts, for `/status` and `/metrics`.
#[derive(Debug, Default)]
pub struct TypedStats {
    /// Records sent to the quarantine: a value that did not fit, a required value
    /// missing, a payload that is not a JSON object, an event time missing under
    /// `on_missing = "quarantine"`.
    pub rejected: AtomicU64,
    /// Records kept with values read as null (`on_mismatch = "null"`).
    pub nulled: AtomicU64,
    /// Records whose event time was missing or unreadable and took their ingest time.
    pub ingest_timed: AtomicU64,
}

impl TypedStats {
    /// The counts, for `/status`.
    pub fn status(&self) -> serde_json::Value {
        serde_json::json!({
            "rejected": self.rejected.load(Ordering::Relaxed),
            "nulled": self.nulled.load(Ordering::Relaxed),
            "ingest_timed": self.ingest_timed.load(Ordering::Relaxed),
        })
    }
}

/// A compiled [`SchemaConfig`]: its decode shape and its output columns.
#[derive(Debug)]
pub struct Typed {
    config: SchemaConfig,
    decode: SchemaRef,
    event: Option<SchemaRef>,
    fields: Vec<Field>,
    stats: Arc<TypedStats>,
}

impl Typed {
    /// Compiles `config` (valid: checked when it was read).
    pub fn new(config: SchemaConfig) -> Self {
        let mut root = Node::Object(Vec::new());
        add_leaves(&mut root, &config.columns, &[]);
        let decode = Arc::new(Schema::new(root.fields()));
        let event = config.event_time.as_ref().map(|e| {
            let mut root = Node::Object(Vec::new());
            let field = Field::new("_", DataType::Timestamp(TimeUnit::Microsecond, utc()), true)
                .with_metadata(HashMap::from([(
                    TIME.to_owned(),
                    e.format.text().to_owned(),
                )]));
            root.insert(&e.path, field);
            Arc::new(Schema::new(root.fields()))
        });
        let mut fields: Vec<Field> = config.columns.iter().map(output_field).collect();
        if config.unknown_fields == UnknownFields::Extra {
            fields.push(Field::new(EXTRA, DataType::Utf8, true));
        }
        Typed {
            config,
            decode,
            event,
            fields,
            stats: Arc::default(),
        }
    }

    /// Its counters.
    pub fn stats(&self) -> &Arc<TypedStats> {
        &self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &SchemaConfig {
        &self.config
    }

    /// The declared columns' fields (then `_extra`), as the files have them.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    fn decoder(schema: &SchemaRef, rows: usize, lenient: bool) -> Decoder {
        ReaderBuilder::new(Arc::clone(schema))
            .with_batch_size(rows.max(1))
            .with_coerce_primitive(true)
            .with_ignore_type_conflicts(lenient)
            .with_decoder_factory(Arc::new(Factory { lenient }))
            .build_decoder()
            .expect("the decode schema is built from valid types")
    }

    /// Decodes `records` at once; `None` when one of them does not fit.
    fn decode_all(schema: &SchemaRef, records: &[Record], lenient: bool) -> Option<RecordBatch> {
        let mut decoder = Self::decoder(schema, records.len(), lenient);
        for r in records {
            decoder.decode(&r.payload).ok()?;
            decoder.decode(b"\n").ok()?;
        }
        let batch = decoder.flush().ok()??;
        (batch.num_rows() == records.len()).then_some(batch)
    }

    /// Decodes one record; its error says why it does not fit.
    fn decode_one(
        schema: &SchemaRef,
        record: &Record,
        lenient: bool,
    ) -> Result<RecordBatch, ArrowError> {
        let mut decoder = Self::decoder(schema, 1, lenient);
        decoder.decode(&record.payload)?;
        decoder.decode(b"\n")?;
        match decoder.flush()? {
            Some(batch) if batch.num_rows() == 1 => Ok(batch),
            _ => Err(ArrowError::JsonError("the payload is empty".into())),
        }
    }

    /// Decodes `records` into the declared columns.
    pub fn decode(&self, records: &[Record]) -> Result<Decoded, ArrowError> {
        let mut rejected = Vec::new();
        let mut nulled = 0;
        let batch = match Self::decode_all(&self.decode, records, false) {
            Some(batch) => batch,
            None => {
                // One by one: the records that fail alone are the ones.
                let mut rows = Vec::with_capacity(records.len());
                for (i, r) in records.iter().enumerate() {
                    match Self::decode_one(&self.decode, r, false) {
                        Ok(b) => rows.push(b),
                        Err(e) => {
                            let lenient = (self.config.on_mismatch == OnMismatch::Null)
                                .then(|| Self::decode_one(&self.decode, r, true).ok())
                                .flatten();
                            match lenient {
                                Some(b) => {
                                    nulled += 1;
                                    rows.push(b);
                                }
                                None => {
                                    rejected.push((i, self.reason(&e, r)));
                                    rows.push(RecordBatch::new_empty(Arc::clone(&self.decode)));
                                }
                            }
                        }
                    }
                }
                // A rejected record keeps its row (all null) until the filter below.
                let rows: Vec<RecordBatch> = rows
                    .into_iter()
                    .map(|b| {
                        if b.num_rows() == 0 {
                            null_row(&self.decode)
                        } else {
                            b
                        }
                    })
                    .collect();
                arrow_select::concat::concat_batches(&self.decode, &rows)?
            }
        };
        let root = StructArray::from(batch);
        let mut columns = Vec::with_capacity(self.fields.len());
        for c in &self.config.columns {
            columns.push(self.column(&root, c, &[], records, &mut rejected)?);
        }
        if self.config.unknown_fields == UnknownFields::Extra {
            columns.push(self.extra(records));
        }
        let mut ingest_timed = 0;
        let event_time_us = match &self.event {
            None => None,
            Some(schema) => {
                Some(self.event_times(schema, records, &mut rejected, &mut ingest_timed)?)
            }
        };
        rejected.sort_by_key(|(i, _)| *i);
        rejected.dedup_by_key(|(i, _)| *i);
        let keep = (!rejected.is_empty()).then(|| {
            let mut keep = vec![true; records.len()];
            for (i, _) in &rejected {
                keep[*i] = false;
            }
            BooleanArray::from(keep)
        });
        if let Some(keep) = &keep {
            for column in &mut columns {
                *column = arrow_select::filter::filter(column.as_ref(), keep)?;
            }
        }
        let event_time_us = event_time_us.map(|times| match &keep {
            Some(keep) => times
                .into_iter()
                .zip(keep.values().iter())
                .filter_map(|(t, k)| k.then_some(t))
                .collect(),
            None => times,
        });
        self.stats
            .rejected
            .fetch_add(rejected.len() as u64, Ordering::Relaxed);
        self.stats.nulled.fetch_add(nulled, Ordering::Relaxed);
        self.stats
            .ingest_timed
            .fetch_add(ingest_timed, Ordering::Relaxed);
        Ok(Decoded {
            columns,
            event_time_us,
            keep,
            rejected,
            nulled,
            ingest_timed,
        })
    }

    /// Why `record` does not fit, from arrow-json's error: the column, its pointer and
    /// the value's JSON type.
    fn reason(&self, e: &ArrowError, record: &Record) -> String {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(&record.payload) else {
            return "the payload is not JSON: a schema reads JSON objects".to_owned();
        };
        if !value.is_object() {
            return format!("the payload is a JSON {}, not an object", json_type(&value));
        }
        let message = e.to_string();
        // arrow-json names the fields it was decoding: "whilst decoding field 'a': …".
        let keys: Vec<&str> = message
            .split("whilst decoding field '")
            .skip(1)
            .filter_map(|s| s.split('\'').next())
            .collect();
        let found = find_column(&self.config.columns, &keys, &[]);
        let detail = message.rsplit(": ").next().unwrap_or(&message);
        match found {
            Some((name, pointer)) => {
                let at = value.pointer(&pointer).map_or("missing", json_type);
                format!(
                    "column {name:?} ({pointer}): the value is a JSON {at} that does not fit ({detail})"
                )
            }
            None => format!("does not fit the schema: {detail}"),
        }
    }

    /// A declared column's array, taken from the decoded shape, with its default filled
    /// and its required values checked (records without one are rejected).
    fn column(
        &self,
        root: &StructArray,
        c: &Column,
        prefix: &[String],
        records: &[Record],
        rejected: &mut Vec<(usize, String)>,
    ) -> Result<ArrayRef, ArrowError> {
        let mut path = prefix.to_vec();
        path.extend(c.path.iter().cloned());
        let array = match &c.kind {
            ColumnType::Struct(children) => {
                let mut arrays = Vec::with_capacity(children.len());
                for child in children {
                    arrays.push(self.column(root, child, &path, records, rejected)?);
                }
                let fields: Fields = children.iter().map(output_field).collect();
                let present = object_at(root, &path);
                Arc::new(StructArray::try_new(fields, arrays, present)?) as ArrayRef
            }
            kind => {
                let array = value_at(root, &path).unwrap_or_else(|| {
                    arrow_array::new_null_array(&data_type(kind, false).0, records.len())
                });
                let array = plain(array, kind);
                match &c.default {
                    Some(default) if array.null_count() > 0 => {
                        fill(&array, &self.default_of(c, default)?)?
                    }
                    _ => array,
                }
            }
        };
        if c.required && array.null_count() > 0 {
            let pointer = format!("/{}", path.join("/"));
            for i in 0..array.len() {
                if array.is_null(i) {
                    rejected.push((i, format!("column {:?} ({pointer}) is required, and the record has no value for it", c.name)));
                }
            }
        }
        Ok(array)
    }

    /// `default` as a one-value array of `c`'s type.
    fn default_of(&self, c: &Column, default: &serde_json::Value) -> Result<ArrayRef, ArrowError> {
        let mut root = Node::Object(Vec::new());
        let (t, metadata) = data_type(&c.kind, true);
        root.insert(
            &["v".to_owned()],
            Field::new("v", t, true).with_metadata(metadata),
        );
        let schema = Arc::new(Schema::new(root.fields()));
        let row = serde_json::json!({ "v": default }).to_string();
        let mut decoder = Self::decoder(&schema, 1, false);
        decoder.decode(row.as_bytes())?;
        let batch = decoder
            .flush()?
            .ok_or_else(|| ArrowError::JsonError("no default".into()))?;
        Ok(plain(Arc::clone(batch.column(0)), &c.kind))
    }

    /// The `_extra` column: each payload's top-level fields the schema does not name.
    fn extra(&self, records: &[Record]) -> ArrayRef {
        let named: Vec<&str> = self
            .config
            .columns
            .iter()
            .filter_map(|c| c.path.first().map(String::as_str))
            .chain(
                self.config
                    .event_time
                    .iter()
                    .filter_map(|e| e.path.first().map(String::as_str)),
            )
            .collect();
        let mut builder = StringBuilder::new();
        for r in records {
            match serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&r.payload) {
                Ok(mut object) => {
                    object.retain(|k, _| !named.contains(&k.as_str()));
                    if object.is_empty() {
                        builder.append_null();
                    } else {
                        builder.append_value(serde_json::Value::Object(object).to_string());
                    }
                }
                Err(_) => builder.append_null(),
            }
        }
        Arc::new(builder.finish())
    }

    /// Each record's event time in µs: from the payload, else (counted) its ingest time,
    /// or it is rejected (`on_missing = "quarantine"`).
    fn event_times(
        &self,
        schema: &SchemaRef,
        records: &[Record],
        rejected: &mut Vec<(usize, String)>,
        ingest_timed: &mut u64,
    ) -> Result<Vec<i64>, ArrowError> {
        let event = self
            .config
            .event_time
            .as_ref()
            .expect("an event schema has an event time");
        let decoded = Self::decode_all(schema, records, true);
        let array = decoded
            .as_ref()
            .and_then(|b| value_at(&StructArray::from(b.clone()), &event.path));
        let mut times = Vec::with_capacity(records.len());
        for (i, r) in records.iter().enumerate() {
            let t = match &array {
                Some(a) => {
                    let a = a.as_primitive::<arrow_array::types::TimestampMicrosecondType>();
                    a.is_valid(i).then(|| a.value(i))
                }
                // The payloads are not all JSON objects: one by one.
                None => Self::decode_one(schema, r, true).ok().and_then(|b| {
                    let a = value_at(&StructArray::from(b), &event.path)?;
                    let a = a.as_primitive::<arrow_array::types::TimestampMicrosecondType>();
                    a.is_valid(0).then(|| a.value(0))
                }),
            };
            let t = match t {
                Some(t) => t,
                None => match event.on_missing {
                    super::types::OnMissing::IngestTime => {
                        *ingest_timed += 1;
                        r.timestamp_ms.saturating_mul(1000)
                    }
                    super::types::OnMissing::Quarantine => {
                        rejected.push((
                            i,
                            format!(
                                "event time {} ({}) is missing or not in that format",
                                event.pointer,
                                event.format.text()
                            ),
                        ));
                        0
                    }
                },
            };
            times.push(t);
        }
        Ok(times)
    }
}
