//! Property test: whatever the batch sizes and limits, every record lands in exactly
//! one committed file, in order, and the files tile the WAL offsets.

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use proptest::prelude::*;

use super::tests::{file_names, footer, footer_value, read, records, sink_config};
use super::*;
use crate::keys::ByteSize;

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever the batch sizes, row-group and rotation limits: every record is in
    /// exactly one committed file, in order, and the files' offset ranges tile the
    /// WAL without gaps or overlaps.
    #[test]
    fn every_record_lands_once_in_contiguous_files(
        batches in proptest::collection::vec(1u64..40, 1..12),
        row_group_rows in 1u32..50,
        rotate_bytes in 1u64..20_000,
        payload_bytes in 0usize..200,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = sink_config(dir.path());
        config.encoding.row_group_rows = row_group_rows.try_into().expect("non-zero");
        config.rotate.bytes = ByteSize::new(rotate_bytes).expect("non-zero");
        let mut writer = ParquetFileWriter::new(dir.path(), "p", &config, footer()).expect("new");
        writer.resume_at(0);
        let mut committed = Vec::new();
        let mut next = 0;
        for n in &batches {
            committed.extend(writer.write(&records(next, *n, payload_bytes), next + n - 1).expect("write"));
            next += n;
        }
        committed.extend(writer.finish().expect("finish"));

        let mut expected_first = 0;
        let mut keys = Vec::new();
        for file in &committed {
            let (batches, metadata) = read(&file.path);
            prop_assert_eq!(footer_value(&metadata, KEY_FIRST_OFFSET), Some(expected_first.to_string()));
            prop_assert_eq!(footer_value(&metadata, KEY_LAST_OFFSET), Some(file.through_offset.to_string()));
            for group in metadata.row_groups() {
                prop_assert!(group.num_rows() <= i64::from(row_group_rows));
            }
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            prop_assert_eq!(rows as u64, file.rows);
            for batch in &batches {
                let column = batch.column(1).as_string::<i32>();
                keys.extend((0..column.len()).map(|i| column.value(i).to_owned()));
            }
            expected_first = file.through_offset + 1;
        }
        prop_assert_eq!(expected_first, next, "the files cover every offset");
        let expected: Vec<String> = (0..next).map(|i| format!("key-{i}")).collect();
        prop_assert_eq!(keys, expected);
        prop_assert_eq!(file_names(dir.path()).len(), committed.len(), "no .tmp left");
    }
}
