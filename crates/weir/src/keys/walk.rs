//! The second stage of loading: a typed walk over the parsed TOML table that records
//! every problem with its key path instead of stopping at the first one.
//!
//! A [`Section`] wraps one TOML table. Reading a key marks it known; [`Section::finish`]
//! reports every key nobody asked for as unknown, listing the known ones, so the list of
//! allowed keys in an error can never drift from what is actually read. Keys are
//! declared and read with [`Section::key`] ([`super::declare`]).
//!
//! The same walk runs in three modes, chosen by its [`Diagnostics`]: parsing (the
//! default), documenting (over an empty table, every declaration is collected as a
//! [`KeyDoc`]) and recording (every key read is collected as a [`KeyRead`], for the test
//! that each of them is documented).

use std::cell::RefCell;

use toml::{Table, Value};

use super::declare::{Key, KeyDoc, KeyRead};
use super::error::ConfigError;
use super::units::{FromValue, ToValue, describe};

/// Collects errors during a walk, and, in the documenting or recording mode, the keys
/// declared or read.
#[derive(Debug, Default)]
pub struct Diagnostics {
    errors: RefCell<Vec<ConfigError>>,
    mode: Mode,
}

/// What a walk collects besides errors.
#[derive(Debug, Default)]
enum Mode {
    /// Nothing: a configuration is being read.
    #[default]
    Parse,
    /// Every key declared, for the reference.
    Document(RefCell<Vec<KeyDoc>>),
    /// Every key read, for the test that each is documented.
    Record(RefCell<Vec<KeyRead>>),
}

impl Diagnostics {
    /// A documenting walk: each declaration is collected ([`Self::take_docs`]) and a
    /// sub-table is walked even when it is absent, so that its keys are declared too.
    pub fn documenting() -> Self {
        Self {
            errors: RefCell::default(),
            mode: Mode::Document(RefCell::default()),
        }
    }

    /// A recording walk: each key read is collected ([`Self::take_reads`]).
    pub fn recording() -> Self {
        Self {
            errors: RefCell::default(),
            mode: Mode::Record(RefCell::default()),
        }
    }

    /// Whether this is a documenting walk.
    pub fn is_documenting(&self) -> bool {
        matches!(self.mode, Mode::Document(_))
    }

    /// Adds a declaration (documenting walks only).
    pub(super) fn declare(&self, doc: impl FnOnce() -> KeyDoc) {
        if let Mode::Document(docs) = &self.mode {
            docs.borrow_mut().push(doc());
        }
    }

    /// The keys declared so far, in declaration order (empty unless documenting).
    pub fn take_docs(&self) -> Vec<KeyDoc> {
        match &self.mode {
            Mode::Document(docs) => docs.take(),
            _ => Vec::new(),
        }
    }

