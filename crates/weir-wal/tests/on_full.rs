//! Each `on_full` policy under a slow cursor, and `max_lag` releasing a stalled sink.

mod common;

use std::time::Duration;

use common::{numbered, payload_for};
use weir_wal::format::SEGMENT_HEADER_LEN;
use weir_wal::{AppendError, CursorConfig, Gap, MaxLag, OnFull, ReadLimits, Wal, WalConfig};

const SEGMENT: u64 = 2048;
const MAX_DISK: u64 = 3 * (SEGMENT + 40);
const SIZE: usize = 100;

fn config(dir: &std::path::Path, on_full: OnFull) -> WalConfig {
    WalConfig::builder(dir)
        .segment_bytes(SEGMENT)
        .max_disk(MAX_DISK)
        .on_full(on_full)
        .cursor("slow", CursorConfig::default())
        .cursor(
            "best_effort",
            CursorConfig {
                required: false,
                ..CursorConfig::default()
            },
        )
        .build()
        .unwrap()
}

/// Reads everything available; returns (gaps, record offsets), checking payloads.
async fn drain(reader: &mut weir_wal::Reader) -> (Vec<Gap>, Vec<u64>) {
    let mut gaps = Vec::new();
    let mut offsets = Vec::new();
    loop {
        let b = reader.try_read(ReadLimits::default()).await.unwrap();
        if b.is_empty() {
            return (gaps, offsets);
        }
        gaps.extend(b.gap);
        for r in &b.records {
            assert_eq!(r.payload, payload_for(r.offset, SIZE));
            offsets.push(r.offset);
        }
    }
}

#[tokio::test]
async fn block_waits_for_the_slow_cursor_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(config(dir.path(), OnFull::Block)).unwrap();
    let mut slow = wal.reader("slow").unwrap();
    let mut next = 0;
    // Fill the budget: the append that does not fit must wait.
    let blocked = loop {
        let w = wal.clone();
        let mut append = tokio::spawn(async move { w.append(numbered(next, 2, SIZE)).await });
        match tokio::time::timeout(Duration::from_millis(300), &mut append).await {
            Ok(done) => {
                assert_eq!(done.unwrap().unwrap(), next..next + 2);
                next += 2;
            }
            Err(_) => break append,
        }
        assert!(next < 1000, "never blocked");
    };
    let stats = wal.stats();
    assert!(stats.disk_bytes <= MAX_DISK, "{stats:?}");
    assert!(
        stats.disk_bytes + 2 * (16 + SIZE as u64) + 40 > MAX_DISK,
        "{stats:?}"
    );
    // A second appender queues behind the first (FIFO).
    let w = wal.clone();
    let second = tokio::spawn(async move { w.append(numbered(next + 2, 2, SIZE)).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!blocked.is_finished() && !second.is_finished());
    // The sink catches up and commits: retention frees room, both appends complete in order.
    let (gaps, offsets) = drain(&mut slow).await;
    assert!(gaps.is_empty());
    assert_eq!(offsets, (0..next).collect::<Vec<_>>());
    slow.commit(next).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), blocked)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let second = tokio::time::timeout(Duration::from_secs(5), second)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!((first, second), (next..next + 2, next + 2..next + 4));
    let (gaps, offsets) = drain(&mut slow).await;
    assert!(gaps.is_empty());
    assert_eq!(offsets, (next..next + 4).collect::<Vec<_>>());
    assert!(wal.stats().retention_deleted_segments > 0);
}

/// A waiter for room in the budget is woken by the commit whose retention frees it:
/// `room_freed` completes because it is notified, never because a timer ran out (the
/// timeouts here are only safety nets).
#[tokio::test]
async fn room_freed_wakes_a_waiter_when_retention_frees_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(config(dir.path(), OnFull::Block)).unwrap();
    let mut slow = wal.reader("slow").unwrap();
    let len = numbered(0, 2, SIZE).encoded_len();
    // Room for a batch even if it opens a segment: every append below fits at once.
    let wanted = len + SEGMENT_HEADER_LEN;
    let mut next = 0;
    while !wal.would_block(wanted) {
        let append = wal.append(numbered(next, 2, SIZE));
        tokio::time::timeout(Duration::from_secs(5), append)
            .await
            .expect("a batch that fits is not held")
            .unwrap();
        next += 2;
        assert!(next < 1000, "never full");
    }
    let mut freed = std::pin::pin!(wal.room_freed());
    freed.as_mut().enable();
    assert!(
        wal.would_block(wanted),
        "registered, then checked: still full"
    );
    // Nothing frees room while the required cursor stays at 0.
    assert!(
        tokio::time::timeout(Duration::from_millis(50), freed.as_mut())
            .await
            .is_err()
    );
    let (_, offsets) = drain(&mut slow).await;
    assert_eq!(offsets.len() as u64, next);
    slow.commit(next).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), freed)
        .await
        .expect("retention wakes the waiter");
    assert!(!wal.would_block(wanted));
    assert!(wal.stats().retention_deleted_segments > 0);
}

