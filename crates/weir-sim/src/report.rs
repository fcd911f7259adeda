//! The lab's table layout, column for column the one of the lesson's Java lab.

use std::fmt::Write as _;

use crate::engine::Outcome;

/// The header line of a strategy table.
pub const TABLE_HEADER: &str = "strategy          offered completed rejected expired maxDepth maxQueueWait  producerWait  finished";

/// The line under the header.
pub const TABLE_RULE: &str = "--------------------------------------------------------------------------------------------------------";

/// One table row: the strategy's name and its outcome, in the lesson's layout.
///
/// Dropped and superseded messages have no column (the lesson's layout has none); the lab
/// reports them in a note under the table.
///
/// # Examples
///
/// ```
/// use weir_sim::{Outcome, format_row};
///
/// let outcome = Outcome { offered: 600, completed: 600, max_depth: 1, finished_ms: 5_995, ..Outcome::default() };
/// assert_eq!(
///     format_row("unbounded queue", &outcome),
///     "unbounded queue       600       600        0       0        1         0 ms          0 ms   5995 ms",
/// );
/// ```
pub fn format_row(name: &str, outcome: &Outcome) -> String {
    format_row_with_width(name, outcome, 16)
}

fn format_row_with_width(name: &str, outcome: &Outcome, name_width: usize) -> String {
    format!(
        "{name:<name_width$}{:>9}{:>10}{:>9}{:>8}{:>9}{:>10} ms{:>11} ms{:>7} ms",
        outcome.offered,
        outcome.completed,
        outcome.rejected,
        outcome.expired,
        outcome.max_depth,
        outcome.max_queue_wait_ms,
        outcome.producer_wait_ms,
        outcome.finished_ms,
    )
}

/// A whole table: header, rule and one row per `(name, outcome)`, each line ending in a
/// newline.
///
/// The name column is the lesson's 16 characters, widened when a name needs more.
pub fn format_table<'a>(rows: impl IntoIterator<Item = (&'a str, &'a Outcome)>) -> String {
    let rows: Vec<(&str, &Outcome)> = rows.into_iter().collect();
    let longest = rows.iter().map(|(name, _)| name.chars().count() + 1);
    let name_width = longest.max().unwrap_or(0).max(16);
    let widen = name_width - 16;
    let mut out = String::new();
    let _ = writeln!(out, "{:<name_width$}{}", "strategy", &TABLE_HEADER[16..]);
    let _ = writeln!(out, "{TABLE_RULE}{}", "-".repeat(widen));
    for (name, outcome) in rows {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "{}", format_row_with_width(name, outcome, name_width));
    }
    out
}
