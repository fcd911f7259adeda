//! Append, read, commit, reopen, rotation, retention, locking, stats.

mod common;

use std::time::Duration;

use common::{numbered, payload_for, small, with_sink};
use weir_wal::{CursorConfig, OnFull, OpenError, ReadLimits, StartFrom, Wal, WalConfig};

#[tokio::test]
async fn appended_records_read_back_in_order_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let config = with_sink(small(dir.path(), OnFull::Block));
    let (wal, report) = Wal::open(config.clone()).unwrap();
    assert_eq!((report.start, report.durable_end), (0, 0));
    let mut expected = 0;
    for _ in 0..20 {
        let r = wal.append(numbered(expected, 7, 100)).await.unwrap();
        assert_eq!(r, expected..expected + 7);
        expected += 7;
    }
    let stats = wal.stats();
    assert!(stats.segments > 1, "rotated: {stats:?}");
    assert_eq!(stats.durable_end, 140);
    assert!(stats.fsyncs >= 20);

    let mut reader = wal.reader("sink").unwrap();
    let mut got = 0;
    while got < 140 {
        let batch = reader
            .read(ReadLimits {
                max_records: 33,
                max_bytes: 1 << 20,
            })
            .await
            .unwrap();
        assert!(batch.gap.is_none());
        assert!(batch.records.len() <= 33);
        for r in &batch.records {
            assert_eq!(r.offset, got);
            assert_eq!(r.payload, payload_for(got, 100));
            got += 1;
        }
    }
    reader.commit(100).await.unwrap();
    drop(reader);
    wal.close().await;

    let (wal, report) = Wal::open(config).unwrap();
    assert_eq!(report.durable_end, 140);
    assert_eq!(report.truncated_bytes, 0);
    let mut reader = wal.reader("sink").unwrap();
    assert_eq!(reader.committed(), 100);
    let batch = reader.read(ReadLimits::default()).await.unwrap();
    assert_eq!(batch.records.first().map(|r| r.offset), Some(100));
    let r = wal.append(numbered(140, 1, 10)).await.unwrap();
    assert_eq!(r, 140..141);
}

#[tokio::test]
async fn retention_deletes_segments_below_the_required_cursors() {
    let dir = tempfile::tempdir().unwrap();
    let config = small(dir.path(), OnFull::Block)
        .cursor("a", CursorConfig::default())
        .cursor("b", CursorConfig::default())
        .cursor(
            "best_effort",
            CursorConfig {
                required: false,
                ..CursorConfig::default()
            },
        )
        .build()
        .unwrap();
    let (wal, _) = Wal::open(config).unwrap();
    for i in 0..30 {
        wal.append(numbered(i * 10, 10, 100)).await.unwrap();
    }
    let before = wal.stats();
    let mut a = wal.reader("a").unwrap();
    let mut b = wal.reader("b").unwrap();
    while a.position() < 300 {
        a.read(ReadLimits::default()).await.unwrap();
    }
    a.commit(300).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        wal.stats().segments,
        before.segments,
        "b still holds retention"
    );
    while b.position() < 200 {
        b.read(ReadLimits {
            max_records: 200 - b.position() as usize,
            max_bytes: u64::MAX,
        })
        .await
        .unwrap();
    }
    b.commit(200).await.unwrap();
    let mut after = wal.stats();
    for _ in 0..100 {
        if after.start > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        after = wal.stats();
    }
    assert!(after.start > 0 && after.start <= 200, "{after:?}");
    assert!(after.retention_deleted_segments > 0);
    assert!(after.disk_bytes < before.disk_bytes);
    // The best-effort cursor did not hold retention: it sees the gap.
    let mut e = wal.reader("best_effort").unwrap();
    let batch = e.read(ReadLimits::default()).await.unwrap();
    let gap = batch.gap.expect("gap");
    assert_eq!(gap.records(), after.start);
    let stats = wal.stats();
    let c = stats
        .cursors
        .iter()
        .find(|c| c.name == "best_effort")
        .unwrap();
    assert_eq!((c.gaps, c.gap_records), (1, after.start));
}

#[tokio::test]
async fn a_second_open_of_the_same_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = with_sink(small(dir.path(), OnFull::Reject));
    let (_wal, _) = Wal::open(config.clone()).unwrap();
    match Wal::open(config) {
        Err(OpenError::Locked { .. }) => {}
        other => panic!("expected Locked, got {other:?}"),
    }
}

#[tokio::test]
async fn start_from_latest_skips_what_was_there() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(with_sink(small(dir.path(), OnFull::Block))).unwrap();
    wal.append(numbered(0, 5, 20)).await.unwrap();
    wal.close().await;
    let config = small(dir.path(), OnFull::Block)
        .cursor(
            "late",
            CursorConfig {
                start_from: StartFrom::Latest,
                ..CursorConfig::default()
            },
        )
        .build()
        .unwrap();
    let (wal, _) = Wal::open(config).unwrap();
    let mut r = wal.reader("late").unwrap();
    assert_eq!(r.position(), 5);
    let w = wal.clone();
    let writer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        w.append(numbered(5, 1, 20)).await.unwrap()
    });
    let batch = r.read(ReadLimits::default()).await.unwrap();
    assert_eq!(batch.records[0].offset, 5);
    assert_eq!(writer.await.unwrap(), 5..6);
}

#[tokio::test]
async fn concurrent_appenders_are_coalesced_into_fewer_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig::builder(dir.path())
        .max_disk(256 << 20)
        .on_full(OnFull::Reject)
        .cursor("sink", CursorConfig::default())
        .build()
        .unwrap();
    let (wal, _) = Wal::open(config).unwrap();
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let wal = wal.clone();
        tasks.push(tokio::spawn(async move {
            let mut ranges = Vec::new();
            for i in 0..50 {
                ranges.push(wal.append(numbered(t * 1000 + i, 4, 64)).await.unwrap());
            }
            ranges
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_by_key(|r| r.start);
    let mut next = 0;
    for r in &all {
        assert_eq!(r.start, next);
        next = r.end;
    }
    assert_eq!(next, 8 * 50 * 4);
    let stats = wal.stats();
    assert!(stats.fsyncs <= 400, "fsyncs {}", stats.fsyncs);
}

#[tokio::test]
async fn sync_interval_acknowledges_on_write_and_readers_wait_for_the_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let config = small(dir.path(), OnFull::Block)
        .sync(weir_wal::SyncMode::Interval(Duration::from_millis(50)))
        .cursor("sink", CursorConfig::default())
        .build()
        .unwrap();
    let (wal, _) = Wal::open(config.clone()).unwrap();
    let mut reader = wal.reader("sink").unwrap();
    let mut next = 0;
    for _ in 0..10 {
        assert_eq!(
            wal.append(numbered(next, 3, 50)).await.unwrap(),
            next..next + 3
        );
        next += 3;
    }
    // Within the interval every record becomes durable and readable.
    let mut got = 0;
    while got < next {
        let b = tokio::time::timeout(Duration::from_secs(2), reader.read(ReadLimits::default()))
            .await
            .expect("records became readable within the interval")
            .unwrap();
        got += b.records.len() as u64;
        assert!(wal.durable_end() >= got);
    }
    assert!(
        wal.stats().fsyncs < 10,
        "fsyncs are per interval, not per batch"
    );
    drop(reader);
    wal.close().await;
    let (_, report) = Wal::open(config).unwrap();
    assert_eq!(report.durable_end, next);
}
