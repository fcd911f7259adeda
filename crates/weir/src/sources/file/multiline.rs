//! Multi-line records (`multiline`): stack traces and other records that span lines,
//! assembled before the format is applied. Sans-IO: time comes in as `now_ms`.
//!
//! With `start = "REGEX"`, a record begins at a line that matches, and every following
//! line that does not match joins it. A line that does not match when no record is
//! open begins one all the same (a file that starts mid-record). The presets decide
//! line by line with a little state:
//!
//! - `java`: indented lines (`\tat …`, `\t... 3 more`), `Caused by:` and `Suppressed:`
//!   join; so does an exception line (`java.lang.IllegalStateException: boom`) right
//!   after a message, so a logger's message and its trace stay together.
//! - `python`: `Traceback (most recent call last):` joins the line before it (the
//!   message of `logging.exception`); inside a traceback, indented lines, the final
//!   exception line, blank lines and the chained-exception sentences join.
//! - `go`: `panic:` and `fatal error:` begin a record; inside it, goroutine headers,
//!   function lines, indented file lines, blank lines, `created by` and `exit status`
//!   join. Outside a panic, indented lines join.
//!
//! A record ends at the next record's first line, after `timeout` without a new line,
//! or when `max_lines` or `max_bytes` would be passed (counted: the rest goes on as a
//! record of its own). Trailing blank lines are trimmed. Lines are joined with `\n`.

use regex::Regex;
use serde::Serialize;

use crate::keys::{ByteSize, Duration, Section};

/// How records begin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// A line matching this regular expression begins a record.
    Start(String),
    /// Java stack traces.
    Java,
    /// Python tracebacks.
    Python,
    /// Go panics.
    Go,
}

/// `multiline = "java"` or `multiline = { start = "^\\d", max_lines, max_bytes, timeout }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MultilineConfig {
    /// How records begin.
    pub rule: Rule,
    /// Lines per record at most. Default 500.
    pub max_lines: u32,
    /// Bytes per record at most. Default 256 KiB.
    pub max_bytes: ByteSize,
    /// A record ends after this long without a new line. Default 1 s.
    pub timeout: Duration,
}

const PRESETS: &[&str] = &["java", "python", "go"];

impl MultilineConfig {
    const DEFAULT_MAX_LINES: u32 = 500;
    const DEFAULT_MAX_BYTES: ByteSize = ByteSize::kib(256);

    fn preset(name: &str) -> Option<Rule> {
        match name {
            "java" => Some(Rule::Java),
            "python" => Some(Rule::Python),
            "go" => Some(Rule::Go),
            _ => None,
        }
    }

    /// Reads `multiline` from the source's section.
    pub(super) fn parse(s: &mut Section<'_>) -> Option<Self> {
        let value = s
            .key(
                "multiline",
                "Lines joined into one record: a preset (`java`, `python`, `go`) or a table with `start` or `preset`.",
            )
            .default_text("none: a line is a record")
            .example("java")
            .raw("a preset (\"java\", \"python\", \"go\") or a table");
        if let Some(name) = value.and_then(toml::Value::as_str) {
            return match Self::preset(name) {
                Some(rule) => Some(Self::with_defaults(rule)),
                None => {
                    s.error(
                        "multiline",
                        crate::keys::units::choice_mismatch(
                            "one of \"java\", \"python\", \"go\", or a table with `start`",
                            value.expect("a string"),
                            PRESETS,
                        ),
                    );
                    None
                }
            };
        }
        // The table's keys are declared in a documenting walk too (as `multiline.…`).
        if value.is_none() && !s.is_documenting() {
            return None;
        }
        let mut t = s.sub_table("multiline", value)?;
        let start = t
            .key(
                "start",
                "A regular expression: a line that matches begins a record, the others join it.",
            )
            .example("^\\d{4}-\\d{2}-\\d{2} ")
            .opt::<String>();
        let preset = t
            .key(
                "preset",
                "A preset instead of `start`: `java`, `python` or `go`.",
            )
            .example("python")
            .opt::<String>();
        let max_lines = t
            .key("max_lines", "Lines per record at most (counted when cut).")
            .unit("lines")
            .or(u64::from(Self::DEFAULT_MAX_LINES));
        let max_bytes = t
            .key("max_bytes", "Bytes per record at most (counted when cut).")
            .or(Self::DEFAULT_MAX_BYTES);
        let timeout = t
            .key(
                "timeout",
                "A record ends after this long without a new line.",
            )
            .or(Duration::secs(1));
        if value.is_none() {
            t.finish();
            return None; // documenting
        }
        let rule = match (start, preset) {
            (Some(start), None) => match Regex::new(&start) {
                Ok(_) => Some(Rule::Start(start)),
                Err(e) => {
                    t.error("start", format!("not a valid regular expression: {e}"));
                    None
                }
            },
            (None, Some(name)) => {
                let rule = Self::preset(&name);
                if rule.is_none() {
                    t.error(
                        "preset",
                        format!("expected one of {}, found {name:?}", PRESETS.join(", ")),
                    );
                }
                rule
            }
            (Some(_), Some(_)) => {
                t.error_here("expected `start` or `preset`, not both");
                None
            }
            (None, None) => {
                if !t.failed(&["start", "preset"]) {
                    t.error_here(
                        "expected `start` (a regular expression) or `preset` (java, python, go), e.g. multiline = { start = '^\\d{4}-' }",
                    );
                }
                None
            }
        };
        if max_lines == 0 || max_lines > 100_000 {
            t.error(
                "max_lines",
                format!("expected 1 to 100000 lines, found {max_lines}"),
            );
        }
        t.finish();
        Some(MultilineConfig {
            rule: rule?,
            max_lines: u32::try_from(max_lines).unwrap_or(u32::MAX),
            max_bytes,
            timeout,
        })
    }

