//! Stray files in the WAL directory (issue 16, items 2 and 5): recovery trusts a
//! file's contents over its name. Junk named like a segment is set aside at WARN
//! without moving the durable end, hiding good records or inventing a gap; a directory
//! named like a segment is quarantined, not fatal.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{numbered, payload_for, small, with_sink};
use weir_wal::{Gap, OnFull, ReadLimits, Wal};

const SIZE: usize = 40;

async fn write_log(dir: &Path, n: u64) -> Vec<PathBuf> {
    let (wal, _) = Wal::open(with_sink(small(dir, OnFull::Reject))).unwrap();
    for i in 0..n {
        wal.append(numbered(i, 1, SIZE)).await.unwrap();
    }
    wal.close().await;
    segments(dir)
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    v.sort();
    v
}

fn first_of(path: &Path) -> u64 {
    path.file_stem().unwrap().to_str().unwrap().parse().unwrap()
}

fn seg_name(dir: &Path, first: u64) -> PathBuf {
    dir.join(format!("{first:020}.seg"))
}

/// Deterministic junk: `len` bytes of an LCG.
fn junk(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (x >> 56) as u8
        })
        .collect()
}

/// Opens, reads everything from the cursor at 0, appends one record, reopens and
/// checks it is there; returns the report, what was read, and the new record's offset.
async fn reopen(dir: &Path) -> (weir_wal::OpenReport, Vec<Gap>, Vec<u64>, u64) {
    let (wal, report) = Wal::open(with_sink(small(dir, OnFull::Reject))).unwrap();
    let mut reader = wal.reader("sink").unwrap();
    let (mut gaps, mut offsets) = (Vec::new(), Vec::new());
    loop {
        let batch = reader.try_read(ReadLimits::default()).await.unwrap();
        if batch.is_empty() {
            break;
        }
        gaps.extend(batch.gap);
        for r in &batch.records {
            assert_eq!(
                r.payload,
                payload_for(r.offset, SIZE),
                "offset {}",
                r.offset
            );
            offsets.push(r.offset);
        }
    }
    drop(reader);
    let end = wal.durable_end();
    let appended = wal.append(numbered(end, 1, SIZE)).await.unwrap();
    wal.close().await;
    (report, gaps, offsets, appended.start)
}

#[tokio::test]
async fn junk_named_at_the_top_of_the_offset_space_does_not_wrap_offsets() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), 200).await;
    let stray = seg_name(dir.path(), u64::MAX);
    fs::write(&stray, junk(40_000, 1)).unwrap();

    let (report, gaps, offsets, appended) = reopen(dir.path()).await;
    assert_eq!(report.durable_end, 200, "{report:?}");
    assert_eq!(offsets, (0..200).collect::<Vec<_>>());
    assert!(gaps.is_empty(), "{gaps:?}");
    assert_eq!(appended, 200);
    assert!(!stray.exists());
    let q = &report.quarantined[0];
    assert_eq!((q.from, q.to), (u64::MAX, u64::MAX), "{q:?}");
    assert!(q.path.to_string_lossy().contains("junk-"), "{q:?}");
    assert!(q.reason.contains("not a segment of this log"), "{q:?}");
    // The next open does not read the set-aside file as a boundary either.
    let (report, gaps, offsets, _) = reopen(dir.path()).await;
    assert_eq!(report.durable_end, 201);
    assert!(gaps.is_empty() && offsets.len() == 201, "{gaps:?}");
}

#[tokio::test]
async fn junk_named_inside_the_last_segment_hides_no_record() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_log(dir.path(), 200).await;
    let tail = first_of(segs.last().unwrap());
    assert!(tail > 0 && tail + 10 < 200, "{segs:?}");
    fs::write(seg_name(dir.path(), tail + 3), junk(3000, 2)).unwrap();

    let (report, gaps, offsets, appended) = reopen(dir.path()).await;
    assert_eq!(report.durable_end, 200, "{report:?}");
    assert_eq!(offsets, (0..200).collect::<Vec<_>>());
    assert!(gaps.is_empty(), "{gaps:?}");
    assert_eq!(appended, 200);
}

