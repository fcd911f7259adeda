//! The tailer against real files in a temporary directory, stepped by hand.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Tailer;
use crate::keys::walk::parse_section;
use crate::record::Record;
use crate::sources::SourceKeys;
use crate::sources::file::chunk::{Builder, Chunk, Limits};
use crate::sources::file::config::FileSourceConfig;
use crate::sources::file::files::Ctx;
use crate::sources::file::format::Parser;
use crate::sources::file::positions::{Resume, Saved, Table};
use crate::sources::file::status::{FileState, Shared};

struct Harness {
    tailer: Tailer,
    chunks: Arc<Mutex<Vec<Chunk>>>,
    shared: Arc<Shared>,
    /// What the task would have saved, every chunk being durable.
    table: Table,
}

fn config(toml: &str) -> FileSourceConfig {
    let (config, errors) = parse_section("sources.tail", toml, FileSourceConfig::parse);
    assert!(errors.is_empty(), "{errors:?}");
    config.expect("valid")
}

fn harness(toml: &str, saved: Vec<Saved>) -> Harness {
    let config = config(toml);
    let shared = Arc::new(Shared::new(u64::from(config.max_open_files.get())));
    let limits = Limits {
        max_line_bytes: config.max_line_bytes.bytes() as usize,
        batch_records: u64::from(config.batch_size.get()),
        batch_bytes: config.batch_bytes.bytes(),
    };
    let builder = Builder::new(
        "tail".into(),
        "testhost".into(),
        Parser::new(&config.format),
        &limits,
        Arc::clone(&shared),
    );
    let now_ms = u64::try_from(crate::record::now_ms()).unwrap();
    let (table, unclaimed) = Table::load(saved, now_ms);
    let resume = Resume::new(unclaimed, None);
    let ctx = Ctx::new(
        &"tail".into(),
        &config,
        builder,
        Arc::clone(&shared),
        resume,
        table.next_id(),
    );
    let chunks = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&chunks);
    let tailer = Tailer::new(
        ctx,
        config.patterns(),
        Box::new(move |c| {
            sink.lock().unwrap().push(c);
            true
        }),
    );
    let mut h = Harness {
        tailer,
        chunks,
        shared,
        table,
    };
    h.tailer.startup();
    h
}

impl Harness {
    /// Steps until nothing is read for a while (and `extra` more).
    fn settle(&mut self, extra: Duration) {
        let mut quiet_since = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.tailer.step(Instant::now()) {
                quiet_since = Instant::now();
            } else if quiet_since.elapsed() > Duration::from_millis(300) + extra {
                return;
            } else {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        panic!("the tailer never settled");
    }

    /// Every record's payload so far (and applies positions to the table).
    fn payloads(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for chunk in self.chunks.lock().unwrap().drain(..) {
            for wire in chunk.batch.payloads() {
                let r = Record::decode_with(bytes::Bytes::from(wire), |s| s.into()).unwrap();
                out.push(String::from_utf8(r.payload.to_vec()).unwrap());
            }
            for f in &chunk.files {
                self.table.update(f);
            }
            for (id, p) in &chunk.positions {
                self.table.set_position(*id, *p);
            }
            for id in &chunk.released {
                self.table.release(*id, 1);
            }
        }
        out
    }

    fn saved(&mut self) -> Vec<Saved> {
        self.table
            .snapshot(2, u64::MAX, |id| self.shared.size(id))
            .0
    }
}

fn append(path: &std::path::Path, lines: std::ops::Range<u32>) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    for i in lines {
        writeln!(f, "{{\"n\":{i}}}").unwrap();
    }
}

fn numbers(payloads: &[String]) -> Vec<u32> {
    let mut n: Vec<u32> = payloads
        .iter()
        .map(|p| {
            serde_json::from_str::<serde_json::Value>(p).unwrap()["n"]
                .as_u64()
                .unwrap() as u32
        })
        .collect();
    n.sort_unstable();
    n
}

fn toml(dir: &std::path::Path, extra: &str) -> String {
    format!(
        "path = \"{}/*.log\"\nrotate_wait = \"200ms\"\nscan_interval = \"100ms\"\n{extra}",
        dir.display()
    )
}

