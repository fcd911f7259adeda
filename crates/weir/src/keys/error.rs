//! Configuration errors: every problem found, each with the path of the key it is about.

use std::fmt;
use std::path::PathBuf;

/// One problem found in a configuration file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file that was asked for.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The file is not valid TOML; nothing past the syntax error was checked.
    #[error("line {line}, column {column}: invalid TOML: {message}")]
    Syntax {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        column: usize,
        /// What the TOML parser expected.
        message: String,
    },
    /// A key is missing, unknown, of the wrong type, out of range or inconsistent with
    /// another key.
    #[error("{path}: {message}")]
    Key {
        /// Dotted path of the key, e.g. `sinks.lake.rotate.bytes`.
        path: String,
        /// What was expected, what was found and what to do.
        message: String,
    },
}

impl ConfigError {
    /// The dotted key path this error is about, if it is about a key.
    pub fn path(&self) -> Option<&str> {
        match self {
            Self::Key { path, .. } => Some(path),
            Self::Read { .. } | Self::Syntax { .. } => None,
        }
    }
}

/// Every problem found in a configuration file, in the order the file was checked.
///
/// Never empty: a configuration with no problem parses into a
/// [`Config`](crate::config::Config).
#[derive(Debug)]
pub struct ConfigErrors {
    errors: Vec<ConfigError>,
}

impl ConfigErrors {
    /// Wraps a non-empty list of errors.
    pub fn new(errors: Vec<ConfigError>) -> Self {
        debug_assert!(
            !errors.is_empty(),
            "ConfigErrors must hold at least one error"
        );
        Self { errors }
    }

    /// The errors, in the order they were found.
    pub fn errors(&self) -> &[ConfigError] {
        &self.errors
    }
}

impl fmt::Display for ConfigErrors {
    /// One error per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Builds a [`ConfigError::Syntax`] from the TOML parser's error, turning its byte span
/// into a line and column.
pub fn syntax_error(text: &str, error: &toml::de::Error) -> ConfigError {
    let offset = error.span().map_or(0, |span| span.start).min(text.len());
    let before = text.get(..offset).unwrap_or_default();
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text
        .get(line_start..offset)
        .map_or(1, |prefix| prefix.chars().count() + 1);
    let message = error.message().trim().to_owned();
    if message.starts_with("duplicate key")
        && let Some(path) = duplicate_key_path(text, error.span())
    {
        return ConfigError::Key {
            path,
            message: format!("set twice (line {line} repeats it); keep one"),
        };
    }
    ConfigError::Syntax {
        line,
        column,
        message,
    }
}

/// The dotted path of the key (or table) a "duplicate key" error's span points at: the
/// last table header above it, then the key itself.
fn duplicate_key_path(text: &str, span: Option<std::ops::Range<usize>>) -> Option<String> {
    let span = span?;
    let key = text.get(span.clone())?.trim();
    let header = |line: &str| {
        let line = line.trim();
        let inner = line
            .strip_prefix("[[")
            .and_then(|l| l.split("]]").next())
            .or_else(|| line.strip_prefix('[').and_then(|l| l.split(']').next()))?;
        Some(
            inner
                .split('.')
                .map(|part| part.trim().trim_matches('"'))
                .collect::<Vec<_>>()
                .join("."),
        )
    };
    if key.starts_with('[') {
        // A table declared twice: the span is its header.
        return header(key);
    }
    let key = key.trim_matches('"');
    if key.is_empty() {
        return None;
    }
    let before = text.get(..span.start)?;
    let table = before.lines().rev().find_map(header);
    Some(match table {
        Some(table) if !table.is_empty() => format!("{table}.{key}"),
        _ => key.to_owned(),
    })
}
