//! `weir wal inspect DIR`, `weir wal verify DIR` and `weir wal cursors DIR [--remove NAME]`.
//!
//! `inspect`, `verify` and `cursors` are read-only: they change nothing in the
//! directory, so they are safe on a WAL after a crash, before the daemon's recovery
//! runs. `cursors --remove` deletes one cursor file under the WAL directory's lock, so
//! it is refused while a daemon has the WAL open.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use weir_wal::tools::CursorsReport;

use crate::config::format_bytes;

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
    /// List the cursors (one per sink, by name) with their offset and lag; `--remove NAME` deletes one.
    Cursors {
        /// The WAL directory.
        dir: PathBuf,
        /// Delete this cursor's file (weir must be stopped): a sink of that name would
        /// start again from its `start_from`.
        #[arg(long, value_name = "NAME")]
        remove: Option<String>,
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
        WalCommand::Cursors { dir, remove: None } => {
            let report = weir_wal::tools::cursors(&dir)
                .with_context(|| format!("listing the cursors of {}", dir.display()))?;
            out!("{}", cursors_table(&report));
            Ok(ExitCode::SUCCESS)
        }
        WalCommand::Cursors {
            dir,
            remove: Some(name),
        } => {
            let lock =
                weir_wal::tools::lock(&dir).with_context(|| format!("removing cursor {name:?}"))?;
            let offset = lock
                .remove_cursor(&name)
                .with_context(|| format!("removing cursor {name:?}"))?;
            let at = offset.map_or_else(
                || "its file was unreadable".to_owned(),
                |o| format!("it was at offset {o}"),
            );
            out!(
                "removed cursor {name:?} from {} ({at}); a sink named {name:?} would start again from its start_from\n",
                dir.join("cursors").display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The cursors as a table: name, offset, and records and bytes behind the end.
fn cursors_table(report: &CursorsReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "WAL {}: offsets {}..{}",
        report.dir.display(),
        report.start,
        report.end
    );
    if report.in_use {
        let _ = writeln!(out, "  (open by a running weir: figures may be moving)");
    }
    if report.cursors.is_empty() {
        let _ = writeln!(out, "  no cursors");
        return out;
    }
    let width = report
        .cursors
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0)
        .max("cursor".len());
    let _ = writeln!(
        out,
        "  {:<width$} {:>20} {:>14} {:>12}",
        "cursor", "offset", "lag records", "lag bytes"
    );
    let shown = |n: Option<u64>, f: fn(u64) -> String| n.map_or_else(|| "-".to_owned(), f);
    for c in &report.cursors {
        let offset = c
            .offset
            .map_or_else(|| "unreadable".to_owned(), |o| o.to_string());
        let _ = writeln!(
            out,
            "  {:<width$} {offset:>20} {:>14} {:>12}",
            c.name,
            shown(c.lag_records, |n| n.to_string()),
            shown(c.lag_bytes, format_bytes),
        );
    }
    out
}
