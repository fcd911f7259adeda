//! Objects partitioned by a `layout`: each record in the object of its partition, at
//! most `max_open_partitions` open, and every record in exactly one object across a
//! crash and a replay from the committed cursor.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;

use super::*;
use crate::sinks::parquet::python_tests::run_python;

/// A `file://` sink in the fixture's `lake` directory with `keys`, resumed at 0; the
/// directory.
fn file_sink(f: &Fixture, keys: &str) -> (std::path::PathBuf, ObjectStoreSink) {
    let out = f.root.join("lake");
    let config = f.config(&format!("file://{}", out.display()), keys);
    let mut sink = f.open(&config);
    sink.resume_at(0);
    (out, sink)
}

/// Records `from..to` of `devices` devices (`{"device":"dN","i":I,"ts":MS}`), in runs
/// of `run` records of one device (device `i / run % devices`); event time `ts` is one
/// hour per 100 records.
fn telemetry(from: u64, to: u64, devices: u64, run: u64) -> Arc<SinkBatch> {
    readings(from, to, |i| format!("d{}", i / run % devices))
}

/// Records `from..to` (as [`telemetry`]), record `i` from device `device(i)`.
fn readings(from: u64, to: u64, device: impl Fn(u64) -> String) -> Arc<SinkBatch> {
    let records: Vec<Record> = (from..to)
        .map(|i| Record {
            source: "mqtt".into(),
            key: String::new(),
            timestamp_ms: 1,
            payload: Bytes::from(format!(
                "{{\"device\":\"{}\",\"i\":{i},\"temp\":{i}.5,\"ts\":{},\"pad\":\"{:0>120}\"}}",
                device(i),
                1_796_128_496_000 + i / 100 * 3_600_000,
                i
            )),
            attributes: Vec::new(),
        })
        .collect();
    Arc::new(SinkBatch {
        bytes: records.iter().map(|r| r.payload.len() as u64).sum(),
        positions: (from..to)
            .map(|offset| Position {
                offset,
                time_ms: 1_796_128_496_000,
            })
            .collect(),
        records,
        next_offset: to,
        wire: Vec::new(),
    })
}

/// Checks that every offset in `0..end` is in exactly one object, and that each
/// object holds one partition (`device` matching its folder); returns the objects'
/// partitions.
fn assert_each_record_once(objects: &BTreeMap<String, Vec<u8>>, end: u64) -> BTreeSet<String> {
    assert_records_once(objects, end, &BTreeSet::new())
}

/// As [`assert_each_record_once`], with the records of `lost` in no object.
fn assert_records_once(
    objects: &BTreeMap<String, Vec<u8>>,
    end: u64,
    lost: &BTreeSet<u64>,
) -> BTreeSet<String> {
    let mut seen = BTreeMap::new();
    let mut partitions = BTreeSet::new();
    for (key, body) in objects {
        let folder = key.rsplit_once('/').map_or("", |(f, _)| f);
        partitions.insert(folder.to_owned());
        for line in std::str::from_utf8(body).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let i = v["payload"]["i"].as_u64().unwrap();
            let device = v["payload"]["device"].as_str().unwrap();
            assert!(
                folder.contains(&format!("device={device}")),
                "record {i} of {device} in {key}"
            );
            if let Some(other) = seen.insert(i, key.clone()) {
                panic!("record {i} is in {other} and in {key}");
            }
        }
    }
    let missing: Vec<u64> = (0..end)
        .filter(|i| !seen.contains_key(i) && !lost.contains(i))
        .collect();
    assert!(missing.is_empty(), "records in no object: {missing:?}");
    let found: Vec<&u64> = lost.iter().filter(|i| seen.contains_key(i)).collect();
    assert!(found.is_empty(), "records that should be lost: {found:?}");
    assert_eq!(
        seen.len() as u64 + lost.len() as u64,
        end,
        "records beyond the end: {seen:?}"
    );
    partitions
}