    fn with_defaults(rule: Rule) -> Self {
        MultilineConfig {
            rule,
            max_lines: Self::DEFAULT_MAX_LINES,
            max_bytes: Self::DEFAULT_MAX_BYTES,
            timeout: Duration::secs(1),
        }
    }
}

/// An assembled record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assembled {
    /// Its lines joined with `\n`, trailing blank lines trimmed.
    pub bytes: Vec<u8>,
    /// Offset of its first line's first byte.
    pub start: u64,
    /// Offset just past its last line.
    pub end: u64,
    /// It ended at `max_lines` or `max_bytes`.
    pub bounded: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Python {
    Outside,
    Traceback,
    AfterException,
    Chained,
}

/// What a line does to the record being assembled.
#[derive(Debug, Clone)]
enum Matcher {
    Start(Regex),
    Java,
    Python(Python),
    Go { in_panic: bool },
}

fn indented(line: &[u8]) -> bool {
    matches!(line.first(), Some(b' ' | b'\t'))
}

fn blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// `java.lang.IllegalStateException: boom`, `com.x.MyError`.
fn java_exception(line: &[u8]) -> bool {
    let head = line.split(|&b| b == b':').next().unwrap_or_default();
    let dotted = head.contains(&b'.')
        && head
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'$');
    dotted
        && ["Exception", "Error", "Throwable"]
            .iter()
            .any(|s| head.ends_with(s.as_bytes()))
}

/// `main.main()`, `main.(*T).Run(0xc0000b2000)`, `panic({0x4a1f20, 0xc000012345})`.
fn go_function(line: &[u8]) -> bool {
    line.ends_with(b")")
        && line.contains(&b'(')
        && !line.contains(&b' ')
        && line
            .first()
            .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_')
}

impl Matcher {
    /// Whether `line` joins the open record (`open`: one is open).
    fn joins(&mut self, line: &[u8], open: bool) -> bool {
        match self {
            Matcher::Start(re) => {
                // A start is a line's own matter; a non-UTF-8 line is matched lossily.
                let text = String::from_utf8_lossy(line);
                open && !re.is_match(&text)
            }
            Matcher::Java => {
                open && ((indented(line) && !blank(line))
                    || line.starts_with(b"Caused by:")
                    || line.starts_with(b"Suppressed:")
                    || java_exception(line))
            }
            Matcher::Python(state) => {
                let (joins, next) = python(*state, line);
                *state = next;
                open && joins
            }
            Matcher::Go { in_panic } => {
                if line.starts_with(b"panic: ") || line.starts_with(b"fatal error: ") {
                    *in_panic = true;
                    // A second panic while panicking belongs to the first.
                    return open && line.ends_with(b"[recovered]");
                }
                if *in_panic {
                    let part = blank(line)
                        || indented(line)
                        || line.starts_with(b"goroutine ")
                        || line.starts_with(b"created by ")
                        || line.starts_with(b"[signal ")
                        || line.starts_with(b"exit status ")
                        || go_function(line);
                    if part {
                        return open;
                    }
                    *in_panic = false;
                }
                open && indented(line) && !blank(line)
            }
        }
    }
}

