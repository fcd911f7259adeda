//! The `nats` source's startup check: connects, refuses more than one subject below
//! nats-server 2.10, creates the durable consumer or binds an existing one (retrying
//! while a cluster has no leader), refuses an ack policy other than `explicit`, checks
//! the consumer's filter, and warns about consumer and stream settings that make
//! instances wait, or let the server drop or duplicate messages.

use std::time::Duration;

use async_nats::Client;
use async_nats::jetstream::consumer::{self, AckPolicy, PullConsumer, pull};

use super::client;
use super::config::{DeliverPolicy, NatsConfig};
use super::core::{check_consumer_filter, version_gate};

/// What the startup check found: a connection, the bound consumer and its settings.
pub struct Connected {
    pub(super) client: Client,
    pub(super) consumer: PullConsumer,
    pub(super) server_version: String,
    pub(super) ack_wait: Duration,
    pub(super) max_ack_pending: i64,
    pub(super) max_deliver: i64,
    pub(super) warnings: Vec<String>,
}

/// Connects and binds the consumer (the startup check).
pub(super) async fn connect(config: &NatsConfig, name: &str) -> Result<Connected, String> {
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

/// Whether the durable consumer is still there, as its info says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ConsumerCheck {
    /// It is (or the server could not say): the fetch error was something else.
    Present,
    /// It was deleted.
    Missing,
    /// Its stream was deleted.
    StreamMissing,
}

/// Reads the consumer's info to tell a deleted consumer from other fetch errors.
pub(super) async fn check(consumer: &mut PullConsumer) -> ConsumerCheck {
    use async_nats::jetstream::context::ConsumerInfoErrorKind;
    match tokio::time::timeout(Duration::from_secs(5), consumer.info()).await {
        Ok(Err(e)) if e.kind() == ConsumerInfoErrorKind::NotFound => ConsumerCheck::Missing,
        Ok(Err(e)) if e.kind() == ConsumerInfoErrorKind::StreamNotFound => {
            ConsumerCheck::StreamMissing
        }
        _ => ConsumerCheck::Present,
    }
}

/// Creates the durable consumer again with the configured settings (it was deleted),
/// delivering from stream sequence `start` when given, else by `deliver_policy`; binds
/// it if another instance created it first.
///
/// # Errors
///
/// What failed: the stream is gone, or the server refused the consumer.
pub(super) async fn recreate(
    client: &Client,
    config: &NatsConfig,
    start: Option<u64>,
) -> Result<PullConsumer, String> {
    let js = async_nats::jetstream::new(client.clone());
    let stream = js
        .get_stream(&config.stream)
        .await
        .map_err(|e| format!("cannot read stream {:?}: {e}", config.stream))?;
    let mut settings = consumer_config(config)?;
    if let Some(start_sequence) = start {
        settings.deliver_policy = consumer::DeliverPolicy::ByStartSequence { start_sequence };
    }
    stream
        .get_or_create_consumer(&config.consumer, settings)
        .await
        .map_err(|e| {
            format!(
                "cannot create consumer {:?} on stream {:?}: {e}",
                config.consumer, config.stream
            )
        })
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
