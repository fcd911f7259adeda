//! Reloading the configuration while weir runs (SIGHUP, `weir reload`, `POST /reload`).
//!
//! The new file is read and checked completely first: a file with errors changes
//! nothing. Then, against the configuration in force:
//!
//! - `[runtime]`, `[wal]` and `[quarantine]` keys that cannot change while the log is
//!   open (`data_dir`, `wal.segment_bytes`, `status_addr`, …) refuse the whole reload,
//!   each named; `wal.max_disk`, `wal.on_full`, `runtime.shutdown_timeout` and
//!   `runtime.memory_target` apply live;
//! - added sources and sinks start (a sink at its saved cursor, else its `start_from`);
//! - removed ones stop as at shutdown (a source's in-flight batches become durable, a
//!   sink drains to the WAL's end within `runtime.shutdown_timeout` and commits), and a
//!   removed sink's cursor no longer holds retention (WARN);
//! - a component whose keys changed restarts alone; a sink whose only change is
//!   `max_lag`, `required` or `start_from` keeps running and gets them live;
//! - unchanged components are not touched: an HTTP source keeps its listener, an MQTT
//!   source its session.
//!
//! Sources are checked before anything stops (an added source's address already in
//! use refuses the reload), except a changed source whose check fails only while its
//! old instance runs (its own listen address): it is checked again once stopped, and
//! if it still fails its old configuration is started again and the reload reports
//! it. The outcome (`applied`, `partial` or `refused`, with the errors and what
//! changed) is logged, answered to `POST /reload` and kept in `/status` → `config`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

use super::components::{Pipeline, RunningSink, RunningSource, stop_sinks, stop_sources};
use super::wal::cursor;
use crate::config::{Config, SinkConfig};
use crate::sinks::parquet::FooterMetadata;

/// Keys of `[runtime]`, `[wal]` and `[quarantine]` that a reload applies live.
pub const LIVE_KEYS: &[&str] = &[
    "wal.max_disk",
    "wal.on_full",
    "runtime.shutdown_timeout",
    "runtime.memory_target",
];

/// What `/status` shows under `config`.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigStatus {
    /// The file weir reads (and reloads).
    pub file: Option<PathBuf>,
    /// The full hash of the configuration in force (`sha256:` and 64 hex digits, as
    /// in Parquet footers).
    pub hash: String,
    /// The configuration in force with every default filled in, credentials as `***`.
    pub values: Value,
    /// When it was loaded (start or the last reload that changed it).
    pub loaded_unix_ms: u64,
    /// Reloads applied (wholly or partly) since start.
    pub reloads_applied: u64,
    /// Reloads refused since start.
    pub reloads_refused: u64,
    /// The last reload, if any.
    pub last_reload: Option<ReloadReport>,
}

/// The outcome of one reload.
#[derive(Debug, Clone, Serialize)]
pub struct ReloadReport {
    /// When it was asked for.
    pub at_unix_ms: u64,
    /// What asked: `SIGHUP` or `POST /reload`.
    pub trigger: &'static str,
    /// `applied`, `partial` (some components kept their old configuration, see
    /// `errors`) or `refused` (nothing changed).
    pub result: &'static str,
    /// Why it was refused, or what could not be applied.
    pub errors: Vec<String>,
    /// The hash in force afterwards.
    pub hash: String,
    /// Sources and sinks started (`sources.NAME`, `sinks.NAME`).
    pub added: Vec<String>,
    /// Sources and sinks stopped.
    pub removed: Vec<String>,
    /// Sources and sinks restarted with new keys.
    pub restarted: Vec<String>,
    /// Keys applied without a restart (`wal.max_disk`, `sinks.NAME.max_lag`).
    pub live: Vec<String>,
    /// Components left running untouched.
    pub unchanged: usize,
}

impl ReloadReport {
    fn new(trigger: &'static str, hash: String) -> Self {
        Self {
            at_unix_ms: unix_ms_now(),
            trigger,
            result: "refused",
            errors: Vec::new(),
            hash,
            added: Vec::new(),
            removed: Vec::new(),
            restarted: Vec::new(),
            live: Vec::new(),
            unchanged: 0,
        }
    }

    /// Notes (and logs) that the `kind` (`source` or `sink`) `name` started: `added`, or
    /// restarted with new keys.
    fn started(&mut self, kind: &str, name: &str, added: bool) {
        let what = format!("{kind}s.{name}");
        if added {
            tracing::info!("reload: {kind} {name} added");
            self.added.push(what);
        } else {
            tracing::info!("reload: {kind} {name} restarted with its new keys");
            self.restarted.push(what);
        }
    }

