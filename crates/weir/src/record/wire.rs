//! The WAL form of a record: compact, versioned binary.
//!
//! Byte by byte (integers little-endian):
//!
//! ```text
//! offset  size  field
//! 0       1     version (currently 1)
//! 1       2     source length S (u16)
//! 3       S     source name, UTF-8
//! .       2     key length K (u16)
//! .       K     key, UTF-8
//! .       8     timestamp_ms (i64)
//! .       2     attribute count A (u16)
//! .       A ×   { name length (u16), name (UTF-8), value length (u32), value (UTF-8) }
//! .       4     payload length P (u32)
//! .       P     payload bytes
//! ```
//!
//! Nothing may follow the payload. [`Record::decode_with`] checks every length against the
//! bytes present and every string for UTF-8, and returns a [`DecodeError`] — never
//! panics — on bytes it did not write.

use std::sync::Arc;

use bytes::Bytes;

use super::Record;

/// The format version written by [`Record::encode_into`].
pub const WIRE_VERSION: u8 = 1;

/// Bytes that are not a record in the WAL format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The first byte is not a version this build reads.
    #[error(
        "record format version {found} is not supported (this weir reads version {WIRE_VERSION}); \
         the WAL was written by a newer weir: run that version, or drain the WAL first"
    )]
    Version {
        /// The version byte found.
        found: u8,
    },
    /// The bytes end inside a field.
    #[error("record truncated: expected {needed} more bytes for its {field}, found {left}")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes that were left.
        left: usize,
    },
    /// A text field is not UTF-8.
    #[error("record field {field} is not valid UTF-8")]
    Utf8 {
        /// The field.
        field: &'static str,
    },
    /// Bytes follow the payload.
    #[error("record has {extra} unexpected bytes after its payload")]
    Trailing {
        /// How many.
        extra: usize,
    },
}

impl Record {
    /// Appends the record's WAL form to `out` (which may already hold other data).
    ///
    /// Fields longer than their length prefix allows are truncated at the prefix's limit
    /// (source and key at 65,535 bytes, an attribute value at 4 GiB); sources keep them
    /// far below that, and the WAL's record limit is smaller still.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.reserve(self.encoded_len());
        encode_parts(
            out,
            &self.source,
            &self.key,
            self.timestamp_ms,
            self.attributes
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str())),
            &self.payload,
        );
    }

    /// The length of the WAL form.
    pub fn encoded_len(&self) -> usize {
        let attributes: usize = self
            .attributes
            .iter()
            .map(|(n, v)| 2 + n.len() + 4 + v.len())
            .sum();
        1 + 2 + self.source.len() + 2 + self.key.len() + 8 + 2 + attributes + 4 + self.payload.len()
    }

    /// [`decode_with`](Self::decode_with) with a new `Arc` for the source name.
    #[cfg(test)]
    pub fn decode(bytes: Bytes) -> Result<Record, DecodeError> {
        Record::decode_with(bytes, |s| Arc::from(s))
    }

    /// Decodes a record from its WAL form; the payload shares `bytes`' buffer. The
    /// source name is made by `source` from the text: a sink driver hands back the `Arc`
    /// it already holds for that input, so a record costs no allocation for it.
    ///
    /// # Errors
    ///
    /// [`DecodeError`] if `bytes` is not exactly one record of a known version.
    pub fn decode_with(
        bytes: Bytes,
        source: impl FnOnce(&str) -> Arc<str>,
    ) -> Result<Record, DecodeError> {
        let view = RecordRef::parse(&bytes)?;
        let record = Record {
            source: source(view.source),
            key: view.key.to_owned(),
            timestamp_ms: view.timestamp_ms,
            payload: Bytes::new(),
            attributes: view
                .attributes()
                .map(|(n, v)| (n.to_owned(), v.to_owned()))
                .collect(),
        };
        let at = view.payload_at;
        // The payload is the end of `bytes`: narrow the buffer to it in place (a slice
        // would add a reference and the drop of `bytes` take one back, two atomic
        // updates per record).
        let mut payload = bytes;
        bytes::Buf::advance(&mut payload, at);
        Ok(Record { payload, ..record })
    }
}

