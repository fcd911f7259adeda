//! `type = "http"` (a sink): batches POSTed to an HTTP endpoint. Not built yet:
//! [`HttpSinkConfig`] reads and checks its keys, and the registry refuses the type.

mod config;

pub use self::config::HttpSinkConfig;
