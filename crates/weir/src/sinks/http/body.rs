//! Request bodies: a request's records encoded back to back into one buffer as they
//! arrive (no allocation per record), sent as a slice of it; a bisected part of a
//! request is a smaller slice.

use std::io::Write as _;

use bytes::Bytes;

use super::config::{BodyCompression, Encoding};
use crate::record::{EncodeError, Record};

/// The records of one request: each record's encoded form followed by `\n`, back to
/// back, and each record's payload (for the quarantine).
#[derive(Debug, Default)]
pub struct Parts {
    raw: Bytes,
    /// Where each record's encoded form ends in `raw` (its `\n` follows).
    ends: Vec<usize>,
    payloads: Vec<Bytes>,
}

impl Parts {
    /// Records held.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Record `i`'s payload as received.
    pub fn payload(&self, i: usize) -> &Bytes {
        &self.payloads[i]
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
    raw: Vec<u8>,
    ends: Vec<usize>,
    payloads: Vec<Bytes>,
}

impl PartsBuilder {
    /// An empty request of `encoding`.
    pub fn new(encoding: Encoding) -> Self {
        PartsBuilder {
            encoding,
            raw: Vec::new(),
            ends: Vec::new(),
            payloads: Vec::new(),
        }
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Encoded bytes held (separators included).
    pub fn bytes(&self) -> u64 {
        self.raw.len() as u64
    }

    /// Encodes `record` at the end; returns the bytes it added.
    ///
    /// # Errors
    ///
    /// [`EncodeError`] when an envelope cannot hold the payload (neither JSON nor
    /// UTF-8); nothing is added. `payload` takes any bytes.
    pub fn push(&mut self, record: &Record) -> Result<u64, EncodeError> {
        let start = self.raw.len();
        match self.encoding {
            Encoding::Payload => {
                self.raw.extend_from_slice(&record.payload);
                self.raw.push(b'\n');
            }
            Encoding::Ndjson | Encoding::JsonArray => {
                if self.raw.capacity() == 0 {
                    self.raw.reserve(64 * 1024);
                }
                record.write_ndjson(&mut self.raw)?;
            }
        }
        self.ends.push(self.raw.len() - 1);
        self.payloads.push(record.payload.clone());
        Ok((self.raw.len() - start) as u64)
    }

    /// Takes the last record pushed back out.
    pub fn undo_last(&mut self) {
        if self.ends.pop().is_some() {
            self.payloads.pop();
            self.raw.truncate(self.ends.last().map_or(0, |end| end + 1));
        }
    }

    /// The records held, leaving it empty (with a buffer of the same size for the
    /// next request).
    pub fn take(&mut self) -> Parts {
        let capacity = self.raw.capacity();
        let raw = std::mem::replace(&mut self.raw, Vec::with_capacity(capacity));
        Parts {
            raw: Bytes::from(raw),
            ends: std::mem::take(&mut self.ends),
            payloads: std::mem::take(&mut self.payloads),
        }
    }

    /// Forgets every record held.
    pub fn clear(&mut self) {
        self.raw.clear();
        self.ends.clear();
        self.payloads.clear();
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

    fn record(payload: &'static [u8]) -> Record {
        Record {
            source: Arc::from("gen"),
            key: "k".to_owned(),
            timestamp_ms: 1,
            payload: Bytes::from_static(payload),
            attributes: Vec::new(),
        }
    }

    fn parts(encoding: Encoding, payloads: &[&'static [u8]]) -> Parts {
        let mut builder = PartsBuilder::new(encoding);
        for p in payloads {
            builder.push(&record(p)).unwrap();
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
        assert_eq!(p.payload(2), &Bytes::from_static(b"{\"a\":3}"));
    }

    #[test]
    fn a_record_without_an_envelope_adds_nothing() {
        let mut builder = PartsBuilder::new(Encoding::Ndjson);
        builder.push(&record(b"{\"a\":1}")).unwrap();
        let before = builder.bytes();
        // A binary payload has no envelope, but goes as it is in `payload`.
        assert!(builder.push(&record(b"\xff")).is_err());
        assert_eq!((builder.len(), builder.bytes()), (1, before));
        let mut payload = PartsBuilder::new(Encoding::Payload);
        assert!(payload.push(&record(b"\xff")).is_ok());
        builder.push(&record(b"[2]")).unwrap();
        builder.undo_last();
        assert_eq!((builder.len(), builder.bytes()), (1, before));
        // The next request starts empty.
        let taken = builder.take();
        assert_eq!(taken.len(), 1);
        assert!(builder.is_empty() && builder.bytes() == 0);
    }
}
