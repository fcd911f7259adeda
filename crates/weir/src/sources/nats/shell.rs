//! The `nats` source's tokio tasks (see the [module docs](super)).

use std::num::{NonZeroU64, NonZeroUsize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use async_nats::Client;
use async_nats::jetstream::consumer::{self, AckPolicy, PullConsumer, pull};
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::watch;
use weir_flow::FlowStats;
use weir_flow::credit::{self, CreditReceiver, CreditSender, RecvError, WindowedDemand};
use weir_wal::Batch;

use super::client;
use super::config::{DeliverPolicy, NatsConfig};
use super::core::{Fetched, Ledger, LedgerConfig, NatsStatus, check_consumer_filter, version_gate};
use crate::pipeline::appends::{Event, InFlight, OrderedAppends};
use crate::pipeline::ingest::Ingest;
use crate::pipeline::stats::Detail;
use crate::quarantine::{Quarantine, QuarantineError, Rejected};
use crate::sources::{SourceContext, StartSource};
use crate::telemetry::{State, Telemetry};

/// What the startup check found: a connection, the bound consumer and its settings.
pub struct Connected {
    client: Client,
    consumer: PullConsumer,
    server_version: String,
    ack_wait: Duration,
    max_ack_pending: i64,
    max_deliver: i64,
    warnings: Vec<String>,
}

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
/// [`OrderedAppends`]): unit k+1 is appended while unit k is being fsynced, in stream
/// order (per-subject order for the sinks), and several units share an fsync. Their
/// messages hold credits until acked, so `max_inflight` bounds them too.
pub const IN_FLIGHT: InFlight = InFlight {
    units: 4,
    bytes: 4 * UNIT_BYTES,
};
/// How long a fetch waits at the server for messages.
const FETCH_EXPIRES: Duration = Duration::from_secs(1);
/// Longest wait between fetch retries after errors.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long, at shutdown, units may wait for admission.
const SHUTDOWN_ADMISSION: Duration = Duration::from_secs(5);
/// How often the consumer's info (ack pending, pending) is read for `/status`.
const INFO_EVERY: Duration = Duration::from_secs(1);
/// Durable stream sequences remembered per credit, to recognise redeliveries.
const REMEMBERED_PER_CREDIT: usize = 16;
/// Confirmed acks (`ack_confirm`) in flight at once.
const CONFIRMS_IN_FLIGHT: usize = 64;

/// Connects and binds the consumer (the startup check).
async fn connect(config: &NatsConfig, name: &str) -> Result<Connected, String> {
    let client = client::connect(config, name).await?;
    let server_version = client.server_info().version;
    version_gate(&server_version, &config.subjects)?;
    let js = async_nats::jetstream::new(client.clone());
    // A cluster that just lost a node answers JetStream requests only once it has a
    // leader again: retry what times out for a while.
    let (duplicate_window, consumer, info) = retry_unavailable(|| bind(&js, config)).await?;
    let c = &info.config;
    if c.ack_policy != AckPolicy::Explicit {
        return Err(format!(
            "consumer: {:?} has ack policy {:?}; weir acks each message once it is durable and needs \
             ack_policy = explicit: delete the consumer so that weir creates it, or use another name",
            config.consumer, c.ack_policy
        ));
    }
    check_consumer_filter(&config.subjects, &c.filter_subject, &c.filter_subjects)?;
    let mut warnings = Vec::new();
    let needed = i64::from(config.max_inflight.get()) * i64::from(config.instances.get());
    if c.max_ack_pending >= 0 && c.max_ack_pending < needed {
        warnings.push(format!(
            "the consumer's max_ack_pending {} is below max_inflight {} × instances {}: instances wait for each other's acks",
            c.max_ack_pending, config.max_inflight, config.instances
        ));
    }
    if c.max_deliver > 0 {
        warnings.push(format!(
            "the consumer's max_deliver is {}: a message redelivered that often (a long outage of the WAL's disk) is dropped by the server",
            c.max_deliver
        ));
    }
    if duplicate_window < c.ack_wait {
        warnings.push(format!(
            "the stream's duplicate window ({:?}) is shorter than the consumer's ack_wait ({:?}): a publisher retrying after a redelivery is not deduplicated",
            duplicate_window, c.ack_wait
        ));
    }
    for w in &warnings {
        tracing::warn!(source = name, "nats: {w}");
    }
    Ok(Connected {
        client,
        server_version,
        ack_wait: c.ack_wait,
        max_ack_pending: c.max_ack_pending,
        max_deliver: c.max_deliver,
        consumer,
        warnings,
    })
}

/// Reads the stream's duplicate window, creates or binds the consumer, reads its info.
async fn bind(
    js: &async_nats::jetstream::Context,
    config: &NatsConfig,
) -> Result<(Duration, PullConsumer, consumer::Info), String> {
    let mut stream = js
        .get_stream(&config.stream)
        .await
        .map_err(|e| format!("stream: cannot read stream {:?}: {e}", config.stream))?;
    let duplicate_window = stream
        .info()
        .await
        .map_err(|e| format!("stream: cannot read stream {:?}: {e}", config.stream))?
        .config
        .duplicate_window;
    let mut consumer: PullConsumer = stream
        .get_or_create_consumer(&config.consumer, consumer_config(config)?)
        .await
        .map_err(|e| {
            format!(
                "consumer: cannot create or bind consumer {:?} on stream {:?}: {e}",
                config.consumer, config.stream
            )
        })?;
    let info = consumer
        .info()
        .await
        .map_err(|e| format!("consumer: cannot read consumer {:?}: {e}", config.consumer))?
        .clone();
    Ok((duplicate_window, consumer, info))
}

/// How long the startup check retries JetStream requests that time out or find no
/// leader (a cluster electing one after losing a node).
const BIND_PATIENCE: Duration = Duration::from_secs(30);

/// Runs `attempt` until it succeeds, fails for another reason than an unavailable
/// server, or [`BIND_PATIENCE`] has passed.
async fn retry_unavailable<T, F, Fut>(mut attempt: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + BIND_PATIENCE;
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) if tokio::time::Instant::now() < deadline && is_unavailable(&e) => {
                tracing::info!("nats: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether an error says the server is (for now) unable to answer, not that the
/// request is wrong.
fn is_unavailable(e: &str) -> bool {
    let e = e.to_ascii_lowercase();
    [
        "timed out",
        "no responders",
        "unavailable",
        "no suitable peers",
        "leader",
        "insufficient resources",
    ]
    .iter()
    .any(|m| e.contains(m))
}

/// The consumer weir creates when it does not exist.
fn consumer_config(config: &NatsConfig) -> Result<pull::Config, String> {
    let deliver_policy = match config.deliver_policy {
        DeliverPolicy::All => consumer::DeliverPolicy::All,
        DeliverPolicy::New => consumer::DeliverPolicy::New,
        DeliverPolicy::ByStartTime => {
            let text = config.start_time.as_deref().unwrap_or_default();
            let at = humantime::parse_rfc3339_weak(text)
                .map_err(|e| format!("start_time: {text:?}: {e}"))?;
            consumer::DeliverPolicy::ByStartTime {
                start_time: time::OffsetDateTime::from(at),
            }
        }
    };
    let (filter_subject, filter_subjects) = match config.subjects.as_slice() {
        [] => (String::new(), Vec::new()),
        [one] => (one.clone(), Vec::new()),
        many => (String::new(), many.to_vec()),
    };
    Ok(pull::Config {
        durable_name: Some(config.consumer.clone()),
        ack_policy: AckPolicy::Explicit,
        ack_wait: config.ack_wait.get(),
        max_ack_pending: i64::from(config.max_ack_pending.get()),
        deliver_policy,
        filter_subject,
        filter_subjects,
        ..pull::Config::default()
    })
}

/// What the tasks and `/status` share.
#[derive(Debug)]
pub struct Shared {
    ledger: Mutex<Ledger>,
    credits_available: AtomicU64,
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

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The counters now (for `/status`).
    pub fn status(&self) -> NatsStatus {
        let mut s = self.ledger().status();
        s.credits_available = self.credits_available.load(Ordering::Relaxed);
        s
    }

    fn error(&self, message: String) {
        self.ledger().status_mut().last_error = Some(message);
    }
}

/// Registers `sources.NAME.credits` (messages fetched and not yet durable against
/// `max_inflight`) and the source's metrics.
pub fn register(name: &str, shared: &Arc<Shared>, telemetry: &Telemetry) {
    let s = Arc::clone(shared);
    let max = s.status().max_inflight;
    telemetry.register_queue(
        &format!("sources.{name}.credits"),
        Some(max),
        None,
        move || {
            let m = s.status();
            let mut f = FlowStats::default();
            f.offered = m.fetched;
            f.accepted = m.fetched;
            f.delivered = m.fetched - m.credits_outstanding;
            f.depth = m.credits_outstanding;
            f
        },
    );
    type Field = fn(&NatsStatus) -> u64;
    let counters: [(&str, &str, Field); 5] = [
        (
            "weir_nats_fetched_total",
            "Messages fetched from JetStream.",
            |s| s.fetched,
        ),
        (
            "weir_nats_redelivered_total",
            "Messages JetStream delivered more than once.",
            |s| s.redelivered,
        ),
        ("weir_nats_acks_total", "Acks sent once durable.", |s| {
            s.acked
        }),
        (
            "weir_nats_progress_acks_total",
            "Progress acks (+WPI) sent for messages waiting for the WAL.",
            |s| s.progress_acks,
        ),
        (
            "weir_nats_duplicates_acked_total",
            "Redeliveries already durable in this run, acked without writing.",
            |s| s.duplicates_acked,
        ),
    ];
    for (metric, help, field) in counters {
        let s = Arc::clone(shared);
        telemetry.register_counter_fn(metric, help, &[("source", name)], move || {
            field(&s.status())
        });
    }
    let gauges: [(&str, &str, Field); 3] = [
        (
            "weir_nats_credits_outstanding",
            "Messages fetched and not yet durable.",
            |s| s.credits_outstanding,
        ),
        (
            "weir_nats_units_in_flight",
            "Units appended to the WAL and not yet durable.",
            |s| s.units_in_flight,
        ),
        (
            "weir_nats_ack_pending",
            "The consumer's ack-pending count as the server reports it.",
            |s| s.ack_pending,
        ),
    ];
    for (metric, help, field) in gauges {
        let s = Arc::clone(shared);
        #[allow(clippy::cast_precision_loss, reason = "gauges are f64")]
        telemetry.register_gauge_fn(metric, help, &[("source", name)], move || {
            field(&s.status()) as f64
        });
    }
}

/// One fetched message on its way to the WAL.
struct Item {
    seq: u64,
    work: Work,
}

enum Work {
    /// Its WAL form.
    Append(Vec<u8>),
    /// Larger than `max_message_bytes`: quarantined, then acked.
    Quarantine {
        subject: String,
        payload: Bytes,
        reason: String,
    },
}

impl Item {
    fn bytes(&self) -> u64 {
        match &self.work {
            Work::Append(wire) => wire.len() as u64,
            Work::Quarantine { payload, .. } => payload.len() as u64,
        }
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
    fetch_loop(&name, &config, &connected, tx, &shared, stop).await;
    let _ = appender.await;
    progress.abort();
    let _ = connected.client.flush().await;
    ingest.stats().component.set_state(State::Stopped);
}

/// Fetches only against the demand the appender granted (credits freed by
/// durability), at most `fetch_batch` at once, and hands each message on.
async fn fetch_loop(
    name: &str,
    config: &NatsConfig,
    connected: &Connected,
    mut tx: CreditSender<Item>,
    shared: &Shared,
    mut stop: watch::Receiver<bool>,
) {
    let max_message_bytes = config.max_message_bytes.bytes();
    let fetch_batch = u64::from(config.fetch_batch.get());
    let stream: Arc<str> = config.stream.as_str().into();
    let mut failures = 0u32;
    'fetching: loop {
        let demand = tokio::select! {
            biased;
            () = crate::pipeline::stopped(&mut stop) => break,
            demand = tx.ready() => match demand {
                Ok(d) => d,
                Err(_) => break,
            },
        };
        shared.credits_available.store(demand, Ordering::Relaxed);
        let n = demand.min(fetch_batch);
        let fetch = connected
            .consumer
            .batch()
            .max_messages(n as usize)
            .expires(FETCH_EXPIRES)
            .messages();
        let mut batch = match fetch.await {
            Ok(b) => b,
            Err(e) => {
                failures = failures.saturating_add(1);
                let delay = backoff(failures);
                let message = format!("fetch failed: {e}; retrying in {delay:?}");
                tracing::warn!(source = name, "nats: {message}");
                shared.error(message);
                tokio::select! {
                    () = crate::pipeline::stopped(&mut stop) => break,
                    () = tokio::time::sleep(delay) => continue,
                }
            }
        };
        shared.ledger().status_mut().fetches += 1;
        loop {
            let next = tokio::select! {
                biased;
                () = crate::pipeline::stopped(&mut stop) => break 'fetching,
                next = batch.next() => next,
            };
            let message = match next {
                None => break,
                Some(Ok(m)) => m,
                Some(Err(e)) => {
                    failures = failures.saturating_add(1);
                    let message = format!("fetch failed: {e}");
                    tracing::debug!(source = name, "nats: {message}");
                    shared.error(message);
                    tokio::time::sleep(backoff(failures)).await;
                    break;
                }
            };
            failures = 0;
            let Some(reply) = message.reply.as_ref().map(|r| r.as_str().to_owned()) else {
                continue;
            };
            let Ok(info) = message.info() else {
                continue;
            };
            let seq = info.stream_sequence;
            let delivered = u64::try_from(info.delivered).unwrap_or(1);
            let fetched = shared.ledger().fetched(seq, delivered, reply, now_ms());
            match fetched {
                Fetched::New => {}
                Fetched::AlreadyPending => continue,
                Fetched::AlreadyDurable(reply) => {
                    ack(&connected.client, shared, reply, false).await;
                    continue;
                }
            }
            let item = encode(
                name,
                &stream,
                seq,
                delivered > 1,
                &message,
                max_message_bytes,
            );
            if let Err(e) = tx.send(item).await {
                drop(e);
                break 'fetching;
            }
        }
        shared
            .credits_available
            .store(tx.demand(), Ordering::Relaxed);
    }
    tx.complete();
}

/// The record of one message (key = subject; `nats.*` attributes, headers as
/// `nats.header.NAME`), or its quarantine entry when too large.
fn encode(
    name: &str,
    stream: &str,
    seq: u64,
    redelivered: bool,
    message: &async_nats::jetstream::Message,
    max_message_bytes: u64,
) -> Item {
    let subject = message.subject.as_str();
    if message.payload.len() as u64 > max_message_bytes {
        return Item {
            seq,
            work: Work::Quarantine {
                subject: subject.to_owned(),
                payload: message.payload.clone(),
                reason: format!(
                    "nats message on {subject:?} (stream sequence {seq}): {} bytes, above max_message_bytes ({max_message_bytes})",
                    message.payload.len()
                ),
            },
        };
    }
    let seq_text = seq.to_string();
    let mut headers: Vec<(String, &str)> = Vec::new();
    if let Some(h) = &message.headers {
        for (k, values) in h.iter() {
            if let Some(v) = values.first() {
                headers.push((format!("nats.header.{}", k.as_ref() as &str), v.as_str()));
            }
        }
        headers.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    }
    let fixed = [
        (
            "nats.redelivered",
            if redelivered { "true" } else { "false" },
        ),
        ("nats.seq", seq_text.as_str()),
        ("nats.stream", stream),
        ("nats.subject", subject),
    ];
    let attributes = headers
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .chain(fixed.iter().copied());
    let mut wire = Vec::with_capacity(message.payload.len() + 2 * subject.len() + 160);
    crate::record::encode_parts(
        &mut wire,
        name,
        subject,
        crate::record::now_ms(),
        attributes,
        &message.payload,
    );
    Item {
        seq,
        work: Work::Append(wire),
    }
}

/// Takes the fetched messages in stream order as units, keeps up to [`IN_FLIGHT`] of
/// them on their way to the WAL at once (unit k+1 is appended while unit k is being
/// fsynced, in stream order, through [`OrderedAppends`]), acks each unit's messages once
/// it is durable, and grants the fetch loop new credits as they are acked.
#[allow(clippy::too_many_arguments, reason = "the task's parts, passed once")]
async fn append_loop(
    name: Arc<str>,
    max_inflight: u32,
    client: Client,
    ack_confirm: bool,
    mut rx: CreditReceiver<Item>,
    ingest: Ingest,
    quarantine: Quarantine,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) {
    let mut window = WindowedDemand::new(NonZeroU64::from(
        std::num::NonZeroU32::new(max_inflight).unwrap_or(std::num::NonZeroU32::MIN),
    ));
    if let Some(n) = window.top_up() {
        let _ = rx.request(n.get());
    }
    let mut appends: OrderedAppends<Vec<u64>> = OrderedAppends::new(ingest.clone(), IN_FLIGHT);
    let mut open = true;
    let failure = loop {
        let stopping = *stop.borrow();
        let deadline = stopping.then(|| Instant::now() + SHUTDOWN_ADMISSION);
        tokio::select! {
            biased;
            event = appends.next(), if !appends.is_empty() => match event {
                Some(Event::Durable(seqs)) => {
                    let replies = {
                        let mut ledger = shared.ledger();
                        ledger.status_mut().units_in_flight = appends.in_flight().0 as u64;
                        ledger.durable(&seqs)
                    };
                    if ack_confirm {
                        futures::stream::iter(replies)
                            .for_each_concurrent(CONFIRMS_IN_FLIGHT, |reply| {
                                ack(&client, &shared, reply, true)
                            })
                            .await;
                    } else {
                        for reply in replies {
                            ack(&client, &shared, reply, false).await;
                        }
                    }
                    for _ in &seqs {
                        window.finished();
                    }
                    if let Some(n) = window.top_up() {
                        let _ = rx.request(n.get());
                    }
                }
                // on_full = "reject": nothing is acked meanwhile (no credit is freed, so
                // nothing more is fetched); the units go again, first, in their order.
                Some(Event::Refused) => {
                    if let Err((message, _)) = appends.resubmit(deadline).await {
                        break Some(message);
                    }
                }
                Some(Event::Failed(_, message)) => break Some(message),
                None => {}
            },
            first = rx.recv(), if open && appends.has_room() => match first {
                Ok(first) => {
                    let mut items = vec![first];
                    let mut bytes = items[0].bytes();
                    while items.len() < UNIT_RECORDS && bytes < UNIT_BYTES {
                        match rx.try_recv() {
                            Ok(item) => {
                                bytes += item.bytes();
                                items.push(item);
                            }
                            Err(_) => break,
                        }
                    }
                    let seqs: Vec<u64> = items.iter().map(|i| i.seq).collect();
                    let batches = match into_batches(&name, items, &ingest, &quarantine, &shared).await {
                        Ok(batches) => batches,
                        Err(message) => break Some(message),
                    };
                    if let Err((message, _)) = appends.submit(seqs, batches, deadline).await {
                        break Some(message);
                    }
                    let mut ledger = shared.ledger();
                    let s = ledger.status_mut();
                    s.units_in_flight = appends.in_flight().0 as u64;
                    s.max_units_in_flight = s.max_units_in_flight.max(s.units_in_flight);
                }
                Err(RecvError::Completed | RecvError::Cancelled | RecvError::Disconnected) => {
                    open = false;
                }
                Err(e) => {
                    tracing::error!(source = %name, "nats: credit channel failed: {e}");
                    open = false;
                }
            },
            else => break None,
        }
    };
    if let Some(message) = failure {
        // Nothing more is acked: the server redelivers what was not, after ack_wait.
        shared.ledger().abandon_all();
        if *stop.borrow() {
            tracing::info!(source = %name, "nats: at shutdown, {message}; the server redelivers what was not acked");
        } else {
            tracing::error!(source = %name, "nats: {message}; nothing more is acked, the server keeps it");
            shared.error(message.clone());
            ingest.stats().component.set_state(State::Failed(message));
        }
    }
    // Whatever is still buffered was fetched but not made durable: the server
    // redelivers it after ack_wait.
    let mut left = Vec::new();
    while let Ok(item) = rx.try_recv() {
        left.push(item.seq);
    }
    shared.ledger().abandon(&left);
}

/// Sends `+ACK` to `reply` (waiting for the server's confirmation with `confirm`).
async fn ack(client: &Client, shared: &Shared, reply: String, confirm: bool) {
    let result = if confirm {
        match tokio::time::timeout(
            Duration::from_secs(5),
            client.request(reply, Bytes::from_static(b"+ACK")),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("ack not confirmed: {e}")),
            Err(_) => Err("ack not confirmed within 5s".to_owned()),
        }
    } else {
        client
            .publish(reply, Bytes::from_static(b"+ACK"))
            .await
            .map_err(|e| format!("ack not sent: {e}"))
    };
    let mut ledger = shared.ledger();
    let s = ledger.status_mut();
    match result {
        Ok(()) => s.acked += 1,
        Err(e) => {
            s.ack_errors += 1;
            s.last_error = Some(e);
        }
    }
}

/// Turns one unit into WAL batches (split below the WAL's batch limit), in stream
/// order; a message the WAL cannot take is written to the quarantine (fsynced) now, and
/// acked with its unit.
async fn into_batches(
    name: &Arc<str>,
    items: Vec<Item>,
    ingest: &Ingest,
    quarantine: &Quarantine,
    shared: &Shared,
) -> Result<Vec<Batch>, String> {
    let max_batch_bytes = ingest.max_batch_bytes();
    let mut batches = Vec::new();
    let mut batch = Batch::new();
    for item in items {
        match item.work {
            Work::Append(wire) => {
                let framed = weir_wal::format::FRAME_HEADER_LEN + wire.len() as u64;
                if framed > max_batch_bytes {
                    let reason = format!(
                        "nats message (stream sequence {}): its record is {framed} bytes, above the WAL's batch limit ({max_batch_bytes}); lower max_message_bytes or raise wal.max_pending_bytes",
                        item.seq
                    );
                    put_quarantine(name, quarantine, shared, Bytes::from(wire), reason).await?;
                    continue;
                }
                if !batch.is_empty() && batch.encoded_len() + framed > max_batch_bytes {
                    batches.push(std::mem::replace(&mut batch, Batch::new()));
                }
                batch
                    .push(&wire)
                    .map_err(|e| format!("a record does not fit the WAL: {e}"))?;
            }
            Work::Quarantine {
                subject,
                payload,
                reason,
            } => {
                tracing::warn!(source = %name, "nats: quarantining a message on {subject:?}");
                put_quarantine(name, quarantine, shared, payload, reason).await?;
            }
        }
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    Ok(batches)
}

async fn put_quarantine(
    name: &Arc<str>,
    quarantine: &Quarantine,
    shared: &Shared,
    payload: Bytes,
    reason: String,
) -> Result<(), String> {
    shared.ledger().status_mut().quarantined += 1;
    match quarantine
        .put_durable(name, vec![Rejected { reason, payload }])
        .await
    {
        Ok(()) => Ok(()),
        Err(QuarantineError::Blocking(e)) => Err(format!("quarantine task failed: {e}")),
        Err(e) => {
            tracing::error!(source = %name, "nats: quarantining a message failed, acked anyway: {e}");
            Ok(())
        }
    }
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
                    let mut ledger = shared.ledger();
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

fn backoff(failures: u32) -> Duration {
    let ms = 100u64.saturating_mul(1 << failures.min(10));
    Duration::from_millis(ms).min(MAX_BACKOFF)
}

fn now_ms() -> u64 {
    u64::try_from(crate::record::now_ms()).unwrap_or(0)
}
