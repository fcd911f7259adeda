//! The `weir` command line.

use clap::{Parser, Subcommand};

mod cmd;
mod config;
mod logging;
mod quarantine;
mod record;
mod runtime;
mod sinks;
mod sources;
#[allow(
    dead_code,
    unused_imports,
    reason = "the telemetry's public API, partly used by the runtime"
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
    /// Run a pipeline: sources → WAL → sinks, until SIGTERM or SIGINT.
    Run(cmd::run::RunArgs),
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
        Command::Run(args) => cmd::run::run(args),
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
