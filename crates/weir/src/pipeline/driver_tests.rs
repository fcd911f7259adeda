//! The driver commits the cursor while it runs, but not after every batch; it hands a
//! sink only its inputs' records, checked, and those its filter passes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use weir_wal::{Batch, CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

use super::{COMMIT_INTERVAL, DriverConfig, Outcome, Phase, run};
use crate::pipeline::filter::{Filter, OnFilterError, SinkFilter};
use crate::pipeline::sink::{Sink, SinkBatch, SinkError, Unencodable, Written};
use crate::pipeline::stats::SinkStats;
use crate::quarantine::Quarantine;
use crate::record::Record;
use crate::telemetry::{ComponentKind, Telemetry};

/// A WAL under `dir` with one cursor, `sink`'s.
fn open_wal(dir: &std::path::Path, sink: &str) -> Wal {
    let config = WalConfig::builder(dir.join("wal"))
        .max_disk(64 << 20)
        .segment_bytes(1 << 20)
        .on_full(OnFull::Block)
        .cursor(sink, CursorConfig::default())
        .build()
        .unwrap();
    Wal::open(config).unwrap().0
}

/// The counters of the sink `name`.
fn sink_stats(name: &str) -> Arc<SinkStats> {
    let telemetry = Telemetry::new("test".into());
    Arc::new(SinkStats::new(
        telemetry.component(ComponentKind::Sink, name),
    ))
}

/// The driver of the sink `name`, reading `gen`'s records `max_records` at a time.
fn driver_config(name: &str, max_records: usize, filter: Option<SinkFilter>) -> DriverConfig {
    DriverConfig {
        name: name.into(),
        inputs: vec!["gen".into()],
        limits: ReadLimits {
            max_records,
            max_bytes: 1 << 20,
        },
        channel_batches: 2,
        retry_initial: Duration::from_millis(10),
        retry_max: Duration::from_millis(100),
        filter,
    }
}

/// Runs `config`'s driver over `wal` until it has drained to `until`.
async fn drain<S: Sink>(
    dir: &std::path::Path,
    wal: &Wal,
    config: DriverConfig,
    sink: S,
    stats: &Arc<SinkStats>,
    until: u64,
) -> Outcome {
    let quarantine = Quarantine::new(&dir.join("quarantine"), 1 << 20).unwrap();
    let (_phase_tx, phase) = watch::channel(Phase::Drain(until));
    let reader = wal.reader(&config.name).unwrap();
    run(config, reader, sink, Arc::clone(stats), phase, quarantine)
        .await
        .1
}

/// A sink that takes 5 ms per batch of 10 records (2,000 records/s), stored at once.
struct SlowSink;

impl Sink for SlowSink {
    async fn write(
        &mut self,
        batch: &Arc<SinkBatch>,
        _rejects: &mut Vec<Unencodable>,
    ) -> Result<Written, SinkError> {
        tokio::time::sleep(Duration::from_millis(5)).await;
        Ok(Written {
            durable_through: Some(batch.next_offset),
            ..Written::default()
        })
    }
}

const BATCHES: u64 = 100;
const PER_BATCH: u64 = 10;

