//! A chain keeps its batches in order with several in flight, also across a refusal.
//!
//! The tests stall the writer by holding the core lock it needs while they submit (on a
//! current-thread runtime, where nothing else needs it).
#![allow(
    clippy::await_holding_lock,
    reason = "holding the writer's lock across submissions is how the tests stall it"
)]

use crate::error::AppendError;
use crate::{Batch, CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

fn batch(tag: u8, bytes: usize) -> Batch {
    let mut b = Batch::new();
    b.push(&vec![tag; bytes]).unwrap();
    b
}

fn open(dir: &std::path::Path, on_full: OnFull) -> Wal {
    let config = WalConfig::builder(dir)
        .max_disk(256 << 10)
        .segment_bytes(32 << 10)
        .on_full(on_full)
        .cursor("sink", CursorConfig::default())
        .build()
        .unwrap();
    Wal::open(config).unwrap().0
}

/// Reads every record the log holds, in order, returning each one's first byte (its tag).
async fn tags(wal: &Wal) -> Vec<u8> {
    let mut reader = wal.reader("sink").unwrap();
    let mut out = Vec::new();
    while reader.position() < wal.durable_end() {
        let read = reader.read(ReadLimits::default()).await.unwrap();
        out.extend(read.records.iter().map(|r| r.payload[0]));
    }
    out
}

/// Eight batches handed over while the writer is stalled (all eight queued before the
/// first is written): each `submit` returns without waiting for durability, and the
/// log holds them in submission order, made durable together.
#[tokio::test]
async fn batches_in_flight_are_written_in_submission_order() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), OnFull::Block);
    let chain = wal.chain();
    let stalled = wal.inner_shared().core();
    let mut pending = Vec::new();
    for tag in 0..8u8 {
        pending.push(chain.submit(batch(tag, 100)).await.unwrap());
    }
    assert_eq!(
        wal.durable_end(),
        0,
        "nothing written while the writer is stalled"
    );
    drop(stalled);
    let mut ranges = Vec::new();
    for p in pending {
        ranges.push(p.durable().await.unwrap());
    }
    assert_eq!(ranges, (0..8).map(|i| i..i + 1).collect::<Vec<_>>());
    assert_eq!(tags(&wal).await, (0..8).collect::<Vec<_>>());
    wal.close().await;
}

/// Under `on_full = "reject"`, a large batch that does not fit is refused; a small one
/// queued right behind it would fit. Plain appends write the small one (out of order);
/// through a chain it is refused too ([`AppendError::Behind`]), and after `restart`
/// and room freed the two are resubmitted and land in their order.
#[tokio::test]
async fn a_refusal_refuses_what_is_behind_it_until_restart() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), OnFull::Reject);
    // Fill until 20 KB no longer fits but 100 B does.
    while wal.stats().disk_bytes + 20_100 <= wal.max_disk() {
        wal.append(batch(b'f', 2_000)).await.unwrap();
    }
    let before = wal.durable_end();

    // Plain appends, both queued before the writer takes either: the small one gets in.
    let stalled = wal.inner_shared().core();
    let (big, small) = {
        let big = tokio::spawn({
            let wal = wal.clone();
            async move { wal.append(batch(b'B', 20_000)).await }
        });
        tokio::task::yield_now().await;
        let small = tokio::spawn({
            let wal = wal.clone();
            async move { wal.append(batch(b's', 100)).await }
        });
        // Let the spawned appends run to their wait for an answer (current-thread runtime).
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        drop(stalled);
        (big.await.unwrap(), small.await.unwrap())
    };
    assert!(matches!(big, Err(AppendError::Full { .. })), "{big:?}");
    assert!(small.is_ok(), "without a chain the smaller batch overtakes");

    // Through a chain: the batch behind the refused one is refused as well.
    let mut chain = wal.chain();
    let stalled = wal.inner_shared().core();
    let first = chain.submit(batch(b'A', 20_000)).await.unwrap();
    let second = chain.submit(batch(b'b', 100)).await.unwrap();
    drop(stalled);
    let first = first.durable().await;
    let second = second.durable().await;
    let Err(AppendError::Full { batch: a, .. }) = first else {
        panic!("{first:?}")
    };
    let Err(AppendError::Behind(b)) = second else {
        panic!("{second:?}")
    };
    // Still refused without a restart, even once room is there.
    let mut reader = wal.reader("sink").unwrap();
    while reader.position() < wal.durable_end() {
        let read = reader.read(ReadLimits::default()).await.unwrap();
        reader.commit(read.next_offset()).await.unwrap();
    }
    drop(reader);
    let late = chain
        .submit(batch(b'x', 100))
        .await
        .unwrap()
        .durable()
        .await;
    assert!(matches!(late, Err(AppendError::Behind(_))), "{late:?}");

    chain.restart();
    let a = chain.submit(a).await.unwrap();
    let b = chain.submit(b).await.unwrap();
    let a = a.durable().await.unwrap();
    let b = b.durable().await.unwrap();
    assert!(a.end <= b.start, "resubmitted in order: {a:?} then {b:?}");
    assert_eq!(a.start, before + 1, "after the small plain append");
    wal.close().await;
}

/// Chains are independent: one refused does not hold back another appender's batches.
#[tokio::test]
async fn a_refusal_holds_back_only_its_own_chain() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), OnFull::Reject);
    while wal.stats().disk_bytes + 20_100 <= wal.max_disk() {
        wal.append(batch(b'f', 2_000)).await.unwrap();
    }
    let one = wal.chain();
    let other = wal.chain();
    let stalled = wal.inner_shared().core();
    let refused = one.submit(batch(b'A', 20_000)).await.unwrap();
    let fits = other.submit(batch(b'o', 100)).await.unwrap();
    drop(stalled);
    assert!(matches!(
        refused.durable().await,
        Err(AppendError::Full { .. })
    ));
    assert!(fits.durable().await.is_ok());
    wal.close().await;
}
