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