/// 1,000 records read 10 at a time by a sink taking 2,000 records/s: about 100
/// batches acknowledged over half a second. The saved cursor reaches the end while the
/// driver still runs, and changes at most once per [`COMMIT_INTERVAL`] (plus the first
/// commit), not once per batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursor_commits_are_spaced_but_keep_up() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open_wal(dir.path(), "hole");
    let mut wire = Vec::new();
    for b in 0..BATCHES {
        let mut batch = Batch::new();
        for r in 0..PER_BATCH {
            let record = Record {
                source: "gen".into(),
                key: format!("key-{}", r % 4),
                timestamp_ms: 1,
                payload: bytes::Bytes::from(format!("{:050}", b * PER_BATCH + r)),
                attributes: Vec::new(),
            };
            wire.clear();
            record.encode_into(&mut wire);
            batch.push(&wire).unwrap();
        }
        wal.append(batch).await.unwrap();
    }
    let end = BATCHES * PER_BATCH;

    let stats = sink_stats("hole");
    let sink = SlowSink;
    let quarantine = Quarantine::new(&dir.path().join("quarantine"), 1 << 20).unwrap();
    let (phase_tx, phase) = watch::channel(Phase::Run);
    let driver = tokio::spawn(run(
        driver_config("hole", PER_BATCH as usize, None),
        wal.reader("hole").unwrap(),
        sink,
        Arc::clone(&stats),
        phase,
        quarantine,
    ));

    let committed = || wal.stats().cursors[0].committed;
    let started = Instant::now();
    let mut last = committed();
    let mut changes = 0u32;
    while last < end {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the cursor is saved while the driver runs (at {last} of {end})"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
        let now = committed();
        if now != last {
            changes += 1;
            last = now;
        }
    }
    let elapsed = started.elapsed();
    let most = elapsed.as_millis() / COMMIT_INTERVAL.as_millis() + 2;
    assert!(
        u128::from(changes) <= most,
        "{changes} cursor commits in {elapsed:?}: more than one per {COMMIT_INTERVAL:?}"
    );
    assert!(stats.batches.load(std::sync::atomic::Ordering::Relaxed) >= BATCHES);

    phase_tx.send(Phase::Stop).unwrap();
    let (_, outcome) = driver.await.unwrap();
    assert_eq!(outcome, Outcome::Finished);
    assert_eq!(committed(), end);
}

/// Collects what it is handed; takes its records in their WAL form.
struct WireSink {
    got: Arc<std::sync::Mutex<Vec<Arc<SinkBatch>>>>,
}

impl Sink for WireSink {
    fn takes_wire(&self) -> bool {
        true
    }

    async fn write(
        &mut self,
        batch: &Arc<SinkBatch>,
        _rejects: &mut Vec<Unencodable>,
    ) -> Result<Written, SinkError> {
        self.got.lock().unwrap().push(Arc::clone(batch));
        Ok(Written {
            durable_through: Some(batch.next_offset),
            ..Written::default()
        })
    }
}

/// A sink that takes the WAL form gets its inputs' records only, in order, with their
/// positions, lengths checked (one cut short is skipped and counted), nothing decoded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_taking_the_wal_form_gets_its_inputs_records_checked() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open_wal(dir.path(), "api");
    let mut batch = Batch::new();
    let mut expected = Vec::new();
    for i in 0..30u64 {
        let record = Record {
            source: if i % 3 == 0 { "other" } else { "gen" }.into(),
            key: format!("key-{i}"),
            timestamp_ms: 1,
            payload: bytes::Bytes::from(format!("{{\"i\":{i}}}")),
            attributes: vec![("n".to_owned(), i.to_string())],
        };
        let mut wire = Vec::new();
        record.encode_into(&mut wire);
        if i == 10 {
            wire.pop(); // its payload cut short by a byte
        } else if i % 3 != 0 {
            expected.push((i, record));
        }
        batch.push(&wire).unwrap();
    }
    wal.append(batch).await.unwrap();

    let stats = sink_stats("api");
    let got = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = WireSink {
        got: Arc::clone(&got),
    };
    let outcome = drain(
        dir.path(),
        &wal,
        driver_config("api", 7, None),
        sink,
        &stats,
        30,
    )
    .await;
    assert_eq!(outcome, Outcome::Finished);

    let batches = got.lock().unwrap().clone();
    let mut seen = Vec::new();
    for batch in &batches {
        assert!(batch.records.is_empty() && batch.positions.is_empty());
        let payloads: u64 = batch.wire.iter().map(|w| w.payload_len() as u64).sum();
        assert_eq!(batch.bytes, payloads);
        assert_eq!(batch.len(), batch.wire.len());
        seen.extend(batch.wire.iter().cloned());
    }
    assert_eq!(seen.len(), expected.len());
    for (wire, (offset, record)) in seen.iter().zip(&expected) {
        assert_eq!(wire.position.offset, *offset);
        assert_eq!(wire.decode().unwrap(), *record);
        let view = wire.view().unwrap();
        assert_eq!((view.source, view.key), ("gen", record.key.as_str()));
    }
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(load(&stats.unencodable), 1, "the record cut short");
    assert_eq!(load(&stats.records), expected.len() as u64);
    assert_eq!(wal.stats().cursors[0].committed, 30);
}

