//! Declarations read keys as the section always has, and document them.

use std::num::NonZeroU32;
use std::path::PathBuf;

use toml::{Table, Value};

use super::*;
use crate::keys::{ByteSize, Duration};

/// A parse function using each way to declare a key.
fn parse(s: &mut Section<'_>) -> Option<(ByteSize, PathBuf)> {
    let max = s
        .key("max_bytes", "Largest thing accepted.")
        .or(ByteSize::mib(1));
    let path = s
        .key("path", "Where it goes.")
        .example("./out")
        .req("a directory");
    let _: Option<u64> = s
        .key("rate", "Records per second.")
        .unit("records per second")
        .default_text("unlimited")
        .example(500)
        .opt();
    let _: Option<Vec<String>> = s.key("inputs", "Sources.").example(vec!["gen"]).list();
    if let Some(mut t) = s.key("retry", "Backoff.").table() {
        let _ = t.key("initial", "First delay.").or(Duration::millis(100));
        t.finish();
    }
    let _ = s
        .key("url", "A URL or a list of them.")
        .required()
        .example("nats://127.0.0.1:4222")
        .raw("URL or list of URLs");
    Some((max, path?))
}

/// The keys `parse` declares, in order.
const DECLARED: [&str; 7] = [
    "max_bytes",
    "path",
    "rate",
    "inputs",
    "retry",
    "retry.initial",
    "url",
];

fn run(text: &str, diag: &Diagnostics) -> Option<(ByteSize, PathBuf)> {
    let table: Table = text.parse().expect("valid TOML");
    let mut s = Section::new("sinks.lake".into(), &table, diag);
    let parsed = parse(&mut s);
    s.finish();
    parsed
}

fn errors(diag: Diagnostics) -> Vec<String> {
    diag.into_errors().iter().map(ToString::to_string).collect()
}

#[test]
fn declared_keys_are_read_with_every_error_and_its_path() {
    let diag = Diagnostics::default();
    let parsed = run("path = \"./d\"\nmax_bytes = \"2 MiB\"", &diag);
    assert_eq!(parsed, Some((ByteSize::mib(2), PathBuf::from("./d"))));
    assert_eq!(errors(diag), Vec::<String>::new());

    let diag = Diagnostics::default();
    let text = "max_bytes = 0\nrate = \"x\"\ninputs = [\"a\", 3]\nretry = { initial = \"0s\", x = 1 }\nratte = 1";
    assert_eq!(run(text, &diag), None);
    assert_eq!(
        errors(diag),
        [
            r#"sinks.lake.max_bytes: expected a size like "128 MiB" (or a whole number of bytes), found 0: this is a bound, it must be at least 1 byte"#,
            r#"sinks.lake.path: missing required key (expected a path (a non-empty string)); a directory"#,
            r#"sinks.lake.rate: expected a whole number, 0 or more, found "x""#,
            r#"sinks.lake.inputs[1]: expected a non-empty string, found 3"#,
            r#"sinks.lake.retry.initial: expected a duration like "30s" or "100ms", found "0s": this must be longer than zero"#,
            "sinks.lake.retry.x: unknown key; allowed keys here: initial",
            "sinks.lake.ratte: unknown key (did you mean `rate`?); allowed keys here: inputs, max_bytes, path, rate, retry, url",
        ]
    );
}

