//! Typed Parquet against its yardsticks, in one run (`cargo bench -p weir --bench
//! typed`): telemetry records of six fields
//! (`{"device","temp","hum","ts","fw","ok"}`, about 110 bytes of JSON), with four
//! ratios:
//!
//! 1. **Decode**: weir's typed schema ([`weir::sinks::schema::Typed::decode`]: pointers,
//!    the `ts` timestamp in `unix_ms` through weir's own decoder, the required `device`
//!    checked) against arrow-json's `Decoder` alone on the same NDJSON with the same
//!    Arrow types (`ts` as a plain `Int64`): weir's typed encoding ÷ arrow-json, target
//!    ≥ 0.8.
//! 2. **Size**: Parquet files (zstd, the sink's defaults) typed with the same schema,
//!    and as the envelope with the payload (no schema): typed size ÷ envelope size,
//!    target ≤ 0.5.
//! 3. **Query**: DuckDB's `SELECT device, date_trunc('hour', ts) AS h, avg(temp) …
//!    GROUP BY ALL` over the typed file (where `ts` is a `TIMESTAMP WITH TIME ZONE`),
//!    against the same query over the envelope file with each field extracted from the
//!    payload (`json_extract…(decode(payload), '$.field')`, `ts` through `epoch_ms` cast
//!    to `TIMESTAMPTZ`, so that both truncate the same type to the hour), both in one
//!    Python process, each timed after one warm-up, the two
//!    alternating, their results checked equal: JSON time ÷ typed time, target ≥ 5. It
//!    runs `python3` from `PATH` (or `WEIR_BENCH_PYTHON`) with the `duckdb` module;
//!    without it, the bench says that this ratio was not measured and why.
//! 4. **Drain**: records/s a `parquet` sink stores when its whole input is already in
//!    the WAL (the sink is the bottleneck), through the daemon's path: the sink parsed
//!    from its TOML keys and opened as `weir run` opens it, driven by the sink driver
//!    (WAL reads, decoding, the blocking writer, rename, cursor commit) until it has
//!    drained the WAL's end. One WAL is filled once; a typed sink (the schema) and an
//!    envelope sink (none) drain it, each with its own cursor, the two alternating:
//!    typed ÷ envelope, target ≥ 0.5.
//!
//! `WEIR_BENCH_RECORDS` (default 1,000,000) and `WEIR_BENCH_ROUNDS` (default 5, medians
//! printed) set the size of the run. `WEIR_BENCH_MARKDOWN=1` adds a markdown row.
//! `WEIR_BENCH_KEEP=DIR` writes the two Parquet files of 2 and 3 there instead of a
//! temporary directory, and keeps them.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use arrow_schema::{DataType, Field, Schema};
use tokio::sync::watch;
use weir::keys::{Diagnostics, Section};
use weir::pipeline::SinkStats;
use weir::pipeline::driver::{self, Outcome, Phase};
use weir::quarantine::Quarantine;
use weir::record::Record;
use weir::sinks::parquet::{Compression, EncoderSettings, ParquetEncoder, ParquetEncoding};
use weir::sinks::schema::{SchemaConfig, Typed};
use weir::sinks::{SinkConfig, SinkContext};
use weir::telemetry::{ComponentKind, Telemetry};
use weir_wal::{Batch, CursorConfig, OnFull, SyncMode, Wal, WalConfig};

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

const SCHEMA: &str = r#"
schema.columns = [
  { name = "device", type = "string", required = true },
  { name = "temp", type = "float64" },
  { name = "hum", type = "float64" },
  { name = "ts", type = "timestamp", format = "unix_ms" },
  { name = "fw", type = "string" },
  { name = "ok", type = "bool" },
]
"#;

/// Rows per chunk handed to the encoders: the sink's `row_group_rows`.
const CHUNK: usize = 65_536;

fn schema() -> SchemaConfig {
    let table: toml::Table = toml::from_str(SCHEMA).expect("valid TOML");
    let diag = Diagnostics::default();
    let mut s = Section::new("sinks.lake".into(), &table, &diag);
    SchemaConfig::parse(&mut s, true, "").expect("a valid schema")
}

