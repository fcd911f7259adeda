//! The `kafka` source's tokio tasks and its librdkafka glue (see the [module docs](super)).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures::FutureExt;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use tokio::sync::{Notify, mpsc, watch};
use weir_flow::Timestamp;
use weir_flow::watermark::Transition;
use weir_wal::Batch;

use super::config::{KafkaConfig, Security, StartFrom};
use super::core::{Core, Gap, KafkaStatus, Partition, UnitTag};
use crate::pipeline::appends::{Event, InFlight, OrderedAppends};
use crate::pipeline::ingest::Ingest;
use crate::pipeline::stats::Detail;
use crate::quarantine::{Quarantine, Rejected};
use crate::sources::{SourceContext, StartSource};
use crate::telemetry::{State, Telemetry};

/// Records per unit handed to the WAL, at most.
const UNIT_RECORDS: usize = 4096;
/// Bytes per unit, about.
const UNIT_BYTES: u64 = 1 << 20;
/// Units handed to the appender and not yet taken.
const HANDOFF_UNITS: usize = 4;
/// Units in the WAL and not yet durable, at most.
const IN_FLIGHT_UNITS: usize = 8;
/// The longest the poll loop waits for a record before it looks at the rest again
/// (commits, watermarks): it polls librdkafka at least this often, paused or not.
const POLL_TICK: Duration = Duration::from_millis(50);
/// How often durable offsets are committed, at most.
const COMMIT_EVERY: Duration = Duration::from_millis(200);
/// How often the partitions' high watermarks are read for the lag.
const LAG_EVERY: Duration = Duration::from_secs(5);
/// How long broker queries (committed offsets, watermarks, the last commit) wait.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long reading one partition's high watermark waits.
const LAG_TIMEOUT: Duration = Duration::from_secs(2);
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

/// The librdkafka configuration weir builds: its own properties, then those passed
/// through (never one weir owns: the config refuses them).
fn client_config(config: &KafkaConfig, name: &str) -> Result<ClientConfig, String> {
    let mut c = ClientConfig::new();
    for (k, v) in &config.properties {
        c.set(k, v);
    }
    let kib = config.prefetch_bytes.bytes().div_ceil(1024).max(1);
    let fetch = config.fetch_max_bytes.bytes();
    c.set("bootstrap.servers", config.brokers.join(","))
        .set("group.id", &config.group_id)
        .set("client.id", format!("weir-{name}"))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set(
            "auto.offset.reset",
            match config.start_from {
                StartFrom::Earliest => "earliest",
                StartFrom::Latest => "latest",
            },
        )
        .set("fetch.max.bytes", fetch.to_string())
        .set("max.partition.fetch.bytes", fetch.to_string())
        .set("queued.max.messages.kbytes", kib.to_string())
        .set("queued.min.messages", "1")
        .set(
            "security.protocol",
            match config.security_protocol {
                Security::Plaintext => "plaintext",
                Security::Ssl => "ssl",
                Security::SaslPlaintext => "sasl_plaintext",
                Security::SaslSsl => "sasl_ssl",
            },
        );
    // librdkafka refuses a fetch.max.bytes below message.max.bytes (1 MB by default).
    if fetch < 1_000_000 && !config.properties.contains_key("message.max.bytes") {
        c.set("message.max.bytes", fetch.to_string());
    }
    if let Some(m) = &config.sasl_mechanism {
        c.set("sasl.mechanism", m);
    }
    if let Some(u) = &config.sasl_username {
        c.set("sasl.username", u);
    }
    if let Some(env) = &config.sasl_password_env {
        let password = std::env::var(env)
            .map_err(|_| format!("sasl_password_env: the variable {env} is not set"))?;
        c.set("sasl.password", password);
    }
    if let Some(ca) = &config.ca_file {
        std::fs::metadata(ca).map_err(|e| format!("ca_file: cannot read {}: {e}", ca.display()))?;
        c.set("ssl.ca.location", ca.display().to_string());
    }
    // librdkafka's `debug` contexts (passed through) are logged at INFO.
    c.set_log_level(if config.properties.contains_key("debug") {
        RDKafkaLogLevel::Debug
    } else {
        RDKafkaLogLevel::Warning
    });
    Ok(c)
}

/// What the tasks, librdkafka's callbacks and `/status` share.
#[derive(Debug)]
pub struct Shared {
    core: Mutex<Core>,
    /// A unit became durable (commits may be due, the watermark may be crossed).
    durable: Notify,
    /// The assignment changed: committed offsets to read.
    assigned: Mutex<Vec<Partition>>,
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

