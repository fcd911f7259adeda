//! Declaring a key: the one call that names a key, says what it does, and reads it.
//!
//! A component's `config.rs` reads each of its keys through [`Section::key`]: the key's
//! name and a one-line description, then optionally its unit and an example, then the
//! method that reads it ([`Key::or`] with a default, [`Key::opt`], [`Key::req`],
//! [`Key::list`], [`Key::table`], or [`Key::raw`] for a value read by hand). The type
//! shown in the reference comes from the value type ([`FromValue::KIND`]), the default
//! from the default value itself ([`ToValue`]), so neither can drift from the code.
//!
//! ```
//! use weir::keys::{ByteSize, Diagnostics, Section, document};
//!
//! fn parse(s: &mut Section<'_>) -> ByteSize {
//!     s.key("max_line_bytes", "Longest line accepted; a longer one is quarantined.")
//!         .or(ByteSize::mib(1))
//! }
//!
//! // Parsing: the key is read as before, every problem recorded with its path.
//! let table: toml::Table = toml::from_str(r#"max_line_bytes = "64 KiB""#).unwrap();
//! let diag = Diagnostics::default();
//! let mut s = Section::new("sources.logs".into(), &table, &diag);
//! assert_eq!(parse(&mut s), ByteSize::kib(64));
//!
//! // Documenting: the same function, walked over an empty table, lists the key.
//! let keys = document(|mut s| {
//!     parse(&mut s);
//! });
//! assert_eq!(keys[0].name, "max_line_bytes");
//! assert_eq!(keys[0].kind, r#"size ("8 MiB")"#);
//! assert_eq!(keys[0].default.as_ref().map(ToString::to_string).as_deref(), Some(r#""1 MiB""#));
//! ```
//!
//! A key read on only some paths of the parse code (depending on another key's value)
//! is still declared on every path: the documenting walk follows the defaults, so a
//! key it does not reach is missing from the reference, and the test that parses every
//! example and test configuration in a recording walk fails on it.

use std::borrow::Cow;

use toml::{Table, Value};

use super::units::{FromValue, ToValue};
use super::walk::{Diagnostics, Section};

/// Reads a value as a key's type would, for checking an example: the error message
/// when it does not.
pub type Check = fn(&Value) -> Result<(), String>;

/// One key as the reference lists it.
#[derive(Debug, Clone)]
pub struct KeyDoc {
    /// The key's name in its section: `path`, `rotate.bytes`, `topics[].qos`.
    pub name: String,
    /// What it does, in one line.
    pub description: &'static str,
    /// What it takes: `size ("8 MiB")`, `list of string`, `one of "a" | "b"`.
    pub kind: Cow<'static, str>,
    /// Whether a configuration must set it.
    pub required: bool,
    /// The key that may be set instead of this one, when one of the two is required
    /// (`topics` unless `topic_pattern`).
    pub required_unless: Option<&'static str>,
    /// Its default, as written in TOML.
    pub default: Option<Value>,
    /// What applies when it is absent, when that is not one value: `a quarter of
    /// high_watermark`, `unlimited`. Shown instead of `default`.
    pub default_text: Option<&'static str>,
    /// The unit of a plain number: `records per second`.
    pub unit: Option<&'static str>,
    /// A value for it, given explicitly ([`KeyDoc::example`] falls back on the default).
    pub explicit_example: Option<Value>,
    /// Whether it is a table whose keys follow as `name.child`.
    pub is_table: bool,
    /// Reads a value as the key does (`None` for a key read by hand).
    pub check: Option<Check>,
}

impl KeyDoc {
    /// A value for the key: the one given, else its default.
    pub fn example(&self) -> Option<&Value> {
        self.explicit_example.as_ref().or(self.default.as_ref())
    }
}

/// One key read during a recording walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRead {
    /// The path of the section whose reference must list the key: `wal`,
    /// `sinks.lake`.
    pub section: String,
    /// The key's name in that section: `rotate.bytes`.
    pub key: String,
}

