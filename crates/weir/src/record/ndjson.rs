//! The text form of a record: one JSON object per line,
//! `{"source","key","ts","payload","attributes"}`.
//!
//! `payload` is the payload's own JSON when it parses as JSON (written compactly on one
//! line), a JSON string when it is UTF-8 text, and otherwise the record cannot be
//! written as text: [`EncodeError::NotText`], and the sink quarantines it.

use super::{Record, RecordRef};

/// A record that has no NDJSON form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The payload is neither JSON nor UTF-8 text.
    #[error(
        "payload of {len} bytes is neither JSON nor UTF-8 text (invalid byte at {valid_up_to}); \
         an NDJSON sink cannot write it: use a Parquet sink for binary payloads"
    )]
    NotText {
        /// Payload length.
        len: usize,
        /// Where the UTF-8 check failed.
        valid_up_to: usize,
    },
    /// The payload does not fit the sink's declared schema: the column and why.
    #[error("does not fit the sink's schema: {0}")]
    Schema(String),
    /// `fields` projects a JSON object's fields, and the payload is not one.
    #[error("the payload is not a JSON object, so `fields` cannot project it ({0})")]
    NotObject(String),
}

/// What a JSON sink writes for each record.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Line {
    /// The envelope `{"source","key","ts","payload","attributes"}` (the default).
    #[default]
    Envelope,
    /// The payload alone (its JSON on one line, or a JSON string of its text).
    Payload,
    /// An object of the payload's fields: each name with the value at its JSON pointer
    /// (null when absent), in this order.
    Fields(Vec<(String, String)>),
}

impl Line {
    /// Appends the line of the record with these parts, newline included; on error
    /// `out` is left as it was.
    ///
    /// # Errors
    ///
    /// [`EncodeError::NotText`] (the envelope or the payload) if the payload is neither
    /// JSON nor UTF-8; [`EncodeError::NotObject`] (fields) if it is not a JSON object.
    pub fn write<'a>(
        &self,
        out: &mut Vec<u8>,
        source: &str,
        key: &str,
        timestamp_ms: i64,
        attributes: impl Iterator<Item = (&'a str, &'a str)>,
        payload: &[u8],
    ) -> Result<(), EncodeError> {
        match self {
            Line::Envelope => write_line(out, source, key, timestamp_ms, attributes, payload),
            Line::Payload => {
                write_payload(out, payload)?;
                out.push(b'\n');
                Ok(())
            }
            Line::Fields(fields) => {
                project(out, fields, payload)?;
                out.push(b'\n');
                Ok(())
            }
        }
    }
}

/// Writes the object of `fields` taken from `payload`.
fn project(
    out: &mut Vec<u8>,
    fields: &[(String, String)],
    payload: &[u8],
) -> Result<(), EncodeError> {
    let value: serde_json::Value = serde_json::from_slice(payload)
        .map_err(|e| EncodeError::NotObject(format!("not JSON: {e}")))?;
    if !value.is_object() {
        return Err(EncodeError::NotObject("another JSON value".into()));
    }
    out.push(b'{');
    for (i, (name, pointer)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_str(out, name);
        out.push(b':');
        match value.pointer(pointer) {
            // Serializing a Value into a Vec cannot fail.
            Some(v) => {
                let _ = serde_json::to_writer(&mut *out, v);
            }
            None => out.extend_from_slice(b"null"),
        }
    }
    out.push(b'}');
    Ok(())
}

impl Record {
    /// Appends the record's `line`, newline included, to `out`. On error `out` is left
    /// as it was.
    ///
    /// # Errors
    ///
    /// As [`Line::write`].
    pub fn write_line(&self, line: &Line, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        line.write(
            out,
            &self.source,
            &self.key,
            self.timestamp_ms,
            self.attributes
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str())),
            &self.payload,
        )
    }

    /// Appends the record's NDJSON line, newline included, to `out`. On error `out` is
    /// left as it was.
    ///
    /// # Errors
    ///
    /// [`EncodeError::NotText`] if the payload is neither JSON nor UTF-8.
    pub fn write_ndjson(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.write_line(&Line::Envelope, out)
    }
}

