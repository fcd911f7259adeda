//! The pipeline runtime behind `weir run`: sources → WAL → sink drivers.
//!
//! # Queue inventory (every bound comes from the configuration)
//!
//! | edge | bound | answer when full |
//! |---|---|---|
//! | a source's batches on their way to durability | `max_uncommitted_tickets` (64) per source | the source waits ([`ingest`]) |
//! | source → WAL channel | `wal.channel_batches` (256) batches and `wal.max_pending_bytes` (8 MiB) | the source waits; HTTP answers 503 after `admission_timeout` |
//! | WAL disk | `wal.max_disk` | `wal.on_full`: block, reject, drop_oldest |
//! | WAL → sink driver | `channel_batches` (2) batches of at most `read_batch_records` / `read_batch_bytes` | the reader waits: the sink's cursor lags |
//! | HTTP requests in flight | `max_concurrent_requests` bodies of at most `max_body` | 503 at once |
//!
//! # Acknowledgement
//!
//! A source acknowledges (HTTP: answers 200; file: saves its position) only after the
//! WAL has reported its batch durable. A sink's cursor moves only to what the sink has
//! stored durably. So a crash loses nothing acknowledged, and a restart delivers again
//! at most the batches a sink had written but not yet committed.
//!
//! # Shutdown
//!
//! On SIGTERM or SIGINT: sources stop taking input (the HTTP listener closes, in-flight
//! requests are answered), their in-flight batches become durable or are refused; then
//! each sink drains up to the WAL's durable end, closes its files and commits its
//! cursor — all within `runtime.shutdown_timeout`, after which whatever is stored is
//! committed and the rest is read again at the next start. A second signal exits at
//! once (exit code 130); the WAL's recovery and the cursors make that safe too.
//!
//! # Reporting
//!
//! Every queue, component state (a source waiting on admission is `backpressured`),
//! the WAL's figures and each sink's cursor, lag and gaps are registered with the
//! [`Telemetry`], served on `runtime.status_addr` (see [`status`]). Records a sink
//! cannot encode go to the [`Quarantine`] with the reason.
//!
//! # Not supported yet
//!
//! MQTT and NATS sources, object-store and HTTP sinks: `weir run` refuses them at
//! startup with an error naming the key.

pub mod driver;
pub mod ingest;
pub mod live;
pub mod stats;
pub mod status;
pub mod wal;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::sync::watch;
use tokio::task::JoinSet;
use weir_flow::semaphore::{DualSemaphore, DualSemaphoreConfig};
use weir_wal::{ReadLimits, Wal};

use crate::config::{Config, SourceKind};
use crate::logging::LogHandle;
use crate::quarantine::Quarantine;
use crate::sinks::Sink;
use crate::sinks::parquet::FooterMetadata;
use crate::sources;
use crate::telemetry::{ComponentKind, State, Telemetry};

use self::driver::{DriverConfig, Outcome, Phase};
use self::ingest::Ingest;
use self::stats::{Detail, SinkStats, SourceStats};
use self::status::{Registry, SinkEntry};

/// How long, after the drain deadline, drivers get to commit what they stored.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How often source states are brought in line with their waits.
const REFLECT_EVERY: Duration = Duration::from_millis(100);

