//! Typed Parquet, end to end: device telemetry tailed from a file into a Parquet sink
//! with a declared schema, read back by DuckDB and pyarrow (`python3` from the test
//! environment: scripts/test.sh puts a virtualenv with both first on the PATH).

mod run_support;

use std::process::Command;
use std::time::Duration;

use run_support::{Daemon, free_addr, write_config};

/// The same devices as the issue's example, with values that do not fit.
fn telemetry() -> String {
    let mut lines = String::new();
    for i in 0..300u64 {
        let device = format!("d{}", i % 3);
        let ts = 1_733_500_000_000 + i * 60_000; // a minute apart, from 2024-12-06T15:46:40Z
        lines.push_str(&format!(
            "{{\"device\":\"{device}\",\"temp\":{},\"ts\":{ts},\"tags\":[\"a\",\"t{}\"],\"loc\":{{\"lat\":48.{i},\"lon\":11.5}},\"fw\":\"1.{}\"}}\n",
            20.0 + (i % 10) as f64 / 2.0,
            i % 2,
            i % 4
        ));
    }
    // A temperature that is not a number, a record without a device, a line that is
    // not JSON.
    lines.push_str("{\"device\":\"d9\",\"temp\":\"hot\",\"ts\":1733500000000}\n");
    lines.push_str("{\"temp\":1.0,\"ts\":1733500000000}\n");
    lines.push_str("garbage\n");
    lines
}

fn config(dir: &std::path::Path, status: std::net::SocketAddr, extra: &str) -> std::path::PathBuf {
    write_config(
        dir,
        &format!(
            r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "64 MiB"
segment_bytes = "4 MiB"
on_full = "block"

[sources.devices]
type = "file"
path = "{input}"

[sinks.lake]
type = "parquet"
inputs = ["devices"]
path = "{lake}"
rotate = {{ age = "1s" }}
row_group_rows = 100
schema.columns = [
  {{ name = "device", path = "/device", type = "string", required = true }},
  {{ name = "temp", path = "/temp", type = "float64" }},
  {{ name = "ts", path = "/ts", type = "timestamp", format = "unix_ms" }},
  {{ name = "tags", type = "list<string>" }},
  {{ name = "loc", type = "struct", columns = [
      {{ name = "lat", type = "float64" }}, {{ name = "lon", type = "float64" }} ] }},
]
event_time = {{ path = "/ts", format = "unix_ms" }}
{extra}
"#,
            data = dir.join("data").display(),
            input = dir.join("telemetry.log").display(),
            lake = dir.join("lake").display(),
        ),
    )
}

/// Runs weir until the sink has `stored` records and its files are closed.
fn run(extra: &str, stored: u64) -> (tempfile::TempDir, serde_json::Value) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("telemetry.log"), telemetry()).unwrap();
    let status = free_addr();
    let path = config(tmp.path(), status, extra);
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("the records stored", Duration::from_secs(20), |s| {
        s["sinks"]["lake"]["records"] == stored
    });
    let s = daemon.status();
    assert_eq!(daemon.stop(), Some(0));
    (tmp, s)
}

