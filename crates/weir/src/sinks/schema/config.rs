//! The keys of a typed sink: `schema` (its columns and the envelope columns kept),
//! `on_mismatch`, `unknown_fields` and `event_time`.

use toml::Value;

use super::types::{
    Column, ColumnType, Envelope, EventTime, OnMismatch, OnMissing, SchemaConfig, TimeFormat,
    UnknownFields, parse_type, pointer_keys,
};
use crate::keys::units::describe;
use crate::keys::{Section, join};

/// A list of column tables, for the reference.
fn example_columns(text: &str) -> Value {
    let table: toml::Table = toml::from_str(&format!("v = {text}")).expect("a valid example");
    table["v"].clone()
}

/// The envelope columns kept by default with a schema: all but `payload`.
const DEFAULT_ENVELOPE: [Envelope; 4] = [
    Envelope::Source,
    Envelope::Key,
    Envelope::Timestamp,
    Envelope::Attributes,
];

/// Reads the columns of `value` (a list of tables) at `key` of `s`; a struct's columns
/// (`top` is then a column of the top level) are documented as the top level's.
fn parse_columns(
    s: &Section<'_>,
    key: &str,
    value: &Value,
    depth: usize,
    top: Option<&Section<'_>>,
) -> Option<Vec<Column>> {
    let path = s.key_path(key);
    let Some(array) = value.as_array() else {
        s.error(
            key,
            format!("expected a list of columns, like [{{ name = \"temp\", path = \"/temp\", type = \"float64\" }}], found {}", describe(value)),
        );
        return None;
    };
    if array.is_empty() {
        s.error(key, "expected at least one column");
        return None;
    }
    let mut columns = Vec::with_capacity(array.len());
    let mut ok = true;
    for (i, element) in array.iter().enumerate() {
        let Some(table) = element.as_table() else {
            s.diagnostics().error(
                &format!("{path}[{i}]"),
                format!(
                    "expected a column table {{ name, path, type }}, found {}",
                    describe(element)
                ),
            );
            ok = false;
            continue;
        };
        let mut c = match top {
            Some(top) => s.element_like(key, i, table, top),
            None => s.element(key, i, table),
        };
        match parse_column(&mut c, depth, top) {
            Some(column) => {
                if columns.iter().any(|d: &Column| d.name == column.name) {
                    c.error("name", format!("{:?} names two columns", column.name));
                    ok = false;
                }
                columns.push(column);
            }
            None => ok = false,
        }
        c.finish();
    }
    ok.then_some(columns)
}

