//! The `nats` source's tokio side (see the [module docs](super)): the startup hooks,
//! what its tasks share, and [`run`], which starts the fetcher, the appender and the
//! progress task.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_nats::Client;
use async_nats::jetstream::consumer::PullConsumer;
use bytes::Bytes;
use tokio::sync::watch;
use weir_flow::credit;

use super::append::append_loop;
use super::config::NatsConfig;
use super::consumer::{Connected, connect};
use super::core::{Ledger, LedgerConfig, NatsStatus};
use super::fetch::{Item, fetch_loop};
use super::status::register;
use crate::pipeline::appends::InFlight;
use crate::pipeline::ingest::Ingest;
use crate::pipeline::stats::Detail;
use crate::quarantine::Quarantine;
use crate::sources::{SourceContext, StartSource};
use crate::telemetry::State;

impl StartSource for NatsConfig {
    type Checked = Box<Connected>;

    /// Connects, checks the server version against `subjects`, creates or binds the
    /// consumer and reads its settings: a refusal is a startup error.
    async fn check(&self, name: &str) -> anyhow::Result<Box<Connected>> {
        connect(self, name)
            .await
            .map(Box::new)
            .map_err(|e| anyhow::anyhow!("sources.{name}.{e}"))
    }

    fn start(
        self,
        connected: Box<Connected>,
        cx: SourceContext,
    ) -> impl Future<Output = ()> + Send + 'static {
        let shared = Shared::new(&cx.name, &self, &connected);
        register(&cx.name, &shared, &cx.telemetry);
        let detail = Arc::clone(&shared);
        let _ = cx.ingest.stats().detail.set(Detail(Arc::new(move || {
            serde_json::to_value(detail.status()).unwrap_or_default()
        })));
        run(
            cx.name,
            self,
            *connected,
            cx.ingest,
            cx.quarantine,
            shared,
            cx.stop,
        )
    }
}

/// Records per unit appended to the WAL.
pub const UNIT_RECORDS: usize = 4096;
/// Payload bytes per unit (about).
pub const UNIT_BYTES: u64 = 4 * 1024 * 1024;
/// Units on their way to durability at once, and their encoded bytes (see
/// [`OrderedAppends`](crate::pipeline::appends::OrderedAppends)): unit k+1 is appended
/// while unit k is being fsynced, in stream order (per-subject order for the sinks), and
/// several units share an fsync. Their messages hold credits until acked, so
/// `max_inflight` bounds them too.
pub const IN_FLIGHT: InFlight = InFlight {
    units: 4,
    bytes: 4 * UNIT_BYTES,
};
/// How often the consumer's info (ack pending, pending) is read for `/status`.
const INFO_EVERY: Duration = Duration::from_secs(1);
/// Durable stream sequences remembered per credit, to recognise redeliveries.
const REMEMBERED_PER_CREDIT: usize = 16;

/// What the tasks and `/status` share.
#[derive(Debug)]
pub struct Shared {
    ledger: Mutex<Ledger>,
    pub(super) credits_available: AtomicU64,
}

impl Shared {
    fn new(name: &str, config: &NatsConfig, connected: &Connected) -> Arc<Self> {
        let max_inflight = u64::from(config.max_inflight.get());
        let mut ledger = Ledger::new(LedgerConfig {
            max_inflight,
            ack_wait_ms: 30_000,
            remembered: config.max_inflight.get() as usize * REMEMBERED_PER_CREDIT,
        });
        ledger.set_ack_wait_ms(u64::try_from(connected.ack_wait.as_millis()).unwrap_or(u64::MAX));
        let s = ledger.status_mut();
        s.server_version.clone_from(&connected.server_version);
        s.stream.clone_from(&config.stream);
        s.consumer.clone_from(&config.consumer);
        s.consumer_max_ack_pending = connected.max_ack_pending;
        s.max_deliver = connected.max_deliver;
        s.warnings.clone_from(&connected.warnings);
        tracing::info!(
            source = name,
            "nats: bound consumer {:?} on stream {:?} (server {})",
            config.consumer,
            config.stream,
            connected.server_version
        );
        Arc::new(Shared {
            ledger: Mutex::new(ledger),
            credits_available: AtomicU64::new(0),
        })
    }

    pub(super) fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The counters now (for `/status`).
    pub fn status(&self) -> NatsStatus {
        let mut s = self.ledger().status();
        s.credits_available = self.credits_available.load(Ordering::Relaxed);
        s
    }

    pub(super) fn error(&self, message: String) {
        self.ledger().status_mut().last_error = Some(message);
    }
}

/// Runs the source until `stop` turns true.
///
/// # Cancel safety
///
/// Not meant to be cancelled; stop it through `stop`.
pub async fn run(
    name: Arc<str>,
    config: NatsConfig,
    connected: Connected,
    ingest: Ingest,
    quarantine: Quarantine,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) {
    let capacity =
        NonZeroUsize::new(config.max_inflight.get() as usize).unwrap_or(NonZeroUsize::MIN);
    let (tx, rx) = credit::channel::<Item>(capacity);
    ingest.stats().component.set_state(State::Running);
    let progress = tokio::spawn(progress_loop(
        connected.client.clone(),
        connected.consumer.clone(),
        Arc::clone(&shared),
    ));
    let appender = tokio::spawn(append_loop(
        Arc::clone(&name),
        config.max_inflight.get(),
        connected.client.clone(),
        config.ack_confirm,
        rx,
        ingest.clone(),
        quarantine,
        Arc::clone(&shared),
        stop.clone(),
    ));
    fetch_loop(&name, &config, &connected, tx, &shared, &ingest, stop).await;
    let _ = appender.await;
    progress.abort();
    let _ = connected.client.flush().await;
    ingest.stats().component.set_state(State::Stopped);
}

/// Sends progress acks for messages waiting longer than half of `ack_wait`, and reads
/// the consumer's info for `/status`; runs until aborted (after the appender ends, so
/// that messages waiting at shutdown keep their progress acks).
async fn progress_loop(client: Client, mut consumer: PullConsumer, shared: Arc<Shared>) {
    let every = Duration::from_millis(shared.ledger().progress_interval_ms());
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_info = tokio::time::Instant::now() - INFO_EVERY;
    loop {
        tick.tick().await;
        let due = shared.ledger().progress_due(now_ms());
        for reply in due {
            if let Err(e) = client.publish(reply, Bytes::from_static(b"+WPI")).await {
                shared.error(format!("progress ack not sent: {e}"));
            }
        }
        if last_info.elapsed() >= INFO_EVERY {
            last_info = tokio::time::Instant::now();
            match tokio::time::timeout(Duration::from_secs(2), consumer.info()).await {
                Ok(Ok(info)) => {
                    let (ack_pending, pending) = (info.num_ack_pending as u64, info.num_pending);
                    let ack_floor = info.ack_floor.stream_sequence;
                    let mut ledger = shared.ledger();
                    ledger.set_ack_floor(ack_floor);
                    let s = ledger.status_mut();
                    s.ack_pending = ack_pending;
                    s.num_pending = pending;
                }
                Ok(Err(e)) => shared.error(format!("consumer info: {e}")),
                Err(_) => shared.error("consumer info: no answer within 2s".to_owned()),
            }
        }
    }
}

pub(super) fn now_ms() -> u64 {
    u64::try_from(crate::record::now_ms()).unwrap_or(0)
}