fn python(script: &str, lake: &std::path::Path) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(lake)
        .output()
        .expect("python3 runs (scripts/test.sh installs pyarrow and duckdb)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "python failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

const READ_BACK: &str = r#"
import sys, duckdb, pyarrow.parquet as pq, glob
lake = sys.argv[1]
files = sorted(glob.glob(lake + "/*.parquet"))
con = duckdb.connect()
rel = con.sql(f"SELECT * FROM read_parquet('{lake}/*.parquet')")
print("types", dict(zip(rel.columns, [str(t) for t in rel.types])))
print("rows", con.sql(f"SELECT count(*) FROM read_parquet('{lake}/*.parquet')").fetchall()[0][0])
q = f"""SELECT device, date_trunc('hour', ts) AS h, round(avg(temp), 3) AS t, count(*) AS n
        FROM read_parquet('{lake}/*.parquet') GROUP BY ALL ORDER BY device, h LIMIT 2"""
print("avg", con.sql(q).fetchall())
print("first", con.sql(f"SELECT timestamp = ts, tags, loc.lat FROM read_parquet('{lake}/*.parquet') ORDER BY ts LIMIT 1").fetchall())
# Row-group min/max, as DuckDB reads them (pyarrow 26 ignores float statistics written
# in parquet-format's IEEE 754 total order, which arrow-rs writes).
stats = {p: (lo is not None and hi is not None) for p, lo, hi in con.sql(
    f"SELECT path_in_schema, stats_min_value, stats_max_value FROM parquet_metadata('{files[0]}') WHERE row_group_id = 0").fetchall()}
print("stats", stats)
print("pyarrow rows", pq.read_table(files[0]).num_rows > 0)
"#;

#[test]
fn duckdb_reads_declared_types_with_statistics_and_the_misfits_are_quarantined() {
    let (tmp, s) = run("", 300);
    assert_eq!(
        s["sinks"]["lake"]["unencodable"], 3,
        "{:#}",
        s["sinks"]["lake"]
    );
    assert_eq!(
        s["sinks"]["lake"]["parquet"]["schema"]["rejected"], 3,
        "{:#}",
        s["sinks"]["lake"]
    );
    let out = python(READ_BACK, &tmp.path().join("lake"));
    for expected in [
        "'device': 'VARCHAR'",
        "'temp': 'DOUBLE'",
        "'ts': 'TIMESTAMP WITH TIME ZONE'",
        "'timestamp': 'TIMESTAMP WITH TIME ZONE'",
        "'tags': 'VARCHAR[]'",
        "'loc': 'STRUCT(lat DOUBLE, lon DOUBLE)'",
        "rows 300",
        "('d0', datetime.datetime(2024, 12, 6, 15, 0",
        "first [(True, ['a', 't0'], 48.0)]",
        "'temp': True",
        "'ts': True",
        "'device': True",
        "'loc, lat': True",
        "pyarrow rows True",
    ] {
        assert!(out.contains(expected), "no {expected:?} in:\n{out}");
    }
    assert!(
        !out.contains("'payload'"),
        "no payload column by default: {out}"
    );
    // The misfits are in the quarantine, each with its reason.
    let q =
        std::fs::read_to_string(tmp.path().join("data/quarantine/lake/quarantine.ndjson")).unwrap();
    let reasons: Vec<String> = q
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["reason"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:#?}");
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("column \"temp\" (/temp): the value is a JSON string")),
        "{reasons:#?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("\"device\" (/device) is required")),
        "{reasons:#?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("not JSON")),
        "{reasons:#?}"
    );
}

#[test]
fn on_mismatch_null_and_unknown_fields_extra() {
    let (tmp, s) = run("on_mismatch = \"null\"\nunknown_fields = \"extra\"", 301);
    assert_eq!(
        s["sinks"]["lake"]["parquet"]["schema"]["nulled"], 1,
        "{:#}",
        s["sinks"]["lake"]
    );
    let out = python(
        r#"
import sys, duckdb
lake = sys.argv[1]
con = duckdb.connect()
print(con.sql(f"SELECT device, temp FROM read_parquet('{lake}/*.parquet') WHERE device = 'd9'").fetchall())
print(con.sql(f"SELECT DISTINCT _extra FROM read_parquet('{lake}/*.parquet') WHERE device = 'd0' ORDER BY 1").fetchall())
"#,
        &tmp.path().join("lake"),
    );
    assert!(out.contains("[('d9', None)]"), "{out}");
    assert!(out.contains(r#"('{"fw":"1.0"}',)"#), "{out}");
}

#[test]
fn object_store_parquet_objects_are_typed_too() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("telemetry.log"), telemetry()).unwrap();
    let status = free_addr();
    let path = write_config(
        tmp.path(),
        &format!(
            r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "64 MiB"
segment_bytes = "4 MiB"
on_full = "block"

[sources.devices]
type = "file"
path = "{input}"

[sinks.objects]
type = "object_store"
inputs = ["devices"]
url = "file://{objects}"
rotate = {{ age = "1s" }}
schema.columns = [
  {{ name = "device", type = "string", required = true }},
  {{ name = "temp", type = "float64" }},
]
schema.envelope = ["timestamp"]
"#,
            data = tmp.path().join("data").display(),
            input = tmp.path().join("telemetry.log").display(),
            objects = tmp.path().join("objects").display(),
        ),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let s = daemon.wait_for("the records stored", Duration::from_secs(20), |s| {
        s["sinks"]["objects"]["records"] == 300
    });
    assert_eq!(daemon.stop(), Some(0));
    assert_eq!(
        s["sinks"]["objects"]["object_store"]["schema"]["rejected"], 3,
        "{:#}",
        s["sinks"]["objects"]
    );
    let out = python(
        r#"
import sys, duckdb
root = sys.argv[1]
rel = duckdb.sql(f"SELECT * FROM read_parquet('{root}/**/*.parquet')")
print(dict(zip(rel.columns, [str(t) for t in rel.types])))
print(duckdb.sql(f"SELECT count(*), count(temp) FROM read_parquet('{root}/**/*.parquet')").fetchall())
"#,
        &tmp.path().join("objects"),
    );
    // (DuckDB adds the dt= and hour= folders of the object names as columns.)
    assert!(
        out.contains(
            "{'timestamp': 'TIMESTAMP WITH TIME ZONE', 'device': 'VARCHAR', 'temp': 'DOUBLE', "
        ),
        "{out}"
    );
    assert!(out.contains("[(300, 300)]"), "{out}");
}