impl RecordRef<'_> {
    /// [`Record::write_line`] of the record read in place (the same line).
    ///
    /// # Errors
    ///
    /// As [`Line::write`].
    pub fn write_line(&self, line: &Line, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        line.write(
            out,
            self.source,
            self.key,
            self.timestamp_ms,
            self.attributes(),
            self.payload,
        )
    }

    /// [`Record::write_ndjson`] of the record read in place (the same line).
    ///
    /// # Errors
    ///
    /// As [`Record::write_ndjson`].
    pub fn write_ndjson(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.write_line(&Line::Envelope, out)
    }
}

fn write_line<'a>(
    out: &mut Vec<u8>,
    source: &str,
    key: &str,
    timestamp_ms: i64,
    attributes: impl Iterator<Item = (&'a str, &'a str)>,
    payload: &[u8],
) -> Result<(), EncodeError> {
    let start = out.len();
    out.extend_from_slice(b"{\"source\":");
    write_json_str(out, source);
    out.extend_from_slice(b",\"key\":");
    write_json_str(out, key);
    out.extend_from_slice(b",\"ts\":");
    out.extend_from_slice(itoa::Buffer::new().format(timestamp_ms).as_bytes());
    out.extend_from_slice(b",\"payload\":");
    if let Err(err) = write_payload(out, payload) {
        out.truncate(start);
        return Err(err);
    }
    out.extend_from_slice(b",\"attributes\":{");
    for (i, (name, value)) in attributes.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_str(out, name);
        out.push(b':');
        write_json_str(out, value);
    }
    out.extend_from_slice(b"}}\n");
    Ok(())
}

fn write_json_str(out: &mut Vec<u8>, s: &str) {
    // Names, keys and topics seldom need escaping: then the text goes between quotes as
    // it is (serde_json's writer costs more than the copy for such short strings).
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        return;
    }
    // Serializing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

fn write_payload(out: &mut Vec<u8>, payload: &[u8]) -> Result<(), EncodeError> {
    // One pass checks the JSON and its UTF-8 (serde_json does not check the bytes of the
    // strings it skips, so `"\xff"` would pass as JSON and be written raw, and the file
    // would no longer be UTF-8 NDJSON; MQTT, NATS, Kafka and file payloads arrive here
    // as sent).
    if let Some(json) = super::json_check::check(payload) {
        let trimmed = payload.trim_ascii();
        if json.line_breaks {
            // Pretty-printed JSON: drop the whitespace between tokens so the line stays
            // one line. The tokens are kept as sent: a round trip through
            // `serde_json::Value` would change floats by a unit in the last place, and
            // refuse numbers beyond f64 (1e400) that are valid JSON.
            compact_json(out, trimmed);
        } else {
            out.extend_from_slice(trimmed);
        }
        return Ok(());
    }
    let text = std::str::from_utf8(payload).map_err(|e| EncodeError::NotText {
        len: payload.len(),
        valid_up_to: e.valid_up_to(),
    })?;
    write_json_str(out, text);
    Ok(())
}

