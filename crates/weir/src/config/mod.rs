//! weir's configuration: a typed model of the TOML file and its validation.
//!
//! Loading runs in two stages, as vector does, so that every problem is reported at once:
//!
//! 1. **Syntax.** The text is parsed into a [`toml::Table`]. A syntax error stops here
//!    and is reported with its line and column.
//! 2. **Typed walk.** Each section is read key by key into the types below
//!    ([`RuntimeConfig`], [`WalConfig`], [`SourceConfig`], [`SinkConfig`], …). Every
//!    problem — a missing or unknown key, a wrong type, a zero bound, a sink input that
//!    names no source, a duplicate listen address — is recorded with its dotted key path
//!    (`sinks.lake.rotate.bytes`) and the walk goes on. Unknown keys are refused
//!    everywhere (the equivalent of `deny_unknown_fields`), listing the allowed keys.
//!
//! Between the two, `${VAR}` and `${VAR:-default}` in string values are replaced by
//! environment variables ([`interpolate`]), on the parsed table: a variable's value is
//! only ever one string value, never TOML syntax.
//!
//! Only a file with no problem becomes a [`Config`]; otherwise [`ConfigErrors`] holds
//! them all. Defaults are filled in during the walk, so the model holds every value the
//! daemon will use. Sizes are [`ByteSize`] (positive, `"8 MiB"` or an integer of bytes),
//! durations [`Duration`] (`"30s"`, `"100ms"`).
//!
//! [`Config::inventory`] turns a configuration into the bound of every queue and the
//! worst-case memory estimate; [`Config::hash`] is the configuration's identity.
//!
//! Every key is declared once, where it is parsed ([`crate::keys::declare`]);
//! [`reference`] lists them all by walking the same parse functions in a documenting
//! mode, for `weir config reference` and `docs/configuration.md`.

mod check;
mod clash;
mod hash;
pub mod interpolate;
mod inventory;
mod orphans;
mod redact;
pub mod reference;
mod runtime;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::Serialize;

pub use self::hash::ConfigHash;
pub use self::inventory::{DiskBudget, Inventory};
pub use self::orphans::{Found, Refusal, Takeover};
pub use self::runtime::{QuarantineConfig, RuntimeConfig, WalConfig};
pub use crate::keys::{ByteSize, ConfigError, ConfigErrors, Duration, QueueBound, format_bytes};
pub use crate::sinks::{SinkConfig, SinkKind};
pub use crate::sources::{SourceConfig, SourceKind};

use crate::keys::error::syntax_error;
use crate::keys::{Diagnostics, Section};

/// A whole, valid weir configuration with every default filled in.
///
/// # Examples
///
/// ```
/// use weir::config::{ByteSize, Config};
/// use weir_wal::OnFull;
///
/// let config = Config::from_toml(r#"
///     [runtime]
///     data_dir = "./weir-data"
///     [wal]
///     max_disk = "1 GiB"
///     on_full = "block"
///     [sources.gen]
///     type = "generator"
///     rate = 5000
///     [sinks.lake]
///     type = "parquet"
///     inputs = ["gen"]
///     path = "./weir-out/lake"
/// "#)?;
/// assert_eq!(config.wal.on_full, OnFull::Block);
/// assert_eq!(config.wal.max_pending_bytes, ByteSize::mib(8));
/// # Ok::<(), weir::config::ConfigErrors>(())
/// ```
#[derive(Clone, PartialEq, Serialize)]
pub struct Config {
    /// `[runtime]`.
    pub runtime: RuntimeConfig,
    /// `[wal]`.
    pub wal: WalConfig,
    /// `[quarantine]` (all defaults when absent).
    pub quarantine: QuarantineConfig,
    /// `[sources.NAME]`, by name.
    pub sources: BTreeMap<String, SourceConfig>,
    /// `[sinks.NAME]`, by name.
    pub sinks: BTreeMap<String, SinkConfig>,
}

/// Largest configuration file read; a configuration is a few kilobytes.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

impl Config {
    /// Reads and validates the configuration file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigErrors> {
        let read_error = |source| {
            ConfigErrors::new(vec![ConfigError::Read {
                path: path.to_owned(),
                source,
            }])
        };
        let file = std::fs::File::open(path).map_err(read_error)?;
        let mut text = String::new();
        file.take(MAX_CONFIG_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(read_error)?;
        if text.len() as u64 > MAX_CONFIG_BYTES {
            return Err(read_error(std::io::Error::other(
                "the file is larger than 1 MiB; a weir configuration is a few kilobytes",
            )));
        }
        Self::from_toml(&text)
    }

    /// Validates configuration text, with `${VAR}` read from the process's environment;
    /// every problem found is in the error.
    pub fn from_toml(text: &str) -> Result<Self, ConfigErrors> {
        Self::from_toml_with_env(text, &interpolate::process_env)
    }

