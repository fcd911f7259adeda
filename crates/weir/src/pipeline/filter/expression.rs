//! A `where` expression: compiled once with jaq's prelude (less what needs jaq-std's
//! optional features), evaluated on one record in its WAL form. How a record looks to
//! it is described in [the module above](super).

use bytes::Bytes;
use jaq_core::load::{self, Arena, File, Loader};
use jaq_core::{Compiler, Ctx, ValT, Vars, data};
use jaq_json::Val;

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
/// assert!(matches!(filter.eval(&wire, &RecordRef::parse(&wire)?), Verdict::Pass));
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
#[derive(Debug)]
pub enum Verdict {
    /// Its first output is truthy: the sink gets the record.
    Pass,
    /// Its first output is `false` or `null`, or it has none: the record is filtered out.
    Fail,
    /// It failed on this record.
    Error(EvalError),
}

/// Why an expression failed on a record: jaq's error, formatted only when shown.
pub struct EvalError(jaq_core::Error<Val>);

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Debug for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EvalError({self})")
    }
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

    /// The names of the variables the expression reads, in the order they are bound.
    #[cfg(test)]
    pub(crate) fn variables(&self) -> Vec<&'static str> {
        let name = |var: &Var| VARIABLES.iter().find(|(_, v)| v == var).map(|(n, _)| *n);
        self.inner.vars.iter().filter_map(name).collect()
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
            Some(Err(e)) => Verdict::Error(EvalError(e)),
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