/// Runs the pipeline until SIGTERM or SIGINT, then shuts down gracefully.
///
/// # Errors
///
/// Startup failures (the WAL cannot be opened, a sink directory cannot be created, an
/// address cannot be bound, a token variable is missing), each naming what to fix.
///
/// # Cancel safety
///
/// Not meant to be cancelled: it ends on a signal.
pub async fn run(config: Config, log: Option<LogHandle>) -> anyhow::Result<()> {
    let started = Instant::now();
    // Installed first, so that a signal during startup is not lost.
    let mut signals = Signals::new().context("installing the SIGTERM/SIGINT handlers")?;
    let telemetry = Telemetry::new(config.hash().to_string());
    if let Some(log) = &log {
        log.register_metrics(
            &telemetry,
            u64::from(config.runtime.log_queue.get()),
            u64::from(config.runtime.log_queue.get()) * config.runtime.log_line_max_bytes.bytes(),
        );
    }
    let wal_component = telemetry.component(ComponentKind::Wal, "wal");
    let wal_config = wal::wal_config(&config).context("wal")?;
    let (wal, report) = tokio::task::spawn_blocking(move || Wal::open(wal_config))
        .await?
        .context("opening the WAL (wal.dir)")?;
    wal_component.set_state(State::Running);
    tracing::info!(
        "WAL at {} open: offsets {}..{}; recovery cut {} bytes ({} records), quarantined {} segments",
        config.wal.dir.display(),
        report.start,
        report.durable_end,
        report.truncated_bytes,
        report.truncated_records,
        report.quarantined.len(),
    );
    let channel = DualSemaphore::new(DualSemaphoreConfig::new(
        u64::from(config.wal.channel_batches.get()),
        config.wal.max_pending_bytes.bytes(),
    ));
    let quarantine = Quarantine::new(&config.quarantine.dir, config.quarantine.max_disk.bytes())
        .context("quarantine.dir")?
        .with_telemetry(&telemetry);

    // Everything that can fail at startup, before anything runs.
    let footer = FooterMetadata::from_config(&config);
    let mut sinks = Vec::new();
    for (name, sink_config) in &config.sinks {
        let (n, c, f) = (name.clone(), sink_config.clone(), footer.clone());
        let sink = tokio::task::spawn_blocking(move || Sink::open(&n, &c, &f))
            .await?
            .with_context(|| format!("sinks.{name}"))?;
        sinks.push((name.clone(), sink_config.clone(), sink));
    }
    let mut http_listeners = std::collections::BTreeMap::new();
    for (name, source) in &config.sources {
        match &source.kind {
            SourceKind::Http(http) => {
                let token = sources::http::token(name, http).map_err(anyhow::Error::msg)?;
                let listener = tokio::net::TcpListener::bind(http.listen)
                    .await
                    .with_context(|| format!("sources.{name}.listen: binding {}", http.listen))?;
                http_listeners.insert(name.clone(), (listener, token));
            }
            SourceKind::Mqtt(mqtt) => {
                // Unset credential variables and a bad ca_file fail here, before anything
                // runs.
                sources::mqtt::client::build(mqtt)
                    .map_err(|e| anyhow::anyhow!("sources.{name}.{e}"))?;
            }
            SourceKind::Generator(_) | SourceKind::File(_) => {}
            SourceKind::Nats(_) => anyhow::bail!(
                "sources.{name}.type: NATS sources are not supported by `weir run` in this build"
            ),
        }
    }
    let status_listener = tokio::net::TcpListener::bind(config.runtime.status_addr)
        .await
        .with_context(|| {
            format!(
                "runtime.status_addr: binding {}",
                config.runtime.status_addr
            )
        })?;

    // Sinks: one driver each, run again from the committed cursor after a rewind.
    let (phase_tx, phase_rx) = watch::channel(Phase::Run);
    let mut drivers = JoinSet::new();
    let mut sink_entries = Vec::new();
    for (name, sink_config, sink) in sinks {
        let stats = Arc::new(SinkStats::new(
            telemetry.component(ComponentKind::Sink, &name),
        ));
        sink_entries.push(SinkEntry {
            name: name.clone(),
            kind: sink.kind(),
            stats: Arc::clone(&stats),
            channel_batches: u64::from(sink_config.channel_batches.get()),
            channel_bytes: sink_config.channel_bytes(),
        });
        let driver_config = DriverConfig {
            name,
            inputs: sink_config.inputs.clone(),
            limits: ReadLimits {
                max_records: sink_config.read_batch_records.get() as usize,
                max_bytes: sink_config.read_batch_bytes.bytes(),
            },
            channel_batches: sink_config.channel_batches.get() as usize,
            retry_initial: sink_config.retry.initial.get(),
            retry_max: sink_config.retry.max.get(),
        };
        drivers.spawn(drive_sink(
            driver_config,
            wal.clone(),
            sink,
            stats,
            phase_rx.clone(),
            quarantine.clone(),
        ));
    }

    // Sources.
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut source_tasks = JoinSet::new();
    let mut source_entries = Vec::new();
    let reserved = Arc::new(std::sync::atomic::AtomicU64::new(0));
    for (name, source) in &config.sources {
        let component = telemetry.component(ComponentKind::Source, name);
        component.set_state(State::Running);
        let stats = Arc::new(SourceStats::new(component));
        let ingest = Ingest::new(
            wal.clone(),
            channel.clone(),
            Arc::clone(&reserved),
            source.max_uncommitted_tickets.get(),
            Arc::clone(&stats),
        );
        let name_arc: Arc<str> = Arc::from(name.as_str());
        let stop = stop_rx.clone();
        let kind = match &source.kind {
            SourceKind::Generator(g) => {
                source_tasks.spawn(sources::generator::run(name_arc, g.clone(), ingest, stop));
                "generator"
            }
            SourceKind::File(f) => {
                let data_dir = config.runtime.data_dir.clone();
                source_tasks.spawn(sources::file::run(
                    name_arc,
                    f.clone(),
                    data_dir,
                    ingest,
                    stop,
                ));
                "file"
            }
            SourceKind::Http(h) => {
                let Some((listener, token)) = http_listeners.remove(name) else {
                    continue;
                };
                let h = h.clone();
                source_tasks.spawn(async move {
                    let stats = Arc::clone(ingest.stats_arc());
                    if let Err(e) =
                        sources::http::run(name_arc.clone(), h, token, listener, ingest, stop).await
                    {
                        tracing::error!("source {name_arc}: serving failed: {e}");
                        stats.component.set_state(State::Failed(e.to_string()));
                    } else {
                        stats.component.set_state(State::Stopped);
                    }
                });
                "http"
            }
            SourceKind::Mqtt(m) => {
                let shared = sources::mqtt::Shared::new(&name_arc, m);
                sources::mqtt::register(name, &shared, &telemetry);
                let detail = Arc::clone(&shared);
                let _ = stats.detail.set(Detail(Arc::new(move || {
                    serde_json::to_value(detail.status()).unwrap_or_default()
                })));
                source_tasks.spawn(sources::mqtt::run(
                    name_arc,
                    (**m).clone(),
                    ingest,
                    quarantine.clone(),
                    shared,
                    stop,
                ));
                "mqtt"
            }
            SourceKind::Nats(_) => continue,
        };
        source_entries.push((name.clone(), kind, stats));
    }

    // Status.
    let registry = Arc::new(Registry {
        wal: wal.clone(),
        channel,
        sources: source_entries,
        sinks: sink_entries,
    });
    registry.register(
        &telemetry,
        serde_json::to_value(&report).unwrap_or_default(),
    );
    let q = quarantine.clone();
    telemetry.register_status("quarantine", move || {
        serde_json::to_value(q.stats()).unwrap_or_default()
    });
    let reflect = tokio::spawn({
        let registry = Arc::clone(&registry);
        let wal_component = wal_component.clone();
        async move {
            let mut tick = tokio::time::interval(REFLECT_EVERY);
            loop {
                tick.tick().await;
                for (_, _, s) in &registry.sources {
                    s.reflect();
                }
                if let Some(cause) = registry.wal.stats().poisoned {
                    wal_component.set_state(State::Failed(cause));
                }
            }
        }
    });
    let status_server = tokio::spawn({
        let telemetry = telemetry.clone();
        let mut stop = stop_rx.clone();
        async move {
            let shutdown = async move { sources::stopped(&mut stop).await };
            telemetry.serve(status_listener, shutdown).await
        }
    });
    let live = live::spawn_if_terminal(Arc::clone(&registry));
    tracing::info!(
        "running ({} sources, {} sinks); status on http://{}/status; started in {:?}",
        config.sources.len(),
        config.sinks.len(),
        config.runtime.status_addr,
        started.elapsed()
    );

    // Shutdown.
    let signal = signals.next().await;
    if live.is_some() {
        eprintln!();
    }
    tracing::info!("{signal}: shutting down (a second signal exits at once)");
    tokio::spawn(async move {
        signals.next().await;
        tracing::warn!("second signal: exiting now");
        std::process::exit(130);
    });
    let deadline = tokio::time::Instant::now() + config.runtime.shutdown_timeout;
    let _ = stop_tx.send(true);
    if tokio::time::timeout_at(deadline, async {
        while source_tasks.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        tracing::warn!(
            "sources did not stop within runtime.shutdown_timeout; refusing what is in flight"
        );
        source_tasks.abort_all();
    }
    let _ = phase_tx.send(Phase::Drain(wal.durable_end()));
    if tokio::time::timeout_at(deadline, async {
        while drivers.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        tracing::warn!(
            "sinks did not drain within runtime.shutdown_timeout; committing what they stored"
        );
        let _ = phase_tx.send(Phase::Stop);
        if tokio::time::timeout(STOP_GRACE, async {
            while drivers.join_next().await.is_some() {}
        })
        .await
        .is_err()
        {
            drivers.abort_all();
        }
    }
    if let Some(live) = live {
        live.abort();
    }
    reflect.abort();
    if let Err(e) = quarantine.sync() {
        tracing::warn!("quarantine: final sync failed: {e}");
    }
    let _ = status_server.await;
    drop(registry);
    wal.close().await;
    wal_component.set_state(State::Stopped);
    tracing::info!("stopped");
    Ok(())
}

/// Runs a sink's driver; after a rewind, waits the retry delay and runs it again with
/// a new reader (which starts at the committed cursor).
async fn drive_sink(
    config: DriverConfig,
    wal: Wal,
    mut sink: Sink,
    stats: Arc<SinkStats>,
    phase: watch::Receiver<Phase>,
    quarantine: Quarantine,
) {
    let mut delay = config.retry_initial;
    loop {
        let reader = match wal.reader(&config.name) {
            Ok(reader) => reader,
            Err(e) => {
                // Declared at startup from the same configuration: cannot happen.
                tracing::error!("sink {}: {e}", config.name);
                stats.component.set_state(State::Failed(e.to_string()));
                return;
            }
        };
        let (returned, outcome) = driver::run(
            config.clone(),
            reader,
            sink,
            Arc::clone(&stats),
            phase.clone(),
            quarantine.clone(),
        )
        .await;
        sink = returned;
        if outcome == Outcome::Finished || *phase.borrow() != Phase::Run {
            return;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(config.retry_max);
    }
}

/// SIGTERM and SIGINT, installed once.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next signal's name.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}
