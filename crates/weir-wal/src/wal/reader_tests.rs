//! The [`Reader`](crate::Reader)'s tests, each reading what a `Wal` wrote. A read
//! cancelled while it runs on the blocking pool is taken up by the next read.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Waker};
use std::time::Duration;

use crate::format::SEGMENT_HEADER_LEN;
use crate::segment::segment_path;
use crate::{Batch, CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

fn open(dir: &std::path::Path) -> Wal {
    let config = WalConfig::builder(dir)
        .max_disk(1 << 20)
        .segment_bytes(64 << 10)
        .on_full(OnFull::Block)
        .cursor("sink", CursorConfig::default())
        .build()
        .unwrap();
    Wal::open(config).unwrap().0
}

/// A small `drop_oldest` log: a few 30 KiB appends evict its first segments.
fn open_evicting(dir: &std::path::Path) -> Wal {
    let config = WalConfig::builder(dir)
        .max_disk(256 << 10)
        .segment_bytes(64 << 10)
        .on_full(OnFull::DropOldest)
        .cursor("sink", CursorConfig::default())
        .build()
        .unwrap();
    Wal::open(config).unwrap().0
}

async fn append(wal: &Wal, payloads: &[&[u8]]) {
    let mut batch = Batch::new();
    for p in payloads {
        batch.push(p).unwrap();
    }
    wal.append(batch).await.unwrap();
}

/// Starts a read and drops it while its blocking part waits on the WAL's lock, so it
/// is certainly still running when cancelled.
fn start_and_cancel(reader: &mut crate::Reader, limits: ReadLimits) {
    let shared = std::sync::Arc::clone(reader.shared());
    let held = shared.core();
    {
        let mut read = pin!(reader.try_read(limits));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(read.as_mut().poll(&mut cx).is_pending());
    }
    drop(held);
}

const ONE: ReadLimits = ReadLimits {
    max_records: 1,
    max_bytes: 1 << 20,
};

/// The record before the reader's position is damaged on disk after the reader passed
/// it. A cancelled read must not lose the open segment: opening it again would scan it
/// from its start, meet the damage (in the active segment: stop, nothing returned)
/// and, on a healthy segment, re-read and CRC every record before the position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_read_is_continued_not_started_over() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path());
    append(&wal, &[b"zero"]).await;
    let mut reader = wal.reader("sink").unwrap();
    let first = reader.read(ONE).await.unwrap();
    assert_eq!(first.records[0].payload, &b"zero"[..]);

    // Flip a byte of record 0's payload (the last byte of its frame).
    let path = segment_path(dir.path(), 0);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = SEGMENT_HEADER_LEN as usize + crate::format::FRAME_HEADER_LEN as usize + 3;
    bytes[at] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    // Appended after the reader caught up, so no read-ahead has them yet.
    append(&wal, &[b"one", b"two"]).await;

    start_and_cancel(&mut reader, ONE);
    let next = tokio::time::timeout(Duration::from_secs(5), reader.read(ONE))
        .await
        .expect("the read continued from the open segment")
        .unwrap();
    assert_eq!(next.records.len(), 1);
    assert_eq!(next.records[0].offset, 1);
    assert_eq!(next.records[0].payload, &b"one"[..]);
    let last = reader.read(ONE).await.unwrap();
    assert_eq!(last.records[0].payload, &b"two"[..]);
}

/// While more is durable than a batch took, the next batch is read while the caller
/// holds this one: the next call returns at its first poll, without waiting for the
/// blocking pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_batch_is_read_ahead_while_more_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path());
    append(&wal, &[b"a", b"b", b"c"]).await;
    let mut reader = wal.reader("sink").unwrap();
    assert_eq!(
        reader.read(ONE).await.unwrap().records[0].payload,
        &b"a"[..]
    );
    // Give a read started now ample time; the one read ahead is already there.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let read = {
        let mut read = pin!(reader.try_read(ONE));
        let mut cx = Context::from_waker(Waker::noop());
        match read.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(read) => read.unwrap(),
            std::task::Poll::Pending => panic!("the next batch was not read ahead"),
        }
    };
    assert_eq!(read.records[0].offset, 1);
    assert_eq!(read.records[0].payload, &b"b"[..]);
    let last = reader.read(ONE).await.unwrap();
    assert_eq!(last.records[0].payload, &b"c"[..]);
    assert_eq!(last.next_offset(), 3);
}

