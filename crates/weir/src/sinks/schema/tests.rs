use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, ArrayRef};

use super::*;
use crate::keys::walk::parse_section;
use crate::record::Record;

fn schema(toml: &str) -> (Option<SchemaConfig>, Vec<String>) {
    let (c, errors) = parse_section("sinks.lake", toml, |s, _| {
        Some(SchemaConfig::parse(s, true, "applies only to parquet"))
    });
    (c.flatten(), errors)
}

fn typed(toml: &str) -> Typed {
    let (c, errors) = schema(toml);
    assert!(errors.is_empty(), "{errors:?}");
    Typed::new(c.expect("a schema"))
}

fn records(payloads: &[&str]) -> Vec<Record> {
    payloads
        .iter()
        .map(|p| Record {
            source: "mqtt".into(),
            key: "t".into(),
            timestamp_ms: 1_000,
            payload: bytes::Bytes::copy_from_slice(p.as_bytes()),
            attributes: vec![],
        })
        .collect()
}

const TELEMETRY: &str = r#"
schema.columns = [
  { name = "device", path = "/device", type = "string", required = true },
  { name = "temp", path = "/temp", type = "float64" },
  { name = "ts", path = "/ts", type = "timestamp", format = "unix_ms" },
  { name = "tags", type = "list<string>" },
  { name = "loc", path = "/loc", type = "struct", columns = [
      { name = "latitude", path = "/lat", type = "float64" },
      { name = "lon", type = "float64" } ] },
  { name = "raw", path = "/raw", type = "json" },
]
"#;

fn strings(a: &ArrayRef) -> Vec<Option<String>> {
    let a = a.as_string::<i32>();
    (0..a.len())
        .map(|i| a.is_valid(i).then(|| a.value(i).to_owned()))
        .collect()
}

