//! The shell's count of closed files by reason.

use std::time::Duration as StdDuration;

use super::*;
use crate::keys::{ByteSize, Duration};
use crate::sinks::parquet::tests::{footer, records, sink_config};

fn batch(first: u64, n: u64) -> Arc<SinkBatch> {
    Arc::new(SinkBatch {
        records: records(first, n, 10),
        next_offset: first + n,
        bytes: 10 * n,
        ..SinkBatch::default()
    })
}

fn closes(sink: &ParquetSink) -> serde_json::Value {
    lock(&sink.state).closes.status()
}

#[tokio::test]
async fn closed_files_are_counted_by_size_age_and_shutdown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rejects = Vec::new();
    // Every write reaches 1 byte: closed by size.
    let mut config = sink_config(&dir.path().join("bytes"));
    config.rotate.bytes = ByteSize::new(1).expect("non-zero");
    let mut sink = ParquetSink::open("lake", &config, footer()).expect("open");
    sink.resume_at(0);
    sink.write(&batch(0, 5), &mut rejects).await.expect("write");
    sink.write(&batch(5, 5), &mut rejects).await.expect("write");
    sink.finish().await.expect("finish");
    assert_eq!(
        closes(&sink),
        serde_json::json!({"size": 2, "age": 0, "wal_share": 0, "shutdown": 0})
    );
    // A millisecond's age: closed by the tick after it, then one by shutdown.
    let mut config = sink_config(&dir.path().join("age"));
    config.rotate.age = Duration::new(StdDuration::from_millis(1));
    let mut sink = ParquetSink::open("lake", &config, footer()).expect("open");
    sink.resume_at(0);
    sink.write(&batch(0, 5), &mut rejects).await.expect("write");
    tokio::time::sleep(StdDuration::from_millis(20)).await;
    assert_eq!(sink.tick().await.expect("tick"), Some(5));
    sink.write(&batch(5, 5), &mut rejects).await.expect("write");
    assert_eq!(sink.finish().await.expect("finish"), Some(10));
    assert_eq!(
        closes(&sink),
        serde_json::json!({"size": 0, "age": 1, "wal_share": 0, "shutdown": 1})
    );
    assert!(rejects.is_empty());
}
