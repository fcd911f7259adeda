//! `GET /history`: the last 15 minutes of the pipeline's figures, one sample a second,
//! in a ring buffer allocated once.
//!
//! Every sample is read from the same [`StatusReport`] that `/status` serves (which
//! reads the same atomics as `/metrics`), so a chart, `weir status` and a Prometheus
//! scrape taken at the same moment agree. The series are fixed when the daemon starts
//! ([`HistoryLayout::pipeline`], from the configured sources and sinks): the ring's
//! memory is known before anything runs, and `weir validate` prints it
//! (`runtime.history`).
//!
//! Counters (`kind: "counter"`) are kept as totals, as `/metrics` reports them; a rate
//! is the difference of two samples over their timestamps. Gauges are kept as read. A
//! value that was absent from the report (a sink without a cursor yet) is `null`.
//!
//! Sampling takes the telemetry's own short locks and the WAL's figures lock (held by
//! the WAL only for bookkeeping, never across I/O), never a queue or a sink: it cannot
//! hold up the pipeline, and `/history` answers from the ring under its own lock, which
//! only the sampler takes, for the time it takes to copy a row.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::component::{ComponentKind, State};
use super::status::StatusReport;

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;

/// Time between two samples.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);
/// How far back `/history` reaches.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// Samples the ring holds: [`WINDOW`] / [`SAMPLE_INTERVAL`].
pub const SAMPLES: usize = 900;
/// Samples (at most) the WAL forecast's trend is measured over.
pub const FORECAST_SAMPLES: usize = super::trend::TREND_WINDOW_SAMPLES;

/// Whether a series is a running total or a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeriesKind {
    /// A monotonic total: rates are differences between samples.
    Counter,
    /// A level read at each sample.
    Gauge,
}

/// Where in the report a series is read.
#[derive(Debug, Clone, PartialEq)]
enum Read {
    /// A number in a status section: the section's key, then the keys inside it.
    Section(Vec<String>),
    /// A count in a status section that lists only what is non-zero: 0 when the
    /// section is there without the entry, absent without the section.
    Count(Vec<String>),
    /// The sum of every number whose key contains `dropped` in a source's own details
    /// (`sources.NAME.TYPE`: MQTT's `qos0_dropped` and `qos0_dropped_at_shutdown`, any
    /// other type's drops named the same way); 0 for a source without details.
    SourceDropped(String),
    /// A queue's fill (0 to 1).
    QueueFill(String),
    /// A queue's depth in items.
    QueueDepth(String),
    /// A component's state, as its index in [`State::NAMES`].
    State(ComponentKind, String),
}

/// One series of the history.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its name: `sources.gen.records`, `wal.budget_used`, `queues.wal->lake.fill`.
    pub name: String,
    /// Counter or gauge.
    pub kind: SeriesKind,
    /// `records`, `bytes`, `ms`, `ratio`, `items`, `requests` or `state`.
    pub unit: &'static str,
    read: Read,
}

/// The series a history keeps, fixed when it is created.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HistoryLayout {
    series: Vec<Series>,
}

