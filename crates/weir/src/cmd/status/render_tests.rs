//! `weir status`'s tables: every figure of a full `/status` document is there, in human
//! units, and nothing is printed as JSON.

use super::*;

fn report() -> StatusReport {
    serde_json::from_value(serde_json::json!({
        "config_hash": "sha256:feed",
        "started_unix_ms": 1_700_000_000_000_u64,
        "uptime_seconds": 75.0,
        "components": [
            {"name": "gen", "kind": "source", "state": "backpressured",
             "since_unix_ms": 0, "for_seconds": 2.5},
            {"name": "wal", "kind": "wal", "state": "running",
             "since_unix_ms": 0, "for_seconds": 75.0},
            {"name": "lake", "kind": "sink", "state": "failed",
             "reason": "writing /lake: No space left on device", "since_unix_ms": 0,
             "for_seconds": 0.25}
        ],
        "queues": [
            {"name": "source->wal", "depth": 5, "bytes": 2048, "oldest_age_seconds": 2.5,
             "bound_items": 10, "bound_bytes": 8_388_608, "fill": 0.5, "max_depth": 7,
             "offered": 20, "delivered": 10, "dropped": 5, "rejected": 0, "expired": 0}
        ],
        "wal": {
            "segments": 8, "disk_bytes": 2_000_000, "max_disk": 2_097_152,
            "budget_used": 0.95, "on_full": "block", "start": 100, "durable_end": 123_456,
            "quarantined_ranges": [[5, 9]], "damaged_ranges": [], "damaged_records": 0,
            "appended_records": 123_356, "appended_bytes": 47_185_920, "fsyncs": 1234,
            "fsync_p50_us": 150, "fsync_p99_us": 2500, "fsync_max_us": 10_000,
            "fsync_time_us": 3_000_000, "write_time_us": 1_500_000,
            "retention_deleted_segments": 12, "evicted_segments": 0, "evicted_records": 0,
            "fs_room_bytes": 21_474_836_480_u64, "fs_reserve_bytes": 4_194_304,
            "fs_full_events": 0, "resource_refusals": 0, "poisoned": null,
            "cursors": [{"name": "lake", "committed": 100}]
        },
        "sources": {
            "gen": {"type": "generator", "records": 123_356, "bytes": 47_185_920,
                    "batches": 1234, "refused_batches": 0, "refused_records": 3,
                    "expired_records": 0, "refused_requests": 0, "in_doubt_records": 0,
                    "waiting_ms": 2500, "generator": {"skipped": 7}}
        },
        "sinks": {
            "lake": {"type": "parquet", "records": 100, "bytes": 38_000, "batches": 4,
                     "retries": 2, "unencodable": 0, "filtered": 0, "filter_errors": 0,
                     "gaps": 1, "gap_records": 40, "buffered_bytes": 1_258_291,
                     "cursor": {"name": "lake", "required": true, "released": false,
                                "releases": 0, "committed": 100, "lag_records": 123_356,
                                "lag_bytes": 3_145_728, "lag_age_ms": 90_000,
                                "gaps": 1, "gap_records": 40},
                     "max_lag": {"bytes": 25_165_824, "age": "10m"},
                     "parquet": {"closes": {"size": 0, "age": 1, "wal_share": 12,
                                            "shutdown": 0}}}
        },
        "quarantine": {"dir": "/var/lib/weir/quarantine", "disk_bytes": 0,
                       "max_disk": 67_108_864, "sources": {}},
        "wal_recovery": {"truncated_bytes": 0, "quarantined": []}
    }))
    .expect("a report")
}

#[test]
fn every_figure_is_in_a_table_or_a_line_in_human_units() {
    let text = render("127.0.0.1:9464", &report());
    assert!(
        text.starts_with("weir at 127.0.0.1:9464: config sha256:feed, up 75.0 s"),
        "{text}"
    );
    // No JSON: not a brace anywhere.
    assert!(!text.contains('{') && !text.contains('}'), "{text}");
    for wanted in [
        // Components, with the reason of the failed one.
        "gen        source  backpressured  2.5 s",
        "sink lake is failed (250 ms so far): writing /lake: No space left on device",
        // Queues.
        "source->wal  5/10         2 KiB/8 MiB  50%   2.5 s   7          5        0         0",
        // The WAL.
        "WAL: 1.9 MiB of 2 MiB (95% of its budget), on_full = block; 8 segments, offsets 100..123456",
        "1234 fsyncs: p50 150 µs, p99 2.5 ms, max 10 ms",
        "retention deleted 12 segments",
        "filesystem: 20 GiB left above its 4 MiB reserve",
        "offsets lost (quarantined at recovery or damaged): 5..9",
        // Sources and their details.
        "gen     generator  123356   45 MiB  1234     3        0        0            0         2.5 s",
        "generator:",
        "skipped: 7",
        // Sinks: the lag in human units, max_lag, the closes by reason.
        "lake  parquet  100      37.1 KiB  2        100     123356  3 MiB      90.0 s   24 MiB, 10m  yes       1 (40 records)",
        "buffered_bytes: 1.2 MiB",
        "closes:",
        "age: 1 · shutdown: 0 · size: 0 · wal_share: 12",
        // Other sections, key by key.
        "quarantine:",
        "dir: /var/lib/weir/quarantine",
        "max_disk: 64 MiB",
        "sources: none",
        "wal_recovery:",
        "quarantined: none",
    ] {
        assert!(text.contains(wanted), "{wanted:?} missing:\n{text}");
    }
    // The WAL's cursors are the sinks' table, not repeated.
    assert!(!text.contains("cursors"), "{text}");
}

#[test]
fn a_poisoned_wal_and_an_empty_pipeline_are_said_plainly() {
    let mut report = report();
    report.sections.insert(
        "wal".to_owned(),
        serde_json::json!({"poisoned": "fsync failed: EIO", "fs_room_bytes": null}),
    );
    report.sections.remove("sources");
    report.sections.remove("sinks");
    let text = render("a", &report);
    assert!(
        text.contains("POISONED, refusing every write: fsync failed: EIO"),
        "{text}"
    );
    assert!(text.contains("filesystem: not measured yet"), "{text}");
    assert!(
        !text.contains("SOURCE") && !text.contains("SINK "),
        "{text}"
    );
}

#[test]
fn long_details_wrap_and_nest() {
    let map = serde_json::json!({
        "a_long_key_number_one": "some value that is long enough",
        "a_long_key_number_two": "another value that is long enough",
        "a_long_key_number_three": 3,
        "nested": {"inner_bytes": 2048, "deeper": {"x_ms": 1500}},
        "list": [{"k": 1}, 2]
    });
    let Value::Object(map) = map else {
        unreachable!("an object")
    };
    let mut out = String::new();
    details(&mut out, 2, &map, &[]);
    assert!(out.lines().all(|l| l.chars().count() <= WIDTH), "{out}");
    assert!(
        out.contains("\n  nested:\n    inner_bytes: 2 KiB\n    deeper:\n      x_ms: 1.5 s\n"),
        "{out}"
    );
    assert!(
        out.contains("list[1]: 2") && out.contains("  list[0]:\n    k: 1\n"),
        "{out}"
    );
}
