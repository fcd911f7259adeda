use super::*;
use crate::keys::walk::parse_section;

fn format(toml: &str) -> (Option<Format>, Vec<String>) {
    parse_section("sources.tail", toml, |s, _| Format::parse(s))
}

fn parse(parser: &Parser, line: &str) -> Result<serde_json::Value, (String, Miss)> {
    let mut out = Vec::new();
    match parser.parse(line.as_bytes(), &mut out) {
        Parsed::Payload(p) => Ok(serde_json::from_slice(p).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(p).into_owned())
        })),
        Parsed::Kept(p, miss) => Err((String::from_utf8_lossy(p).into_owned(), miss)),
        Parsed::Refused(reason, miss) => Err((reason, miss)),
    }
}

/// nginx's `combined` log format.
pub(super) const NGINX: &str = r#"^(?P<remote_addr>\S+) - (?P<remote_user>\S+) \[(?P<time>[^\]]+)\] "(?P<method>\S+) (?P<path>\S+) (?P<protocol>[^"]+)" (?P<status>\d{3}) (?P<bytes>\d+) "(?P<referer>[^"]*)" "(?P<agent>[^"]*)"$"#;

#[test]
fn regex_turns_an_nginx_line_into_typed_fields() {
    let toml = format!(
        "format = \"regex\"\npattern = '{NGINX}'\ntypes = {{ status = \"int\", bytes = \"int\", time = \"timestamp:%d/%b/%Y:%H:%M:%S %z\" }}\n"
    );
    let (f, errors) = format(&toml);
    assert!(errors.is_empty(), "{errors:?}");
    let parser = Parser::new(&f.unwrap());
    let line = r#"203.0.113.7 - - [10/Oct/2024:13:55:36 +0200] "GET /api/v1/items?id=3 HTTP/1.1" 200 2326 "-" "curl/8.5.0""#;
    assert_eq!(
        parse(&parser, line).unwrap(),
        serde_json::json!({
            "remote_addr": "203.0.113.7", "remote_user": "-", "time": "2024-10-10T11:55:36Z",
            "method": "GET", "path": "/api/v1/items?id=3", "protocol": "HTTP/1.1",
            "status": 200, "bytes": 2326, "referer": "-", "agent": "curl/8.5.0"
        })
    );
    let (reason, miss) = parse(&parser, "not an access log line").unwrap_err();
    assert_eq!(miss, Miss::Mismatch);
    assert!(reason.contains("does not match"), "{reason}");
}

#[test]
fn a_capture_that_does_not_convert_names_itself() {
    let (f, errors) = format(
        "format = \"regex\"\npattern = '^(?P<n>\\S+) (?P<ok>\\S+)$'\ntypes = { n = \"int\", ok = \"bool\" }\non_mismatch = \"keep\"\n",
    );
    assert!(errors.is_empty(), "{errors:?}");
    let parser = Parser::new(&f.unwrap());
    assert_eq!(
        parse(&parser, "12 yes").unwrap(),
        serde_json::json!({ "n": 12, "ok": true })
    );
    // Kept as a JSON string under on_mismatch = "keep".
    let (kept, miss) = parse(&parser, "x yes").unwrap_err();
    assert_eq!((kept.as_str(), miss), ("\"x yes\"", Miss::Mismatch));
    let (f, _) =
        format("format = \"regex\"\npattern = '^(?P<n>\\S+)$'\ntypes = { n = \"float\" }\n");
    let (reason, _) = parse(&Parser::new(&f.unwrap()), "abc").unwrap_err();
    assert_eq!(reason, "capture \"n\" = \"abc\" is not a number");
}

#[test]
fn ndjson_counts_what_is_not_json() {
    let (f, _) = format("");
    let keep = Parser::new(&f.unwrap());
    assert_eq!(
        parse(&keep, r#"{"a":1}"#).unwrap(),
        serde_json::json!({ "a": 1 })
    );
    assert_eq!(
        parse(&keep, "plain text").unwrap_err(),
        ("plain text".into(), Miss::NotJson)
    );
    let (f, _) = format("on_not_json = \"quarantine\"");
    let (reason, miss) = parse(&Parser::new(&f.unwrap()), "plain").unwrap_err();
    assert_eq!(miss, Miss::NotJson);
    assert!(reason.contains("not JSON"), "{reason}");
}

#[test]
fn lines_are_json_strings() {
    let (f, _) = format("format = \"lines\"");
    let p = Parser::new(&f.unwrap());
    assert_eq!(
        parse(&p, "say \"hi\"\t").unwrap(),
        serde_json::json!("say \"hi\"\t")
    );
}

#[test]
fn keys_of_another_format_are_refused_by_name() {
    let (_, errors) =
        format("format = \"lines\"\npattern = 'x'\non_mismatch = \"keep\"\non_not_json = \"keep\"");
    assert_eq!(
        errors,
        [
            "sources.tail.on_not_json: applies only to format = \"ndjson\"",
            "sources.tail.pattern: applies only to format = \"regex\"",
            "sources.tail.on_mismatch: applies only to format = \"regex\" or \"logfmt\"",
        ]
    );
    let (_, errors) = format("format = \"regex\"");
    assert!(
        errors[0].starts_with("sources.tail.pattern: missing required key"),
        "{errors:?}"
    );
    let (_, errors) = format("format = \"regex\"\npattern = '(unclosed'");
    assert!(
        errors[0].contains("not a valid regular expression"),
        "{errors:?}"
    );
    let (_, errors) =
        format("format = \"regex\"\npattern = '^(?P<a>x)$'\ntypes = { b = \"int\", a = \"date\" }");
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("\"b\" is not a named capture")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("sources.tail.types.a: expected one of")),
        "{errors:?}"
    );
    let (_, errors) =
        format("format = \"regex\"\npattern = '^(?P<a>x)$'\ntypes = { a = \"timestamp:%Q\" }");
    assert!(errors[0].contains("not a strftime format"), "{errors:?}");
}

#[test]
fn logfmt_lines_become_objects() {
    let (f, _) = format("format = \"logfmt\"");
    let p = Parser::new(&f.unwrap());
    assert_eq!(
        parse(&p, "level=warn msg=\"disk 91% full\" disk=/dev/sda1").unwrap(),
        serde_json::json!({ "level": "warn", "msg": "disk 91% full", "disk": "/dev/sda1" })
    );
    let (reason, miss) = parse(&p, "msg=\"open").unwrap_err();
    assert_eq!(miss, Miss::Mismatch);
    assert!(reason.contains("not closed"), "{reason}");
}
