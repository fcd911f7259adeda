//! What the runtime reports: it registers its queues, counters and sections with the
//! [`Telemetry`], which serves `/status`, `/metrics` and the dashboard on
//! `runtime.status_addr`.
//!
//! `/status` sections added here (beside the telemetry's `components` and `queues`):
//!
//! - `sources.NAME`: records, bytes, batches made durable; refused batches, records
//!   and requests;
//! - `sinks.NAME`: records and batches stored, retries, unencodable records, records
//!   filtered out by `where` and its errors (`filtered`, `filter_errors`), gaps seen
//!   and their records, and the WAL cursor (`committed`, `lag_records`, `lag_bytes`,
//!   `lag_age_ms`, `released`, `gaps`);
//! - `wal`: the WAL's figures (segments, disk bytes and budget, durable end, fsync
//!   latency, time in fsyncs and in writes, evictions, poisoning);
//! - `wal_recovery`: what recovery found when the WAL was opened.
//!
//! Queues: `source->wal` (the shared channel, bounded in batches and bytes) and
//! `wal->SINK` for each sink's channel.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use weir_flow::semaphore::DualSemaphore;
use weir_wal::Wal;

use crate::pipeline::stats::{SinkStats, SourceStats, get};
use crate::telemetry::Telemetry;

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;

/// Everything the runtime reports on. Sources and sinks come and go with reloads.
pub struct Registry {
    /// The WAL.
    pub wal: Wal,
    /// The source → WAL channel.
    pub channel: DualSemaphore,
    /// The sources.
    sources: Mutex<Vec<SourceEntry>>,
    /// The sinks.
    sinks: Mutex<Vec<SinkEntry>>,
}

