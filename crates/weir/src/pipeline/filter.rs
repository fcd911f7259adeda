//! A sink's filter: `where = "EXPRESSION"`, a jq expression (run by
//! [jaq](https://github.com/01mf02/jaq)) that decides, record by record, which records of
//! the sink's inputs reach it. The sink driver evaluates it on each record in its WAL
//! form, before decoding it, so every sink type is filtered the same way.
//!
//! How a record looks to the expression:
//!
//! | name | what |
//! |---|---|
//! | `.` | the payload: its JSON value when it parses as JSON, else the payload as a string |
//! | `$key` | the key (MQTT topic, NATS subject, generator key…), a string |
//! | `$source` | the source's name, a string |
//! | `$attributes` | the attributes, an object of strings (`{}` when there are none) |
//! | `$ts` | when the source read it, in milliseconds since the Unix epoch |
//!
//! The record passes when the expression's first output is truthy (anything but `false`
//! and `null`), as with jq's `select`; an expression with no output does not pass. An
//! error (indexing a string, `error(…)`, comparing what cannot be compared…) is a
//! [`Verdict::Error`]: the driver counts it and drops or keeps the record by
//! [`OnFilterError`]. A field the payload does not have is `null`, as in jq: `.temp >
//! 30` does not pass for a payload without `temp`, and is not an error.
//!
//! Only the variables the expression names are built for a record (the compiler finds
//! them); the strings are slices of the WAL chunk, not copies. The payload is parsed
//! into jaq's values whole, which is much of the cost: about 2 µs per record for
//! `.temp > 30 and .device == "d1" and $key == "sensors/d1"` on a 6-field payload of
//! 110 bytes (docs/filters.md). jaq cannot be interrupted: an expression that never
//! ends (`repeat(.)`) stalls its sink's reader.

use std::time::{Duration, Instant};

use bytes::Bytes;
use jaq_core::load::{self, Arena, File, Loader};
use jaq_core::{Compiler, Ctx, ValT, Vars, data};
use jaq_json::Val;

use super::stats::{SinkStats, add};
use crate::keys::units::string_enum;
use crate::record::RecordRef;

type Data = data::JustLut<Val>;

/// jaq-std's definitions that need natives of its optional features (regex, time, math,
/// formats, logging), which weir leaves out: dropped from the prelude so it compiles
/// (`split` only with two arguments: `split($sep)` stays). A test compiles the prelude,
/// so a new jaq release that needs more fails it.
const UNSUPPORTED: &[&str] = &[
    "stderr",
    "debug",
    "halt_error",
    "logb",
    "significand",
    "pow10",
    "drem",
    "nexttoward",
    "scalb",
    "gamma",
    "test",
    "scan_",
    "match",
    "capture",
    "split",
    "splits",
    "sub",
    "gsub",
    "scan",
    "todate",
    "fromdate",
    "@html",
    "@htmld",
    "@uri",
    "@urid",
    "@base64",
    "@base64d",
];

/// Whether jaq-std's definition `def` stays in weir's prelude.
fn supported(def: &load::parse::Def<&str>) -> bool {
    !UNSUPPORTED.contains(&def.name) || (def.name == "split" && def.args.len() == 1)
}

/// The record's variables, as the expression names them.
const VARIABLES: [(&str, Var); 4] = [
    ("$key", Var::Key),
    ("$source", Var::Source),
    ("$attributes", Var::Attributes),
    ("$ts", Var::Ts),
];

/// One of the record's variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Var {
    Key,
    Source,
    Attributes,
    Ts,
}

/// What a record the `where` expression cannot evaluate becomes (`on_filter_error`).
/// Either way it is counted (`filter_errors`) and logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFilterError {
    /// Dropped: the sink does not get it (its cursor moves past it).
    #[default]
    Drop,
    /// Kept: the sink gets it as if it had passed.
    Keep,
}

