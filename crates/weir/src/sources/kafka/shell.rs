//! The `kafka` source's tokio side (see the [module docs](super)): the startup hooks,
//! what its tasks and librdkafka's callbacks share, [`run`], and the appender task.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use tokio::sync::{Notify, mpsc, watch};
use weir_flow::Timestamp;
use weir_wal::Batch;

use super::client::{Context, client_config, offsets_list};
use super::config::KafkaConfig;
use super::core::{Core, KafkaStatus, Partition, UnitTag};
use super::poll::poll_loop;
use super::status::register;
use crate::pipeline::appends::{Event, InFlight, OrderedAppends};
use crate::pipeline::ingest::Ingest;
use crate::pipeline::stats::Detail;
use crate::quarantine::{Quarantine, QuarantineError, Rejected};
use crate::sources::{SourceContext, StartSource};
use crate::telemetry::State;

/// Records per unit handed to the WAL, at most.
pub(super) const UNIT_RECORDS: usize = 4096;
/// Bytes per unit, about.
pub(super) const UNIT_BYTES: u64 = 1 << 20;
/// Units handed to the appender and not yet taken.
const HANDOFF_UNITS: usize = 4;
/// Units in the WAL and not yet durable, at most.
const IN_FLIGHT_UNITS: usize = 8;
/// How long, at shutdown, units may wait for admission.
const SHUTDOWN_ADMISSION: Duration = Duration::from_secs(5);

impl StartSource for KafkaConfig {
    type Checked = ();

    /// Checks what can be checked without a broker: the SASL password's variable, the
    /// CA file, and that librdkafka accepts the properties.
    async fn check(&self, name: &str) -> anyhow::Result<()> {
        client_config(self, name)
            .and_then(|c| {
                c.create_with_context::<_, StreamConsumer<Context>>(Context::new(
                    name,
                    Arc::new(Shared::new(self)),
                ))
                .map(drop)
                .map_err(|e| format!("properties: librdkafka refused the configuration: {e}"))
            })
            .map_err(|e| anyhow::anyhow!("sources.{name}.{e}"))
    }

    fn start(self, (): (), cx: SourceContext) -> impl Future<Output = ()> + Send + 'static {
        let shared = Arc::new(Shared::new(&self));
        register(&cx.name, &shared, &cx.telemetry);
        let detail = Arc::clone(&shared);
        let _ = cx.ingest.stats().detail.set(Detail(Arc::new(move || {
            serde_json::to_value(detail.status()).unwrap_or_default()
        })));
        run(cx.name, self, cx.ingest, cx.quarantine, shared, cx.stop)
    }
}

/// What the tasks, librdkafka's callbacks and `/status` share.
#[derive(Debug)]
pub struct Shared {
    core: Mutex<Core>,
    /// A unit became durable (commits may be due, the watermark may be crossed).
    pub(super) durable: Notify,
    /// The assignment changed: committed offsets to read.
    pub(super) assigned: Mutex<Vec<Partition>>,
}

