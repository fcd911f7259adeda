//! The running `nats` sink (see the [module docs](super)).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_nats::jetstream::context::{PublishAckFuture, PublishError};
use async_nats::jetstream::publish::PublishAck as PubAck;
use async_nats::jetstream::{self, Context};
use async_nats::{ConnectOptions, Event, HeaderMap};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;

use super::config::NatsSinkConfig;
use super::core::{SubjectTemplate, header_name, header_value, msg_id};
use super::window::{AckWindow, Exhausted, Failed, SendId};
use crate::pipeline::{Sink, SinkBatch, SinkError, Unencodable, Written};
use crate::record::EncodeError;
use crate::record::Record;
use crate::sinks::{OpenSink, SinkContext};

/// The sink's counters for `/status` (`sinks.NAME.nats`).
#[derive(Debug, Default)]
pub struct NatsSinkStats {
    published: AtomicU64,
    duplicates: AtomicU64,
    retries: AtomicU64,
    errors: AtomicU64,
    in_flight: AtomicU64,
    max_inflight: u64,
    last_error: Mutex<Option<String>>,
}

/// What `/status` shows.
#[derive(Debug, Serialize)]
pub struct NatsSinkStatus {
    /// Records whose PubAck came back.
    pub published: u64,
    /// Of those, PubAcks that said duplicate (a replay the server deduplicated).
    pub duplicates: u64,
    /// Publishes sent again after an error or a timeout.
    pub retries: u64,
    /// PubAck errors and timeouts.
    pub errors: u64,
    /// Publishes awaiting their PubAck now.
    pub in_flight: u64,
    /// At most.
    pub max_inflight: u64,
    /// The last error.
    pub last_error: Option<String>,
}

impl NatsSinkStats {
    fn status(&self) -> NatsSinkStatus {
        NatsSinkStatus {
            published: self.published.load(Ordering::Relaxed),
            duplicates: self.duplicates.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            max_inflight: self.max_inflight,
            last_error: self
                .last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }

    fn error(&self, message: String) {
        self.errors_n(1, message);
    }

    fn errors_n(&self, n: u64, message: String) {
        self.errors.fetch_add(n, Ordering::Relaxed);
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(message);
    }
}

/// Publishes records to JetStream, at most `max_inflight` awaiting their PubAck.
pub struct NatsSink {
    config: NatsSinkConfig,
    name: String,
    wal_id: String,
    template: SubjectTemplate,
    js: Option<Context>,
    stats: Arc<NatsSinkStats>,
    subject: String,
    /// Bumped each time the client reconnects after losing its connection.
    connects: watch::Receiver<u64>,
}

impl std::fmt::Debug for NatsSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsSink")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl OpenSink for NatsSinkConfig {
    type Sink = NatsSink;

    fn healthcheck(
        &self,
        name: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), String>> + Send {
        self.find_stream(name, timeout)
    }

    fn open(&self, name: &str, cx: &SinkContext) -> Result<NatsSink, SinkError> {
        let template = SubjectTemplate::parse(&self.subject)
            .map_err(|e| SinkError::Permanent(format!("subject: {e}")))?;
        let stats = Arc::new(NatsSinkStats {
            max_inflight: u64::from(self.max_inflight.get()),
            ..NatsSinkStats::default()
        });
        let detail = Arc::clone(&stats);
        let _ = cx.detail.set(crate::pipeline::Detail(Arc::new(move || {
            serde_json::to_value(detail.status()).unwrap_or_default()
        })));
        Ok(NatsSink {
            config: self.clone(),
            name: name.to_owned(),
            wal_id: cx.wal.id().to_owned(),
            template,
            js: None,
            stats,
            subject: String::new(),
            connects: watch::channel(0).1,
        })
    }
}

