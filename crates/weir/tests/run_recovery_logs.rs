//! `weir run` end to end: every loss at recovery is logged at WARN with what, where
//! and how many (issue 16, item 6). A quarantined segment used to be reported only in
//! an INFO count, with no path and no reason; a cursor reset was not logged at all.

mod run_support;

use std::net::SocketAddr;
use std::path::Path;

use run_support::{Daemon, free_addr, write_config};
use weir_wal::{Batch, CursorConfig, OnFull, Wal, WalConfig};

fn config(dir: &Path, status: SocketAddr) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
dir = "{wal}"
max_disk = "16 MiB"
segment_bytes = "1 MiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 1
batch_size = 1
size = 10

[sinks.out]
type = "blackhole"
inputs = ["gen"]
"#,
        data = dir.join("data").display(),
        wal = dir.join("wal").display(),
    )
}

#[tokio::test]
async fn a_quarantined_segment_and_a_reset_cursor_are_logged_at_warn() {
    let tmp = tempfile::tempdir().unwrap();
    let wal_dir = tmp.path().join("wal");
    // Three sealed segments and an active one; the cursor `out` commits nothing.
    let wal_config = WalConfig::builder(&wal_dir)
        .max_disk(1 << 20)
        .segment_bytes(2048)
        .on_full(OnFull::Block)
        .cursor("out", CursorConfig::default())
        .build()
        .unwrap();
    let (wal, _) = Wal::open(wal_config).unwrap();
    for i in 0..200u32 {
        let mut b = Batch::new();
        b.push(format!("record {i:04} with some padding").as_bytes())
            .unwrap();
        wal.append(b).await.unwrap();
    }
    wal.close().await;
    let mut segments: Vec<_> = std::fs::read_dir(&wal_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segments.sort();
    assert!(segments.len() >= 3, "{segments:?}");
    // Damage a sealed segment's magic, and replace the cursor file with junk.
    let damaged = &segments[1];
    let mut bytes = std::fs::read(damaged).unwrap();
    bytes[0..8].copy_from_slice(b"JUNKJUNK");
    std::fs::write(damaged, bytes).unwrap();
    std::fs::create_dir_all(wal_dir.join("cursors")).unwrap();
    std::fs::write(wal_dir.join("cursors/out.cursor"), b"not a cursor").unwrap();

    let status = free_addr();
    let path = write_config(tmp.path(), &config(tmp.path(), status));
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let stderr_path = daemon.stderr_path.clone();
    assert_eq!(daemon.stop(), Some(0));
    let stderr = std::fs::read_to_string(stderr_path).unwrap();

    let name = damaged.file_name().unwrap().to_string_lossy().into_owned();
    let quarantine = stderr
        .lines()
        .find(|l| l.contains("quarantined WAL segment"))
        .unwrap_or_else(|| panic!("no quarantine line:\n{stderr}"));
    assert!(quarantine.contains("WARN"), "{quarantine}");
    assert!(quarantine.contains(&name), "no path: {quarantine}");
    assert!(quarantine.contains("magic"), "no reason: {quarantine}");
    assert!(
        quarantine.contains("records (offsets "),
        "no count: {quarantine}"
    );

    let reset = stderr
        .lines()
        .find(|l| l.contains("WAL cursor out"))
        .unwrap_or_else(|| panic!("no cursor reset line:\n{stderr}"));
    assert!(reset.contains("WARN"), "{reset}");
    assert!(reset.contains("out.cursor"), "no path: {reset}");
    assert!(reset.contains("will be delivered again"), "{reset}");
}
