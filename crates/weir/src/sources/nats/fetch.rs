//! The `nats` source's fetcher: pulls only against the credits the appender granted,
//! at most `fetch_batch` messages at once, and hands each message on as its record (or
//! its quarantine entry when too large); a redelivery already durable in this run is
//! acked at once and not written again.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::watch;
use weir_flow::credit::CreditSender;

use async_nats::Client;
use async_nats::jetstream::consumer::PullConsumer;

use super::append::ack;
use super::config::NatsConfig;
use super::consumer::{Connected, ConsumerCheck, check, recreate};
use super::core::Fetched;
use super::shell::{Shared, now_ms};
use crate::log_window::LogWindow;
use crate::pipeline::ingest::Ingest;
use crate::telemetry::State;

/// How long a fetch waits at the server for messages.
const FETCH_EXPIRES: Duration = Duration::from_secs(1);
/// Silence past `FETCH_EXPIRES` after which a fetch counts as failed: the client ends a
/// fetch the server never answered after `expires` + 5 s, with nothing.
const FETCH_SILENCE: Duration = Duration::from_secs(2);
/// Longest wait between fetch retries after errors, and between attempts to create a
/// deleted consumer again.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// One fetched message on its way to the WAL.
pub(super) struct Item {
    pub(super) seq: u64,
    pub(super) work: Work,
}

pub(super) enum Work {
    /// Its WAL form.
    Append(Vec<u8>),
    /// Larger than `max_message_bytes`: quarantined, then acked.
    Quarantine { payload: Bytes, reason: String },
}

impl Item {
    pub(super) fn bytes(&self) -> u64 {
        match &self.work {
            Work::Append(wire) => wire.len() as u64,
            Work::Quarantine { payload, .. } => payload.len() as u64,
        }
    }
}

/// Fetches only against the demand the appender granted (credits freed by
/// durability), at most `fetch_batch` at once, and hands each message on. A failed
/// fetch is retried with backoff and logged (WARN, at most every 10 s); when the
/// durable consumer turns out deleted, it is created again ([`Recovery`]).
pub(super) async fn fetch_loop(
    name: &str,
    config: &NatsConfig,
    connected: &Connected,
    mut tx: CreditSender<Item>,
    shared: &Shared,
    ingest: &Ingest,
    mut stop: watch::Receiver<bool>,
) {
    let max_message_bytes = config.max_message_bytes.bytes();
    let fetch_batch = u64::from(config.fetch_batch.get());
    let stream: Arc<str> = config.stream.as_str().into();
    let mut recovery = Recovery {
        name,
        config,
        client: &connected.client,
        consumer: connected.consumer.clone(),
        shared,
        ingest,
        failures: 0,
        errors: LogWindow::default(),
    };
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
        let fetch = recovery
            .consumer
            .batch()
            .max_messages(n as usize)
            .expires(FETCH_EXPIRES)
            .messages();
        let mut batch = match fetch.await {
            Ok(b) => b,
            Err(e) => {
                let delay = recovery.failed(format!("fetch failed: {e}")).await;
                tokio::select! {
                    () = crate::pipeline::stopped(&mut stop) => break,
                    () = tokio::time::sleep(delay) => continue,
                }
            }
        };
        shared.ledger().status_mut().fetches += 1;
        let fetched_at = tokio::time::Instant::now();
        let mut answered = false;
        loop {
            let next = tokio::select! {
                biased;
                () = crate::pipeline::stopped(&mut stop) => break 'fetching,
                next = batch.next() => next,
            };
            answered |= next.is_some();
            let message = match next {
                None => break,
                Some(Ok(m)) => m,
                Some(Err(e)) => {
                    let delay = recovery.failed(format!("fetch failed: {e}")).await;
                    tokio::select! {
                        () = crate::pipeline::stopped(&mut stop) => break 'fetching,
                        () = tokio::time::sleep(delay) => break,
                    }
                }
            };
            recovery.succeeded();
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
        // The server answers a fetch within `expires` (messages, or a status saying there
        // are none); silence past that is what a pull to a deleted consumer gets.
        let waited = fetched_at.elapsed();
        if !answered && waited >= FETCH_EXPIRES + FETCH_SILENCE {
            let delay = recovery
                .failed(format!("no answer to a fetch within {waited:.1?}"))
                .await;
            tokio::select! {
                () = crate::pipeline::stopped(&mut stop) => break,
                () = tokio::time::sleep(delay) => {}
            }
        }
        shared
            .credits_available
            .store(tx.demand(), Ordering::Relaxed);
    }
    tx.complete();
}

