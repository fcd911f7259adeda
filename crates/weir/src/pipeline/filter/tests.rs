//! The filter on records in their WAL form: matching, not matching, errors, the
//! record's variables, payloads that are not JSON, compile errors and their positions.

use bytes::Bytes;

use super::{Filter, Verdict};
use crate::record::{Record, RecordRef};

fn wire(key: &str, payload: &'static [u8], attributes: &[(&str, &str)]) -> Bytes {
    let record = Record {
        source: "mqtt".into(),
        key: key.into(),
        timestamp_ms: 1_700_000_000_000,
        payload: Bytes::from_static(payload),
        attributes: attributes
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
    };
    let mut out = Vec::new();
    record.encode_into(&mut out);
    Bytes::from(out)
}

/// The verdict on the record in `bytes`: passes or not, or the error's message.
fn eval(expression: &str, bytes: &Bytes) -> Result<bool, String> {
    let filter = Filter::compile(expression).expect("compiles");
    match filter.eval(bytes, &RecordRef::parse(bytes).expect("a record")) {
        Verdict::Pass => Ok(true),
        Verdict::Fail => Ok(false),
        Verdict::Error(e) => Err(e.to_string()),
    }
}

const READING: &[u8] =
    br#"{"device":"d1","temp":31.5,"humidity":40,"ts":1700000000000,"site":"north","ok":true}"#;

