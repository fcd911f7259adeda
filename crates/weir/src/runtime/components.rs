//! Starting and stopping one source or one sink inside a running pipeline: what
//! startup does for each of them, and what shutdown and a reload do to one of them
//! alone.
//!
//! Each source has its own stop signal and its own tasks; each sink its own phase and
//! its own driver. So a reload can stop a removed source (its in-flight batches become
//! durable or are refused, as at shutdown) or restart a changed sink (it finishes what
//! it stored and commits its cursor; the new one resumes there) while every other
//! component keeps running untouched.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use weir_flow::semaphore::DualSemaphore;
use weir_wal::Wal;

use super::status::{Registry, SinkEntry};
use crate::config::{SinkConfig, SourceConfig};
use crate::pipeline::driver::{self, Phase};
use crate::pipeline::{Detail, Ingest, Reserved, SinkStats, SourceStats};
use crate::quarantine::Quarantine;
use crate::sinks::{ConfigStamp, Sink, SinkContext};
use crate::sources::{self, SourceContext};
use crate::telemetry::{ComponentKind, State, Telemetry};

/// How long, after a drain's deadline, drivers get to commit what they stored.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// What every component of a pipeline shares: the handles a source or sink is
/// started with, whenever it starts.
#[derive(Clone)]
pub struct Pipeline {
    /// The daemon's telemetry.
    pub telemetry: Telemetry,
    /// The WAL.
    pub wal: Wal,
    /// The dead-letter store.
    pub quarantine: Quarantine,
    /// The source → WAL channel.
    pub channel: DualSemaphore,
    /// What admissions have reserved of the WAL's budget.
    pub reserved: Arc<Reserved>,
    /// What `/status` reports on.
    pub registry: Arc<Registry>,
    /// The configuration's hash and `on_full`, as sinks record them.
    pub stamp: ConfigStamp,
    /// `runtime.data_dir`.
    pub data_dir: PathBuf,
}

/// A source as it runs: its tasks and its own stop signal.
pub struct RunningSource {
    /// Its configuration.
    pub config: SourceConfig,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

/// A sink as it runs: its driver and its own phase.
pub struct RunningSink {
    /// Its configuration.
    pub config: SinkConfig,
    phase: watch::Sender<Phase>,
    driver: JoinHandle<()>,
}

/// A sink opened (its directory made, what a crash left removed) but not yet driven.
pub struct OpenedSink {
    sink: Sink,
    detail: Arc<std::sync::OnceLock<Detail>>,
    unencodable: Arc<std::sync::atomic::AtomicU64>,
}

impl Pipeline {
    /// Opens sink `name` (blocking file I/O, on the blocking pool).
    ///
    /// # Errors
    ///
    /// What could not be opened, under `sinks.NAME`.
    pub async fn open_sink(&self, name: &str, config: &SinkConfig) -> anyhow::Result<OpenedSink> {
        let detail = Arc::new(std::sync::OnceLock::new());
        let unencodable = Arc::default();
        let cx = SinkContext {
            stamp: self.stamp.clone(),
            retry: config.retry,
            telemetry: self.telemetry.clone(),
            quarantine: self.quarantine.clone(),
            detail: Arc::clone(&detail),
            unencodable: Arc::clone(&unencodable),
            wal: self.wal.clone(),
            data_dir: self.data_dir.clone(),
        };
        let (n, kind) = (name.to_owned(), config.kind.clone());
        let sink = tokio::task::spawn_blocking(move || kind.open(&n, &cx))
            .await?
            .with_context(|| format!("sinks.{name}"))?;
        Ok(OpenedSink {
            sink,
            detail,
            unencodable,
        })
    }

    /// Starts the driver of sink `name`, opened by [`open_sink`](Self::open_sink); its
    /// cursor must be declared in the WAL.
    pub fn start_sink(&self, name: &str, config: &SinkConfig, opened: OpenedSink) -> RunningSink {
        let OpenedSink {
            sink,
            detail,
            unencodable,
        } = opened;
        let component = self.telemetry.component(ComponentKind::Sink, name);
        self.quarantine.attach(&component);
        let mut stats = SinkStats::new(component);
        stats.detail = detail;
        stats.unencodable = unencodable;
        let stats = Arc::new(stats);
        self.registry.add_sink(
            &self.telemetry,
            SinkEntry {
                name: name.to_owned(),
                kind: sink.type_name(),
                stats: Arc::clone(&stats),
                channel_batches: u64::from(config.channel_batches.get()),
                channel_bytes: config.channel_bytes(),
                max_lag: serde_json::to_value(config.max_lag).unwrap_or_default(),
            },
        );
        let driver_config = config.driver_config(name);
        let (phase, phase_rx) = watch::channel(Phase::Run);
        let driver = tokio::spawn(driver::drive(
            driver_config,
            self.wal.clone(),
            sink,
            stats,
            phase_rx,
            self.quarantine.clone(),
        ));
        RunningSink {
            config: config.clone(),
            phase,
            driver,
        }
    }

