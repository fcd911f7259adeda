//! One weir of a source test: its own directory and status address, a config with the
//! source under test, a file sink `out`, and optionally a required blackhole `gate`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::{Daemon, free_addr, write_config};

/// One weir instance: its directory and status address.
pub struct Instance {
    pub dir: PathBuf,
    pub status: SocketAddr,
}

impl Instance {
    /// `root/name`, created, with a free status address.
    pub fn new(root: &Path, name: &str) -> Instance {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).expect("weir dir");
        Instance {
            dir,
            status: free_addr(),
        }
    }

    /// The file sink's directory.
    pub fn out(&self) -> PathBuf {
        self.dir.join("out")
    }

    /// Writes the config: `[wal]` with `max_disk` (`block`), the source `source` with
    /// `keys` (its `type` included), a file sink `out`, and a required blackhole `gate`
    /// at `gate` records/s when given.
    pub fn config(&self, source: &str, keys: &str, max_disk: &str, gate: Option<u64>) -> PathBuf {
        let gate = gate
            .map(|r| {
                format!(
                    "[sinks.gate]\ntype = \"blackhole\"\ninputs = [\"{source}\"]\nread_batch_records = 10\nrate = {r}\n"
                )
            })
            .unwrap_or_default();
        let text = format!(
            r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "2s"

[wal]
max_disk = "{max_disk}"
segment_bytes = "256 KiB"
max_pending_bytes = "1 MiB"
on_full = "block"

[quarantine]
dir = "{quarantine}"

[sources.{source}]
{keys}

[sinks.out]
type = "file"
inputs = ["{source}"]
path = "{out}"

{gate}
"#,
            data = self.dir.join("data").display(),
            status = self.status,
            quarantine = self.dir.join("quarantine").display(),
            out = self.out().display(),
        );
        write_config(&self.dir, &text)
    }

    /// Starts `weir run` with `config`.
    pub fn start(&self, config: &Path) -> Daemon {
        Daemon::start(&self.dir, config, self.status, &[])
    }
}
