//! What `weir top` shows, computed from one `/status` report and the latest `/history`
//! samples. Sans-IO: the terminal drawing ([`super::draw`]) and the plain lines
//! ([`View::plain`]) both read a [`View`].

use std::fmt::Write as _;

use serde_json::Value;

use crate::cmd::human::{self, seconds};
use crate::config::format_bytes;
use crate::telemetry::StatusReport;
use crate::telemetry::history::{Forecast, HistoryReport};
use crate::telemetry::trend::Direction;

/// A queue or budget at or above this share is where the wave is.
pub const WAVE_FILL: f64 = 0.9;

/// One component's row.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentRow {
    /// Its name.
    pub name: String,
    /// `source`, `wal`, `sink` or `runtime`.
    pub kind: String,
    /// Its state, with the failure reason.
    pub state: String,
    /// Seconds in that state.
    pub for_seconds: f64,
    /// Records per second in (sources, the WAL) or out (sinks), smoothed
    /// ([`HistoryReport::rate`]).
    pub records_per_second: Option<f64>,
    /// Bytes per second, the same way.
    pub bytes_per_second: Option<f64>,
}

/// One queue's fill bar.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueRow {
    /// Its name.
    pub name: String,
    /// 0 to 1, absent without a bound.
    pub fill: Option<f64>,
    /// Items queued and the bound.
    pub depth: String,
}

/// One sink's cursor and lag.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkRow {
    /// Its name.
    pub name: String,
    /// The committed WAL offset.
    pub committed: u64,
    /// Records behind.
    pub lag_records: u64,
    /// Bytes behind.
    pub lag_bytes: u64,
    /// Age of the oldest unread record, in seconds.
    pub lag_age_seconds: f64,
    /// `max_lag` as configured, in human units (`24 MiB, 10m`), or `none`.
    pub max_lag: String,
    /// `yes`, `yes (released)` or `no`.
    pub required: String,
}

/// Everything on the screen.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// First line: the daemon, its config and uptime.
    pub title: String,
    /// Where the backpressure wave is, if anywhere.
    pub wave: Option<String>,
    /// Components in pipeline order.
    pub components: Vec<ComponentRow>,
    /// Queues.
    pub queues: Vec<QueueRow>,
    /// The WAL's share of its budget, 0 to 1.
    pub wal_used: f64,
    /// `1.9 MiB of 2 MiB · on_full = block · full in 4.0 min at +8 KiB/s`.
    pub wal_line: String,
    /// Sinks.
    pub sinks: Vec<SinkRow>,
}

fn rate(history: Option<&HistoryReport>, name: &str) -> Option<f64> {
    history?.rate(name)
}

/// Samples back that count as "now" for a counter that should be still (refusals).
const RECENT_SAMPLES: usize = 5;

/// Whether counter `name` grew over the last [`RECENT_SAMPLES`] samples: a smoothed
/// rate fades over a minute, what is happening now is told by the raw counter.
fn grew_recently(history: Option<&HistoryReport>, name: &str) -> bool {
    let Some(values) = history.and_then(|h| h.series(name)).map(|s| &s.values) else {
        return false;
    };
    let recent: Vec<f64> = values
        .iter()
        .rev()
        .take(RECENT_SAMPLES + 1)
        .filter_map(|v| *v)
        .collect();
    match (recent.first(), recent.last()) {
        (Some(newest), Some(oldest)) => newest > oldest,
        _ => false,
    }
}

fn u(value: &Value) -> u64 {
    value.as_u64().unwrap_or(0)
}