    /// Starts source `name` with what its check returned.
    pub fn start_source(
        &self,
        name: &str,
        config: &SourceConfig,
        checked: sources::Checked,
    ) -> RunningSource {
        let component = self.telemetry.component(ComponentKind::Source, name);
        component.set_state(State::Running);
        self.quarantine.attach(&component);
        let stats = Arc::new(SourceStats::new(component));
        let ingest = Ingest::new(
            self.wal.clone(),
            self.channel.clone(),
            Arc::clone(&self.reserved),
            config.max_uncommitted_tickets.get(),
            Arc::clone(&stats),
        );
        let (stop, stop_rx) = watch::channel(false);
        let cx = SourceContext {
            name: Arc::from(name),
            ingest,
            stop: stop_rx,
            quarantine: self.quarantine.clone(),
            telemetry: self.telemetry.clone(),
            data_dir: self.data_dir.clone(),
        };
        let mut tasks = JoinSet::new();
        config.kind.start(checked, cx, &mut tasks);
        self.registry.add_source(
            &self.telemetry,
            (name.to_owned(), config.kind.type_name(), stats),
        );
        RunningSource {
            config: config.clone(),
            stop,
            tasks,
        }
    }
}

/// Stops `sources` together: they stop taking input, and their in-flight batches
/// become durable or are refused, until `deadline`; what is still running then is
/// aborted (its unacknowledged input is refused, never acknowledged).
pub async fn stop_sources(sources: Vec<(String, RunningSource)>, deadline: tokio::time::Instant) {
    for (_, source) in &sources {
        let _ = source.stop.send(true);
    }
    for (name, mut source) in sources {
        let joined = tokio::time::timeout_at(deadline, async {
            while source.tasks.join_next().await.is_some() {}
        })
        .await;
        if joined.is_err() {
            tracing::warn!(
                source = %name,
                "source {name} did not stop within runtime.shutdown_timeout; refusing what \
                 is in flight"
            );
            source.tasks.abort_all();
        }
    }
}

/// Stops `sinks` together. With `drain_to` they first read up to that offset (the
/// WAL's durable end once the sources feeding them have stopped) until `deadline`;
/// then, or at once without it, they stop: each finishes what it stored and commits
/// its cursor, within [`STOP_GRACE`], after which it is aborted (what it had not
/// committed is read again by whoever takes the cursor next).
pub async fn stop_sinks(
    sinks: Vec<(String, RunningSink)>,
    drain_to: Option<u64>,
    deadline: tokio::time::Instant,
) {
    let mut pending = Vec::with_capacity(sinks.len());
    if let Some(until) = drain_to {
        for (_, sink) in &sinks {
            let _ = sink.phase.send(Phase::Drain(until));
        }
        for (name, mut sink) in sinks {
            let done = tokio::time::timeout_at(deadline, &mut sink.driver)
                .await
                .is_ok();
            if !done {
                tracing::warn!(
                    sink = %name,
                    "sink {name} did not drain within runtime.shutdown_timeout; committing \
                     what it stored"
                );
                pending.push((name, sink));
            }
        }
    } else {
        pending = sinks;
    }
    for (_, sink) in &pending {
        let _ = sink.phase.send(Phase::Stop);
    }
    let grace = tokio::time::Instant::now() + STOP_GRACE;
    for (name, mut sink) in pending {
        if tokio::time::timeout_at(grace, &mut sink.driver)
            .await
            .is_err()
        {
            tracing::warn!(sink = %name, "sink {name} did not stop within 5 s; aborted");
            sink.driver.abort();
            // Resolves once the task is dropped: its reader is given back.
            let _ = sink.driver.await;
        }
    }
}