fn python(state: Python, line: &[u8]) -> (bool, Python) {
    let traceback = line.starts_with(b"Traceback (most recent call last):");
    let chained = line.starts_with(b"During handling of the above exception")
        || line.starts_with(b"The above exception was the direct cause");
    match state {
        _ if traceback => (true, Python::Traceback),
        Python::Traceback if indented(line) || blank(line) => (true, Python::Traceback),
        Python::Traceback => (true, Python::AfterException),
        Python::AfterException | Python::Chained if chained => (true, Python::Chained),
        Python::AfterException | Python::Chained if blank(line) => (true, state),
        _ => (false, Python::Outside),
    }
}

#[derive(Debug, Clone)]
struct Pending {
    bytes: Vec<u8>,
    lines: u32,
    start: u64,
    end: u64,
    last_ms: u64,
}

/// Assembles one file's multi-line records; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct Assembler {
    matcher: Matcher,
    max_lines: u32,
    max_bytes: usize,
    timeout_ms: u64,
    pending: Option<Pending>,
}

impl Assembler {
    /// An assembler for `config` (its `start` is a valid regex: checked when parsed).
    pub fn new(config: &MultilineConfig) -> Self {
        let matcher = match &config.rule {
            Rule::Start(re) => Matcher::Start(Regex::new(re).expect("checked when parsed")),
            Rule::Java => Matcher::Java,
            Rule::Python => Matcher::Python(Python::Outside),
            Rule::Go => Matcher::Go { in_panic: false },
        };
        Assembler {
            matcher,
            max_lines: config.max_lines,
            max_bytes: usize::try_from(config.max_bytes.bytes()).unwrap_or(usize::MAX),
            timeout_ms: u64::try_from(config.timeout.get().as_millis()).unwrap_or(u64::MAX),
            pending: None,
        }
    }

    /// Takes a line (`start`..`end` in the file); a record it completes goes to `out`.
    pub fn push(
        &mut self,
        line: &[u8],
        start: u64,
        end: u64,
        now_ms: u64,
        out: &mut impl FnMut(Assembled),
    ) {
        let joins = self.matcher.joins(line, self.pending.is_some());
        if joins && let Some(p) = &mut self.pending {
            let fits = p.lines < self.max_lines && p.bytes.len() + 1 + line.len() <= self.max_bytes;
            if fits {
                p.bytes.push(b'\n');
                p.bytes.extend_from_slice(line);
                p.lines += 1;
                p.end = end;
                p.last_ms = now_ms;
                return;
            }
            out(Self::finish(self.pending.take(), true).expect("pending"));
        } else if let Some(done) = Self::finish(self.pending.take(), false) {
            out(done);
        }
        let mut bytes = Vec::with_capacity(line.len().max(64));
        bytes.extend_from_slice(line);
        self.pending = Some(Pending {
            bytes,
            lines: 1,
            start,
            end,
            last_ms: now_ms,
        });
    }

    fn finish(pending: Option<Pending>, bounded: bool) -> Option<Assembled> {
        let mut p = pending?;
        // Trailing blank lines (a traceback's last, say) are not part of the record.
        while let Some(at) = p.bytes.iter().rposition(|&b| b == b'\n') {
            if !blank(&p.bytes[at + 1..]) {
                break;
            }
            p.bytes.truncate(at);
        }
        Some(Assembled {
            bytes: p.bytes,
            start: p.start,
            end: p.end,
            bounded,
        })
    }

    /// The open record, if `timeout` has passed since its last line.
    pub fn poll(&mut self, now_ms: u64) -> Option<Assembled> {
        let due = self
            .pending
            .as_ref()
            .is_some_and(|p| now_ms.saturating_sub(p.last_ms) >= self.timeout_ms);
        if due { self.flush() } else { None }
    }

    /// The open record, whatever its age (the file is released, or input ended).
    pub fn flush(&mut self) -> Option<Assembled> {
        Self::finish(self.pending.take(), false)
    }

    /// When the open record's timeout falls, in ms.
    pub fn deadline_ms(&self) -> Option<u64> {
        self.pending
            .as_ref()
            .map(|p| p.last_ms.saturating_add(self.timeout_ms))
    }

    /// Where the open record began: a position must not pass it.
    pub fn held_from(&self) -> Option<u64> {
        self.pending.as_ref().map(|p| p.start)
    }
}

#[cfg(test)]
#[path = "multiline_tests.rs"]
mod tests;
