//! Write, rotate, rename and read back with the parquet crate.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration as StdDuration, SystemTime};

use arrow_array::cast::AsArray;
use arrow_array::types::TimestampMillisecondType;
use arrow_array::{Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression as ParquetCompression;
use parquet::file::metadata::ParquetMetaData;

use super::*;
use weir_wal::OnFull;

use crate::keys::{ByteSize, Duration};
use crate::record::Record;
use crate::sinks::rotate::Rotate;

pub(super) fn sink_config(dir: &Path) -> ParquetConfig {
    ParquetConfig {
        path: dir.to_owned(),
        rotate: Rotate {
            bytes: ByteSize::new(128 << 20).expect("non-zero"),
            age: None,
            max_wal_share: crate::sinks::rotate::DEFAULT_MAX_WAL_SHARE,
        },
        encoding: ParquetEncoding {
            row_group_rows: 65_536.try_into().expect("non-zero"),
            row_group_bytes: ByteSize::new(8 << 20).expect("non-zero"),
            compression: Compression::Zstd,
        },
        schema: None,
        partitioning: crate::sinks::layout::Partitioning::default(),
    }
}

pub(super) fn footer() -> FooterMetadata {
    FooterMetadata {
        config_hash: "sha256:0123abcd".to_owned(),
        on_full: OnFull::DropOldest,
    }
}

/// Records `first..first + n`, alternating between two sources.
pub(super) fn records(first: u64, n: u64, payload_bytes: usize) -> Vec<Record> {
    let sources: [Arc<str>; 2] = ["gen".into(), "mqtt".into()];
    (first..first + n)
        .map(|i| Record {
            source: Arc::clone(&sources[(i % 2) as usize]),
            key: format!("key-{i}"),
            timestamp_ms: 1_700_000_000_000 + i as i64,
            payload: bytes::Bytes::from(vec![(i % 251) as u8; payload_bytes]),
            attributes: if i % 3 == 0 {
                vec![("n".to_owned(), i.to_string())]
            } else {
                Vec::new()
            },
        })
        .collect()
}

pub(super) fn read(path: &Path) -> (Vec<RecordBatch>, Arc<ParquetMetaData>) {
    let file = File::open(path).expect("the committed file exists");
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).expect("a valid Parquet file");
    let metadata = Arc::clone(builder.metadata());
    let batches = builder
        .build()
        .expect("reader")
        .collect::<Result<Vec<_>, _>>()
        .expect("batches decode");
    (batches, metadata)
}

pub(super) fn footer_value(metadata: &ParquetMetaData, key: &str) -> Option<String> {
    metadata
        .file_metadata()
        .key_value_metadata()?
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .clone()
}

pub(super) fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn writes_renames_and_reads_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut writer = ParquetFileWriter::new(dir.path(), "lake", &sink_config(dir.path()), footer())
        .expect("new");
    writer.resume_at(10);
    assert_eq!(writer.write(&records(10, 5, 16), 14).expect("write"), None);
    let open = writer.open_path().expect("a file is open").to_owned();
    assert!(!open.exists(), "the final name appears only at commit");
    assert_eq!(
        file_names(dir.path()),
        [".lake-00000000000000000010.parquet.tmp"]
    );
    assert_eq!(writer.write(&records(15, 5, 16), 19).expect("write"), None);

    let done = writer.finish().expect("finish").expect("a file was open");
    assert_eq!(
        done.path,
        dir.path().join("lake-00000000000000000010.parquet")
    );
    assert_eq!((done.through_offset, done.rows), (19, 10));
    assert_eq!(
        done.bytes,
        std::fs::metadata(&done.path).expect("stat").len()
    );
    assert_eq!(
        file_names(dir.path()),
        ["lake-00000000000000000010.parquet"]
    );
    assert_eq!(writer.finish().expect("nothing open"), None);

    let (batches, metadata) = read(&done.path);
    assert_eq!(batches[0].schema(), record_schema());
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows, 10);
    let batch = &batches[0];
    assert_eq!(batch.column(0).as_string::<i32>().value(1), "mqtt");
    assert_eq!(batch.column(1).as_string::<i32>().value(0), "key-10");
    let ts = batch.column(2).as_primitive::<TimestampMillisecondType>();
    assert_eq!(ts.value(9), 1_700_000_000_019);
    assert_eq!(batch.column(3).as_binary::<i32>().value(0), &[10u8; 16][..]);
    let attributes = batch.column(4).as_map();
    assert_eq!(attributes.value_length(2), 1, "offset 12 has an attribute");
    assert_eq!(
        attributes.value(2).column(1).as_string::<i32>().value(0),
        "12"
    );

    assert_eq!(
        footer_value(&metadata, KEY_CONFIG_HASH).as_deref(),
        Some("sha256:0123abcd")
    );
    assert_eq!(
        footer_value(&metadata, KEY_ON_FULL).as_deref(),
        Some("drop_oldest")
    );
    assert_eq!(
        footer_value(&metadata, KEY_FIRST_OFFSET).as_deref(),
        Some("10")
    );
    assert_eq!(
        footer_value(&metadata, KEY_LAST_OFFSET).as_deref(),
        Some("19")
    );
    assert_eq!(
        footer_value(&metadata, KEY_SOURCE_NAMES).as_deref(),
        Some(r#"["gen","mqtt"]"#)
    );
    let column = metadata.row_group(0).column(0);
    assert!(matches!(column.compression(), ParquetCompression::ZSTD(_)));
}