impl HistoryLayout {
    /// The series of a pipeline with these sources and sinks:
    ///
    /// - per source: `state`, `records`, `bytes`, `refused_records` (WAL refused),
    ///   `refused_requests` (requests answered 503), `waiting_ms` (how long its current
    ///   wait for admission has lasted), `dropped` (by its own policy, e.g. MQTT QoS 0
    ///   drops: every `*dropped*` number of its details summed);
    /// - the WAL: `state`, `appended_records`, `appended_bytes`, `disk_bytes`,
    ///   `max_disk`, `budget_used`, `evicted_records` (drop_oldest);
    /// - per sink: `state`, `records`, `bytes`, `lag_records`, `lag_bytes`,
    ///   `lag_age_ms`, `gap_records`, `retries`, `unencodable`, `quarantine_dropped`;
    /// - per queue (`source->wal`, `wal->SINK`): `fill` and `depth`.
    pub fn pipeline<'a>(
        sources: impl IntoIterator<Item = &'a str>,
        sinks: impl IntoIterator<Item = &'a str> + Clone,
    ) -> Self {
        let mut layout = Self::default();
        for name in sources {
            let at = |key: &str| Read::Section(path(&["sources", name, key]));
            layout.state(ComponentKind::Source, "sources", name);
            layout.counter(format!("sources.{name}.records"), "records", at("records"));
            layout.counter(format!("sources.{name}.bytes"), "bytes", at("bytes"));
            layout.counter(
                format!("sources.{name}.refused_records"),
                "records",
                at("refused_records"),
            );
            layout.counter(
                format!("sources.{name}.refused_requests"),
                "requests",
                at("refused_requests"),
            );
            layout.gauge(format!("sources.{name}.waiting_ms"), "ms", at("waiting_ms"));
            layout.counter(
                format!("sources.{name}.dropped"),
                "records",
                Read::SourceDropped(name.to_owned()),
            );
        }
        let wal = |key: &str| Read::Section(path(&["wal", key]));
        layout.push("wal.state", SeriesKind::Gauge, "state", {
            Read::State(ComponentKind::Wal, "wal".to_owned())
        });
        layout.counter(
            "wal.appended_records".into(),
            "records",
            wal("appended_records"),
        );
        layout.counter("wal.appended_bytes".into(), "bytes", wal("appended_bytes"));
        layout.gauge("wal.disk_bytes".into(), "bytes", wal("disk_bytes"));
        layout.gauge("wal.max_disk".into(), "bytes", wal("max_disk"));
        layout.gauge("wal.budget_used".into(), "ratio", wal("budget_used"));
        layout.counter(
            "wal.evicted_records".into(),
            "records",
            wal("evicted_records"),
        );
        for name in sinks.clone() {
            let at = |keys: &[&str]| {
                let mut p = vec!["sinks", name];
                p.extend_from_slice(keys);
                Read::Section(path(&p))
            };
            layout.state(ComponentKind::Sink, "sinks", name);
            layout.counter(format!("sinks.{name}.records"), "records", at(&["records"]));
            layout.counter(format!("sinks.{name}.bytes"), "bytes", at(&["bytes"]));
            layout.gauge(
                format!("sinks.{name}.lag_records"),
                "records",
                at(&["cursor", "lag_records"]),
            );
            layout.gauge(
                format!("sinks.{name}.lag_bytes"),
                "bytes",
                at(&["cursor", "lag_bytes"]),
            );
            layout.gauge(
                format!("sinks.{name}.lag_age_ms"),
                "ms",
                at(&["cursor", "lag_age_ms"]),
            );
            layout.counter(
                format!("sinks.{name}.gap_records"),
                "records",
                at(&["gap_records"]),
            );
            layout.counter(
                format!("sinks.{name}.retries"),
                "requests",
                at(&["retries"]),
            );
            layout.counter(
                format!("sinks.{name}.unencodable"),
                "records",
                at(&["unencodable"]),
            );
            layout.counter(
                format!("sinks.{name}.quarantine_dropped"),
                "records",
                Read::Count(path(&["quarantine", "sinks", name, "dropped"])),
            );
        }
        let queues = std::iter::once("source->wal".to_owned())
            .chain(sinks.into_iter().map(|name| format!("wal->{name}")));
        for queue in queues {
            layout.gauge(
                format!("queues.{queue}.fill"),
                "ratio",
                Read::QueueFill(queue.clone()),
            );
            layout.gauge(
                format!("queues.{queue}.depth"),
                "items",
                Read::QueueDepth(queue),
            );
        }
        layout
    }

    fn push(&mut self, name: &str, kind: SeriesKind, unit: &'static str, read: Read) {
        self.series.push(Series {
            name: name.to_owned(),
            kind,
            unit,
            read,
        });
    }

    fn counter(&mut self, name: String, unit: &'static str, read: Read) {
        self.push(&name, SeriesKind::Counter, unit, read);
    }

    fn gauge(&mut self, name: String, unit: &'static str, read: Read) {
        self.push(&name, SeriesKind::Gauge, unit, read);
    }

    fn state(&mut self, kind: ComponentKind, section: &str, name: &str) {
        self.push(
            &format!("{section}.{name}.state"),
            SeriesKind::Gauge,
            "state",
            Read::State(kind, name.to_owned()),
        );
    }

    /// The series, in the order `/history` lists them.
    pub fn series(&self) -> &[Series] {
        &self.series
    }

    /// The ring's memory for `samples` samples: a timestamp (8 bytes) and one `f64` per
    /// series for each. This is what [`History::new`] allocates, once.
    pub fn memory_bytes(&self, samples: usize) -> u64 {
        let row = 8 * (1 + self.series.len() as u64);
        row.saturating_mul(samples as u64)
    }

    /// One sample's values, read from `report`, into `row` (one per series; `NaN` where
    /// the report has no such figure).
    fn read(&self, report: &StatusReport, row: &mut [f64]) {
        for (series, slot) in self.series.iter().zip(row.iter_mut()) {
            *slot = read_one(&series.read, report).unwrap_or(f64::NAN);
        }
    }
}