#[tokio::test]
async fn junk_named_inside_a_sealed_segment_hides_no_record() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_log(dir.path(), 200).await;
    assert!(segs.len() >= 3, "{segs:?}");
    let sealed = first_of(&segs[0]);
    fs::write(seg_name(dir.path(), sealed + 5), junk(3000, 3)).unwrap();

    let (report, gaps, offsets, _) = reopen(dir.path()).await;
    assert_eq!(report.durable_end, 200, "{report:?}");
    assert_eq!(offsets, (0..200).collect::<Vec<_>>());
    assert!(gaps.is_empty(), "{gaps:?}");
}

#[tokio::test]
async fn junk_named_past_the_end_makes_no_phantom_gap() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), 200).await;
    fs::write(seg_name(dir.path(), 10_200), junk(3000, 4)).unwrap();

    let (report, gaps, offsets, appended) = reopen(dir.path()).await;
    assert_eq!(report.durable_end, 200, "{report:?}");
    assert!(gaps.is_empty(), "{gaps:?}");
    assert_eq!(offsets.len(), 200);
    assert_eq!(appended, 200);
}

#[tokio::test]
async fn a_directory_in_place_of_a_segment_is_quarantined_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_log(dir.path(), 200).await;
    assert!(segs.len() >= 3, "{segs:?}");
    // The middle segment replaced by a directory of the same name.
    let (lost_from, lost_to) = (first_of(&segs[1]), first_of(&segs[2]));
    fs::remove_file(&segs[1]).unwrap();
    fs::create_dir(&segs[1]).unwrap();

    let (report, gaps, offsets, _) = reopen(dir.path()).await;
    assert_eq!(report.durable_end, 200, "{report:?}");
    let q = &report.quarantined[0];
    assert_eq!((q.from, q.to), (lost_from, lost_to), "{q:?}");
    assert!(q.reason.contains("not a regular file"), "{q:?}");
    assert_eq!(
        gaps.iter().map(Gap::records).sum::<u64>(),
        lost_to - lost_from
    );
    let expected: Vec<u64> = (0..lost_from).chain(lost_to..200).collect();
    assert_eq!(offsets, expected);

    // A directory named past the end is set aside as a stray.
    let stray = seg_name(dir.path(), 5_000);
    fs::create_dir(&stray).unwrap();
    let (report, _, _, _) = reopen(dir.path()).await;
    assert_eq!(report.durable_end, 201, "{report:?}");
    assert!(!stray.exists());
}

#[tokio::test]
async fn an_unreadable_last_segment_never_has_its_offsets_reused() {
    let dir = tempfile::tempdir().unwrap();
    let segs = write_log(dir.path(), 200).await;
    assert!(segs.len() >= 3, "{segs:?}");
    // The last segment replaced by a directory: how many records it held is unknown.
    let last = segs.last().unwrap();
    let lost_from = first_of(last);
    fs::remove_file(last).unwrap();
    fs::create_dir(last).unwrap();

    let (report, gaps, offsets, appended) = reopen(dir.path()).await;
    let q = &report.quarantined[0];
    assert_eq!(q.from, lost_from, "{q:?}");
    // As many offsets as a segment of this configuration can hold: segments of 4 KiB,
    // but a first batch may be as large as max_batch_bytes (512 KiB here).
    let most = (512 * 1024) / 16;
    assert_eq!(q.to, lost_from + most, "{q:?}");
    assert!(q.reason.contains("at most 32768 records lost"), "{q:?}");
    // Before the fix the log went on at lost_from: records 200.. of the lost segment's
    // offsets were given out again.
    assert!(appended >= 200, "offset {appended} reused");
    assert_eq!(appended, q.to);
    assert_eq!(report.durable_end, q.to, "{report:?}");
    assert_eq!(gaps.iter().map(Gap::records).sum::<u64>(), most);
    let expected: Vec<u64> = (0..lost_from).collect();
    assert_eq!(offsets, expected);
}