string_enum!(OnFilterError { "drop" => Drop, "keep" => Keep });

/// A sink's filter as its configuration gives it to the driver.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SinkFilter {
    /// `where`.
    #[serde(rename = "where")]
    pub filter: Filter,
    /// `on_filter_error`.
    #[serde(rename = "on_filter_error")]
    pub on_error: OnFilterError,
}

/// The shortest time between two warnings about filter errors of one sink; the errors
/// in between are counted, and the next warning says how many.
pub const WARN_INTERVAL: Duration = Duration::from_secs(10);

/// A sink's filter applied by its driver: the verdict, what an error does, the counts
/// (`filtered`, `filter_errors`) and the warnings, at most one per [`WARN_INTERVAL`].
#[derive(Debug)]
pub struct Applied {
    filter: SinkFilter,
    warned_at: Option<Instant>,
    unwarned: u64,
}

impl Applied {
    /// The driver's state for `filter`.
    pub fn new(filter: SinkFilter) -> Self {
        Applied {
            filter,
            warned_at: None,
            unwarned: 0,
        }
    }

    /// Whether the sink gets `record` (at WAL `offset`, read from `bytes`): counts a
    /// record filtered out or an error, and warns about errors.
    pub fn admits(
        &mut self,
        bytes: &Bytes,
        record: &RecordRef<'_>,
        offset: u64,
        stats: &SinkStats,
        sink: &str,
    ) -> bool {
        match self.filter.filter.eval(bytes, record) {
            Verdict::Pass => true,
            Verdict::Fail => {
                add(&stats.filtered, 1);
                false
            }
            Verdict::Error(message) => {
                add(&stats.filter_errors, 1);
                let keep = self.filter.on_error == OnFilterError::Keep;
                self.warn(sink, offset, &message, keep);
                keep
            }
        }
    }

    fn warn(&mut self, sink: &str, offset: u64, message: &str, kept: bool) {
        let now = Instant::now();
        if self
            .warned_at
            .is_some_and(|at| now.duration_since(at) < WARN_INTERVAL)
        {
            self.unwarned += 1;
            return;
        }
        let more = match std::mem::take(&mut self.unwarned) {
            0 => String::new(),
            n => format!(" ({n} more since the last warning)"),
        };
        let what = if kept { "kept" } else { "dropped" };
        tracing::warn!(
            "sink {sink}: its `where` filter failed on WAL record {offset}: {message}; {what} \
             (on_filter_error){more}"
        );
        self.warned_at = Some(now);
    }
}

/// A compiled `where` expression. Cloning it shares the compiled form.
///
/// # Examples
///
/// ```
/// use weir::pipeline::filter::{Filter, Verdict};
/// use weir::record::{Record, RecordRef};
///
/// let filter = Filter::compile(r#".temp > 30 and $key == "sensors/d1""#)?;
/// let record = Record {
///     source: "mqtt".into(),
///     key: "sensors/d1".into(),
///     timestamp_ms: 0,
///     payload: bytes::Bytes::from_static(br#"{"temp":31.5}"#),
///     attributes: Vec::new(),
/// };
/// let mut wire = Vec::new();
/// record.encode_into(&mut wire);
/// let wire = bytes::Bytes::from(wire);
/// assert_eq!(filter.eval(&wire, &RecordRef::parse(&wire)?), Verdict::Pass);
///
/// let error = Filter::compile(".temp >").unwrap_err();
/// assert_eq!(error.offset, 8);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Filter {
    inner: std::sync::Arc<Compiled>,
}

struct Compiled {
    expression: String,
    filter: jaq_core::Filter<Data>,
    /// The variables the expression names, in the order the compiler was given them.
    vars: Vec<Var>,
}

/// Why an expression does not compile: where, and the engine's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at character {offset} of the expression: {message}")]
pub struct CompileError {
    /// The character (counted from 1) where the problem is; one past the end when the
    /// expression ends too early.
    pub offset: usize,
    /// What jaq expected or did not know, and what it found.
    pub message: String,
}

