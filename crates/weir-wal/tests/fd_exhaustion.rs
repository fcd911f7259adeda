//! Out of file descriptors (EMFILE) when the writer opens its next segment: appends are
//! refused (`reject`) or wait (`block`), the log is not poisoned, and it goes on by
//! itself once descriptors are available again. Each test lowers its process's
//! `RLIMIT_NOFILE`, which is process-wide, and counts the descriptors open: so each runs
//! its body in a process of its own (the test binary run again for that one test),
//! whichever runner started it (`cargo test` shares one process between tests).

mod common;

use std::time::Duration;

use common::numbered;
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use weir_wal::{AppendError, CursorConfig, OnFull, Wal, WalConfig};

/// Set in the process [`in_own_process`] starts.
const CHILD: &str = "WEIR_WAL_FD_TEST_CHILD";

/// Runs `body` on a tokio runtime in a process of its own: this test binary again, with
/// only the test `name`. In that process, runs it.
fn in_own_process<F: Future<Output = ()>>(name: &str, body: impl FnOnce() -> F) {
    if std::env::var_os(CHILD).is_some() {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(body());
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{name} failed in its own process:\n{text}"
    );
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
}

fn open(dir: &std::path::Path, on_full: OnFull) -> Wal {
    let config = WalConfig::builder(dir)
        .max_disk(64 << 20)
        .segment_bytes(64 << 10)
        .on_full(on_full)
        .cursor("sink", CursorConfig::default())
        .build()
        .unwrap();
    Wal::open(config).unwrap().0
}

fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

/// Sets the soft fd limit so that no descriptor beyond those open now can be opened;
/// returns the limit to put back.
fn exhaust_fds() -> Rlimit {
    let before = getrlimit(Resource::Nofile);
    // read_dir above held one more descriptor while counting.
    let now = open_fds() - 1;
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(now),
            maximum: before.maximum,
        },
    )
    .unwrap();
    before
}

/// Appends batches of 8 × 8000 B until one lands in a new segment (rotation).
const SIZE: usize = 8000;

#[test]
fn no_descriptor_for_the_next_segment_is_a_refusal_under_reject_not_a_poison() {
    in_own_process(
        "no_descriptor_for_the_next_segment_is_a_refusal_under_reject_not_a_poison",
        refusal_under_reject,
    );
}

async fn refusal_under_reject() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), OnFull::Reject);
    // Fill the first segment (64 KiB) almost: the next batch must rotate.
    let mut acked = 0;
    for _ in 0..7 {
        wal.append(numbered(acked, 1, SIZE)).await.unwrap();
        acked += 1;
    }
    let limit = exhaust_fds();
    let refused = loop {
        match wal.append(numbered(acked, 1, SIZE)).await {
            Ok(_) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 64, "never rotated");
    };
    let AppendError::Resource { batch, cause } = refused else {
        setrlimit(Resource::Nofile, limit).unwrap();
        panic!("expected a Resource refusal, got {refused:?}");
    };
    assert!(cause.contains("os error 24"), "{cause}");
    assert!(
        !wal.is_poisoned(),
        "out of descriptors is a refusal, not a failure"
    );
    assert_eq!(wal.stats().resource_refusals, 1);
    setrlimit(Resource::Nofile, limit).unwrap();
    let r = wal
        .append(batch)
        .await
        .expect("goes on once descriptors are back");
    assert_eq!(r, acked..acked + 1);
    assert!(wal.stats().segments >= 2, "the next segment was opened");
    wal.close().await;
}

#[test]
fn no_descriptor_for_the_next_segment_makes_appends_wait_under_block() {
    in_own_process(
        "no_descriptor_for_the_next_segment_makes_appends_wait_under_block",
        wait_under_block,
    );
}

async fn wait_under_block() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), OnFull::Block);
    let mut acked = 0;
    for _ in 0..8 {
        wal.append(numbered(acked, 1, SIZE)).await.unwrap();
        acked += 1;
    }
    let segments = wal.stats().segments;
    let limit = exhaust_fds();
    // Appends until one must rotate: it waits instead of failing.
    let mut waiting = loop {
        let mut append = {
            let wal = wal.clone();
            let batch = numbered(acked, 1, SIZE);
            tokio::spawn(async move { wal.append(batch).await })
        };
        match tokio::time::timeout(Duration::from_millis(500), &mut append).await {
            Ok(done) => {
                done.unwrap().unwrap();
                acked += 1;
                assert!(acked < 64, "never rotated");
            }
            Err(_) => break append,
        }
    };
    assert!(!wal.is_poisoned());
    assert_eq!(wal.stats().segments, segments, "no segment could be opened");
    setrlimit(Resource::Nofile, limit).unwrap();
    let r = tokio::time::timeout(Duration::from_secs(5), &mut waiting)
        .await
        .expect("the waiting append goes on once descriptors are back")
        .unwrap()
        .unwrap();
    assert_eq!(r, acked..acked + 1);
    assert!(wal.stats().resource_refusals >= 1);
    wal.close().await;
}
