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
    let (wal, report) = Wal::open(config).unwrap();
    assert_eq!(
        (report.segments, report.start, report.durable_end),
        (2, 0, 7)
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
}