/// One source in the registry: name, type, counters.
pub type SourceEntry = (String, &'static str, Arc<SourceStats>);

/// One sink in the registry.
pub struct SinkEntry {
    /// Its name.
    pub name: String,
    /// Its type.
    pub kind: &'static str,
    /// Its counters.
    pub stats: Arc<SinkStats>,
    /// Its channel's bound in batches.
    pub channel_batches: u64,
    /// Its channel's bound in bytes.
    pub channel_bytes: u64,
    /// Its `max_lag`, as configured (`{"bytes": "24 MiB", "age": "10m"}`), or null.
    pub max_lag: Value,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Registry {
    /// A registry of the WAL and the source → WAL channel, with no source or sink yet.
    pub fn new(wal: Wal, channel: DualSemaphore) -> Self {
        Self {
            wal,
            channel,
            sources: Mutex::new(Vec::new()),
            sinks: Mutex::new(Vec::new()),
        }
    }

    /// The sources' counters, by name.
    pub fn sources(&self) -> Vec<SourceEntry> {
        lock(&self.sources).clone()
    }

    /// The sinks' counters, by name (name, counters).
    pub fn sinks(&self) -> Vec<(String, Arc<SinkStats>)> {
        lock(&self.sinks)
            .iter()
            .map(|e| (e.name.clone(), Arc::clone(&e.stats)))
            .collect()
    }

    /// Adds (or, after a restart, replaces) a source and registers its metrics.
    pub fn add_source(&self, telemetry: &Telemetry, entry: SourceEntry) {
        register_source_metrics(telemetry, &entry);
        let mut sources = lock(&self.sources);
        sources.retain(|(name, _, _)| *name != entry.0);
        sources.push(entry);
        sources.sort_by(|a, b| a.0.cmp(&b.0));
    }

    /// Adds (or replaces) a sink: its channel's queue and its metrics.
    pub fn add_sink(&self, telemetry: &Telemetry, entry: SinkEntry) {
        let stats = Arc::clone(&entry.stats);
        telemetry.register_queue(
            &format!("wal->{}", entry.name),
            Some(entry.channel_batches),
            Some(entry.channel_bytes),
            move || stats.channel.flow_stats(),
        );
        register_sink_metrics(telemetry, &self.wal, &entry);
        let mut sinks = lock(&self.sinks);
        sinks.retain(|e| e.name != entry.name);
        sinks.push(entry);
        sinks.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Sets a sink's `max_lag` as shown (a reload applied it live).
    pub fn set_max_lag(&self, name: &str, max_lag: Value) {
        if let Some(e) = lock(&self.sinks).iter_mut().find(|e| e.name == name) {
            e.max_lag = max_lag;
        }
    }

    /// Removes a source (a reload removed it); its state, queue and metrics leave the
    /// telemetry.
    pub fn remove_source(&self, telemetry: &Telemetry, name: &str) {
        lock(&self.sources).retain(|(n, _, _)| n != name);
        telemetry.forget_component(crate::telemetry::ComponentKind::Source, name);
    }

    /// Removes a sink (a reload removed it).
    pub fn remove_sink(&self, telemetry: &Telemetry, name: &str) {
        lock(&self.sinks).retain(|e| e.name != name);
        telemetry.forget_component(crate::telemetry::ComponentKind::Sink, name);
    }

    /// The `sources` section.
    pub fn sources_section(&self) -> Value {
        let map: serde_json::Map<String, Value> = lock(&self.sources)
            .iter()
            .map(|(name, kind, s)| {
                let mut section = json!({
                        "type": kind,
                        "records": get(&s.records),
                        "bytes": get(&s.bytes),
                        "batches": get(&s.batches),
                        "refused_batches": get(&s.refused_batches),
                        "refused_records": get(&s.refused_records),
                        "expired_records": get(&s.expired_records),
                        "refused_requests": get(&s.refused_requests),
                        "in_doubt_records": get(&s.in_doubt_records),
                        "waiting_ms": s.waiting_ms(),
                });
                if let Some(map) = section.as_object_mut() {
                    if let Some(detail) = s.detail.get() {
                        map.insert((*kind).to_owned(), (detail.0)());
                    }
                    if let Some(fields) = s.fields.get()
                        && let Value::Object(fields) = (fields.0)()
                    {
                        for (key, value) in fields {
                            map.entry(key).or_insert(value);
                        }
                    }
                }
                (name.clone(), section)
            })
            .collect();
        Value::Object(map)
    }

    /// The `sinks` section.
    pub fn sinks_section(&self) -> Value {
        let wal = self.wal.stats();
        let map: serde_json::Map<String, Value> = lock(&self.sinks)
            .iter()
            .map(|e| {
                let s = &e.stats;
                let cursor = wal.cursors.iter().find(|c| c.name == e.name);
                let mut section = json!({
                        "type": e.kind,
                        "records": get(&s.records),
                        "bytes": get(&s.bytes),
                        "batches": get(&s.batches),
                        "retries": get(&s.retries),
                        "unencodable": get(&s.unencodable),
                        "filtered": get(&s.filtered),
                        "filter_errors": get(&s.filter_errors),
                        "gaps": get(&s.gaps),
                        "gap_records": get(&s.gap_records),
                        "buffered_bytes": get(&s.buffered_bytes),
                        "cursor": cursor,
                        "max_lag": e.max_lag,
                });
                if let (Some(detail), Some(map)) = (s.detail.get(), section.as_object_mut()) {
                    map.insert(e.kind.to_owned(), (detail.0)());
                }
                (e.name.clone(), section)
            })
            .collect();
        Value::Object(map)
    }

    /// Registers the channel's queue, the sections and the WAL's metrics with
    /// `telemetry` (each source and sink registers its own as it is added).
    pub fn register(self: &Arc<Self>, telemetry: &Telemetry, recovery: Value) {
        let total = self.channel.total();
        let channel = self.channel.clone();
        telemetry.register_queue(
            "source->wal",
            Some(total.items),
            Some(total.bytes),
            move || {
                let s = channel.semaphore_stats();
                // Held permits are the batches on their way to durability.
                let mut flow = s.flow;
                flow.depth = s.held.items;
                flow.bytes = s.held.bytes;
                flow
            },
        );
        let me = Arc::clone(self);
        telemetry.register_status("sources", move || me.sources_section());
        let me = Arc::clone(self);
        telemetry.register_status("sinks", move || me.sinks_section());
        let wal = self.wal.clone();
        telemetry.register_status("wal", move || {
            serde_json::to_value(wal.stats()).unwrap_or_default()
        });
        telemetry.register_status("wal_recovery", move || recovery.clone());
        self.register_metrics(telemetry);
    }

    fn register_metrics(&self, telemetry: &Telemetry) {
        let wal = self.wal.clone();
        telemetry.register_gauge_fn(
            "weir_wal_disk_used_bytes",
            "Bytes of WAL segments on disk.",
            &[],
            move || wal.stats().disk_bytes as f64,
        );
        let wal = self.wal.clone();
        telemetry.register_gauge_fn(
            "weir_wal_disk_max_bytes",
            "The WAL's disk budget (wal.max_disk).",
            &[],
            move || wal.stats().max_disk as f64,
        );
        type Field = fn(&weir_wal::WalStats) -> u64;
        let wal_counters: [(&str, &str, Field); 3] = [
            (
                "weir_wal_evicted_records_total",
                "Records evicted by on_full = drop_oldest.",
                |s| s.evicted_records,
            ),
            (
                "weir_wal_fsync_microseconds_total",
                "Time the WAL's writer spent in fsyncs (its rate / 1e6: the share of time the disk is syncing).",
                |s| s.fsync_time_us,
            ),
            (
                "weir_wal_write_microseconds_total",
                "Time the WAL's writer spent writing batches to the active segment.",
                |s| s.write_time_us,
            ),
        ];
        for (metric, help, get) in wal_counters {
            let wal = self.wal.clone();
            telemetry.register_counter_fn(metric, help, &[], move || get(&wal.stats()));
        }
    }
}

/// A source's metrics, read from its counters at scrape time.
fn register_source_metrics(telemetry: &Telemetry, entry: &SourceEntry) {
    type SourceField = fn(&SourceStats) -> &std::sync::atomic::AtomicU64;
    let rejected = "Records a source could not make durable (WAL full under reject, admission timeout), by reason.";
    let per_source: [(&str, &str, Option<&str>, SourceField); 6] = [
        (
            "weir_source_records_total",
            "Records a source made durable in the WAL.",
            None,
            |s| &s.records,
        ),
        (
            "weir_source_bytes_total",
            "Bytes (WAL frames) a source made durable.",
            None,
            |s| &s.bytes,
        ),
        (
            "weir_source_rejected_total",
            rejected,
            Some("wal_refused"),
            |s| &s.refused_records,
        ),
        (
            "weir_source_rejected_total",
            rejected,
            Some("admission_expired"),
            |s| &s.expired_records,
        ),
        (
            "weir_source_rejected_total",
            rejected,
            Some("request_refused"),
            |s| &s.refused_requests,
        ),
        (
            "weir_source_in_doubt_records_total",
            "Records written and then not fsynced (the WAL failed): they may or may \
                 not be delivered after a restart.",
            None,
            |s| &s.in_doubt_records,
        ),
    ];
    let (name, _, s) = entry;
    for (metric, help, reason, field) in per_source {
        let mut labels = vec![("source", name.as_str())];
        labels.extend(reason.map(|r| ("reason", r)));
        let c = Arc::clone(s);
        telemetry.register_counter_fn(metric, help, &labels, move || get(field(&c)));
    }
}

/// A sink's metrics, read from its counters and its cursor at scrape time.
fn register_sink_metrics(telemetry: &Telemetry, wal: &Wal, e: &SinkEntry) {
    type SinkField = fn(&SinkStats) -> &std::sync::atomic::AtomicU64;
    let per_sink: [(&str, &str, SinkField); 8] = [
        ("weir_sink_records_total", "Records a sink stored.", |s| {
            &s.records
        }),
        (
            "weir_sink_bytes_total",
            "Payload bytes of the batches a sink stored.",
            |s| &s.bytes,
        ),
        (
            "weir_retry_total",
            "Failed sink writes that were retried.",
            |s| &s.retries,
        ),
        (
            "weir_sink_unencodable_total",
            "Records a sink could not encode (quarantined).",
            |s| &s.unencodable,
        ),
        (
            "weir_sink_filtered_records_total",
            "Records of a sink's inputs its `where` filter did not pass (skipped).",
            |s| &s.filtered,
        ),
        (
            "weir_sink_filter_errors_total",
            "Records a sink's `where` filter could not evaluate (dropped or kept by on_filter_error).",
            |s| &s.filter_errors,
        ),
        (
            "weir_wal_gap_total",
            "Gaps a sink saw: records deleted before it read them.",
            |s| &s.gaps,
        ),
        (
            "weir_wal_gap_records_total",
            "Records in the gaps a sink saw.",
            |s| &s.gap_records,
        ),
    ];
    type CursorGauge = fn(&weir_wal::CursorStats) -> f64;
    #[allow(clippy::cast_precision_loss, reason = "gauges are f64")]
    let per_cursor: [(&str, &str, CursorGauge); 2] = [
        (
            "weir_sink_lag_records",
            "Records between a sink's cursor and the WAL's durable end.",
            |c| c.lag_records as f64,
        ),
        (
            "weir_sink_lag_seconds",
            "Age of the oldest record a sink has not yet committed (0 when caught up).",
            |c| c.lag_age_ms as f64 / 1000.0,
        ),
    ];
    let labels = [("sink", e.name.as_str())];
    for (metric, help, field) in per_sink {
        let c = Arc::clone(&e.stats);
        telemetry.register_counter_fn(metric, help, &labels, move || get(field(&c)));
    }
    for (metric, help, gauge) in per_cursor {
        let wal = wal.clone();
        let name = e.name.clone();
        telemetry.register_gauge_fn(metric, help, &labels, move || {
            let stats = wal.stats();
            stats
                .cursors
                .iter()
                .find(|c| c.name == name)
                .map_or(0.0, gauge)
        });
    }
}