    /// Whether anything was applied.
    pub fn applied(&self) -> bool {
        self.result != "refused"
    }
}

/// `sha256:` and the 64 hex digits of `config`'s hash.
fn full_hash(config: &Config) -> String {
    format!("sha256:{}", config.hash().hex())
}

/// Milliseconds since the Unix epoch, now.
pub fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The components of a running pipeline and the configuration in force: what a
/// reload changes.
pub struct Components {
    /// The configuration in force (a partial reload keeps some old entries).
    pub config: Config,
    /// The shared handles.
    pub pipeline: Pipeline,
    /// The sources, by name.
    pub sources: BTreeMap<String, RunningSource>,
    /// The sinks, by name.
    pub sinks: BTreeMap<String, RunningSink>,
    /// What `/status` shows under `config`.
    pub status: Arc<Mutex<ConfigStatus>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The daemon-wide keys that differ between `old` and `new`: those that cannot change
/// live, as errors naming each, and those of [`LIVE_KEYS`] (`wal.max_disk`, …).
pub fn daemon_key_changes(old: &Config, new: &Config) -> (Vec<String>, Vec<String>) {
    let (mut errors, mut live) = (Vec::new(), Vec::new());
    let sections = [
        (
            "runtime",
            serde_json::to_value(&old.runtime),
            serde_json::to_value(&new.runtime),
        ),
        (
            "wal",
            serde_json::to_value(&old.wal),
            serde_json::to_value(&new.wal),
        ),
        (
            "quarantine",
            serde_json::to_value(&old.quarantine),
            serde_json::to_value(&new.quarantine),
        ),
    ];
    for (section, old, new) in sections {
        let (Ok(Value::Object(old)), Ok(Value::Object(new))) = (old, new) else {
            continue;
        };
        for (key, before) in &old {
            let after = new.get(key).unwrap_or(&Value::Null);
            let dotted = format!("{section}.{key}");
            if before == after {
                continue;
            }
            if LIVE_KEYS.contains(&dotted.as_str()) {
                live.push(dotted);
            } else {
                errors.push(format!(
                    "{dotted}: cannot change while weir runs ({before} → {after}); restart \
                     weir to apply it, or put the old value back to reload the rest"
                ));
            }
        }
    }
    (errors, live)
}

/// A sink configuration with the keys that apply live set as in `like`: two sinks
/// equal after this differ only in those keys.
fn without_live_keys(sink: &SinkConfig, like: &SinkConfig) -> SinkConfig {
    let mut sink = sink.clone();
    sink.max_lag = like.max_lag;
    sink.required = like.required;
    sink.start_from = like.start_from;
    sink
}

impl Components {
    /// Reloads the configuration from `path`; see the [module docs](self).
    pub async fn reload(&mut self, path: &Path, trigger: &'static str) -> ReloadReport {
        let mut report = ReloadReport::new(trigger, full_hash(&self.config));
        let new = match Config::load(path) {
            Ok(new) => new,
            Err(errors) => {
                report.errors = errors.errors().iter().map(ToString::to_string).collect();
                return self.finish(report);
            }
        };
        let live_keys;
        (report.errors, live_keys) = daemon_key_changes(&self.config, &new);
        if !report.errors.is_empty() {
            return self.finish(report);
        }
        for warning in new.warnings() {
            tracing::warn!("reload: {warning}");
        }
        let old = self.config.clone();
        let (mut add_sources, mut change_sources, mut remove_sources) = (vec![], vec![], vec![]);
        for (name, source) in &new.sources {
            match old.sources.get(name) {
                None => add_sources.push(name.clone()),
                Some(before) if before != source => change_sources.push(name.clone()),
                Some(_) => report.unchanged += 1,
            }
        }
        remove_sources.extend(
            old.sources
                .keys()
                .filter(|n| !new.sources.contains_key(*n))
                .cloned(),
        );
        let (mut add_sinks, mut change_sinks, mut live_sinks, mut remove_sinks) =
            (vec![], vec![], vec![], vec![]);
        for (name, sink) in &new.sinks {
            match old.sinks.get(name) {
                None => add_sinks.push(name.clone()),
                Some(before) if before == sink => report.unchanged += 1,
                Some(before) if without_live_keys(before, sink) == *sink => {
                    live_sinks.push(name.clone());
                }
                Some(_) => change_sinks.push(name.clone()),
            }
        }
        remove_sinks.extend(
            old.sinks
                .keys()
                .filter(|n| !new.sinks.contains_key(*n))
                .cloned(),
        );

        // Every check that can refuse the reload, before anything stops.
        for name in &add_sinks {
            if let Some(old_name) = new.sinks[name].rename_from.as_deref() {
                let pending = new.found(name, old_name).map(crate::config::Takeover::plan);
                if matches!(pending, Ok(crate::config::Takeover::Move { .. })) {
                    report.errors.push(format!(
                        "sinks.{name}.rename_from: taking {old_name:?} over moves its cursor and \
                         state, which weir does only when it starts: restart weir to rename \
                         the sink (or remove rename_from to start {name:?} afresh)"
                    ));
                }
            }
        }
        // Added and changed sinks reach their destinations, as at startup.
        for name in add_sinks.iter().chain(&change_sinks) {
            let sink = &new.sinks[name];
            if sink.healthcheck
                && let Err(e) = sink.healthcheck(name).await
            {
                report.errors.push(format!("{e:#}"));
            }
        }
        if !report.errors.is_empty() {
            return self.finish(report);
        }
        let mut checked = BTreeMap::new();
        for name in &add_sources {
            match new.sources[name].kind.check(name).await {
                Ok(c) => {
                    checked.insert(name.clone(), c);
                }
                Err(e) => report.errors.push(format!("sources.{name}: {e:#}")),
            }
        }
        if !report.errors.is_empty() {
            return self.finish(report);
        }
        for name in &change_sources {
            // A failure here may be the old instance's own listener: checked again
            // once it has stopped.
            if let Ok(c) = new.sources[name].kind.check(name).await {
                checked.insert(name.clone(), c);
            }
        }

        // Apply. The budget first: a larger one lets waiting sources in at once.
        let mut effective = new.clone();
        let wal = self.pipeline.wal.clone();
        report.live = live_keys;
        if report.live.iter().any(|k| k.starts_with("wal."))
            && let Err(e) = wal.set_budget(new.wal.max_disk.bytes(), new.wal.on_full)
        {
            report.errors.push(format!("wal.max_disk: {e}"));
            report.live.retain(|k| !k.starts_with("wal."));
            effective.wal.max_disk = old.wal.max_disk;
            effective.wal.on_full = old.wal.on_full;
        }

        // Stop what goes away or restarts: sources first, so that sinks drain what
        // they made durable.
        let deadline = tokio::time::Instant::now() + new.runtime.shutdown_timeout;
        let stopping: Vec<(String, RunningSource)> = remove_sources
            .iter()
            .chain(&change_sources)
            .filter_map(|n| self.sources.remove(n).map(|s| (n.clone(), s)))
            .collect();
        stop_sources(stopping, deadline).await;
        for name in &remove_sources {
            self.pipeline
                .registry
                .remove_source(&self.pipeline.telemetry, name);
            tracing::info!(source = %name, "reload: source {name} removed and stopped");
            report.removed.push(format!("sources.{name}"));
        }
        let removed: Vec<(String, RunningSink)> = remove_sinks
            .iter()
            .filter_map(|n| self.sinks.remove(n).map(|s| (n.clone(), s)))
            .collect();
        let restarted: Vec<(String, RunningSink)> = change_sinks
            .iter()
            .filter_map(|n| self.sinks.remove(n).map(|s| (n.clone(), s)))
            .collect();
        tokio::join!(
            stop_sinks(removed, Some(wal.durable_end()), deadline),
            stop_sinks(restarted, None, deadline),
        );
        for name in &remove_sinks {
            self.pipeline
                .registry
                .remove_sink(&self.pipeline.telemetry, name);
            let lag = wal
                .stats()
                .cursors
                .iter()
                .find(|c| c.name == *name)
                .map_or(0, |c| c.lag_records);
            if wal.detach_cursor(name).is_ok() {
                tracing::warn!(
                    sink = %name,
                    "reload: sink {name} removed; its cursor no longer holds WAL retention \
                     ({lag} records behind). Its state stays: a sink named {name} added \
                     later resumes there; `weir wal cursors DIR --remove {name}` deletes it"
                );
            }
            report.removed.push(format!("sinks.{name}"));
        }

        // Live sink keys.
        for name in &live_sinks {
            let sink = &new.sinks[name];
            match wal.set_cursor(name, cursor(sink)) {
                Ok(()) => {
                    self.pipeline
                        .registry
                        .set_max_lag(name, serde_json::to_value(sink.max_lag).unwrap_or_default());
                    if let Some(running) = self.sinks.get_mut(name) {
                        running.config = sink.clone();
                    }
                    report.live.push(format!("sinks.{name}.max_lag"));
                }
                Err(e) => report.errors.push(format!("sinks.{name}: {e}")),
            }
        }

        // Sinks that start: declared in the WAL, opened, driven.
        for name in change_sinks.iter().chain(&add_sinks) {
            let added = add_sinks.contains(name);
            let sink = &new.sinks[name];
            match self.start_sink(name, sink).await {
                Ok(()) => report.started("sink", name, added),
                Err(e) => {
                    report.errors.push(format!("sinks.{name}: {e:#}"));
                    match old.sinks.get(name) {
                        Some(before) => {
                            effective.sinks.insert(name.clone(), before.clone());
                            if let Err(e) = self.start_sink(name, before).await {
                                report.errors.push(format!(
                                    "sinks.{name}: its old configuration did not start \
                                     either: {e:#}"
                                ));
                            }
                        }
                        None => {
                            effective.sinks.remove(name);
                            let _ = wal.detach_cursor(name);
                        }
                    }
                }
            }
        }

        // Sources that start.
        for name in change_sources.iter().chain(&add_sources) {
            let added = add_sources.contains(name);
            let source = &new.sources[name];
            let check = match checked.remove(name) {
                Some(c) => Ok(c),
                None => source.kind.check(name).await,
            };
            match check {
                Ok(c) => {
                    let running = self.pipeline.start_source(name, source, c);
                    self.sources.insert(name.clone(), running);
                    report.started("source", name, added);
                }
                Err(e) => {
                    report.errors.push(format!("sources.{name}: {e:#}"));
                    let Some(before) = old.sources.get(name) else {
                        effective.sources.remove(name);
                        continue;
                    };
                    effective.sources.insert(name.clone(), before.clone());
                    match before.kind.check(name).await {
                        Ok(c) => {
                            let running = self.pipeline.start_source(name, before, c);
                            self.sources.insert(name.clone(), running);
                        }
                        Err(e) => report.errors.push(format!(
                            "sources.{name}: its old configuration did not start either: {e:#}"
                        )),
                    }
                }
            }
        }

        report.result = if report.errors.is_empty() {
            "applied"
        } else {
            "partial"
        };
        self.adopt(effective);
        report.hash = full_hash(&self.config);
        self.finish(report)
    }

