//! Times written in records: read with a strftime format (the file source's
//! `timestamp:<format>` captures, a sink's timestamp columns and event time).

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};

/// `value` read with strftime `format`: with its zone when it has one, else as UTC (a
/// date alone is its midnight, UTC).
pub fn parse_strftime(value: &str, format: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_str(value, format) {
        return Some(t.with_timezone(&Utc));
    }
    if let Ok(t) = NaiveDateTime::parse_from_str(value, format) {
        return Some(t.and_utc());
    }
    NaiveDate::parse_from_str(value, format)
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

/// Whether `format` is a strftime format chrono can use.
pub fn is_strftime(format: &str) -> bool {
    !format.is_empty()
        && !chrono::format::StrftimeItems::new(format)
            .any(|item| matches!(item, chrono::format::Item::Error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_without_a_zone_are_utc() {
        let t = parse_strftime("2024-12-06 10:00:00", "%Y-%m-%d %H:%M:%S").unwrap();
        assert_eq!(t.to_rfc3339(), "2024-12-06T10:00:00+00:00");
        let t = parse_strftime("2024-12-06", "%Y-%m-%d").unwrap();
        assert_eq!(t.timestamp(), 1_733_443_200);
        let t = parse_strftime("10/Oct/2024:13:55:36 +0200", "%d/%b/%Y:%H:%M:%S %z").unwrap();
        assert_eq!(t.to_rfc3339(), "2024-10-10T11:55:36+00:00");
        assert!(parse_strftime("yesterday", "%Y-%m-%d").is_none());
        assert!(is_strftime("%Y-%m-%d"));
        assert!(!is_strftime("%Q"));
    }
}
