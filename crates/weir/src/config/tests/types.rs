//! Values of the wrong type, and tables where values belong (and the reverse).

use super::*;

#[test]
fn wrong_types_name_what_was_expected_and_found() {
    let text = with(
        &[
            (
                "data_dir = \"./weir-data\"",
                "data_dir = 5\nstatus_public = \"yes\"\nlog_queue = 1.5",
            ),
            ("rate = 5000", "rate = -1\ncount = \"many\""),
        ],
        "required = \"no\"\nrotate = \"big\"\n",
    );
    assert_eq!(
        errors(&text),
        [
            "runtime.data_dir: expected a path (a non-empty string), found 5",
            "runtime.status_public: expected true or false, found \"yes\"",
            "runtime.log_queue: expected a positive whole number (at most 4294967295), found 1.5",
            "sources.gen.rate: expected a whole number, 0 or more, found -1",
            "sources.gen.count: expected a positive whole number, found \"many\"",
            "sinks.lake.required: expected true or false, found \"no\"",
            "sinks.lake.rotate: expected a table, found \"big\"",
        ]
    );
}

#[test]
fn sections_and_entries_must_be_tables() {
    let text = with(&[], "\n[sinks.bad]\nrequired = true\n")
        .replace(
            "[runtime]\ndata_dir = \"./weir-data\"",
            "runtime = \"fast\"",
        )
        .replace("[sinks.lake]", "[sinks]\nnot_a_sink = 3\n[sinks.lake]");
    let paths = paths(&text);
    assert_eq!(
        paths,
        [
            "runtime",
            "sinks.not_a_sink",
            "sinks.bad.type",
            "sinks.bad.inputs"
        ],
        "{:#?}",
        errors(&text)
    );
}

#[test]
fn blackhole_rate_and_http_sink_keys() {
    let zero_rate = with(
        &[
            ("type = \"parquet\"", "type = \"blackhole\"\nrate = 0"),
            ("path = \"./weir-out/lake\"", ""),
        ],
        "",
    );
    assert_eq!(paths(&zero_rate), ["sinks.lake.rate"]);
    let http = with(
        &[
            (
                "type = \"parquet\"",
                "type = \"http\"\nurl = \"ftp://x\"\ntimeout = \"0s\"",
            ),
            ("path = \"./weir-out/lake\"", ""),
        ],
        "",
    );
    assert_eq!(paths(&http), ["sinks.lake.url", "sinks.lake.timeout"]);
    let with_path = with(&[("type = \"parquet\"", "type = \"blackhole\"")], "");
    let errors = errors(&with_path);
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].starts_with("sinks.lake.path: unknown key; allowed keys here: "),
        "{errors:?}"
    );
    assert!(errors[0].contains("rate"), "{errors:?}");
}