#[test]
fn rename_rotation_reads_the_old_file_to_its_end_and_the_new_from_its_start() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("app.log");
    append(&log, 0..10);
    let mut h = harness(&toml(tmp.path(), ""), vec![]);
    h.settle(Duration::ZERO);
    // Written after the tailer's last read, then renamed away: still read.
    append(&log, 10..20);
    std::fs::rename(&log, tmp.path().join("app.log.1")).unwrap();
    append(&log, 20..30);
    h.settle(Duration::from_millis(300));
    assert_eq!(numbers(&h.payloads()), (0..30).collect::<Vec<_>>());
    let report = h.shared.report();
    assert_eq!(report.counters.rotations, 1);
    assert_eq!(report.counters.released, 1);
    let states: Vec<_> = report
        .files
        .iter()
        .map(|f| (f.path.rsplit('/').next().unwrap().to_owned(), f.state))
        .collect();
    assert!(
        states.contains(&("app.log".into(), FileState::Reading)),
        "{states:?}"
    );
    assert!(
        states.contains(&("app.log.1".into(), FileState::Released))
            || states.contains(&("app.log".into(), FileState::Released)),
        "{states:?}"
    );
}

#[test]
fn a_partial_line_waits_for_its_newline() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("app.log");
    std::fs::write(&log, "{\"n\":0}\n{\"n\":").unwrap();
    let mut h = harness(&toml(tmp.path(), ""), vec![]);
    h.settle(Duration::ZERO);
    assert_eq!(h.payloads(), ["{\"n\":0}"]);
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(b"1}\n").unwrap();
    h.settle(Duration::ZERO);
    assert_eq!(h.payloads(), ["{\"n\":1}"]);
    let saved = h.saved();
    assert_eq!(saved[0].position, 16);
}

#[test]
fn partial_flush_emits_a_quiet_partial_line() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("app.log"), "done\nhalf").unwrap();
    let mut h = harness(
        &toml(tmp.path(), "format = \"lines\"\npartial_flush = \"100ms\""),
        vec![],
    );
    h.settle(Duration::from_millis(200));
    assert_eq!(h.payloads(), ["\"done\"", "\"half\""]);
    assert_eq!(h.shared.report().counters.partial_lines, 1);
}

#[test]
fn copytruncate_reads_the_rest_from_the_copy_and_never_a_fragment() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("app.log");
    append(&log, 0..50);
    let mut h = harness(&toml(tmp.path(), ""), vec![]);
    h.settle(Duration::ZERO);
    // Written after the last read, then copied and truncated: read from the copy.
    append(&log, 50..60);
    std::fs::copy(&log, tmp.path().join("app.log.1")).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(0)
        .unwrap();
    append(&log, 60..65);
    h.settle(Duration::from_millis(300));
    let payloads = h.payloads();
    assert!(
        payloads
            .iter()
            .all(|p| p.starts_with("{\"n\":") && p.ends_with('}')),
        "{payloads:?}"
    );
    assert_eq!(numbers(&payloads), (0..65).collect::<Vec<_>>());
    assert_eq!(h.shared.report().counters.truncations, 1);
}

#[test]
fn truncation_without_a_copy_is_counted_and_read_from_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("app.log");
    append(&log, 0..50);
    let mut h = harness(&toml(tmp.path(), ""), vec![]);
    h.settle(Duration::ZERO);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(0)
        .unwrap();
    // Rewritten past the old position before the tailer looks: its first bytes differ.
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    for i in 100..200 {
        writeln!(f, "{{\"n\":{i},\"pad\":\"xxxx\"}}").unwrap();
    }
    h.settle(Duration::ZERO);
    let payloads = h.payloads();
    assert!(
        payloads
            .iter()
            .all(|p| p.starts_with("{\"n\":") && p.ends_with('}')),
        "no fragment: {payloads:?}"
    );
    assert_eq!(
        numbers(&payloads),
        (0..50).chain(100..200).collect::<Vec<_>>()
    );
    assert_eq!(h.shared.report().counters.truncations, 1);
}

