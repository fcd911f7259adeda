//! Request bodies. The sink's writer only gathers a request's records ([`Gather`]:
//! ranges of the WAL reads that hold them, no copy); each request's own task encodes
//! them back to back into one buffer ([`PartsBuilder`], no allocation per record), so
//! requests encode in parallel; the body is a slice of that buffer, and a bisected part
//! of a request a smaller slice.

use std::io::Write as _;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use super::config::{BodyCompression, Encoding};
use crate::pipeline::{SinkBatch, WireRecord};
use crate::record::{EncodeError, Line, RecordRef};

/// Bytes an envelope adds to a record's payload, key, source and attributes
/// (`{"source":"","key":"","ts":,"payload":,"attributes":{}}` and the newline: 56, plus
/// a 13-digit millisecond time), for sizing requests before they are encoded.
const ENVELOPE_BYTES: u64 = 69;

/// The bytes of a record's WAL form before its payload that are not its source, key or
/// attributes' text: the version, the length fields, the time and the attribute count
/// (1 + 2 + 2 + 8 + 2 + 4), and 6 more per attribute (its two length fields). An
/// envelope adds the same 6 per attribute (four quotes, a colon and a comma), so a
/// record's envelope size follows from where its payload starts.
const WIRE_HEADER_BYTES: u64 = 19;

/// A record's size once encoded in `encoding` (exact for `payload`; for envelopes,
/// exact for a compact JSON payload with a 13-digit time, one byte over with
/// attributes, and a little under for a string payload that needs escaping).
///
/// It reads no payload byte: whether an envelope can hold the payload (UTF-8) is
/// checked once, by the request's encoder ([`Gather::encode`] refuses it), not here
/// on the sink's one writing task as well.
pub fn size(record: &WireRecord, encoding: Encoding) -> u64 {
    let payload = (record.bytes.len() - record.payload_at) as u64;
    match encoding {
        Encoding::Payload => payload + 1,
        Encoding::Ndjson | Encoding::JsonArray => {
            // Source, key and attributes (with their 6 bytes each) as in the WAL form.
            let fields = (record.payload_at as u64).saturating_sub(WIRE_HEADER_BYTES);
            payload + fields + ENVELOPE_BYTES
        }
    }
}

/// The records of one request, as ranges of the WAL reads that hold them.
#[derive(Debug, Default)]
pub struct Gather {
    segments: Vec<(Arc<SinkBatch>, Range<usize>)>,
    records: usize,
    bytes: u64,
}

