//! The `mqtt` source's tokio task (see the [module docs](super)).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};
use weir_wal::Batch;

use super::client;
use super::client::{Connection, Event};
use super::config::MqttConfig;
use super::core::{Done, Ledger, LedgerConfig, MqttStatus, Offer, Unit, Work};
use super::status::register;
use super::values::Qos;
use crate::pipeline::appends::{self, InFlight, OrderedAppends};
use crate::pipeline::ingest::Ingest;
use crate::pipeline::stats::Detail;
use crate::quarantine::{Quarantine, QuarantineError, Rejected};
use crate::sources::{SourceContext, StartSource};
use crate::telemetry::{LossLog, Severity, State};

impl StartSource for MqttConfig {
    type Checked = ();

    /// Unset credential variables and a bad `ca_file` fail here, before anything runs.
    async fn check(&self, name: &str) -> anyhow::Result<()> {
        client::build(self).map_err(|e| anyhow::anyhow!("sources.{name}.{e}"))?;
        Ok(())
    }

    fn start(self, (): (), cx: SourceContext) -> impl Future<Output = ()> + Send + 'static {
        let shared = Shared::new(&cx.name, &self);
        register(&cx.name, &shared, &cx.telemetry);
        let detail = Arc::clone(&shared);
        let _ = cx.ingest.stats().detail.set(Detail(Arc::new(move || {
            serde_json::to_value(detail.status()).unwrap_or_default()
        })));
        run(cx.name, self, cx.ingest, cx.quarantine, shared, cx.stop)
    }
}

/// Records per unit appended to the WAL.
pub const UNIT_RECORDS: usize = 1024;
/// Payload bytes per unit (about).
pub const UNIT_BYTES: u64 = 1024 * 1024;
/// Units on their way to durability at once, and their encoded bytes (see
/// [`OrderedAppends`]): unit k+1 is appended while unit k is being fsynced, always in
/// arrival order, so that records reach the WAL in the order they arrived (per-topic
/// order for the sinks) and acks go out in it. A unit takes everything that arrived
/// while the previous ones were on their way, up to [`UNIT_RECORDS`].
pub const IN_FLIGHT: InFlight = InFlight {
    units: 4,
    bytes: 4 * UNIT_BYTES,
};
/// Longest wait between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Wait after the guard dropped the connection, before reconnecting.
const GUARD_BACKOFF: Duration = Duration::from_secs(1);
/// While reading is paused, how often the bounds are checked again besides the
/// appender's wake-ups (a safety net: each completed unit wakes the connection task).
const PAUSE_RECHECK: Duration = Duration::from_millis(100);
/// How long, at shutdown, units still waiting for admission may wait.
const SHUTDOWN_ADMISSION: Duration = Duration::from_secs(5);

/// What the two tasks and `/status` share.
#[derive(Debug)]
pub struct Shared {
    ledger: Mutex<Ledger>,
    /// The connection task wakes the appender: messages are waiting.
    work: Notify,
    /// A unit became durable: its acks are due. Set by the appender, taken by the
    /// connection task, which writes them ([`write_due_acks`]).
    acks_due: AtomicBool,
    /// The appender wakes the connection task: a unit became durable, so its acks are
    /// due (the poll may be waiting for the broker, which waits for them) and a paused
    /// read may go on.
    durable: Notify,
    /// QoS 0 messages dropped because their queue was full, logged rate-limited.
    qos0_drops: LossLog,
    /// What the drop log says about them.
    qos0_reason: String,
}

