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
//! error (indexing a string, arithmetic on the wrong types, `error(…)`) is a
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
//!
//! - [`expression`]: the expression: compiled ([`Filter::compile`], errors with the
//!   character), evaluated on one record ([`Filter::eval`]);
//! - this module: the filter as the driver applies it ([`Applied`]): counts, warnings,
//!   `on_filter_error`.

pub mod expression;

use bytes::Bytes;

pub use self::expression::{CompileError, EvalError, Filter, Verdict};
use super::stats::{SinkStats, add};
use crate::keys::units::string_enum;
use crate::record::RecordRef;
use crate::telemetry::{LossLog, Severity};

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

/// A sink's filter applied by its driver: the verdict, what an error does, the counts
/// (`filtered`, `filter_errors`) and the warnings, rate-limited by a [`LossLog`] (the
/// first error at once, then a summary at most every [`SUMMARY_EVERY`]).
///
/// [`SUMMARY_EVERY`]: crate::telemetry::SUMMARY_EVERY
#[derive(Debug)]
pub struct Applied {
    filter: SinkFilter,
    /// Made on the first error, which names the sink.
    errors: Option<LossLog>,
}

impl Applied {
    /// The driver's state for `filter`.
    pub fn new(filter: SinkFilter) -> Self {
        Applied {
            filter,
            errors: None,
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
            Verdict::Error(error) => {
                add(&stats.filter_errors, 1);
                let keep = self.filter.on_error == OnFilterError::Keep;
                self.warn(sink, offset, &error, keep);
                keep
            }
        }
    }

    /// Notes `error` in the sink's filter-error log: the message is formatted only
    /// when it is logged.
    fn warn(&mut self, sink: &str, offset: u64, error: &EvalError, kept: bool) {
        let log = self.errors.get_or_insert_with(|| {
            let what = if kept {
                "kept though its `where` filter failed (on_filter_error = keep)"
            } else {
                "dropped: its `where` filter failed (on_filter_error = drop)"
            };
            LossLog::new(format!("sink {sink}"), what, Severity::Warn)
        });
        log.note(1, &format_args!("WAL record {offset}: {error}"));
    }
}

/// The errors still pending in the rate-limited log are written when the driver ends
/// (at shutdown), not lost with it.
impl Drop for Applied {
    fn drop(&mut self) {
        if let Some(log) = &self.errors {
            log.flush();
        }
    }
}

#[cfg(test)]
mod tests;