#[tokio::test]
async fn reject_refuses_exactly_over_budget_and_hands_the_batch_back() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(config(dir.path(), OnFull::Reject)).unwrap();
    let mut slow = wal.reader("slow").unwrap();
    let mut next = 0;
    let refused = loop {
        let before = wal.stats();
        match wal.append(numbered(next, 2, SIZE)).await {
            Ok(r) => {
                assert_eq!(r, next..next + 2);
                next += 2;
                assert!(wal.stats().disk_bytes <= MAX_DISK);
            }
            Err(AppendError::Full {
                batch,
                used,
                max_disk,
                needed,
            }) => {
                assert_eq!(used, before.disk_bytes);
                assert_eq!(max_disk, MAX_DISK);
                assert!(
                    used + needed > MAX_DISK,
                    "refused though {used} + {needed} fits"
                );
                // Only a rotation's header or the batch itself tipped it over.
                assert!(
                    used + needed - 40 <= MAX_DISK
                        || used + needed - batch.encoded_len() <= MAX_DISK
                );
                break batch;
            }
            Err(e) => panic!("unexpected {e}"),
        }
        assert!(next < 1000);
    };
    let payloads: Vec<Vec<u8>> = refused.payloads().collect();
    assert_eq!(
        payloads,
        vec![payload_for(next, SIZE), payload_for(next + 1, SIZE)]
    );
    // Refused again while nothing changed.
    let refused = match wal.append(refused).await {
        Err(AppendError::Full { batch, .. }) => batch,
        other => panic!("expected Full, got {other:?}"),
    };
    // Once the sink commits, the same batch goes in.
    let (_, offsets) = drain(&mut slow).await;
    assert_eq!(offsets.len() as u64, next);
    slow.commit(next).await.unwrap();
    assert_eq!(wal.append(refused).await.unwrap(), next..next + 2);
}

#[tokio::test]
async fn drop_oldest_evicts_whole_segments_and_every_cursor_counts_its_gap() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(config(dir.path(), OnFull::DropOldest)).unwrap();
    let mut slow = wal.reader("slow").unwrap();
    let mut best = wal.reader("best_effort").unwrap();
    // The slow cursor reads a little first.
    let mut total = 0;
    for _ in 0..3 {
        wal.append(numbered(total, 2, SIZE)).await.unwrap();
        total += 2;
    }
    let first = slow
        .try_read(ReadLimits {
            max_records: 4,
            max_bytes: u64::MAX,
        })
        .await
        .unwrap();
    assert_eq!(first.records.len(), 4);
    slow.commit(4).await.unwrap();
    for _ in 0..200 {
        let r = wal.append(numbered(total, 2, SIZE)).await.unwrap();
        assert_eq!(r, total..total + 2);
        total += 2;
        assert!(wal.stats().disk_bytes <= MAX_DISK);
    }
    let stats = wal.stats();
    assert!(stats.evicted_segments > 0, "{stats:?}");
    assert!(stats.start > 4);
    assert_eq!(
        stats.evicted_records, stats.start,
        "whole segments from 0 to start"
    );

    let (gaps, offsets) = drain(&mut slow).await;
    assert_eq!(gaps.len(), 1);
    assert_eq!(
        gaps[0],
        Gap::Evicted {
            from: 4,
            to: stats.start,
            records: stats.start - 4
        }
    );
    assert_eq!(offsets, (stats.start..total).collect::<Vec<_>>());
    assert_eq!(
        4 + gaps[0].records() + offsets.len() as u64,
        total,
        "counts add up"
    );

    let (gaps, offsets) = drain(&mut best).await;
    assert_eq!(
        gaps,
        vec![Gap::Evicted {
            from: 0,
            to: stats.start,
            records: stats.start
        }]
    );
    assert_eq!(
        gaps[0].records() + offsets.len() as u64,
        total,
        "counts add up"
    );

    let stats = wal.stats();
    for c in &stats.cursors {
        assert_eq!(c.gaps, 1, "{c:?}");
    }
    let slow_stats = stats.cursors.iter().find(|c| c.name == "slow").unwrap();
    assert_eq!(slow_stats.gap_records, stats.start - 4);
}

#[tokio::test]
async fn max_lag_releases_a_stalled_required_cursor_from_retention() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig::builder(dir.path())
        .segment_bytes(SEGMENT)
        .max_disk(MAX_DISK)
        .on_full(OnFull::Block)
        .cursor("fast", CursorConfig::default())
        .cursor(
            "stalled",
            CursorConfig {
                max_lag: MaxLag {
                    bytes: Some(SEGMENT),
                    age: None,
                },
                ..CursorConfig::default()
            },
        )
        .build()
        .unwrap();
    let (wal, _) = Wal::open(config).unwrap();
    let mut fast = wal.reader("fast").unwrap();
    let mut stalled = wal.reader("stalled").unwrap();
    let mut total = 0;
    // Without max_lag this would block for ever at the budget: the stalled cursor never
    // commits. With it, the cursor is released and retention proceeds.
    for _ in 0..100 {
        let append = wal.append(numbered(total, 2, SIZE));
        let r = tokio::time::timeout(Duration::from_secs(5), append)
            .await
            .expect("blocked")
            .unwrap();
        assert_eq!(r, total..total + 2);
        total += 2;
        let (_, got) = drain(&mut fast).await;
        assert!(!got.is_empty());
        fast.commit(total).await.unwrap();
    }
    let stats = wal.stats();
    let s = stats.cursors.iter().find(|c| c.name == "stalled").unwrap();
    assert!(s.released && s.releases >= 1, "{s:?}");
    assert!(stats.start > 0);
    let (gaps, offsets) = drain(&mut stalled).await;
    assert_eq!(gaps.len(), 1);
    assert_eq!(gaps[0].records() + offsets.len() as u64, total);
}
