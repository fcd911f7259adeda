//! The `kafka` source's keys: defaults, refused properties, the byte budget, paths.

use super::*;

fn parse(text: &str) -> (Option<KafkaConfig>, Vec<String>) {
    crate::keys::walk::parse_section("sources.k", text, KafkaConfig::parse)
}

#[test]
fn defaults() {
    let (c, errors) = parse("brokers = '127.0.0.1:9092'\ntopics = ['a']\ngroup_id = 'g'");
    assert!(errors.is_empty(), "{errors:?}");
    let c = c.unwrap();
    assert_eq!(c.start_from, StartFrom::Earliest);
    assert_eq!(c.low_watermark.bytes(), 8 << 20);
    assert_eq!(c.max_held_bytes.bytes(), (32 << 20) + (2 << 20));
}

#[test]
fn weir_owned_properties_are_refused() {
    let (_, errors) = parse(
        "brokers = 'h:1'\ntopics = ['a']\ngroup_id = 'g'\n[properties]\n\"enable.auto.commit\" = true\n\"group.id\" = 'x'\n\"queued.max.messages.kbytes\" = 10\n\"session.timeout.ms\" = 6000",
    );
    let all = errors.join("\n");
    assert_eq!(errors.len(), 3, "{all}");
    for needle in [
        "enable.auto.commit",
        "group.id",
        "queued.max.messages.kbytes",
    ] {
        assert!(all.contains(needle), "{needle} missing in:\n{all}");
    }
    assert!(all.contains("weir owns"), "{all}");
}

#[test]
fn a_budget_below_high_plus_one_fetch_is_refused() {
    let (_, errors) = parse(
        "brokers = 'h:1'\ntopics = ['a']\ngroup_id = 'g'\nhigh_watermark = '4 MiB'\nfetch_max_bytes = '1 MiB'\nmax_held_bytes = '4.5 MiB'",
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("sources.k.max_held_bytes") && e.contains("one fetch")),
        "{errors:?}"
    );
    let (_, errors) = parse(
        "brokers = 'h:1'\ntopics = ['a']\ngroup_id = 'g'\nhigh_watermark = '4 MiB'\nfetch_max_bytes = '1 MiB'\nmax_held_bytes = '5 MiB'",
    );
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn bad_keys_are_reported_with_their_path() {
    let (_, errors) = parse(
        "brokers = 'nohost'\ngroup_id = 'g'\nlow_watermark = '64 MiB'\nsasl_username = 'u'\nca_file = 'ca.pem'",
    );
    let all = errors.join("\n");
    for needle in [
        "sources.k.brokers",
        "sources.k.topics",
        "sources.k.low_watermark",
        "sources.k.security_protocol",
        "sources.k.ca_file",
    ] {
        assert!(all.contains(needle), "{needle} missing in:\n{all}");
    }
}
