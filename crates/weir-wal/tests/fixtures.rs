//! Old-format fixtures must keep opening: a format change either reads them or bumps the
//! version deliberately (and adds a new fixture directory beside the old ones).

use std::path::Path;

use weir_wal::{CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree(&p, &target);
        } else {
            std::fs::copy(&p, &target).unwrap();
        }
    }
}

#[tokio::test]
async fn the_version_1_fixture_opens_and_reads_back() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1");
    // Read-only tools first, on the fixture itself.
    let report = weir_wal::tools::verify(&fixture).unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.inspect.segments.len(), 2);
    assert_eq!((report.inspect.start, report.inspect.end), (0, 7));

    let work = tempfile::tempdir().unwrap();
    copy_tree(&fixture, work.path());
    let config = WalConfig::builder(work.path())
        .max_disk(1 << 20)
        .segment_bytes(200)
        .on_full(OnFull::Reject)
        .cursor("sink", CursorConfig::default())
        .build()
        .unwrap();
    let (wal, report) = Wal::open(config.clone()).unwrap();
    // The version-1 active segment is sealed where it ends, so that no batch mark goes
    // into a file the release that wrote it would read as damaged; a version-2 segment
    // follows it.
    assert_eq!(
        (report.segments, report.start, report.durable_end),
        (3, 0, 7)
    );
    assert_eq!(report.truncated_bytes, 0);
    assert!(report.quarantined.is_empty() && report.cursors_reset.is_empty());
    let mut reader = wal.reader("sink").unwrap();
    assert_eq!(reader.committed(), 3);
    let b = reader.read(ReadLimits::default()).await.unwrap();
    let got: Vec<(u64, u64, String)> = b
        .records
        .iter()
        .map(|r| {
            (
                r.offset,
                r.time_ms,
                String::from_utf8(r.payload.to_vec()).unwrap(),
            )
        })
        .collect();
    let want: Vec<(u64, u64, String)> = (3..7)
        .map(|i| (i, 1_700_000_000_000 + i, format!("fixture record {i}")))
        .collect();
    assert_eq!(got, want);

    // New records go to the version-2 segment; the old files are not touched.
    let mut batch = weir_wal::Batch::with_time_ms(1_800_000_000_000);
    batch.push(b"new record 7").unwrap();
    assert_eq!(wal.append(batch).await.unwrap(), 7..8);
    drop(reader);
    wal.close().await;
    for name in ["00000000000000000000.seg", "00000000000000000005.seg"] {
        let old = std::fs::read(fixture.join(name)).unwrap();
        assert_eq!(
            std::fs::read(work.path().join(name)).unwrap(),
            old,
            "{name}"
        );
    }
    let new = std::fs::read(work.path().join("00000000000000000007.seg")).unwrap();
    assert_eq!(u16::from_le_bytes([new[8], new[9]]), 2);
    let (wal, report) = Wal::open(config).unwrap();
    assert_eq!((report.segments, report.durable_end), (3, 8));
    let mut reader = wal.reader("sink").unwrap();
    let b = reader.read(ReadLimits::default()).await.unwrap();
    let offsets: Vec<u64> = b.records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [3, 4, 5, 6, 7]);
    assert_eq!(&b.records[4].payload[..], b"new record 7");
}

/// Format version 2 (batch marks), as this release writes it: batches of 1, 2, 1 and 3
/// records over three segments, the cursor at 2. Its bytes are checked against the
/// documented layout, so a change to the writer cannot slip by as "still readable".
#[tokio::test]
async fn the_version_2_fixture_opens_reads_back_and_has_a_mark_per_batch() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v2");
    let report = weir_wal::tools::verify(&fixture).unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.inspect.segments.len(), 3);
    assert_eq!((report.inspect.start, report.inspect.end), (0, 7));

    // The marks, byte by byte: (segment, first offset, records) of each batch.
    let mut marks = Vec::new();
    for (name, first) in [
        ("00000000000000000000.seg", 0u64),
        ("00000000000000000003.seg", 3),
        ("00000000000000000004.seg", 4),
    ] {
        let bytes = std::fs::read(fixture.join(name)).unwrap();
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 2, "{name}");
        let mut at = 40;
        while at < bytes.len() {
            let field = |from: usize, n: usize| bytes[at + from..at + from + n].to_vec();
            assert_eq!(field(0, 4), [0xff; 4], "{name} byte {at}: a mark's tag");
            let mut crc_input = field(0, 4);
            crc_input.extend(field(8, 16));
            assert_eq!(
                u32::from_le_bytes(field(4, 4).try_into().unwrap()),
                crc32c::crc32c(&crc_input)
            );
            let mark_first = u64::from_le_bytes(field(8, 8).try_into().unwrap());
            let records = u32::from_le_bytes(field(16, 4).try_into().unwrap());
            let len = u32::from_le_bytes(field(20, 4).try_into().unwrap()) as usize;
            marks.push((first, mark_first, records));
            at += 24 + len;
        }
        assert_eq!(at, bytes.len(), "{name}: the marks' lengths cover the file");
    }
    assert_eq!(marks, [(0, 0, 1), (0, 1, 2), (3, 3, 1), (4, 4, 3)]);

    let work = tempfile::tempdir().unwrap();
    copy_tree(&fixture, work.path());
    let config = WalConfig::builder(work.path())
        .max_disk(1 << 20)
        .segment_bytes(200)
        .on_full(OnFull::Reject)
        .cursor("sink", CursorConfig::default())
        .build()
        .unwrap();
    let (wal, report) = Wal::open(config).unwrap();
    assert_eq!(
        (report.segments, report.start, report.durable_end),
        (3, 0, 7)
    );
    assert_eq!(report.truncated_bytes, 0);
    assert!(report.quarantined.is_empty() && report.cursors_reset.is_empty());
    let mut reader = wal.reader("sink").unwrap();
    assert_eq!(reader.committed(), 2);
    let mut got = Vec::new();
    while got.len() < 5 {
        let b = reader.read(ReadLimits::default()).await.unwrap();
        assert!(b.gap.is_none());
        got.extend(b.records.iter().map(|r| {
            (
                r.offset,
                r.time_ms,
                String::from_utf8(r.payload.to_vec()).unwrap(),
            )
        }));
    }
    let batch_time = |i: u64| 1_800_000_000_000 + [0, 1, 1, 3, 4, 4, 4][i as usize];
    let want: Vec<(u64, u64, String)> = (2..7)
        .map(|i| (i, batch_time(i), format!("fixture record {i}")))
        .collect();
    assert_eq!(got, want);
}