/// What the expression says of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Its first output is truthy: the sink gets the record.
    Pass,
    /// Its first output is `false` or `null`, or it has none: the record is filtered out.
    Fail,
    /// It failed on this record, with jaq's message.
    Error(String),
}

impl Filter {
    /// Compiles `expression`.
    ///
    /// # Errors
    ///
    /// [`CompileError`] when it does not parse, or names a filter or variable that
    /// does not exist, with the character where that is.
    pub fn compile(expression: &str) -> Result<Filter, CompileError> {
        let arena = Arena::default();
        let modules = || {
            let prelude = jaq_core::defs()
                .chain(jaq_std::defs().filter(supported))
                .chain(jaq_json::defs());
            let file = File {
                code: expression,
                path: (),
            };
            Loader::new(prelude)
                .load(&arena, file)
                .map_err(|errors| load_error(expression, errors))
        };
        let compiler = |vars: &[&'static str]| {
            Compiler::default()
                .with_funs(
                    jaq_core::funs()
                        .chain(jaq_std::base_funs())
                        .chain(jaq_json::funs()),
                )
                .with_global_vars(vars.iter().copied())
        };
        // Compiled first with no variables: the undefined ones are those it names.
        let errors = match compiler(&[]).compile(modules()?) {
            Ok(filter) => return Ok(Filter::new(expression, filter, Vec::new())),
            Err(errors) => errors,
        };
        let mut named = Vec::new();
        for (_, errors) in &errors {
            for (name, undefined) in errors {
                let known = VARIABLES.iter().find(|(v, _)| v == name);
                match (undefined, known) {
                    (jaq_core::compile::Undefined::Var, Some((_, var))) => named.push(*var),
                    _ => return Err(undefined_error(expression, name, undefined)),
                }
            }
        }
        let (names, vars): (Vec<&'static str>, Vec<Var>) = VARIABLES
            .iter()
            .filter(|(_, var)| named.contains(var))
            .copied()
            .unzip();
        match compiler(&names).compile(modules()?) {
            Ok(filter) => Ok(Filter::new(expression, filter, vars)),
            Err(errors) => {
                let (name, undefined) = errors
                    .iter()
                    .flat_map(|(_, errors)| errors)
                    .next()
                    .expect("a failed compilation names what it did not know");
                Err(undefined_error(expression, name, undefined))
            }
        }
    }

    fn new(expression: &str, filter: jaq_core::Filter<Data>, vars: Vec<Var>) -> Filter {
        Filter {
            inner: std::sync::Arc::new(Compiled {
                expression: expression.to_owned(),
                filter,
                vars,
            }),
        }
    }

    /// The expression, as written.
    pub fn expression(&self) -> &str {
        &self.inner.expression
    }

    /// Evaluates the expression on `record`, read from `bytes` (its WAL form): the
    /// strings handed to the expression share `bytes`' buffer.
    pub fn eval(&self, bytes: &Bytes, record: &RecordRef<'_>) -> Verdict {
        let text = |s: &str| Val::TStr(Box::new(slice(bytes, s.as_bytes())));
        let input = jaq_json::read::parse_single(record.payload)
            .unwrap_or_else(|_| Val::TStr(Box::new(slice(bytes, record.payload))));
        let vars = self.inner.vars.iter().map(|var| match var {
            Var::Key => text(record.key),
            Var::Source => text(record.source),
            Var::Attributes => Val::obj(
                record
                    .attributes()
                    .map(|(name, value)| (text(name), text(value)))
                    .collect(),
            ),
            Var::Ts => Val::from(isize::try_from(record.timestamp_ms).unwrap_or(isize::MAX)),
        });
        let filter = &self.inner.filter;
        let ctx = Ctx::<Data>::new(&filter.lut, Vars::new(vars));
        let first = filter.id.run((ctx, input)).next();
        match first.map(jaq_core::unwrap_valr) {
            None => Verdict::Fail,
            Some(Ok(value)) if value.as_bool() => Verdict::Pass,
            Some(Ok(_)) => Verdict::Fail,
            Some(Err(e)) => Verdict::Error(e.to_string()),
        }
    }
}

/// `part` of `bytes` sharing its buffer (a copy if it is not inside it, which the
/// fields of a record read from `bytes` always are).
fn slice(bytes: &Bytes, part: &[u8]) -> Bytes {
    let range = bytes.as_ptr_range();
    if part.is_empty() {
        Bytes::new()
    } else if range.contains(&part.as_ptr()) && part.as_ptr_range().end <= range.end {
        bytes.slice_ref(part)
    } else {
        Bytes::copy_from_slice(part)
    }
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Filter").field(&self.expression()).finish()
    }
}

