//! `weir run CONFIG`: runs the pipeline until SIGTERM or SIGINT; SIGHUP reloads CONFIG.
//!
//! Logs go to stderr through a bounded, lossy writer (`WEIR_LOG` sets the level or
//! filter, default `info`; `--log-format json` or `WEIR_LOG_FORMAT=json` writes them as
//! JSON lines, configuration errors and warnings included). Exits 0 after a graceful shutdown; 1 with every configuration error (one per line
//! on stderr, each naming its key) or a startup failure; 128 + the signal on a second one (143 for SIGTERM).

use std::path::PathBuf;
use std::process::ExitCode;

use tracing::Level;

use crate::config::Config;
use crate::logging::{LogFormat, plain_line};

/// How long the exit waits for the log writer to write what is queued.
const LOG_FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Arguments of `weir run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The configuration file (TOML).
    pub config: PathBuf,
}

/// Runs `weir run`; `log_format` is the `--log-format` flag, if given.
pub fn run(args: RunArgs, log_format: Option<LogFormat>) -> anyhow::Result<ExitCode> {
    let format = LogFormat::from_flag_or_env(log_format).map_err(anyhow::Error::msg)?;
    let say = |level: Level, message: &str| match format {
        LogFormat::Text => {
            let prefix = if level == Level::ERROR {
                "error"
            } else {
                "warning"
            };
            eprintln!("{prefix}: {message}");
        }
        LogFormat::Json => eprintln!("{}", plain_line(level, "weir::config", message)),
    };
    let config = match Config::load(&args.config) {
        Ok(config) => config,
        Err(errors) => {
            for error in errors.errors() {
                say(Level::ERROR, &error.to_string());
            }
            let summary = format!("{}: invalid, not started", args.config.display());
            match format {
                LogFormat::Text => eprintln!("{summary}"),
                LogFormat::Json => say(Level::ERROR, &summary),
            }
            return Ok(ExitCode::from(1));
        }
    };
    for warning in config.warnings() {
        say(Level::WARN, &warning);
    }
    // Logs go through the bounded, lossy writer; WEIR_LOG sets the level (default info).
    let level = std::env::var("WEIR_LOG").unwrap_or_else(|_| "info".to_owned());
    let log = match crate::logging::init(
        &level,
        format,
        config.runtime.log_queue.get(),
        config.runtime.log_line_max_bytes.bytes(),
    ) {
        Ok(handle) => Some(handle),
        Err(e) => {
            say(
                Level::WARN,
                &format!("logging not set up ({e}); continuing without logs"),
            );
            None
        }
    };
    // Before the runtime's threads allocate: large buffers stay in their own
    // mappings, so RSS follows what is live (see runtime::malloc).
    crate::runtime::malloc::pin_thresholds();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("weir")
        .build()?;
    let result = runtime.block_on(crate::runtime::run(
        config,
        Some(args.config.clone()),
        log.clone(),
    ));
    // Blocking reads of stdin (file source "-") must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    // Outside the runtime: waiting for the log writer parks no async worker. A stalled
    // stderr (a paused terminal) holds the exit no longer than this.
    if let Some(log) = log {
        log.shutdown(LOG_FLUSH_TIMEOUT);
    }
    match (result, format) {
        (Ok(()), _) => Ok(ExitCode::SUCCESS),
        // The error as one more JSON line, not a line of text after them.
        (Err(e), LogFormat::Json) => {
            let message = crate::cmd::error_chain(&e);
            eprintln!("{}", plain_line(Level::ERROR, "weir", &message));
            Ok(ExitCode::FAILURE)
        }
        (Err(e), LogFormat::Text) => Err(e),
    }
}