#[tokio::test]
async fn each_record_goes_to_the_object_of_its_partition() {
    let f = Fixture::new();
    let out = f.root.join("lake");
    let config = f.config(
        &format!("file://{}", out.display()),
        "format = \"ndjson\"\nlayout = \"day={ingest:%Y-%m-%d}/device={/device}\"\n",
    );
    let mut sink = f.open(&config);
    let batches: Vec<_> = (0..10)
        .map(|b| telemetry(b * 100, (b + 1) * 100, 5, 1))
        .collect();
    assert_eq!(run(&mut sink, 0, &batches).await, Some(1_000));
    let objects = files(&out);
    let partitions = assert_each_record_once(&objects, 1_000);
    let expected: BTreeSet<String> = (0..5)
        .map(|d| format!("lake/day=2026-12-01/device=d{d}"))
        .collect();
    assert_eq!(partitions, expected);
    assert_eq!(
        objects.len(),
        5,
        "one object per partition: {:?}",
        objects.keys()
    );
    let id = f.wal.id();
    assert!(
        objects.contains_key(&format!(
            "lake/day=2026-12-01/device=d3/{id}-00000000000000000003.ndjson"
        )),
        "named by the first offset of their partition: {:?}",
        objects.keys()
    );
}

#[tokio::test]
async fn past_max_open_partitions_the_least_recently_written_object_closes() {
    let f = Fixture::new();
    let (out, mut sink) = file_sink(
        &f,
        "format = \"ndjson\"\nlayout = \"device={/device}\"\nmax_open_partitions = 8\n",
    );
    let stats = sink.stats();
    let mut rejects = Vec::new();
    // 100 devices, in batches of 50: every batch needs more partitions than may be open.
    for b in 0..10 {
        sink.write(&telemetry(b * 50, (b + 1) * 50, 100, 1), &mut rejects)
            .await
            .unwrap();
        assert!(stats.open_objects.load(Ordering::Relaxed) <= 8);
    }
    assert_eq!(sink.finish().await.unwrap(), Some(500));
    let closes = stats.closes.0.status();
    assert!(
        closes["partitions"].as_u64().unwrap() >= 100,
        "evictions are counted: {closes}"
    );
    let objects = files(&out);
    let partitions = assert_each_record_once(&objects, 500);
    assert_eq!(partitions.len(), 100);
}

#[tokio::test]
async fn the_cursor_waits_for_the_oldest_open_object_of_any_partition() {
    let f = Fixture::new();
    let (_, mut sink) = file_sink(
        &f,
        "format = \"ndjson\"\nlayout = \"device={/device}\"\nrotate = { bytes = \"4 KiB\" }\n",
    );
    let mut rejects = Vec::new();
    // d0 fills 4 KiB quickly; d1 gets one record at offset 1 and none after.
    let mut durable = None;
    for b in 0..10 {
        // After offset 1, d0's records only: d1's object stays open with its one record.
        let batch = if b == 0 {
            telemetry(0, 2, 2, 1)
        } else {
            telemetry(b * 100, b * 100 + 100, 1, 1)
        };
        let w = sink.write(&batch, &mut rejects).await.unwrap();
        durable = w.durable_through.or(durable);
    }
    while let Ok(settled) =
        tokio::time::timeout(std::time::Duration::from_millis(300), sink.settled()).await
    {
        durable = settled.unwrap().or(durable);
    }
    assert!(
        sink.stats().objects.load(Ordering::Relaxed) > 0,
        "d0's objects were stored"
    );
    assert_eq!(durable, Some(1), "d1's open object starts at 1");
}

/// The objects stored before `committed` that hold records at or past it: a replay from
/// `committed` must not write those records again.
fn straddling(objects: &BTreeMap<String, Vec<u8>>, committed: u64) -> usize {
    let firsts = first_offsets(objects);
    objects
        .values()
        .zip(firsts)
        .filter(|(body, first)| {
            *first < committed
                && std::str::from_utf8(body).unwrap().lines().any(|line| {
                    let v: serde_json::Value = serde_json::from_str(line).unwrap();
                    v["payload"]["i"].as_u64().unwrap() >= committed
                })
        })
        .count()
}

