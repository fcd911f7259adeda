//! One module per subcommand; each exposes its clap arguments and a `run` function
//! returning the process exit code.

pub mod lab;
pub mod run;
pub mod status;
pub mod validate;
pub mod wal;