impl NatsSink {
    /// The JetStream context, connecting on first use (and after it was dropped).
    async fn context(&mut self) -> Result<Context, SinkError> {
        if let Some(js) = &self.js {
            return Ok(js.clone());
        }
        let (reconnected, connects) = watch::channel(0u64);
        let options = self
            .options(reconnected)
            .await
            .map_err(SinkError::Permanent)?;
        let addrs = self
            .config
            .url
            .iter()
            .map(|u| u.parse::<async_nats::ServerAddr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SinkError::Permanent(format!("url: {e}")))?;
        let client = tokio::time::timeout(Duration::from_secs(10), options.connect(addrs))
            .await
            .map_err(|_| self.transient("connecting: no answer within 10s".to_owned()))?
            .map_err(|e| self.transient(format!("connecting: {e}")))?;
        let ack_timeout = self.config.ack_timeout.get();
        // PubAcks of publishes sent again stay awaited until their own timeout: room
        // for a few windows of them.
        let max_ack_inflight = (self.config.max_inflight.get() as usize).saturating_mul(4);
        let js = jetstream::ContextBuilder::new()
            .timeout(ack_timeout)
            .ack_timeout(ack_timeout)
            .max_ack_inflight(max_ack_inflight.max(5000))
            .build(client);
        self.js = Some(js.clone());
        self.connects = connects;
        Ok(js)
    }

    /// The connect options; `reconnected` is bumped each time the connection comes
    /// back after it was lost.
    async fn options(&self, reconnected: watch::Sender<u64>) -> Result<ConnectOptions, String> {
        let c = &self.config;
        let o = credentials(c).await?;
        let lost = Arc::new(AtomicBool::new(false));
        let reconnected = Arc::new(reconnected);
        let ack_timeout = c.ack_timeout.get();
        Ok(o.name(format!("weir-sink-{}", self.name))
            .connection_timeout(Duration::from_secs(5))
            .max_reconnects(None)
            .reconnect_delay_callback(move |attempts| reconnect_delay(attempts, ack_timeout))
            .event_callback(move |event| {
                match event {
                    Event::Disconnected => lost.store(true, Ordering::Relaxed),
                    Event::Connected if lost.swap(false, Ordering::Relaxed) => {
                        reconnected.send_modify(|n| *n += 1);
                    }
                    _ => {}
                }
                std::future::ready(())
            }))
    }

    fn transient(&self, message: String) -> SinkError {
        self.stats.error(message.clone());
        SinkError::Io {
            action: "publishing to",
            path: self.config.url.join(",").into(),
            source: std::io::Error::other(message),
        }
    }

    /// What is published for `record`: its payload, or the object of its `fields`.
    ///
    /// # Errors
    ///
    /// [`EncodeError::NotObject`] when `fields` cannot project the payload.
    fn body(&self, record: &Record) -> Result<bytes::Bytes, EncodeError> {
        let Some(fields) = &self.config.fields else {
            return Ok(record.payload.clone());
        };
        let mut out = Vec::with_capacity(record.payload.len());
        record.write_line(&crate::record::Line::Fields(fields.clone()), &mut out)?;
        out.pop(); // the newline
        Ok(bytes::Bytes::from(out))
    }

