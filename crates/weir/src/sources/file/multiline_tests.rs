use super::*;
use crate::keys::walk::parse_section;

/// Real traces, as the runtimes wrote them (tests/data/traces).
const JAVA: &str = include_str!("../../../tests/data/traces/java.log");
const PYTHON: &str = include_str!("../../../tests/data/traces/python.log");
const GO: &str = include_str!("../../../tests/data/traces/go.log");

fn config(toml: &str) -> (Option<MultilineConfig>, Vec<String>) {
    let (c, errors) = parse_section("sources.tail", toml, |s, _| Some(MultilineConfig::parse(s)));
    (c.flatten(), errors)
}

/// The records `text` becomes, line by line, then flushed at its end.
fn assemble(config: &MultilineConfig, text: &str) -> Vec<String> {
    let mut a = Assembler::new(config);
    let mut out = Vec::new();
    let mut at = 0u64;
    for line in text.split_inclusive('\n') {
        let end = at + line.len() as u64;
        let bytes = line.trim_end_matches('\n').as_bytes();
        a.push(bytes, at, end, 0, &mut |r| out.push(r));
        at = end;
    }
    out.extend(a.flush());
    out.into_iter()
        .map(|r| String::from_utf8(r.bytes).unwrap())
        .filter(|r| !r.trim().is_empty())
        .collect()
}

fn preset(name: &str) -> MultilineConfig {
    config(&format!("multiline = \"{name}\"")).0.unwrap()
}

#[test]
fn java_traces_are_one_record_with_their_message() {
    let records = assemble(&preset("java"), JAVA);
    assert_eq!(records.len(), 3, "{records:#?}");
    assert!(records[0].ends_with("starting"));
    assert!(records[1].starts_with("2026-12-06 15:51:33 SEVERE App main - request failed\njava.lang.IllegalStateException: bad config value\n\tat App.load"), "{}", records[1]);
    assert!(records[1].contains("\nCaused by: java.lang.NumberFormatException"));
    assert!(records[1].ends_with("\t... 1 more"), "{}", records[1]);
    assert!(records[2].ends_with("still running"));
}

#[test]
fn python_tracebacks_are_one_record_with_their_message() {
    let records = assemble(&preset("python"), PYTHON);
    assert_eq!(records.len(), 3, "{records:#?}");
    assert!(records[1].starts_with(
        "2026-12-06 15:51:29,337 ERROR app: request failed\nTraceback (most recent call last):"
    ));
    assert!(records[1].contains("\nKeyError: 'missing'\n\nThe above exception was the direct cause of the following exception:\n\nTraceback"));
    assert!(
        records[1].ends_with("ValueError: could not load the config"),
        "{}",
        records[1]
    );
    assert!(records[2].ends_with("still running"));
}

#[test]
fn go_panics_are_one_record_each() {
    let records = assemble(&preset("go"), GO);
    assert_eq!(records.len(), 5, "{records:#?}");
    assert!(records[0].ends_with("starting"));
    assert!(records[1].starts_with("panic: runtime error: index out of range [5] with length 2\n\ngoroutine 1 [running]:\nmain.(*Store).Get(...)"));
    assert!(records[1].ends_with("exit status 2"), "{}", records[1]);
    assert!(records[2].ends_with("starting"));
    assert!(records[3].ends_with("starting workers"));
    assert!(records[4].starts_with("panic: worker failed"));
    assert!(
        records[4].contains("\ncreated by main.main\n"),
        "{}",
        records[4]
    );
}

#[test]
fn a_start_pattern_begins_records() {
    let (c, errors) = config("multiline = { start = '^\\d{4}-', max_lines = 3 }");
    assert!(errors.is_empty(), "{errors:?}");
    let c = c.unwrap();
    let records = assemble(&c, "orphan\n2024-1 a\n  b\n2024-2 c\nx\ny\nz\nw\n");
    assert_eq!(
        records,
        ["orphan", "2024-1 a\n  b", "2024-2 c\nx\ny", "z\nw"],
        "max_lines = 3 cuts the third record"
    );
}

#[test]
fn bounds_cut_and_say_so_and_offsets_follow() {
    let (c, _) = config("multiline = { start = '^S', max_bytes = \"8 B\" }");
    let mut a = Assembler::new(&c.unwrap());
    let mut out = Vec::new();
    a.push(b"S1", 0, 3, 0, &mut |r| out.push(r));
    a.push(b"abc", 3, 7, 0, &mut |r| out.push(r));
    assert_eq!(a.held_from(), Some(0));
    a.push(b"defg", 7, 12, 0, &mut |r| out.push(r));
    assert_eq!(
        out,
        [Assembled {
            bytes: b"S1\nabc".to_vec(),
            start: 0,
            end: 7,
            bounded: true
        }]
    );
    assert_eq!(a.held_from(), Some(7));
}

#[test]
fn the_timeout_ends_a_record() {
    let (c, _) = config("multiline = { start = '^S', timeout = \"2s\" }");
    let mut a = Assembler::new(&c.unwrap());
    a.push(b"S1", 0, 3, 1_000, &mut |_| unreachable!());
    a.push(b" x", 3, 6, 1_500, &mut |_| unreachable!());
    assert_eq!(a.deadline_ms(), Some(3_500));
    assert_eq!(a.poll(3_499), None);
    assert_eq!(a.poll(3_500).unwrap().bytes, b"S1\n x");
    assert_eq!(a.held_from(), None);
}

#[test]
fn bad_multiline_keys_name_themselves() {
    let (_, errors) = config("multiline = \"jaav\"");
    assert!(
        errors[0].starts_with("sources.tail.multiline: "),
        "{errors:?}"
    );
    assert!(errors[0].contains("java"), "{errors:?}");
    let (_, errors) = config("multiline = { start = '(' }");
    assert!(
        errors[0].starts_with("sources.tail.multiline.start: not a valid regular expression"),
        "{errors:?}"
    );
    let (_, errors) = config("multiline = { max_lines = 3 }");
    assert!(errors[0].contains("expected `start`"), "{errors:?}");
    let (_, errors) = config("multiline = { preset = \"go\", start = 'x' }");
    assert!(errors[0].contains("not both"), "{errors:?}");
    let (_, errors) = config("multiline = { preset = \"go\", max_line = 3 }");
    assert!(errors[0].contains("did you mean `max_lines`"), "{errors:?}");
    let (c, errors) = config("multiline = { preset = \"python\", timeout = \"5s\" }");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(c.unwrap().rule, Rule::Python);
}
