//! What shapes an object: the keys that decide its bytes or its name, each recorded in
//! the journal as a hash of its canonical value ([`Shape`]), so that a replay can tell
//! whether it would write a recorded object as it was recorded. Sans-IO.
//!
//! The keys, by the names a user writes:
//! - `url`: the bucket (or directory) and the prefix, part of every name;
//! - `format`: the bytes, and the name's extension;
//! - `compression`: the bytes (and for NDJSON the extension);
//! - `row_group_rows`, `row_group_bytes`: how a Parquet object is laid out;
//! - `schema.columns`, `schema.envelope`, `on_mismatch`, `unknown_fields`, `event_time`:
//!   a typed Parquet object's columns and values;
//! - `encoding`, `fields`: what each NDJSON line is;
//! - `layout`: the folders in every name, and which records share an object.
//!
//! Not in it: `where` (it decides which records an object holds, not how a record is
//! written or what the object is named: a replay under a new filter still writes a
//! valid object of the same offsets under the same name), `rotate` (a recorded object
//! keeps its recorded boundaries), `part_size` (the upload's parts, not the object) and
//! the footer's provenance (the config's hash, which changes with any edit), and
//! `max_open_partitions` (a recorded object keeps its boundaries however many are open).
//! A key that comes to shape names or bytes belongs in [`Shape::of`].
//!
//! A hash is xxh3 (64 bits) of a canonical text of the value: its name as written
//! (`"ndjson"`), a number, or compact JSON of the parsed value. It stays the same across
//! runs and releases as long as that text does; the tests pin a few.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use super::config::{Format, ObjectStoreConfig};
use super::journal::Recorded;
use crate::record::Line;

/// Each key that shapes the sink's objects, with the hash of its value (16 hex digits).
/// A key that does not apply (`fields` without it, `schema.columns` for NDJSON) is
/// absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Shape(BTreeMap<String, String>);

impl Shape {
    /// The shape `config` gives the objects it writes.
    pub fn of(config: &ObjectStoreConfig) -> Shape {
        let mut shape = Shape::default();
        shape.add("url", &json(&config.location));
        shape.add("format", config.format.as_str());
        if let Some(layout) = &config.partitioning.layout {
            shape.add("layout", layout.text());
        }
        match (config.format, &config.parquet) {
            (Format::Parquet, Some(parquet)) => {
                shape.add("compression", parquet.compression.as_str());
                shape.add("row_group_rows", &parquet.row_group_rows.to_string());
                shape.add(
                    "row_group_bytes",
                    &parquet.row_group_bytes.bytes().to_string(),
                );
                if let Some(schema) = &config.schema {
                    shape.add("schema.columns", &json(&schema.columns));
                    shape.add("schema.envelope", &json(&schema.envelope));
                    shape.add("on_mismatch", schema.on_mismatch.as_str());
                    shape.add("unknown_fields", schema.unknown_fields.as_str());
                    if let Some(event_time) = &schema.event_time {
                        shape.add("event_time", &json(event_time));
                    }
                }
            }
            _ => {
                shape.add("compression", config.ndjson_compression.as_str());
                match &config.line {
                    Line::Envelope => shape.add("encoding", "envelope"),
                    Line::Payload => shape.add("encoding", "payload"),
                    Line::Fields(fields) => shape.add("fields", &json(fields)),
                }
            }
        }
        shape
    }

    fn add(&mut self, key: &str, canonical: &str) {
        self.0.insert(
            key.to_owned(),
            format!("{:016x}", xxh3_64(canonical.as_bytes())),
        );
    }

    /// The keys whose value differs between `self` and `other` (a key present in one
    /// only differs), in name order.
    pub fn changed<'a>(&'a self, other: &'a Shape) -> Vec<&'a str> {
        let mut keys: Vec<&str> = self
            .0
            .iter()
            .filter(|(k, v)| other.0.get(*k) != Some(v))
            .map(|(k, _)| k.as_str())
            .collect();
        keys.extend(
            other
                .0
                .keys()
                .filter(|k| !self.0.contains_key(*k))
                .map(String::as_str),
        );
        keys.sort_unstable();
        keys
    }
}

