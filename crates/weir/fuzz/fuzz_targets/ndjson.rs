//! Fuzz the NDJSON paths: an HTTP body split into records (`split_ndjson`), records
//! decoded from the WAL's bytes (`Record::decode_with`), and records written as NDJSON
//! lines by the file sinks (`Record::write_ndjson`). None may panic, and:
//! - every record the split accepts is valid UTF-8 JSON on one line;
//! - a record decoded from bytes encodes back to exactly those bytes;
//! - every line written is one line of valid JSON whose fields are the record's, and
//!   whose payload is the record's own JSON when the payload is JSON.
#![no_main]

use std::sync::Arc;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use weir::record::Record;
use weir::sources::http::split_ndjson;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let body = Bytes::copy_from_slice(rest);
    if mode & 1 == 0 {
        split_body(&body);
    } else {
        decode_wire(body);
    }
});

/// An HTTP body: what is accepted is JSON, and is written back as that JSON.
fn split_body(body: &Bytes) {
    let lines = body.split(|&b| b == b'\n').count();
    match split_ndjson(body) {
        Ok(payloads) => {
            assert!(payloads.len() <= lines);
            for p in payloads {
                assert!(!p.contains(&b'\n'));
                let text = std::str::from_utf8(&p).expect("an accepted record is UTF-8");
                // JSON by RFC 8259; serde_json's `Value` refuses numbers beyond f64
                // (1e400), which are accepted and written as sent.
                let value: Option<Value> = serde_json::from_str(text).ok();
                let record = Record {
                    source: "http".into(),
                    key: String::new(),
                    timestamp_ms: 1,
                    payload: p.clone(),
                    attributes: Vec::new(),
                };
                let mut wire = Vec::new();
                record.encode_into(&mut wire);
                let back = Record::decode_with(Bytes::from(wire), |s: &str| Arc::from(s))
                    .expect("own encoding");
                assert_eq!(back, record);
                match value {
                    Some(value) => {
                        let line = written(&back).expect("a JSON payload is always written");
                        assert_eq!(
                            line["payload"], value,
                            "the payload is the record's own JSON"
                        );
                    }
                    None => {
                        let mut out = Vec::new();
                        back.write_ndjson(&mut out)
                            .expect("a JSON payload is always written");
                        let line = String::from_utf8(out).expect("an NDJSON line is UTF-8");
                        assert_eq!(line.matches('\n').count(), 1, "one line");
                        // Kept as sent: on one line already, or with the whitespace
                        // between its tokens dropped (whitespace inside strings stays:
                        // that case is checked without strings only).
                        let trimmed = text.trim_ascii();
                        if !trimmed.contains(['\r', '\n']) {
                            assert!(line.contains(trimmed), "written as sent: {line}");
                        } else if !text.contains('"') {
                            let tokens: String = text.split_ascii_whitespace().collect();
                            assert!(line.contains(&tokens), "written compactly: {line}");
                        }
                    }
                }
            }
        }
        Err(bad) => assert!(
            bad.line >= 1 && bad.line <= lines,
            "line {} of {lines}",
            bad.line
        ),
    }
}

/// Any bytes as a record's WAL form.
fn decode_wire(bytes: Bytes) {
    let Ok(record) = Record::decode_with(bytes.clone(), |s: &str| Arc::from(s)) else {
        return;
    };
    let mut again = Vec::new();
    record.encode_into(&mut again);
    assert_eq!(again, bytes, "decode then encode gives the same bytes");
    if let Some(line) = written(&record) {
        assert_eq!(line["source"], *record.source);
        assert_eq!(line["key"], record.key);
        assert_eq!(line["ts"], record.timestamp_ms);
        for (name, value) in &record.attributes {
            // Repeated names: the last one wins in the JSON object.
            let last = record
                .attributes
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .unwrap();
            assert_eq!(line["attributes"][name], last.1, "attribute {name}={value}");
        }
        if let Ok(text) = std::str::from_utf8(&record.payload)
            && serde_json::from_str::<Value>(text).is_err()
        {
            assert_eq!(line["payload"], text, "a text payload is a JSON string");
        }
    }
}

/// The record's NDJSON line parsed back, or `None` when it has no text form (checked:
/// then its payload is not UTF-8).
fn written(record: &Record) -> Option<Value> {
    let mut out = b"before".to_vec();
    match record.write_ndjson(&mut out) {
        Ok(()) => {
            let line = &out[b"before".len()..];
            assert_eq!(line.last(), Some(&b'\n'));
            assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1, "one line");
            let text = std::str::from_utf8(line).expect("an NDJSON line is UTF-8");
            Some(serde_json::from_str(text).expect("an NDJSON line is JSON"))
        }
        Err(_) => {
            assert_eq!(
                out, b"before",
                "a refused record leaves the output as it was"
            );
            assert!(
                std::str::from_utf8(&record.payload).is_err(),
                "only binary is refused"
            );
            None
        }
    }
}
