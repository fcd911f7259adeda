//! `weir validate CONFIG`.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `weir validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The configuration file (TOML).
    pub config: PathBuf,
}

/// Runs `weir validate`.
pub fn run(_args: ValidateArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("weir validate is not built yet")
}
