//! Typed Parquet against its yardsticks, in one run (`cargo bench -p weir --bench
//! typed`): telemetry records of six fields
//! (`{"device","temp","hum","ts","fw","ok"}`, about 110 bytes of JSON), encoded
//!
//! - by weir's typed schema ([`weir::sinks::schema::Typed::decode`]: pointers, the
//!   `ts` timestamp in `unix_ms` through weir's own decoder, the required `device`
//!   checked), against arrow-json's `Decoder` alone on the same NDJSON with the same
//!   Arrow types (`ts` as a plain `Int64`): weir's typed encoding ÷ arrow-json,
//!   target ≥ 0.8;
//! - into Parquet files (zstd, the sink's defaults) typed with the same schema, and as
//!   the envelope with the payload (no schema): typed size ÷ envelope size, target
//!   ≤ 0.5.
//!
//! `WEIR_BENCH_RECORDS` (default 1,000,000) and `WEIR_BENCH_ROUNDS` (default 5, medians
//! printed) set the size of the run. `WEIR_BENCH_MARKDOWN=1` adds a markdown row.

use std::sync::Arc;
use std::time::Instant;

use arrow_schema::{DataType, Field, Schema};
use weir::keys::{Diagnostics, Section};
use weir::record::Record;
use weir::sinks::parquet::{Compression, EncoderSettings, ParquetEncoder, ParquetEncoding};
use weir::sinks::schema::{SchemaConfig, Typed};

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

fn main() {
    let n = env("WEIR_BENCH_RECORDS", 1_000_000usize);
    let rounds = env("WEIR_BENCH_ROUNDS", 5usize);
    let records = records(n);
    let chunk = 65_536; // the sink's row_group_rows
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
        for c in records.chunks(chunk) {
            let d = typed.decode(c).expect("decodes");
            rows += d.columns[0].len();
        }
        assert_eq!(rows, n);
        weir_s.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut rows = 0;
        for c in records.chunks(chunk) {
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
        assert_eq!(rows, n);
        arrow_s.push(t.elapsed().as_secs_f64());
    }
    let (w, a) = (median(weir_s), median(arrow_s));
    let size = |schema: Option<&SchemaConfig>| {
        let encoding = ParquetEncoding {
            row_group_rows: 65_536.try_into().expect("non-zero"),
            row_group_bytes: weir::keys::ByteSize::mib(8),
            compression: Compression::Zstd,
        };
        let settings = EncoderSettings::new(&encoding, schema);
        let mut encoder = ParquetEncoder::new(Vec::new(), &settings).expect("an encoder");
        let mut rejects = Vec::new();
        for c in records.chunks(chunk) {
            encoder.append(c, &mut rejects).expect("appends");
        }
        assert!(rejects.is_empty());
        let footer = weir::sinks::parquet::FooterMetadata {
            config_hash: "sha256:bench".into(),
            on_full: weir_wal::OnFull::Block,
        };
        let bytes = encoder.finish(&footer, 0, n as u64).expect("finishes");
        if let Ok(dir) = std::env::var("WEIR_BENCH_KEEP") {
            let name = if schema.is_some() {
                "typed"
            } else {
                "envelope"
            };
            std::fs::write(format!("{dir}/{name}.parquet"), &bytes).expect("write");
        }
        bytes.len()
    };
    let typed_bytes = size(Some(&schema()));
    let envelope_bytes = size(None);
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
    if env("WEIR_BENCH_MARKDOWN", 0u8) == 1 {
        println!(
            "| {n} | {:.0} | {:.0} | {:.2} | {typed_bytes} | {envelope_bytes} | {:.2} |",
            n as f64 / w,
            n as f64 / a,
            a / w,
            typed_bytes as f64 / envelope_bytes as f64
        );
    }
}