/// A record in its WAL form, read in place: every field [`Record::decode_with`] checks,
/// checked the same way, borrowed from the bytes instead of copied (no allocation), for
/// sinks that encode straight from the WAL's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// The source's name.
    pub source: &'a str,
    /// The key.
    pub key: &'a str,
    /// When the source read it, in milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    /// The payload bytes.
    pub payload: &'a [u8],
    /// Where the payload starts in the bytes parsed (it runs to their end).
    pub payload_at: usize,
    /// The attributes' bytes (already checked) and how many there are.
    attributes: (&'a [u8], u16),
}

impl<'a> RecordRef<'a> {
    /// Reads `bytes` as one record in the WAL form.
    ///
    /// # Errors
    ///
    /// [`DecodeError`] if `bytes` is not exactly one record of a known version.
    pub fn parse(bytes: &'a [u8]) -> Result<RecordRef<'a>, DecodeError> {
        let mut r = Cursor { buf: bytes, at: 0 };
        check_version(&mut r)?;
        let source = r.str16("source")?;
        let key = r.str16("key")?;
        let timestamp_ms = i64::from_le_bytes(r.array::<8>("timestamp")?);
        let count = u16::from_le_bytes(r.array::<2>("attribute count")?);
        let attributes_at = r.at;
        for _ in 0..count {
            r.str16("attribute name")?;
            let len = u32::from_le_bytes(r.array::<4>("attribute value length")?) as usize;
            std::str::from_utf8(r.take(len, "attribute value")?).map_err(|_| {
                DecodeError::Utf8 {
                    field: "attribute value",
                }
            })?;
        }
        let attributes = (&bytes[attributes_at..r.at], count);
        let len = u32::from_le_bytes(r.array::<4>("payload length")?) as usize;
        let payload_at = r.at;
        let payload = r.take(len, "payload")?;
        if r.at != bytes.len() {
            return Err(DecodeError::Trailing {
                extra: bytes.len() - r.at,
            });
        }
        Ok(RecordRef {
            source,
            key,
            timestamp_ms,
            payload,
            payload_at,
            attributes,
        })
    }

    /// Where the payload of the record in `bytes` starts, checking every length against
    /// the bytes present as [`RecordRef::parse`] does, but not the text fields' UTF-8
    /// ([`RecordRef::parse`] checks that when the record is read): what a sink driver
    /// needs to keep a record in its WAL form.
    ///
    /// # Errors
    ///
    /// [`DecodeError`] if `bytes` is not exactly one record of a known version, by its
    /// lengths.
    pub fn payload_at(bytes: &[u8]) -> Result<usize, DecodeError> {
        let mut r = Cursor { buf: bytes, at: 0 };
        check_version(&mut r)?;
        for field in ["source", "key"] {
            let len = u16::from_le_bytes(r.array::<2>(field)?);
            r.take(usize::from(len), field)?;
        }
        r.take(8, "timestamp")?;
        let count = u16::from_le_bytes(r.array::<2>("attribute count")?);
        for _ in 0..count {
            let len = u16::from_le_bytes(r.array::<2>("attribute name")?);
            r.take(usize::from(len), "attribute name")?;
            let len = u32::from_le_bytes(r.array::<4>("attribute value length")?) as usize;
            r.take(len, "attribute value")?;
        }
        let len = u32::from_le_bytes(r.array::<4>("payload length")?) as usize;
        let at = r.at;
        r.take(len, "payload")?;
        if r.at != bytes.len() {
            return Err(DecodeError::Trailing {
                extra: bytes.len() - r.at,
            });
        }
        Ok(at)
    }

    /// The attributes, in the order written (sorted by name).
    pub fn attributes(&self) -> impl Iterator<Item = (&'a str, &'a str)> + Clone + use<'a> {
        let (buf, count) = self.attributes;
        let mut r = Cursor { buf, at: 0 };
        // `parse` checked these bytes: reading them again cannot fail.
        (0..count).map_while(move |_| {
            let name = r.str16("attribute name").ok()?;
            let len = u32::from_le_bytes(r.array::<4>("attribute value length").ok()?) as usize;
            let value = std::str::from_utf8(r.take(len, "attribute value").ok()?).ok()?;
            Some((name, value))
        })
    }