    fn core(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The figures now (for `/status`).
    pub fn status(&self) -> KafkaStatus {
        self.core().status()
    }

    fn error(&self, message: String) {
        self.core().error(message);
    }
}

/// Registers `sources.NAME.held` (bytes fetched and not yet durable against
/// `max_held_bytes`) and the source's metrics.
pub fn register(name: &str, shared: &Arc<Shared>, telemetry: &Telemetry) {
    let s = Arc::clone(shared);
    telemetry.register_queue(&format!("sources.{name}.held"), None, None, move || {
        let m = s.status();
        let mut f = weir_flow::FlowStats::default();
        f.offered = m.fetched;
        f.accepted = m.fetched;
        f.delivered = m.durable;
        f.depth = m.fetched - m.durable.min(m.fetched);
        f.bytes = m.held_bytes;
        f
    });
    type Field = fn(&KafkaStatus) -> u64;
    let counters: [(&str, &str, Field); 5] = [
        ("weir_kafka_fetched_total", "Records fetched.", |s| {
            s.fetched
        }),
        (
            "weir_kafka_rebalances_total",
            "Assignments and revocations.",
            |s| s.rebalances,
        ),
        (
            "weir_kafka_pauses_total",
            "Pauses above the high watermark.",
            |s| s.pauses,
        ),
        ("weir_kafka_gaps_total", "Offset gaps seen.", |s| s.gaps),
        (
            "weir_kafka_gap_offsets_total",
            "Offsets missed by gaps (deleted before they were read).",
            |s| s.gap_offsets,
        ),
    ];
    for (metric, help, field) in counters {
        let s = Arc::clone(shared);
        telemetry.register_counter_fn(metric, help, &[("source", name)], move || {
            field(&s.status())
        });
    }
    let s = Arc::clone(shared);
    #[allow(clippy::cast_precision_loss, reason = "gauges are f64")]
    telemetry.register_gauge_fn(
        "weir_kafka_held_bytes",
        "Bytes fetched and not yet durable.",
        &[("source", name)],
        move || s.status().held_bytes as f64,
    );
}

/// librdkafka's callbacks: rebalances, commits, errors and logs.
struct Context {
    name: Arc<str>,
    shared: Arc<Shared>,
}

impl Context {
    fn new(name: &str, shared: Arc<Shared>) -> Self {
        Context {
            name: name.into(),
            shared,
        }
    }
}

fn partitions(tpl: &TopicPartitionList) -> Vec<Partition> {
    tpl.elements()
        .iter()
        .map(|e| (e.topic().to_owned(), e.partition()))
        .collect()
}

fn offsets_list(offsets: &[(Partition, i64)]) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for ((topic, partition), offset) in offsets {
        let _ = tpl.add_partition_offset(topic, *partition, Offset::Offset(*offset));
    }
    tpl
}

impl ClientContext for Context {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(source = %self.name, "kafka: librdkafka {fac}: {message}");
            }
            RDKafkaLogLevel::Warning => {
                tracing::warn!(source = %self.name, "kafka: librdkafka {fac}: {message}");
            }
            _ => tracing::info!(source = %self.name, "kafka: librdkafka {fac}: {message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        tracing::warn!(source = %self.name, "kafka: {error}: {reason}");
        self.shared.error(format!("{error}: {reason}"));
    }
}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(tpl) => {
                let revoked = partitions(tpl);
                let owed = self.shared.core().revoke(&revoked);
                tracing::info!(source = %self.name, "kafka: {} partitions revoked; committing {} durable offsets first", revoked.len(), owed.len());
                if !owed.is_empty()
                    && let Err(e) = consumer.commit(&offsets_list(&owed), CommitMode::Sync)
                {
                    let message = format!(
                        "commit of durable offsets before a revocation failed: {e}; the new owner reads them again"
                    );
                    tracing::warn!(source = %self.name, "kafka: {message}");
                    self.shared.error(message);
                }
            }
            Rebalance::Error(e) => {
                let message = format!("rebalance failed: {e}");
                tracing::warn!(source = %self.name, "kafka: {message}");
                self.shared.error(message);
            }
            Rebalance::Assign(_) => {}
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            let assigned = partitions(tpl);
            tracing::info!(source = %self.name, "kafka: assigned {} partitions: {assigned:?}", assigned.len());
            self.shared.core().assign(now(), &assigned);
            self.shared
                .assigned
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(assigned);
        }
    }

    fn commit_callback(
        &self,
        result: rdkafka::error::KafkaResult<()>,
        offsets: &TopicPartitionList,
    ) {
        let mut core = self.shared.core();
        match result {
            Ok(()) => {
                for e in offsets.elements() {
                    if let Offset::Offset(o) = e.offset() {
                        core.committed(&(e.topic().to_owned(), e.partition()), o);
                    }
                }
            }
            Err(e) => core.commit_failed(format!("commit failed: {e}")),
        }
    }
}