    /// [`Config::from_toml`] with `${VAR}` looked up by `env` (`None`: unset) instead of
    /// in the process's environment.
    ///
    /// # Examples
    ///
    /// ```
    /// use weir::config::{Config, SinkKind};
    ///
    /// let text = r#"
    ///     [runtime]
    ///     data_dir = "${DATA:-./weir-data}"
    ///     [wal]
    ///     max_disk = "1 GiB"
    ///     on_full = "block"
    ///     [sources.gen]
    ///     type = "generator"
    ///     rate = 0
    ///     [sinks.lake]
    ///     type = "object_store"
    ///     inputs = ["gen"]
    ///     url = "s3://${BUCKET}/weir"
    /// "#;
    /// let env = |name: &str| (name == "BUCKET").then(|| "lake".to_owned());
    /// let config = Config::from_toml_with_env(text, &env)?;
    /// assert_eq!(config.runtime.data_dir.to_str(), Some("./weir-data"));
    /// let SinkKind::ObjectStore(lake) = &config.sinks["lake"].kind else { unreachable!() };
    /// assert_eq!(lake.url, "s3://lake/weir");
    ///
    /// let unset = Config::from_toml_with_env(text, &|_: &str| None).unwrap_err();
    /// assert!(unset.to_string().starts_with("sinks.lake.url: the environment variable BUCKET is not set"));
    /// # Ok::<(), weir::config::ConfigErrors>(())
    /// ```
    pub fn from_toml_with_env(text: &str, env: interpolate::Env<'_>) -> Result<Self, ConfigErrors> {
        let mut table: toml::Table = text
            .parse()
            .map_err(|e| ConfigErrors::new(vec![syntax_error(text, &e)]))?;
        // Every configuration a unit test reads also checks that the reference lists
        // each key it reads.
        #[cfg(test)]
        reference::assert_documented(text);
        let mut errors = interpolate::interpolate(&mut table, env);
        let diag = Diagnostics::default();
        let config = Self::walk(&table, &diag);
        // A value left as written by a failed interpolation is not checked again.
        let failed: Vec<String> = errors
            .iter()
            .filter_map(|e| e.path().map(str::to_owned))
            .collect();
        errors.extend(diag.into_errors().into_iter().filter(|e| {
            e.path()
                .is_none_or(|walked| !failed.iter().any(|f| interpolate::follows_from(walked, f)))
        }));
        if let Some(config) = &config {
            check::cross_check(config, &mut errors);
        }
        match config {
            Some(config) if errors.is_empty() => Ok(config),
            _ => Err(ConfigErrors::new(errors)),
        }
    }

    /// Stage 2: reads every section, recording problems in `diag`.
    fn walk(table: &toml::Table, diag: &Diagnostics) -> Option<Self> {
        let mut root = Section::new(String::new(), table, diag);
        let runtime = root.table_or_empty("runtime").and_then(|mut s| {
            let runtime = RuntimeConfig::parse(&mut s);
            s.finish();
            runtime
        });
        let data_dir = runtime.as_ref().map(|r| &r.data_dir);
        let wal = root.table_or_empty("wal").and_then(|mut s| {
            let wal = WalConfig::parse(&mut s, data_dir);
            s.finish();
            wal
        });
        let quarantine = root.table_or_empty("quarantine").and_then(|mut s| {
            let quarantine = QuarantineConfig::parse(&mut s, data_dir);
            s.finish();
            quarantine
        });

        let source_tables = root.named_tables("sources");
        let source_names: Vec<&str> = source_tables.iter().map(|(name, _)| *name).collect();
        let mut sources = BTreeMap::new();
        let mut sources_ok = true;
        for (name, section) in source_tables {
            check::check_name(&section, "source", name);
            match SourceConfig::parse(section, name) {
                Some(source) => {
                    sources.insert(name.to_owned(), source);
                }
                None => sources_ok = false,
            }
        }
        let mut sinks = BTreeMap::new();
        let mut sinks_ok = true;
        for (name, section) in root.named_tables("sinks") {
            check::check_name(&section, "sink", name);
            match SinkConfig::parse(section, &source_names) {
                Some(sink) => {
                    sinks.insert(name.to_owned(), sink);
                }
                None => sinks_ok = false,
            }
        }
        if sources_ok && sources.is_empty() {
            root.error(
                "sources",
                "no sources configured; add one, e.g. [sources.gen] with type = \"generator\"",
            );
        }
        if sinks_ok && sinks.is_empty() {
            root.error("sinks", "no sinks configured; add one, e.g. [sinks.out] with type = \"blackhole\" and inputs = [\"gen\"]");
        }
        root.finish();
        Some(Self {
            runtime: runtime?,
            wal: wal?,
            quarantine: quarantine?,
            sources: sources_ok.then_some(sources)?,
            sinks: sinks_ok.then_some(sinks)?,
        })
    }
}
