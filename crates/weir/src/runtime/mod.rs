//! The pipeline runtime behind `weir run`: sources → WAL → sink drivers.
//!
//! # Queue inventory (every bound comes from the configuration)
//!
//! | edge | bound | answer when full |
//! |---|---|---|
//! | a source's batches on their way to durability | `max_uncommitted_tickets` (64) per source | the source waits ([`ingest`](crate::pipeline::ingest)) |
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
//! On SIGTERM, SIGINT or SIGHUP: sources stop taking input (the HTTP listener closes, in-flight
//! requests are answered), their in-flight batches become durable or are refused; then
//! each sink drains up to the WAL's durable end, closes its files and commits its
//! cursor — all within `runtime.shutdown_timeout`, after which whatever is stored is
//! committed and the rest is read again at the next start. A second signal exits at
//! once (exit code 128 + the signal: 143 for SIGTERM, 130 for SIGINT); the WAL's recovery and the cursors make that safe too.
//!
//! # Reporting
//!
//! Every queue, component state (a source waiting on admission is `backpressured`),
//! the WAL's figures and each sink's cursor, lag and gaps are registered with the
//! [`Telemetry`], served on `runtime.status_addr` (see [`status`]). Records a sink
//! cannot encode go to the [`Quarantine`] with the reason.
//!
//! # Steps
//!
//! [`run`] is five steps, each its own function: [`check`] (everything that can fail
//! before anything is created: credential variables, CA files, listen addresses),
//! [`open`] (the WAL, the quarantine, each sink's directory), [`start`] (sink drivers,
//! sources, status), [`wait`] (for SIGTERM, SIGINT or SIGHUP) and [`drain`] (stop the sources,
//! drain the sinks within `runtime.shutdown_timeout`, close the WAL).

pub mod fds;
pub mod live;
pub mod malloc;
pub mod notify;
pub mod status;
pub mod wal;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use weir_flow::semaphore::{DualSemaphore, DualSemaphoreConfig};
use weir_wal::{OpenReport, ReadLimits, Wal};

use crate::config::Config;
use crate::logging::LogHandle;
use crate::pipeline::driver::{self, DriverConfig, Phase};
use crate::pipeline::{Ingest, Reserved, SinkStats, SourceStats};
use crate::quarantine::Quarantine;
use crate::sinks::{Sink, SinkContext};
use crate::sources::{self, SourceContext};
use crate::telemetry::{Component, ComponentKind, State, Telemetry};

use self::status::{Registry, SinkEntry};

/// How long, after the drain deadline, drivers get to commit what they stored.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How often source states are brought in line with their waits.
const REFLECT_EVERY: Duration = Duration::from_millis(100);

/// Runs the pipeline until SIGTERM, SIGINT or SIGHUP, then shuts down gracefully.
///
/// # Errors
///
/// Startup failures (a token variable is missing, an address cannot be bound, the WAL
/// cannot be opened, a sink directory cannot be created), each naming what to fix.
/// Every check that needs no file is made before the WAL is opened or a directory
/// is created.
///
/// # Cancel safety
///
/// Not meant to be cancelled: it ends on a signal.
pub async fn run(config: Config, log: Option<LogHandle>) -> anyhow::Result<()> {
    let started = Instant::now();
    // Installed first, so that a signal during startup is not lost.
    let mut signals = Signals::new().context("installing the SIGTERM/SIGINT/SIGHUP handlers")?;
    let checked = check(&config).await?;
    fds::check_fd_limit(&config);
    let opened = open(&config, log.as_ref()).await?;
    let running = start(&config, checked, opened, log.clone());
    tracing::info!(
        "running ({} sources, {} sinks); status on http://{}/status; started in {:?}",
        config.sources.len(),
        config.sinks.len(),
        config.runtime.status_addr,
        started.elapsed()
    );
    notify::ready();
    let live_line = if running.live.is_some() { log } else { None };
    wait(&mut signals, live_line).await;
    notify::stopping();
    drain(&config, running).await;
    Ok(())
}

