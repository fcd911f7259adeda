//! The `nats` source's fetcher: pulls only against the credits the appender granted,
//! at most `fetch_batch` messages at once, and hands each message on as its record (or
//! its quarantine entry when too large); a redelivery already durable in this run is
//! acked at once and not written again.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::watch;
use weir_flow::credit::CreditSender;

use super::append::ack;
use super::config::NatsConfig;
use super::consumer::Connected;
use super::core::Fetched;
use super::shell::{Shared, now_ms};

/// How long a fetch waits at the server for messages.
const FETCH_EXPIRES: Duration = Duration::from_secs(1);
/// Longest wait between fetch retries after errors.
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
    Quarantine {
        subject: String,
        payload: Bytes,
        reason: String,
    },
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
/// durability), at most `fetch_batch` at once, and hands each message on.
pub(super) async fn fetch_loop(
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

fn backoff(failures: u32) -> Duration {
    let ms = 100u64.saturating_mul(1 << failures.min(10));
    Duration::from_millis(ms).min(MAX_BACKOFF)
}
