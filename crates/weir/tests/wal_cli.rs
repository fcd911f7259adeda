//! End to end: `weir wal inspect` and `weir wal verify` on a real WAL directory.

use std::process::Command;

use weir_wal::{Batch, CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

fn weir(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn inspect_and_verify_report_segments_cursors_and_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig::builder(dir.path())
        .max_disk(1 << 20)
        .segment_bytes(2048)
        .on_full(OnFull::Block)
        .cursor("lake", CursorConfig::default())
        .build()
        .unwrap();
    let (wal, _) = Wal::open(config).unwrap();
    for i in 0..50u32 {
        let mut b = Batch::new();
        b.push(format!("record {i:04} with some padding").as_bytes())
            .unwrap();
        wal.append(b).await.unwrap();
    }
    let mut reader = wal.reader("lake").unwrap();
    let read = reader
        .read(ReadLimits {
            max_records: 20,
            max_bytes: 1 << 20,
        })
        .await
        .unwrap();
    reader.commit(read.next_offset()).await.unwrap();
    drop(reader);
    wal.close().await;

    let d = dir.path().as_os_str();
    let (code, out, err) = weir(&["wal".as_ref(), "inspect".as_ref(), d]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("offsets 0..50 (50 records)"), "{out}");
    assert!(
        out.contains("cursor lake") && out.contains("lag 30 records"),
        "{out}"
    );
    assert!(out.contains("00000000000000000000.seg"), "{out}");

    let (code, out, _) = weir(&["wal".as_ref(), "verify".as_ref(), d]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("ok:") && out.contains("50 records"),
        "{out}"
    );

    // Damage one record of the first segment: verify names the segment and offset.
    let seg = dir.path().join("00000000000000000000.seg");
    let mut bytes = std::fs::read(&seg).unwrap();
    // Each one-record batch: its 24-byte mark, then the frame (16-byte header + payload).
    let mark = weir_wal::format::MARK_LEN as usize;
    let batch = mark + 16 + "record 0000 with some padding".len();
    bytes[40 + 2 * batch + mark + 20] ^= 1;
    std::fs::write(&seg, &bytes).unwrap();
    let (code, out, _) = weir(&["wal".as_ref(), "verify".as_ref(), d]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("CORRUPT") && out.contains("00000000000000000000.seg"),
        "{out}"
    );
    assert!(out.contains("offset 2 "), "{out}");
    // Read-only: the damaged file is untouched.
    assert_eq!(std::fs::read(&seg).unwrap(), bytes);

    let missing = dir.path().join("nope");
    let (code, _, err) = weir(&["wal".as_ref(), "verify".as_ref(), missing.as_os_str()]);
    assert_ne!(code, 0);
    assert!(err.contains("nope"), "{err}");
}

/// `weir wal verify DIR | head -1`: a closed stdout ends the output quietly (no
/// "failed printing to stdout" panic, exit 101); the exit status stays verify's own.
#[tokio::test]
async fn a_closed_stdout_ends_the_output_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig::builder(dir.path())
        .max_disk(1 << 20)
        .segment_bytes(2048)
        .on_full(OnFull::Block)
        .build()
        .unwrap();
    let (wal, _) = Wal::open(config).unwrap();
    for i in 0..50u32 {
        let mut b = Batch::new();
        b.push(format!("record {i:04}").as_bytes()).unwrap();
        wal.append(b).await.unwrap();
    }
    wal.close().await;

    for command in ["verify", "inspect"] {
        // The reader is gone before weir writes: its first write fails with EPIPE.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["wal".as_ref(), command.as_ref(), dir.path().as_os_str()])
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "wal {command}: {stderr}");
        assert!(stderr.is_empty(), "wal {command}: {stderr}");
    }
}
