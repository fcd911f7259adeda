//! Part 3: the Reactive Streams demand rules, traced on the credit core.

/// Part 3 of the report.
pub fn part3() -> String {
    String::new()
}