fn now() -> Timestamp {
    Timestamp::from_millis(u64::try_from(crate::record::now_ms()).unwrap_or(0))
}

/// A unit on its way to the WAL.
struct Unit {
    tag: UnitTag,
    batches: Vec<Batch>,
    /// Records too large for one WAL batch: quarantined before the unit is appended.
    oversize: Vec<Rejected>,
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

/// Polls librdkafka without ever stopping (paused or not), encodes what it fetches
/// into units, hands them to the appender, commits durable offsets, and pauses or
/// resumes the assignment on the watermarks.
async fn poll_loop(
    name: &Arc<str>,
    consumer: &Arc<StreamConsumer<Context>>,
    ingest: &Ingest,
    shared: &Arc<Shared>,
    tx: mpsc::Sender<Unit>,
    mut stop: watch::Receiver<bool>,
) {
    let max_batch_bytes = ingest.max_batch_bytes();
    let mut ready: VecDeque<Unit> = VecDeque::new();
    let mut current = Unit {
        tag: UnitTag::default(),
        batches: Vec::new(),
        oversize: Vec::new(),
    };
    let mut batch = Batch::new();
    let mut scratch = Scratch::default();
    let mut last_commit = Instant::now();
    let mut last_lag = Instant::now();
    let mut committing: Option<tokio::task::JoinHandle<CommitOutcome>> = None;
    let mut lag: Option<tokio::task::JoinHandle<()>> = None;
    let mut committed_read: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        // Hands what is ready to the appender without waiting for it.
        let idle = tx.capacity() > 0;
        if !current.tag.is_empty()
            && (idle
                || current.tag.records as usize >= UNIT_RECORDS
                || current.tag.bytes >= UNIT_BYTES)
        {
            if !batch.is_empty() {
                current
                    .batches
                    .push(std::mem::replace(&mut batch, Batch::new()));
            }
            ready.push_back(std::mem::replace(
                &mut current,
                Unit {
                    tag: UnitTag::default(),
                    batches: Vec::new(),
                    oversize: Vec::new(),
                },
            ));
        }
        while let Some(unit) = ready.pop_front() {
            match tx.try_send(unit) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(unit)) => {
                    ready.push_front(unit);
                    break;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return,
            }
        }
        // Commits run one at a time on a blocking thread (synchronous, so the answer
        // is known here), while the poll loop goes on.
        if committing
            .as_ref()
            .is_some_and(tokio::task::JoinHandle::is_finished)
            && let Some(handle) = committing.take()
        {
            apply_commit(shared, handle.await);
        }
        if committing.is_none() && last_commit.elapsed() >= COMMIT_EVERY {
            last_commit = Instant::now();
            let due = shared.core().commits_due();
            if !due.is_empty() {
                let c = Arc::clone(consumer);
                committing = Some(tokio::task::spawn_blocking(move || {
                    let result = c.commit(&offsets_list(&due), CommitMode::Sync);
                    (due, result)
                }));
            }
        }
        start_read_committed(name, consumer, shared, &mut committed_read);
        // The lag is read in the background: the poll loop never waits for it.
        if last_lag.elapsed() >= LAG_EVERY
            && lag
                .as_ref()
                .is_none_or(tokio::task::JoinHandle::is_finished)
        {
            last_lag = Instant::now();
            lag = Some(tokio::spawn(read_lag(
                Arc::clone(consumer),
                Arc::clone(shared),
            )));
        }
        watermarks(name, consumer, shared);
        // Polls: one record (or the tick), then whatever is already there.
        let first = tokio::select! {
            biased;
            () = crate::pipeline::stopped(&mut stop) => break,
            () = shared.durable.notified() => continue,
            m = tokio::time::timeout(POLL_TICK, consumer.recv()) => m,
        };
        let Ok(first) = first else { continue };
        // One clock read for what this poll takes (it is there already).
        let fetched_at = now();
        let mut next = Some(first);
        let mut taken = 0usize;
        while let Some(m) = next.take() {
            match m {
                Ok(m) => {
                    take(
                        name,
                        shared,
                        &m,
                        &mut current,
                        &mut batch,
                        &mut scratch,
                        max_batch_bytes,
                        fetched_at,
                    );
                }
                Err(e) => {
                    let message = format!("poll: {e}");
                    tracing::warn!(source = %name, "kafka: {message}");
                    shared.error(message);
                }
            }
            taken += 1;
            if taken < UNIT_RECORDS && current.tag.bytes < UNIT_BYTES {
                next = consumer.recv().now_or_never();
            }
        }
    }
    if let Some(handle) = committing.take() {
        apply_commit(shared, handle.await);
    }
    // At shutdown: hand over everything fetched (the appender is still taking).
    if !current.tag.is_empty() {
        if !batch.is_empty() {
            current.batches.push(batch);
        }
        ready.push_back(current);
    }
    for unit in ready {
        if tx.send(unit).await.is_err() {
            break;
        }
    }
}

