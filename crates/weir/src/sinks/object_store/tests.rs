//! The object-store sink against `file://` and `memory://`: round trips, multipart,
//! and replays after a crash that cut objects again at their recorded boundaries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use object_store::ObjectStoreExt;
use parquet::file::reader::{FileReader, SerializedFileReader};
use weir_wal::{CursorConfig, OnFull, Wal, WalConfig};

use super::*;
use crate::keys::{Diagnostics, Section};
use crate::pipeline::{Position, Sink, SinkBatch};
use crate::record::Record;
use crate::sinks::{OpenSink, SinkContext, SinkKeys};

#[path = "partition_tests.rs"]
mod partitions;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    wal: Wal,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        let config = WalConfig::builder(root.join("wal"))
            .max_disk(64 << 20)
            .segment_bytes(1 << 20)
            .on_full(OnFull::Block)
            .cursor("lake", CursorConfig::default())
            .build()
            .unwrap();
        let (wal, _) = Wal::open(config).unwrap();
        Fixture {
            _dir: dir,
            root,
            wal,
        }
    }

    fn context(&self) -> SinkContext {
        SinkContext {
            stamp: crate::sinks::parquet::FooterMetadata {
                config_hash: "sha256:test".into(),
                on_full: OnFull::Block,
            }
            .into(),
            wal: self.wal.clone(),
            data_dir: self.root.join("data"),
            retry: crate::sinks::Retry {
                initial: crate::keys::Duration::millis(100),
                max: crate::keys::Duration::secs(1),
            },
            telemetry: crate::telemetry::Telemetry::new("sha256:test".into()),
            quarantine: crate::quarantine::Quarantine::new(&self.root.join("quarantine"), 1 << 20)
                .expect("quarantine"),
            detail: Arc::default(),
            unencodable: Arc::default(),
        }
    }

    /// The sink's keys: `url` and `extra` lines.
    fn config(&self, url: &str, extra: &str) -> ObjectStoreConfig {
        let table: toml::Table = format!("url = \"{url}\"\n{extra}").parse().unwrap();
        let diag = Diagnostics::default();
        let mut section = Section::new("sinks.lake".into(), &table, &diag);
        let config = ObjectStoreConfig::parse(&mut section);
        section.finish();
        let errors: Vec<String> = diag.into_errors().iter().map(ToString::to_string).collect();
        assert!(errors.is_empty(), "{errors:?}");
        config.unwrap()
    }

    fn open(&self, config: &ObjectStoreConfig) -> ObjectStoreSink {
        config.open("lake", &self.context()).unwrap()
    }
}

/// Records `from..to`, one per offset, appended at `time_ms`.
fn batch(from: u64, to: u64, time_ms: u64) -> Arc<SinkBatch> {
    let records: Vec<Record> = (from..to)
        .map(|i| Record {
            source: "gen".into(),
            key: format!("k{}", i % 3),
            timestamp_ms: 1,
            payload: Bytes::from(format!("{{\"i\":{i},\"pad\":\"{:0>200}\"}}", i)),
            attributes: Vec::new(),
        })
        .collect();
    Arc::new(SinkBatch {
        bytes: records.iter().map(|r| r.payload.len() as u64).sum(),
        positions: (from..to)
            .map(|offset| Position { offset, time_ms })
            .collect(),
        records,
        next_offset: to,
        wire: Vec::new(),
    })
}

/// Writes `batches` from `start`, then finishes; returns the durable offset.
async fn run(sink: &mut ObjectStoreSink, start: u64, batches: &[Arc<SinkBatch>]) -> Option<u64> {
    sink.resume_at(start);
    let mut rejects = Vec::new();
    let mut durable = None;
    for b in batches {
        let w = sink.write(b, &mut rejects).await.unwrap();
        durable = w.durable_through.or(durable);
    }
    assert!(rejects.is_empty());
    sink.finish().await.unwrap().or(durable)
}