fn forecast_text(f: &Forecast, used: f64, on_full: &str) -> String {
    match (f.net_bytes_per_second, f.full_in_seconds) {
        _ if used >= 0.98 || f.full_in_seconds == Some(0.0) => match on_full {
            "block" => "full now: sources wait".to_owned(),
            "reject" => "full now: sources refuse".to_owned(),
            _ => "full now: oldest segments evicted".to_owned(),
        },
        (Some(rate), Some(secs)) => format!(
            "full in {} at the trend of the last minute (+{}/s)",
            seconds(secs),
            format_bytes(rate.max(0.0) as u64)
        ),
        (Some(rate), None) if f.trend == Direction::Shrinking => {
            format!("not filling: shrinking {}/s", format_bytes((-rate) as u64))
        }
        (Some(_), None) => "not filling".to_owned(),
        (None, _) => "forecast: waiting for two samples".to_owned(),
    }
}

impl View {
    /// The view of `status` at `addr`, with rates from `history`'s last two samples.
    pub fn new(addr: &str, status: &StatusReport, history: Option<&HistoryReport>) -> View {
        let section = |key: &str| status.sections.get(key).cloned().unwrap_or(Value::Null);
        let (sources, sinks, wal) = (section("sources"), section("sinks"), section("wal"));
        let components = status
            .components
            .iter()
            .map(|c| {
                let (records, bytes) = match c.kind.as_str() {
                    "source" => (
                        rate(history, &format!("sources.{}.records", c.name)),
                        rate(history, &format!("sources.{}.bytes", c.name)),
                    ),
                    "sink" => (
                        rate(history, &format!("sinks.{}.records", c.name)),
                        rate(history, &format!("sinks.{}.bytes", c.name)),
                    ),
                    "wal" => (
                        rate(history, "wal.appended_records"),
                        rate(history, "wal.appended_bytes"),
                    ),
                    _ => (None, None),
                };
                ComponentRow {
                    name: c.name.clone(),
                    kind: c.kind.clone(),
                    state: match &c.reason {
                        Some(reason) => format!("{} ({reason})", c.state),
                        None => c.state.clone(),
                    },
                    for_seconds: c.for_seconds,
                    records_per_second: records,
                    bytes_per_second: bytes,
                }
            })
            .collect();
        let queues = status
            .queues
            .iter()
            .map(|q| QueueRow {
                name: q.name.clone(),
                fill: q.fill,
                depth: format!(
                    "{}/{}",
                    q.depth,
                    q.bound_items
                        .map_or_else(|| "-".to_owned(), |b| b.to_string())
                ),
            })
            .collect();
        let sink_rows: Vec<SinkRow> = sinks
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, s)| {
                let c = &s["cursor"];
                let max_lag = human::max_lag(&s["max_lag"]);
                SinkRow {
                    name: name.clone(),
                    committed: u(&c["committed"]),
                    lag_records: u(&c["lag_records"]),
                    lag_bytes: u(&c["lag_bytes"]),
                    lag_age_seconds: u(&c["lag_age_ms"]) as f64 / 1000.0,
                    max_lag,
                    required: match (c["required"].as_bool(), c["released"].as_bool()) {
                        (Some(false), _) => "no".to_owned(),
                        (_, Some(true)) => "yes (released)".to_owned(),
                        _ => "yes".to_owned(),
                    },
                }
            })
            .collect();
        let wal_used = wal["budget_used"].as_f64().unwrap_or(0.0);
        let on_full = wal["on_full"].as_str().unwrap_or("?");
        let forecast = history.map(|h| h.wal_forecast).unwrap_or_default();
        let wal_line = format!(
            "{} of {} · on_full = {on_full} · {}",
            format_bytes(u(&wal["disk_bytes"])),
            format_bytes(u(&wal["max_disk"])),
            forecast_text(&forecast, wal_used, on_full)
        );
        let wave = wave(status, &sources, &sink_rows, wal_used, history);
        View {
            title: format!(
                "weir at {addr} · config {} · up {}",
                status.config_hash,
                seconds(status.uptime_seconds)
            ),
            wave,
            components,
            queues,
            wal_used,
            wal_line,
            sinks: sink_rows,
        }
    }

    /// The view as plain lines, for a stdout that is not a terminal.
    pub fn plain(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.title);
        let _ = writeln!(
            out,
            "wave: {}",
            self.wave.as_deref().unwrap_or("none: no source held back")
        );
        for c in &self.components {
            let _ = writeln!(
                out,
                "component {} {} {} for {} in/out {} rec/s {}/s",
                c.kind,
                c.name,
                c.state,
                seconds(c.for_seconds),
                c.records_per_second
                    .map_or_else(|| "-".to_owned(), |r| format!("{r:.0}")),
                c.bytes_per_second
                    .map_or_else(|| "-".to_owned(), |b| format_bytes(b as u64)),
            );
        }
        for q in &self.queues {
            let _ = writeln!(
                out,
                "queue {} {} depth {}",
                q.name,
                q.fill
                    .map_or_else(|| "-".to_owned(), |f| format!("{:.0}%", f * 100.0)),
                q.depth
            );
        }
        let _ = writeln!(
            out,
            "wal budget {:.0}% {}",
            self.wal_used * 100.0,
            self.wal_line
        );
        for s in &self.sinks {
            let _ = writeln!(
                out,
                "sink {} cursor {} lag {} records {} {} old max_lag {} required {}",
                s.name,
                s.committed,
                s.lag_records,
                format_bytes(s.lag_bytes),
                seconds(s.lag_age_seconds),
                s.max_lag,
                s.required
            );
        }
        out
    }
}

