//! `weir wal inspect DIR` and `weir wal verify DIR`.
//!
//! Both are read-only: they change nothing in the directory, so they are safe on a WAL
//! after a crash, before the daemon's recovery runs.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

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
///
/// `verify` exits with status 1 when it finds corruption, after naming each damaged
/// segment and offset.
pub fn run(command: WalCommand) -> anyhow::Result<ExitCode> {
    match command {
        WalCommand::Inspect { dir } => {
            let report = weir_wal::tools::inspect(&dir)
                .with_context(|| format!("inspecting {}", dir.display()))?;
            out!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        WalCommand::Verify { dir } => {
            let report = weir_wal::tools::verify(&dir)
                .with_context(|| format!("verifying {}", dir.display()))?;
            out!("{report}");
            Ok(if report.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}
