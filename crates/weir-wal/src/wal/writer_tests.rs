//! The writer's tests, through a whole `Wal`. A write that fails for want of space in
//! the middle of a segment (injected: half of the batch reaches the file, then ENOSPC)
//! is cut back and taken off the books: no offset is used up, nothing torn stays in the
//! file, and the log is not poisoned.

use std::sync::Arc;
use std::time::Duration;

use crate::error::AppendError;
use crate::faults::{FaultPlan, IoStep};
use crate::{Batch, CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

const ENOSPC: i32 = 28;

fn batch(tag: u8) -> Batch {
    let mut b = Batch::new();
    for _ in 0..4 {
        b.push(&[tag; 500]).unwrap();
    }
    b
}

fn config(dir: &std::path::Path, on_full: OnFull) -> WalConfig {
    WalConfig::builder(dir)
        .max_disk(16 << 20)
        .segment_bytes(1 << 20)
        .on_full(on_full)
        .cursor("sink", CursorConfig::default())
        .build()
        .unwrap()
}

/// A log whose writes fail as `plan` says.
fn open_with_plan(dir: &std::path::Path, on_full: OnFull) -> (Wal, Arc<FaultPlan>) {
    let plan = Arc::new(FaultPlan::new());
    let mut config = config(dir, on_full);
    config.faults = Some(plan.clone());
    (Wal::open(config).unwrap().0, plan)
}

/// Every record's first byte, in order, after reopening (and what recovery cut).
async fn reopen_tags(dir: &std::path::Path) -> (Vec<u8>, u64) {
    let (wal, report) = Wal::open(config(dir, OnFull::Block)).unwrap();
    let mut reader = wal.reader("sink").unwrap();
    let mut tags = Vec::new();
    while reader.position() < wal.durable_end() {
        let read = reader.read(ReadLimits::default()).await.unwrap();
        tags.extend(read.records.iter().map(|r| r.payload[0]));
    }
    drop(reader);
    wal.close().await;
    (tags, report.truncated_bytes)
}

#[tokio::test]
async fn enospc_mid_write_under_reject_refuses_and_uses_no_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, plan) = open_with_plan(dir.path(), OnFull::Reject);
    assert_eq!(wal.append(batch(b'a')).await.unwrap(), 0..4);
    plan.arm(IoStep::Write, ENOSPC);
    let refused = wal.append(batch(b'x')).await;
    let Err(AppendError::NoSpace { batch: back, .. }) = refused else {
        panic!("expected NoSpace, got {refused:?}");
    };
    assert_eq!(back.len(), 4, "handed back");
    assert!(!wal.is_poisoned());
    assert_eq!(wal.stats().resource_refusals, 1);
    assert_eq!(wal.stats().appended_records, 4, "taken off the books");
    // The next append gets the offsets the refused one would have had.
    assert_eq!(wal.append(batch(b'b')).await.unwrap(), 4..8);
    wal.close().await;
    let (tags, cut) = reopen_tags(dir.path()).await;
    assert_eq!(tags, b"aaaabbbb");
    assert_eq!(cut, 0, "nothing torn was left in the file");
}

#[tokio::test]
async fn enospc_mid_write_under_block_waits_and_writes_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, plan) = open_with_plan(dir.path(), OnFull::Block);
    assert_eq!(wal.append(batch(b'a')).await.unwrap(), 0..4);
    plan.arm(IoStep::Write, ENOSPC);
    // Written again once the writer looks again (the disk here has room).
    let r = tokio::time::timeout(Duration::from_secs(10), wal.append(batch(b'x')))
        .await
        .expect("written again after the recheck")
        .unwrap();
    assert_eq!(r, 4..8);
    assert!(!wal.is_poisoned());
    assert_eq!(wal.stats().resource_refusals, 1);
    assert_eq!(wal.append(batch(b'b')).await.unwrap(), 8..12);
    wal.close().await;
    let (tags, cut) = reopen_tags(dir.path()).await;
    assert_eq!(tags, b"aaaaxxxxbbbb");
    assert_eq!(cut, 0);
}

/// Any other write error still poisons: the disk may be failing.
#[tokio::test]
async fn eio_mid_write_still_poisons() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, plan) = open_with_plan(dir.path(), OnFull::Block);
    wal.append(batch(b'a')).await.unwrap();
    plan.arm(IoStep::Write, 5);
    let failed = wal.append(batch(b'x')).await;
    assert!(failed.is_err());
    assert!(wal.is_poisoned());
    wal.close().await;
}