#[tokio::test]
async fn a_replay_from_the_committed_cursor_puts_every_record_in_exactly_one_object() {
    let mut straddled = 0;
    for seed in [1u64, 2, 3] {
        let f = Fixture::new();
        let out = f.root.join("lake");
        let url = format!("file://{}", out.display());
        let keys = "format = \"ndjson\"\nlayout = \"device={/device}\"\nmax_open_partitions = 6\nrotate = { bytes = \"6 KiB\" }\npart_size = \"2 KiB\"\n";
        // Three busy devices whose objects fill and close, and six rare ones (one record
        // in ten) whose objects stay open, hold the cursor back, and are closed early
        // when more than six partitions have records.
        let device = |i: u64| {
            if i.is_multiple_of(10) {
                format!("r{}", i / 10 % 6)
            } else {
                format!("d{}", i % 3)
            }
        };
        let config = f.config(&url, keys);
        // Batch sizes and the crash point vary with the seed.
        let size = 37 + seed * 23;
        let crash_at = 1_200 + seed * 170;
        let mut committed = 0;
        {
            let mut sink = f.open(&config);
            sink.resume_at(0);
            let mut rejects = Vec::new();
            let mut at = 0;
            while at < crash_at {
                let to = (at + size).min(crash_at);
                let w = sink
                    .write(&readings(at, to, device), &mut rejects)
                    .await
                    .unwrap();
                committed = w.durable_through.unwrap_or(committed);
                at = to;
                if at % 3 == seed % 3
                    && let Ok(settled) =
                        tokio::time::timeout(std::time::Duration::from_millis(50), sink.settled())
                            .await
                {
                    committed = settled.unwrap().unwrap_or(committed);
                }
            }
            // A crash: open objects and uploads in flight are left as they are.
        }
        assert!(
            committed > 0 && committed < crash_at,
            "seed {seed}: {committed}"
        );
        let mut stored_before = files(&out);
        straddled += straddling(&stored_before, committed);
        // Seed 3: one object that holds records past the cursor is gone from the store
        // (as if closed but never stored, its first records evicted from the WAL): the
        // replay must write its records from the cursor on again, not skip them.
        let mut lost = BTreeSet::new();
        if seed == 3 {
            let firsts = first_offsets(&stored_before);
            let (key, ids) = stored_before
                .iter()
                .zip(firsts)
                .filter(|(_, first)| *first < committed)
                .map(|((key, body), _)| {
                    (
                        key.clone(),
                        ndjson_ids(&BTreeMap::from([(key.clone(), body.clone())])),
                    )
                })
                .find(|(_, ids)| ids.iter().any(|&i| i >= committed))
                .expect("an object straddles the cursor");
            std::fs::remove_file(out.join(&key)).unwrap();
            stored_before.remove(&key);
            lost = ids.into_iter().filter(|&i| i < committed).collect();
        }
        // The replay reads from the committed cursor, in other batch sizes, to the end.
        let mut sink = f.open(&config);
        let end = 2_000;
        let batches: Vec<_> = (committed..end)
            .step_by(usize::try_from(size + 11).unwrap())
            .map(|from| readings(from, (from + size + 11).min(end), device))
            .collect();
        assert_eq!(
            run(&mut sink, committed, &batches).await,
            Some(end),
            "seed {seed}"
        );
        let after = files(&out);
        assert_records_once(&after, end, &lost);
        for (key, body) in &stored_before {
            assert_eq!(
                after.get(key),
                Some(body),
                "seed {seed}: {key} was rewritten differently"
            );
        }
    }
    assert!(
        straddled > 0,
        "some stored object held records past the committed cursor, which the replay skipped"
    );
}

#[test]
fn a_layout_is_part_of_the_shape_and_event_time_needs_its_key() {
    let f = Fixture::new();
    let plain = f.config("memory://p", "format = \"ndjson\"\n");
    let laid = f.config(
        "memory://p",
        "format = \"ndjson\"\nlayout = \"d={/device}\"\n",
    );
    assert_eq!(
        shape::Shape::of(&laid).changed(&shape::Shape::of(&plain)),
        ["layout"]
    );

    let table: toml::Table =
        "url = \"memory://p\"\nlayout = \"dt={event:%Y}\"\nmax_open_partitions = 0\n"
            .parse()
            .unwrap();
    let diag = Diagnostics::default();
    let mut section = Section::new("sinks.lake".into(), &table, &diag);
    ObjectStoreConfig::parse(&mut section);
    section.finish();
    let errors: Vec<String> = diag.into_errors().iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].contains("sinks.lake.layout") && errors[0].contains("event_time"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("sinks.lake.max_open_partitions"),
        "{errors:?}"
    );
}