/// What the fetcher does when fetches fail: retries with backoff, logs at WARN (the
/// first at once, then at most every 10 s with a count), and when the durable consumer
/// was deleted, creates it again with the configured settings, delivering from the
/// message after the last one known durable ([`Ledger::resume_after`]). If that
/// fails (the stream is gone too), the source is `failed` with the cause, logged at
/// ERROR, and it tries again every [`MAX_BACKOFF`].
///
/// [`Ledger::resume_after`]: super::core::Ledger::resume_after
struct Recovery<'a> {
    name: &'a str,
    config: &'a NatsConfig,
    client: &'a Client,
    consumer: PullConsumer,
    shared: &'a Shared,
    ingest: &'a Ingest,
    failures: u32,
    errors: LogWindow,
}

impl Recovery<'_> {
    /// A message arrived: the fetches work (again).
    fn succeeded(&mut self) {
        if self.failures > 0 {
            self.failures = 0;
            self.errors.clear();
        }
    }

    /// A fetch failed with `error`: returns how long to wait before the next.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a consumer created again would be lost (and created again
    /// at the next failure).
    async fn failed(&mut self, error: String) -> Duration {
        self.shared.ledger().status_mut().fetch_errors += 1;
        self.failures = self.failures.saturating_add(1);
        match check(&mut self.consumer).await {
            ConsumerCheck::Present => {
                let delay = backoff(self.failures);
                if let Some(n) = self.errors.note(Instant::now(), 1) {
                    tracing::warn!(
                        source = self.name,
                        "nats: {error} ({n} failed fetches since the last line); retrying in {delay:?}"
                    );
                }
                self.shared.error(error);
                delay
            }
            ConsumerCheck::Missing | ConsumerCheck::StreamMissing => self.recreate().await,
        }
    }

    /// Creates the deleted consumer again: no wait when it worked, else
    /// [`MAX_BACKOFF`] with the source `failed`.
    async fn recreate(&mut self) -> Duration {
        let (config, name) = (self.config, self.name);
        let start = self.shared.ledger().resume_after().map(|seq| seq + 1);
        match recreate(self.client, config, start).await {
            Ok(consumer) => {
                self.consumer = consumer;
                self.failures = 0;
                self.errors.clear();
                self.shared.ledger().status_mut().consumer_recreated += 1;
                let from = start.map_or_else(
                    || {
                        format!(
                            "by deliver_policy {:?} (nothing known durable yet)",
                            config.deliver_policy
                        )
                    },
                    |seq| {
                        format!("from stream sequence {seq}, after the last message known durable")
                    },
                );
                tracing::warn!(
                    source = name,
                    "nats: the durable consumer {:?} on stream {:?} was deleted; created it again with the configured settings, delivering {from}",
                    config.consumer,
                    config.stream
                );
                let component = &self.ingest.stats().component;
                if matches!(component.flow_state(), State::Failed(_)) {
                    component.set_state(State::Running);
                }
                Duration::ZERO
            }
            Err(e) => {
                let message = format!(
                    "the durable consumer {:?} on stream {:?} was deleted and cannot be created again: {e}; retrying every {MAX_BACKOFF:?}",
                    config.consumer, config.stream
                );
                tracing::error!(source = name, "nats: {message}");
                self.shared.error(message.clone());
                self.ingest
                    .stats()
                    .component
                    .set_state(State::Failed(message));
                MAX_BACKOFF
            }
        }
    }
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

fn backoff(failures: u32) -> Duration {
    let ms = 100u64.saturating_mul(1 << failures.min(10));
    Duration::from_millis(ms).min(MAX_BACKOFF)
}
