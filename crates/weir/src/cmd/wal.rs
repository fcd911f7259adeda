//! `weir wal inspect DIR` and `weir wal verify DIR`.

use std::path::PathBuf;
use std::process::ExitCode;

/// `weir wal` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum WalCommand {
    /// Show segments, record counts, offsets, cursors and lag.
    Inspect {
        /// The WAL directory.
        dir: PathBuf,
    },
    /// Check every record's CRC; exits non-zero on corruption.
    Verify {
        /// The WAL directory.
        dir: PathBuf,
    },
}

/// Runs a `weir wal` subcommand.
pub fn run(_command: WalCommand) -> anyhow::Result<ExitCode> {
    anyhow::bail!("weir wal is not built yet")
}
