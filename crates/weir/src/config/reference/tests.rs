//! The reference lists every section, and each key with what the declaration says.

use super::*;

fn section<'s>(
    sections: &'s [SectionDoc],
    header: &str,
    type_name: Option<&str>,
) -> &'s SectionDoc {
    sections
        .iter()
        .find(|s| s.header == header && s.type_name == type_name)
        .unwrap_or_else(|| panic!("no section {header} {type_name:?}"))
}

#[test]
fn every_section_and_every_type_is_listed() {
    let sections = sections();
    for header in ["[runtime]", "[wal]", "[quarantine]"] {
        section(&sections, header, None);
    }
    section(&sections, "[sources.NAME]", None);
    for type_name in sources::TYPES {
        section(&sections, "[sources.NAME]", Some(type_name));
    }
    section(&sections, "[sinks.NAME]", None);
    for type_name in sinks::TYPES {
        section(&sections, "[sinks.NAME]", Some(type_name));
    }
    assert_eq!(
        sections.len(),
        5 + sources::TYPES.len() + sinks::TYPES.len()
    );
}

#[test]
fn a_type_lists_its_own_keys_and_every_source_the_shared_ones() {
    let sections = sections();
    let names = |s: &SectionDoc| s.keys.iter().map(|k| k.name.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(section(&sections, "[sources.NAME]", None)),
        ["type", "max_uncommitted_tickets"]
    );
    let generator = section(&sections, "[sources.NAME]", Some("generator"));
    assert_eq!(
        names(generator),
        ["rate", "count", "size", "keys", "seed", "batch_size"]
    );
    let rate = &generator.keys[0];
    assert!(rate.required);
    assert_eq!(rate.unit, Some("records per second"));
    assert_eq!(
        generator.keys[2]
            .default
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("\"100 B\"")
    );
    let every_sink = section(&sections, "[sinks.NAME]", None);
    assert_eq!(every_sink.keys[0].name, "type");
    assert!(
        every_sink.keys[0].kind.contains(r#""parquet""#),
        "{}",
        every_sink.keys[0].kind
    );
}

/// Sections whose keys are still read through the shorthand without a description
/// (`s.or(key, default)`). Remove a section from here once it is converted (the test
/// below fails until it is).
const NOT_DESCRIBED_YET: &[(&str, &str)] = &[];

fn exempt(section: &SectionDoc) -> bool {
    NOT_DESCRIBED_YET.iter().any(|(header, type_name)| {
        section.header == *header && section.type_name == Some(type_name)
    })
}

#[test]
fn every_key_has_a_description_and_an_example_that_it_reads() {
    let mut missing = Vec::new();
    for section in sections() {
        let at = |key: &str| format!("{} {:?} {key}", section.header, section.type_name);
        let mut complete = !section.about.is_empty();
        if !complete && !exempt(&section) {
            missing.push(format!("{}: no about line", at("")));
        }
        for key in &section.keys {
            let described = !key.description.is_empty();
            let example = key.is_table || key.example().is_some();
            complete &= described && example;
            if exempt(&section) {
                continue;
            }
            if !described {
                missing.push(format!("{}: no description", at(&key.name)));
            }
            if !example {
                missing.push(format!("{}: no example and no default", at(&key.name)));
            }
            for value in [key.explicit_example.as_ref(), key.default.as_ref()]
                .into_iter()
                .flatten()
            {
                if let Some(Err(e)) = key.check.map(|check| check(value)) {
                    missing.push(format!(
                        "{}: {value} does not read back: {e}",
                        at(&key.name)
                    ));
                }
            }
        }
        if exempt(&section) && complete {
            missing.push(format!(
                "{}: now described; remove it from NOT_DESCRIBED_YET",
                at("")
            ));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn each_key_is_declared_once_per_section() {
    for section in sections() {
        let mut names: Vec<&str> = section.keys.iter().map(|k| k.name.as_str()).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(
            names.len(),
            before,
            "{} {:?}",
            section.header,
            section.type_name
        );
    }
}

#[test]
fn a_key_read_on_one_branch_only_is_still_documented() {
    // object_store reads row_group_* and compression differently by format, MQTT the
    // keys of `{ filter, qos }` tables only when there is one.
    let text = r#"
[runtime]
data_dir = "./d"
[wal]
max_disk = "1 GiB"
on_full = "block"
[sources.m]
type = "mqtt"
url = "mqtt://127.0.0.1:1883"
topics = [{ filter = "a/#", qos = 0 }]
[sinks.o]
type = "object_store"
inputs = ["m"]
url = "memory://x"
format = "ndjson"
compression = "gzip"
row_group_rows = 5
max_open_files = 2
"#;
    assert_eq!(undocumented_keys(text).expect("TOML"), Vec::<String>::new());
}

#[test]
fn an_example_names_the_types_when_the_name_is_none() {
    let message = example("parket").expect_err("not a type");
    assert!(
        message.contains("source types: generator, file"),
        "{message}"
    );
    assert!(message.contains("sink types: file, parquet"), "{message}");
    let both = example("file").expect("a type");
    assert!(
        both.contains("[sources.file]") && both.contains("[sinks.file]"),
        "{both}"
    );
    let one = example("sink/file").expect("a type");
    assert!(
        !one.contains("[sources.file]") && one.contains("[sinks.file]"),
        "{one}"
    );
    assert!(example("sink/generator").is_err());
}
