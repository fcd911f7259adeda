//! One module per subcommand; each exposes its clap arguments and a `run` function
//! returning the process exit code. [`main`] parses the command line and dispatches.

pub mod lab;
pub mod run;
pub mod status;
pub mod validate;
pub mod wal;

use clap::{Parser, Subcommand};

/// weir: a backpressure-aware ingest pipeline.
#[derive(Debug, Parser)]
#[command(name = "weir", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the backpressure lab: simulated experiments on the real flow-control cores.
    Lab(lab::LabArgs),
    /// Check a configuration file and print every bound, the memory estimate and the disk budgets.
    Validate(validate::ValidateArgs),
    /// Run a pipeline: sources → WAL → sinks, until SIGTERM or SIGINT.
    Run(run::RunArgs),
    /// Ask a running daemon for its status: component states, queue fill, WAL and sinks.
    Status(status::StatusArgs),
    /// Inspect or verify a write-ahead log directory.
    #[command(subcommand)]
    Wal(wal::WalCommand),
}

/// Parses the process's arguments, runs the subcommand, and returns its exit code
/// (printing an error first when it failed).
pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Lab(args) => lab::run(args),
        Command::Run(args) => run::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Status(args) => status::run(args),
        Command::Wal(command) => wal::run(command),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