#[test]
fn payloads_become_typed_columns() {
    let t = typed(TELEMETRY);
    let d = t
        .decode(&records(&[
            r#"{"device":"d1","temp":21.5,"ts":1733500000123,"tags":["a","b"],"loc":{"lat":48.1,"lon":11.5},"raw":{"x":[1,true]}}"#,
            r#"{"device":"d2","temp":"22","extra":1}"#,
        ]))
        .unwrap();
    assert!(d.rejected.is_empty(), "{:?}", d.rejected);
    assert_eq!(
        strings(&d.columns[0]),
        [Some("d1".into()), Some("d2".into())]
    );
    let temp = d.columns[1].as_primitive::<Float64Type>();
    assert_eq!((temp.value(0), temp.value(1)), (21.5, 22.0));
    let ts = d.columns[2].as_primitive::<TimestampMicrosecondType>();
    assert_eq!(ts.value(0), 1_733_500_000_123_000);
    assert!(ts.is_null(1));
    let tags = d.columns[3].as_list::<i32>();
    assert_eq!(tags.value(0).as_string::<i32>().value(1), "b");
    let loc = d.columns[4].as_struct();
    assert_eq!(loc.column_names(), ["latitude", "lon"]);
    assert_eq!(loc.column(0).as_primitive::<Float64Type>().value(0), 48.1);
    assert!(loc.is_null(1), "no loc in the second record");
    assert_eq!(
        strings(&d.columns[5])[0].as_deref(),
        Some(r#"{"x":[1,true]}"#)
    );
    let fields: Vec<_> = t
        .fields()
        .iter()
        .map(|f| (f.name().as_str(), f.is_nullable()))
        .collect();
    assert_eq!(
        fields,
        [
            ("device", false),
            ("temp", true),
            ("ts", true),
            ("tags", true),
            ("loc", true),
            ("raw", true)
        ]
    );
    for (field, column) in t.fields().iter().zip(&d.columns) {
        assert_eq!(field.data_type(), column.data_type(), "{}", field.name());
    }
}

#[test]
fn a_record_that_does_not_fit_is_named_with_its_column() {
    let t = typed(TELEMETRY);
    let d = t
        .decode(&records(&[
            r#"{"device":"d1","temp":21.5}"#,
            r#"{"device":"d2","temp":"hot"}"#,
            r#"{"temp":1}"#,
            "not json",
            r#"{"device":"d5","ts":"yesterday"}"#,
        ]))
        .unwrap();
    let reasons: Vec<(usize, &str)> = d.rejected.iter().map(|(i, r)| (*i, r.as_str())).collect();
    assert_eq!(reasons.len(), 4, "{reasons:#?}");
    assert!(
        reasons[0]
            .1
            .starts_with("column \"temp\" (/temp): the value is a JSON string"),
        "{}",
        reasons[0].1
    );
    assert!(
        reasons[1].1.contains("\"device\" (/device) is required"),
        "{}",
        reasons[1].1
    );
    assert!(reasons[2].1.contains("not JSON"), "{}", reasons[2].1);
    assert!(
        reasons[3].1.starts_with("column \"ts\" (/ts)"),
        "{}",
        reasons[3].1
    );
    assert_eq!(d.columns[0].len(), 1, "only the first record is kept");
    assert_eq!(d.keep.unwrap().true_count(), 1);
}

#[test]
fn on_mismatch_null_keeps_the_record_and_counts_it() {
    let t = typed(&format!("{TELEMETRY}\non_mismatch = \"null\""));
    let d = t
        .decode(&records(&[
            r#"{"device":"d2","temp":"hot"}"#,
            r#"{"temp":1}"#,
        ]))
        .unwrap();
    assert_eq!(d.nulled, 1);
    assert_eq!(
        d.rejected.len(),
        1,
        "a missing required value is still rejected"
    );
    assert!(d.columns[1].is_null(0));
}

#[test]
fn defaults_fill_missing_values() {
    let t = typed(
        r#"schema.columns = [ { name = "n", type = "int64", default = 7, required = true } ]"#,
    );
    let d = t
        .decode(&records(&[r#"{"n":1}"#, r#"{}"#, r#"{"n":null}"#]))
        .unwrap();
    assert!(d.rejected.is_empty(), "{:?}", d.rejected);
    let n = d.columns[0].as_primitive::<Int64Type>();
    assert_eq!(n.values().to_vec(), [1, 7, 7]);
}

#[test]
fn unknown_fields_go_to_extra() {
    let t = typed(
        "schema.columns = [ { name = \"a\", type = \"int64\" } ]\nunknown_fields = \"extra\"",
    );
    let d = t
        .decode(&records(&[r#"{"a":1,"b":{"c":2},"d":"x"}"#, r#"{"a":2}"#]))
        .unwrap();
    assert_eq!(t.fields().last().unwrap().name(), EXTRA);
    assert_eq!(
        strings(&d.columns[1]),
        [Some(r#"{"b":{"c":2},"d":"x"}"#.into()), None]
    );
}

#[test]
fn event_time_in_each_format() {
    for (format, value, expected) in [
        ("unix_s", "1733500000.5", 1_733_500_000_500_000),
        ("unix_ms", "1733500000123", 1_733_500_000_123_000),
        ("unix_us", "1733500000123456", 1_733_500_000_123_456),
        ("unix_ns", "1733500000123456789", 1_733_500_000_123_456),
        (
            "rfc3339",
            "\"2024-12-06T15:46:40.5+01:00\"",
            1_733_496_400_500_000,
        ),
        (
            "%d/%m/%Y %H:%M",
            "\"06/12/2024 14:46\"",
            1_733_496_360_000_000,
        ),
    ] {
        let t = typed(&format!(
            "schema.columns = [ {{ name = \"a\", type = \"int64\" }} ]\nevent_time = {{ path = \"/t\", format = \"{format}\" }}"
        ));
        let d = t
            .decode(&records(&[&format!(r#"{{"t":{value}}}"#), "{}"]))
            .unwrap();
        assert_eq!(
            d.event_time_us.as_deref(),
            Some(&[expected, 1_000_000][..]),
            "{format}"
        );
        assert_eq!(d.ingest_timed, 1, "{format}");
    }
    let t = typed(
        "schema.columns = [ { name = \"a\", type = \"int64\" } ]\nevent_time = { path = \"/t\", format = \"unix_ms\", on_missing = \"quarantine\" }",
    );
    let d = t.decode(&records(&[r#"{"t":5}"#, "{}"])).unwrap();
    assert_eq!(d.rejected.len(), 1);
    assert_eq!(d.event_time_us.as_deref(), Some(&[5000][..]));
}

#[test]
fn bad_schemas_name_the_key() {
    for (toml, expected) in [
        (
            "schema.columns = [ { name = \"a\", type = \"float\" } ]",
            "sinks.lake.schema.columns[0].type: expected one of",
        ),
        (
            "schema.columns = [ { name = \"a\", path = \"a\", type = \"int64\" } ]",
            "sinks.lake.schema.columns[0].path: expected a JSON pointer",
        ),
        (
            "schema.columns = [ { name = \"a\", type = \"int64\", format = \"unix_ms\" } ]",
            "sinks.lake.schema.columns[0].format: applies only",
        ),
        (
            "schema.columns = [ { name = \"a\", type = \"struct\" } ]",
            "sinks.lake.schema.columns[0].columns: missing",
        ),
        (
            "schema.columns = [ { name = \"a\", type = \"int64\" }, { name = \"a\", type = \"int64\" } ]",
            "sinks.lake.schema.columns[1].name: \"a\" names two columns",
        ),
        (
            "schema.columns = [ { name = \"a\", path = \"/x\", type = \"json\" }, { name = \"b\", path = \"/x/y\", type = \"int64\" } ]",
            "overlapping",
        ),
        (
            "schema.columns = [ { name = \"a\", type = \"timestamp\", format = \"%Q\" } ]",
            "sinks.lake.schema.columns[0].format: expected unix_s",
        ),
        (
            "schema.envelope = [\"source\"]",
            "sinks.lake.schema.columns: missing",
        ),
        (
            "schema.columns = [ { name = \"a\", type = \"int64\" } ]\nevent_time = { path = \"/t\" }",
            "sinks.lake.event_time.format: missing",
        ),
        (
            "schema.columns = [ { name = \"a\", type = \"int64\", colour = 1 } ]",
            "sinks.lake.schema.columns[0].colour: unknown key",
        ),
    ] {
        let (_, errors) = schema(toml);
        assert!(
            errors.iter().any(|e| e.contains(expected)),
            "{toml}: {errors:?}"
        );
    }
    let _ = Arc::new(());
}
