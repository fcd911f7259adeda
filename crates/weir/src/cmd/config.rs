//! `weir config reference` and `weir config example TYPE`: the configuration reference,
//! made from the key declarations of the code that parses them.

use std::process::ExitCode;

use crate::config::reference;

/// `weir config` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print every configuration key (type, default, unit, description, example) as markdown: docs/configuration.md.
    Reference,
    /// Print a commented TOML section for a source or sink type; a name that is both prints both, source/NAME or sink/NAME one.
    Example {
        /// The type: `generator`, `parquet`, `file`, `sink/file`, …
        #[arg(value_name = "TYPE")]
        type_name: String,
    },
}

/// Runs a `weir config` subcommand.
///
/// # Errors
///
/// `example` with a name that is no source or sink type: the message lists the types.
pub fn run(command: ConfigCommand) -> anyhow::Result<ExitCode> {
    match command {
        ConfigCommand::Reference => out!("{}", reference::markdown()),
        ConfigCommand::Example { type_name } => {
            let example = reference::example(&type_name).map_err(anyhow::Error::msg)?;
            out!("{example}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