#[test]
fn rotation_by_bytes_names_files_by_their_first_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = sink_config(dir.path());
    config.rotate.bytes = ByteSize::new(1).expect("non-zero");
    let mut writer = ParquetFileWriter::new(dir.path(), "p", &config, footer()).expect("new");
    writer.resume_at(0);
    let mut committed = Vec::new();
    for batch in 0..3 {
        let first = batch * 4;
        let done = writer
            .write(&records(first, 4, 8), first + 3)
            .expect("write")
            .expect("every write reaches 1 byte and rotates");
        committed.push(done);
    }
    let throughs: Vec<u64> = committed.iter().map(|c| c.through_offset).collect();
    assert_eq!(throughs, [3, 7, 11]);
    assert_eq!(
        file_names(dir.path()),
        [
            "p-00000000000000000000.parquet",
            "p-00000000000000000004.parquet",
            "p-00000000000000000008.parquet",
        ]
    );
    let (_, metadata) = read(&committed[1].path);
    assert_eq!(
        footer_value(&metadata, KEY_FIRST_OFFSET).as_deref(),
        Some("4")
    );
    assert_eq!(
        footer_value(&metadata, KEY_LAST_OFFSET).as_deref(),
        Some("7")
    );
    assert_eq!(writer.finish().expect("finish"), None);
}

#[test]
fn rotation_by_age_closes_only_old_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = sink_config(dir.path());
    config.rotate.age = Duration::new(StdDuration::from_secs(60));
    let mut writer = ParquetFileWriter::new(dir.path(), "p", &config, footer()).expect("new");
    let now = SystemTime::now();
    assert_eq!(writer.poll_age(now).expect("nothing open"), None);
    writer.write(&records(0, 3, 8), 2).expect("write");
    assert_eq!(writer.poll_age(now).expect("young"), None);
    let done = writer
        .poll_age(now + StdDuration::from_secs(61))
        .expect("poll")
        .expect("the file is older than 60 s");
    assert_eq!((done.through_offset, done.rows), (2, 3));
    assert!(done.path.exists());
}

#[test]
fn without_rotate_age_files_never_close_by_age() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut writer =
        ParquetFileWriter::new(dir.path(), "p", &sink_config(dir.path()), footer()).expect("new");
    writer.write(&records(0, 3, 8), 2).expect("write");
    let far = SystemTime::now() + StdDuration::from_secs(86_400 * 365);
    assert_eq!(writer.poll_age(far).expect("poll"), None);
}

#[test]
fn row_groups_are_bounded_by_rows_and_by_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = sink_config(dir.path());
    config.encoding.row_group_rows = 10.try_into().expect("non-zero");
    config.encoding.compression = Compression::None;
    let mut writer = ParquetFileWriter::new(dir.path(), "rows", &config, footer()).expect("new");
    writer.write(&records(0, 35, 8), 34).expect("write");
    let done = writer.finish().expect("finish").expect("open");
    let (_, metadata) = read(&done.path);
    let rows: Vec<i64> = metadata
        .row_groups()
        .iter()
        .map(|rg| rg.num_rows())
        .collect();
    assert_eq!(rows, [10, 10, 10, 5]);

    let mut config = sink_config(dir.path());
    let row_group_bytes = 256 * 1024;
    config.encoding.row_group_bytes = ByteSize::new(row_group_bytes).expect("non-zero");
    config.encoding.compression = Compression::None;
    let mut writer = ParquetFileWriter::new(dir.path(), "bytes", &config, footer()).expect("new");
    // 4000 records of 1 KiB in writes of 20: ~4 MiB against 256 KiB row groups.
    let writes = 200;
    for batch in 0..writes {
        writer
            .write(&records(batch * 20, 20, 1024), batch * 20 + 19)
            .expect("write");
    }
    let done = writer.finish().expect("finish").expect("open");
    let (_, metadata) = read(&done.path);
    let groups = metadata.row_groups();
    let total: i64 = groups.iter().map(|rg| rg.num_rows()).sum();
    assert_eq!(total, 4000);
    // Row groups span several writes, and none grows much past 256 KiB.
    assert!(
        groups.len() >= 4000 * 1024 / row_group_bytes as usize,
        "{} row groups",
        groups.len()
    );
    assert!(
        groups.len() < writes as usize / 2,
        "{} row groups",
        groups.len()
    );
    for group in groups {
        assert!(
            group.total_byte_size() <= 2 * row_group_bytes as i64,
            "{}",
            group.total_byte_size()
        );
    }
}