    /// Declares sink `name`'s cursor (at its saved position, else `start_from`), opens
    /// the sink and starts its driver.
    async fn start_sink(&mut self, name: &str, sink: &SinkConfig) -> anyhow::Result<()> {
        let wal = self.pipeline.wal.clone();
        let (n, c) = (name.to_owned(), cursor(sink));
        tokio::task::spawn_blocking(move || wal.add_cursor(&n, c)).await??;
        let opened = self.pipeline.open_sink(name, sink).await?;
        let running = self.pipeline.start_sink(name, sink, opened);
        self.sinks.insert(name.to_owned(), running);
        Ok(())
    }

    /// Makes `config` the configuration in force: its hash in `/status`, in what
    /// sinks write from now on, and the history's series.
    fn adopt(&mut self, config: Config) {
        let hash = config.hash();
        self.pipeline.telemetry.set_config_hash(hash.to_string());
        self.pipeline.stamp.set(FooterMetadata {
            config_hash: format!("sha256:{}", hash.hex()),
            on_full: config.wal.on_full,
        });
        self.pipeline.telemetry.relayout_history(
            crate::telemetry::history::HistoryLayout::pipeline(
                config.sources.keys().map(String::as_str),
                config.sinks.keys().map(String::as_str),
            ),
        );
        let mut status = lock(&self.status);
        status.hash = format!("sha256:{}", hash.hex());
        status.values = config.redacted();
        status.loaded_unix_ms = unix_ms_now();
        drop(status);
        self.config = config;
    }

    /// Logs the outcome and keeps it for `/status`.
    fn finish(&self, report: ReloadReport) -> ReloadReport {
        let mut status = lock(&self.status);
        if report.applied() {
            status.reloads_applied += 1;
        } else {
            status.reloads_refused += 1;
        }
        status.last_reload = Some(report.clone());
        drop(status);
        match report.result {
            "applied" => tracing::info!(
                "reload ({}): applied, config {}; added [{}], removed [{}], restarted [{}], \
                 live [{}], {} unchanged",
                report.trigger,
                report.hash,
                report.added.join(", "),
                report.removed.join(", "),
                report.restarted.join(", "),
                report.live.join(", "),
                report.unchanged
            ),
            "partial" => tracing::error!(
                "reload ({}): partly applied, config {}; not applied: {}",
                report.trigger,
                report.hash,
                report.errors.join("; ")
            ),
            _ => tracing::error!(
                "reload ({}): refused, nothing changed (config {} still in force): {}",
                report.trigger,
                report.hash,
                report.errors.join("; ")
            ),
        }
        report
    }
}