/// What [`check`] found: each source's startup check and the bound status listener.
pub struct Checked {
    sources: BTreeMap<String, sources::Checked>,
    status_listener: TcpListener,
}

/// Step 1: everything that can fail before anything is created. Each source checks
/// its own (credential variables, CA files, its listen address), then the status
/// address is bound. No directory or file is created.
///
/// # Errors
///
/// The first failure, naming its key.
pub async fn check(config: &Config) -> anyhow::Result<Checked> {
    let mut sources = BTreeMap::new();
    for (name, source) in &config.sources {
        sources.insert(name.clone(), source.kind.check(name).await?);
    }
    // Each sink with `healthcheck = true` reaches its destination (credentials, the
    // bucket, the stream, a connection), each within its `healthcheck_timeout`.
    for (name, sink) in config.sinks.iter().filter(|(_, sink)| sink.healthcheck) {
        sink.healthcheck(name).await?;
    }
    let status_listener = TcpListener::bind(config.runtime.status_addr)
        .await
        .with_context(|| {
            format!(
                "runtime.status_addr: binding {}",
                config.runtime.status_addr
            )
        })?;
    Ok(Checked {
        sources,
        status_listener,
    })
}

/// What [`open`] opened.
pub struct Opened {
    telemetry: Telemetry,
    wal: Wal,
    wal_component: Component,
    report: OpenReport,
    quarantine: Quarantine,
    sinks: Vec<OpenedSink>,
}

/// A sink opened in step 2, with what its driver's stats share with it.
struct OpenedSink {
    name: String,
    sink: Sink,
    detail: Arc<std::sync::OnceLock<crate::pipeline::Detail>>,
    unencodable: Arc<std::sync::atomic::AtomicU64>,
}

/// Step 2: the WAL (recovering it), the quarantine and each sink (its directory).
///
/// # Errors
///
/// What could not be opened, naming its key.
pub async fn open(config: &Config, log: Option<&LogHandle>) -> anyhow::Result<Opened> {
    // Hashed once: the short form names the pipeline in /status, the full one goes into
    // Parquet footers.
    let hash = config.hash();
    let telemetry = Telemetry::new(hash.to_string());
    if let Some(log) = log {
        log.register_metrics(
            &telemetry,
            u64::from(config.runtime.log_queue.get()),
            u64::from(config.runtime.log_queue.get()) * config.runtime.log_line_max_bytes.bytes(),
        );
    }
    let wal_component = telemetry.component(ComponentKind::Wal, "wal");
    let wal_config = wal::wal_config(config).context("wal")?;
    let (wal, report) = tokio::task::spawn_blocking(move || Wal::open(wal_config))
        .await?
        .context("opening the WAL (wal.dir)")?;
    wal_component.set_state(State::Running);
    tracing::info!(
        "WAL {} at {} open: offsets {}..{}; recovery cut {} bytes ({} records), quarantined {} segments",
        wal.id(),
        config.wal.dir.display(),
        report.start,
        report.durable_end,
        report.truncated_bytes,
        report.truncated_records,
        report.quarantined.len(),
    );
    let quarantine = Quarantine::new(&config.quarantine.dir, config.quarantine.max_disk.bytes())
        .context("quarantine.dir")?
        .with_telemetry(&telemetry);
    let config_hash = format!("sha256:{}", hash.hex());
    let mut sinks = Vec::new();
    for (name, sink_config) in &config.sinks {
        let detail = Arc::new(std::sync::OnceLock::new());
        let unencodable = Arc::default();
        let cx = SinkContext {
            config_hash: config_hash.clone(),
            on_full: config.wal.on_full,
            retry: sink_config.retry,
            telemetry: telemetry.clone(),
            quarantine: quarantine.clone(),
            detail: Arc::clone(&detail),
            unencodable: Arc::clone(&unencodable),
            wal: wal.clone(),
            data_dir: config.runtime.data_dir.clone(),
        };
        let (n, kind) = (name.clone(), sink_config.kind.clone());
        let sink = tokio::task::spawn_blocking(move || kind.open(&n, &cx))
            .await?
            .with_context(|| format!("sinks.{name}"))?;
        sinks.push(OpenedSink {
            name: name.clone(),
            sink,
            detail,
            unencodable,
        });
    }
    Ok(Opened {
        telemetry,
        wal,
        wal_component,
        report,
        quarantine,
        sinks,
    })
}

