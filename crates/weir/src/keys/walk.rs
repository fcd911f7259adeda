//! The second stage of loading: a typed walk over the parsed TOML table that records
//! every problem with its key path instead of stopping at the first one.
//!
//! A [`Section`] wraps one TOML table. Reading a key marks it known; [`Section::finish`]
//! reports every key nobody asked for as unknown, listing the known ones, so the list of
//! allowed keys in an error can never drift from what is actually read.

use std::cell::RefCell;

use toml::{Table, Value};

use super::error::ConfigError;
use super::units::{FromValue, describe};

/// Collects errors during a walk.
#[derive(Debug, Default)]
pub struct Diagnostics {
    errors: RefCell<Vec<ConfigError>>,
}

impl Diagnostics {
    /// Records an error about the key at `path`.
    pub fn error(&self, path: &str, message: impl Into<String>) {
        self.errors.borrow_mut().push(ConfigError::Key {
            path: path.to_owned(),
            message: message.into(),
        });
    }

    /// The errors recorded so far.
    pub fn into_errors(self) -> Vec<ConfigError> {
        self.errors.into_inner()
    }
}

/// Joins a parent path and a key, quoting keys that are not bare TOML keys.
pub fn join(parent: &str, key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let key = if bare {
        key.to_owned()
    } else {
        format!("{key:?}")
    };
    if parent.is_empty() {
        key
    } else {
        format!("{parent}.{key}")
    }
}

/// One TOML table being read.
pub struct Section<'a> {
    path: String,
    table: &'a Table,
    known: Vec<&'static str>,
    diag: &'a Diagnostics,
}

/// An empty table, walked in place of a missing section so its required keys are
/// reported as missing one by one.
static EMPTY: std::sync::LazyLock<Table> = std::sync::LazyLock::new(Table::new);

impl<'a> Section<'a> {
    /// A section over `table`, whose own path is `path` (empty for the root).
    pub fn new(path: String, table: &'a Table, diag: &'a Diagnostics) -> Self {
        Self {
            path,
            table,
            known: Vec::new(),
            diag,
        }
    }

    /// The dotted path of `key` in this section.
    pub fn key_path(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// The collector errors go to.
    pub fn diagnostics(&self) -> &'a Diagnostics {
        self.diag
    }

    /// Records an error about `key` of this section.
    pub fn error(&self, key: &str, message: impl Into<String>) {
        self.diag.error(&self.key_path(key), message);
    }

    /// Whether any of `keys` of this section already has an error: it then holds a
    /// stand-in default, and a check that compares it with another key is skipped.
    pub fn failed(&self, keys: &[&str]) -> bool {
        let errors = self.diag.errors.borrow();
        keys.iter().any(|key| {
            let path = self.key_path(key);
            errors.iter().any(|e| e.path() == Some(path.as_str()))
        })
    }

    /// Records an error about the section itself.
    pub fn error_here(&self, message: impl Into<String>) {
        self.diag.error(&self.path, message);
    }