/// The offsets of one commit and its answer.
type CommitOutcome = (Vec<(Partition, i64)>, rdkafka::error::KafkaResult<()>);

/// Applies a commit's answer to the core.
fn apply_commit(shared: &Shared, outcome: Result<CommitOutcome, tokio::task::JoinError>) {
    let mut core = shared.core();
    match outcome {
        Ok((offsets, Ok(()))) => {
            for (p, o) in offsets {
                core.committed(&p, o);
            }
        }
        Ok((_, Err(e))) => core.commit_failed(format!("commit failed: {e}")),
        Err(e) => core.commit_failed(format!("commit failed: {e}")),
    }
}

/// What the poll loop reuses from record to record: the encoded record, and the key of
/// the last record's partition (a poll's records mostly share one, so their lookups in
/// the core make no new `String`).
#[derive(Default)]
struct Scratch {
    wire: Vec<u8>,
    partition: Partition,
}

impl Scratch {
    /// The partition of `m`, made anew only when it differs from the last one's.
    fn partition_of(&mut self, m: &BorrowedMessage<'_>) -> &Partition {
        if self.partition.1 != m.partition() || self.partition.0 != m.topic() {
            self.partition = (m.topic().to_owned(), m.partition());
        }
        &self.partition
    }
}

/// Encodes one record, fetched at `at`, into the unit being built.
#[allow(
    clippy::too_many_arguments,
    reason = "the poll loop's buffers, passed down"
)]
fn take(
    name: &str,
    shared: &Shared,
    m: &BorrowedMessage<'_>,
    unit: &mut Unit,
    batch: &mut Batch,
    scratch: &mut Scratch,
    max_batch_bytes: u64,
    at: Timestamp,
) {
    let payload = m.payload().unwrap_or_default();
    encode(name, m, payload, &mut scratch.wire);
    let bytes = scratch.wire.len() as u64;
    let partition = scratch.partition_of(m);
    let Some((fetched, gap)) = shared.core().fetched(partition, m.offset(), bytes) else {
        return;
    };
    if let Some(g) = gap {
        warn_gap(name, &g);
    }
    unit.tag.add(&fetched, bytes, at);
    let framed = weir_wal::format::FRAME_HEADER_LEN + bytes;
    if framed > max_batch_bytes {
        unit.oversize.push(Rejected {
            reason: format!(
                "kafka record {}/{} offset {}: {framed} bytes, above the WAL's batch limit ({max_batch_bytes}); lower fetch_max_bytes or raise wal.max_pending_bytes",
                partition.0, partition.1, m.offset()
            ),
            payload: bytes::Bytes::copy_from_slice(payload),
        });
        return;
    }
    if !batch.is_empty() && batch.encoded_len() + framed > max_batch_bytes {
        unit.batches.push(std::mem::replace(batch, Batch::new()));
    }
    if let Err(e) = batch.push(&scratch.wire) {
        shared.error(format!("a record does not fit the WAL: {e}"));
    }
}

/// Says that a partition's offsets `g.from..g.to` were never read.
fn warn_gap(name: &str, g: &Gap) {
    tracing::warn!(
        source = name,
        "kafka: gap in {}/{}: offsets {}..{} ({} records) were not read (deleted by retention, out of range, or skipped by the broker)",
        g.topic,
        g.partition,
        g.from,
        g.to,
        g.to - g.from
    );
}

