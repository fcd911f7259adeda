//! The `weir` command line.

use clap::{Parser, Subcommand};

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
    Lab,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Lab => {
            println!("weir lab: not built yet");
            Ok(())
        }
    }
}
