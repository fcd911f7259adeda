//! weir's own arrow-json decoders, for what arrow-json lacks: a timestamp in a declared
//! format (Unix seconds to nanoseconds, RFC 3339, a strftime pattern), and any JSON
//! value kept as its JSON text (`json` columns). A field asks for one with its
//! metadata ([`TIME`], [`JSON`]).

use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_array::builder::{StringBuilder, TimestampMicrosecondBuilder};
use arrow_json::reader::{ArrayDecoder, DecoderContext, DecoderFactory, Tape, TapeElement};
use arrow_schema::{ArrowError, FieldRef};

use super::types::TimeFormat;

/// Field metadata that selects weir's timestamp decoder (its value: the format).
pub const TIME: &str = "weir.time";
/// Field metadata that selects weir's JSON-text decoder.
pub const JSON: &str = "weir.json";

/// Builds weir's decoders for the fields that ask for them.
#[derive(Debug)]
pub struct Factory {
    /// Read a value that does not fit as null.
    pub lenient: bool,
}

impl DecoderFactory for Factory {
    fn make_default_decoder(
        &self,
        _ctx: &DecoderContext,
        field: &FieldRef,
        _is_nullable: bool,
    ) -> Result<Option<Box<dyn ArrayDecoder>>, ArrowError> {
        if let Some(format) = field.metadata().get(TIME) {
            let format = TimeFormat::parse(format).map_err(ArrowError::JsonError)?;
            return Ok(Some(Box::new(TimeDecoder {
                format,
                lenient: self.lenient,
            })));
        }
        if field.metadata().contains_key(JSON) {
            return Ok(Some(Box::new(JsonDecoder)));
        }
        Ok(None)
    }
}

/// A timestamp in its declared format, to microseconds UTC.
struct TimeDecoder {
    format: TimeFormat,
    lenient: bool,
}

/// A number on the tape at `p`, as f64, with its text when it was kept as text.
fn number(tape: &Tape<'_>, p: u32) -> Option<f64> {
    match tape.get(p) {
        TapeElement::Number(idx) => tape.get_string(idx).parse().ok(),
        TapeElement::I32(v) => Some(f64::from(v)),
        TapeElement::F32(v) => Some(f64::from(f32::from_bits(v))),
        TapeElement::I64(high) => match tape.get(p + 1) {
            TapeElement::I32(low) => {
                Some((((i64::from(high)) << 32) | i64::from(low as u32)) as f64)
            }
            _ => None,
        },
        TapeElement::F64(high) => match tape.get(p + 1) {
            TapeElement::F32(low) => Some(f64::from_bits((u64::from(high) << 32) | u64::from(low))),
            _ => None,
        },
        TapeElement::String(idx) => tape.get_string(idx).trim().parse().ok(),
        _ => None,
    }
}

/// An exact integer on the tape at `p` (epoch nanoseconds do not fit an f64 exactly).
fn integer(tape: &Tape<'_>, p: u32) -> Option<i64> {
    match tape.get(p) {
        TapeElement::Number(idx) => tape.get_string(idx).parse().ok(),
        TapeElement::I32(v) => Some(i64::from(v)),
        TapeElement::I64(high) => match tape.get(p + 1) {
            TapeElement::I32(low) => Some((i64::from(high) << 32) | i64::from(low as u32)),
            _ => None,
        },
        TapeElement::String(idx) => tape.get_string(idx).trim().parse().ok(),
        _ => None,
    }
}

impl TimeFormat {
    /// The microseconds of the value at `p`, if it is one in this format.
    fn micros(&self, tape: &Tape<'_>, p: u32) -> Option<i64> {
        let scaled = |per_second: f64| {
            number(tape, p)
                .map(|x| x * 1_000_000.0 / per_second)
                .filter(|x| x.is_finite() && x.abs() < 9.2e18)
                .map(|x| x.round() as i64)
        };
        match self {
            TimeFormat::UnixS => scaled(1.0),
            TimeFormat::UnixMs => integer(tape, p)
                .map(|ms| ms.saturating_mul(1000))
                .or_else(|| scaled(1000.0)),
            TimeFormat::UnixUs => integer(tape, p).or_else(|| scaled(1_000_000.0)),
            TimeFormat::UnixNs => integer(tape, p).map(|ns| ns.div_euclid(1000)),
            TimeFormat::Rfc3339 => match tape.get(p) {
                TapeElement::String(idx) => {
                    chrono::DateTime::parse_from_rfc3339(tape.get_string(idx))
                        .ok()
                        .map(|t| t.timestamp_micros())
                }
                _ => None,
            },
            TimeFormat::Strftime(pattern) => match tape.get(p) {
                TapeElement::String(idx) => {
                    crate::record::time::parse_strftime(tape.get_string(idx), pattern)
                        .map(|t| t.timestamp_micros())
                }
                _ => None,
            },
        }
    }
}

