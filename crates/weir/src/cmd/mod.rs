//! One module per subcommand; each exposes its clap arguments and a `run` function
//! returning the process exit code. [`main`] parses the command line and dispatches.

/// `print!` for the subcommands: a closed stdout (`weir wal verify DIR | head -1`) ends
/// the output quietly, and the command still exits with its own status; any other
/// write error is returned (`?`).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cmd::write_stdout(format_args!($($arg)*))?
    };
}

pub mod config;
pub mod human;
pub mod lab;
pub mod reload;
pub mod run;
pub mod status;
pub mod top;
pub mod validate;
pub mod wal;

use clap::{Parser, Subcommand};

use crate::logging::LogFormat;
/// What `weir --version` prints after the name: the package version and the git commit
/// it was built from (`unknown` for a build outside a git checkout).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("WEIR_GIT_COMMIT"),
    ")"
);

/// weir: a backpressure-aware ingest pipeline.
#[derive(Debug, Parser)]
#[command(name = "weir", version = VERSION, about)]
pub struct Cli {
    /// How `weir run` writes its logs to stderr: `text`, or `json` (one object a line,
    /// with ts, level, target, component and message). Default: $WEIR_LOG_FORMAT, else
    /// text.
    #[arg(long, global = true, value_name = "text|json", value_parser = parse_log_format)]
    log_format: Option<LogFormat>,
    #[command(subcommand)]
    command: Command,
}

fn parse_log_format(text: &str) -> Result<LogFormat, String> {
    text.parse()
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the backpressure lab: simulated experiments on the real flow-control cores.
    Lab(lab::LabArgs),
    /// Check a configuration file and print every bound, the memory estimate and the disk budgets.
    Validate(validate::ValidateArgs),
    /// Run a pipeline: sources → WAL → sinks, until SIGTERM or SIGINT; SIGHUP reloads its configuration.
    Run(run::RunArgs),
    /// Make a running daemon read its configuration file again and apply what changed.
    Reload(reload::ReloadArgs),
    /// Ask a running daemon for its status: component states, queue fill, WAL and sinks.
    Status(status::StatusArgs),
    /// Watch a running daemon in the terminal: components, rates, queue fill, WAL budget, sink lag.
    Top(top::TopArgs),
    /// Inspect or verify a write-ahead log directory.
    #[command(subcommand)]
    Wal(wal::WalCommand),
    /// Print the configuration reference, or a commented example of a source or sink type.
    #[command(subcommand)]
    Config(config::ConfigCommand),
}

/// Writes `args` to stdout and flushes; a broken pipe is not an error (the reader has
/// seen all it wanted), so nothing more is written and the caller carries on.
///
/// # Errors
///
/// Any other write error.
pub fn write_stdout(args: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_fmt(args).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Parses the process's arguments, runs the subcommand, and returns its exit code
/// (printing an error first when it failed).
pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Lab(args) => lab::run(args),
        Command::Run(args) => run::run(args, cli.log_format),
        Command::Reload(args) => reload::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Status(args) => status::run(args),
        Command::Top(args) => top::run(args),
        Command::Wal(command) => wal::run(command),
        Command::Config(command) => config::run(command),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {}", error_chain(&err));
            std::process::ExitCode::FAILURE
        }
    }
}

/// `{err:#}` without repeats: an error whose message already ends with its source's
/// text (`reading X: No such file (os error 2)`, as most `thiserror` messages do) does
/// not print the source again.
pub fn error_chain(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_os_error_embedded_in_its_context_is_printed_once() {
        let os = std::io::Error::from_raw_os_error(2);
        let text = os.to_string();
        let wal = weir_wal::OpenError::Io {
            action: "opening",
            path: "/nope/wal".into(),
            source: os,
        };
        let err = anyhow::Error::new(wal).context("opening the WAL (wal.dir)");
        let shown = error_chain(&err);
        assert_eq!(shown.matches(&text).count(), 1, "{shown}");
        assert_eq!(
            shown,
            format!("opening the WAL (wal.dir): opening /nope/wal: {text}")
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_chain(&plain), "outer: inner");
    }
}