    /// The raw value of `key`, marking the key as known.
    pub fn raw(&mut self, key: &'static str) -> Option<&'a Value> {
        if !self.known.contains(&key) {
            self.known.push(key);
        }
        self.table.get(key)
    }

    /// Whether `key` is present (and marks it known).
    pub fn has(&mut self, key: &'static str) -> bool {
        self.raw(key).is_some()
    }

    /// Reads an optional key: `None` when absent or invalid (the error is recorded).
    pub fn opt<T: FromValue>(&mut self, key: &'static str) -> Option<T> {
        let value = self.raw(key)?;
        match T::from_value(value) {
            Ok(parsed) => Some(parsed),
            Err(message) => {
                self.error(key, message);
                None
            }
        }
    }

    /// Reads a key with a default: the default when absent, and also when invalid (the
    /// error is recorded, so the configuration is refused anyway).
    pub fn or<T: FromValue>(&mut self, key: &'static str, default: T) -> T {
        self.opt(key).unwrap_or(default)
    }

    /// Reads a required key; a missing key is reported with `hint` appended.
    pub fn req<T: FromValue>(&mut self, key: &'static str, hint: &str) -> Option<T> {
        if !self.has(key) {
            let mut message = format!("missing required key (expected {})", T::EXPECTED);
            if !hint.is_empty() {
                message.push_str("; ");
                message.push_str(hint);
            }
            self.error(key, message);
            return None;
        }
        self.opt(key)
    }

    /// Reads the tag of a tagged table (`type = "parquet"`): one error when missing or
    /// not one of `choices`, with a suggestion for a typo.
    pub fn tag<T: FromValue>(&mut self, key: &'static str, choices: &[&str]) -> Option<T> {
        let Some(value) = self.raw(key) else {
            self.error(
                key,
                format!(
                    "missing required key; expected one of: {}",
                    choices.join(", ")
                ),
            );
            return None;
        };
        // The tag's FromValue already suggests the closest choice for a typo.
        match T::from_value(value) {
            Ok(tag) => Some(tag),
            Err(message) => {
                self.error(key, message);
                None
            }
        }
    }

    /// Reads a list, reporting a bad element at `key[i]`. `None` when absent or when any
    /// element is invalid.
    pub fn list<T: FromValue>(&mut self, key: &'static str) -> Option<Vec<T>> {
        let value = self.raw(key)?;
        let Some(array) = value.as_array() else {
            self.error(
                key,
                format!(
                    "expected a list, each element {}, found {}",
                    T::EXPECTED,
                    describe(value)
                ),
            );
            return None;
        };
        let mut items = Vec::with_capacity(array.len());
        let mut ok = true;
        for (i, element) in array.iter().enumerate() {
            match T::from_value(element) {
                Ok(item) => items.push(item),
                Err(message) => {
                    self.diag
                        .error(&format!("{}[{i}]", self.key_path(key)), message);
                    ok = false;
                }
            }
        }
        ok.then_some(items)
    }

    /// The sub-table `key`: `None` when absent, or when it is not a table (recorded).
    pub fn table(&mut self, key: &'static str) -> Option<Section<'a>> {
        let value = self.raw(key)?;
        match value.as_table() {
            Some(table) => Some(Section::new(self.key_path(key), table, self.diag)),
            None => {
                self.error(key, format!("expected a table, found {}", describe(value)));
                None
            }
        }
    }

    /// The sub-table `key`, or an empty one when it is absent (so its required keys are
    /// reported), or `None` when it is not a table (recorded).
    pub fn table_or_empty(&mut self, key: &'static str) -> Option<Section<'a>> {
        if self.has(key) {
            self.table(key)
        } else {
            Some(Section::new(self.key_path(key), &EMPTY, self.diag))
        }
    }

    /// The entries of a table of named tables (`[sources.NAME]`), each as a section.
    /// Entries that are not tables are reported and skipped.
    pub fn named_tables(&mut self, key: &'static str) -> Vec<(&'a str, Section<'a>)> {
        let Some(value) = self.raw(key) else {
            return Vec::new();
        };
        let Some(table) = value.as_table() else {
            self.error(
                key,
                format!(
                    "expected a table of named entries, found {}",
                    describe(value)
                ),
            );
            return Vec::new();
        };
        let parent = self.key_path(key);
        let mut sections = Vec::with_capacity(table.len());
        for (name, entry) in table {
            let path = join(&parent, name);
            match entry.as_table() {
                Some(entry) => sections.push((name.as_str(), Section::new(path, entry, self.diag))),
                None => self.diag.error(
                    &path,
                    format!("expected a table, found {}", describe(entry)),
                ),
            }
        }
        sections
    }

    /// Reports every key of this table that was never read, listing the allowed keys.
    pub fn finish(self) {
        for key in self.table.keys() {
            if self.known.iter().any(|known| known == key) {
                continue;
            }
            let mut allowed: Vec<&str> = self.known.clone();
            allowed.sort_unstable();
            let mut message = format!("unknown key; allowed keys here: {}", allowed.join(", "));
            if let Some(close) = closest(key, &allowed) {
                message = format!(
                    "unknown key (did you mean `{close}`?); allowed keys here: {}",
                    allowed.join(", ")
                );
            }
            self.diag.error(&self.key_path(key), message);
        }
    }
}

/// The allowed name closest to `word`, if it is a plausible typo: at most one edit per
/// three characters (at least one), counting a swap of neighbours as one edit.
pub fn closest<'n>(word: &str, names: &[&'n str]) -> Option<&'n str> {
    let limit = (word.chars().count() / 3).max(1);
    names
        .iter()
        .map(|name| (edit_distance(word, name), *name))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

/// Optimal-string-alignment distance over characters: insertions, deletions,
/// substitutions and swaps of neighbours. Names here are short.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // d[i][j]: distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// Tests: parses `text` as the section `path` with `parse` (a component's key parser,
/// given the section and its name, the last part of `path`); returns what it built and
/// every error, as strings.
#[cfg(test)]
pub(crate) fn parse_section<T>(
    path: &str,
    text: &str,
    parse: impl FnOnce(&mut Section<'_>, &str) -> Option<T>,
) -> (Option<T>, Vec<String>) {
    let table: toml::Table = toml::from_str(text).expect("test TOML");
    let diag = Diagnostics::default();
    let mut s = Section::new(path.into(), &table, &diag);
    let name = path.rsplit('.').next().unwrap_or(path);
    let config = parse(&mut s, name);
    s.finish();
    let errors = diag
        .into_errors()
        .into_iter()
        .map(|e| e.to_string())
        .collect();
    (config, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_and_quotes_paths() {
        assert_eq!(join("", "runtime"), "runtime");
        assert_eq!(join("sinks", "lake"), "sinks.lake");
        assert_eq!(join("sources", "my src"), "sources.\"my src\"");
    }

    #[test]
    fn unknown_keys_list_the_allowed_ones_and_suggest() {
        let table: Table = "bytes = 1\nrotat = 2\nzzz = 3".parse().expect("valid TOML");
        let diag = Diagnostics::default();
        let mut section = Section::new("sinks.lake".into(), &table, &diag);
        let _ = section.opt::<u64>("bytes");
        let _ = section.opt::<u64>("rotate");
        section.finish();
        let errors: Vec<String> = diag.into_errors().iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                "sinks.lake.rotat: unknown key (did you mean `rotate`?); allowed keys here: bytes, rotate",
                "sinks.lake.zzz: unknown key; allowed keys here: bytes, rotate",
            ]
        );
    }

    #[test]
    fn list_errors_name_the_element() {
        let table: Table = r#"inputs = ["a", 3, ""]"#.parse().expect("valid TOML");
        let diag = Diagnostics::default();
        let mut section = Section::new("sinks.lake".into(), &table, &diag);
        assert_eq!(section.list::<String>("inputs"), None);
        let paths: Vec<String> = diag
            .into_errors()
            .iter()
            .filter_map(|e| e.path().map(str::to_owned))
            .collect();
        assert_eq!(paths, ["sinks.lake.inputs[1]", "sinks.lake.inputs[2]"]);
    }

    #[test]
    fn missing_required_keys_carry_the_hint() {
        let table = Table::new();
        let diag = Diagnostics::default();
        let mut section = Section::new("wal".into(), &table, &diag);
        assert_eq!(section.req::<u64>("segments", "pick one"), None);
        let errors = diag.into_errors();
        assert_eq!(
            errors[0].to_string(),
            "wal.segments: missing required key (expected a whole number, 0 or more); pick one"
        );
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("rotat", "rotate"), 1);
        assert_eq!(edit_distance("parket", "parquet"), 2);
        assert_eq!(edit_distance("gne", "gen"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(closest("qqqq", &["rotate"]), None);
        assert_eq!(closest("path", &["rate"]), None);
        assert_eq!(closest("parket", &["file", "parquet"]), Some("parquet"));
    }
}