    /// How many attributes it has.
    pub fn attribute_count(&self) -> usize {
        usize::from(self.attributes.1)
    }
}

/// The source name of a record in WAL form, without decoding the rest: sink drivers
/// skip records of other sources with it.
///
/// # Errors
///
/// [`DecodeError`] if the bytes do not start like a record.
pub fn peek_source(bytes: &[u8]) -> Result<&str, DecodeError> {
    let mut r = Cursor { buf: bytes, at: 0 };
    check_version(&mut r)?;
    r.str16("source")
}

fn check_version(r: &mut Cursor<'_>) -> Result<(), DecodeError> {
    let [version] = r.array::<1>("version")?;
    if version != WIRE_VERSION {
        return Err(DecodeError::Version { found: version });
    }
    Ok(())
}

/// Appends a record's WAL form from borrowed parts, for a source that would otherwise
/// build a [`Record`] (owned attribute strings) only to encode it. `attributes` should
/// come sorted by name, as [`Record::attributes`]; at most 65,535 are written.
pub fn encode_parts<'a>(
    out: &mut Vec<u8>,
    source: &str,
    key: &str,
    timestamp_ms: i64,
    attributes: impl Iterator<Item = (&'a str, &'a str)> + Clone,
    payload: &[u8],
) {
    out.push(WIRE_VERSION);
    put_str16(out, source);
    put_str16(out, key);
    out.extend_from_slice(&timestamp_ms.to_le_bytes());
    let count = attributes.clone().count().min(usize::from(u16::MAX));
    out.extend_from_slice(&(count as u16).to_le_bytes());
    for (name, value) in attributes.take(count) {
        put_str16(out, name);
        put_bytes32(out, value.as_bytes());
    }
    put_bytes32(out, payload);
}

/// The bytes [`encode_parts`] writes for these parts.
pub fn encoded_len<'a>(
    source: &str,
    key: &str,
    attributes: impl Iterator<Item = (&'a str, &'a str)>,
    payload: &[u8],
) -> usize {
    let str16 = |s: &str| 2 + s.len().min(usize::from(u16::MAX));
    let bytes32 = |b: &[u8]| 4 + b.len().min(u32::MAX as usize);
    let attributes: usize = attributes
        .take(usize::from(u16::MAX))
        .map(|(name, value)| str16(name) + bytes32(value.as_bytes()))
        .sum();
    1 + str16(source) + str16(key) + 8 + 2 + attributes + bytes32(payload)
}

fn put_str16(out: &mut Vec<u8>, s: &str) {
    let mut len = s.len().min(usize::from(u16::MAX));
    while !s.is_char_boundary(len) {
        len -= 1;
    }
    out.extend_from_slice(&(len as u16).to_le_bytes());
    out.extend_from_slice(&s.as_bytes()[..len]);
}

fn put_bytes32(out: &mut Vec<u8>, b: &[u8]) {
    let len = b.len().min(u32::MAX as usize);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&b[..len]);
}