/// Appends valid JSON `text` without the whitespace outside its strings (JSON strings
/// hold no raw newline, so the result is one line).
fn compact_json(out: &mut Vec<u8>, text: &[u8]) {
    let (mut in_string, mut escaped) = (false, false);
    for &b in text {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            continue;
        }
        out.push(b);
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn record(payload: &'static [u8]) -> Record {
        Record {
            source: "gen".into(),
            key: "k1".into(),
            timestamp_ms: 1_700_000_000_000,
            payload: Bytes::from_static(payload),
            attributes: vec![("unit".into(), "C".into())],
        }
    }

    fn line(r: &Record) -> String {
        let mut out = Vec::new();
        r.write_ndjson(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn lines_as_envelope_payload_or_fields() {
        let r = Record {
            source: "gen".into(),
            key: "k".into(),
            timestamp_ms: 5,
            payload: bytes::Bytes::from_static(
                b"{\n \"device\": \"d1\", \"temp\": 21.5, \"loc\": {\"lat\": 48.1}\n}",
            ),
            attributes: vec![],
        };
        let line = |l: &Line| {
            let mut out = Vec::new();
            r.write_line(l, &mut out)
                .map(|()| String::from_utf8(out).unwrap())
        };
        assert!(
            line(&Line::Envelope)
                .unwrap()
                .starts_with("{\"source\":\"gen\"")
        );
        assert_eq!(
            line(&Line::Payload).unwrap(),
            "{\"device\":\"d1\",\"temp\":21.5,\"loc\":{\"lat\":48.1}}\n"
        );
        let fields = Line::Fields(vec![
            ("device".into(), "/device".into()),
            ("lat".into(), "/loc/lat".into()),
            ("missing".into(), "/nope".into()),
        ]);
        assert_eq!(
            line(&fields).unwrap(),
            "{\"device\":\"d1\",\"lat\":48.1,\"missing\":null}\n"
        );
        let text = Record {
            payload: bytes::Bytes::from_static(b"plain text"),
            ..r.clone()
        };
        let mut out = Vec::new();
        assert!(matches!(
            text.write_line(&fields, &mut out),
            Err(EncodeError::NotObject(_))
        ));
        assert!(out.is_empty());
        let wire = {
            let mut w = Vec::new();
            r.encode_into(&mut w);
            w
        };
        let mut from_ref = Vec::new();
        RecordRef::parse(&wire)
            .unwrap()
            .write_line(&fields, &mut from_ref)
            .unwrap();
        assert_eq!(String::from_utf8(from_ref).unwrap(), line(&fields).unwrap());
    }

    #[test]
    fn json_payload_is_embedded() {
        assert_eq!(
            line(&record(br#" {"t":21.5} "#)),
            "{\"source\":\"gen\",\"key\":\"k1\",\"ts\":1700000000000,\"payload\":{\"t\":21.5},\"attributes\":{\"unit\":\"C\"}}\n"
        );
    }

    #[test]
    fn pretty_json_stays_on_one_line() {
        let l = line(&record(b"{\n  \"a\": [1, 2]\n}"));
        assert_eq!(l.matches('\n').count(), 1);
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["payload"]["a"][1], 2);
    }

    #[test]
    fn json_with_invalid_utf8_in_a_string_is_not_written_raw() {
        // An MQTT or Kafka payload `{"id":"\xff\xfe"}`: JSON by shape, not UTF-8.
        let mut out = Vec::new();
        let err = record(b"{\"id\":\"\xff\xfe\"}")
            .write_ndjson(&mut out)
            .unwrap_err();
        assert_eq!(
            err,
            EncodeError::NotText {
                len: 11,
                valid_up_to: 7
            }
        );
        assert!(out.is_empty());
    }

    #[test]
    fn pretty_json_keeps_its_tokens_as_sent() {
        // Found by the ndjson fuzz target: through serde_json's Value a float came back
        // one unit in the last place off (1.1111111111008641e67 as
        // 1.111111111100864e67), and 1e400 came back as a string.
        let l = line(&record(
            b"{\r\n \"i\": 11111111111008641e51,\r\n \"s\": \"a b\\\" \\n\",\n \"big\": 1e400\n}",
        ));
        assert!(
            l.contains(r#""payload":{"i":11111111111008641e51,"s":"a b\" \n","big":1e400}"#),
            "{l}"
        );
        assert_eq!(l.matches('\n').count(), 1);
    }

    #[test]
    fn strings_are_escaped_exactly_as_serde_json_does() {
        for s in [
            "",
            "gen",
            "a/b/+",
            "ünï €",
            "q\"uote",
            "back\\slash",
            "tab\t",
            "\u{1}",
            "\u{7f}",
        ] {
            let mut out = Vec::new();
            write_json_str(&mut out, s);
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn text_payload_is_a_string() {
        let l = line(&record(b"hello \"world\"\n"));
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["payload"], "hello \"world\"\n");
        assert_eq!(l.matches('\n').count(), 1);
    }

    #[test]
    fn binary_payload_is_refused_and_leaves_out_untouched() {
        let mut out = b"before".to_vec();
        let err = record(b"\xff\xfe").write_ndjson(&mut out).unwrap_err();
        assert_eq!(
            err,
            EncodeError::NotText {
                len: 2,
                valid_up_to: 0
            }
        );
        assert_eq!(out, b"before");
    }
}