fn path(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| (*k).to_owned()).collect()
}

fn read_one(read: &Read, report: &StatusReport) -> Option<f64> {
    match read {
        Read::Section(keys) => {
            let (first, rest) = keys.split_first()?;
            let mut value = report.sections.get(first)?;
            for key in rest {
                value = value.get(key)?;
            }
            value.as_f64()
        }
        Read::Count(keys) => {
            let (first, rest) = keys.split_first()?;
            let mut value = report.sections.get(first)?;
            for key in rest {
                match value.get(key) {
                    Some(inner) => value = inner,
                    None => return Some(0.0),
                }
            }
            value.as_f64()
        }
        Read::SourceDropped(name) => {
            let source = report.sections.get("sources")?.get(name)?.as_object()?;
            let dropped = source
                .values()
                .filter_map(serde_json::Value::as_object)
                .flat_map(|detail| detail.iter())
                .filter(|(key, _)| key.contains("dropped"))
                .filter_map(|(_, v)| v.as_f64())
                .sum();
            Some(dropped)
        }
        Read::QueueFill(name) => report.queues.iter().find(|q| &q.name == name)?.fill,
        Read::QueueDepth(name) => report
            .queues
            .iter()
            .find(|q| &q.name == name)
            .map(|q| q.depth as f64),
        Read::State(kind, name) => {
            let component = report
                .components
                .iter()
                .find(|c| c.kind == kind.as_str() && &c.name == name)?;
            State::NAMES
                .iter()
                .position(|s| *s == component.state)
                .map(|i| i as f64)
        }
    }
}

/// The samples, column by column: row `i` of every series was taken at `t[i]`.
struct Ring {
    capacity: usize,
    width: usize,
    t_unix_ms: Vec<u64>,
    values: Vec<f64>,
    /// Where the next sample goes.
    next: usize,
    /// Samples held (at most `capacity`).
    len: usize,
}

impl Ring {
    fn new(capacity: usize, width: usize) -> Self {
        Self {
            capacity,
            width,
            t_unix_ms: vec![0; capacity],
            values: vec![f64::NAN; capacity.saturating_mul(width)],
            next: 0,
            len: 0,
        }
    }

    fn push(&mut self, t_unix_ms: u64, row: &[f64]) {
        if self.capacity == 0 {
            return;
        }
        self.t_unix_ms[self.next] = t_unix_ms;
        let at = self.next * self.width;
        self.values[at..at + self.width].copy_from_slice(&row[..self.width]);
        self.next = (self.next + 1) % self.capacity;
        self.len = (self.len + 1).min(self.capacity);
    }

    /// Slot of the `i`-th held sample, oldest first.
    fn slot(&self, i: usize) -> usize {
        (self.next + self.capacity - self.len + i) % self.capacity
    }