impl Shared {
    /// The shared state of source `name`.
    pub fn new(name: &Arc<str>, config: &MqttConfig) -> Arc<Self> {
        Arc::new(Shared {
            ledger: Mutex::new(Ledger::new(LedgerConfig {
                source: Arc::clone(name),
                window: u64::from(config.expected_broker_window.get()),
                guard_limit: config.guard_limit(),
                held_max_bytes: config.held_limit_bytes(),
                max_message_bytes: config.max_message_bytes.bytes(),
                qos0_max_bytes: config.qos0_queue_bytes.bytes(),
            })),
            work: Notify::new(),
            qos0_drops: LossLog::new(
                format!("source {name}"),
                "QoS 0 messages dropped",
                Severity::Warn,
            ),
            qos0_reason: format!(
                "the QoS 0 queue is full (qos0_queue_bytes = {}): weir reads faster than the WAL takes them; \
                 raise qos0_queue_bytes, or subscribe with QoS 1 for backpressure instead of drops",
                config.qos0_queue_bytes
            ),
            acks_due: AtomicBool::new(false),
            durable: Notify::new(),
        })
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The counters now (for `/status`).
    pub fn status(&self) -> MqttStatus {
        self.ledger().status()
    }
}

/// Runs the source until `stop` turns true.
///
/// # Cancel safety
///
/// Not meant to be cancelled; stop it through `stop`.
pub async fn run(
    name: Arc<str>,
    config: MqttConfig,
    ingest: Ingest,
    quarantine: Quarantine,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) {
    let connection = match client::build(&config) {
        Ok(connection) => connection,
        Err(e) => {
            let message = format!("sources.{name}.{e}");
            tracing::error!("{message}");
            ingest.stats().component.set_state(State::Failed(message));
            return;
        }
    };
    let (done_tx, done_rx) = watch::channel(false);
    let appender = tokio::spawn(append_loop(
        Arc::clone(&name),
        ingest.clone(),
        quarantine,
        Arc::clone(&shared),
        stop.clone(),
        done_tx,
    ));
    connection_loop(&name, &config, connection, &ingest, &shared, stop, done_rx).await;
    let _ = appender.await;
    ingest.stats().component.set_state(State::Stopped);
}

/// Polls the event loop and writes the acks that fall due: the only awaits in the loop
/// are the poll, the write of acks (and the backoff after an error, when there is no
/// connection to keep alive), except while the ledger holds more than its bounds (a
/// broker sending beyond its window): then reading pauses until the appender makes room
/// ([`pause_reading`]).
async fn connection_loop(
    name: &str,
    config: &MqttConfig,
    mut connection: Connection,
    ingest: &Ingest,
    shared: &Shared,
    mut stop: watch::Receiver<bool>,
    mut appender_done: watch::Receiver<bool>,
) {
    let component = &ingest.stats().component;
    let has_qos2 = config.topics.iter().any(|t| t.qos == Qos::ExactlyOnce);
    let mut failures = 0u32;
    let mut subscribed = false;
    let mut stopping = false;
    loop {
        if let Err(error) = write_due_acks(shared, &mut connection).await {
            tracing::warn!(source = name, "mqtt: {error}; dropped the connection");
        }
        if !stopping && shared.ledger().must_pause() {
            match pause_reading(name, config, &mut connection, shared, &mut stop).await {
                Paused::Resumed => {}
                Paused::Stopping => stopping = true,
                Paused::GuardDropped => {
                    tokio::select! {
                        () = crate::pipeline::stopped(&mut stop) => stopping = true,
                        () = tokio::time::sleep(GUARD_BACKOFF) => {}
                    }
                }
            }
            continue;
        }
        let event = tokio::select! {
            biased;
            () = crate::pipeline::stopped(&mut stop), if !stopping => {
                // Keep polling until the appender has made durable what it holds and
                // its acks are written; take nothing new meanwhile.
                stopping = true;
                continue;
            }
            // Between packets (rumqttc's poll is cancel-safe there): the broker may be
            // waiting for these acks before it sends anything.
            () = shared.durable.notified() => continue,
            _ = appender_done.wait_for(|d| *d), if stopping => break,
            event = connection.poll() => event,
        };
        match event {
            Ok(Event::Connected { session_present }) => {
                failures = 0;
                shared.ledger().on_connect(session_present);
                if session_present && has_qos2 {
                    connection.expect_pubrels();
                }
                // Subscribe on the first connection of this run (the config may have
                // changed since the session was made) and whenever the broker lost it.
                if !subscribed || !session_present {
                    match connection.subscribe(config) {
                        Ok(()) => subscribed = true,
                        Err(e) => tracing::warn!("source {name}: subscribing failed: {e}"),
                    }
                }
                component.set_state(State::Running);
                tracing::info!(
                    source = name,
                    "mqtt: connected to {}:{} (session present: {session_present})",
                    config.url.host,
                    config.url.port
                );
            }
            Ok(Event::Publish(message)) => {
                if stopping {
                    // Not kept: QoS 1/2 is not acked, so the broker redelivers it next
                    // time; QoS 0 is counted as dropped at shutdown.
                    shared.ledger().discard_at_shutdown(&message);
                    continue;
                }
                let offer = shared.ledger().offer(message, now_ms());
                match offer {
                    Offer::Queued | Offer::Oversized | Offer::Duplicate => {
                        shared.work.notify_one();
                    }
                    Offer::Dropped => shared.qos0_drops.note(1, &shared.qos0_reason),
                }
            }
            Ok(Event::SubscriptionRefused(refused)) => {
                let list = refused
                    .iter()
                    .map(|(i, reason)| {
                        let filter = config.topics.get(*i).map_or("?", |t| t.filter.as_str());
                        format!("{filter:?} ({reason})")
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let message = format!(
                    "the broker refused the subscriptions {list}; check the broker's ACL and the filters in sources.{name}.topics"
                );
                tracing::error!(source = name, "mqtt: {message}");
                component.set_state(State::Failed(message));
            }
            Ok(Event::Other) => {}
            Err(error) => {
                if stopping {
                    break;
                }
                failures = failures.saturating_add(1);
                let delay = client::backoff(failures, MAX_BACKOFF);
                {
                    let mut ledger = shared.ledger();
                    if ledger.status().connected {
                        ledger.on_disconnect(Some(error.clone()));
                    } else {
                        ledger.on_connect_error(error.clone());
                    }
                }
                offer_stale(shared, connection.take_stale());
                tracing::warn!(
                    source = name,
                    "mqtt: {error}; reconnecting to {}:{} in {delay:?}",
                    config.url.host,
                    config.url.port
                );
                component.set_state(State::Failed(format!(
                    "disconnected from {}:{} ({error}); reconnecting",
                    config.url.host, config.url.port
                )));
                tokio::select! {
                    () = crate::pipeline::stopped(&mut stop) => stopping = true,
                    () = tokio::time::sleep(delay) => {}
                }
                if stopping {
                    break;
                }
            }
        }
    }
    // The acks of the last units the appender made durable.
    if let Err(error) = write_due_acks(shared, &mut connection).await {
        tracing::info!(
            source = name,
            "mqtt: at shutdown, {error}; the broker redelivers those messages"
        );
    }
}

/// How a pause in reading ended.
enum Paused {
    /// The appender made room: read again.
    Resumed,
    /// Shutdown began.
    Stopping,
    /// No room came within a keepalive, so the connection was dropped (the broker
    /// would have dropped it for want of pings); reconnect after [`GUARD_BACKOFF`].
    GuardDropped,
}

/// Stops reading the socket while the ledger holds more than its bounds: the kernel's
/// receive buffer fills, TCP's window closes and the broker stops sending (its queue,
/// not weir's memory, holds the rest). The acks that fall due meanwhile are still
/// written ([`write_due_acks`]). Pings are not, so when the WAL makes no room within a
/// keepalive (a stalled sink behind a broker that overshot its window), the connection
/// is dropped and counted as a guard disconnect; the broker redelivers what was not
/// acked. While disconnected, the pause has no deadline: there is nothing to keep alive.
async fn pause_reading(
    name: &str,
    config: &MqttConfig,
    connection: &mut Connection,
    shared: &Shared,
    stop: &mut watch::Receiver<bool>,
) -> Paused {
    let deadline = tokio::time::Instant::now() + config.keepalive.get();
    loop {
        // The acks of what became durable free the broker's window and, counted as
        // sent, the ledger's room.
        if let Err(error) = write_due_acks(shared, connection).await {
            tracing::warn!(source = name, "mqtt: {error}; dropped the connection");
        }
        let connected = shared.ledger().connected();
        tokio::select! {
            biased;
            () = crate::pipeline::stopped(stop) => return Paused::Stopping,
            () = shared.durable.notified() => {}
            () = tokio::time::sleep(PAUSE_RECHECK) => {}
            () = tokio::time::sleep_until(deadline), if connected => {
                shared.ledger().guard_disconnect();
                offer_stale(shared, connection.drop_connection());
                let s = shared.status();
                tracing::warn!(
                    source = name,
                    "mqtt: reading paused for {:?} (keepalive) with {} messages unacked and {} \
                     payload bytes not yet durable, above unacked_guard_multiple × \
                     expected_broker_window = {} or expected_broker_window × max_message_bytes \
                     = {}: the broker sends beyond its window and the WAL makes no room; \
                     dropped the connection, reconnecting in {GUARD_BACKOFF:?}. Set \
                     expected_broker_window to the broker's max_inflight_messages",
                    config.keepalive.get(),
                    s.unacked,
                    s.held_bytes,
                    s.guard_limit,
                    s.held_limit_bytes,
                );
                return Paused::GuardDropped;
            }
        }
        if !shared.ledger().must_pause() {
            return Paused::Resumed;
        }
    }
}

/// Writes the acks that fell due since the last call, in arrival order, in one batch
/// ([`Connection::write_acks`]). When writing fails the connection is dropped and the
/// next poll reconnects; the acks are counted as dropped, and the broker redelivers
/// their messages (written to the WAL again: at least once).
async fn write_due_acks(shared: &Shared, connection: &mut Connection) -> Result<(), String> {
    if !shared.acks_due.swap(false, Ordering::AcqRel) {
        return Ok(());
    }
    let acks = shared.ledger().ready_acks(now_ms());
    if acks.is_empty() {
        return Ok(());
    }
    let Err(error) = connection.write_acks(&acks).await else {
        return Ok(());
    };
    {
        let mut ledger = shared.ledger();
        ledger.acks_dropped(acks.len() as u64);
        ledger.on_disconnect(Some(format!("writing acks: {error}")));
    }
    offer_stale(shared, connection.drop_connection());
    Err(format!("writing {} acks failed: {error}", acks.len()))
}

/// Takes the QoS 0 messages read off a connection that is gone (QoS 1/2 ones were
/// discarded: the broker redelivers them).
fn offer_stale(shared: &Shared, messages: Vec<super::core::Message>) {
    if messages.is_empty() {
        return;
    }
    let now = now_ms();
    {
        let mut ledger = shared.ledger();
        for message in messages {
            let _ = ledger.offer(message, now);
        }
    }
    shared.work.notify_one();
}

/// Takes units from the ledger and hands them to the WAL in arrival order with up to
/// [`IN_FLIGHT`] on their way at once; as each becomes durable, tells the connection
/// task that its acks are due.
async fn append_loop(
    name: Arc<str>,
    ingest: Ingest,
    quarantine: Quarantine,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    done: watch::Sender<bool>,
) {
    let max_batch_bytes = ingest.max_batch_bytes();
    let mut appends = OrderedAppends::new(ingest.clone(), IN_FLIGHT);
    let mut stopping = false;
    'run: loop {
        while appends.has_room() {
            let Some(unit) = shared.ledger().take(UNIT_RECORDS, UNIT_BYTES) else {
                break;
            };
            let unit_done = unit.done();
            let deadline = stopping.then(|| Instant::now() + SHUTDOWN_ADMISSION);
            let submitted = match encode(&name, unit, max_batch_bytes, &quarantine).await {
                Ok(batches) => appends
                    .submit(unit_done, batches, deadline)
                    .await
                    .map_err(|(message, _)| message),
                Err(message) => Err(message),
            };
            if let Err(message) = submitted {
                fail(&name, &ingest, &shared, stopping, &[unit_done], &message);
                break 'run;
            }
        }
        if stopping && appends.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            Some(event) = appends.next(), if !appends.is_empty() => match event {
                appends::Event::Durable(unit) => {
                    shared.ledger().complete(&unit);
                    shared.acks_due.store(true, Ordering::Release);
                    shared.durable.notify_one();
                }
                appends::Event::Refused if stopping => {
                    let lost = appends.give_up();
                    fail(&name, &ingest, &shared, true, &lost, "the WAL refused it for room");
                    break;
                }
                appends::Event::Refused => {
                    // on_full = "reject": the acks are withheld and the units tried again
                    // (first, in order); the broker's window holds the rest meanwhile.
                    if let Err((message, lost)) = appends.resubmit(None).await {
                        fail(&name, &ingest, &shared, stopping, &lost, &message);
                        break;
                    }
                }
                appends::Event::Failed(unit, message) => {
                    fail(&name, &ingest, &shared, stopping, &[unit], &message);
                    break;
                }
            },
            () = shared.work.notified(), if !stopping => {}
            () = crate::pipeline::stopped(&mut stop), if !stopping => stopping = true,
        }
    }
    let _ = done.send(true);
}

/// Units that will not become durable: at shutdown (the WAL did not take them in time)
/// QoS 1/2 is not acked, so the broker redelivers it to the next run, and QoS 0 is lost
/// and counted; otherwise the WAL is closed or poisoned: nothing more becomes durable,
/// nothing unacked is acked, and the broker keeps it.
fn fail(
    name: &str,
    ingest: &Ingest,
    shared: &Shared,
    stopping: bool,
    units: &[Done],
    message: &str,
) {
    if stopping {
        let qos0: u64 = units.iter().map(|u| u.qos0_messages).sum();
        let mut ledger = shared.ledger();
        for unit in units {
            ledger.lost_at_shutdown(unit);
        }
        tracing::info!(source = %name, "mqtt: at shutdown, {message}; the broker keeps what was not acked, {qos0} QoS 0 messages are dropped");
    } else {
        tracing::error!(source = %name, "mqtt: {message}");
        ingest
            .stats()
            .component
            .set_state(State::Failed(message.to_owned()));
    }
}

/// Turns a unit into WAL batches, or writes it to the quarantine (fsynced) when it is
/// one message the WAL cannot take. The WAL admits at most `max_batch_bytes`
/// ([`Ingest::max_batch_bytes`]) at once, and a unit may hold more (up to
/// [`UNIT_RECORDS`] records or about [`UNIT_BYTES`] of payload): it is then split in
/// batches below that, appended one after the other, and its acks wait for the last.
async fn encode(
    name: &Arc<str>,
    unit: Unit,
    max_batch_bytes: u64,
    quarantine: &Quarantine,
) -> Result<Vec<Batch>, String> {
    let mut batches = Vec::new();
    let mut batch = Batch::new();
    let mut wire = Vec::new();
    for item in unit.work {
        match item {
            Work::Append(record) => {
                wire.clear();
                record.encode_into(name, &mut wire);
                let framed = weir_wal::format::FRAME_HEADER_LEN + wire.len() as u64;
                if framed > max_batch_bytes {
                    // Payload within max_message_bytes, but with its topic and
                    // attributes too large for one admission: never wedge the window.
                    let reason = format!(
                        "mqtt message on topic {:?}: its record is {framed} bytes with topic and attributes, \
                         above the WAL's batch limit ({max_batch_bytes}: wal.max_pending_bytes, and at most half of wal.max_disk); lower max_message_bytes or raise those",
                        record.topic
                    );
                    quarantine_message(name, quarantine, record.payload, reason)
                        .await?;
                    continue;
                }
                if !batch.is_empty() && batch.encoded_len() + framed > max_batch_bytes {
                    batches.push(std::mem::replace(&mut batch, Batch::new()));
                }
                if let Err(e) = batch.push(&wire) {
                    return Err(format!("a record does not fit the WAL: {e}"));
                }
            }
            Work::Quarantine {
                payload, reason, ..
            } => quarantine_message(name, quarantine, payload, reason).await?,
        }
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    Ok(batches)
}

/// Writes a message the WAL cannot take to the quarantine (fsynced), so that it can be
/// acked. The quarantine logs (rate-limited) and counts what it keeps and what it
/// drops, full or failing; the message is acked either way so the window is never
/// wedged.
async fn quarantine_message(
    name: &Arc<str>,
    quarantine: &Quarantine,
    payload: bytes::Bytes,
    reason: String,
) -> Result<(), String> {
    // On the blocking pool: the message is acked only once it is on disk. The reason
    // names the topic.
    let entry = Rejected { reason, payload };
    match quarantine.put_durable(name, vec![entry]).await {
        Err(QuarantineError::Blocking(e)) => Err(format!("quarantine task failed: {e}")),
        Ok(()) | Err(_) => Ok(()),
    }
}

fn now_ms() -> u64 {
    u64::try_from(crate::record::now_ms()).unwrap_or(0)
}
