//! What a JSON sink writes for each record ([`Line`]): the envelope, the payload alone
//! (`encoding = "payload"`), or an object of chosen payload fields
//! (`fields = { device = "/device", temp = "/temp" }`, each a JSON pointer; written in
//! name order, null when the payload has no value there).

use crate::keys::Section;
use crate::keys::units::{describe, string_enum};
use crate::record::Line;
use crate::sinks::schema::pointer_keys;

/// The `encoding` of a sink that writes NDJSON lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEncoding {
    /// `{"source","key","ts","payload","attributes"}` per record.
    Envelope,
    /// The payload alone per record.
    Payload,
}

string_enum!(LineEncoding { "envelope" => Envelope, "payload" => Payload });

/// Reads `fields`, declared whether or not it `apply` (`why` says when it does).
pub fn parse_fields(
    s: &mut Section<'_>,
    apply: bool,
    why: &'static str,
) -> Option<Vec<(String, String)>> {
    let value = s
        .key(
            "fields",
            "Write an object of these payload fields instead: each name with a JSON pointer into the payload (null where it has none), in name order.",
        )
        .default_text("none")
        .example(toml::Value::Table(toml::Table::from_iter([
            ("device".to_owned(), toml::Value::from("/device")),
            ("temp".to_owned(), toml::Value::from("/temp")),
        ])))
        .only_if(apply, why)
        .raw("table of name = JSON pointer")?;
    let path = s.key_path("fields");
    let Some(table) = value.as_table().filter(|t| !t.is_empty()) else {
        s.error(
            "fields",
            format!(
                "expected a table of names and JSON pointers, like {{ device = \"/device\" }}, found {}",
                describe(value)
            ),
        );
        return None;
    };
    let mut fields = Vec::with_capacity(table.len());
    let mut ok = true;
    for (name, pointer) in table {
        let at = crate::keys::join(&path, name);
        match pointer.as_str().map(|p| (p, pointer_keys(p))) {
            Some((p, Ok(_))) => fields.push((name.clone(), p.to_owned())),
            Some((_, Err(e))) => {
                s.diagnostics().error(&at, e);
                ok = false;
            }
            None => {
                s.diagnostics().error(
                    &at,
                    format!(
                        "expected a JSON pointer like \"/device\", found {}",
                        describe(pointer)
                    ),
                );
                ok = false;
            }
        }
    }
    ok.then_some(fields)
}

/// Reads `encoding` (`envelope` or `payload`) and `fields` of a sink that writes NDJSON
/// lines, declared whether or not they `apply`.
pub fn parse_line(s: &mut Section<'_>, apply: bool, why: &'static str) -> Line {
    let encoding = s
        .key(
            "encoding",
            "What each NDJSON line is: the envelope {source, key, ts, payload, attributes}, or the payload alone.",
        )
        .only_if(apply, why)
        .or(LineEncoding::Envelope);
    let fields = parse_fields(s, apply, why);
    match (encoding, fields) {
        (_, Some(fields)) if encoding == LineEncoding::Payload && s.has("encoding") => {
            s.error("fields", "writes a projected object instead of the payload: leave encoding out, or drop fields");
            Line::Fields(fields)
        }
        (_, Some(fields)) => Line::Fields(fields),
        (LineEncoding::Envelope, None) => Line::Envelope,
        (LineEncoding::Payload, None) => Line::Payload,
    }
}