    /// The keys read so far, in reading order (empty unless recording).
    pub fn take_reads(&self) -> Vec<KeyRead> {
        match &self.mode {
            Mode::Record(reads) => reads.take(),
            _ => Vec::new(),
        }
    }

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
    /// The path of the section whose reference lists this table's keys (a component's
    /// `sources.NAME`, `wal`); this table's own path for such a section.
    documented: String,
    /// This table's place in that section: empty for the section itself, `rotate` for
    /// its sub-table, `topics[]` for an element of a list of tables.
    prefix: String,
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
            documented: path.clone(),
            path,
            prefix: String::new(),
            table,
            known: Vec::new(),
            diag,
        }
    }

    /// The section `table` inside this one, at `path`, whose keys the reference lists
    /// under `prefix`.
    fn nested(&self, path: String, prefix: String, table: &'a Table) -> Section<'a> {
        Section {
            path,
            documented: self.documented.clone(),
            prefix,
            table,
            known: Vec::new(),
            diag: self.diag,
        }
    }

    /// Element `index` of the list of tables `key` (`topics[2]`); the reference lists
    /// its keys as `key[].child`.
    pub fn element(&self, key: &str, index: usize, table: &'a Table) -> Section<'a> {
        let path = format!("{}[{index}]", self.key_path(key));
        self.nested(path, format!("{}[]", join(&self.prefix, key)), table)
    }

    /// Element `index` of the list of tables `key` whose keys the reference lists as
    /// those of `like`'s (a struct column's columns, which have the keys of the columns
    /// around them).
    pub fn element_like(
        &self,
        key: &str,
        index: usize,
        table: &'a Table,
        like: &Section<'_>,
    ) -> Section<'a> {
        let path = format!("{}[{index}]", self.key_path(key));
        self.nested(path, like.prefix.clone(), table)
    }

    /// In a documenting walk, an empty element of the list of tables `key`, for the
    /// parse code to read so that the keys of its elements are declared; `None` when
    /// parsing.
    pub fn element_template(&self, key: &str) -> Option<Section<'a>> {
        self.is_documenting().then(|| self.element(key, 0, &EMPTY))
    }

    /// Declares the key `key` of this section, with a one-line description of what it
    /// does, and returns the declaration, to be read by one of its methods
    /// ([`Key::or`], [`Key::opt`], [`Key::req`], [`Key::list`], [`Key::table`],
    /// [`Key::raw`]).
    pub fn key<'s>(&'s mut self, key: &'static str, description: &'static str) -> Key<'s, 'a> {
        Key::new(self, key, description)
    }

    /// Whether this is a documenting walk (over an empty table, collecting declarations).
    pub fn is_documenting(&self) -> bool {
        self.diag.is_documenting()
    }

    /// The name the reference gives `key` of this section: `rotate.bytes`.
    pub(super) fn doc_name(&self, key: &str) -> String {
        join(&self.prefix, key)
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

    /// The raw value of `key`, marking the key as known, without declaring it: a key
    /// read only this way is missing from the reference (a test fails on it). Declare
    /// keys with [`Section::key`]; this is for checks on a declared key.
    pub fn raw(&mut self, key: &'static str) -> Option<&'a Value> {
        if !self.known.contains(&key) {
            self.known.push(key);
            if let Mode::Record(reads) = &self.diag.mode {
                reads.borrow_mut().push(KeyRead {
                    section: self.documented.clone(),
                    key: self.doc_name(key),
                });
            }
        }
        self.table.get(key)
    }

    /// Whether `key` is present (and marks it known, as [`Section::raw`] does).
    pub fn has(&mut self, key: &'static str) -> bool {
        self.raw(key).is_some()
    }

    /// A key this section never takes, though a reader might expect it (a key another
    /// type has, or one that was removed): when present, `message` says why it is
    /// refused. It is allowed in the sense that it is not reported as unknown; it is not
    /// a key of the reference.
    pub fn refuse(&mut self, key: &'static str, message: &str) {
        if !self.known.contains(&key) {
            self.known.push(key);
        }
        if self.table.contains_key(key) {
            self.error(key, message);
        }
    }

    /// Reads `value`, the value of `key`, as a `T`: `None` when it is not one (the
    /// error is recorded at `key`). For a key declared with [`Key::raw`] whose type
    /// depends on another key.
    pub fn convert<T: FromValue>(&self, key: &str, value: &Value) -> Option<T> {
        match T::from_value(value) {
            Ok(parsed) => Some(parsed),
            Err(message) => {
                self.error(key, message);
                None
            }
        }
    }

    /// Reads an optional key declared without a description: `None` when absent or
    /// invalid (the error is recorded). The shorthand of code not converted to
    /// [`Section::key`] yet (its keys are listed in the reference with no description,
    /// and a test fails on that): new code declares its keys.
    pub fn opt<T: FromValue>(&mut self, key: &'static str) -> Option<T> {
        self.key(key, "").opt()
    }

    /// Reads a key with a default, declared without a description (see
    /// [`Section::opt`]): the default when absent, and also when invalid (the error is
    /// recorded, so the configuration is refused anyway).
    pub fn or<T: FromValue + ToValue>(&mut self, key: &'static str, default: T) -> T {
        self.key(key, "").or(default)
    }

    /// Reads a required key declared without a description (see [`Section::opt`]); a
    /// missing key is reported with `hint` appended.
    pub fn req<T: FromValue>(&mut self, key: &'static str, hint: &str) -> Option<T> {
        self.key(key, "").req(hint)
    }

    /// Reads a list declared without a description (see [`Section::opt`]), reporting a
    /// bad element at `key[i]`. `None` when absent or when any element is invalid.
    pub fn list<T: FromValue>(&mut self, key: &'static str) -> Option<Vec<T>> {
        self.key(key, "").list()
    }

    /// The sub-table `key`, declared without a description (see [`Section::opt`]):
    /// `None` when absent, or when it is not a table (recorded).
    pub fn table(&mut self, key: &'static str) -> Option<Section<'a>> {
        self.key(key, "").table()
    }

    /// Reads `value`, the value of the list `key`, reporting a bad element at `key[i]`.
    /// `None` when any element is invalid. For a list declared with [`Key::raw`] that
    /// is checked before it is read.
    pub fn read_list<T: FromValue>(&self, key: &str, value: &Value) -> Option<Vec<T>> {
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

    /// The sub-table `key` whose value is `value` (an empty one for `None`): `None` when
    /// it is not a table (recorded).
    pub fn sub_table(&self, key: &str, value: Option<&'a Value>) -> Option<Section<'a>> {
        let table = self.table_of(key, value)?;
        Some(self.nested(self.key_path(key), self.doc_name(key), table))
    }

    /// The section `key` of the file (`[wal]`), or an empty one when it is absent (so
    /// its required keys are reported), or `None` when it is not a table (recorded).
    pub fn table_or_empty(&mut self, key: &'static str) -> Option<Section<'a>> {
        let value = self.raw(key);
        let table = self.table_of(key, value)?;
        Some(Section::new(self.key_path(key), table, self.diag))
    }

    /// `value`, the value of `key`, as a table (an empty one for `None`): `None` when it
    /// is not a table (recorded).
    fn table_of(&self, key: &str, value: Option<&'a Value>) -> Option<&'a Table> {
        match value {
            None => Some(&EMPTY),
            Some(value) => {
                let table = value.as_table();
                if table.is_none() {
                    self.error(key, format!("expected a table, found {}", describe(value)));
                }
                table
            }
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
/// every error, as strings. Fails when `parse` reads a key that its documenting walk
/// does not declare (the reference would not list it).
#[cfg(test)]
pub(crate) fn parse_section<T>(
    path: &str,
    text: &str,
    parse: impl Fn(&mut Section<'_>, &str) -> Option<T>,
) -> (Option<T>, Vec<String>) {
    let table: toml::Table = toml::from_str(text).expect("test TOML");
    let diag = Diagnostics::recording();
    let mut s = Section::new(path.into(), &table, &diag);
    let name = path.rsplit('.').next().unwrap_or(path);
    let config = parse(&mut s, name);
    s.finish();
    let documented = super::declare::document(|mut s| {
        parse(&mut s, name);
    });
    for read in diag.take_reads() {
        assert!(
            documented.iter().any(|key| key.name == read.key),
            "{path}: `{}` is read but its documenting walk does not declare it",
            read.key
        );
    }
    let errors = diag
        .into_errors()
        .into_iter()
        .map(|e| e.to_string())
        .collect();
    (config, errors)
}

#[cfg(test)]
mod tests;
