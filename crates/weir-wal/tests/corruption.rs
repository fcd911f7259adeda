//! Torn and corrupt tails, flipped bytes, unknown versions, damaged middle segments.

mod common;

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use common::{numbered, payload_for, small, with_sink};
use weir_wal::format::{FORMAT_VERSION, FRAME_HEADER_LEN, MARK_LEN, SEGMENT_HEADER_LEN};
use weir_wal::{CursorConfig, Gap, OnFull, OpenError, ReadLimits, RecoveryScan, Wal};

const SIZE: usize = 40;
/// A record's frame.
const FRAME: usize = FRAME_HEADER_LEN as usize + SIZE;
/// A one-record batch: its mark and its frame.
const STRIDE: usize = MARK_LEN as usize + FRAME;

/// Where record `i` of a segment of one-record batches starts (its frame, after the
/// batch's mark).
fn frame_at(i: usize) -> usize {
    SEGMENT_HEADER_LEN as usize + i * STRIDE + MARK_LEN as usize
}

/// Writes `n` records of `SIZE` bytes, one per batch; returns the segment paths.
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

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to.join("cursors")).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
}

/// Opens the WAL in `dir` and reads everything from the cursor at 0.
async fn reopen_and_read(dir: &Path) -> (weir_wal::OpenReport, Vec<(Option<Gap>, Vec<u64>)>) {
    let (wal, report) = Wal::open(with_sink(small(dir, OnFull::Reject))).unwrap();
    let mut reader = wal.reader("sink").unwrap();
    let mut out = Vec::new();
    loop {
        let batch = reader.try_read(ReadLimits::default()).await.unwrap();
        if batch.is_empty() {
            break;
        }
        for r in &batch.records {
            assert_eq!(
                r.payload,
                payload_for(r.offset, SIZE),
                "offset {}",
                r.offset
            );
        }
        out.push((batch.gap, batch.records.iter().map(|r| r.offset).collect()));
    }
    // Unlocked when this returns: a test may open the directory again.
    drop(reader);
    wal.close().await;
    (report, out)
}

fn offsets(read: &[(Option<Gap>, Vec<u64>)]) -> Vec<u64> {
    read.iter().flat_map(|(_, o)| o.iter().copied()).collect()
}

#[tokio::test]
async fn truncation_at_every_byte_of_the_last_frame_keeps_the_good_prefix() {
    let base = tempfile::tempdir().unwrap();
    let segs = write_log(base.path(), 5).await;
    assert_eq!(segs.len(), 1);
    let len = fs::metadata(&segs[0]).unwrap().len();
    // The last batch: its mark and its one frame.
    let batch = STRIDE as u64;
    for cut in (len - batch)..len {
        let work = tempfile::tempdir().unwrap();
        copy_dir(base.path(), work.path());
        let seg = work.path().join(segs[0].file_name().unwrap());
        OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap()
            .set_len(cut)
            .unwrap();
        let (report, read) = reopen_and_read(work.path()).await;
        assert_eq!(report.durable_end, 4, "cut at {cut}");
        assert_eq!(report.truncated_bytes, cut - (len - batch), "cut at {cut}");
        assert_eq!(report.truncated_records, 0, "a torn frame is not a record");
        assert_eq!(offsets(&read), vec![0, 1, 2, 3]);
        assert_eq!(fs::metadata(&seg).unwrap().len(), len - batch);
    }
}