#[test]
fn every_compression_is_written_as_configured() {
    for (choice, expected) in [
        (Compression::Snappy, ParquetCompression::SNAPPY),
        (Compression::None, ParquetCompression::UNCOMPRESSED),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = sink_config(dir.path());
        config.encoding.compression = choice;
        let mut writer = ParquetFileWriter::new(dir.path(), "c", &config, footer()).expect("new");
        writer.write(&records(0, 4, 64), 3).expect("write");
        let done = writer.finish().expect("finish").expect("open");
        let (batches, metadata) = read(&done.path);
        assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 4);
        assert_eq!(metadata.row_group(0).column(3).compression(), expected);
    }
}

#[test]
fn stale_tmp_files_of_the_prefix_are_removed_on_new() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stale = dir.path().join(".lake-00000000000000000007.parquet.tmp");
    let other = dir.path().join(".other-00000000000000000007.parquet.tmp");
    let done = dir.path().join("lake-00000000000000000000.parquet");
    for path in [&stale, &other, &done] {
        std::fs::write(path, b"x").expect("write");
    }
    ParquetFileWriter::new(dir.path(), "lake", &sink_config(dir.path()), footer()).expect("new");
    assert!(!stale.exists());
    assert!(other.exists(), "another sink's files are left alone");
    assert!(done.exists(), "committed files are left alone");
}

#[test]
fn a_retry_after_a_crash_overwrites_the_same_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = sink_config(dir.path());
    let write_from = |next: u64, n: u64| -> PathBuf {
        let mut writer =
            ParquetFileWriter::new(dir.path(), "lake", &config, footer()).expect("new");
        writer.resume_at(next);
        writer
            .write(&records(next, n, 8), next + n - 1)
            .expect("write");
        writer.finish().expect("finish").expect("open").path
    };
    let first = write_from(100, 5);
    // The cursor was not committed before the crash: the same range is written again,
    // this time with more records available.
    let second = write_from(100, 8);
    assert_eq!(first, second);
    assert_eq!(
        file_names(dir.path()),
        ["lake-00000000000000000100.parquet"]
    );
    let (batches, _) = read(&second);
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 8);
}

#[test]
fn empty_writes_move_the_next_file_past_filtered_offsets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut writer =
        ParquetFileWriter::new(dir.path(), "p", &sink_config(dir.path()), footer()).expect("new");
    writer.resume_at(0);
    assert_eq!(writer.write(&[], 41).expect("empty"), None);
    assert!(writer.open_path().is_none());
    writer.write(&records(50, 2, 8), 51).expect("write");
    // The file covers everything from 42, the offsets of other sources included.
    writer.write(&[], 60).expect("empty, file open");
    let done = writer.finish().expect("finish").expect("open");
    assert_eq!(
        done.path.file_name().and_then(|n| n.to_str()),
        Some("p-00000000000000000042.parquet")
    );
    assert_eq!((done.through_offset, done.rows), (60, 2));
}

#[test]
fn offsets_going_backwards_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut writer =
        ParquetFileWriter::new(dir.path(), "p", &sink_config(dir.path()), footer()).expect("new");
    writer.write(&records(0, 5, 8), 9).expect("write");
    let err = writer.write(&records(5, 2, 8), 6).expect_err("6 < 9");
    assert!(matches!(
        err,
        ParquetSinkError::OffsetRegression {
            previous: 9,
            found: 6
        }
    ));
    assert!(err.to_string().contains("never go backwards"), "{err}");
    let done = writer.finish().expect("finish").expect("open");
    assert_eq!(done.rows, 5, "the refused batch was not written");
}