#[test]
fn the_documenting_walk_lists_every_declaration_in_order() {
    let keys = document(|mut s| {
        parse(&mut s);
    });
    let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, DECLARED);
    let shown = |k: &KeyDoc| {
        (
            k.kind.to_string(),
            k.required,
            k.default.as_ref().map(ToString::to_string),
            k.default_text,
            k.unit,
            k.example().map(ToString::to_string),
        )
    };
    let size = r#"size ("8 MiB")"#.to_owned();
    assert_eq!(
        shown(&keys[0]),
        (
            size,
            false,
            Some(r#""1 MiB""#.into()),
            None,
            None,
            Some(r#""1 MiB""#.into())
        )
    );
    assert_eq!(
        shown(&keys[1]),
        (
            "path".into(),
            true,
            None,
            None,
            None,
            Some(r#""./out""#.into())
        )
    );
    assert_eq!(
        shown(&keys[2]),
        (
            "integer ≥ 0".into(),
            false,
            None,
            Some("unlimited"),
            Some("records per second"),
            Some("500".into())
        )
    );
    assert_eq!(keys[3].kind, "list of string");
    assert!(keys[4].is_table);
    assert_eq!(keys[5].default, Some(Value::String("100ms".into())));
    assert!(keys[6].required);
    assert_eq!(keys[6].kind, "URL or list of URLs");
    assert_eq!(keys[0].description, "Largest thing accepted.");
}

#[test]
fn examples_and_defaults_read_back_as_their_key() {
    let keys = document(|mut s| {
        parse(&mut s);
    });
    for key in &keys {
        if let (Some(check), Some(example)) = (key.check, key.example()) {
            assert_eq!(check(example), Ok(()), "{}", key.name);
        }
    }
    let inputs = keys.iter().find(|k| k.name == "inputs").expect("declared");
    let check = inputs.check.expect("typed");
    assert!(check(&Value::Array(vec![Value::Integer(3)])).is_err());
}

#[test]
fn a_recording_walk_lists_each_key_read_under_its_section() {
    let diag = Diagnostics::recording();
    run("path = \"./d\"\nretry = { initial = \"1s\" }", &diag);
    let reads: Vec<(String, String)> = diag
        .take_reads()
        .into_iter()
        .map(|r| (r.section, r.key))
        .collect();
    assert_eq!(
        reads,
        DECLARED.map(|k| ("sinks.lake".to_owned(), k.to_owned()))
    );
}

#[test]
fn a_key_that_does_not_apply_is_refused_when_present_and_documented() {
    let read = |text: &str, applies: bool| {
        let table: Table = text.parse().expect("valid TOML");
        let diag = Diagnostics::default();
        let mut s = Section::new("sinks.o".into(), &table, &diag);
        let rows = s
            .key("row_group_rows", "Rows per row group.")
            .only_if(applies, "only applies to format = \"parquet\"")
            .or(NonZeroU32::MIN);
        s.finish();
        (rows.get(), errors(diag))
    };
    assert_eq!(read("row_group_rows = 7", true), (7, vec![]));
    assert_eq!(
        read("row_group_rows = 7", false),
        (
            1,
            vec![r#"sinks.o.row_group_rows: only applies to format = "parquet""#.to_owned()]
        )
    );
    assert_eq!(read("", false), (1, vec![]));
    let keys = document(|mut s| {
        let _ = s.key("rows", "Rows.").only_if(false, "no").or(1u64);
    });
    assert_eq!(keys.len(), 1);
}

#[test]
fn a_refused_key_is_allowed_but_neither_read_nor_documented() {
    let table: Table = "max_open_files = 2\nzzz = 1".parse().expect("valid TOML");
    let diag = Diagnostics::recording();
    let mut s = Section::new("sinks.o".into(), &table, &diag);
    s.refuse("max_open_files", "the sink writes one object at a time");
    s.finish();
    assert!(diag.take_reads().is_empty());
    assert_eq!(
        errors(diag),
        [
            "sinks.o.max_open_files: the sink writes one object at a time",
            "sinks.o.zzz: unknown key; allowed keys here: max_open_files",
        ]
    );
    let keys = document(|mut s| s.refuse("max_open_files", "never"));
    assert!(keys.is_empty());
}

#[test]
fn elements_of_a_list_of_tables_are_documented_as_key_brackets() {
    fn topics(s: &mut Section<'_>) {
        let value = s.key("topics", "Subscriptions.").raw("list");
        let tables = value.and_then(Value::as_array).into_iter().flatten();
        let mut elements: Vec<Section<'_>> = tables
            .enumerate()
            .filter_map(|(i, v)| Some(s.element("topics", i, v.as_table()?)))
            .collect();
        elements.extend(s.element_template("topics"));
        for mut t in elements {
            let _ = t.key("qos", "Its QoS.").or(1u64);
            t.finish();
        }
    }
    let keys = document(|mut s| topics(&mut s));
    let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["topics", "topics[].qos"]);

    let table: Table = "topics = [{ qos = \"x\" }]".parse().expect("valid TOML");
    let diag = Diagnostics::recording();
    let mut s = Section::new("sources.m".into(), &table, &diag);
    topics(&mut s);
    let keys: Vec<String> = diag.take_reads().into_iter().map(|r| r.key).collect();
    assert_eq!(keys, ["topics", "topics[].qos"]);
    assert_eq!(
        errors(diag),
        [r#"sources.m.topics[0].qos: expected a whole number, 0 or more, found "x""#]
    );
}