/// Checks that the current config (`now`) writes every recorded object a replay writes
/// again as it was recorded: each one closed (its `last` known: it may be stored) and
/// not yet passed by the `committed` cursor. An entry recorded before shapes existed
/// passes. An unclosed one passes too: nothing is stored under its key, and recovery
/// names it again by the current config ([`Shape::unclosed_renamed`]).
///
/// # Errors
///
/// The message a user acts on: the keys that changed, an object they concern, and the
/// two ways out, naming `journal`.
pub fn check_recorded(
    recorded: &BTreeMap<u64, Recorded>,
    committed: u64,
    now: &Shape,
    journal: &Path,
) -> Result<(), String> {
    let mut keys: Vec<&str> = Vec::new();
    let mut objects = 0;
    let mut example = None;
    let mut through = 0;
    for (&first, r) in recorded {
        let (Some(last), Some(shape)) = (r.last, &r.shape) else {
            continue;
        };
        let changed = shape.changed(now);
        if last < committed || changed.is_empty() {
            continue;
        }
        objects += 1;
        through = through.max(last);
        example.get_or_insert((first, last, r.key.as_str()));
        for key in changed {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    let Some((first, last, key)) = example else {
        return Ok(());
    };
    keys.sort_unstable();
    // The keys that apply change with `format`: it alone says what to change back.
    if keys.contains(&"format") {
        keys = vec!["format"];
    }
    let named = keys
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    Err(format!(
        "the sink's journal records {objects} object(s) that a replay must write again exactly as recorded, \
         and the config now has a different {named} (the first: {key}, offsets {first} to {last}); \
         the sink does not start, so that no object is written under its recorded name with other contents. {}",
        fixes(&named, through, journal)
    ))
}

/// The two ways out of a refused replay.
fn fixes(keys: &str, through: u64, journal: &Path) -> String {
    format!(
        "Either run the sink with its earlier {keys} until its cursor is past offset {through}, then change it; \
         or remove the sink's state, the file {}, with weir stopped: the records from its cursor on are then \
         written under the current config, the recorded objects' unfinished uploads are no longer aborted, and \
         any of those objects already stored stay beside the new ones (their records twice).",
        journal.display()
    )
}

impl Shape {
    /// Whether recovery names the recorded object `r` again by the current config
    /// (`now`): it was never closed (so nothing is stored under its key) and was
    /// recorded with another shape.
    pub fn unclosed_renamed(r: &Recorded, now: &Shape) -> bool {
        r.last.is_none() && r.shape.as_ref().is_some_and(|s| s != now)
    }
}

fn json(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("a parsed config value serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{Diagnostics, Section};
    use crate::sinks::SinkKeys;

    fn config(extra: &str) -> ObjectStoreConfig {
        let table: toml::Table = format!("url = \"s3://lake/weir\"\n{extra}")
            .parse()
            .unwrap();
        let diag = Diagnostics::default();
        let mut section = Section::new("sinks.lake".into(), &table, &diag);
        let config = ObjectStoreConfig::parse(&mut section);
        section.finish();
        assert!(diag.into_errors().is_empty());
        config.unwrap()
    }

    fn changed(a: &str, b: &str) -> Vec<String> {
        let (a, b) = (Shape::of(&config(a)), Shape::of(&config(b)));
        a.changed(&b).into_iter().map(str::to_owned).collect()
    }

    #[test]
    fn each_key_that_shapes_an_object_is_named_when_it_changes() {
        assert_eq!(
            changed("", "format = \"ndjson\""),
            [
                "compression",
                "encoding",
                "format",
                "row_group_bytes",
                "row_group_rows"
            ]
        );
        assert_eq!(changed("", "compression = \"snappy\""), ["compression"]);
        assert_eq!(
            changed(
                "format = \"ndjson\"",
                "format = \"ndjson\"\ncompression = \"gzip\""
            ),
            ["compression"]
        );
        assert_eq!(changed("", "row_group_rows = 10"), ["row_group_rows"]);
        assert_eq!(
            changed(
                "format = \"ndjson\"",
                "format = \"ndjson\"\nencoding = \"payload\""
            ),
            ["encoding"]
        );
        assert_eq!(
            changed(
                "format = \"ndjson\"",
                "format = \"ndjson\"\nfields = { t = \"/t\" }"
            ),
            ["encoding", "fields"]
        );
        let schema = "schema = { columns = [{ name = \"t\", path = \"/t\", type = \"float64\" }] }";
        let typed = changed("", schema);
        assert_eq!(
            typed,
            [
                "on_mismatch",
                "schema.columns",
                "schema.envelope",
                "unknown_fields"
            ]
        );
        assert_eq!(
            changed(schema, &schema.replace("float64", "float32")),
            ["schema.columns"]
        );
        assert_eq!(
            changed(schema, &format!("{schema}\non_mismatch = \"null\"")),
            ["on_mismatch"]
        );
        let with_time =
            format!("{schema}\nevent_time = {{ path = \"/ts\", format = \"unix_ms\" }}");
        assert_eq!(changed(schema, &with_time), ["event_time"]);
    }

    #[test]
    fn the_prefix_and_bucket_shape_names_and_other_keys_do_not() {
        let a = Shape::of(&config(""));
        let mut other =
            config("rotate = { bytes = \"1 MiB\" }\npart_size = \"6 MiB\"\nupload_concurrency = 9");
        assert!(a.changed(&Shape::of(&other)).is_empty());
        other.location = super::super::Location::parse("s3://lake/elsewhere").unwrap();
        assert_eq!(a.changed(&Shape::of(&other)), ["url"]);
        other.location = super::super::Location::parse("s3://pond/weir").unwrap();
        assert_eq!(a.changed(&Shape::of(&other)), ["url"]);
    }

    fn recorded(last: Option<u64>, shape: Option<Shape>) -> Recorded {
        Recorded {
            key: "weir/lake/x-0.parquet".into(),
            partition: String::new(),
            upload: None,
            last,
            shape,
        }
    }

    #[test]
    fn a_closed_object_recorded_with_another_shape_is_refused_naming_the_key_and_the_fixes() {
        let parquet = Shape::of(&config(""));
        let ndjson = Shape::of(&config("format = \"ndjson\""));
        let journal = Path::new("/data/sinks/lake/object_store.journal");
        let mut map = BTreeMap::new();
        map.insert(0, recorded(Some(99), Some(parquet.clone())));
        let err = check_recorded(&map, 0, &ndjson, journal).unwrap_err();
        assert!(err.contains("a different `format` ("), "{err}");
        assert!(
            err.contains("weir/lake/x-0.parquet") && err.contains("offsets 0 to 99"),
            "{err}"
        );
        assert!(
            err.contains("earlier") && err.contains("past offset 99"),
            "{err}"
        );
        assert!(
            err.contains("/data/sinks/lake/object_store.journal"),
            "{err}"
        );
        // The same shape, an entry the cursor has passed, one from before shapes and an
        // unclosed one all pass.
        assert!(check_recorded(&map, 0, &parquet, journal).is_ok());
        assert!(check_recorded(&map, 100, &ndjson, journal).is_ok());
        map.insert(0, recorded(Some(99), None));
        assert!(check_recorded(&map, 0, &ndjson, journal).is_ok());
        map.insert(0, recorded(None, Some(parquet.clone())));
        assert!(check_recorded(&map, 0, &ndjson, journal).is_ok());
        assert!(Shape::unclosed_renamed(&map[&0], &ndjson));
        assert!(!Shape::unclosed_renamed(&map[&0], &parquet));
    }

    /// The hashes a journal written today holds must match the ones a later release
    /// computes for the same config: a change here refuses every recorded object.
    #[test]
    fn hashes_are_pinned() {
        let pinned = |extra: &str| serde_json::to_string(&Shape::of(&config(extra))).unwrap();
        assert_eq!(
            pinned(""),
            r#"{"compression":"d8e738dffd081005","format":"20642435cb35a755","row_group_bytes":"d30db57bcc3643f9","row_group_rows":"403545b3315231c6","url":"5e22ddcb9f15ef82"}"#
        );
        assert_eq!(
            pinned("format = \"ndjson\"\ncompression = \"gzip\"\nfields = { t = \"/t\" }"),
            r#"{"compression":"7f9d0da34c16c06c","fields":"23f9626c9a85c63e","format":"05d4bad838089951","url":"5e22ddcb9f15ef82"}"#
        );
        assert_eq!(
            pinned(
                "schema = { columns = [{ name = \"t\", path = \"/t\", type = \"timestamp\", format = \"unix_ms\", required = true }], envelope = [\"source\"] }\nevent_time = { path = \"/ts\", format = \"rfc3339\" }"
            ),
            r#"{"compression":"d8e738dffd081005","event_time":"09e71262431575fc","format":"20642435cb35a755","on_mismatch":"d6f23f2dddf263bc","row_group_bytes":"d30db57bcc3643f9","row_group_rows":"403545b3315231c6","schema.columns":"2f2d1175a2a9971b","schema.envelope":"40075f314e821305","unknown_fields":"2490b07d75bf8f56","url":"5e22ddcb9f15ef82"}"#
        );
    }
}
