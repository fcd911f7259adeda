//! A full disk on a small tmpfs (16 MiB, far below `max_disk`): the filesystem's free
//! space is a second budget, so `on_full` applies (refuse, wait) instead of a write
//! failing and poisoning the log; appends resume once space returns; nothing
//! acknowledged is lost. Needs root and permission to mount; otherwise it says so and
//! returns.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{numbered, payload_for};
use weir_wal::{AppendError, CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

/// Unmounts the tmpfs when dropped.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn mount_small_tmpfs(dir: &Path) -> Option<Mount> {
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
        .arg(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    status.success().then(|| Mount(dir.to_owned()))
}

fn config(dir: &Path, on_full: OnFull) -> WalConfig {
    WalConfig::builder(dir)
        .max_disk(1 << 30) // far above the filesystem: the disk fills first
        .segment_bytes(1 << 20)
        .on_full(on_full)
        .cursor("sink", CursorConfig::default())
        .build()
        .unwrap()
}

const SIZE: usize = 8000;

/// Reads every record from the cursor's position to the durable end, checks each one,
/// and commits past them (retention may then delete sealed segments).
async fn read_check_commit(wal: &Wal, from: u64) -> u64 {
    let mut reader = wal.reader("sink").unwrap();
    let mut next = from;
    while next < wal.durable_end() {
        let b = reader.try_read(ReadLimits::default()).await.unwrap();
        assert!(b.gap.is_none());
        assert!(!b.records.is_empty(), "record {next} missing");
        for r in &b.records {
            assert_eq!(r.offset, next);
            assert_eq!(r.payload, payload_for(next, SIZE));
            next += 1;
        }
        reader.commit(next).await.unwrap();
    }
    next
}

/// `reject`: once the filesystem (16 MiB, far below max_disk) has no room above the
/// WAL's reserve, appends are refused with `NoSpace` before anything is written: the log
/// is not poisoned, nothing acknowledged is lost, and once the sink has read and
/// committed, retention frees room and appends go on by themselves.
#[tokio::test]
async fn a_full_disk_refuses_under_reject_and_resumes_when_space_returns() {
    let outer = tempfile::tempdir().unwrap();
    let Some(_mount) = mount_small_tmpfs(outer.path()) else {
        eprintln!(
            "SKIPPED disk-full test: cannot mount a tmpfs here (needs root and mount permission)"
        );
        return;
    };
    let dir = outer.path().join("wal");
    let (wal, _) = Wal::open(config(&dir, OnFull::Reject)).unwrap();
    let mut acked = 0u64;
    let err = loop {
        match wal.append(numbered(acked, 8, SIZE)).await {
            Ok(r) => {
                assert_eq!(r, acked..acked + 8);
                acked += 8;
                assert!(acked < 10_000, "a 16 MiB filesystem never filled");
            }
            Err(e) => break e,
        }
    };
    let AppendError::NoSpace { batch, needed, .. } = err else {
        panic!("expected NoSpace, got {err:?}");
    };
    assert_eq!(batch.len(), 8, "the refused batch is handed back");
    assert!(needed > 0);
    assert!(
        !wal.is_poisoned(),
        "a full disk is a refusal, not a failure"
    );
    let stats = wal.stats();
    assert!(stats.fs_full_events >= 1, "{stats:?}");
    assert!(stats.fs_room_bytes.is_some_and(|r| r < needed), "{stats:?}");
    assert_eq!(wal.durable_end(), acked);
    // Still refused while nothing frees room.
    assert!(matches!(
        wal.append(numbered(acked, 8, SIZE)).await,
        Err(AppendError::NoSpace { .. })
    ));

    // The sink catches up: retention deletes the sealed segments, appends go on.
    assert_eq!(read_check_commit(&wal, 0).await, acked);
    let r = wal
        .append(numbered(acked, 8, SIZE))
        .await
        .expect("appends resume once space returns");
    assert_eq!(r, acked..acked + 8);
    acked += 8;
    wal.close().await;

    // Reopened: every acknowledged record not yet committed is there and intact.
    let (wal, report) = Wal::open(config(&dir, OnFull::Reject)).unwrap();
    assert_eq!(report.durable_end, acked, "{report}");
    assert_eq!(read_check_commit(&wal, acked - 8).await, acked);
    wal.close().await;
}

/// `block`: at a full disk the append waits (the writer re-checks the filesystem), and
/// completes once the sink's commit lets retention free room. Nothing is poisoned.
#[tokio::test]
async fn a_full_disk_blocks_under_block_until_retention_frees_room() {
    let outer = tempfile::tempdir().unwrap();
    let Some(_mount) = mount_small_tmpfs(outer.path()) else {
        eprintln!(
            "SKIPPED disk-full test: cannot mount a tmpfs here (needs root and mount permission)"
        );
        return;
    };
    let dir = outer.path().join("wal");
    let (wal, _) = Wal::open(config(&dir, OnFull::Block)).unwrap();
    let mut acked = 0u64;
    let mut waiting = loop {
        let mut append = {
            let wal = wal.clone();
            let batch = numbered(acked, 8, SIZE);
            tokio::spawn(async move { wal.append(batch).await })
        };
        match tokio::time::timeout(std::time::Duration::from_millis(500), &mut append).await {
            Ok(done) => {
                assert_eq!(done.unwrap().unwrap(), acked..acked + 8);
                acked += 8;
                assert!(acked < 10_000, "a 16 MiB filesystem never filled");
            }
            Err(_) => break append,
        }
    };
    assert!(!wal.is_poisoned());
    assert!(wal.stats().fs_full_events >= 1);
    assert_eq!(wal.durable_end(), acked, "the waiting batch is not written");
    // The sink reads and commits: retention frees room and the waiting batch goes in
    // (the read may already see it: it carries the next numbers).
    assert!(read_check_commit(&wal, 0).await >= acked);
    let r = tokio::time::timeout(std::time::Duration::from_secs(10), &mut waiting)
        .await
        .expect("the waiting append completes once retention frees room")
        .unwrap()
        .unwrap();
    assert_eq!(r, acked..acked + 8);
    assert!(!wal.is_poisoned());
    wal.close().await;
}
