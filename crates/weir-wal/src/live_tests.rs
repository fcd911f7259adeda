//! Live changes: the budget, cursors added, changed and detached while the log runs.

use std::time::Duration;

use crate::{
    AppendError, Batch, CursorConfig, LiveError, MaxLag, OnFull, ReadLimits, StartFrom, Wal,
    WalConfig,
};

const SEGMENT: u64 = 16 << 10;

fn open(dir: &std::path::Path, max_disk: u64, on_full: OnFull, cursors: &[&str]) -> Wal {
    let mut builder = WalConfig::builder(dir)
        .max_disk(max_disk)
        .segment_bytes(SEGMENT)
        .on_full(on_full);
    for name in cursors {
        builder = builder.cursor(*name, CursorConfig::default());
    }
    Wal::open(builder.build().unwrap()).unwrap().0
}

fn batch(bytes: usize) -> Batch {
    let mut b = Batch::new();
    b.push(&vec![b'x'; bytes]).unwrap();
    b
}

/// Appends 4 KiB batches until one would have to wait; returns how many went in.
async fn fill(wal: &Wal) -> u64 {
    let mut n = 0;
    while !wal.would_block(4200) {
        wal.append(batch(4096)).await.unwrap();
        n += 1;
        assert!(n < 10_000, "the budget never filled");
    }
    n
}

/// An append waiting for room under `block` goes in once the budget is raised, and the
/// new budget is what `stats` and `max_disk` report.
#[tokio::test]
async fn a_raised_budget_lets_a_waiting_append_in() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), 4 * SEGMENT, OnFull::Block, &["lake"]);
    fill(&wal).await;
    let waiting = tokio::spawn({
        let wal = wal.clone();
        async move { wal.append(batch(4096)).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "the append should wait for room");
    wal.set_budget(16 * SEGMENT, OnFull::Block).unwrap();
    let range = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the raised budget let the append in")
        .unwrap()
        .unwrap();
    assert_eq!(range.end - range.start, 1);
    assert_eq!(wal.max_disk(), 16 * SEGMENT);
    assert_eq!(wal.stats().max_disk, 16 * SEGMENT);
    wal.close().await;
}

/// `on_full` changes live: a full log under `block` refuses at once after a switch to
/// `reject`.
#[tokio::test]
async fn on_full_changes_live() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), 4 * SEGMENT, OnFull::Block, &["lake"]);
    fill(&wal).await;
    wal.set_budget(4 * SEGMENT, OnFull::Reject).unwrap();
    let refused = tokio::time::timeout(Duration::from_secs(10), wal.append(batch(4096)))
        .await
        .expect("reject answers at once");
    assert!(
        matches!(refused, Err(AppendError::Full { .. })),
        "{refused:?}"
    );
    assert_eq!(wal.stats().on_full, OnFull::Reject);
    wal.close().await;
}

/// A budget below two segments is refused and changes nothing.
#[tokio::test]
async fn a_budget_below_two_segments_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), 4 * SEGMENT, OnFull::Block, &["lake"]);
    let err = wal.set_budget(SEGMENT, OnFull::Block).unwrap_err();
    assert!(matches!(err, LiveError::BudgetTooSmall { .. }), "{err}");
    assert!(err.to_string().contains("max_disk"), "{err}");
    assert_eq!(wal.max_disk(), 4 * SEGMENT);
    wal.close().await;
}

/// A cursor added while the log runs starts where `start_from` says, or where its
/// saved file says; it is reported and read like one declared at open.
#[tokio::test]
async fn an_added_cursor_starts_at_its_saved_position_or_start_from() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), 64 * SEGMENT, OnFull::Block, &["lake"]);
    for _ in 0..10 {
        wal.append(batch(100)).await.unwrap();
    }
    // A saved position from an earlier run: commit 4 through a cursor, then detach it.
    wal.add_cursor("old", CursorConfig::default()).unwrap();
    {
        let mut reader = wal.reader("old").unwrap();
        let read = reader
            .read(ReadLimits {
                max_records: 4,
                max_bytes: 1 << 20,
            })
            .await
            .unwrap();
        reader.commit(read.next_offset()).await.unwrap();
    }
    wal.detach_cursor("old").unwrap();
    assert!(wal.stats().cursors.iter().all(|c| c.name != "old"));
    assert!(
        wal.reader("old").is_err(),
        "a detached cursor has no reader"
    );

    let latest = CursorConfig {
        start_from: StartFrom::Latest,
        ..CursorConfig::default()
    };
    wal.add_cursor("new", latest).unwrap();
    wal.add_cursor("early", CursorConfig::default()).unwrap();
    wal.add_cursor("old", CursorConfig::default()).unwrap();
    let committed = |name: &str| {
        wal.stats()
            .cursors
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.committed)
    };
    assert_eq!(committed("new"), Some(10));
    assert_eq!(committed("early"), Some(0));
    assert_eq!(committed("old"), Some(4), "taken back where it stopped");
    let mut reader = wal.reader("old").unwrap();
    let read = reader.read(ReadLimits::default()).await.unwrap();
    assert_eq!(read.records.first().map(|r| r.offset), Some(4));
    drop(reader);
    wal.close().await;

    // The same file serves a cursor added after a restart.
    let wal = open(dir.path(), 64 * SEGMENT, OnFull::Block, &["lake"]);
    wal.add_cursor("old", CursorConfig::default()).unwrap();
    assert_eq!(
        wal.stats()
            .cursors
            .iter()
            .find(|c| c.name == "old")
            .map(|c| c.committed),
        Some(4)
    );
    assert!(matches!(
        wal.add_cursor("../x", CursorConfig::default()),
        Err(LiveError::BadName(_))
    ));
    wal.close().await;
}

/// A detached cursor stops holding retention: an append waiting for the room it held
/// goes in.
#[tokio::test]
async fn a_detached_cursor_no_longer_holds_retention() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), 4 * SEGMENT, OnFull::Block, &["gone"]);
    fill(&wal).await;
    let waiting = tokio::spawn({
        let wal = wal.clone();
        async move { wal.append(batch(4096)).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiting.is_finished(),
        "cursor `gone` at 0 holds every segment"
    );
    wal.detach_cursor("gone").unwrap();
    tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("retention ran once the cursor was detached")
        .unwrap()
        .unwrap();
    assert!(wal.stats().retention_deleted_segments > 0);
    assert!(matches!(
        wal.detach_cursor("gone"),
        Err(LiveError::Unknown(_))
    ));
    wal.close().await;
}

/// A `max_lag` set live releases a cursor that is too far behind, and retention goes
/// on without it.
#[tokio::test]
async fn max_lag_set_live_releases_a_lagging_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), 4 * SEGMENT, OnFull::Block, &["slow"]);
    fill(&wal).await;
    let lagging = CursorConfig {
        max_lag: MaxLag {
            bytes: Some(SEGMENT),
            age: None,
        },
        ..CursorConfig::default()
    };
    wal.set_cursor("slow", lagging).unwrap();
    tokio::time::timeout(Duration::from_secs(10), wal.append(batch(4096)))
        .await
        .expect("the released cursor no longer holds the budget")
        .unwrap();
    let slow = wal
        .stats()
        .cursors
        .into_iter()
        .find(|c| c.name == "slow")
        .unwrap();
    assert!(slow.released && slow.releases == 1, "{slow:?}");
    assert!(matches!(
        wal.set_cursor("nope", CursorConfig::default()),
        Err(LiveError::Unknown(_))
    ));
    wal.close().await;
}
