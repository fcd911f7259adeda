//! `weir lab`: the backpressure lab.

use std::process::ExitCode;

/// Arguments of `weir lab`.
#[derive(Debug, clap::Args)]
pub struct LabArgs {}

/// Runs `weir lab`.
pub fn run(_args: LabArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("weir lab is not built yet")
}
