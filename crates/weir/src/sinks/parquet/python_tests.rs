//! The files open in pyarrow and DuckDB, the two readers users reach for first.
//!
//! Needs `python3` with `pyarrow` and `duckdb`; `scripts/test.sh` installs them
//! (`pip install pyarrow duckdb`) when they are missing.

use std::process::Command;

use super::tests::{footer, records, sink_config};
use super::*;
use crate::keys::ByteSize;
use crate::sinks::parquet::Compression;

/// Reads every file of a directory with pyarrow and with DuckDB and checks rows, types,
/// values and the footer metadata. Arguments: the directory, the expected row count.
const READ_BACK: &str = r#"
import glob, json, sys
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

directory, expected_rows = sys.argv[1], int(sys.argv[2])
files = sorted(glob.glob(directory + "/*.parquet"))
assert len(files) == 3, files

table = pa.concat_tables([pq.read_table(f) for f in files])
assert table.num_rows == expected_rows, table.num_rows
schema = table.schema
assert schema.field("source").type == pa.string(), schema
assert schema.field("timestamp").type == pa.timestamp("ms", tz="UTC"), schema
assert schema.field("payload").type == pa.binary(), schema
assert pa.types.is_map(schema.field("attributes").type), schema
rows = table.to_pylist()
assert rows[0]["key"] == "key-0", rows[0]
assert rows[3]["attributes"] == [("n", "3")], rows[3]
assert rows[1]["payload"] == bytes([1] * 32), rows[1]

meta = pq.read_metadata(files[1]).metadata
assert meta[b"weir.config_hash"] == b"sha256:0123abcd", meta
assert meta[b"weir.on_full"] == b"drop_oldest", meta
assert json.loads(meta[b"weir.source_names"]) == ["gen", "mqtt"], meta

con = duckdb.connect()
pattern = directory + "/*.parquet"
count, distinct_sources, last_ts = con.execute(
    "SELECT count(*), count(DISTINCT source), max(epoch_ms(timestamp)) FROM read_parquet(?)",
    [pattern],
).fetchone()
assert count == expected_rows, count
assert distinct_sources == 2, distinct_sources
assert last_ts == 1_700_000_000_000 + expected_rows - 1, last_ts
with_attributes = con.execute(
    "SELECT count(*) FROM read_parquet(?) WHERE cardinality(attributes) > 0", [pattern]
).fetchone()[0]
assert with_attributes == (expected_rows + 2) // 3, with_attributes
kv = dict(
    (k.decode(), v.decode())
    for k, v in con.execute(
        "SELECT key, value FROM parquet_kv_metadata(?)", [files[0]]
    ).fetchall()
)
assert kv["weir.on_full"] == "drop_oldest", kv
assert kv["weir.first_offset"] == "0", kv
print(f"ok: {count} rows in {len(files)} files read by pyarrow {pa.__version__} and duckdb {duckdb.__version__}")
"#;

/// Runs the Python `script` with `args` (`python3` from the PATH, which needs pyarrow
/// and duckdb); returns what it printed, failing with its output if it failed.
pub(crate) fn run_python(script: &str, args: &[&str]) -> String {
    let output = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs; install it, then `pip install pyarrow duckdb`");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "reading weir's Parquet files from Python failed (missing modules? run \
         `pip install pyarrow duckdb`):\nstdout: {stdout}\nstderr: {stderr}"
    );
    stdout
}

#[test]
fn files_open_in_pyarrow_and_duckdb() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = sink_config(dir.path());
    config.encoding.row_group_rows = 16.try_into().expect("non-zero");
    config.encoding.compression = Compression::Zstd;
    config.rotate.bytes = ByteSize::new(1).expect("non-zero");
    let mut writer = ParquetFileWriter::new(dir.path(), "lake", &config, footer()).expect("new");
    writer.resume_at(0);
    // Three files (every write rotates at 1 byte) of 40 rows, several row groups each.
    for batch in 0..3 {
        let first = batch * 40;
        writer
            .write(&records(first, 40, 32), first + 39)
            .expect("write")
            .expect("rotated");
    }
    let dir_arg = dir.path().display().to_string();
    let stdout = run_python(READ_BACK, &[&dir_arg, "120"]);
    assert!(stdout.starts_with("ok: 120 rows in 3 files"), "{stdout}");
}
