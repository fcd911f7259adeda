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
//! # Reload
//!
//! On SIGHUP, `weir reload` or `POST /reload` (loopback only), the configuration file
//! is read and checked again, and what changed is applied while the rest keeps running
//! ([`reload`]). A file with errors changes nothing.
//!
//! # Shutdown
//!
//! On SIGTERM or SIGINT: sources stop taking input (the HTTP listener closes, in-flight
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
//! sources, status), [`wait`] (for SIGTERM or SIGINT, reloading on SIGHUP) and [`drain`] (stop the sources,
//! drain the sinks within `runtime.shutdown_timeout`, close the WAL).

pub mod components;
pub mod fds;
pub mod live;
pub mod malloc;
pub mod notify;
pub mod pid;
pub mod reload;
pub mod rename;
pub mod status;
pub mod wal;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use weir_flow::semaphore::{DualSemaphore, DualSemaphoreConfig};
use weir_wal::{OpenReport, Wal};

use crate::config::Config;
use crate::logging::LogHandle;
use crate::pipeline::Reserved;
use crate::quarantine::Quarantine;
use crate::sinks::ConfigStamp;
use crate::sinks::parquet::FooterMetadata;
use crate::sources;
use crate::telemetry::{Component, ComponentKind, State, Telemetry};

use self::components::{OpenedSink, Pipeline, stop_sinks, stop_sources};
use self::reload::{Components, ConfigStatus, ReloadReport};
use self::status::Registry;