    fn value(&self, i: usize, series: usize) -> f64 {
        self.values[self.slot(i) * self.width + series]
    }

    fn time(&self, i: usize) -> u64 {
        self.t_unix_ms[self.slot(i)]
    }
}

/// The body of `GET /history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryReport {
    /// Time between samples, in milliseconds.
    pub interval_ms: u64,
    /// Samples the ring holds when full.
    pub capacity: usize,
    /// Samples held now.
    pub held: usize,
    /// The ring's memory, allocated once.
    pub memory_bytes: u64,
    /// When each returned sample was taken, in milliseconds since the Unix epoch.
    pub t_unix_ms: Vec<u64>,
    /// Every series with its values at those times (`null`: not reported then).
    pub series: Vec<SeriesReport>,
    /// When the WAL's disk budget fills at the current net rate.
    pub wal_forecast: Forecast,
}

/// One series in a [`HistoryReport`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesReport {
    /// Its name.
    pub name: String,
    /// Counter or gauge.
    pub kind: SeriesKind,
    /// Its unit.
    pub unit: String,
    /// One value per returned sample.
    pub values: Vec<Option<f64>>,
}

impl HistoryReport {
    /// The series called `name`.
    pub fn series(&self, name: &str) -> Option<&SeriesReport> {
        self.series.iter().find(|s| s.name == name)
    }

    /// The latest value of `name`, if any sample has one.
    pub fn last(&self, name: &str) -> Option<f64> {
        self.series(name)?.values.iter().rev().find_map(|v| *v)
    }

    /// The smoothed per-second rate of counter `name` over the samples held
    /// ([`smoothed_rate`](super::trend::smoothed_rate), time constant
    /// [`RATE_TIME_CONSTANT`](super::trend::RATE_TIME_CONSTANT)).
    pub fn rate(&self, name: &str) -> Option<f64> {
        let values = &self.series(name)?.values;
        let samples = self.t_unix_ms.iter().copied().zip(values.iter().copied());
        super::trend::smoothed_rate(samples, super::trend::RATE_TIME_CONSTANT)
    }
}

/// The WAL budget's forecast: the trend of its disk use over the last
/// [`FORECAST_SAMPLES`] samples ([`fill_trend`](super::trend::fill_trend)), and the
/// time left at that rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Forecast {
    /// Bytes on disk now.
    pub disk_bytes: Option<f64>,
    /// The budget.
    pub max_disk: Option<f64>,
    /// Net growth in bytes per second (negative: shrinking), the least-squares slope,
    /// when two samples exist.
    pub net_bytes_per_second: Option<f64>,
    /// Whether that slope is more than the ripple of segments written and deleted.
    #[serde(default)]
    pub trend: super::trend::Direction,
    /// Seconds until `disk_bytes` reaches `max_disk` at that rate: 0 when already
    /// full, absent unless filling.
    pub full_in_seconds: Option<f64>,
}

/// The forecast from `(t_unix_ms, disk_bytes)` points, oldest first, and the budget.
/// Sans-IO; [`History`] feeds it its last [`FORECAST_SAMPLES`] samples.
pub fn forecast(points: &[(u64, f64)], max_disk: Option<f64>) -> Forecast {
    let last = points.iter().rev().find(|p| p.1.is_finite()).map(|p| p.1);
    let mut out = Forecast {
        disk_bytes: last,
        max_disk,
        ..Forecast::default()
    };
    let (Some(trend), Some(now)) = (super::trend::fill_trend(points), last) else {
        return out;
    };
    out.net_bytes_per_second = Some(trend.per_second);
    out.trend = trend.direction;
    if let Some(max) = max_disk {
        if now >= max {
            out.full_in_seconds = Some(0.0);
        } else if trend.direction == super::trend::Direction::Filling {
            out.full_in_seconds = Some((max - now) / trend.per_second);
        }
    }
    out
}

/// The ring and its layout: what the sampler writes and `/history` reads.
pub struct History {
    interval: Duration,
    held: Mutex<Held>,
}

