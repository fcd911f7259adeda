//! Dropping the last handle never waits for the writer thread.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::Duration;

use crate::error::OpenError;
use crate::{Batch, CursorConfig, OnFull, Wal, WalConfig};

fn config(dir: &std::path::Path) -> WalConfig {
    WalConfig::builder(dir)
        .max_disk(1 << 20)
        .segment_bytes(64 << 10)
        .on_full(OnFull::Block)
        .cursor("sink", CursorConfig::default())
        .build()
        .unwrap()
}

/// The writer is stalled in the middle of a batch (the test holds the lock it needs)
/// while the last `Wal` is dropped on a `current_thread` runtime: the drop returns
/// anyway. A drop that joined the writer would wait for as long as the stall lasts
/// (here: forever, until the watchdog gives the lock back). The writer then finishes the
/// batch in the background and releases the directory lock when it exits.
#[test]
fn dropping_the_last_handle_on_a_runtime_thread_does_not_wait_for_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(config(dir.path())).unwrap();
    let shared = Arc::clone(&wal.inner.shared);
    let mut durable = shared.durable.subscribe();
    let stalled = shared.core();
    let (dropped_tx, dropped_rx) = std::sync::mpsc::channel();
    let runtime_thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            {
                // Hand a batch to the writer, then stop waiting for its answer.
                let mut batch = Batch::new();
                batch.push(b"in flight").unwrap();
                let mut append = pin!(wal.append(batch));
                let mut cx = Context::from_waker(Waker::noop());
                assert!(append.as_mut().poll(&mut cx).is_pending());
            }
            drop(wal);
        });
        dropped_tx.send(()).unwrap();
    });
    let returned = dropped_rx.recv_timeout(Duration::from_secs(10)).is_ok();
    drop(stalled);
    runtime_thread.join().unwrap();
    assert!(
        returned,
        "dropping the last Wal waited for the writer thread"
    );

    // In the background the writer writes and fsyncs the batch it was handed, exits and
    // unlocks the directory.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), durable.wait_for(|end| *end == 1))
            .await
            .expect("the writer finished its queue after the drop")
            .unwrap();
    });
    let reopened = (0..1000).find_map(|_| match Wal::open(config(dir.path())) {
        Err(OpenError::Locked { .. }) => {
            std::thread::sleep(Duration::from_millis(10));
            None
        }
        other => Some(other.unwrap()),
    });
    let (wal, report) = reopened.expect("the detached writer exited and unlocked");
    assert_eq!(report.durable_end, 1);
    runtime.block_on(wal.close());
}

/// `close` waits for the writer: the directory can be opened again at once.
#[tokio::test]
async fn close_waits_for_the_writer_and_unlocks_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(config(dir.path())).unwrap();
    let mut batch = Batch::new();
    batch.push(b"x").unwrap();
    wal.append(batch).await.unwrap();
    wal.close().await;
    let (wal, report) = Wal::open(config(dir.path())).unwrap();
    assert_eq!(report.durable_end, 1);
    wal.close().await;
}

/// The writer's time in fsyncs and in writes is counted, and within the wall time.
#[tokio::test]
async fn time_in_fsyncs_and_writes_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(config(dir.path())).unwrap();
    let started = std::time::Instant::now();
    for _ in 0..20 {
        let mut batch = Batch::new();
        batch.push(&[7u8; 1000]).unwrap();
        wal.append(batch).await.unwrap();
    }
    let wall_us = u64::try_from(started.elapsed().as_micros()).unwrap();
    let s = wal.stats();
    assert!(s.fsyncs >= 20, "{s:?}");
    assert!(s.fsync_time_us >= s.fsyncs, "at least 1 µs each: {s:?}");
    assert!(
        s.fsync_time_us + s.write_time_us <= wall_us,
        "{s:?} in {wall_us} µs"
    );
    wal.close().await;
}
