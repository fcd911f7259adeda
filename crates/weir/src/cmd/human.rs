//! Figures for people: sizes in binary units, durations in the largest unit that reads
//! well, and any `/status` value by what its key says it is (`…_bytes`, `…_ms`,
//! `…_us`, `…_seconds`, `…_unix_ms`). `weir status` and `weir top` print through it;
//! the dashboard has the same rules in JavaScript.

use serde_json::Value;

use crate::config::format_bytes;

/// `0 s`, `150 µs`, `2.5 ms`, `250 ms`, `2.5 s`, `3.0 min`, `1.5 h`.
pub fn seconds(s: f64) -> String {
    match s {
        s if !s.is_finite() => "-".to_owned(),
        s if s <= 0.0 => "0 s".to_owned(),
        s if s < 1e-3 => format!("{:.0} µs", s * 1e6),
        s if s < 1e-2 => format!("{:.1} ms", s * 1e3),
        s if s < 1.0 => format!("{:.0} ms", s * 1000.0),
        s if s < 120.0 => format!("{s:.1} s"),
        s if s < 7200.0 => format!("{:.1} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

/// A count of bytes as a size, or `-` when absent.
pub fn bytes(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_owned(), format_bytes)
}

/// A rate: `512/s`, or `4 MiB/s` for bytes; `-` when unknown.
pub fn per_second(value: Option<f64>, of_bytes: bool) -> String {
    match value {
        None => "-".to_owned(),
        Some(v) if of_bytes => format!("{}/s", format_bytes(v.max(0.0).round() as u64)),
        Some(v) => format!("{v:.0}/s"),
    }
}

/// A sink's `max_lag` from `/status` (`{"bytes": 25165824, "age": "10m"}`, either part
/// null or absent): `24 MiB`, `10m`, `24 MiB, 10m`, or `none`.
pub fn max_lag(value: &Value) -> String {
    let part = |key: &str| match value.get(key) {
        Some(Value::Number(n)) if key == "bytes" => n.as_u64().map(format_bytes),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(Value::String(text)) if !text.is_empty() => Some(text.clone()),
        _ => None,
    };
    let parts: Vec<String> = ["bytes", "age"].into_iter().filter_map(part).collect();
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}

/// A time in milliseconds since the Unix epoch as RFC 3339 in UTC, to the second.
pub fn unix_ms(ms: u64) -> String {
    let Ok(ms) = i64::try_from(ms) else {
        return ms.to_string();
    };
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}

/// A `/status` value shown by what its key says it is: a size for `bytes`,
/// `max_disk` and `…_bytes`, a duration for `…_ms`, `…_us` and `…_seconds`, a time for `…_unix_ms`; a
/// list of scalars joined by commas, `[a, b]` ranges as `a..b`; `-` for null. Objects
/// are shown as `{…}` (callers walk them).
pub fn value(key: &str, shown: &Value) -> String {
    match shown {
        Value::Null => "-".to_owned(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.to_owned(),
        Value::String(text) => text.clone(),
        Value::Number(n) => number(key, n),
        Value::Array(items) if items.is_empty() => "none".to_owned(),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Array(pair) if pair.len() == 2 && pair.iter().all(Value::is_number) => {
                    format!("{}..{}", pair[0], pair[1])
                }
                Value::Object(_) | Value::Array(_) => item.to_string(),
                other => value(key, other),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Value::Object(_) => "{…}".to_owned(),
    }
}

fn number(key: &str, n: &serde_json::Number) -> String {
    let f = n.as_f64().unwrap_or(f64::NAN);
    if key.ends_with("_unix_ms") {
        return n.as_u64().map_or_else(|| n.to_string(), unix_ms);
    }
    if key == "bytes" || key == "max_disk" || key.ends_with("_bytes") {
        return n.as_u64().map_or_else(|| n.to_string(), format_bytes);
    }
    if key.ends_with("_ms") {
        return seconds(f / 1e3);
    }
    if key.ends_with("_us") {
        return seconds(f / 1e6);
    }
    if key.ends_with("_seconds") {
        return seconds(f);
    }
    if n.is_f64() {
        return if (0.0..=1.0).contains(&f) && (key.contains("used") || key.contains("fill")) {
            format!("{:.0}%", f * 100.0)
        } else {
            format!("{f:.3}")
        };
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn max_lag_reads_in_human_units_whatever_is_set() {
        assert_eq!(
            max_lag(&json!({"bytes": 25_165_824, "age": null})),
            "24 MiB"
        );
        assert_eq!(
            max_lag(&json!({"bytes": 25_165_824, "age": "10m"})),
            "24 MiB, 10m"
        );
        assert_eq!(max_lag(&json!({"bytes": null, "age": "1h"})), "1h");
        assert_eq!(max_lag(&json!({"age": "1h"})), "1h");
        assert_eq!(max_lag(&Value::Null), "none");
        assert_eq!(max_lag(&json!({})), "none");
    }

    #[test]
    fn values_are_shown_by_what_their_key_says() {
        assert_eq!(value("lag_bytes", &json!(3_145_728)), "3 MiB");
        assert_eq!(value("bytes", &json!(512)), "512 B");
        assert_eq!(value("lag_age_ms", &json!(90_000)), "90.0 s");
        assert_eq!(value("fsync_p99_us", &json!(2_500)), "2.5 ms");
        assert_eq!(value("fsync_p50_us", &json!(150)), "150 µs");
        assert_eq!(value("waiting_ms", &json!(0)), "0 s");
        assert_eq!(value("uptime_seconds", &json!(7_200.0)), "2.0 h");
        assert_eq!(value("budget_used", &json!(0.5)), "50%");
        assert_eq!(
            value("since_unix_ms", &json!(1_700_000_000_000_u64)),
            "2023-11-14T22:13:20Z"
        );
        assert_eq!(value("records", &json!(12)), "12");
        assert_eq!(value("ranges", &json!([[5, 9], [12, 20]])), "5..9, 12..20");
        assert_eq!(value("topics", &json!(["a", "b"])), "a, b");
        assert_eq!(value("gaps", &json!([])), "none");
        assert_eq!(value("poisoned", &Value::Null), "-");
        assert_eq!(value("required", &json!(true)), "yes");
        assert_eq!(per_second(Some(1536.4), true), "1.5 KiB/s");
        assert_eq!(per_second(Some(511.6), false), "512/s");
        assert_eq!(per_second(None, false), "-");
        assert_eq!(seconds(0.25), "250 ms");
    }
}