/// Every regular file under `dir` (relative path → bytes), uploads excluded.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if !path.ends_with(LOCAL_UPLOADS_DIR) {
                    stack.push(path);
                }
            } else {
                let rel = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The `i` values of NDJSON objects, in name order.
fn ndjson_ids(objects: &BTreeMap<String, Vec<u8>>) -> Vec<u64> {
    let mut ids = Vec::new();
    for body in objects.values() {
        for line in std::str::from_utf8(body).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            ids.push(v["payload"]["i"].as_u64().unwrap_or_else(|| panic!("{v}")));
        }
    }
    ids
}

/// The offset each object starts at, from its name (`…-{first:020}.ext`).
fn first_offsets(objects: &BTreeMap<String, Vec<u8>>) -> Vec<u64> {
    objects
        .keys()
        .map(|k| {
            let stem = k.rsplit('/').next().unwrap();
            let digits = stem.split('-').nth(1).unwrap().split('.').next().unwrap();
            digits.parse().unwrap()
        })
        .collect()
}

#[tokio::test]
async fn file_objects_hold_every_record_once_named_by_wal_id_and_first_offset() {
    let f = Fixture::new();
    let out = f.root.join("lake");
    let config = f.config(
        &format!("file://{}", out.display()),
        "format = \"ndjson\"\nrotate = { bytes = \"40 KiB\" }\npart_size = \"16 KiB\"\n",
    );
    let mut sink = f.open(&config);
    let batches: Vec<_> = (0..10)
        .map(|b| batch(b * 100, (b + 1) * 100, 1_796_128_496_000))
        .collect();
    let durable = run(&mut sink, 0, &batches).await;
    assert_eq!(durable, Some(1_000));
    let objects = files(&out);
    assert!(
        objects.len() >= 5,
        "rotation at 40 KiB: {:?}",
        objects.keys()
    );
    let id = f.wal.id();
    for key in objects.keys() {
        assert!(
            key.starts_with(&format!("lake/dt=2026-12-01/hour=12/{id}-"))
                && key.ends_with(".ndjson"),
            "{key}"
        );
    }
    assert_eq!(ndjson_ids(&objects), (0..1_000).collect::<Vec<_>>());
    let stats = sink.stats();
    assert!(
        stats.parts.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "multipart above 16 KiB"
    );
    assert!(
        std::fs::read_dir(out.join(LOCAL_UPLOADS_DIR))
            .unwrap()
            .next()
            .is_none(),
        "no unfinished upload is left"
    );
}