/// The reference of one section: a section of the file, the keys every source or sink
/// has, or one source or sink type.
#[derive(Debug, Clone)]
pub struct SectionDoc {
    /// Its TOML header: `[runtime]`, `[sources.NAME]`.
    pub header: &'static str,
    /// For a source or sink type, its `type` value.
    pub type_name: Option<&'static str>,
    /// What it is, in one line.
    pub about: &'static str,
    /// Whether `weir run` drives it (a type listed as not built yet does not).
    pub built: bool,
    /// Its keys, in the order they are read.
    pub keys: Vec<KeyDoc>,
}

impl SectionDoc {
    /// The reference of one kind of component under `header` (`[sinks.NAME]`): `common`,
    /// the keys every one has (described by `about`), then each type of `built` (its
    /// name, its line and its keys), then each of `not_built` (name and keys).
    pub fn components(
        header: &'static str,
        about: &'static str,
        common: Vec<KeyDoc>,
        built: impl IntoIterator<Item = (&'static str, &'static str, Vec<KeyDoc>)>,
        not_built: impl IntoIterator<Item = (&'static str, Vec<KeyDoc>)>,
    ) -> Vec<SectionDoc> {
        let section = |type_name, about, built, keys| SectionDoc {
            header,
            type_name,
            about,
            built,
            keys,
        };
        let mut sections = vec![section(None, about, true, common)];
        for (type_name, about, keys) in built {
            sections.push(section(Some(type_name), about, true, keys));
        }
        for (type_name, keys) in not_built {
            let about = "Not built yet in this version of weir: `weir validate` checks its keys and refuses the type.";
            sections.push(section(Some(type_name), about, false, keys));
        }
        sections
    }
}

/// Walks `parse` over an empty table in the documenting mode and returns the keys it
/// declares, in order. `parse` gets the section by value, as a component's parse
/// function does; errors (the required keys missing) are dropped.
pub fn document(parse: impl FnOnce(Section<'_>)) -> Vec<KeyDoc> {
    let diag = Diagnostics::documenting();
    let table = Table::new();
    parse(Section::new(String::new(), &table, &diag));
    diag.take_docs()
}

/// A key being declared: built by [`Section::key`], read by one of its methods.
#[must_use = "a key is read by one of its methods: or, opt, req, list, table or raw"]
pub struct Key<'s, 'a> {
    section: &'s mut Section<'a>,
    name: &'static str,
    description: &'static str,
    unit: Option<&'static str>,
    example: Option<Value>,
    default: Option<Value>,
    default_text: Option<&'static str>,
    required: bool,
    required_unless: Option<&'static str>,
    refused: Option<&'static str>,
}

impl<'s, 'a> Key<'s, 'a> {
    pub(super) fn new(
        section: &'s mut Section<'a>,
        name: &'static str,
        description: &'static str,
    ) -> Self {
        Self {
            section,
            name,
            description,
            unit: None,
            example: None,
            default: None,
            default_text: None,
            required: false,
            required_unless: None,
            refused: None,
        }
    }

    /// The unit of a plain number (`"records per second"`); sizes and durations carry
    /// theirs in the value.
    pub fn unit(mut self, unit: &'static str) -> Self {
        self.unit = Some(unit);
        self
    }

    /// A value to show for it, for a key with no default (a default is its own
    /// example).
    pub fn example(mut self, example: impl Into<Value>) -> Self {
        self.example = Some(example.into());
        self
    }

    /// What applies when the key is absent, when that is not one fixed value: `"a
    /// quarter of high_watermark"`, `"unlimited"`.
    pub fn default_text(mut self, text: &'static str) -> Self {
        self.default_text = Some(text);
        self
    }

    /// Its default, for a key read by hand ([`Key::raw`]); [`Key::or`] takes its own.
    pub fn default<T: ToValue>(mut self, default: &T) -> Self {
        if self.section.is_documenting() {
            self.default = Some(default.to_value());
        }
        self
    }

    /// Marks a key read by hand ([`Key::raw`]) as required (the parse code reports it
    /// missing); [`Key::req`] is required by itself.
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// Marks a key that is required unless `other` is set (the parse code reports
    /// neither being set); an example configuration sets this one.
    pub fn required_unless(mut self, other: &'static str) -> Self {
        self.required_unless = Some(other);
        self
    }

    /// Declares a key that applies only when `applies`: otherwise it is not read, and
    /// if present `otherwise` says why it is refused (`only applies to format =
    /// "parquet"`). The reference lists it either way.
    pub fn only_if(mut self, applies: bool, otherwise: &'static str) -> Self {
        if !applies {
            self.refused = Some(otherwise);
        }
        self
    }

    /// Reads an optional key with a default: the default when absent, and also when
    /// invalid (the error is recorded, so the configuration is refused anyway).
    pub fn or<T: FromValue + ToValue>(mut self, default: T) -> T {
        if self.section.is_documenting() {
            self.default = Some(default.to_value());
        }
        self.declare(T::KIND.into(), Some(check::<T>), false);
        self.read().unwrap_or(default)
    }

    /// Reads an optional key: `None` when absent or invalid (the error is recorded).
    pub fn opt<T: FromValue>(mut self) -> Option<T> {
        self.declare(T::KIND.into(), Some(check::<T>), false);
        self.read()
    }

    /// Reads a required key; a missing key is reported with `hint` appended.
    pub fn req<T: FromValue>(mut self, hint: &str) -> Option<T> {
        self.required = true;
        self.declare(T::KIND.into(), Some(check::<T>), false);
        if !self.section.has(self.name) {
            let mut message = format!("missing required key (expected {})", T::EXPECTED);
            if !hint.is_empty() {
                message.push_str("; ");
                message.push_str(hint);
            }
            self.section.error(self.name, message);
            return None;
        }
        self.read()
    }

    /// Reads an optional list, reporting a bad element at `key[i]`. `None` when absent
    /// or when any element is invalid.
    pub fn list<T: FromValue>(mut self) -> Option<Vec<T>> {
        self.declare(
            format!("list of {}", T::KIND).into(),
            Some(check_list::<T>),
            false,
        );
        let value = self.present()?;
        self.section.read_list(self.name, value)
    }

    /// The sub-table: `None` when absent, or when it is not a table (recorded). Its
    /// keys are listed as `key.child`; in a documenting walk an absent table is walked
    /// empty, so that they are declared.
    pub fn table(mut self) -> Option<Section<'a>> {
        self.declare("table".into(), None, true);
        let documenting = self.section.is_documenting();
        let value = self.present();
        if value.is_none() && (!documenting || self.refused.is_some()) {
            return None;
        }
        self.section.sub_table(self.name, value)
    }

    /// The key's value, for a key the parse code reads by hand (a string or a list, a
    /// free-form table, a type that depends on another key); `kind` says what it takes.
    pub fn raw(mut self, kind: impl Into<Cow<'static, str>>) -> Option<&'a Value> {
        self.declare(kind.into(), None, false);
        self.present()
    }

    /// Adds the declaration, in a documenting walk.
    fn declare(&self, kind: Cow<'static, str>, check: Option<Check>, is_table: bool) {
        self.section.diagnostics().declare(|| KeyDoc {
            name: self.section.doc_name(self.name),
            description: self.description,
            kind,
            required: self.required,
            required_unless: self.required_unless,
            default: self.default.clone(),
            default_text: self.default_text,
            unit: self.unit,
            explicit_example: self.example.clone(),
            is_table,
            check,
        });
    }

    /// The value when present, and when the key applies (else the refusal is
    /// recorded).
    fn present(&mut self) -> Option<&'a Value> {
        let value = self.section.raw(self.name)?;
        if let Some(why) = self.refused {
            self.section.error(self.name, why);
            return None;
        }
        Some(value)
    }

    /// The value as a `T`: `None` when absent, refused or invalid (recorded).
    fn read<T: FromValue>(&mut self) -> Option<T> {
        let value = self.present()?;
        self.section.convert(self.name, value)
    }
}

fn check<T: FromValue>(value: &Value) -> Result<(), String> {
    T::from_value(value).map(drop)
}

fn check_list<T: FromValue>(value: &Value) -> Result<(), String> {
    let array = value.as_array().ok_or("expected a list")?;
    array.iter().try_for_each(check::<T>)
}

#[cfg(test)]
mod tests;
