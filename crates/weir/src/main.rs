//! The `weir` command line.

use clap::{Parser, Subcommand};

mod cmd;
mod config;
#[allow(dead_code, unused_imports, reason = "`weir run` installs it next")]
mod logging;
#[allow(
    dead_code,
    unused_imports,
    reason = "the daemon runtime hands it to the sinks next"
)]
mod quarantine;
#[allow(dead_code, reason = "the daemon runtime is built on it next")]
mod record;
#[allow(
    dead_code,
    unused_imports,
    reason = "the daemon runtime wires the sinks in next"
)]
mod sinks;
#[allow(
    dead_code,
    unused_imports,
    reason = "the daemon runtime registers its components and serves it next"
)]
mod telemetry;

/// weir: a backpressure-aware ingest pipeline.
#[derive(Debug, Parser)]
#[command(name = "weir", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the backpressure lab: simulated experiments on the real flow-control cores.
    Lab(cmd::lab::LabArgs),
    /// Check a configuration file and print every bound, the memory estimate and the disk budgets.
    Validate(cmd::validate::ValidateArgs),
    /// Ask a running daemon for its status: component states, queue fill, WAL and sinks.
    Status(cmd::status::StatusArgs),
    /// Inspect or verify a write-ahead log directory.
    #[command(subcommand)]
    Wal(cmd::wal::WalCommand),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Lab(args) => cmd::lab::run(args),
        Command::Validate(args) => cmd::validate::run(args),
        Command::Status(args) => cmd::status::run(args),
        Command::Wal(command) => cmd::wal::run(command),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