#[tokio::test]
async fn a_replay_cuts_objects_again_at_their_recorded_boundaries() {
    let f = Fixture::new();
    let out = f.root.join("lake");
    let url = format!("file://{}", out.display());
    let config = f.config(
        &url,
        "format = \"ndjson\"\nrotate = { bytes = \"30 KiB\" }\npart_size = \"8 KiB\"\n",
    );
    let mut batches: Vec<_> = (0..6).map(|b| batch(b * 50, (b + 1) * 50, 0)).collect();
    // Above part_size, below rotate.bytes: the last object is open, one part uploaded.
    batches.push(batch(300, 340, 0));
    {
        let mut sink = f.open(&config);
        sink.resume_at(0);
        let mut rejects = Vec::new();
        for b in &batches {
            sink.write(b, &mut rejects).await.unwrap();
        }
        // The closed objects land...
        while let Ok(settled) =
            tokio::time::timeout(std::time::Duration::from_millis(300), sink.settled()).await
        {
            settled.unwrap();
        }
        // ...then a crash: the open object is never finished, and the cursor was never
        // committed past the stored ones.
    }
    let before = files(&out);
    assert!(!before.is_empty());
    let uploads = || {
        std::fs::read_dir(out.join(LOCAL_UPLOADS_DIR))
            .unwrap()
            .count()
    };
    assert_eq!(
        uploads(),
        1,
        "the open object's multipart upload is left unfinished"
    );
    // The replay reads from the committed cursor (0) in other batch sizes, and with a
    // different rotation: the recorded objects still end where they ended.
    let replay = f.config(
        &url,
        "format = \"ndjson\"\nrotate = { bytes = \"1 MiB\" }\n",
    );
    let mut sink = f.open(&replay);
    let uneven: Vec<_> = [(0, 7), (7, 130), (130, 131), (131, 340)]
        .iter()
        .map(|&(a, b)| batch(a, b, 0))
        .collect();
    assert_eq!(run(&mut sink, 0, &uneven).await, Some(340));
    assert_eq!(uploads(), 0, "the recorded upload was aborted");
    assert_eq!(
        sink.stats()
            .aborted_uploads
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    let after = files(&out);
    for (key, body) in &before {
        assert_eq!(
            after.get(key),
            Some(body),
            "{key} was rewritten differently"
        );
    }
    assert_eq!(
        ndjson_ids(&after),
        (0..340).collect::<Vec<_>>(),
        "no overlap, no loss"
    );
    let firsts = first_offsets(&after);
    assert!(firsts.windows(2).all(|w| w[0] < w[1]), "{firsts:?}");
}

#[tokio::test]
async fn records_of_other_sources_move_the_cursor_without_an_object() {
    let f = Fixture::new();
    let out = f.root.join("lake");
    let config = f.config(
        &format!("file://{}", out.display()),
        "format = \"ndjson\"\n",
    );
    let mut sink = f.open(&config);
    // 0..100 are another source's (skipped by the driver), then 100..150 are ours.
    let skipped = Arc::new(SinkBatch {
        next_offset: 100,
        ..SinkBatch::default()
    });
    assert_eq!(
        run(&mut sink, 0, &[skipped, batch(100, 150, 0)]).await,
        Some(150)
    );
    let objects = files(&out);
    assert_eq!(first_offsets(&objects), vec![100]);
    assert_eq!(ndjson_ids(&objects), (100..150).collect::<Vec<_>>());
}

#[tokio::test]
async fn memory_parquet_objects_are_multipart_above_part_size_with_their_offsets_in_the_footer() {
    let f = Fixture::new();
    let config = f.config(
        "memory://pre",
        "part_size = \"64 KiB\"\nrow_group_bytes = \"32 KiB\"\ncompression = \"none\"\nupload_concurrency = 3\n",
    );
    let mut sink = f.open(&config);
    let batches: Vec<_> = (0..20).map(|b| batch(b * 100, (b + 1) * 100, 0)).collect();
    assert_eq!(run(&mut sink, 0, &batches).await, Some(2_000));
    let store = sink.store().remote().unwrap();
    let listed: Vec<_> = futures::StreamExt::collect::<Vec<_>>(store.list(None)).await;
    assert_eq!(listed.len(), 1, "one object: no rotation below 128 MiB");
    let meta = listed.into_iter().next().unwrap().unwrap();
    assert!(
        meta.location
            .as_ref()
            .starts_with("pre/lake/dt=1970-01-01/hour=00/"),
        "{}",
        meta.location
    );
    assert!(meta.size > 64 * 1024);
    let body = store
        .get(&meta.location)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let reader = SerializedFileReader::new(body).unwrap();
    let file_meta = reader.metadata().file_metadata();
    assert_eq!(file_meta.num_rows(), 2_000);
    let kv: BTreeMap<_, _> = file_meta
        .key_value_metadata()
        .unwrap()
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect();
    assert_eq!(kv["weir.first_offset"], "0");
    assert_eq!(kv["weir.last_offset"], "1999");
    assert_eq!(kv["weir.config_hash"], "sha256:test");
    let stats = sink.stats();
    assert!(stats.parts.load(std::sync::atomic::Ordering::Relaxed) >= 2);
    assert_eq!(stats.objects.load(std::sync::atomic::Ordering::Relaxed), 1);
}

/// Writes `batches` from 0 and drops the sink without finishing: a crash before the
/// cursor moved past anything.
async fn crash_after(sink: &mut ObjectStoreSink, batches: &[Arc<SinkBatch>]) {
    sink.resume_at(0);
    let mut rejects = Vec::new();
    for b in batches {
        sink.write(b, &mut rejects).await.unwrap();
    }
    while let Ok(settled) =
        tokio::time::timeout(std::time::Duration::from_millis(300), sink.settled()).await
    {
        settled.unwrap();
    }
}

#[tokio::test]
async fn a_recorded_object_is_not_replayed_under_another_format() {
    let f = Fixture::new();
    let out = f.root.join("lake");
    let url = format!("file://{}", out.display());
    let rotate = "rotate = { bytes = \"30 KiB\" }\n";
    let parquet = f.config(&url, rotate);
    let batches: Vec<_> = (0..4).map(|b| batch(b * 100, (b + 1) * 100, 0)).collect();
    crash_after(&mut f.open(&parquet), &batches).await;
    let before = files(&out);
    assert!(before.keys().all(|k| k.ends_with(".parquet")), "{before:?}");

    let ndjson = f.config(&url, &format!("{rotate}format = \"ndjson\"\n"));
    let err = ndjson.open("lake", &f.context()).unwrap_err().to_string();
    assert!(err.contains("`format`"), "{err}");
    assert!(
        err.contains(".parquet") && err.contains(JOURNAL_FILE),
        "{err}"
    );
    assert_eq!(files(&out), before, "nothing was written");

    // The earlier format replays the recorded objects as they were.
    let mut sink = f.open(&parquet);
    assert_eq!(run(&mut sink, 0, &batches).await, Some(400));
    assert_eq!(files(&out), before);
}

#[tokio::test]
async fn an_unfinished_object_recorded_under_another_compression_is_named_by_the_new_one() {
    let f = Fixture::new();
    let out = f.root.join("lake");
    let url = format!("file://{}", out.display());
    let keys = "format = \"ndjson\"\nrotate = { bytes = \"1 MiB\" }\npart_size = \"8 KiB\"\n";
    // Above part_size: the open object's multipart upload started, never closed.
    crash_after(&mut f.open(&f.config(&url, keys)), &[batch(0, 100, 0)]).await;
    assert!(files(&out).is_empty());
    let gzip = f.config(&url, &format!("{keys}compression = \"gzip\"\n"));
    let mut sink = f.open(&gzip);
    assert_eq!(run(&mut sink, 0, &[batch(0, 100, 0)]).await, Some(100));
    let objects = files(&out);
    assert_eq!(objects.len(), 1);
    assert!(
        objects.keys().all(|k| k.ends_with(".ndjson.gz")),
        "{objects:?}"
    );
    assert_eq!(
        sink.stats()
            .aborted_uploads
            .load(std::sync::atomic::Ordering::Relaxed),
        1,
        "the earlier upload was aborted"
    );
}

#[tokio::test]
async fn single_puts_counts_objects_stored_not_attempts() {
    let f = Fixture::new();
    let out = f.root.join("lake");
    let config = f.config(
        &format!("file://{}", out.display()),
        "format = \"ndjson\"\nmax_attempts = 1\n",
    );
    // The sink's directory is a file: the PUT fails.
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("lake"), "in the way").unwrap();
    let mut sink = f.open(&config);
    sink.resume_at(0);
    let mut rejects = Vec::new();
    sink.write(&batch(0, 10, 0), &mut rejects).await.unwrap();
    assert!(sink.finish().await.is_err(), "the PUT failed");
    std::fs::remove_file(out.join("lake")).unwrap();
    assert_eq!(run(&mut sink, 0, &[batch(0, 10, 0)]).await, Some(10));
    let stats = sink.stats();
    let get = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(get(&stats.objects), 1);
    assert_eq!(
        get(&stats.single_puts),
        1,
        "the failed attempt is not a PUT"
    );
}