impl ArrayDecoder for TimeDecoder {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        let mut builder =
            TimestampMicrosecondBuilder::with_capacity(pos.len()).with_timezone("UTC");
        for &p in pos {
            if tape.get(p) == TapeElement::Null {
                builder.append_null();
                continue;
            }
            match self.format.micros(tape, p) {
                Some(us) => builder.append_value(us),
                None if self.lenient => builder.append_null(),
                None => {
                    return Err(ArrowError::JsonError(format!(
                        "failed to parse {} as a timestamp in the format {}",
                        json_of(tape, p),
                        self.format.text()
                    )));
                }
            }
        }
        Ok(Arc::new(builder.finish()))
    }
}

/// Any value, as its JSON text.
struct JsonDecoder;

impl ArrayDecoder for JsonDecoder {
    fn decode(&mut self, tape: &Tape<'_>, pos: &[u32]) -> Result<ArrayRef, ArrowError> {
        let mut builder = StringBuilder::with_capacity(pos.len(), pos.len() * 16);
        let mut text = String::new();
        for &p in pos {
            if tape.get(p) == TapeElement::Null {
                builder.append_null();
                continue;
            }
            text.clear();
            write_json(tape, p, &mut text);
            builder.append_value(&text);
        }
        Ok(Arc::new(builder.finish()))
    }
}

/// The value at `p` as JSON text (for a message).
fn json_of(tape: &Tape<'_>, p: u32) -> String {
    let mut text = String::new();
    write_json(tape, p, &mut text);
    if text.len() > 64 {
        let mut end = 64;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// Writes the value at `p` as JSON; returns the index after it.
fn write_json(tape: &Tape<'_>, p: u32, out: &mut String) -> u32 {
    let string = |s: &str, out: &mut String| {
        out.push_str(&serde_json::to_string(s).expect("a string serializes"));
    };
    match tape.get(p) {
        TapeElement::StartObject(end) => {
            out.push('{');
            let mut at = p + 1;
            let mut first = true;
            while at < end {
                if !first {
                    out.push(',');
                }
                first = false;
                if let TapeElement::String(idx) = tape.get(at) {
                    string(tape.get_string(idx), out);
                }
                out.push(':');
                at = write_json(tape, at + 1, out);
            }
            out.push('}');
            end + 1
        }
        TapeElement::StartList(end) => {
            out.push('[');
            let mut at = p + 1;
            let mut first = true;
            while at < end {
                if !first {
                    out.push(',');
                }
                first = false;
                at = write_json(tape, at, out);
            }
            out.push(']');
            end + 1
        }
        TapeElement::String(idx) => {
            string(tape.get_string(idx), out);
            p + 1
        }
        TapeElement::Number(idx) => {
            out.push_str(tape.get_string(idx));
            p + 1
        }
        TapeElement::True => {
            out.push_str("true");
            p + 1
        }
        TapeElement::False => {
            out.push_str("false");
            p + 1
        }
        TapeElement::Null => {
            out.push_str("null");
            p + 1
        }
        TapeElement::I32(v) => {
            out.push_str(&v.to_string());
            p + 1
        }
        TapeElement::F32(v) => {
            out.push_str(&f32::from_bits(v).to_string());
            p + 1
        }
        TapeElement::I64(_) | TapeElement::F64(_) => {
            match number(tape, p) {
                Some(x) => out.push_str(&x.to_string()),
                None => out.push_str("null"),
            }
            p + 2
        }
        TapeElement::EndObject(_) | TapeElement::EndList(_) => p + 1,
        _ => p + 1,
    }
}