#[derive(Clone)]
struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let left = self.buf.len() - self.at;
        if n > left {
            return Err(DecodeError::Truncated {
                field,
                needed: n,
                left,
            });
        }
        let out = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    fn str16(&mut self, field: &'static str) -> Result<&'a str, DecodeError> {
        let len = u16::from_le_bytes(self.array::<2>(field)?);
        std::str::from_utf8(self.take(usize::from(len), field)?)
            .map_err(|_| DecodeError::Utf8 { field })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn example() -> Record {
        Record {
            source: "gen".into(),
            key: "k1".into(),
            timestamp_ms: 1_700_000_000_000,
            payload: Bytes::from_static(br#"{"t":21.5}"#),
            attributes: vec![("unit".into(), "C".into())],
        }
    }

    #[test]
    fn encoded_len_is_what_encode_parts_writes() {
        let attributes = [("file.name", "app.log"), ("host", "héte")];
        for payload in [&b""[..], b"{\"a\":1}", &[7u8; 300]] {
            let mut out = Vec::new();
            encode_parts(
                &mut out,
                "tail",
                "/l/app.log",
                5,
                attributes.iter().copied(),
                payload,
            );
            assert_eq!(
                encoded_len("tail", "/l/app.log", attributes.iter().copied(), payload),
                out.len()
            );
        }
    }

    #[test]
    fn round_trip_example() {
        let record = example();
        let mut wire = Vec::new();
        record.encode_into(&mut wire);
        assert_eq!(wire.len(), record.encoded_len());
        assert_eq!(wire[0], WIRE_VERSION);
        assert_eq!(peek_source(&wire), Ok("gen"));
        assert_eq!(Record::decode(Bytes::from(wire)), Ok(record));
    }

    #[test]
    fn unknown_version_is_refused_with_advice() {
        let mut wire = Vec::new();
        example().encode_into(&mut wire);
        wire[0] = 9;
        let err = Record::decode(Bytes::from(wire)).unwrap_err();
        assert_eq!(err, DecodeError::Version { found: 9 });
        assert!(err.to_string().contains("newer weir"));
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let mut wire = Vec::new();
        example().encode_into(&mut wire);
        wire.push(0);
        assert_eq!(
            Record::decode(Bytes::from(wire)),
            Err(DecodeError::Trailing { extra: 1 })
        );
    }

    #[test]
    fn bad_utf8_names_the_field() {
        let mut wire = Vec::new();
        example().encode_into(&mut wire);
        wire[8] = 0xff; // first byte of the key: after version, source length, "gen", key length
        assert_eq!(
            Record::decode(Bytes::from(wire)),
            Err(DecodeError::Utf8 { field: "key" })
        );
    }

    fn arb_record() -> impl Strategy<Value = Record> {
        (
            "[a-z]{1,8}",
            ".{0,20}",
            any::<i64>(),
            proptest::collection::vec(any::<u8>(), 0..200),
            proptest::collection::vec((".{0,8}", ".{0,8}"), 0..4),
        )
            .prop_map(|(source, key, ts, payload, attributes)| Record {
                source: source.as_str().into(),
                key,
                timestamp_ms: ts,
                payload: Bytes::from(payload),
                attributes,
            })
    }

    proptest! {
        #[test]
        fn every_record_round_trips(record in arb_record()) {
            let mut wire = vec![0xAA; 3]; // encode_into appends
            record.encode_into(&mut wire);
            prop_assert_eq!(Record::decode(Bytes::from(wire[3..].to_vec())), Ok(record));
        }

        #[test]
        fn every_truncation_is_an_error(record in arb_record(), cut in any::<prop::sample::Index>()) {
            let mut wire = Vec::new();
            record.encode_into(&mut wire);
            let cut = cut.index(wire.len());
            prop_assert!(Record::decode(Bytes::from(wire[..cut].to_vec())).is_err());
            prop_assert!(RecordRef::payload_at(&wire[..cut]).is_err());
        }

        /// Read in place, a record has the decoded record's fields, and its lengths
        /// alone find the same payload.
        #[test]
        fn a_record_read_in_place_is_the_decoded_one(record in arb_record()) {
            let mut wire = Vec::new();
            record.encode_into(&mut wire);
            let view = RecordRef::parse(&wire).unwrap();
            prop_assert_eq!(view.source, &*record.source);
            prop_assert_eq!(view.key, record.key.as_str());
            prop_assert_eq!(view.timestamp_ms, record.timestamp_ms);
            prop_assert_eq!(view.payload, &record.payload[..]);
            let attributes: Vec<(&str, &str)> = view.attributes().collect();
            let expected: Vec<(&str, &str)> =
                record.attributes.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            prop_assert_eq!(attributes, expected);
            prop_assert_eq!(view.attribute_count(), record.attributes.len());
            prop_assert_eq!(RecordRef::payload_at(&wire), Ok(view.payload_at));
            prop_assert_eq!(view.payload_at + record.payload.len(), wire.len());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let decoded = Record::decode(Bytes::from(bytes.clone()));
            let _ = peek_source(&bytes);
            // Whatever decodes has the same lengths; whatever fails by its lengths
            // fails to decode.
            if decoded.is_ok() {
                prop_assert!(RecordRef::payload_at(&bytes).is_ok());
            }
            if RecordRef::payload_at(&bytes).is_err() {
                prop_assert!(RecordRef::parse(&bytes).is_err());
            }
        }
    }
}
