//! Property tests: any set of independent mistakes is reported in full, one error per
//! mistake at its path; sizes and durations parse exactly or not at all.

use proptest::prelude::*;

use super::*;

/// Independent mistakes: (line after which to insert, text inserted, path reported).
/// An empty anchor means "replace `remove` with nothing".
const MISTAKES: [(&str, &str, &str); 10] = [
    (
        "data_dir = \"./weir-data\"",
        "memory_target = \"lots\"",
        "runtime.memory_target",
    ),
    (
        "data_dir = \"./weir-data\"",
        "status_addr = \"nowhere\"",
        "runtime.status_addr",
    ),
    (
        "max_disk = \"1 GiB\"",
        "segment_bytes = 0",
        "wal.segment_bytes",
    ),
    ("max_disk = \"1 GiB\"", "sync = \"sometimes\"", "wal.sync"),
    ("rate = 5000", "size = \"huge\"", "sources.gen.size"),
    ("rate = 5000", "colour = 1", "sources.gen.colour"),
    (
        "path = \"./weir-out/lake\"",
        "rotate = { bytes = 0 }",
        "sinks.lake.rotate.bytes",
    ),
    (
        "path = \"./weir-out/lake\"",
        "compression = \"lz4\"",
        "sinks.lake.compression",
    ),
    (
        "path = \"./weir-out/lake\"",
        "start_from = \"middle\"",
        "sinks.lake.start_from",
    ),
    (
        "max_disk = \"1 GiB\"",
        "max_pending_bytes = -5",
        "wal.max_pending_bytes",
    ),
];

proptest! {
    #[test]
    fn every_mistake_is_reported_once_at_its_path(
        chosen in proptest::sample::subsequence((0..MISTAKES.len()).collect::<Vec<_>>(), 0..=MISTAKES.len()),
        drop_on_full in any::<bool>(),
    ) {
        let mut text = MINIMAL.to_owned();
        let mut expected: Vec<String> = Vec::new();
        for &i in &chosen {
            let (anchor, line, path) = MISTAKES[i];
            text = text.replacen(anchor, &format!("{anchor}\n{line}"), 1);
            expected.push(path.to_owned());
        }
        if drop_on_full {
            text = text.replacen("on_full = \"block\"", "", 1);
            expected.push("wal.on_full".to_owned());
        }
        expected.sort();
        match Config::from_toml(&text) {
            Ok(_) => prop_assert!(expected.is_empty(), "accepted despite {expected:?}"),
            Err(errors) => {
                let mut found: Vec<String> = errors
                    .errors()
                    .iter()
                    .map(|e| e.path().unwrap_or("<none>").to_owned())
                    .collect();
                found.sort();
                prop_assert_eq!(found, expected);
            }
        }
    }

    #[test]
    fn sizes_parse_exactly_or_refuse(n in 1u64..(1 << 40), unit in 0usize..7) {
        let (name, factor) = [("B", 1u64), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("KB", 1000), ("MB", 1_000_000), ("GB", 1_000_000_000)][unit];
        let parsed = <ByteSize as crate::keys::units::FromValue>::from_value(&toml::Value::String(format!("{n} {name}")));
        match n.checked_mul(factor) {
            Some(bytes) => prop_assert_eq!(parsed.map(ByteSize::bytes), Ok(bytes)),
            None => prop_assert!(parsed.is_err()),
        }
    }

    #[test]
    fn durations_round_trip_through_their_display(ms in 1u64..(1 << 40)) {
        let duration = Duration::new(std::time::Duration::from_millis(ms)).expect("positive");
        let reparsed = <Duration as crate::keys::units::FromValue>::from_value(&toml::Value::String(duration.to_string()));
        prop_assert_eq!(reparsed, Ok(duration));
    }
}