/// Reads a Parquet sink's partitioned files with DuckDB: the typed columns, the Hive
/// partitions (`dt`, `hour`, `device`) matching each row's event time and device, and
/// the hourly average per device with no JSON function. Arguments: the directory, the
/// expected rows, devices and hours.
const HIVE_QUERY: &str = r#"
import sys
import duckdb
directory, rows, devices, hours = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
con = duckdb.connect()
con.execute("SET TimeZone = 'UTC'")
lake = f"read_parquet('{directory}/**/*.parquet', hive_partitioning = true)"
types = {name: kind for name, kind, *_ in con.execute(f"DESCRIBE SELECT * FROM {lake}").fetchall()}
assert types["temp"] == "DOUBLE", types
assert types["ts"] == "TIMESTAMP WITH TIME ZONE", types
assert types["dt"] == "DATE", types
assert types["hour"] == "BIGINT", types
assert types["device"] == "VARCHAR", types
count, = con.execute(f"SELECT count(*) FROM {lake}").fetchone()
assert count == rows, count
misplaced, = con.execute(
    f"SELECT count(*) FROM {lake} WHERE dt <> CAST(ts AS DATE) OR hour <> hour(ts)"
).fetchone()
assert misplaced == 0, misplaced
groups = con.execute(
    f"SELECT device, date_trunc('hour', ts) AS h, avg(temp) FROM {lake} GROUP BY ALL ORDER BY ALL"
).fetchall()
assert len(groups) == devices * hours, groups
pruned, = con.execute(f"SELECT count(*) FROM {lake} WHERE device = 'd1' AND hour = 13").fetchone()
assert pruned == rows // devices // hours, pruned
print(f"ok: {count} rows, {len(groups)} groups, duckdb {duckdb.__version__}")
"#;

/// A `parquet` sink named `lake` of the keys in `text`, opened in the fixture.
fn parquet_sink(f: &Fixture, text: &str) -> crate::sinks::parquet::ParquetOutput {
    let table: toml::Table = text.parse().unwrap();
    let diag = Diagnostics::default();
    let mut section = Section::new("sinks.lake".into(), &table, &diag);
    let config = crate::sinks::parquet::ParquetConfig::parse(&mut section).unwrap();
    section.finish();
    let errors: Vec<String> = diag.into_errors().iter().map(ToString::to_string).collect();
    assert!(errors.is_empty(), "{errors:?}");
    config.open("lake", &f.context()).unwrap()
}

#[tokio::test]
async fn a_parquet_sink_with_a_layout_writes_hive_partitions_duckdb_reads_typed() {
    let f = Fixture::new();
    let out = f.root.join("lake");
    let text = format!(
        r#"path = "{}"
layout = "dt={{event:%Y-%m-%d}}/hour={{event:%H}}/device={{/device}}"
event_time = {{ path = "/ts", format = "unix_ms" }}
schema.columns = [
  {{ name = "device", path = "/device", type = "string", required = true }},
  {{ name = "temp", path = "/temp", type = "float64" }},
  {{ name = "ts", path = "/ts", type = "timestamp", format = "unix_ms" }},
]
"#,
        out.display()
    );
    let mut sink = parquet_sink(&f, &text);
    sink.resume_at(0);
    let mut rejects = Vec::new();
    // 4 devices, 10 event hours (100 records each): 40 partitions, 16 open at most.
    for b in 0..10 {
        sink.write(&telemetry(b * 100, (b + 1) * 100, 4, 1), &mut rejects)
            .await
            .unwrap();
    }
    assert!(rejects.is_empty());
    assert_eq!(sink.finish().await.unwrap(), Some(1_000));
    let id = f.wal.id();
    let expected = format!("dt=2026-12-01/hour=13/device=d1/{id}-00000000000000000101.parquet");
    assert!(
        out.join(&expected).is_file(),
        "{expected}: {:?}",
        files(&out).keys()
    );

    let stdout = run_python(HIVE_QUERY, &[&out.display().to_string(), "1000", "4", "10"]);
    assert!(stdout.starts_with("ok: 1000 rows, 40 groups"), "{stdout}");
}