/// One column's keys (also walked, in a documenting walk, as `columns[].…`); `top` is
/// a column section of the top level (none: this is one).
fn parse_column(c: &mut Section<'_>, depth: usize, top: Option<&Section<'_>>) -> Option<Column> {
    let name = c
        .key("name", "The column's name in the file.")
        .example("temp")
        .req::<String>("the column's name");
    let pointer = c
        .key(
            "path",
            "Where the value is in the payload: a JSON pointer of object keys (a struct's columns: relative to it).",
        )
        .default_text("/ and the column's name")
        .example("/temp")
        .opt::<String>();
    let kind = c
        .key("type", "The column's type: bool, int32, int64, uint64, float32, float64, string, timestamp, date, json, list<T> or struct.")
        .example("float64")
        .req::<String>("a column type");
    let format = c
        .key(
            "format",
            "For a timestamp (or a list of them): unix_s, unix_ms, unix_us, unix_ns, rfc3339, or a strftime pattern.",
        )
        .default_text("rfc3339")
        .example("unix_ms")
        .opt::<String>();
    let required = c
        .key(
            "required",
            "A record without this value does not fit (after `default`).",
        )
        .or(false);
    let default = c
        .key("default", "The value when the payload has none.")
        .example(0)
        .raw("a value of the column's type");
    let nested = c
        .key("columns", "A struct's columns: the keys of `columns` again, their paths relative to the struct's.")
        .example(example_columns(r#"[{ name = "lat", path = "/lat", type = "float64" }]"#))
        .raw("list of columns");
    let name = name?;
    let pointer =
        pointer.unwrap_or_else(|| format!("/{}", name.replace('~', "~0").replace('/', "~1")));
    let path = match pointer_keys(&pointer) {
        Ok(path) => Some(path),
        Err(e) => {
            c.error("path", e);
            None
        }
    };
    let format = match format.as_deref().map(TimeFormat::parse) {
        Some(Ok(f)) => Some(f),
        Some(Err(e)) => {
            c.error("format", e);
            None
        }
        None => None,
    };
    let kind = match parse_type(&kind?, format.clone()) {
        Ok(k) => Some(k),
        Err(e) => {
            c.error("type", e);
            None
        }
    }?;
    let is_time = matches!(&kind, ColumnType::Timestamp(_))
        || matches!(&kind, ColumnType::List(inner) if matches!(**inner, ColumnType::Timestamp(_)));
    if format.is_some() && !is_time {
        c.error(
            "format",
            "applies only to type = \"timestamp\" (or a list of them)",
        );
    }
    let kind = match kind {
        ColumnType::Struct(_) => {
            let Some(nested) = nested else {
                c.error("columns", "missing for type = \"struct\": its columns, like [{ name = \"lat\", path = \"/lat\", type = \"float64\" }]");
                return None;
            };
            if depth >= 8 {
                c.error("columns", "structs nest at most 8 deep");
                return None;
            }
            let top = top.unwrap_or(c);
            ColumnType::Struct(parse_columns(c, "columns", nested, depth + 1, Some(top))?)
        }
        other => {
            if nested.is_some() {
                c.error("columns", "applies only to type = \"struct\"");
            }
            other
        }
    };
    let default = match default {
        None => None,
        Some(v) if matches!(kind, ColumnType::Struct(_)) => {
            let _ = v;
            c.error("default", "a struct has no default; give its columns one");
            None
        }
        Some(v) => match serde_json::to_value(v) {
            Ok(v) => Some(v),
            Err(e) => {
                c.error("default", format!("cannot be JSON: {e}"));
                None
            }
        },
    };
    Some(Column {
        name,
        pointer,
        path: path?,
        kind,
        required,
        default,
    })
}

impl SchemaConfig {
    /// Reads `schema`, `on_mismatch`, `unknown_fields` and `event_time`, declared
    /// whether or not they `apply` (`why` says when they do); `None` without a schema.
    pub fn parse(s: &mut Section<'_>, apply: bool, why: &'static str) -> Option<Self> {
        let schema = s
            .key(
                "schema",
                "Typed columns from the payload: `columns` (each a name, a JSON pointer and a type) and the `envelope` columns kept.",
            )
            .default_text("none: the envelope with the payload as bytes")
            .only_if(apply, why)
            .table();
        let on_mismatch = s
            .key(
                "on_mismatch",
                "With a schema: a value that does not fit its column sends its record to the quarantine, or becomes null (counted either way).",
            )
            .only_if(apply, why)
            .or(OnMismatch::Quarantine);
        let unknown_fields = s
            .key(
                "unknown_fields",
                "With a schema: payload fields it does not name are dropped, or kept as a JSON object in an `_extra` column.",
            )
            .only_if(apply, why)
            .or(UnknownFields::Drop);
        let event_time = s
            .key(
                "event_time",
                "With a schema: the payload field that is the record's time (the `timestamp` column), instead of the time weir read it.",
            )
            .default_text("the time weir read the record")
            .only_if(apply, why)
            .table()
            .and_then(parse_event_time);
        let mut t = schema?;
        let columns = t
            .key("columns", "The columns, in order: each { name, path, type, format, required, default, columns }.")
            .example(example_columns(r#"[{ name = "device", path = "/device", type = "string", required = true }, { name = "temp", path = "/temp", type = "float64" }]"#))
            .raw("list of columns");
        if let Some(mut template) = t.element_template("columns") {
            parse_column(&mut template, 0, None);
            template.finish();
        }
        let envelope = t
            .key(
                "envelope",
                "Envelope columns kept before the declared ones: source, key, timestamp, attributes, payload.",
            )
            .default_text("source, key, timestamp, attributes")
            .example(toml::Value::Array(vec!["source".into(), "timestamp".into()]))
            .list::<Envelope>();
        let documenting = t.is_documenting();
        let columns = match columns {
            Some(v) => parse_columns(&t, "columns", v, 0, None),
            None if documenting => None,
            None => {
                t.error("columns", "missing: a schema declares its columns, like columns = [{ name = \"temp\", path = \"/temp\", type = \"float64\" }]");
                None
            }
        };
        if let (Some(columns), Some(envelope)) = (&columns, &envelope) {
            for e in envelope {
                if columns.iter().any(|c| c.name == e.as_str()) {
                    t.error(
                        "envelope",
                        format!("{:?} is also a declared column's name", e.as_str()),
                    );
                }
            }
        }
        t.finish();
        let columns = columns?;
        check_overlaps(s, &columns);
        Some(SchemaConfig {
            columns,
            envelope: envelope.unwrap_or_else(|| DEFAULT_ENVELOPE.to_vec()),
            on_mismatch,
            unknown_fields,
            event_time,
        })
    }
}

fn parse_event_time(mut t: Section<'_>) -> Option<EventTime> {
    let pointer = t
        .key("path", "Where the time is in the payload (a JSON pointer).")
        .example("/ts")
        .req::<String>("a JSON pointer like \"/ts\"");
    let format = t
        .key(
            "format",
            "How it is written: unix_s, unix_ms, unix_us, unix_ns, rfc3339, or a strftime pattern.",
        )
        .example("unix_ms")
        .req::<String>("unix_ms, rfc3339, …");
    let on_missing = t
        .key(
            "on_missing",
            "A record without a usable time takes the time weir read it (counted), or goes to the quarantine.",
        )
        .or(OnMissing::IngestTime);
    let path = pointer.as_deref().map(pointer_keys).transpose();
    let format = format.as_deref().map(TimeFormat::parse).transpose();
    let documenting = t.is_documenting();
    let (path, format) = match (path, format) {
        (Ok(p), Ok(f)) => (p, f),
        (p, f) => {
            if let Err(e) = p {
                t.error("path", e);
            }
            if let Err(e) = f {
                t.error("format", e);
            }
            t.finish();
            return None;
        }
    };
    t.finish();
    if documenting {
        return None;
    }
    Some(EventTime {
        pointer: pointer?,
        path: path?,
        format: format?,
        on_missing,
    })
}

/// Two columns whose pointers overlap (one inside the other) cannot both be decoded:
/// `/loc` as json and `/loc/lat` as a float64. Reported at `schema.columns`.
fn check_overlaps(s: &Section<'_>, columns: &[Column]) {
    let mut leaves: Vec<(Vec<String>, &str)> = Vec::new();
    flatten(columns, &[], &mut leaves);
    for (i, (a, name_a)) in leaves.iter().enumerate() {
        for (b, name_b) in &leaves[i + 1..] {
            let short = a.len().min(b.len());
            if a[..short] == b[..short] {
                s.diagnostics().error(
                    &join(&s.key_path("schema"), "columns"),
                    format!("columns {name_a:?} and {name_b:?} read overlapping parts of the payload (/{} and /{}): each value is one column's", a.join("/"), b.join("/")),
                );
            }
        }
    }
}

/// Every leaf column's absolute path, with its name.
fn flatten<'c>(columns: &'c [Column], prefix: &[String], out: &mut Vec<(Vec<String>, &'c str)>) {
    for c in columns {
        let mut path = prefix.to_vec();
        path.extend(c.path.iter().cloned());
        match &c.kind {
            ColumnType::Struct(children) => flatten(children, &path, out),
            _ => out.push((path, &c.name)),
        }
    }
}