impl Shared {
    fn new(config: &KafkaConfig) -> Self {
        let core = Core::new(config.low_watermark.bytes(), config.high_watermark.bytes())
            .unwrap_or_else(|_| {
                Core::new(0, config.high_watermark.bytes().max(1)).expect("0 < high")
            });
        Shared {
            core: Mutex::new(core),
            durable: Notify::new(),
            assigned: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn core(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The figures now (for `/status`).
    pub fn status(&self) -> KafkaStatus {
        self.core().status()
    }

    pub(super) fn error(&self, message: String) {
        self.core().error(message);
    }
}

pub(super) fn now() -> Timestamp {
    Timestamp::from_millis(u64::try_from(crate::record::now_ms()).unwrap_or(0))
}

/// A unit on its way to the WAL.
pub(super) struct Unit {
    pub(super) tag: UnitTag,
    pub(super) batches: Vec<Batch>,
    /// Records too large for one WAL batch: quarantined before the unit is appended.
    pub(super) oversize: Vec<Rejected>,
}

/// Runs the source until `stop` turns true.
///
/// # Cancel safety
///
/// Not meant to be cancelled; stop it through `stop`.
pub async fn run(
    name: Arc<str>,
    config: KafkaConfig,
    ingest: Ingest,
    quarantine: Quarantine,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) {
    let consumer = client_config(&config, &name).and_then(|c| {
        c.create_with_context::<_, StreamConsumer<Context>>(Context::new(
            &name,
            Arc::clone(&shared),
        ))
        .map_err(|e| format!("cannot create the consumer: {e}"))
    });
    let consumer = match consumer {
        Ok(c) => Arc::new(c),
        Err(message) => return fail(&name, &ingest, &shared, message),
    };
    let subscribed = match &config.topic_pattern {
        Some(p) => consumer.subscribe(&[p.as_str()]),
        None => consumer.subscribe(&config.topics.iter().map(String::as_str).collect::<Vec<_>>()),
    };
    if let Err(e) = subscribed {
        return fail(&name, &ingest, &shared, format!("cannot subscribe: {e}"));
    }
    ingest.stats().component.set_state(State::Running);
    let (tx, rx) = mpsc::channel::<Unit>(HANDOFF_UNITS);
    let appender = tokio::spawn(append_loop(
        Arc::clone(&name),
        rx,
        ingest.clone(),
        quarantine,
        Arc::clone(&shared),
        stop.clone(),
    ));
    poll_loop(&name, &consumer, &ingest, &shared, tx, stop).await;
    // The poll loop has handed over everything it fetched; wait until it is durable
    // (or given up), then commit what is.
    let _ = appender.await;
    let due = shared.core().commits_due();
    if !due.is_empty() {
        let c = Arc::clone(&consumer);
        let result =
            tokio::task::spawn_blocking(move || c.commit(&offsets_list(&due), CommitMode::Sync))
                .await;
        match result {
            Ok(Ok(())) => {
                tracing::info!(source = %name, "kafka: committed durable offsets at shutdown")
            }
            Ok(Err(e)) => {
                tracing::warn!(source = %name, "kafka: last commit failed: {e}; those records are read again")
            }
            Err(e) => tracing::warn!(source = %name, "kafka: last commit failed: {e}"),
        }
    }
    let c = Arc::clone(&consumer);
    let _ = tokio::task::spawn_blocking(move || c.unsubscribe()).await;
}

fn fail(name: &str, ingest: &Ingest, shared: &Shared, message: String) {
    tracing::error!(source = name, "kafka: {message}");
    shared.error(message.clone());
    ingest.stats().component.set_state(State::Failed(message));
}

/// Takes units from the poll loop in order, keeps several in the WAL at once, and
/// reports each to the core once durable.
async fn append_loop(
    name: Arc<str>,
    mut rx: mpsc::Receiver<Unit>,
    ingest: Ingest,
    quarantine: Quarantine,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) {
    let mut appends = OrderedAppends::new(
        ingest.clone(),
        InFlight {
            units: IN_FLIGHT_UNITS,
            bytes: (IN_FLIGHT_UNITS as u64) * UNIT_BYTES,
        },
    );
    let mut open = true;
    loop {
        let deadline = stop.borrow().then(|| Instant::now() + SHUTDOWN_ADMISSION);
        tokio::select! {
            event = appends.next(), if !appends.is_empty() => match event {
                Some(Event::Durable(tag)) => {
                    shared.core().durable(&tag, now());
                    shared.durable.notify_one();
                }
                Some(Event::Refused) => {
                    if let Err((message, _)) = appends.resubmit(deadline).await {
                        return fail(&name, &ingest, &shared, message);
                    }
                }
                Some(Event::Failed(_, message)) => {
                    return fail(&name, &ingest, &shared, message);
                }
                None => {}
            },
            unit = rx.recv(), if open && appends.has_room() => match unit {
                Some(unit) => {
                    // The quarantine logs (rate-limited) and counts what it keeps and
                    // what it drops.
                    if !unit.oversize.is_empty()
                        && let Err(QuarantineError::Blocking(e)) =
                            quarantine.put_durable(&name, unit.oversize).await
                    {
                        tracing::error!(source = %name, "kafka: quarantining oversized records did not complete: {e}");
                    }
                    if let Err((message, _)) = appends.submit(unit.tag, unit.batches, deadline).await {
                        if *stop.borrow() {
                            tracing::info!(source = %name, "kafka: at shutdown, {message}; the group reads it again");
                            return;
                        }
                        return fail(&name, &ingest, &shared, message);
                    }
                }
                None => open = false,
            },
            else => break,
        }
    }
}