/// The record of one Kafka record: key = the Kafka key (or the topic), `ts` = its
/// timestamp, attributes `kafka.topic`, `kafka.partition`, `kafka.offset` and each
/// header as `kafka.header.NAME`.
fn encode(name: &str, m: &BorrowedMessage<'_>, payload: &[u8], wire: &mut Vec<u8>) {
    let key = match m.key() {
        Some(k) => String::from_utf8_lossy(k),
        None => std::borrow::Cow::Borrowed(m.topic()),
    };
    let ts = m
        .timestamp()
        .to_millis()
        .unwrap_or_else(crate::record::now_ms);
    let (mut partition, mut offset) = (itoa::Buffer::new(), itoa::Buffer::new());
    let (partition, offset) = (partition.format(m.partition()), offset.format(m.offset()));
    let mut headers: Vec<(String, String)> = Vec::new();
    if let Some(h) = m.headers() {
        for header in h.iter() {
            let value = header
                .value
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            headers.push((format!("kafka.header.{}", header.key), value.into_owned()));
        }
    }
    let fixed = [
        ("kafka.offset", offset),
        ("kafka.partition", partition),
        ("kafka.topic", m.topic()),
    ];
    let attributes = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .chain(fixed.iter().copied());
    wire.clear();
    crate::record::encode_parts(wire, name, &key, ts, attributes, payload);
}

/// Pauses or resumes the assignment when the bytes held cross a watermark.
fn watermarks(name: &str, consumer: &StreamConsumer<Context>, shared: &Shared) {
    let (transition, assignment, held) = {
        let mut core = shared.core();
        let t = core.observe(now());
        (t, core.assignment(), core.held_bytes())
    };
    let Some(t) = transition else { return };
    let tpl = {
        let mut tpl = TopicPartitionList::new();
        for (topic, p) in &assignment {
            tpl.add_partition(topic, *p);
        }
        tpl
    };
    let result = match t {
        Transition::Pause => consumer.pause(&tpl),
        Transition::Resume => consumer.resume(&tpl),
    };
    tracing::debug!(
        source = name,
        "kafka: {t:?} {} partitions at {held} bytes held",
        assignment.len()
    );
    if let Err(e) = result {
        shared.error(format!("{t:?} failed: {e}"));
    }
}

/// Starts reading the group's committed offsets of newly assigned partitions (where
/// their first record should be: a later one is a gap) in the background, unless a
/// read is still running: the poll loop never waits for the broker's answer (it may
/// take seconds during a rebalance, longer than `max.poll.interval.ms`).
fn start_read_committed(
    name: &Arc<str>,
    consumer: &Arc<StreamConsumer<Context>>,
    shared: &Arc<Shared>,
    running: &mut Option<tokio::task::JoinHandle<()>>,
) {
    if running.as_ref().is_some_and(|h| !h.is_finished()) {
        return;
    }
    let mut new: Vec<Partition> = std::mem::take(
        &mut *shared
            .assigned
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    if new.is_empty() {
        return;
    }
    // Assignments made while a read ran may name a partition twice.
    new.sort_unstable();
    new.dedup();
    // Answers apply only to partitions still in this generation.
    let generation = shared.core().generation();
    let mut tpl = TopicPartitionList::new();
    for (topic, p) in &new {
        tpl.add_partition(topic, *p);
    }
    let (name, c, shared) = (Arc::clone(name), Arc::clone(consumer), Arc::clone(shared));
    *running = Some(tokio::spawn(async move {
        match tokio::task::spawn_blocking(move || c.committed_offsets(tpl, QUERY_TIMEOUT)).await {
            Ok(Ok(tpl)) => {
                let mut core = shared.core();
                for e in tpl.elements() {
                    let partition = (e.topic().to_owned(), e.partition());
                    if let Offset::Offset(o) = e.offset()
                        && let Some(g) = core.set_committed(&partition, o, generation)
                    {
                        warn_gap(&name, &g);
                    }
                }
            }
            Ok(Err(e)) => shared.error(format!("reading committed offsets: {e}")),
            Err(e) => shared.error(format!("reading committed offsets: {e}")),
        }
    }));
}

/// Reads the assigned partitions' high watermarks from the brokers (for the lag).
async fn read_lag(consumer: Arc<StreamConsumer<Context>>, shared: Arc<Shared>) {
    let assignment = shared.core().assignment();
    let c = consumer;
    let read = tokio::task::spawn_blocking(move || {
        assignment
            .into_iter()
            .filter_map(|p| {
                let (_, high) = c.fetch_watermarks(&p.0, p.1, LAG_TIMEOUT).ok()?;
                Some((p, high))
            })
            .collect::<Vec<_>>()
    })
    .await;
    if let Ok(highs) = read {
        let mut core = shared.core();
        for (p, high) in highs {
            core.set_high_watermark(&p, high);
        }
    }
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
                    for r in unit.oversize {
                        tracing::warn!(source = %name, "kafka: {}", r.reason);
                        if let Err(e) = quarantine.put_durable(&name, vec![r]).await {
                            tracing::error!(source = %name, "kafka: quarantining a record failed: {e}");
                        }
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