impl PartialEq for Filter {
    fn eq(&self, other: &Self) -> bool {
        self.expression() == other.expression()
    }
}

impl serde::Serialize for Filter {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.expression())
    }
}

/// The character (from 1) at which `part`, a slice of `code`, starts; one past the end
/// when it is not a slice of `code`.
fn position(code: &str, part: &str) -> usize {
    let start = code.as_ptr() as usize;
    let at = part.as_ptr() as usize;
    let byte = if at >= start && at <= start + code.len() {
        at - start
    } else {
        code.len()
    };
    code.get(..byte)
        .map_or(code.chars().count(), |s| s.chars().count())
        + 1
}

/// What `part` (the rest of the expression from where a problem is) starts with, for a
/// message: `"and"`, or `the end of the expression`.
fn found(part: &str) -> String {
    let token: String = part
        .chars()
        .take_while(|c| !c.is_whitespace())
        .take(20)
        .collect();
    if token.is_empty() {
        "the end of the expression".to_owned()
    } else {
        format!("{token:?}")
    }
}

fn load_error(code: &str, errors: load::Errors<&str, ()>) -> CompileError {
    let (_, error) = errors
        .into_iter()
        .next()
        .expect("a failed load names what failed");
    let first = |list: Vec<(String, &str)>| {
        let (expected, part) = list.into_iter().next().unwrap_or_default();
        CompileError {
            offset: position(code, part),
            message: if expected == "nothing" {
                format!("unexpected {}", found(part))
            } else {
                format!("expected {expected}, found {}", found(part))
            },
        }
    };
    match error {
        load::Error::Lex(errors) => first(
            errors
                .into_iter()
                .map(|(expect, part)| (expect.as_str().to_owned(), part))
                .collect(),
        ),
        load::Error::Parse(errors) => first(
            errors
                .into_iter()
                .map(|(expect, part)| (expect.as_str().to_owned(), part))
                .collect(),
        ),
        load::Error::Io(errors) => {
            let (part, message) = errors.into_iter().next().unwrap_or_default();
            CompileError {
                offset: position(code, part),
                message: format!("modules cannot be loaded here: {message}"),
            }
        }
    }
}

fn undefined_error(
    code: &str,
    name: &str,
    undefined: &jaq_core::compile::Undefined,
) -> CompileError {
    let mut message = match undefined {
        jaq_core::compile::Undefined::Filter(arity) => {
            format!("undefined filter {name}/{arity}")
        }
        other => format!("undefined {} {name}", other.as_str()),
    };
    if matches!(undefined, jaq_core::compile::Undefined::Var) {
        message.push_str("; a record's variables are $key, $source, $attributes and $ts");
    } else if UNSUPPORTED.contains(&name) {
        message.push_str(
            " (regular expressions, dates, formats and logging are not built into weir's filters)",
        );
    }
    CompileError {
        offset: position(code, name),
        message,
    }
}

#[cfg(test)]
#[path = "filter_tests.rs"]
mod tests;