#[test]
fn a_file_deleted_while_open_is_read_to_its_end() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("app.log");
    append(&log, 0..5);
    let mut h = harness(&toml(tmp.path(), ""), vec![]);
    h.settle(Duration::ZERO);
    let mut writer = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::fs::remove_file(&log).unwrap();
    writeln!(writer, "{{\"n\":5}}").unwrap();
    h.settle(Duration::from_millis(300));
    assert_eq!(numbers(&h.payloads()), (0..6).collect::<Vec<_>>());
    assert_eq!(h.shared.report().counters.released, 1);
}

#[test]
fn positions_resume_by_fingerprint_after_a_rename_while_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("app.log");
    append(&log, 0..10);
    let mut h = harness(&toml(tmp.path(), ""), vec![]);
    h.settle(Duration::ZERO);
    assert_eq!(h.payloads().len(), 10);
    let saved = h.saved();
    drop(h);
    // While stopped: more lines, then a rename rotation and a new file.
    append(&log, 10..15);
    std::fs::rename(&log, tmp.path().join("app.log.1")).unwrap();
    append(&log, 15..20);
    let mut h = harness(&toml(tmp.path(), ""), saved);
    h.settle(Duration::from_millis(300));
    assert_eq!(numbers(&h.payloads()), (10..20).collect::<Vec<_>>());
}

#[test]
fn a_reused_inode_with_other_first_bytes_is_a_new_file() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("app.log");
    append(&log, 0..10);
    let mut h = harness(&toml(tmp.path(), ""), vec![]);
    h.settle(Duration::ZERO);
    h.payloads();
    let mut saved = h.saved();
    drop(h);
    // Same path, same inode (the store says so), other content.
    std::fs::remove_file(&log).unwrap();
    append(&log, 100..103);
    let inode = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&log).unwrap().ino()
    };
    saved[0].inode.ino = inode;
    let mut h = harness(&toml(tmp.path(), ""), saved);
    h.settle(Duration::ZERO);
    assert_eq!(numbers(&h.payloads()), [100, 101, 102]);
}

#[test]
fn more_files_than_slots_are_all_read() {
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..12 {
        append(
            &tmp.path().join(format!("f{i:02}.log")),
            i * 100..i * 100 + 20,
        );
    }
    let mut h = harness(&toml(tmp.path(), "max_open_files = 3"), vec![]);
    h.settle(Duration::ZERO);
    let expected: Vec<u32> = (0..12).flat_map(|i| i * 100..i * 100 + 20).collect();
    assert_eq!(numbers(&h.payloads()), expected);
    assert!(h.shared.report().open_files <= 3);
    // They keep growing: each is read again.
    for i in 0..12 {
        append(
            &tmp.path().join(format!("f{i:02}.log")),
            i * 100 + 20..i * 100 + 25,
        );
    }
    h.settle(Duration::from_millis(200));
    assert_eq!(numbers(&h.payloads()).len(), 12 * 5);
}

#[test]
fn binary_files_are_skipped_and_long_lines_quarantined() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("blob.log"), b"\x00\x01\x02binary\n").unwrap();
    let long = "x".repeat(100);
    std::fs::write(
        tmp.path().join("app.log"),
        format!("{{\"n\":1}}\n{long}\n{{\"n\":2}}\n"),
    )
    .unwrap();
    let mut h = harness(&toml(tmp.path(), "max_line_bytes = \"64 B\""), vec![]);
    h.settle(Duration::ZERO);
    let chunks: Vec<Chunk> = h.chunks.lock().unwrap().drain(..).collect();
    let rejected: Vec<_> = chunks.iter().flat_map(|c| c.rejected.iter()).collect();
    assert_eq!(rejected.len(), 1);
    assert!(
        rejected[0].reason.contains("100 bytes at offset 8 of"),
        "{}",
        rejected[0].reason
    );
    assert_eq!(rejected[0].payload.len(), 64);
    let records: u64 = chunks.iter().map(|c| c.records).sum();
    assert_eq!(records, 2);
    let c = h.shared.report().counters;
    assert_eq!((c.binary_files, c.long_lines), (1, 1));
    assert!(
        h.tailer
            .states()
            .iter()
            .any(|(p, s)| p.ends_with("blob.log") && *s == FileState::Binary)
    );
}