    /// Publishes `batch` with at most `max_inflight` PubAcks outstanding, each with a
    /// deadline from when it was sent ([`AckWindow`]), and returns once every record's
    /// PubAck came back. Publishes due again (a timeout, or the backoff after an error)
    /// and every unsettled one after a reconnection are sent again with the same
    /// `Nats-Msg-Id`.
    async fn publish_all(
        &mut self,
        js: &Context,
        batch: &SinkBatch,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<(), SinkError> {
        let max = self.config.max_inflight.get() as usize;
        let ack_timeout_ms =
            u64::try_from(self.config.ack_timeout.get().as_millis()).unwrap_or(u64::MAX);
        let mut window = AckWindow::new(ack_timeout_ms, self.config.retries);
        let mut acks = PubAcks::new();
        let mut connects = self.connects.clone();
        connects.mark_unchanged();
        let started = Instant::now();
        let now_ms = || u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut next = 0;
        loop {
            while next < batch.records.len() && window.len() < max {
                let index = next;
                next += 1;
                let record = &batch.records[index];
                let body = match self.body(record) {
                    Ok(body) => body,
                    Err(reason) => {
                        rejects.push(Unencodable {
                            record: record.clone(),
                            reason,
                        });
                        continue;
                    }
                };
                let ack = self.send(js, batch, index, body).await?;
                let send = window.sent(index, now_ms());
                acks.push(pub_ack(index, send, ack));
            }
            self.stats
                .in_flight
                .store(window.len() as u64, Ordering::Relaxed);
            if window.is_empty() && next >= batch.records.len() {
                return Ok(());
            }
            let due_at = window
                .next_due_ms()
                .map_or(started + Duration::from_secs(3600), |ms| {
                    started + Duration::from_millis(ms)
                });
            tokio::select! {
                Some((index, send, result)) = acks.next() => match result {
                    Ok(pub_ack) => {
                        if window.acked(index) {
                            self.stats.published.fetch_add(1, Ordering::Relaxed);
                            if pub_ack.duplicate {
                                self.stats.duplicates.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    Err(e) => {
                        let offset = batch.positions[index].offset;
                        match window.failed(index, send, now_ms()) {
                            Failed::Stale => {}
                            Failed::Retry => self.stats.error(format!("PubAck for offset {offset}: {e}")),
                            Failed::GiveUp => {
                                return Err(self.transient(format!(
                                    "PubAck for offset {offset}: {e} (after {} retries)",
                                    self.config.retries
                                )));
                            }
                        }
                    }
                },
                () = tokio::time::sleep_until(due_at) => {
                    let now = now_ms();
                    let due = window.due(now).map_err(|Exhausted { index }| {
                        self.transient(format!(
                            "no PubAck for offset {} within ack_timeout {} (after {} retries)",
                            batch.positions[index].offset, self.config.ack_timeout, self.config.retries
                        ))
                    })?;
                    if due.timed_out > 0 {
                        self.stats.errors_n(due.timed_out as u64, format!(
                            "{} PubAcks missing after ack_timeout {}; sent again",
                            due.timed_out, self.config.ack_timeout
                        ));
                    }
                    for index in due.resend {
                        self.resend(js, batch, index, &mut window, &mut acks, now).await?;
                    }
                },
                Ok(()) = connects.changed() => {
                    let now = now_ms();
                    for index in window.reconnected() {
                        self.resend(js, batch, index, &mut window, &mut acks, now).await?;
                    }
                },
            }
        }
    }

    /// Sends record `index` of `batch`; returns the future of its PubAck.
    async fn send(
        &mut self,
        js: &Context,
        batch: &SinkBatch,
        index: usize,
        body: bytes::Bytes,
    ) -> Result<PublishAckFuture, SinkError> {
        let record = &batch.records[index];
        let offset = batch.positions[index].offset;
        self.template
            .render(&record.source, &record.key, &mut self.subject);
        let mut headers = HeaderMap::new();
        headers.insert(
            "Nats-Msg-Id",
            msg_id(&self.wal_id, &self.name, offset).as_str(),
        );
        if let Some(stream) = &self.config.stream {
            headers.insert("Nats-Expected-Stream", stream.as_str());
        }
        for (k, v) in &record.attributes {
            let name = header_name(k);
            if name.is_empty() || name.eq_ignore_ascii_case("Nats-Msg-Id") {
                continue;
            }
            headers.insert(name.as_str(), header_value(v).as_str());
        }
        js.publish_with_headers(self.subject.clone(), headers, body)
            .await
            .map_err(|e| {
                self.js = None;
                self.transient(format!("sending to {:?}: {e}", self.subject))
            })
    }

    /// Sends record `index` again (same `Nats-Msg-Id`) and adds its PubAck to `acks`.
    async fn resend(
        &mut self,
        js: &Context,
        batch: &SinkBatch,
        index: usize,
        window: &mut AckWindow,
        acks: &mut PubAcks,
        now_ms: u64,
    ) -> Result<(), SinkError> {
        let record = &batch.records[index];
        // It was projected before it was first sent: it is again.
        let body = self.body(record).unwrap_or_else(|_| record.payload.clone());
        let ack = self.send(js, batch, index, body).await?;
        self.stats.retries.fetch_add(1, Ordering::Relaxed);
        let send = window.sent(index, now_ms);
        acks.push(pub_ack(index, send, ack));
        Ok(())
    }
}

/// The wait before reconnection attempt `attempts`: at once, then doubling from 2 ms up
/// to `ack_timeout` (at most 4 s), so that a server back from a restart is found within
/// about one `ack_timeout`.
fn reconnect_delay(attempts: usize, ack_timeout: Duration) -> Duration {
    if attempts <= 1 {
        return Duration::ZERO;
    }
    let exp = u32::try_from(attempts - 1).unwrap_or(u32::MAX).min(20);
    Duration::from_millis(1 << exp).min(ack_timeout.min(Duration::from_secs(4)))
}

/// A PubAck with its publish's index and send.
type Awaited = Pin<Box<dyn Future<Output = (usize, SendId, Result<PubAck, PublishError>)> + Send>>;

/// The PubAcks awaited.
type PubAcks = FuturesUnordered<Awaited>;

/// The PubAck of send `send` of publish `index`.
fn pub_ack(index: usize, send: SendId, ack: PublishAckFuture) -> Awaited {
    Box::pin(async move { (index, send, ack.await) })
}

impl Sink for NatsSink {
    /// Publishes the batch with at most `max_inflight` PubAcks outstanding and returns
    /// once every record's PubAck came back: only then does the cursor move.
    ///
    /// # Cancel safety
    ///
    /// A cancelled write may have published part of the batch; its retry publishes it
    /// again with the same ids, which the server deduplicates.
    async fn write(
        &mut self,
        batch: &Arc<SinkBatch>,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<Written, SinkError> {
        let js = self.context().await?;
        let result = self.publish_all(&js, batch, rejects).await;
        self.stats.in_flight.store(0, Ordering::Relaxed);
        result?;
        Ok(Written {
            durable_through: Some(batch.next_offset),
            unencodable: rejects.len() as u64,
            buffered_bytes: 0,
        })
    }
}

/// The connect options of `c`'s credentials (`creds_file`, `token_env`, `nkey_seed_*`)
/// and TLS (`tls://` with `ca_file`): what the running sink and its startup check share.
///
/// # Errors
///
/// A credential file or variable that cannot be read, naming its key.
pub(super) async fn credentials(c: &NatsSinkConfig) -> Result<ConnectOptions, String> {
    let mut o = match &c.creds_file {
        Some(p) => ConnectOptions::with_credentials_file(p)
            .await
            .map_err(|e| format!("creds_file: cannot read {}: {e}", p.display()))?,
        None => ConnectOptions::new(),
    };
    if let Some(var) = &c.token_env {
        o = o.token(std::env::var(var).map_err(|_| format!("token_env: {var} is not set"))?);
    }
    if let Some(p) = &c.nkey_seed_file {
        let seed = std::fs::read_to_string(p)
            .map_err(|e| format!("nkey_seed_file: cannot read {}: {e}", p.display()))?;
        o = o.nkey(seed.trim().to_owned());
    } else if let Some(var) = &c.nkey_seed_env {
        o = o.nkey(std::env::var(var).map_err(|_| format!("nkey_seed_env: {var} is not set"))?);
    }
    if c.url.iter().all(|u| u.starts_with("tls://")) {
        o = o.require_tls(true);
        if let Some(ca) = &c.ca_file {
            o = o.add_root_certificates(ca.clone());
        }
    }
    Ok(o)
}
