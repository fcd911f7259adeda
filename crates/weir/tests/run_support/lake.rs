//! What the object-store sink's end-to-end tests share, whatever the store (S3 through
//! s3s-fs, Azure through Azurite): starting weir with the store's credentials in its
//! environment, and reading the sink `lake`'s progress from `/status`.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::{Daemon, write_config};

/// Starts `weir run` on the config `text` with `env` (the store's credentials).
pub fn start(dir: &Path, text: &str, status: SocketAddr, env: &[(&'static str, String)]) -> Daemon {
    let path = write_config(dir, text);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Daemon::start(dir, &path, status, &env)
}

/// The WAL's durable end.
pub fn durable_end(status: &serde_json::Value) -> u64 {
    status["wal"]["durable_end"].as_u64().unwrap_or(0)
}

/// The sink's committed cursor.
pub fn committed(status: &serde_json::Value) -> u64 {
    status["sinks"]["lake"]["cursor"]["committed"]
        .as_u64()
        .unwrap_or(0)
}

/// One of the sink's `/status` object-store details.
pub fn details(status: &serde_json::Value, key: &str) -> u64 {
    status["sinks"]["lake"]["object_store"][key]
        .as_u64()
        .unwrap_or(0)
}

/// Waits until the sink's cursor has reached a durable end that no longer moves
/// (`total`, when given).
pub fn wait_caught_up(daemon: &Daemon, total: Option<u64>, timeout: Duration) -> serde_json::Value {
    daemon.wait_for("the sink to catch up", timeout, |s| {
        let end = durable_end(s);
        end > 0 && committed(s) == end && total.is_none_or(|t| end == t)
    })
}
