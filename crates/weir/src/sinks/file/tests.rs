//! The file sink on a full disk (issue 16, item 9), with injected write failures: a
//! closed `.ndjson` file never ends in a torn line, and retries leave no empty files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::FileSinkConfig;
use super::core::{DONE_SUFFIX, OPEN_SUFFIX};
use super::shell::{Fault, FileSink};
use crate::pipeline::{Sink, SinkBatch};
use crate::record::Record;

fn config(dir: &Path) -> FileSinkConfig {
    FileSinkConfig {
        path: dir.join("out"),
        line: crate::record::Line::Envelope,
        rotate: crate::sinks::rotate::Rotate {
            bytes: crate::keys::ByteSize::new(1 << 20).unwrap(),
            age: None,
            max_wal_share: crate::sinks::rotate::DEFAULT_MAX_WAL_SHARE,
        },
    }
}

fn batch(from: u64, n: u64) -> Arc<SinkBatch> {
    let records = (from..from + n)
        .map(|i| Record {
            source: "g".into(),
            key: String::new(),
            timestamp_ms: 1,
            payload: Bytes::from(format!("{{\"i\":{i}}}")),
            attributes: Vec::new(),
        })
        .collect();
    Arc::new(SinkBatch {
        records,
        next_offset: from + n,
        bytes: 0,
        ..SinkBatch::default()
    })
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// Every closed file: non-empty, whole lines of JSON; the `i`s in order, once each.
fn delivered(dir: &Path) -> Vec<u64> {
    let mut seen = Vec::new();
    for path in files(dir) {
        let name = path.to_string_lossy().into_owned();
        assert!(name.ends_with(DONE_SUFFIX), "not closed: {name}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.is_empty(), "an empty file was left: {name}");
        assert!(text.ends_with('\n'), "{name} ends in a torn line: {text:?}");
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{name}: a torn line {line:?}: {e}"));
            seen.push(v["payload"]["i"].as_u64().unwrap());
        }
    }
    seen
}

#[tokio::test]
async fn a_write_cut_short_leaves_no_torn_line() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path());
    let mut sink = FileSink::open(&cfg).unwrap();
    sink.write(&batch(0, 5), &mut Vec::new()).await.unwrap();
    // The disk fills in the middle of the next batch's first line.
    sink.inject(Fault {
        failures: 1,
        accept_bytes: 10,
    });
    sink.write(&batch(5, 5), &mut Vec::new()).await.unwrap_err();
    // Space is back: the driver retries the same batch.
    sink.write(&batch(5, 5), &mut Vec::new()).await.unwrap();
    sink.write(&batch(10, 5), &mut Vec::new()).await.unwrap();
    sink.finish().await.unwrap();
    assert_eq!(delivered(&cfg.path), (0..15).collect::<Vec<_>>());
}

#[tokio::test]
async fn retries_on_a_full_disk_leave_no_empty_files() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path());
    let mut sink = FileSink::open(&cfg).unwrap();
    sink.write(&batch(0, 5), &mut Vec::new()).await.unwrap();
    // A long outage: every retry fails before a byte is written.
    sink.inject(Fault {
        failures: 20,
        accept_bytes: 0,
    });
    for _ in 0..20 {
        sink.write(&batch(5, 5), &mut Vec::new()).await.unwrap_err();
    }
    assert!(
        files(&cfg.path).len() <= 1,
        "retries left files behind: {:?}",
        files(&cfg.path)
    );
    sink.write(&batch(5, 5), &mut Vec::new()).await.unwrap();
    sink.finish().await.unwrap();
    assert_eq!(delivered(&cfg.path), (0..10).collect::<Vec<_>>());
    assert_eq!(files(&cfg.path).len(), 1, "{:?}", files(&cfg.path));
}

#[tokio::test]
async fn a_file_that_failed_before_its_first_line_is_not_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path());
    let mut sink = FileSink::open(&cfg).unwrap();
    sink.inject(Fault {
        failures: 1,
        accept_bytes: 0,
    });
    sink.write(&batch(0, 5), &mut Vec::new()).await.unwrap_err();
    sink.finish().await.unwrap();
    assert!(files(&cfg.path).is_empty(), "{:?}", files(&cfg.path));
    // An empty file left open by a crash is removed at open, not closed.
    std::fs::write(cfg.path.join(format!("x{OPEN_SUFFIX}")), b"").unwrap();
    let _sink = FileSink::open(&cfg).unwrap();
    assert!(files(&cfg.path).is_empty(), "{:?}", files(&cfg.path));
    // One torn by a crash is cut after its last whole line, then closed.
    std::fs::write(
        cfg.path.join(format!("y{OPEN_SUFFIX}")),
        b"{\"payload\":{\"i\":0}}\n{\"payload\":{\"i\":1",
    )
    .unwrap();
    let _sink = FileSink::open(&cfg).unwrap();
    assert_eq!(delivered(&cfg.path), [0]);
}