#[test]
fn a_prefix_with_a_separator_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    for prefix in ["", "a/b", ".hidden"] {
        let err = ParquetFileWriter::new(dir.path(), prefix, &sink_config(dir.path()), footer())
            .expect_err("bad prefix");
        assert!(matches!(err, ParquetSinkError::Prefix(_)), "{prefix:?}");
    }
}

#[test]
fn the_first_file_without_resume_at_starts_at_its_first_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut writer =
        ParquetFileWriter::new(dir.path(), "p", &sink_config(dir.path()), footer()).expect("new");
    writer.write(&records(7, 3, 8), 9).expect("write");
    let done = writer.finish().expect("finish").expect("open");
    assert!(done.path.ends_with("p-00000000000000000007.parquet"));
    assert!(done.path.parent().is_some_and(|p| p == dir.path()));
    let (batches, _) = read(&done.path);
    assert_eq!(batches[0].column(0).len(), 3);
}

#[test]
fn buffered_memory_stays_below_row_group_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = sink_config(dir.path());
    // Well above the encoders' fixed buffers (about 80 KiB for the seven leaf columns).
    let row_group_bytes = 1024 * 1024;
    config.encoding.row_group_bytes = ByteSize::new(row_group_bytes).expect("non-zero");
    let mut writer = ParquetFileWriter::new(dir.path(), "mem", &config, footer()).expect("new");
    let mut most = 0;
    for batch in 0..100 {
        // Writes of 50 KiB and, every tenth, one of 1.5 MiB (larger than a row group).
        let n = if batch % 10 == 9 { 1500 } else { 50 };
        let first = batch * 2000;
        writer
            .write(&records(first, n, 1024), first + 1999)
            .expect("write");
        most = most.max(writer.buffered_bytes());
        assert!(
            writer.buffered_bytes() < row_group_bytes,
            "{} buffered",
            writer.buffered_bytes()
        );
    }
    assert!(most > 0, "rows were buffered between flushes");
    let done = writer.finish().expect("finish").expect("open");
    assert_eq!(done.rows, 90 * 50 + 10 * 1500);
    assert_eq!(writer.buffered_bytes(), 0);
}

#[test]
fn a_failed_close_rewinds_so_the_range_can_be_sent_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut writer =
        ParquetFileWriter::new(dir.path(), "p", &sink_config(dir.path()), footer()).expect("new");
    writer.resume_at(0);
    writer.write(&records(0, 4, 8), 3).expect("write");
    writer.write(&records(4, 4, 8), 7).expect("write");
    // A directory where the file goes makes the rename fail.
    let final_path = dir.path().join("p-00000000000000000000.parquet");
    std::fs::create_dir(&final_path).expect("mkdir");
    std::fs::write(final_path.join("occupied"), b"x").expect("write");
    let err = writer.finish().expect_err("the rename fails");
    assert!(
        matches!(err, ParquetSinkError::Io { op: "rename", .. }),
        "{err}"
    );
    assert!(err.to_string().contains("cannot rename"), "{err}");
    assert!(writer.open_path().is_none());
    assert_eq!(
        file_names(dir.path()),
        ["p-00000000000000000000.parquet"],
        "the .tmp is gone"
    );

    // The driver re-sends from its committed cursor (0): accepted, same name.
    std::fs::remove_dir_all(&final_path).expect("rm");
    writer
        .write(&records(0, 8, 8), 7)
        .expect("offsets may go back to 0");
    let done = writer.finish().expect("finish").expect("open");
    assert_eq!(done.path, final_path);
    assert_eq!((done.through_offset, done.rows), (7, 8));
    // But not further back than the last commit.
    writer.write(&records(8, 2, 8), 9).expect("write");
    let err = writer
        .write(&records(3, 2, 8), 4)
        .expect_err("behind the commit");
    assert!(matches!(
        err,
        ParquetSinkError::OffsetRegression {
            previous: 9,
            found: 4
        }
    ));
}

#[test]
fn resume_at_rewinds_when_no_file_is_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut writer =
        ParquetFileWriter::new(dir.path(), "p", &sink_config(dir.path()), footer()).expect("new");
    writer.write(&records(0, 3, 8), 2).expect("write");
    writer.resume_at(100);
    assert!(writer.open_path().is_some(), "ignored while a file is open");
    writer.finish().expect("finish");
    writer.resume_at(1);
    let done = writer
        .write(&records(1, 2, 8), 2)
        .and_then(|_| writer.finish())
        .expect("rewound")
        .expect("open");
    assert!(done.path.ends_with("p-00000000000000000001.parquet"));
}