fn records(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| {
            let payload = format!(
                r#"{{"device":"dev-{:04}","temp":{:.2},"hum":{:.1},"ts":{},"fw":"1.{}.{}","ok":{}}}"#,
                i % 1000,
                15.0 + (i % 200) as f64 * 0.05,
                40.0 + (i % 50) as f64,
                1_733_500_000_000u64 + i as u64 * 250,
                i % 3,
                i % 7,
                i % 11 != 0
            );
            Record {
                source: "mqtt".into(),
                key: format!("devices/dev-{:04}/telemetry", i % 1000),
                timestamp_ms: 1_733_500_000_000 + i as i64,
                payload: bytes::Bytes::from(payload),
                attributes: vec![("mqtt.qos".into(), "1".into())],
            }
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// 1: the median seconds of weir's typed decoding and of arrow-json's `Decoder`.
fn decode_times(records: &[Record], rounds: usize) -> (f64, f64) {
    let typed = Typed::new(schema());
    let plain = Arc::new(Schema::new(vec![
        Field::new("device", DataType::Utf8, true),
        Field::new("temp", DataType::Float64, true),
        Field::new("hum", DataType::Float64, true),
        Field::new("ts", DataType::Int64, true),
        Field::new("fw", DataType::Utf8, true),
        Field::new("ok", DataType::Boolean, true),
    ]));
    let (mut weir_s, mut arrow_s) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        let mut rows = 0;
        for c in records.chunks(CHUNK) {
            let d = typed.decode(c).expect("decodes");
            rows += d.columns[0].len();
        }
        assert_eq!(rows, records.len());
        weir_s.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut rows = 0;
        for c in records.chunks(CHUNK) {
            let mut decoder = arrow_json::ReaderBuilder::new(Arc::clone(&plain))
                .with_batch_size(c.len())
                .build_decoder()
                .expect("a decoder");
            for r in c {
                decoder.decode(&r.payload).expect("JSON");
                decoder.decode(b"\n").expect("JSON");
            }
            rows += decoder.flush().expect("flush").expect("rows").num_rows();
        }
        assert_eq!(rows, records.len());
        arrow_s.push(t.elapsed().as_secs_f64());
    }
    (median(weir_s), median(arrow_s))
}

/// 2: encodes `records` into one Parquet file at `path` (typed with `schema`, else the
/// envelope) as the sink's encoder does; returns its size.
fn parquet_file(records: &[Record], schema: Option<&SchemaConfig>, path: &Path) -> usize {
    let encoding = ParquetEncoding {
        row_group_rows: (CHUNK as u32).try_into().expect("non-zero"),
        row_group_bytes: weir::keys::ByteSize::mib(8),
        compression: Compression::Zstd,
    };
    let settings = EncoderSettings::new(&encoding, schema);
    let mut encoder = ParquetEncoder::new(Vec::new(), &settings).expect("an encoder");
    let mut rejects = Vec::new();
    for c in records.chunks(CHUNK) {
        encoder.append(c, &mut rejects).expect("appends");
    }
    assert!(rejects.is_empty());
    let footer = weir::sinks::parquet::FooterMetadata {
        config_hash: "sha256:bench".into(),
        on_full: OnFull::Block,
    };
    let bytes = encoder
        .finish(&footer, 0, records.len() as u64)
        .expect("finishes");
    std::fs::write(path, &bytes).expect("write the Parquet file");
    bytes.len()
}

/// 3: the same aggregate over the typed columns and over the payload's JSON. Arguments:
/// the typed file, the envelope file, the rounds. Prints `ok <duckdb version> <typed s>
/// <JSON s> <groups>`, or `unavailable <why>` when `duckdb` cannot be imported.
const QUERIES: &str = r#"
import statistics, sys, time
try:
    import duckdb
except ImportError as e:
    print(f"unavailable {sys.executable} cannot import duckdb ({e}); pip install duckdb")
    sys.exit(0)

typed_file, envelope_file, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
quoted = lambda path: "'" + path.replace("'", "''") + "'"
typed = f"""SELECT device, date_trunc('hour', ts) AS h, avg(temp) AS t
FROM read_parquet({quoted(typed_file)}) GROUP BY ALL"""
payload = "decode(payload)"
json = f"""SELECT json_extract_string({payload}, '$.device') AS device,
  date_trunc('hour', CAST(epoch_ms(CAST(json_extract({payload}, '$.ts') AS BIGINT)) AS TIMESTAMPTZ)) AS h,
  avg(CAST(json_extract({payload}, '$.temp') AS DOUBLE)) AS t
FROM read_parquet({quoted(envelope_file)}) GROUP BY ALL"""
con = duckdb.connect()
con.execute("SET TimeZone = 'UTC'")

def run(name, query):
    # Materialized inside DuckDB: no conversion to Python objects is timed.
    started = time.perf_counter()
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {query}")
    return time.perf_counter() - started

run("typed", typed)
run("json", json)
times = {"typed": [], "json": []}
for _ in range(rounds):
    times["typed"].append(run("typed", typed))
    times["json"].append(run("json", json))
same = con.execute(
    "SELECT count(*) FROM typed t FULL JOIN json j USING (device, h) "
    "WHERE t.t IS NULL OR j.t IS NULL OR abs(t.t - j.t) > 1e-9"
).fetchone()[0]
groups = con.execute("SELECT count(*) FROM typed").fetchone()[0]
assert same == 0, f"{same} groups differ between the typed and the JSON query"
print("ok", duckdb.__version__, statistics.median(times["typed"]),
      statistics.median(times["json"]), groups)
"#;

/// What the DuckDB queries gave: the median seconds of the typed and the JSON query.
enum Queries {
    Measured {
        version: String,
        typed_s: f64,
        json_s: f64,
        groups: u64,
    },
    NotMeasured(String),
}

fn query_times(typed: &Path, envelope: &Path, rounds: usize) -> Queries {
    let python = std::env::var("WEIR_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let output = match Command::new(&python)
        .arg("-c")
        .arg(QUERIES)
        .arg(typed)
        .arg(envelope)
        .arg(rounds.to_string())
        .output()
    {
        Ok(output) => output,
        Err(e) => {
            return Queries::NotMeasured(format!(
                "{python} could not be run ({e}); put a python3 with duckdb on PATH or set WEIR_BENCH_PYTHON"
            ));
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let words: Vec<&str> = stdout.split_whitespace().collect();
    match words.as_slice() {
        ["ok", version, typed_s, json_s, groups] if output.status.success() => Queries::Measured {
            version: (*version).to_owned(),
            typed_s: typed_s.parse().expect("seconds"),
            json_s: json_s.parse().expect("seconds"),
            groups: groups.parse().expect("a count"),
        },
        ["unavailable", ..] => Queries::NotMeasured(stdout["unavailable ".len()..].trim().into()),
        _ => Queries::NotMeasured(format!(
            "{python} failed: {} {}",
            stdout.trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        )),
    }
}

/// 4: a WAL under `dir` declaring `cursors`, holding `records`. Filled with an fsync per
/// interval at most, then closed (which fsyncs) and opened again, so every record is
/// durable and readable.
async fn filled_wal(dir: &Path, records: &[Record], cursors: &[String]) -> Wal {
    let mut wire = Vec::new();
    let mut batches = Vec::new();
    let mut bytes = 0;
    for chunk in records.chunks(4096) {
        let mut batch = Batch::new();
        for r in chunk {
            wire.clear();
            r.encode_into(&mut wire);
            batch.push(&wire).expect("record size");
        }
        bytes += batch.encoded_len();
        batches.push(batch);
    }
    let config = |sync| {
        let mut builder = WalConfig::builder(dir.join("wal"))
            .max_disk(2 * bytes + (512 << 20))
            .on_full(OnFull::Block)
            .sync(sync);
        for name in cursors {
            builder = builder.cursor(name, CursorConfig::default());
        }
        builder.build().expect("WAL config")
    };
    let slowest = std::time::Duration::from_secs(60);
    let (wal, _) = Wal::open(config(SyncMode::Interval(slowest))).expect("WAL");
    for batch in batches {
        wal.append(batch).await.expect("append");
    }
    wal.close().await;
    let (wal, _) = Wal::open(config(SyncMode::Always)).expect("WAL");
    assert_eq!(wal.durable_end(), records.len() as u64);
    wal
}

/// A `[sinks.NAME]` section of `type = "parquet"` writing under `path`, with `extra`.
fn parquet_sink(name: &str, path: &Path, extra: &str) -> SinkConfig {
    let path = toml::Value::String(path.display().to_string());
    let text = format!("type = \"parquet\"\ninputs = [\"mqtt\"]\npath = {path}\n{extra}");
    let table: toml::Table = text.parse().expect("TOML");
    let diag = Diagnostics::default();
    let config = SinkConfig::parse(
        Section::new(format!("sinks.{name}"), &table, &diag),
        &["mqtt"],
    );
    let errors: Vec<String> = diag.into_errors().iter().map(ToString::to_string).collect();
    assert!(errors.is_empty(), "{errors:?}");
    config.expect("a valid sink")
}

/// Opens the sink `name` as `weir run` does and drives it until it has stored the WAL's
/// durable end; returns the seconds from the driver's start to its last commit.
async fn drain(wal: &Wal, dir: &Path, name: &str, config: &SinkConfig) -> f64 {
    let telemetry = Telemetry::new("sha256:bench".into());
    let quarantine =
        Quarantine::new(&dir.join("quarantine").join(name), 1 << 20).expect("quarantine");
    let (detail, unencodable) = (Arc::default(), Arc::default());
    let cx = SinkContext {
        stamp: weir::sinks::parquet::FooterMetadata {
            config_hash: "sha256:bench".into(),
            on_full: OnFull::Block,
        }
        .into(),
        wal: wal.clone(),
        data_dir: dir.join("data"),
        retry: config.retry,
        telemetry: telemetry.clone(),
        quarantine: quarantine.clone(),
        detail: Arc::clone(&detail),
        unencodable: Arc::clone(&unencodable),
    };
    let (kind, owned) = (config.kind.clone(), name.to_owned());
    let sink = tokio::task::spawn_blocking(move || kind.open(&owned, &cx))
        .await
        .expect("joined")
        .expect("open the sink");
    let mut stats = SinkStats::new(telemetry.component(ComponentKind::Sink, name));
    stats.detail = detail;
    stats.unencodable = unencodable;
    let stats = Arc::new(stats);
    let driver_config = config.driver_config(name);
    let end = wal.durable_end();
    let (_phase, phase) = watch::channel(Phase::Drain(end));
    let reader = wal.reader(name).expect("the sink's cursor");
    let started = Instant::now();
    // A task of its own, on the runtime's workers, as `weir run` spawns its drivers.
    let (_, outcome) = tokio::spawn(driver::run(
        driver_config,
        reader,
        sink,
        Arc::clone(&stats),
        phase,
        quarantine,
    ))
    .await
    .expect("the driver");
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(outcome, Outcome::Finished);
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(load(&stats.records), end, "sink {name} stored every record");
    assert_eq!(load(&stats.unencodable), 0);
    let cursor = wal.stats().cursors.into_iter().find(|c| c.name == name);
    assert_eq!(cursor.map(|c| c.committed), Some(end));
    elapsed
}

/// 4: the median seconds of the typed and the envelope sink draining one WAL holding
/// `records`, over `rounds` rounds whose order alternates.
async fn drain_times(records: &[Record], rounds: usize) -> (f64, f64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let cursors: Vec<String> = ["typed", "envelope"]
        .iter()
        .flat_map(|kind| (0..rounds).map(move |r| format!("{kind}-{r}")))
        .collect();
    let wal = filled_wal(dir.path(), records, &cursors).await;
    let (mut typed_s, mut envelope_s) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut order = [("typed", SCHEMA), ("envelope", "")];
        if round % 2 == 1 {
            order.reverse();
        }
        for (kind, extra) in order {
            let name = format!("{kind}-{round}");
            let out = dir.path().join("out").join(&name);
            let config = parquet_sink(&name, &out, extra);
            let seconds = drain(&wal, dir.path(), &name, &config).await;
            std::fs::remove_dir_all(&out).expect("remove the sink's files");
            match kind {
                "typed" => typed_s.push(seconds),
                _ => envelope_s.push(seconds),
            }
        }
    }
    wal.close().await;
    (median(typed_s), median(envelope_s))
}

fn main() {
    let n = env("WEIR_BENCH_RECORDS", 1_000_000usize);
    let rounds = env("WEIR_BENCH_ROUNDS", 5usize).max(1);
    // The allocator as `weir run` sets it.
    weir::runtime::malloc::pin_thresholds();
    let records = records(n);
    let (w, a) = decode_times(&records, rounds);

    let temp = tempfile::tempdir().expect("temp dir");
    let files: std::path::PathBuf =
        std::env::var("WEIR_BENCH_KEEP").map_or_else(|_| temp.path().into(), Into::into);
    let (typed_file, envelope_file) = (files.join("typed.parquet"), files.join("envelope.parquet"));
    let typed_bytes = parquet_file(&records, Some(&schema()), &typed_file);
    let envelope_bytes = parquet_file(&records, None, &envelope_file);
    let queries = query_times(&typed_file, &envelope_file, rounds);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (typed_drain, envelope_drain) = rt.block_on(drain_times(&records, rounds));

    println!("typed telemetry, {n} records of 6 fields, medians of {rounds} rounds");
    println!(
        "decode   weir typed {:>10.0} rec/s  arrow-json Decoder {:>10.0} rec/s  weir ÷ arrow-json {:.2} (target >= 0.8)",
        n as f64 / w,
        n as f64 / a,
        a / w
    );
    println!(
        "parquet  typed {:>10} B  envelope with payload {:>10} B  typed ÷ envelope {:.2} (target <= 0.5)",
        typed_bytes,
        envelope_bytes,
        typed_bytes as f64 / envelope_bytes as f64
    );
    let query_cells = match &queries {
        Queries::Measured {
            version,
            typed_s,
            json_s,
            groups,
        } => {
            println!(
                "duckdb   typed {:>8.1} ms  JSON from the payload {:>8.1} ms  JSON ÷ typed {:.1} (target >= 5; duckdb {version}, {groups} groups)",
                typed_s * 1e3,
                json_s * 1e3,
                json_s / typed_s
            );
            format!(
                "{:.1} | {:.1} | {:.1}",
                typed_s * 1e3,
                json_s * 1e3,
                json_s / typed_s
            )
        }
        Queries::NotMeasured(why) => {
            println!("duckdb   not measured: {why}");
            "— | — | —".to_owned()
        }
    };
    println!(
        "drain    typed sink {:>10.0} rec/s  envelope sink {:>10.0} rec/s  typed ÷ envelope {:.2} (target >= 0.5)",
        n as f64 / typed_drain,
        n as f64 / envelope_drain,
        envelope_drain / typed_drain
    );
    if env("WEIR_BENCH_MARKDOWN", 0u8) == 1 {
        println!(
            "| {n} | {:.0} | {:.0} | {:.2} | {typed_bytes} | {envelope_bytes} | {:.2} | {query_cells} | {:.0} | {:.0} | {:.2} |",
            n as f64 / w,
            n as f64 / a,
            a / w,
            typed_bytes as f64 / envelope_bytes as f64,
            n as f64 / typed_drain,
            n as f64 / envelope_drain,
            envelope_drain / typed_drain
        );
    }
}
