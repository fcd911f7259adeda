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
        "{name:<name_width$}{}{}{}{}{}{} ms{} ms{} ms",
        cell(outcome.offered, 9),
        cell(outcome.completed, 10),
        cell(outcome.rejected, 9),
        cell(outcome.expired, 8),
        cell(outcome.max_depth, 9),
        cell(outcome.max_queue_wait_ms, 10),
        cell(outcome.producer_wait_ms, 11),
        cell(outcome.finished_ms, 7),
    )
}

/// `value` right-aligned in `width` characters, with at least one space before it so
/// that a number wider than its column never runs into the previous one.
fn cell(value: u64, width: usize) -> String {
    let text = value.to_string();
    if text.len() < width {
        format!("{text:>width$}")
    } else {
        format!(" {text}")
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_and_rule_are_the_lessons() {
        let table = format_table(std::iter::empty());
        assert_eq!(table, format!("{TABLE_HEADER}\n{TABLE_RULE}\n"));
        assert_eq!(TABLE_HEADER.len(), 98);
        assert_eq!(TABLE_RULE.len(), 104);
    }

    #[test]
    fn numbers_wider_than_their_column_stay_apart() {
        let outcome = Outcome {
            offered: 1_000_000_000,
            finished_ms: 12_345_678,
            ..Outcome::default()
        };
        let row = format_row("x", &outcome);
        assert!(row.contains(" 1000000000 "), "{row}");
        assert!(row.ends_with(" ms 12345678 ms"), "{row}");
    }

    #[test]
    fn long_names_widen_the_name_column_for_every_line() {
        let outcome = Outcome::default();
        let table = format_table([
            ("a name longer than sixteen", &outcome),
            ("short", &outcome),
        ]);
        let lines: Vec<&str> = table.lines().collect();
        let offered_end = lines[0].find("offered").unwrap() + "offered".len();
        for row in &lines[2..] {
            assert_eq!(row.as_bytes()[offered_end - 1], b'0', "{table}");
        }
        assert_eq!(lines[1].len(), TABLE_RULE.len() + 27 - 16);
    }
}
