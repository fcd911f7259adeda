//! The driver commits the cursor while it runs, but not after every batch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use weir_wal::{Batch, CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

use super::{COMMIT_INTERVAL, DriverConfig, Outcome, Phase, run};
use crate::pipeline::sink::{Sink, SinkBatch, SinkError, Unencodable, Written};
use crate::pipeline::stats::SinkStats;
use crate::quarantine::Quarantine;
use crate::record::Record;
use crate::telemetry::{ComponentKind, Telemetry};

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
    let config = WalConfig::builder(dir.path().join("wal"))
        .max_disk(64 << 20)
        .segment_bytes(1 << 20)
        .on_full(OnFull::Block)
        .cursor("hole", CursorConfig::default())
        .build()
        .unwrap();
    let (wal, _) = Wal::open(config).unwrap();
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

    let telemetry = Telemetry::new("test".into());
    let stats = Arc::new(SinkStats::new(
        telemetry.component(ComponentKind::Sink, "hole"),
    ));
    let sink = SlowSink;
    let quarantine = Quarantine::new(&dir.path().join("quarantine"), 1 << 20).unwrap();
    let (phase_tx, phase) = watch::channel(Phase::Run);
    let driver = tokio::spawn(run(
        DriverConfig {
            name: "hole".into(),
            inputs: vec!["gen".into()],
            limits: ReadLimits {
                max_records: PER_BATCH as usize,
                max_bytes: 1 << 20,
            },
            channel_batches: 2,
            retry_initial: Duration::from_millis(10),
            retry_max: Duration::from_millis(100),
            filter: None,
        },
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
    let config = WalConfig::builder(dir.path().join("wal"))
        .max_disk(64 << 20)
        .segment_bytes(1 << 20)
        .on_full(OnFull::Block)
        .cursor("api", CursorConfig::default())
        .build()
        .unwrap();
    let (wal, _) = Wal::open(config).unwrap();
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

    let telemetry = Telemetry::new("test".into());
    let stats = Arc::new(SinkStats::new(
        telemetry.component(ComponentKind::Sink, "api"),
    ));
    let got = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = WireSink {
        got: Arc::clone(&got),
    };
    let quarantine = Quarantine::new(&dir.path().join("quarantine"), 1 << 20).unwrap();
    let (phase_tx, phase) = watch::channel(Phase::Drain(30));
    let (_, outcome) = run(
        DriverConfig {
            name: "api".into(),
            inputs: vec!["gen".into()],
            limits: ReadLimits {
                max_records: 7,
                max_bytes: 1 << 20,
            },
            channel_batches: 2,
            retry_initial: Duration::from_millis(10),
            retry_max: Duration::from_millis(100),
            filter: None,
        },
        wal.reader("api").unwrap(),
        sink,
        Arc::clone(&stats),
        phase,
        quarantine,
    )
    .await;
    drop(phase_tx);
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