/// Collects what it is handed, decoded.
struct RecordSink {
    got: Arc<std::sync::Mutex<Vec<Record>>>,
}

impl Sink for RecordSink {
    async fn write(
        &mut self,
        batch: &Arc<SinkBatch>,
        _rejects: &mut Vec<Unencodable>,
    ) -> Result<Written, SinkError> {
        assert_eq!(batch.records.len(), batch.positions.len());
        self.got
            .lock()
            .unwrap()
            .extend(batch.records.iter().cloned());
        Ok(Written {
            durable_through: Some(batch.next_offset),
            ..Written::default()
        })
    }
}

/// 40 records, 4 of another source: of the 36 of `gen`, `i % 3 == 0` has temp 35 and
/// passes `.temp > 30`, every 8th is not JSON (a filter error); the rest do not pass.
async fn filtered_run<S: Sink>(
    sink: S,
    on_error: OnFilterError,
) -> (Arc<SinkStats>, u64, Vec<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let wal = open_wal(dir.path(), "lake");
    let mut batch = Batch::new();
    let mut passing = Vec::new();
    for i in 0..40u64 {
        let payload = if i % 8 == 7 {
            "not json".to_owned()
        } else {
            format!(r#"{{"i":{i},"temp":{}}}"#, if i % 3 == 0 { 35 } else { 20 })
        };
        let record = Record {
            source: if i % 10 == 9 { "other" } else { "gen" }.into(),
            key: format!("key-{i}"),
            timestamp_ms: 1,
            payload: bytes::Bytes::from(payload),
            attributes: Vec::new(),
        };
        let mut wire = Vec::new();
        record.encode_into(&mut wire);
        batch.push(&wire).unwrap();
        if i % 10 != 9 && i % 8 != 7 && i % 3 == 0 {
            passing.push(i);
        }
    }
    wal.append(batch).await.unwrap();

    let stats = sink_stats("lake");
    let filter = SinkFilter {
        filter: Filter::compile(".temp > 30").unwrap(),
        on_error,
    };
    let config = driver_config("lake", 7, Some(filter));
    let outcome = drain(dir.path(), &wal, config, sink, &stats, 40).await;
    assert_eq!(outcome, Outcome::Finished);
    (stats, wal.stats().cursors[0].committed, passing)
}

/// Records the filter does not pass never reach the sink, are counted, and the cursor
/// moves past them; records it fails on are counted apart and dropped or kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filtered_records_advance_the_cursor_and_are_counted() {
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    let of_gen = 36u64;
    let not_json = [7u64, 15, 23, 31].len() as u64; // 39 is `other`'s

    // Decoded records, errors dropped.
    let got = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = RecordSink {
        got: Arc::clone(&got),
    };
    let (stats, committed, passing) = filtered_run(sink, OnFilterError::Drop).await;
    let keys: Vec<String> = got.lock().unwrap().iter().map(|r| r.key.clone()).collect();
    let expected: Vec<String> = passing.iter().map(|i| format!("key-{i}")).collect();
    assert_eq!(keys, expected);
    assert_eq!(committed, 40, "the cursor moves past every record read");
    assert_eq!(load(&stats.filter_errors), not_json);
    assert_eq!(
        load(&stats.filtered),
        of_gen - not_json - passing.len() as u64
    );
    assert_eq!(load(&stats.records), passing.len() as u64);
    assert_eq!(load(&stats.unencodable), 0);

    // The WAL form, errors kept: the records it failed on arrive too, in order.
    let got = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = WireSink {
        got: Arc::clone(&got),
    };
    let (stats, committed, passing) = filtered_run(sink, OnFilterError::Keep).await;
    let offsets: Vec<u64> = got
        .lock()
        .unwrap()
        .iter()
        .flat_map(|b| b.wire.iter().map(|w| w.position.offset).collect::<Vec<_>>())
        .collect();
    let mut expected = passing.clone();
    expected.extend([7, 15, 23, 31]);
    expected.sort_unstable();
    assert_eq!(offsets, expected);
    assert_eq!(committed, 40);
    assert_eq!(load(&stats.filter_errors), not_json);
    assert_eq!(
        load(&stats.filtered),
        of_gen - not_json - passing.len() as u64
    );
}