/// The layout and the ring it fills, changed together by [`History::relayout`].
struct Held {
    layout: std::sync::Arc<HistoryLayout>,
    disk_bytes: Option<usize>,
    max_disk: Option<usize>,
    ring: Ring,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History")
            .field("series", &self.lock().layout.series.len())
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

fn position(layout: &HistoryLayout, name: &str) -> Option<usize> {
    layout.series.iter().position(|s| s.name == name)
}

impl History {
    /// A history of `layout`'s series, `capacity` samples `interval` apart, its ring
    /// allocated now ([`HistoryLayout::memory_bytes`]).
    pub fn new(layout: HistoryLayout, interval: Duration, capacity: usize) -> Self {
        let ring = Ring::new(capacity, layout.series.len());
        Self {
            interval,
            held: Mutex::new(Held {
                disk_bytes: position(&layout, "wal.disk_bytes"),
                max_disk: position(&layout, "wal.max_disk"),
                layout: std::sync::Arc::new(layout),
                ring,
            }),
        }
    }

    /// Changes the series kept (a reload added or removed sources and sinks): the
    /// samples held are kept for every series in both layouts, a new series reads as
    /// absent (`null`) before now, and a dropped one is forgotten. The ring keeps its
    /// capacity; its memory follows the number of series.
    pub fn relayout(&self, layout: HistoryLayout) {
        let mut held = self.lock();
        if *held.layout == layout {
            return;
        }
        let old = &held.ring;
        let mut ring = Ring::new(old.capacity, layout.series.len());
        let from: Vec<Option<usize>> = layout
            .series
            .iter()
            .map(|s| position(&held.layout, &s.name))
            .collect();
        let mut row = vec![f64::NAN; layout.series.len()];
        for i in 0..old.len {
            for (value, from) in row.iter_mut().zip(&from) {
                *value = from.map_or(f64::NAN, |f| old.value(i, f));
            }
            ring.push(old.time(i), &row);
        }
        *held = Held {
            disk_bytes: position(&layout, "wal.disk_bytes"),
            max_disk: position(&layout, "wal.max_disk"),
            layout: std::sync::Arc::new(layout),
            ring,
        };
    }

    /// The time between samples.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The series kept.
    pub fn layout(&self) -> HistoryLayout {
        (*self.lock().layout).clone()
    }

    /// The memory the ring allocated: its timestamps and values.
    pub fn memory_bytes(&self) -> u64 {
        let held = self.lock();
        let ring = &held.ring;
        8 * (ring.t_unix_ms.capacity() as u64 + ring.values.capacity() as u64)
    }