impl Gather {
    /// Records held.
    pub fn len(&self) -> usize {
        self.records
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Their size once encoded (see [`size`]).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Adds record `i` of `batch`, of encoded size `size`.
    pub fn push(&mut self, batch: &Arc<SinkBatch>, i: usize, size: u64) {
        match self.segments.last_mut() {
            Some((last, range)) if Arc::ptr_eq(last, batch) && range.end == i => range.end += 1,
            _ => self.segments.push((Arc::clone(batch), i..i + 1)),
        }
        self.records += 1;
        self.bytes += size;
    }

    /// The records held, leaving it empty.
    pub fn take(&mut self) -> Gather {
        std::mem::take(self)
    }

    /// Forgets every record held.
    pub fn clear(&mut self) {
        *self = Gather::default();
    }

    /// Encodes the records into [`Parts`]; a record that cannot be encoded is handed
    /// to `refused` with the reason instead (none can once [`size`] accepted it).
    pub fn encode(
        &self,
        encoding: Encoding,
        line: &Line,
        mut refused: impl FnMut(&WireRecord, String),
    ) -> Parts {
        let mut builder = PartsBuilder::with_capacity(encoding, self.records, self.bytes);
        builder.line = line.clone();
        let mut skipped = Vec::new();
        let records = self
            .segments
            .iter()
            .flat_map(|(batch, range)| &batch.wire[range.clone()]);
        for (i, record) in records.enumerate() {
            let pushed = match record.view() {
                Ok(view) => builder.push(&view).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = pushed {
                skipped.push(i);
                refused(record, e);
            }
        }
        Parts {
            skipped,
            ..builder.take()
        }
    }

    /// Record `i` (in the order pushed).
    ///
    /// # Panics
    ///
    /// If `i` is not below [`Gather::len`].
    pub fn record(&self, mut i: usize) -> &WireRecord {
        for (batch, range) in &self.segments {
            if i < range.len() {
                return &batch.wire[range.start + i];
            }
            i -= range.len();
        }
        panic!("record {i} past the end of a request's records");
    }
}

/// The records of one request: each record's encoded form followed by `\n`, back to
/// back. Their payloads (for the quarantine) stay in the [`Gather`] they were encoded
/// from: holding a reference to each here would cost two atomic updates per record, on
/// counters the reading and encoding threads share.
#[derive(Debug, Default)]
pub struct Parts {
    raw: Bytes,
    /// Where each record's encoded form ends in `raw` (its `\n` follows).
    ends: Vec<usize>,
    /// The records of the gather that could not be encoded (not in `raw`), ascending.
    skipped: Vec<usize>,
}

impl Parts {
    /// Records held.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Where record `i` of these parts is in the [`Gather`] they were encoded from.
    pub fn gather_index(&self, i: usize) -> usize {
        let mut at = i;
        for &skipped in &self.skipped {
            if skipped > at {
                break;
            }
            at += 1;
        }
        at
    }

    /// Where record `i` starts in `raw`.
    fn start(&self, i: usize) -> usize {
        if i == 0 { 0 } else { self.ends[i - 1] + 1 }
    }

    /// Records `lo..hi`, each followed by `\n` (a slice of the buffer, not a copy).
    fn lines(&self, lo: usize, hi: usize) -> Bytes {
        if lo >= hi {
            return Bytes::new();
        }
        self.raw.slice(self.start(lo)..self.ends[hi - 1] + 1)
    }

    /// The body of records `lo..hi` in `encoding`, compressed as configured: for
    /// `ndjson` and `payload` without compression, a slice of the buffer.
    ///
    /// # Errors
    ///
    /// An I/O error from the compressor (which writes to memory: only on a bug).
    pub fn body(
        &self,
        lo: usize,
        hi: usize,
        encoding: Encoding,
        compression: BodyCompression,
    ) -> std::io::Result<Bytes> {
        let raw = match encoding {
            Encoding::Ndjson | Encoding::Payload => self.lines(lo, hi),
            Encoding::JsonArray => {
                let lines = self.lines(lo, hi);
                let mut array = Vec::with_capacity(lines.len() + 2);
                array.push(b'[');
                for i in lo..hi {
                    if i > lo {
                        array.push(b',');
                    }
                    array.extend_from_slice(&self.raw[self.start(i)..self.ends[i]]);
                }
                array.push(b']');
                Bytes::from(array)
            }
        };
        Ok(match compression {
            BodyCompression::None => raw,
            BodyCompression::Gzip => {
                let mut gz = flate2::write::GzEncoder::new(
                    Vec::with_capacity(raw.len() / 4),
                    flate2::Compression::fast(),
                );
                gz.write_all(&raw)?;
                Bytes::from(gz.finish()?)
            }
            BodyCompression::Zstd => Bytes::from(zstd::bulk::compress(&raw, 3)?),
        })
    }
}

/// The request being filled: records are encoded straight into its buffer.
#[derive(Debug)]
pub struct PartsBuilder {
    encoding: Encoding,
    /// What an envelope line is (`fields`: the projected object).
    line: Line,
    raw: Vec<u8>,
    ends: Vec<usize>,
}

impl PartsBuilder {
    /// An empty request of `encoding` with room for `records` records of `bytes`.
    pub fn with_capacity(encoding: Encoding, records: usize, bytes: u64) -> Self {
        PartsBuilder {
            encoding,
            line: Line::Envelope,
            raw: Vec::with_capacity(usize::try_from(bytes).unwrap_or(0)),
            ends: Vec::with_capacity(records),
        }
    }

    /// Encodes `record` at the end; returns the bytes it added.
    ///
    /// # Errors
    ///
    /// [`EncodeError`] when an envelope cannot hold the payload (neither JSON nor
    /// UTF-8); nothing is added. `payload` takes any bytes.
    pub fn push(&mut self, record: &RecordRef<'_>) -> Result<u64, EncodeError> {
        let start = self.raw.len();
        match self.encoding {
            Encoding::Payload => {
                self.raw.extend_from_slice(record.payload);
                self.raw.push(b'\n');
            }
            Encoding::Ndjson | Encoding::JsonArray => {
                record.write_line(&self.line, &mut self.raw)?
            }
        }
        self.ends.push(self.raw.len() - 1);
        Ok((self.raw.len() - start) as u64)
    }

    /// The records held, leaving it empty (with a buffer of the same size for the
    /// next request).
    pub fn take(&mut self) -> Parts {
        let capacity = self.raw.capacity();
        let raw = std::mem::replace(&mut self.raw, Vec::with_capacity(capacity));
        Parts {
            raw: Bytes::from(raw),
            ends: std::mem::take(&mut self.ends),
            skipped: Vec::new(),
        }
    }
}

/// The `Content-Type` of a body.
pub fn content_type(encoding: Encoding) -> &'static str {
    match encoding {
        Encoding::Ndjson | Encoding::Payload => "application/x-ndjson",
        Encoding::JsonArray => "application/json",
    }
}

/// The `Content-Encoding` of a body, if compressed.
pub fn content_encoding(compression: BodyCompression) -> Option<&'static str> {
    match compression {
        BodyCompression::None => None,
        BodyCompression::Gzip => Some("gzip"),
        BodyCompression::Zstd => Some("zstd"),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;
    use std::sync::Arc;

    use super::*;

    use crate::pipeline::Position;
    use crate::record::Record;

    fn decoded(payload: &[u8]) -> Record {
        Record {
            source: Arc::from("gen"),
            key: "k".to_owned(),
            timestamp_ms: 1,
            payload: Bytes::copy_from_slice(payload),
            attributes: Vec::new(),
        }
    }

    /// A record in its WAL form, as the driver hands it to the sink.
    fn wire_of(record: &Record) -> WireRecord {
        let mut bytes = Vec::new();
        record.encode_into(&mut bytes);
        let position = Position {
            offset: 0,
            time_ms: 0,
        };
        WireRecord::new(position, Bytes::from(bytes)).unwrap()
    }

    fn record(payload: &[u8]) -> WireRecord {
        wire_of(&decoded(payload))
    }

    fn parts(encoding: Encoding, payloads: &[&'static [u8]]) -> Parts {
        let mut builder = PartsBuilder::with_capacity(encoding, 0, 0);
        for p in payloads {
            builder.push(&record(p).view().unwrap()).unwrap();
        }
        builder.take()
    }

    #[test]
    fn bodies_in_each_encoding_and_compression() {
        let two: &[&[u8]] = &[b"{\"a\":1}", b"{\"a\":2}"];
        let none = BodyCompression::None;
        let ndjson = parts(Encoding::Ndjson, two);
        let body = ndjson.body(0, 2, Encoding::Ndjson, none).unwrap();
        let lines: Vec<serde_json::Value> = body
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["payload"]["a"], 2);
        let array = parts(Encoding::JsonArray, two)
            .body(0, 2, Encoding::JsonArray, none)
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&array).unwrap();
        assert_eq!(v[0]["payload"]["a"], 1);
        assert_eq!(v[1]["payload"]["a"], 2);
        let payload_parts = parts(Encoding::Payload, two);
        let payload = payload_parts.body(0, 2, Encoding::Payload, none).unwrap();
        assert_eq!(&payload[..], b"{\"a\":1}\n{\"a\":2}\n");
        let gz = payload_parts
            .body(0, 2, Encoding::Payload, BodyCompression::Gzip)
            .unwrap();
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, payload);
        let zs = payload_parts
            .body(0, 2, Encoding::Payload, BodyCompression::Zstd)
            .unwrap();
        assert_eq!(zstd::bulk::decompress(&zs, 1 << 20).unwrap(), payload);
    }

    #[test]
    fn a_part_of_a_request_is_its_own_records_only() {
        let three: &[&[u8]] = &[b"{\"a\":1}", b"\"two\"", b"{\"a\":3}"];
        let p = parts(Encoding::Payload, three);
        let none = BodyCompression::None;
        assert_eq!(
            &p.body(1, 2, Encoding::Payload, none).unwrap()[..],
            b"\"two\"\n"
        );
        assert_eq!(
            &p.body(1, 3, Encoding::Payload, none).unwrap()[..],
            b"\"two\"\n{\"a\":3}\n"
        );
        assert!(p.body(2, 2, Encoding::Payload, none).unwrap().is_empty());
        let array = parts(Encoding::JsonArray, three)
            .body(1, 3, Encoding::JsonArray, none)
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&array).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 2);
        assert_eq!(v[0]["payload"], "two");
    }

    #[test]
    fn fields_send_projected_objects_in_lines_and_arrays() {
        let mut builder = PartsBuilder::with_capacity(Encoding::JsonArray, 0, 0);
        builder.line = Line::Fields(vec![("t".into(), "/a".into())]);
        builder
            .push(&record(b"{\"a\":1,\"b\":2}").view().unwrap())
            .unwrap();
        assert!(builder.push(&record(b"\"text\"").view().unwrap()).is_err());
        builder.push(&record(b"{\"b\":2}").view().unwrap()).unwrap();
        let array = builder
            .take()
            .body(0, 2, Encoding::JsonArray, BodyCompression::None)
            .unwrap();
        assert_eq!(&array[..], br#"[{"t":1},{"t":null}]"#);
    }

    #[test]
    fn a_record_without_an_envelope_is_refused_and_adds_nothing() {
        let mut builder = PartsBuilder::with_capacity(Encoding::Ndjson, 0, 0);
        builder.push(&record(b"{\"a\":1}").view().unwrap()).unwrap();
        // A binary payload has no envelope, but goes as it is in `payload`.
        assert!(builder.push(&record(b"\xff").view().unwrap()).is_err());
        let taken = builder.take();
        assert_eq!(taken.len(), 1);
        let body = taken
            .body(0, 1, Encoding::Ndjson, BodyCompression::None)
            .unwrap();
        assert_eq!(body.iter().filter(|b| **b == b'\n').count(), 1);
        assert_eq!(size(&record(b"\xff"), Encoding::Payload), 2);
        let mut payload = PartsBuilder::with_capacity(Encoding::Payload, 0, 0);
        assert!(payload.push(&record(b"\xff").view().unwrap()).is_ok());
    }

    #[test]
    fn gathered_records_encode_in_order_and_sizes_match_compact_json() {
        let batch = |payloads: &[&'static [u8]]| {
            Arc::new(SinkBatch {
                wire: payloads.iter().map(|p| record(p)).collect(),
                ..SinkBatch::default()
            })
        };
        let (a, b) = (batch(&[b"{\"n\":1}", b"{\"n\":2}"]), batch(&[b"{\"n\":3}"]));
        let mut gather = Gather::default();
        for (batch, i) in [(&a, 0), (&a, 1), (&b, 0)] {
            let s = size(&batch.wire[i], Encoding::Ndjson);
            gather.push(batch, i, s);
        }
        assert_eq!(
            gather.segments.len(),
            2,
            "contiguous records share a segment"
        );
        let parts = gather.encode(Encoding::Ndjson, &Line::Envelope, |_, e| panic!("{e}"));
        let body = parts
            .body(0, 3, Encoding::Ndjson, BodyCompression::None)
            .unwrap();
        let ns: Vec<u64> = body
            .split(|c| *c == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| {
                serde_json::from_slice::<serde_json::Value>(l).unwrap()["payload"]["n"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(ns, [1, 2, 3]);
        // The estimate is the exact size of a compact JSON payload's line with a
        // 13-digit time (these records' `ts` is 1: 12 digits fewer each).
        assert_eq!(gather.bytes(), body.len() as u64 + 3 * 12);
        let taken = gather.take();
        assert_eq!((taken.len(), gather.len()), (3, 0));
    }

    /// The quarantine takes a refused part's payload from the gather: with records that
    /// could not be encoded skipped, part `i` is still the right record.
    #[test]
    fn a_part_finds_its_record_in_the_gather_past_skipped_ones() {
        let batch = Arc::new(SinkBatch {
            wire: [
                &b"{\"n\":0}"[..],
                b"\xff",
                b"{\"n\":2}",
                b"\xfe",
                b"\xfd",
                b"{\"n\":5}",
            ]
            .iter()
            .map(|p| record(p))
            .collect(),
            ..SinkBatch::default()
        });
        let mut gather = Gather::default();
        for i in 0..6 {
            gather.push(&batch, i, 1);
        }
        let mut refused = Vec::new();
        let parts = gather.encode(Encoding::Ndjson, &Line::Envelope, |r, _| {
            refused.push(r.payload())
        });
        assert_eq!(refused, [&b"\xff"[..], b"\xfe", b"\xfd"]);
        assert_eq!(parts.len(), 3);
        let payloads: Vec<Bytes> = (0..3)
            .map(|i| gather.record(parts.gather_index(i)).payload())
            .collect();
        assert_eq!(payloads, [&b"{\"n\":0}"[..], b"{\"n\":2}", b"{\"n\":5}"]);
    }

    /// The size of an envelope follows from the WAL form: the same as counting the
    /// fields of the decoded record, and exact for a compact JSON payload, with
    /// attributes too.
    #[test]
    fn sizes_from_the_wal_form_match_the_encoded_lines() {
        let records = [
            decoded(b"{\"a\":1}"),
            Record {
                key: "sensors/kitchen/t".to_owned(),
                timestamp_ms: 1_700_000_000_000,
                attributes: vec![
                    ("mqtt.qos".to_owned(), "1".to_owned()),
                    ("unit".to_owned(), "C".to_owned()),
                ],
                ..decoded(b"[1,2,{\"b\":null}]")
            },
            Record {
                source: Arc::from("a-longer-source-name"),
                key: String::new(),
                timestamp_ms: 1_700_000_000_000,
                ..decoded(b"17")
            },
        ];
        for r in &records {
            let wire = wire_of(r);
            let mut line = Vec::new();
            r.write_ndjson(&mut line).unwrap();
            let mut from_wire = Vec::new();
            wire.view().unwrap().write_ndjson(&mut from_wire).unwrap();
            assert_eq!(from_wire, line, "the same line from the WAL form");
            let digits = r.timestamp_ms.to_string().len() as u64;
            // Attributes are counted with a comma each, one more than they have.
            let comma = u64::from(!r.attributes.is_empty());
            assert_eq!(
                size(&wire, Encoding::Ndjson),
                line.len() as u64 + (13 - digits) + comma,
                "{r:?}"
            );
            assert_eq!(wire.payload(), r.payload);
            assert_eq!(wire.decode().unwrap(), *r);
        }
    }
}
