//! The live line: once a second, on a terminal, records in/out per second, the WAL's
//! budget use and the slowest sink's lag.
//!
//! It is drawn by the log writer's thread ([`LogHandle::status_line`]), never written
//! to stderr from the task: a slow terminal then costs a replaced line, not a parked
//! runtime worker.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use super::status::Registry;
use crate::logging::LogHandle;
use crate::pipeline::stats::get;

/// Totals the line is computed from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Records made durable by all sources.
    pub records_in: u64,
    /// Records stored by all sinks.
    pub records_out: u64,
}

/// The line for two snapshots `elapsed` apart. Sans-IO.
pub fn line(
    before: Totals,
    now: Totals,
    elapsed: Duration,
    wal_used: f64,
    slowest: Option<(&str, u64)>,
) -> String {
    let secs = elapsed.as_secs_f64().max(1e-3);
    let per_sec = |a: u64, b: u64| (b.saturating_sub(a) as f64 / secs).round() as u64;
    let lag = slowest.map_or_else(
        || "no sinks".to_owned(),
        |(name, records)| format!("slowest sink {name}: {records} records behind"),
    );
    format!(
        "in {}/s  out {}/s  WAL {:.0}% of budget  {lag}",
        per_sec(before.records_in, now.records_in),
        per_sec(before.records_out, now.records_out),
        wal_used * 100.0,
    )
}

fn totals(registry: &Registry) -> Totals {
    Totals {
        records_in: registry
            .sources()
            .iter()
            .map(|(_, _, s)| get(&s.records))
            .sum(),
        records_out: registry.sinks().iter().map(|(_, s)| get(&s.records)).sum(),
    }
}

/// Starts the live line if stderr is a terminal and logging is set up (`log`) with text
/// lines: the line goes through the log writer, and without it (or with JSON lines,
/// which it would break) there is no line.
pub fn spawn_if_terminal(
    registry: Arc<Registry>,
    log: Option<LogHandle>,
) -> Option<tokio::task::JoinHandle<()>> {
    let log = log?;
    if !std::io::stderr().is_terminal() || log.format() == crate::logging::LogFormat::Json {
        return None;
    }
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        let mut before = totals(&registry);
        let mut at = tokio::time::Instant::now();
        loop {
            tick.tick().await;
            let now = totals(&registry);
            let wal = registry.wal.stats();
            let slowest = wal
                .cursors
                .iter()
                .max_by_key(|c| c.lag_records)
                .map(|c| (c.name.as_str(), c.lag_records));
            let text = line(before, now, at.elapsed(), wal.budget_used, slowest);
            log.status_line(&text);
            before = now;
            at = tokio::time::Instant::now();
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_reads_rates_budget_and_lag() {
        let l = line(
            Totals {
                records_in: 100,
                records_out: 50,
            },
            Totals {
                records_in: 5100,
                records_out: 550,
            },
            Duration::from_secs(1),
            0.421,
            Some(("slow", 12_000)),
        );
        assert_eq!(
            l,
            "in 5000/s  out 500/s  WAL 42% of budget  slowest sink slow: 12000 records behind"
        );
    }
}