/// Reads every Parquet file under a directory together, by column name: the files of the
/// first schema have no `hum`, those of the second have it. Arguments: the directory.
const UNION_QUERY: &str = r#"
import sys
import duckdb
con = duckdb.connect()
lake = f"read_parquet('{sys.argv[1]}/**/*.parquet', union_by_name = true)"
total, with_hum, without_hum = con.execute(
    f"SELECT count(*), count(hum), count(*) FILTER (WHERE hum IS NULL) FROM {lake}"
).fetchone()
kinds = {name: kind for name, kind, *_ in con.execute(f"DESCRIBE SELECT * FROM {lake}").fetchall()}
print(f"ok: {total} {with_hum} {without_hum} {kinds['temp']} {kinds['hum']}")
"#;

#[tokio::test]
async fn a_schema_changed_across_a_restart_starts_new_files_read_together_by_name() {
    let f = Fixture::new();
    let out = f.root.join("lake");
    let sink_with = |columns: &str| {
        let text = format!(
            "path = \"{}\"\nschema.columns = [ {columns} ]\n",
            out.display()
        );
        parquet_sink(&f, &text)
    };
    let first = r#"{ name = "device", path = "/device", type = "string" }, { name = "temp", path = "/temp", type = "float64" }"#;
    let mut sink = sink_with(first);
    sink.resume_at(0);
    let mut rejects = Vec::new();
    sink.write(&telemetry(0, 100, 4, 1), &mut rejects)
        .await
        .unwrap();
    assert_eq!(sink.finish().await.unwrap(), Some(100));
    // The restart adds a column: the records from the cursor on go to new files.
    let second = format!("{first}, {{ name = \"hum\", path = \"/i\", type = \"int64\" }}");
    let mut sink = sink_with(&second);
    sink.resume_at(100);
    sink.write(&telemetry(100, 250, 4, 1), &mut rejects)
        .await
        .unwrap();
    assert_eq!(sink.finish().await.unwrap(), Some(250));
    assert!(rejects.is_empty());
    assert_eq!(files(&out).len(), 2);
    let stdout = run_python(UNION_QUERY, &[&out.display().to_string()]);
    assert_eq!(stdout.trim(), "ok: 250 150 100 DOUBLE BIGINT");
}

#[tokio::test]
async fn a_partition_whose_records_all_go_to_the_quarantine_stores_no_object() {
    let f = Fixture::new();
    let out = f.root.join("lake");
    let config = f.config(
        &format!("file://{}", out.display()),
        "layout = \"device={/device}\"\n\
         schema.columns = [ { name = \"device\", path = \"/device\", type = \"string\" }, { name = \"temp\", path = \"/temp\", type = \"float64\" } ]\n",
    );
    let mut sink = f.open(&config);
    sink.resume_at(0);
    let mut rejects = Vec::new();
    let good = telemetry(0, 10, 2, 1);
    let mut records = good.records.clone();
    let mut positions = good.positions.clone();
    records.push(Record {
        payload: Bytes::from_static(br#"{"device":"bad","temp":"hot"}"#),
        ..records[0].clone()
    });
    positions.push(Position {
        offset: 10,
        time_ms: 0,
    });
    let batch = Arc::new(SinkBatch {
        records,
        positions,
        next_offset: 11,
        ..SinkBatch::default()
    });
    sink.write(&batch, &mut rejects).await.unwrap();
    assert_eq!(sink.finish().await.unwrap(), Some(11));
    assert_eq!(rejects.len(), 1, "the bad record is quarantined");
    let folders: BTreeSet<String> = files(&out)
        .keys()
        .map(|k| k.rsplit_once('/').unwrap().0.to_owned())
        .collect();
    assert_eq!(
        folders,
        BTreeSet::from(["lake/device=d0".to_owned(), "lake/device=d1".to_owned()])
    );
    let stats = sink.stats();
    assert_eq!(stats.empty_objects.load(Ordering::Relaxed), 1);
    assert_eq!(stats.objects.load(Ordering::Relaxed), 2);
}