/// How often source states are brought in line with their waits.
const REFLECT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Runs the pipeline until SIGTERM or SIGINT, then shuts down gracefully. SIGHUP (and
/// `POST /reload`) reloads the configuration from `path` ([`reload`]).
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
pub async fn run(
    config: Config,
    path: Option<PathBuf>,
    log: Option<LogHandle>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    // Installed first, so that a signal during startup is not lost.
    let mut signals = Signals::new().context("installing the SIGTERM/SIGINT/SIGHUP handlers")?;
    let checked = check(&config).await?;
    fds::check_fd_limit(&config);
    let pid_file = match &config.runtime.pid_file {
        Some(path) => Some(pid::PidFile::create(path).context("runtime.pid_file")?),
        None => None,
    };
    let opened = open(&config, log.as_ref()).await?;
    let mut running = start(&config, path, checked, opened, log.clone());
    tracing::info!(
        "running ({} sources, {} sinks); status on http://{}/status; started in {:?}",
        config.sources.len(),
        config.sinks.len(),
        config.runtime.status_addr,
        started.elapsed()
    );
    notify::ready();
    let live_line = if running.live.is_some() { log } else { None };
    wait(&mut signals, &mut running, live_line).await;
    notify::stopping();
    drain(running).await;
    drop(pid_file);
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
    pipeline: Pipeline,
    wal_component: Component,
    report: OpenReport,
    sinks: Vec<(String, OpenedSink)>,
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
    rename::before_wal(config).await?;
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
    let channel = DualSemaphore::new(DualSemaphoreConfig::new(
        u64::from(config.wal.channel_batches.get()),
        config.wal.max_pending_bytes.bytes(),
    ));
    let pipeline = Pipeline {
        registry: Arc::new(Registry::new(wal.clone(), channel.clone())),
        telemetry,
        wal,
        quarantine,
        channel,
        reserved: Arc::new(Reserved::new()),
        stamp: ConfigStamp::new(FooterMetadata {
            config_hash: format!("sha256:{}", hash.hex()),
            on_full: config.wal.on_full,
        }),
        data_dir: config.runtime.data_dir.clone(),
    };
    let mut sinks = Vec::new();
    for (name, sink_config) in &config.sinks {
        sinks.push((name.clone(), pipeline.open_sink(name, sink_config).await?));
    }
    Ok(Opened {
        pipeline,
        wal_component,
        report,
        sinks,
    })
}

/// What [`start`] started.
pub struct Running {
    components: Components,
    /// The file to reload from, if any.
    path: Option<PathBuf>,
    wal_component: Component,
    /// Reloads asked for by `POST /reload`, each with where to send its outcome.
    reloads: mpsc::Receiver<oneshot::Sender<ReloadReport>>,
    status_stop: watch::Sender<bool>,
    reflect: JoinHandle<()>,
    history: JoinHandle<()>,
    status_server: JoinHandle<()>,
    live: Option<JoinHandle<()>>,
}

/// Step 3: one driver per sink, then the sources, then `/status` (and the live line on
/// a terminal, through `log`). `path` is the file reloads read.
pub fn start(
    config: &Config,
    path: Option<PathBuf>,
    checked: Checked,
    opened: Opened,
    log: Option<LogHandle>,
) -> Running {
    let Opened {
        pipeline,
        wal_component,
        report,
        sinks: opened_sinks,
    } = opened;
    let telemetry = pipeline.telemetry.clone();

    // Sinks first: each is driven from its committed cursor before a source writes.
    let mut sinks = BTreeMap::new();
    for (name, sink) in opened_sinks {
        let running = pipeline.start_sink(&name, &config.sinks[&name], sink);
        sinks.insert(name, running);
    }

    // Sources.
    let Checked {
        sources: mut source_checks,
        status_listener,
    } = checked;
    let mut sources = BTreeMap::new();
    for (name, source) in &config.sources {
        let Some(source_check) = source_checks.remove(name) else {
            continue;
        };
        sources.insert(
            name.clone(),
            pipeline.start_source(name, source, source_check),
        );
    }

    // Status.
    let registry = Arc::clone(&pipeline.registry);
    registry.register(
        &telemetry,
        serde_json::to_value(&report).unwrap_or_default(),
    );
    let q = pipeline.quarantine.clone();
    telemetry.register_status("quarantine", move || {
        serde_json::to_value(q.stats()).unwrap_or_default()
    });
    let config_status = Arc::new(Mutex::new(ConfigStatus {
        file: path.clone(),
        hash: format!("sha256:{}", config.hash().hex()),
        values: config.redacted(),
        loaded_unix_ms: reload::unix_ms_now(),
        reloads_applied: 0,
        reloads_refused: 0,
        last_reload: None,
    }));
    let shown = Arc::clone(&config_status);
    telemetry.register_status("config", move || {
        let status = shown
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        serde_json::to_value(&*status).unwrap_or_default()
    });
    let (reload_tx, reloads) = mpsc::channel::<oneshot::Sender<ReloadReport>>(4);
    if path.is_some() {
        telemetry.set_reload_hook(Arc::new(move || {
            let reload_tx = reload_tx.clone();
            Box::pin(async move {
                let (tx, rx) = oneshot::channel();
                if reload_tx.send(tx).await.is_err() {
                    return (false, serde_json::json!({"error": "weir is shutting down"}));
                }
                match rx.await {
                    Ok(report) => (
                        report.applied(),
                        serde_json::to_value(&report).unwrap_or_default(),
                    ),
                    Err(_) => (false, serde_json::json!({"error": "weir is shutting down"})),
                }
            })
        }));
    }
    let reflect = tokio::spawn({
        let registry = Arc::clone(&registry);
        let wal_component = wal_component.clone();
        async move {
            let mut tick = tokio::time::interval(REFLECT_EVERY);
            loop {
                tick.tick().await;
                for (_, _, s) in registry.sources() {
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
    let (status_stop, status_stop_rx) = watch::channel(false);
    let status_server = tokio::spawn({
        let telemetry = telemetry.clone();
        let mut stop = status_stop_rx;
        async move {
            let shutdown = async move { crate::pipeline::stopped(&mut stop).await };
            telemetry.serve(status_listener, limits, shutdown).await;
        }
    });
    let live = live::spawn_if_terminal(Arc::clone(&registry), log);
    Running {
        components: Components {
            config: config.clone(),
            pipeline,
            sources,
            sinks,
            status: config_status,
        },
        path,
        wal_component,
        reloads,
        status_stop,
        reflect,
        history,
        status_server,
        live,
    }
}

/// Step 4: runs until SIGTERM or SIGINT, reloading the configuration on SIGHUP and
/// `POST /reload`; a second stopping signal then exits at once with 128 + its number
/// (143 for SIGTERM, 130 for SIGINT). `live_line`: the log writer drawing the live
/// line, which is then ended (through the writer: nothing here writes to stderr).
pub async fn wait(signals: &mut Signals, running: &mut Running, live_line: Option<LogHandle>) {
    let signal = loop {
        tokio::select! {
            signal = signals.next() => {
                if signal.name != "SIGHUP" {
                    break signal;
                }
                match running.path.clone() {
                    Some(path) => {
                        tracing::info!("SIGHUP: reloading {}", path.display());
                        notify::reloading();
                        running.components.reload(&path, "SIGHUP").await;
                        notify::ready();
                    }
                    None => tracing::warn!("SIGHUP: no configuration file to reload"),
                }
            }
            Some(reply) = running.reloads.recv() => {
                if let Some(path) = running.path.clone() {
                    tracing::info!("POST /reload: reloading {}", path.display());
                    notify::reloading();
                    let report = running.components.reload(&path, "POST /reload").await;
                    notify::ready();
                    let _ = reply.send(report);
                }
            }
        }
    };
    if let Some(log) = live_line {
        log.end_status_line();
    }
    tracing::info!(
        "{}: shutting down (a second signal exits at once)",
        signal.name
    );
    let mut rest = std::mem::replace(signals, Signals::closed());
    tokio::spawn(async move {
        loop {
            let second = rest.next().await;
            if second.name == "SIGHUP" {
                tracing::warn!("SIGHUP while shutting down: not reloading");
                continue;
            }
            let code = 128 + second.number;
            tracing::warn!("second signal ({}): exiting now with {code}", second.name);
            std::process::exit(code);
        }
    });
}

/// Step 5: stops the sources (their in-flight batches become durable or are refused),
/// drains every sink up to the WAL's durable end within `runtime.shutdown_timeout`,
/// commits their cursors and closes the WAL.
pub async fn drain(running: Running) {
    let Running {
        components,
        wal_component,
        status_stop,
        reflect,
        history,
        status_server,
        live,
        ..
    } = running;
    let Components {
        config,
        pipeline,
        sources,
        sinks,
        ..
    } = components;
    let deadline = tokio::time::Instant::now() + config.runtime.shutdown_timeout;
    stop_sources(sources.into_iter().collect(), deadline).await;
    let wal = pipeline.wal.clone();
    stop_sinks(
        sinks.into_iter().collect(),
        Some(wal.durable_end()),
        deadline,
    )
    .await;
    if let Some(live) = live {
        live.abort();
    }
    reflect.abort();
    history.abort();
    let q = pipeline.quarantine.clone();
    match tokio::task::spawn_blocking(move || q.sync()).await {
        Ok(Err(e)) => tracing::warn!("quarantine: final sync failed: {e}"),
        Err(e) => tracing::warn!("quarantine: final sync did not run: {e}"),
        Ok(Ok(())) => {}
    }
    pipeline.quarantine.flush_logs();
    let _ = status_stop.send(true);
    let _ = status_server.await;
    drop(pipeline);
    wal.close().await;
    wal_component.set_state(State::Stopped);
    tracing::info!("stopped");
}

/// SIGTERM, SIGINT and SIGHUP, installed once.
pub struct Signals {
    handlers: Option<[(tokio::signal::unix::Signal, Caught); 3]>,
}

/// A signal the daemon acts on: its name and number.
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
            // Reloads the configuration (`systemctl reload`, logrotate's postrotate).
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