#[test]
fn payload_fields_decide() {
    let r = wire("sensors/d1", READING, &[]);
    assert_eq!(eval(r#".temp > 30 and .device == "d1""#, &r), Ok(true));
    assert_eq!(eval(r#".temp > 40 and .device == "d1""#, &r), Ok(false));
    assert_eq!(eval(r#".temp > 30 and .device == "d2""#, &r), Ok(false));
    assert_eq!(eval(".ok", &r), Ok(true));
    assert_eq!(eval(r#".site | startswith("no")"#, &r), Ok(true));
}

#[test]
fn truthiness_is_jqs_and_the_first_output_decides() {
    let r = wire("k", READING, &[]);
    // Anything but false and null passes, as with select.
    assert_eq!(eval(".humidity", &r), Ok(true));
    assert_eq!(eval(".missing", &r), Ok(false));
    assert_eq!(eval("false", &r), Ok(false));
    assert_eq!(eval("empty", &r), Ok(false), "no output");
    assert_eq!(eval("true, false", &r), Ok(true));
    assert_eq!(eval("false, true", &r), Ok(false));
    // A missing field is null, as in jq: not an error.
    assert_eq!(eval(".missing > 30", &r), Ok(false));
}

#[test]
fn key_source_timestamp_and_attributes() {
    let r = wire("sensors/d1", READING, &[("mqtt.qos", "1"), ("site", "s1")]);
    assert_eq!(eval(r#"$key == "sensors/d1""#, &r), Ok(true));
    assert_eq!(eval(r#"$key | startswith("sensors/")"#, &r), Ok(true));
    assert_eq!(eval(r#"$source == "mqtt""#, &r), Ok(true));
    assert_eq!(eval(r#"$attributes.site == "s1""#, &r), Ok(true));
    assert_eq!(eval(r#"$attributes["mqtt.qos"] == "1""#, &r), Ok(true));
    assert_eq!(eval(r#"$attributes.other == null"#, &r), Ok(true));
    assert_eq!(eval("$ts == 1700000000000", &r), Ok(true));
    // Several variables together, in any order, with the payload.
    let all = r#"$ts > 0 and $source == "mqtt" and .temp > 30 and $key == "sensors/d1" and ($attributes | length) == 2"#;
    assert_eq!(eval(all, &r), Ok(true));
    let none = wire("sensors/d1", READING, &[]);
    assert_eq!(eval("$attributes == {}", &none), Ok(true));
    assert_eq!(eval(r#"$key == "sensors/d2""#, &none), Ok(false));
}

#[test]
fn a_payload_that_is_not_json_is_a_string() {
    let r = wire("logs", b"GET /index.html 200", &[]);
    assert_eq!(eval(r#"startswith("GET ")"#, &r), Ok(true));
    assert_eq!(
        eval(r#"$key == "logs""#, &r),
        Ok(true),
        "the payload is not read"
    );
    // Reading a field of it is an error, not a silent false.
    let Err(message) = eval(".temp > 30", &r) else {
        panic!("an error");
    };
    assert!(message.contains("cannot index"), "{message}");
    // Not UTF-8 either: still a string, still no panic.
    let binary = wire("bin", b"\xff\xfe\x00{", &[]);
    assert_eq!(eval("length > 0", &binary), Ok(true));
    assert!(eval(".a", &binary).is_err());
}

#[test]
fn errors_are_verdicts() {
    let r = wire("k", br#"{"temp":"hot","list":[1,2]}"#, &[]);
    assert!(eval(".list.temp", &r).is_err());
    assert!(matches!(eval(r#"error("no")"#, &r), Err(m) if m.contains("no")));
    // JSON that is not an object: indexing it by name is an error.
    let array = wire("k", b"[1,2,3]", &[]);
    assert!(eval(".temp", &array).is_err());
    assert_eq!(eval(".[0] == 1", &array), Ok(true));
}

#[test]
fn compile_errors_name_the_character() {
    let cases: &[(&str, usize, &str)] = &[
        (".temp >", 8, "the end of the expression"),
        (".temp > 30 and", 15, "the end of the expression"),
        (".temp > > 30", 9, "\">\""),
        (".temp ==== 3", 7, "unexpected \"====\""),
        (".a | \"abc", 10, "expected closing quote"),
        ("if . then 1", 12, "expected else or end"),
        (
            r#".a == "x" and frobnicate(.b)"#,
            15,
            "undefined filter frobnicate/1",
        ),
        (
            r#"$kye == "x""#,
            1,
            "undefined variable $kye; a record's variables are",
        ),
        (r#".msg | test("x")"#, 8, "not built into weir's filters"),
        ("(.a", 4, "closing parenthesis"),
        ("é", 1, "expected token, found \"é\""),
        ("\"é\" + $nope", 7, "undefined variable $nope"),
    ];
    for (expression, offset, needle) in cases {
        let error = Filter::compile(expression).expect_err(expression);
        assert_eq!(error.offset, *offset, "{expression}: {error}");
        assert!(error.to_string().contains(needle), "{expression}: {error}");
        assert!(
            error
                .to_string()
                .starts_with(&format!("at character {offset} of the expression: ")),
            "{error}"
        );
    }
}

#[test]
fn the_prelude_compiles_and_imports_are_refused() {
    // Common jq definitions are there: select, map, any, has, ascii_downcase.
    let r = wire("k", br#"{"tags":["A","b"],"n":3}"#, &[]);
    assert_eq!(
        eval(r#".tags | map(ascii_downcase) | any(. == "a")"#, &r),
        Ok(true)
    );
    assert_eq!(
        eval(r#"has("n") and ([.n] | inside([1, 3]))"#, &r),
        Ok(true)
    );
    assert_eq!(
        eval("[.[] | select(type == \"number\")] | length == 1", &r),
        Ok(true)
    );
    let csv = wire("k", br#"{"csv":"a,b,c"}"#, &[]);
    assert_eq!(eval(r#".csv | split(",") | length == 3"#, &csv), Ok(true));
    // What an expression catches itself is no error.
    let text = wire("k", b"plain", &[]);
    assert_eq!(eval("(.temp > 30)? // false", &text), Ok(false));
    assert_eq!(eval("try (.temp > 30) catch true", &text), Ok(true));
    assert_eq!(eval(".temp + 1", &csv), Ok(true), "null + 1");
    assert!(eval(".csv + 1", &csv).is_err());
    for unavailable in [
        "now > 0",
        "$ENV.HOME == null",
        "env",
        "input",
        r#"@base64 == "x""#,
    ] {
        assert!(Filter::compile(unavailable).is_err(), "{unavailable}");
    }
    let error = Filter::compile(r#"import "x" as x; true"#).expect_err("no modules");
    assert!(
        error.message.contains("modules cannot be loaded"),
        "{error}"
    );
}

#[test]
fn only_named_variables_are_built() {
    let f = Filter::compile(r#".a == 1 and $key == "k""#).unwrap();
    assert_eq!(f.variables(), ["$key"]);
    let f = Filter::compile(".a == 1").unwrap();
    assert!(f.variables().is_empty());
    let f = Filter::compile("$ts > 0 and $attributes.x == $source").unwrap();
    assert_eq!(f.variables(), ["$source", "$attributes", "$ts"]);
}
