//! The offline cursor tools (`weir wal cursors`): each cursor's lag as the open WAL
//! counts it, and removing or renaming a cursor file only under the directory's lock.

use std::path::Path;

use weir_wal::tools::{self, ToolError};
use weir_wal::{Batch, CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

fn config(dir: &Path, cursors: &[&str]) -> WalConfig {
    let mut builder = WalConfig::builder(dir)
        .max_disk(1 << 20)
        .segment_bytes(2048)
        .on_full(OnFull::Block);
    for name in cursors {
        builder = builder.cursor(*name, CursorConfig::default());
    }
    builder.build().unwrap()
}

/// A WAL in `dir` with 40 one-record batches of 100-byte payloads over several
/// segments, and the cursors `a` at 10, `b` at 40 (the end) and `c` at 17 (inside a
/// segment). Returns what the open WAL counts behind each.
async fn wal(dir: &Path) -> Vec<u64> {
    let (wal, _) = Wal::open(config(dir, &["a", "b", "c"])).unwrap();
    for _ in 0..40 {
        let mut batch = Batch::new();
        batch.push(&[7u8; 100]).unwrap();
        wal.append(batch).await.unwrap();
    }
    let mut counted = Vec::new();
    for (name, to) in [("a", 10), ("b", 40), ("c", 17)] {
        let mut reader = wal.reader(name).unwrap();
        let limits = ReadLimits {
            max_records: to,
            max_bytes: 1 << 20,
        };
        let read = reader.read(limits).await.unwrap();
        reader.commit(read.next_offset()).await.unwrap();
        counted.push(wal.bytes_since(to as u64));
    }
    wal.close().await;
    counted
}

#[tokio::test]
async fn cursors_are_listed_with_the_lag_the_wal_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let counted = wal(tmp.path()).await;
    let report = tools::cursors(tmp.path()).unwrap();
    assert_eq!((report.start, report.end), (0, 40));
    assert!(!report.in_use);
    let lag = |name: &str, offset: u64, records: u64, bytes: u64| tools::CursorLag {
        name: name.to_owned(),
        offset: Some(offset),
        lag_records: Some(records),
        lag_bytes: Some(bytes),
    };
    assert_eq!(
        report.cursors,
        [
            lag("a", 10, 30, counted[0]),
            lag("b", 40, 0, counted[1]),
            lag("c", 17, 23, counted[2]),
        ]
    );
    // Each record: a 24-byte batch mark, a 16-byte frame header, 100 bytes.
    assert_eq!(counted[0], 30 * 140);

    // A cursor older than the first segment is behind every byte on disk.
    let mut segments: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    segments.sort();
    assert!(segments.len() > 2, "{segments:?}");
    std::fs::remove_file(&segments[0]).unwrap();
    let on_disk: u64 = segments[1..]
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len() - 40)
        .sum();
    let report = tools::cursors(tmp.path()).unwrap();
    assert!(report.start > 10, "{report:?}");
    assert_eq!(report.cursors[0].lag_bytes, Some(on_disk));
}

#[tokio::test]
async fn a_cursor_is_removed_or_renamed_only_under_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    wal(tmp.path()).await;
    let lock = tools::lock(tmp.path()).unwrap();
    // A second holder (a daemon) is refused while the first holds it.
    assert!(matches!(
        Wal::open(config(tmp.path(), &[])),
        Err(weir_wal::OpenError::Locked { .. })
    ));
    assert!(matches!(tools::lock(tmp.path()), Err(ToolError::Locked(_))));
    assert!(matches!(
        lock.rename_cursor("a", "b"),
        Err(ToolError::CursorExists { .. })
    ));
    lock.rename_cursor("a", "d").unwrap();
    assert_eq!(tools::cursor_names(tmp.path()).unwrap(), ["b", "c", "d"]);
    assert_eq!(lock.remove_cursor("d").unwrap(), Some(10));
    match lock.remove_cursor("d") {
        Err(e @ ToolError::NoCursor { .. }) => {
            assert!(e.to_string().contains("cursors there: b, c"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        lock.remove_cursor("../b"),
        Err(ToolError::BadName(_))
    ));
    drop(lock);
    assert_eq!(tools::cursor_names(tmp.path()).unwrap(), ["b", "c"]);

    // While the WAL is open, the lock is refused.
    let (wal, _) = Wal::open(config(tmp.path(), &["b", "c"])).unwrap();
    assert!(matches!(tools::lock(tmp.path()), Err(ToolError::Locked(_))));
    wal.close().await;
}
