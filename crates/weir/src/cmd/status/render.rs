//! What `weir status` prints: the `/status` document as tables and lines, every figure
//! in human units ([`crate::cmd::human`]).
//!
//! In order: the components and the reason of any that is failed or degraded; the
//! queues; the WAL (budget, offsets, appends, fsync latency, retention, filesystem
//! room, lost ranges, poisoning); the sources and the sinks as tables (counters, cursor,
//! lag, `max_lag`), each followed by its other figures and its type's details (an MQTT
//! window, a sink's closed files by reason, …); then every other section
//! (`quarantine`, `wal_recovery`, `history`, and any a later weir adds), key by key.
//! Nothing is printed as JSON: `weir status --json` is for that.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::cmd::human::{self, max_lag, seconds, value};
use crate::config::format_bytes;
use crate::telemetry::StatusReport;

/// Lines of key/value pairs are wrapped at this width.
const WIDTH: usize = 100;

/// Left-aligned columns, two spaces apart.
fn table(out: &mut String, rows: &[Vec<String>]) {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |cell| cell.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            let _ = write!(line, "{cell:<width$}  ");
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

fn header(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// The scalar entries of `map` (but `skip`) as `key: value` pairs joined by ` · `,
/// wrapped at [`WIDTH`] under `indent`; then each nested object on lines of its own,
/// one level deeper, headed `key:`.
fn details(out: &mut String, indent: usize, map: &Map<String, Value>, skip: &[&str]) {
    let pad = " ".repeat(indent);
    let mut items = Vec::new();
    let mut nested: Vec<(String, &Map<String, Value>)> = Vec::new();
    for (key, v) in map {
        if skip.contains(&key.as_str()) {
            continue;
        }
        match v {
            Value::Object(inner) => nested.push((key.clone(), inner)),
            Value::Array(list) if list.iter().any(Value::is_object) => {
                for (i, item) in list.iter().enumerate() {
                    match item {
                        Value::Object(inner) => nested.push((format!("{key}[{i}]"), inner)),
                        other => items.push(format!("{key}[{i}]: {}", value(key, other))),
                    }
                }
            }
            _ => items.push(format!("{key}: {}", value(key, v))),
        }
    }
    let mut line = String::new();
    for item in items {
        if !line.is_empty() && pad.len() + line.len() + 3 + item.len() > WIDTH {
            let _ = writeln!(out, "{pad}{line}");
            line.clear();
        }
        if !line.is_empty() {
            line.push_str(" · ");
        }
        line.push_str(&item);
    }
    if !line.is_empty() {
        let _ = writeln!(out, "{pad}{line}");
    }
    for (key, inner) in nested {
        if inner.is_empty() {
            let _ = writeln!(out, "{pad}{key}: none");
        } else {
            let _ = writeln!(out, "{pad}{key}:");
            details(out, indent + 2, inner, &[]);
        }
    }
}

/// The tables and lines `weir status` prints for `report`, read from `addr`.
pub fn render(addr: &str, report: &StatusReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "weir at {addr}: config {}, up {}\n",
        report.config_hash,
        seconds(report.uptime_seconds)
    );
    components(&mut out, report);
    out.push('\n');
    queues(&mut out, report);
    let section = |key: &str| report.sections.get(key).cloned().unwrap_or(Value::Null);
    if let Value::Object(wal) = section("wal") {
        out.push('\n');
        wal_lines(&mut out, &wal);
    }
    if let Value::Object(sources) = section("sources")
        && !sources.is_empty()
    {
        out.push('\n');
        sources_table(&mut out, &sources);
    }
    if let Value::Object(sinks) = section("sinks")
        && !sinks.is_empty()
    {
        out.push('\n');
        sinks_table(&mut out, &sinks);
    }
    for (name, v) in &report.sections {
        if matches!(name.as_str(), "wal" | "sources" | "sinks") {
            continue;
        }
        let _ = write!(out, "\n{name}:");
        match v {
            Value::Object(map) if map.is_empty() => out.push_str(" none\n"),
            Value::Object(map) => {
                out.push('\n');
                details(&mut out, 2, map, &[]);
            }
            other => {
                let _ = writeln!(out, " {}", value(name, other));
            }
        }
    }
    out
}

fn components(out: &mut String, report: &StatusReport) {
    let mut rows = vec![header(&["COMPONENT", "KIND", "STATE", "FOR"])];
    for c in &report.components {
        rows.push(vec![
            c.name.clone(),
            c.kind.clone(),
            c.state.clone(),
            seconds(c.for_seconds),
        ]);
    }
    table(out, &rows);
    for c in &report.components {
        if let Some(reason) = &c.reason {
            let _ = writeln!(
                out,
                "  {} {} is {} ({} so far): {reason}",
                c.kind,
                c.name,
                c.state,
                seconds(c.for_seconds)
            );
        }
    }
}

fn queues(out: &mut String, report: &StatusReport) {
    let mut rows = vec![header(&[
        "QUEUE",
        "DEPTH/BOUND",
        "BYTES/BOUND",
        "FILL",
        "OLDEST",
        "MAX DEPTH",
        "DROPPED",
        "REJECTED",
        "EXPIRED",
    ])];
    for q in &report.queues {
        let items = q
            .bound_items
            .map_or_else(|| "-".to_owned(), |b| b.to_string());
        rows.push(vec![
            q.name.clone(),
            format!("{}/{items}", q.depth),
            format!("{}/{}", format_bytes(q.bytes), human::bytes(q.bound_bytes)),
            q.fill
                .map_or_else(|| "-".to_owned(), |f| format!("{:.0}%", f * 100.0)),
            seconds(q.oldest_age_seconds),
            q.max_depth.to_string(),
            q.dropped.to_string(),
            q.rejected.to_string(),
            q.expired.to_string(),
        ]);
    }
    table(out, &rows);
}

/// The WAL's figures: what a user asks first, one topic a line.
fn wal_lines(out: &mut String, wal: &Map<String, Value>) {
    let get = |key: &str| wal.get(key).cloned().unwrap_or(Value::Null);
    let _ = writeln!(
        out,
        "WAL: {} of {} ({:.0}% of its budget), on_full = {}; {} segments, offsets {}..{}",
        format_bytes(u(&get("disk_bytes"))),
        format_bytes(u(&get("max_disk"))),
        get("budget_used").as_f64().unwrap_or(0.0) * 100.0,
        get("on_full").as_str().unwrap_or("?"),
        u(&get("segments")),
        u(&get("start")),
        u(&get("durable_end")),
    );
    let _ = writeln!(
        out,
        "  appended {} records, {} · {} fsyncs: p50 {}, p99 {}, max {} · time in fsyncs {}, in writes {}",
        u(&get("appended_records")),
        format_bytes(u(&get("appended_bytes"))),
        u(&get("fsyncs")),
        value("fsync_p50_us", &get("fsync_p50_us")),
        value("fsync_p99_us", &get("fsync_p99_us")),
        value("fsync_max_us", &get("fsync_max_us")),
        value("fsync_time_us", &get("fsync_time_us")),
        value("write_time_us", &get("write_time_us")),
    );
    let _ = writeln!(
        out,
        "  retention deleted {} segments · drop_oldest evicted {} segments ({} records)",
        u(&get("retention_deleted_segments")),
        u(&get("evicted_segments")),
        u(&get("evicted_records")),
    );
    let room = match get("fs_room_bytes") {
        Value::Null => "not measured yet".to_owned(),
        v => format!("{} left", value("fs_room_bytes", &v)),
    };
    let _ = writeln!(
        out,
        "  filesystem: {room} above its {} reserve · found full {} times · segment opens refused {} times",
        value("fs_reserve_bytes", &get("fs_reserve_bytes")),
        u(&get("fs_full_events")),
        u(&get("resource_refusals")),
    );
    for (key, what) in [
        (
            "quarantined_ranges",
            "offsets lost (quarantined at recovery or damaged)",
        ),
        ("damaged_ranges", "damaged records stepped over"),
    ] {
        if let Some(Value::Array(ranges)) = wal.get(key)
            && !ranges.is_empty()
        {
            let _ = writeln!(out, "  {what}: {}", value(key, &get(key)));
        }
    }
    if let Some(cause) = wal.get("poisoned").and_then(Value::as_str) {
        let _ = writeln!(out, "  POISONED, refusing every write: {cause}");
    }
    let shown = [
        "disk_bytes",
        "max_disk",
        "budget_used",
        "on_full",
        "segments",
        "start",
        "durable_end",
        "appended_records",
        "appended_bytes",
        "fsyncs",
        "fsync_p50_us",
        "fsync_p99_us",
        "fsync_max_us",
        "fsync_time_us",
        "write_time_us",
        "retention_deleted_segments",
        "evicted_segments",
        "evicted_records",
        "fs_room_bytes",
        "fs_reserve_bytes",
        "fs_full_events",
        "resource_refusals",
        "quarantined_ranges",
        "damaged_ranges",
        "poisoned",
        // Shown per sink, in the sinks' table.
        "cursors",
    ];
    details(out, 2, wal, &shown);
}

fn sources_table(out: &mut String, sources: &Map<String, Value>) {
    let mut rows = vec![header(&[
        "SOURCE",
        "TYPE",
        "RECORDS",
        "BYTES",
        "BATCHES",
        "REFUSED",
        "EXPIRED",
        "REQ REFUSED",
        "IN DOUBT",
        "WAITING",
    ])];
    for (name, s) in sources {
        rows.push(vec![
            name.clone(),
            s["type"].as_str().unwrap_or("?").to_owned(),
            u(&s["records"]).to_string(),
            format_bytes(u(&s["bytes"])),
            u(&s["batches"]).to_string(),
            u(&s["refused_records"]).to_string(),
            u(&s["expired_records"]).to_string(),
            u(&s["refused_requests"]).to_string(),
            u(&s["in_doubt_records"]).to_string(),
            value("waiting_ms", &s["waiting_ms"]),
        ]);
    }
    table(out, &rows);
    let shown = [
        "type",
        "records",
        "bytes",
        "batches",
        "refused_records",
        "expired_records",
        "refused_requests",
        "in_doubt_records",
        "waiting_ms",
    ];
    for (name, s) in sources {
        if let Value::Object(map) = s
            && map.keys().any(|k| !shown.contains(&k.as_str()))
        {
            let _ = writeln!(out, "  {name}:");
            details(out, 4, map, &shown);
        }
    }
}

fn sinks_table(out: &mut String, sinks: &Map<String, Value>) {
    let mut rows = vec![header(&[
        "SINK",
        "TYPE",
        "RECORDS",
        "BYTES",
        "RETRIES",
        "CURSOR",
        "LAG",
        "LAG BYTES",
        "LAG AGE",
        "MAX_LAG",
        "REQUIRED",
        "GAPS",
    ])];
    for (name, s) in sinks {
        let c = &s["cursor"];
        let required = match (c["required"].as_bool(), c["released"].as_bool()) {
            (None, _) => "-",
            (Some(false), _) => "no",
            (_, Some(true)) => "yes (released)",
            _ => "yes",
        };
        rows.push(vec![
            name.clone(),
            s["type"].as_str().unwrap_or("?").to_owned(),
            u(&s["records"]).to_string(),
            format_bytes(u(&s["bytes"])),
            u(&s["retries"]).to_string(),
            c["committed"]
                .as_u64()
                .map_or_else(|| "-".to_owned(), |n| n.to_string()),
            u(&c["lag_records"]).to_string(),
            format_bytes(u(&c["lag_bytes"])),
            value("lag_age_ms", &c["lag_age_ms"]),
            max_lag(&s["max_lag"]),
            required.to_owned(),
            format!("{} ({} records)", u(&s["gaps"]), u(&s["gap_records"])),
        ]);
    }
    table(out, &rows);
    let shown = [
        "type",
        "records",
        "bytes",
        "retries",
        "cursor",
        "max_lag",
        "gaps",
        "gap_records",
    ];
    for (name, s) in sinks {
        if let Value::Object(map) = s {
            let _ = writeln!(out, "  {name}:");
            details(out, 4, map, &shown);
            if let Value::Object(cursor) = &s["cursor"] {
                let skip = [
                    "name",
                    "required",
                    "released",
                    "committed",
                    "lag_records",
                    "lag_bytes",
                    "lag_age_ms",
                    "gaps",
                    "gap_records",
                ];
                if cursor.keys().any(|k| !skip.contains(&k.as_str())) {
                    let _ = writeln!(out, "    cursor:");
                    details(out, 6, cursor, &skip);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
