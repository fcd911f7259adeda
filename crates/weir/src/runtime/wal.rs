//! The WAL as the configuration describes it: one cursor per sink.

use weir_wal::{CursorConfig, MaxLag, WalConfig};

use crate::config::Config;
use crate::sinks::SinkConfig;

/// The WAL configuration for `config`: its `[wal]` section and one cursor per sink,
/// named after the sink, with the sink's `required`, `max_lag` and `start_from`.
///
/// # Errors
///
/// The WAL's own checks ([`weir_wal::ConfigError`]), which the config model's validation
/// already makes unlikely.
pub fn wal_config(config: &Config) -> Result<WalConfig, weir_wal::ConfigError> {
    let wal = &config.wal;
    let mut builder = WalConfig::builder(&wal.dir)
        .max_disk(wal.max_disk.bytes())
        .on_full(wal.on_full)
        .segment_bytes(wal.segment_bytes.bytes())
        .max_pending_bytes(wal.max_pending_bytes.bytes())
        .sync(wal.sync);
    for (name, sink) in &config.sinks {
        builder = builder.cursor(name, cursor(sink));
    }
    builder.build()
}

/// The cursor of `sink`: its `required`, `max_lag` and `start_from`.
pub fn cursor(sink: &SinkConfig) -> CursorConfig {
    CursorConfig {
        required: sink.required,
        max_lag: MaxLag {
            bytes: sink.max_lag.and_then(|l| l.bytes).map(|b| b.bytes()),
            age: sink.max_lag.and_then(|l| l.age).map(|d| d.get()),
        },
        start_from: sink.start_from,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_cursor_per_sink_with_its_policy() {
        let config = Config::from_toml(
            r#"
            [runtime]
            data_dir = "/tmp/weir-test-never-created"
            [wal]
            max_disk = "64 MiB"
            segment_bytes = "1 MiB"
            on_full = "drop_oldest"
            [sources.g]
            type = "generator"
            rate = 1
            [sinks.a]
            type = "blackhole"
            inputs = ["g"]
            max_lag = { bytes = "8 MiB" }
            [sinks.b]
            type = "blackhole"
            inputs = ["g"]
            required = false
            start_from = "latest"
            "#,
        )
        .unwrap();
        let wal = wal_config(&config).unwrap();
        assert_eq!(wal.on_full(), weir_wal::OnFull::DropOldest);
        assert_eq!(wal.max_disk(), 64 << 20);
        assert_eq!(wal.segment_bytes(), 1 << 20);
        let a = cursor(&config.sinks["a"]);
        assert!(a.required);
        assert_eq!(a.max_lag.bytes, Some(8 << 20));
        let b = cursor(&config.sinks["b"]);
        assert!(!b.required);
        assert_eq!(b.start_from, weir_wal::StartFrom::Latest);
    }
}