#[tokio::test]
async fn flipped_bytes_in_the_last_frame_are_cut_and_in_its_mark_lose_nothing() {
    let base = tempfile::tempdir().unwrap();
    let segs = write_log(base.path(), 5).await;
    let len = fs::metadata(&segs[0]).unwrap().len();
    let batch_start = len - STRIDE as u64;
    let mark = MARK_LEN;
    // The mark's tag, CRC, first offset, count and length; then the frame's length, CRC,
    // time and payload bytes.
    let mark_bytes = [0u64, 3, 4, 7, 8, 15, 16, 19, 20, 23];
    let frame_bytes = [0u64, 1, 3, 4, 7, 8, 15, 16, 30, FRAME as u64 - 1].map(|b| mark + b);
    for at in mark_bytes.into_iter().chain(frame_bytes) {
        let work = tempfile::tempdir().unwrap();
        copy_dir(base.path(), work.path());
        let seg = work.path().join(segs[0].file_name().unwrap());
        let mut bytes = fs::read(&seg).unwrap();
        bytes[(batch_start + at) as usize] ^= 0x40;
        fs::write(&seg, &bytes).unwrap();
        let (report, read) = reopen_and_read(work.path()).await;
        if at < mark {
            // The mark alone: its length is fixed and the count places the frame.
            assert_eq!(report.durable_end, 5, "flip at mark byte {at}");
            assert_eq!(report.truncated_bytes, 0, "flip at mark byte {at}");
            assert_eq!(offsets(&read), vec![0, 1, 2, 3, 4]);
        } else {
            // The last frame may be a torn write: it goes, with its batch's mark.
            assert_eq!(report.durable_end, 4, "flip at batch byte {at}");
            assert_eq!(report.truncated_bytes, len - batch_start, "flip at {at}");
            assert_eq!(offsets(&read), vec![0, 1, 2, 3]);
        }
    }
}

#[tokio::test]
async fn a_flip_inside_the_last_segment_loses_only_that_record() {
    let base = tempfile::tempdir().unwrap();
    let segs = write_log(base.path(), 5).await;
    let seg = &segs[0];
    let mut bytes = fs::read(seg).unwrap();
    // payload byte of record 2: its length still delimits it, and records 3 and 4 after
    // it are sound (acknowledged). Before, everything from record 2 was cut as a torn
    // tail, and offsets 2.. were given out again.
    bytes[frame_at(2) + 20] ^= 1;
    fs::write(seg, &bytes).unwrap();
    let (report, read) = reopen_and_read(base.path()).await;
    assert_eq!(report.durable_end, 5, "{report:?}");
    assert_eq!(report.truncated_records, 0, "{report:?}");
    assert_eq!(report.truncated_bytes, 0, "{report:?}");
    assert_eq!(offsets(&read), vec![0, 1, 3, 4]);
    let gaps: Vec<&Gap> = read.iter().filter_map(|(g, _)| g.as_ref()).collect();
    assert_eq!(gaps.len(), 1, "{read:?}");
    assert_eq!(gaps[0].records(), 1, "{gaps:?}");
    // The log goes on after the sealed segment; a later open agrees.
    let (wal, report) = Wal::open(with_sink(small(base.path(), OnFull::Reject))).unwrap();
    assert_eq!(report.durable_end, 5);
    let at = wal.append(numbered(5, 1, SIZE)).await.unwrap();
    assert_eq!(at.start, 5);
    wal.close().await;
    let (report, read) = reopen_and_read(base.path()).await;
    assert_eq!(report.durable_end, 6, "{report:?}");
    assert_eq!(offsets(&read), vec![0, 1, 3, 4, 5]);
}

#[tokio::test]
async fn a_flip_inside_the_last_segment_with_a_torn_end_keeps_the_sound_records() {
    let base = tempfile::tempdir().unwrap();
    let segs = write_log(base.path(), 5).await;
    let seg = &segs[0];
    let mut bytes = fs::read(seg).unwrap();
    bytes[frame_at(1) + 20] ^= 1; // record 1
    bytes.truncate(bytes.len() - 10); // record 4 torn
    fs::write(seg, &bytes).unwrap();
    let (report, read) = reopen_and_read(base.path()).await;
    assert_eq!(report.durable_end, 4, "{report:?}");
    // Record 4's batch goes whole: its mark and what reached the file of its frame.
    assert_eq!(report.truncated_bytes, (STRIDE - 10) as u64, "{report:?}");
    assert_eq!(offsets(&read), vec![0, 2, 3]);
}

#[tokio::test]
async fn a_zero_filled_tail_is_cut_and_counts_no_record() {
    let base = tempfile::tempdir().unwrap();
    let segs = write_log(base.path(), 3).await;
    let mut bytes = fs::read(&segs[0]).unwrap();
    bytes.extend_from_slice(&[0u8; 4096]);
    fs::write(&segs[0], &bytes).unwrap();
    let (report, read) = reopen_and_read(base.path()).await;
    assert_eq!(
        (report.truncated_bytes, report.truncated_records),
        (4096, 0)
    );
    assert_eq!(offsets(&read), vec![0, 1, 2]);
}