/// A batch read ahead whose records are evicted (`drop_oldest`) before the caller takes
/// it is not returned: the caller gets the gap a read at that moment finds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_read_ahead_then_evicted_is_read_again_as_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open_evicting(dir.path());
    append(&wal, &[b"a", b"b", b"c"]).await;
    let mut reader = wal.reader("sink").unwrap();
    assert_eq!(
        reader.read(ONE).await.unwrap().records[0].payload,
        &b"a"[..]
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while reader.ahead().is_none_or(|a| a.batches.is_empty()) {
        assert!(
            std::time::Instant::now() < deadline,
            "no batch was read ahead"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Enough to rotate several times and evict segment 0.
    let big = vec![7u8; 30 << 10];
    for _ in 0..20 {
        append(&wal, &[&big]).await;
    }
    let read = reader.read(ONE).await.unwrap();
    match read.gap {
        Some(crate::Gap::Evicted { from, .. }) => assert_eq!(from, 1),
        other => panic!("expected the eviction of offsets from 1, got {other:?}: {read:?}"),
    }
}

/// A chunk's buffer is read into again once the payloads sliced from it are dropped,
/// and kept while one of them lives; chunks are as large as the reads' `max_bytes`
/// within 64 KiB..=1 MiB, so a reader of small batches holds no megabytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunk_buffers_are_reused_once_their_payloads_drop() {
    for (max_bytes, chunk) in [(4 << 20, 1 << 20), (8 << 10, 64 << 10)] {
        let dir = tempfile::tempdir().unwrap();
        let wal = open(dir.path());
        append(&wal, &[b"a", b"b"]).await;
        let mut reader = wal.reader("sink").unwrap();
        let limits = ReadLimits {
            max_records: 1024,
            max_bytes,
        };
        let batch = reader.read(limits).await.unwrap();
        assert_eq!(batch.records.len(), 2);
        let kept = batch.records[1].payload.clone();
        drop(batch);
        assert!(
            reader.pool().spare_lens().is_empty(),
            "a payload of the chunk is alive"
        );
        drop(kept);
        assert_eq!(
            reader.pool().spare_lens(),
            [chunk],
            "the chunk's buffer went back to the pool"
        );
    }
}

/// A cancelled read that found nothing must not make the next read miss what became
/// durable after it started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_empty_read_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path());
    append(&wal, &[b"a"]).await;
    let mut reader = wal.reader("sink").unwrap();
    assert_eq!(reader.read(ONE).await.unwrap().records.len(), 1);

    start_and_cancel(&mut reader, ONE);
    // Let the cancelled read finish (empty: nothing new was durable).
    tokio::time::sleep(Duration::from_millis(50)).await;
    append(&wal, &[b"b"]).await;
    let read = tokio::time::timeout(Duration::from_secs(5), reader.read(ONE))
        .await
        .expect("the new record is read, not waited for")
        .unwrap();
    assert_eq!(read.records[0].payload, &b"b"[..]);
}

/// A cancelled read with other limits is discarded, and the next read honours its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_read_with_other_limits_is_not_taken() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path());
    append(&wal, &[b"a", b"b", b"c"]).await;
    let mut reader = wal.reader("sink").unwrap();
    start_and_cancel(&mut reader, ReadLimits::default());
    let read = reader.read(ONE).await.unwrap();
    assert_eq!(read.records.len(), 1);
    assert_eq!(read.records[0].payload, &b"a"[..]);
    let rest = reader.read(ReadLimits::default()).await.unwrap();
    let payloads: Vec<_> = rest.records.iter().map(|r| r.payload.clone()).collect();
    assert_eq!(payloads, [b"b".to_vec(), b"c".to_vec()]);
}

/// A gap is counted once, when a batch with it is given to the caller: a cancelled read
/// whose batch (with the gap) is discarded, because the next call asks with other
/// limits, and read again must not count it twice. (The soak test's overload under
/// `drop_oldest` found the cursor's `gap_records` at about twice the records really
/// skipped.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_read_twice_is_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open_evicting(dir.path());
    let big = vec![7u8; 30 << 10];
    for _ in 0..20 {
        append(&wal, &[&big]).await;
    }
    let start = wal.stats().start;
    assert!(start > 0, "segment 0 was evicted");
    let mut reader = wal.reader("sink").unwrap();
    start_and_cancel(&mut reader, ONE);
    // Let the cancelled read finish on the blocking pool: its batch holds the gap.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while reader.ahead().is_none_or(|a| a.batches.is_empty()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the read did not finish"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let other = ReadLimits {
        max_records: 2,
        max_bytes: 1 << 20,
    };
    let read = reader.read(other).await.unwrap();
    assert_eq!(
        read.gap,
        Some(crate::Gap::Evicted {
            from: 0,
            to: start,
            records: start
        })
    );
    let cursor = &wal.stats().cursors[0];
    assert_eq!((cursor.gaps, cursor.gap_records), (1, start));
}

/// A segment file removed while the log still holds it (by hand, or by another process
/// after this log was closed) makes the read fail with the path: before, the reader
/// located the segment, found no file, located it again, and spun there for ever, on a
/// blocking-pool thread that also kept the runtime from shutting down (hence the
/// runtime built here, shut down with a timeout: a regression fails instead of hanging).
#[test]
fn a_segment_file_removed_behind_the_logs_back_fails_the_read_instead_of_spinning() {
    let dir = tempfile::tempdir().unwrap();
    let path = segment_path(dir.path(), 0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let read = rt.block_on(async {
        let wal = open(dir.path());
        append(&wal, &[b"a", b"b"]).await;
        std::fs::remove_file(&path).unwrap();
        let mut reader = wal.reader("sink").unwrap();
        tokio::time::timeout(Duration::from_secs(5), reader.read(ONE)).await
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    match read.expect("the read returned instead of spinning") {
        Err(crate::ReadError::Io { path: at, source }) => {
            assert_eq!(at, path);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("expected the missing segment's error, got {other:?}"),
    }
}