    /// What `/status` reports under `history`: samples held and the ring's bounds.
    pub fn status(&self) -> serde_json::Value {
        let held = self.lock();
        let ring = &held.ring;
        serde_json::json!({
            "held": ring.len,
            "capacity": ring.capacity,
            "interval_ms": u64::try_from(self.interval.as_millis()).unwrap_or(u64::MAX),
            "series": held.layout.series.len(),
            "memory_bytes": 8 * (ring.t_unix_ms.capacity() as u64 + ring.values.capacity() as u64),
            "newest_unix_ms": (ring.len > 0).then(|| ring.time(ring.len - 1)),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes one sample of `report`, stamped `t_unix_ms`; the oldest is overwritten
    /// once the ring is full. The values are read before the ring's lock is taken.
    pub fn record(&self, t_unix_ms: u64, report: &StatusReport) {
        let layout = std::sync::Arc::clone(&self.lock().layout);
        let mut row = vec![f64::NAN; layout.series.len()];
        layout.read(report, &mut row);
        let mut held = self.lock();
        // A relayout in between: this row was read for the layout before it.
        if std::sync::Arc::ptr_eq(&held.layout, &layout) {
            held.ring.push(t_unix_ms, &row);
        }
    }

    /// The samples taken after `since_unix_ms` (all held samples without it), with the
    /// WAL forecast over the latest samples.
    pub fn report(&self, since_unix_ms: Option<u64>) -> HistoryReport {
        let held = self.lock();
        let ring = &held.ring;
        let from = since_unix_ms.map_or(0, |since| {
            (0..ring.len)
                .find(|&i| ring.time(i) > since)
                .unwrap_or(ring.len)
        });
        let t_unix_ms = (from..ring.len).map(|i| ring.time(i)).collect();
        let series = held
            .layout
            .series
            .iter()
            .enumerate()
            .map(|(s, spec)| SeriesReport {
                name: spec.name.clone(),
                kind: spec.kind,
                unit: spec.unit.to_owned(),
                values: (from..ring.len)
                    .map(|i| Some(ring.value(i, s)).filter(|v| v.is_finite()))
                    .collect(),
            })
            .collect();
        let wal_forecast = match held.disk_bytes {
            Some(disk) => {
                let start = ring.len.saturating_sub(FORECAST_SAMPLES);
                let points: Vec<(u64, f64)> = (start..ring.len)
                    .map(|i| (ring.time(i), ring.value(i, disk)))
                    .collect();
                let max = held.max_disk.and_then(|m| {
                    (0..ring.len)
                        .rev()
                        .map(|i| ring.value(i, m))
                        .find(|v| v.is_finite())
                });
                forecast(&points, max)
            }
            None => Forecast::default(),
        };
        HistoryReport {
            interval_ms: u64::try_from(self.interval.as_millis()).unwrap_or(u64::MAX),
            capacity: ring.capacity,
            held: ring.len,
            memory_bytes: 8 * (ring.t_unix_ms.capacity() as u64 + ring.values.capacity() as u64),
            t_unix_ms,
            series,
            wal_forecast,
        }
    }
}

impl super::Telemetry {
    /// Creates the history ring for `layout` ([`SAMPLES`] samples, [`SAMPLE_INTERVAL`]
    /// apart) and spawns the task that samples `/status` into it, the first sample at
    /// once. Abort the returned task to stop sampling; `/history` keeps serving what
    /// was taken.
    ///
    /// # Panics
    ///
    /// When a history was already installed, or outside a tokio runtime.
    pub fn start_history(&self, layout: HistoryLayout) -> tokio::task::JoinHandle<()> {
        self.install_history(History::new(layout, SAMPLE_INTERVAL, SAMPLES));
        let telemetry = self.clone();
        // Samples are stamped on the monotonic clock from the wall-clock time of the
        // start: a wall-clock step does not reorder the ring.
        let (wall, start) = (std::time::SystemTime::now(), tokio::time::Instant::now());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SAMPLE_INTERVAL);
            // A late tick (a busy runtime) is taken late and the next one a full
            // interval after it: the timestamps say when each sample was taken.
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                telemetry.sample_history_at(wall + start.elapsed());
            }
        })
    }

    /// Installs `history` without a sampler (tests, benchmarks): samples are taken by
    /// [`sample_history`](Self::sample_history). `/status` reports it under `history`
    /// (samples held, capacity, interval, series, memory, newest sample).
    ///
    /// # Panics
    ///
    /// When a history was already installed.
    pub fn install_history(&self, history: History) -> std::sync::Arc<History> {
        let history = std::sync::Arc::new(history);
        assert!(
            self.set_history(std::sync::Arc::clone(&history)),
            "a history is already installed"
        );
        let shown = std::sync::Arc::clone(&history);
        self.register_status("history", move || shown.status());
        history
    }

    /// Changes the series of the history, if one is installed
    /// ([`History::relayout`]).
    pub fn relayout_history(&self, layout: HistoryLayout) {
        if let Some(history) = self.history() {
            history.relayout(layout);
        }
    }

    /// Takes one sample of the status report now, if a history is installed.
    pub fn sample_history(&self) {
        self.sample_history_at(std::time::SystemTime::now());
    }

    fn sample_history_at(&self, at: std::time::SystemTime) {
        if let Some(history) = self.history() {
            let report = self.status();
            history.record(super::status::unix_ms(at), &report);
        }
    }
}