/// The wave, as the dashboard words it: the slow sink (a required one the WAL keeps the
/// most data for), the WAL's share of its budget, and the sources it holds up.
fn wave(
    status: &StatusReport,
    sources: &Value,
    sinks: &[SinkRow],
    wal_used: f64,
    history: Option<&HistoryReport>,
) -> Option<String> {
    let mut held: Vec<String> = status
        .components
        .iter()
        .filter(|c| c.kind == "source" && (c.state == "backpressured" || c.state == "paused"))
        .map(|c| {
            let waited = sources[&c.name]["waiting_ms"]
                .as_u64()
                .map_or(c.for_seconds, |ms| ms as f64 / 1000.0);
            let verb = if c.state == "paused" {
                "paused"
            } else {
                "blocked"
            };
            format!("{} {verb} {}", c.name, seconds(waited))
        })
        .collect();
    for name in sources.as_object().into_iter().flatten().map(|(n, _)| n) {
        let (records, requests) = (
            format!("sources.{name}.refused_records"),
            format!("sources.{name}.refused_requests"),
        );
        if grew_recently(history, &records) || grew_recently(history, &requests) {
            let refused =
                rate(history, &records).unwrap_or(0.0) + rate(history, &requests).unwrap_or(0.0);
            held.push(format!("{name} refusing {refused:.0}/s"));
        }
    }
    let broken: Vec<String> = status
        .components
        .iter()
        .filter(|c| c.state == "failed" || c.state == "degraded")
        .map(|c| {
            let verb = if c.state == "failed" {
                "failed"
            } else {
                "losing records"
            };
            format!("{} {} {verb}", c.kind, c.name)
        })
        .collect();
    let slow = sinks
        .iter()
        .filter(|s| s.lag_bytes > 0)
        .max_by_key(|s| (s.required == "yes", s.lag_bytes));
    let pressed = wal_used >= WAVE_FILL || !held.is_empty();
    let mut parts = broken;
    match slow {
        Some(slow) if pressed => {
            let mut text = format!(
                "slow sink {} ({} behind) → WAL {:.0}% of budget",
                slow.name,
                format_bytes(slow.lag_bytes),
                wal_used * 100.0
            );
            if !held.is_empty() {
                text.push_str(" → ");
                text.push_str(&held.join(", "));
            }
            parts.push(text);
        }
        _ if pressed => parts.push(format!(
            "WAL {:.0}% of budget; held: {}",
            wal_used * 100.0,
            held.join(", ")
        )),
        _ => {}
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}