/// What [`start`] started.
pub struct Running {
    wal: Wal,
    wal_component: Component,
    quarantine: Quarantine,
    registry: Arc<Registry>,
    stop_tx: watch::Sender<bool>,
    phase_tx: watch::Sender<Phase>,
    sources: JoinSet<()>,
    drivers: JoinSet<()>,
    reflect: JoinHandle<()>,
    history: JoinHandle<()>,
    status_server: JoinHandle<()>,
    live: Option<JoinHandle<()>>,
}

/// Step 3: one driver per sink, then the sources, then `/status` (and the live line on
/// a terminal, through `log`).
pub fn start(config: &Config, checked: Checked, opened: Opened, log: Option<LogHandle>) -> Running {
    let Opened {
        telemetry,
        wal,
        wal_component,
        report,
        quarantine,
        sinks,
    } = opened;

    // Sinks: one driver each, run again from the committed cursor after a rewind.
    let (phase_tx, phase_rx) = watch::channel(Phase::Run);
    let mut drivers = JoinSet::new();
    let mut sink_entries = Vec::new();
    for OpenedSink {
        name,
        sink,
        detail,
        unencodable,
    } in sinks
    {
        let sink_config = &config.sinks[&name];
        let component = telemetry.component(ComponentKind::Sink, &name);
        quarantine.attach(&component);
        let mut stats = SinkStats::new(component);
        stats.detail = detail;
        stats.unencodable = unencodable;
        let stats = Arc::new(stats);
        sink_entries.push(SinkEntry {
            name: name.clone(),
            kind: sink.type_name(),
            stats: Arc::clone(&stats),
            channel_batches: u64::from(sink_config.channel_batches.get()),
            channel_bytes: sink_config.channel_bytes(),
            max_lag: serde_json::to_value(sink_config.max_lag).unwrap_or_default(),
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
            filter: sink_config.filter.clone(),
        };
        drivers.spawn(driver::drive(
            driver_config,
            wal.clone(),
            sink,
            stats,
            phase_rx.clone(),
            quarantine.clone(),
        ));
    }

    // Sources.
    let channel = DualSemaphore::new(DualSemaphoreConfig::new(
        u64::from(config.wal.channel_batches.get()),
        config.wal.max_pending_bytes.bytes(),
    ));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut source_tasks = JoinSet::new();
    let mut source_entries = Vec::new();
    let reserved = Arc::new(Reserved::new());
    let Checked {
        sources: mut source_checks,
        status_listener,
    } = checked;
    for (name, source) in &config.sources {
        let Some(source_check) = source_checks.remove(name) else {
            continue;
        };
        let component = telemetry.component(ComponentKind::Source, name);
        component.set_state(State::Running);
        quarantine.attach(&component);
        let stats = Arc::new(SourceStats::new(component));
        let ingest = Ingest::new(
            wal.clone(),
            channel.clone(),
            Arc::clone(&reserved),
            source.max_uncommitted_tickets.get(),
            Arc::clone(&stats),
        );
        let cx = SourceContext {
            name: Arc::from(name.as_str()),
            ingest,
            stop: stop_rx.clone(),
            quarantine: quarantine.clone(),
            telemetry: telemetry.clone(),
            data_dir: config.runtime.data_dir.clone(),
        };
        source.kind.start(source_check, cx, &mut source_tasks);
        source_entries.push((name.clone(), source.kind.type_name(), stats));
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
    let history = telemetry.start_history(crate::telemetry::history::HistoryLayout::pipeline(
        config.sources.keys().map(String::as_str),
        config.sinks.keys().map(String::as_str),
    ));
    let limits = crate::serve::Limits {
        max_connections: config.runtime.status_max_connections,
        header_timeout: config.runtime.status_header_timeout.get(),
    };
    let status_server = tokio::spawn({
        let telemetry = telemetry.clone();
        let mut stop = stop_rx.clone();
        async move {
            let shutdown = async move { crate::pipeline::stopped(&mut stop).await };
            telemetry.serve(status_listener, limits, shutdown).await;
        }
    });
    let live = live::spawn_if_terminal(Arc::clone(&registry), log);
    Running {
        wal,
        wal_component,
        quarantine,
        registry,
        stop_tx,
        phase_tx,
        sources: source_tasks,
        drivers,
        reflect,
        history,
        status_server,
        live,
    }
}

/// Step 4: waits for SIGTERM, SIGINT or SIGHUP; a second signal then exits at once
/// with 128 + its number (143 for SIGTERM, 130 for SIGINT).
/// `live_line`: the log writer drawing the live line, which is then ended (through
/// the writer: nothing here writes to stderr).
pub async fn wait(signals: &mut Signals, live_line: Option<LogHandle>) {
    let signal = signals.next().await;
    if let Some(log) = live_line {
        log.end_status_line();
    }
    tracing::info!(
        "{}: shutting down (a second signal exits at once)",
        signal.name
    );
    let mut rest = std::mem::replace(signals, Signals::closed());
    tokio::spawn(async move {
        let second = rest.next().await;
        let code = 128 + second.number;
        tracing::warn!("second signal ({}): exiting now with {code}", second.name);
        std::process::exit(code);
    });
}

/// Step 5: stops the sources (their in-flight batches become durable or are refused),
/// drains every sink up to the WAL's durable end within `runtime.shutdown_timeout`,
/// commits their cursors and closes the WAL.
pub async fn drain(config: &Config, running: Running) {
    let Running {
        wal,
        wal_component,
        quarantine,
        registry,
        stop_tx,
        phase_tx,
        sources: mut source_tasks,
        mut drivers,
        reflect,
        history,
        status_server,
        live,
    } = running;
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
    history.abort();
    let q = quarantine.clone();
    match tokio::task::spawn_blocking(move || q.sync()).await {
        Ok(Err(e)) => tracing::warn!("quarantine: final sync failed: {e}"),
        Err(e) => tracing::warn!("quarantine: final sync did not run: {e}"),
        Ok(Ok(())) => {}
    }
    quarantine.flush_logs();
    let _ = status_server.await;
    drop(registry);
    wal.close().await;
    wal_component.set_state(State::Stopped);
    tracing::info!("stopped");
}

/// SIGTERM, SIGINT and SIGHUP, installed once.
pub struct Signals {
    handlers: Option<[(tokio::signal::unix::Signal, Caught); 3]>,
}

/// A signal that stops the daemon: its name and number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caught {
    /// `SIGTERM`, `SIGINT` or `SIGHUP`.
    pub name: &'static str,
    /// Its number: a second one exits with 128 + it, as the shell reports a death by it.
    pub number: i32,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        let caught = |kind: SignalKind, name| {
            (
                kind,
                Caught {
                    name,
                    number: kind.as_raw_value(),
                },
            )
        };
        let [term, int, hup] = [
            caught(SignalKind::terminate(), "SIGTERM"),
            caught(SignalKind::interrupt(), "SIGINT"),
            // No config reload: a hangup (a closed terminal, a supervisor's habit)
            // drains like SIGTERM instead of killing the daemon mid-batch.
            caught(SignalKind::hangup(), "SIGHUP"),
        ];
        Ok(Signals {
            handlers: Some([
                (signal(term.0)?, term.1),
                (signal(int.0)?, int.1),
                (signal(hup.0)?, hup.1),
            ]),
        })
    }

    /// Handlers already moved elsewhere: `next` never resolves.
    fn closed() -> Self {
        Signals { handlers: None }
    }

    /// The next signal.
    async fn next(&mut self) -> Caught {
        match &mut self.handlers {
            Some([(term, t), (int, i), (hup, h)]) => tokio::select! {
                _ = term.recv() => *t,
                _ = int.recv() => *i,
                _ = hup.recv() => *h,
            },
            None => std::future::pending().await,
        }
    }
}
