//! ENOSPC on a small tmpfs: the log poisons cleanly, nothing panics, nothing acknowledged
//! is lost. Needs root and permission to mount; otherwise it says so and returns.

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
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    status.success().then(|| Mount(dir.to_owned()))
}

fn config(dir: &Path) -> WalConfig {
    WalConfig::builder(dir)
        .max_disk(1 << 30) // far above the filesystem: the disk fills first
        .segment_bytes(1 << 20)
        .on_full(OnFull::Reject)
        .cursor("sink", CursorConfig::default())
        .build()
        .unwrap()
}

const SIZE: usize = 8000;

#[tokio::test]
async fn enospc_poisons_the_log_and_keeps_every_acknowledged_record() {
    let outer = tempfile::tempdir().unwrap();
    let Some(_mount) = mount_small_tmpfs(outer.path()) else {
        eprintln!(
            "SKIPPED disk-full test: cannot mount a tmpfs here (needs root and mount permission)"
        );
        return;
    };
    let dir = outer.path().join("wal");
    let (wal, _) = Wal::open(config(&dir)).unwrap();
    let mut acked = 0u64;
    let err = loop {
        match wal.append(numbered(acked, 8, SIZE)).await {
            Ok(r) => {
                assert_eq!(r, acked..acked + 8);
                acked += 8;
                assert!(acked < 10_000, "a 4 MiB filesystem never filled");
            }
            Err(e) => break e,
        }
    };
    // The batch being written when the disk filled may be partly on disk: in doubt.
    let AppendError::InDoubt { cause } = &err else {
        panic!("expected InDoubt, got {err:?}");
    };
    assert!(
        cause.contains("os error 28") || cause.contains("space"),
        "{cause}"
    );
    assert!(wal.is_poisoned());
    assert_eq!(wal.stats().poisoned.as_deref(), Some(cause.as_str()));
    // Every later append fails the same way, even a tiny one: no retry, no pretending.
    match wal.append(numbered(acked, 1, 1)).await {
        Err(AppendError::Poisoned { .. }) => {}
        other => panic!("expected Poisoned, got {other:?}"),
    }
    assert_eq!(wal.durable_end(), acked);
    wal.close().await;

    // Reopen on the still-full filesystem: the torn tail is cut, everything acknowledged
    // is there and intact.
    let (wal, report) = Wal::open(config(&dir)).unwrap();
    assert!(report.durable_end >= acked, "{report}");
    let mut reader = wal.reader("sink").unwrap();
    let mut next = 0;
    while next < acked {
        let b = reader.try_read(ReadLimits::default()).await.unwrap();
        assert!(b.gap.is_none());
        assert!(!b.records.is_empty(), "record {next} missing");
        for r in &b.records {
            assert_eq!(r.offset, next);
            assert_eq!(r.payload, payload_for(next, SIZE));
            next += 1;
        }
    }
}