#[tokio::test]
async fn an_unknown_format_version_is_refused_clearly() {
    let base = tempfile::tempdir().unwrap();
    let segs = write_log(base.path(), 3).await;
    let mut bytes = fs::read(&segs[0]).unwrap();
    bytes[8..10].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    fs::write(&segs[0], &bytes).unwrap();
    let err = Wal::open(with_sink(small(base.path(), OnFull::Reject))).unwrap_err();
    assert!(
        matches!(err, OpenError::UnsupportedVersion { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&format!("version {}", FORMAT_VERSION + 1))
            && text.contains(&format!("reads versions 1 to {FORMAT_VERSION}")),
        "{text}"
    );
    // Nothing was changed.
    assert_eq!(fs::read(&segs[0]).unwrap(), bytes);
}

/// A log of several segments; returns (segment paths, records).
async fn multi_segment_log(dir: &Path) -> (Vec<PathBuf>, u64) {
    let n = 400;
    let segs = write_log(dir, n).await;
    assert!(segs.len() >= 4, "{} segments", segs.len());
    (segs, n)
}

fn first_of(path: &Path) -> u64 {
    path.file_stem().unwrap().to_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_damaged_middle_segment_header_is_quarantined_and_read_as_a_gap() {
    let base = tempfile::tempdir().unwrap();
    let (segs, n) = multi_segment_log(base.path()).await;
    let victim = &segs[1];
    let (from, to) = (first_of(&segs[1]), first_of(&segs[2]));
    let mut bytes = fs::read(victim).unwrap();
    bytes[0] ^= 0xff;
    fs::write(victim, &bytes).unwrap();

    let (report, read) = reopen_and_read(base.path()).await;
    assert_eq!(report.quarantined.len(), 1);
    let q = &report.quarantined[0];
    assert_eq!((q.from, q.to), (from, to));
    assert!(q.path.starts_with(base.path().join("quarantine")));
    assert!(!victim.exists() && q.path.exists());
    let gaps: Vec<Gap> = read.iter().filter_map(|(g, _)| *g).collect();
    assert_eq!(
        gaps,
        vec![Gap::Quarantined {
            from,
            to,
            records: to - from
        }]
    );
    let expected: Vec<u64> = (0..n).filter(|o| *o < from || *o >= to).collect();
    assert_eq!(offsets(&read), expected);
    // Opening again is quiet: the gap persists, nothing more is moved.
    let (report, read) = reopen_and_read(base.path()).await;
    assert!(report.quarantined.is_empty());
    assert_eq!(offsets(&read), expected);
}

#[tokio::test]
async fn damaged_records_in_a_sealed_segment_are_a_gap_or_quarantined_with_a_full_scan() {
    for scan in [RecoveryScan::Tail, RecoveryScan::Full] {
        let base = tempfile::tempdir().unwrap();
        let (segs, n) = multi_segment_log(base.path()).await;
        let (from, to) = (first_of(&segs[1]), first_of(&segs[2]));
        let mut bytes = fs::read(&segs[1]).unwrap();
        bytes[frame_at(3) + 25] ^= 1; // record from + 3
        fs::write(&segs[1], &bytes).unwrap();
        let config = small(base.path(), OnFull::Reject)
            .recovery(scan)
            .cursor("sink", CursorConfig::default())
            .cursor("other", CursorConfig::default())
            .build()
            .unwrap();
        let (wal, report) = Wal::open(config).unwrap();
        let mut reader = wal.reader("sink").unwrap();
        let mut got = Vec::new();
        let mut gaps = Vec::new();
        loop {
            let b = reader.try_read(ReadLimits::default()).await.unwrap();
            if b.is_empty() {
                break;
            }
            gaps.extend(b.gap);
            got.extend(b.records.iter().map(|r| r.offset));
        }
        match scan {
            RecoveryScan::Tail => {
                // The flip is inside one payload: only that record is lost. The frames
                // after it parse to the segment's end, whose last offset is known (the
                // next segment's first), so every later offset is provable.
                assert!(report.quarantined.is_empty());
                assert_eq!(
                    gaps,
                    vec![Gap::Corrupt {
                        from: from + 3,
                        to: from + 4,
                        records: 1
                    }]
                );
                let expected: Vec<u64> = (0..n).filter(|o| *o != from + 3).collect();
                assert_eq!(got, expected);
                assert!(to > from + 4);
                // The loss is in the WAL's own figures, once, however many read it.
                let stats = wal.stats();
                assert_eq!(stats.quarantined_ranges, vec![(from + 3, from + 4)]);
                assert_eq!(stats.damaged_ranges, vec![(from + 3, from + 4)]);
                assert_eq!(stats.damaged_records, 1);
                let mut second = wal.reader("other").unwrap();
                loop {
                    let b = second.try_read(ReadLimits::default()).await.unwrap();
                    if b.is_empty() {
                        break;
                    }
                }
                assert_eq!(wal.stats().damaged_records, 1);
            }
            RecoveryScan::Full => {
                assert_eq!(report.quarantined.len(), 1);
                assert_eq!(
                    gaps,
                    vec![Gap::Quarantined {
                        from,
                        to,
                        records: to - from
                    }]
                );
                let expected: Vec<u64> = (0..n).filter(|o| *o < from || *o >= to).collect();
                assert_eq!(got, expected);
            }
        }
        let stats = wal.stats();
        assert_eq!(stats.cursors[0].gaps, 1);
        if scan == RecoveryScan::Full {
            assert_eq!(stats.quarantined_ranges, vec![(from, to)]);
            assert_eq!(
                stats.damaged_records, 0,
                "found at recovery, not by a reader"
            );
        }
    }
}

/// Damage to a frame's length field (its boundary is lost, not only its CRC): reading
/// resyncs on the next frame that parses, CRC by CRC, to the end of the sealed segment,
/// and only the damaged record is a gap. A reader positioned after the damage (a cursor
/// that committed past it, then a restart) resyncs the same way and goes on exactly
/// where it was: offsets never shift.
#[tokio::test]
async fn a_damaged_length_field_loses_one_record_and_offsets_do_not_shift() {
    let base = tempfile::tempdir().unwrap();
    let (segs, n) = multi_segment_log(base.path()).await;
    let from = first_of(&segs[1]);
    let mut bytes = fs::read(&segs[1]).unwrap();
    // The high byte of record from+5's length: it now claims ~16 MiB.
    bytes[frame_at(5) + 3] ^= 0x01;
    fs::write(&segs[1], &bytes).unwrap();
    let (_, read) = reopen_and_read(base.path()).await;
    let gaps: Vec<Gap> = read.iter().filter_map(|(g, _)| *g).collect();
    assert_eq!(
        gaps,
        vec![Gap::Corrupt {
            from: from + 5,
            to: from + 6,
            records: 1
        }]
    );
    let got: Vec<u64> = read
        .iter()
        .flat_map(|(_, offsets)| offsets.clone())
        .collect();
    assert_eq!(got, (0..n).filter(|o| *o != from + 5).collect::<Vec<_>>());

    // A cursor that committed past the damage reopens there and reads on, unshifted.
    let config = with_sink(small(base.path(), OnFull::Reject));
    let (wal, _) = Wal::open(config).unwrap();
    let mut reader = wal.reader("sink").unwrap();
    let mut next = 0;
    while next <= from + 8 {
        let b = reader
            .try_read(ReadLimits {
                max_records: 1,
                max_bytes: 1,
            })
            .await
            .unwrap();
        next = b.next_offset();
        reader.commit(next).await.unwrap();
    }
    drop(reader);
    wal.close().await;
    let config = with_sink(small(base.path(), OnFull::Reject));
    let (wal, _) = Wal::open(config).unwrap();
    let mut reader = wal.reader("sink").unwrap();
    let b = reader.try_read(ReadLimits::default()).await.unwrap();
    assert!(b.gap.is_none(), "{:?}", b.gap);
    assert_eq!(b.records[0].offset, next, "resumed where it committed");
    assert_eq!(b.records[0].payload, payload_for(next, SIZE));
    wal.close().await;
}

#[tokio::test]
async fn a_segment_whose_header_never_reached_disk_is_removed() {
    let base = tempfile::tempdir().unwrap();
    let (segs, n) = multi_segment_log(base.path()).await;
    // A crash while rotating: the next segment exists but its header is zeros.
    let last_end = n;
    let name = format!("{last_end:020}.seg");
    fs::write(base.path().join(&name), [0u8; 0]).unwrap();
    let (report, read) = reopen_and_read(base.path()).await;
    assert_eq!(report.removed_unfinished_segments, 1);
    assert_eq!(report.durable_end, n);
    assert_eq!(offsets(&read), (0..n).collect::<Vec<_>>());
    assert_eq!(segments(base.path()).len(), segs.len());
}

#[tokio::test]
async fn a_damaged_last_segment_header_is_quarantined_and_the_log_goes_on_after_it() {
    let base = tempfile::tempdir().unwrap();
    let (segs, n) = multi_segment_log(base.path()).await;
    let last = segs.last().unwrap();
    let from = first_of(last);
    let mut bytes = fs::read(last).unwrap();
    bytes[20] ^= 0xff; // first-offset field: header CRC fails
    fs::write(last, &bytes).unwrap();
    let (wal, report) = Wal::open(with_sink(small(base.path(), OnFull::Reject))).unwrap();
    assert_eq!(report.quarantined.len(), 1);
    assert_eq!(
        (report.quarantined[0].from, report.quarantined[0].to),
        (from, n)
    );
    // New records never reuse the quarantined offsets.
    assert_eq!(wal.append(numbered(n, 1, SIZE)).await.unwrap(), n..n + 1);
}

/// Writes two batches of 10 records each (offsets 0..20) into one segment.
async fn write_two_batches(dir: &Path) -> PathBuf {
    write_batches_of_10(dir, 2).await
}

/// Writes `n` batches of 10 records each (offsets 0..10n) into one segment.
async fn write_batches_of_10(dir: &Path, n: u64) -> PathBuf {
    let (wal, _) = Wal::open(with_sink(small(dir, OnFull::Reject))).unwrap();
    for b in 0..n {
        let first = b * 10;
        assert_eq!(
            wal.append(numbered(first, 10, SIZE)).await.unwrap(),
            first..first + 10
        );
    }
    wal.close().await;
    let segs = segments(dir);
    assert_eq!(segs.len(), 1);
    segs[0].clone()
}

/// Where record `i` (0..20) of [`write_two_batches`] starts, and where the mark of the
/// batch holding it starts.
fn in_two_batches(i: usize) -> (usize, usize) {
    let batch = i / 10;
    let mark = SEGMENT_HEADER_LEN as usize + batch * (MARK_LEN as usize + 10 * FRAME);
    (mark + MARK_LEN as usize + (i % 10) * FRAME, mark)
}

/// The records read, and the gaps met, as `(from, to)`.
fn offsets_and_gaps(read: &[(Option<Gap>, Vec<u64>)]) -> (Vec<u64>, Vec<(u64, u64)>) {
    let gaps = read
        .iter()
        .filter_map(|(g, _)| g.as_ref())
        .map(|g| match *g {
            Gap::Corrupt { from, to, .. } => (from, to),
            other => panic!("not a damaged range: {other:?}"),
        })
        .collect();
    (offsets(read), gaps)
}

/// The missing case: a damaged *length field* in the active segment. Its frame's
/// boundary is lost, and without batch marks the records after it could not be placed,
/// so they were cut as a torn tail (acknowledged records lost, their offsets given out
/// again). The mark of the damaged record's batch gives that batch's end, so only the
/// damaged record is lost, and the next append still gets the next offset.
#[tokio::test]
async fn a_damaged_length_field_in_the_last_segment_loses_only_that_record() {
    let base = tempfile::tempdir().unwrap();
    let segs = write_log(base.path(), 5).await;
    let mut bytes = fs::read(&segs[0]).unwrap();
    bytes[frame_at(2) + 3] ^= 0x01; // the length's high byte: it claims ~16 MiB
    fs::write(&segs[0], &bytes).unwrap();
    let (report, read) = reopen_and_read(base.path()).await;
    assert_eq!(report.durable_end, 5, "{report:?}");
    assert_eq!(report.truncated_bytes, 0, "{report:?}");
    assert_eq!(offsets_and_gaps(&read), (vec![0, 1, 3, 4], vec![(2, 3)]));
    let (wal, _) = Wal::open(with_sink(small(base.path(), OnFull::Reject))).unwrap();
    assert_eq!(wal.append(numbered(5, 1, SIZE)).await.unwrap(), 5..6);
    assert_eq!(wal.stats().quarantined_ranges, Vec::<(u64, u64)>::new());
    wal.close().await;
    let (_, read) = reopen_and_read(base.path()).await;
    assert_eq!(offsets_and_gaps(&read), (vec![0, 1, 3, 4, 5], vec![(2, 3)]));
}

/// Inside a batch of many records, damage to any part of one frame (its length's high
/// or low byte, its CRC, its payload) loses that record only: the frames after it that
/// parse to the batch's end (known from its mark) are the batch's last records. This
/// holds in the active segment (recovery places them) and for readers of the sealed
/// segment it becomes.
#[tokio::test]
async fn damage_to_one_frame_of_a_large_batch_loses_only_that_record() {
    for (what, at) in [
        ("length high byte", 3),
        ("length low byte", 0),
        ("CRC", 5),
        ("payload", 30),
    ] {
        let base = tempfile::tempdir().unwrap();
        let seg = write_two_batches(base.path()).await;
        let mut bytes = fs::read(&seg).unwrap();
        let (frame, _) = in_two_batches(4);
        bytes[frame + at] ^= 0x01;
        fs::write(&seg, &bytes).unwrap();
        let (report, read) = reopen_and_read(base.path()).await;
        assert_eq!(report.durable_end, 20, "{what}: {report:?}");
        assert_eq!(report.truncated_bytes, 0, "{what}: {report:?}");
        let all_but_4: Vec<u64> = (0..20).filter(|&o| o != 4).collect();
        assert_eq!(offsets_and_gaps(&read), (all_but_4, vec![(4, 5)]), "{what}");
    }
}

/// A cursor checks the frames of a batch four at a time: damage to any one of them, in
/// any place of its group of four (and in the short group at a batch's end), loses
/// that record only, and the records before it in its group are read. (The log's last
/// frame is left out: damage there is a torn tail, cut by recovery.)
#[tokio::test]
async fn a_damaged_payload_anywhere_in_a_group_of_four_loses_only_that_record() {
    for damaged in 0..19 {
        let base = tempfile::tempdir().unwrap();
        let seg = write_two_batches(base.path()).await;
        let mut bytes = fs::read(&seg).unwrap();
        bytes[in_two_batches(damaged).0 + 30] ^= 0x01;
        fs::write(&seg, &bytes).unwrap();
        let (report, read) = reopen_and_read(base.path()).await;
        assert_eq!(report.durable_end, 20, "record {damaged}: {report:?}");
        let kept: Vec<u64> = (0..20).filter(|&o| o != damaged as u64).collect();
        let want = (kept, vec![(damaged as u64, damaged as u64 + 1)]);
        assert_eq!(offsets_and_gaps(&read), want, "record {damaged}");
    }
}

/// Damage to a batch mark loses no record: a mark's length is fixed, and the record
/// count places the frames after it, whether its CRC, its offset or its tag is hit.
#[tokio::test]
async fn a_damaged_batch_mark_loses_no_record() {
    for (what, at) in [("tag", 0), ("CRC", 5), ("first offset", 8), ("bytes", 21)] {
        let base = tempfile::tempdir().unwrap();
        let seg = write_two_batches(base.path()).await;
        let mut bytes = fs::read(&seg).unwrap();
        let (_, mark) = in_two_batches(10);
        bytes[mark + at] ^= 0x01;
        fs::write(&seg, &bytes).unwrap();
        let (report, read) = reopen_and_read(base.path()).await;
        assert_eq!(report.durable_end, 20, "{what}: {report:?}");
        assert_eq!(report.truncated_bytes, 0, "{what}: {report:?}");
        assert_eq!(
            offsets_and_gaps(&read),
            ((0..20).collect(), vec![]),
            "{what}"
        );
    }
}

/// A damaged length field followed by more damage further on, in the active segment:
/// each damaged record is placed and counted on its own, and every record between and
/// after them keeps its offset.
#[tokio::test]
async fn two_damaged_frames_in_the_last_segment_lose_two_records() {
    let base = tempfile::tempdir().unwrap();
    let seg = write_two_batches(base.path()).await;
    let mut bytes = fs::read(&seg).unwrap();
    bytes[in_two_batches(3).0 + 2] ^= 0x10; // length
    bytes[in_two_batches(15).0 + 20] ^= 0x10; // payload
    fs::write(&seg, &bytes).unwrap();
    let (report, read) = reopen_and_read(base.path()).await;
    assert_eq!(report.durable_end, 20, "{report:?}");
    let kept: Vec<u64> = (0..20).filter(|&o| o != 3 && o != 15).collect();
    assert_eq!(offsets_and_gaps(&read), (kept, vec![(3, 4), (15, 16)]));
}

/// A batch that is not where the record count says is damage, never records under the
/// wrong offsets: here the first batch's bytes copied over the second's (whose mark
/// then names 0 where 10 comes next), and the second's over the first's.
#[tokio::test]
async fn a_batch_whose_mark_names_another_offset_is_not_read_under_the_wrong_offsets() {
    for (from, to, lost) in [(0, 10, (10, 20)), (10, 0, (0, 10))] {
        let base = tempfile::tempdir().unwrap();
        let seg = write_batches_of_10(base.path(), 3).await;
        let mut bytes = fs::read(&seg).unwrap();
        let batch = MARK_LEN as usize + 10 * FRAME;
        let (_, src) = in_two_batches(from);
        let (_, dst) = in_two_batches(to);
        let copy = bytes[src..src + batch].to_vec();
        bytes[dst..dst + batch].copy_from_slice(&copy);
        fs::write(&seg, &bytes).unwrap();
        let (report, read) = reopen_and_read(base.path()).await; // checks every payload
        assert_eq!(report.durable_end, 30, "{report:?}");
        let kept: Vec<u64> = (0..30).filter(|o| *o < lost.0 || *o >= lost.1).collect();
        assert_eq!(
            offsets_and_gaps(&read),
            (kept, vec![lost]),
            "copy {from} over {to}"
        );
    }
}

/// A version-1 segment (no batch marks) built byte by byte, as the previous release
/// wrote it: it opens, reads back, and the log goes on in a version-2 segment.
#[tokio::test]
async fn a_version_1_log_is_read_and_continued_in_version_2() {
    let base = tempfile::tempdir().unwrap();
    let mut image = weir_wal::format::SegmentHeader {
        first_offset: 0,
        created_ms: 1_700_000_000_000,
        version: 1,
    }
    .encode()
    .to_vec();
    for i in 0..3u64 {
        let payload = payload_for(i, SIZE);
        let len = (payload.len() as u32).to_le_bytes();
        let time = 1_700_000_000_000u64.to_le_bytes();
        let mut crc_input = len.to_vec();
        crc_input.extend_from_slice(&time);
        crc_input.extend_from_slice(&payload);
        image.extend_from_slice(&len);
        image.extend_from_slice(&crc32c::crc32c(&crc_input).to_le_bytes());
        image.extend_from_slice(&time);
        image.extend_from_slice(&payload);
    }
    fs::create_dir_all(base.path().join("cursors")).unwrap();
    fs::write(base.path().join("00000000000000000000.seg"), &image).unwrap();
    let (wal, report) = Wal::open(with_sink(small(base.path(), OnFull::Reject))).unwrap();
    assert_eq!((report.durable_end, report.segments), (3, 2), "{report:?}");
    assert_eq!(wal.append(numbered(3, 2, SIZE)).await.unwrap(), 3..5);
    wal.close().await;
    assert_eq!(
        fs::read(base.path().join("00000000000000000000.seg")).unwrap(),
        image
    );
    let (_, read) = reopen_and_read(base.path()).await;
    assert_eq!(offsets_and_gaps(&read), ((0..5).collect(), vec![]));
}
