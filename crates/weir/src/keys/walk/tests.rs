//! Paths, unknown keys, lists and required keys.

use super::*;

#[test]
fn joins_and_quotes_paths() {
    assert_eq!(join("", "runtime"), "runtime");
    assert_eq!(join("sinks", "lake"), "sinks.lake");
    assert_eq!(join("sources", "my src"), "sources.\"my src\"");
}

#[test]
fn unknown_keys_list_the_allowed_ones_and_suggest() {
    let table: Table = "bytes = 1\nrotat = 2\nzzz = 3".parse().expect("valid TOML");
    let diag = Diagnostics::default();
    let mut section = Section::new("sinks.lake".into(), &table, &diag);
    let _ = section.opt::<u64>("bytes");
    let _ = section.opt::<u64>("rotate");
    section.finish();
    let errors: Vec<String> = diag.into_errors().iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        [
            "sinks.lake.rotat: unknown key (did you mean `rotate`?); allowed keys here: bytes, rotate",
            "sinks.lake.zzz: unknown key; allowed keys here: bytes, rotate",
        ]
    );
}

#[test]
fn list_errors_name_the_element() {
    let table: Table = r#"inputs = ["a", 3, ""]"#.parse().expect("valid TOML");
    let diag = Diagnostics::default();
    let mut section = Section::new("sinks.lake".into(), &table, &diag);
    assert_eq!(section.list::<String>("inputs"), None);
    let paths: Vec<String> = diag
        .into_errors()
        .iter()
        .filter_map(|e| e.path().map(str::to_owned))
        .collect();
    assert_eq!(paths, ["sinks.lake.inputs[1]", "sinks.lake.inputs[2]"]);
}

#[test]
fn missing_required_keys_carry_the_hint() {
    let table = Table::new();
    let diag = Diagnostics::default();
    let mut section = Section::new("wal".into(), &table, &diag);
    assert_eq!(section.req::<u64>("segments", "pick one"), None);
    let errors = diag.into_errors();
    assert_eq!(
        errors[0].to_string(),
        "wal.segments: missing required key (expected a whole number, 0 or more); pick one"
    );
}

#[test]
fn edit_distance_counts_single_edits() {
    assert_eq!(edit_distance("rotat", "rotate"), 1);
    assert_eq!(edit_distance("parket", "parquet"), 2);
    assert_eq!(edit_distance("gne", "gen"), 1);
    assert_eq!(edit_distance("", "abc"), 3);
    assert_eq!(closest("qqqq", &["rotate"]), None);
    assert_eq!(closest("path", &["rate"]), None);
    assert_eq!(closest("parket", &["file", "parquet"]), Some("parquet"));
}
