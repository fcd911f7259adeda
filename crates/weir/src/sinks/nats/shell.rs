//! The running `nats` sink (see the [module docs](super)).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::{self, Context};
use async_nats::{ConnectOptions, HeaderMap};
use serde::Serialize;

use super::config::NatsSinkConfig;
use super::core::{SubjectTemplate, header_name, header_value, msg_id};
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
        self.errors.fetch_add(1, Ordering::Relaxed);
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
        })
    }
}

impl NatsSink {
    /// The JetStream context, connecting on first use (and after it was dropped).
    async fn context(&mut self) -> Result<Context, SinkError> {
        if let Some(js) = &self.js {
            return Ok(js.clone());
        }
        let options = self.options().await.map_err(SinkError::Permanent)?;
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
        let js = jetstream::ContextBuilder::new()
            .timeout(self.config.ack_timeout.get())
            .build(client);
        self.js = Some(js.clone());
        Ok(js)
    }

    async fn options(&self) -> Result<ConnectOptions, String> {
        let c = &self.config;
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
        Ok(o.name(format!("weir-sink-{}", self.name))
            .connection_timeout(Duration::from_secs(5))
            .max_reconnects(None))
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

    /// Sends one record; returns the future of its PubAck.
    async fn send(
        &mut self,
        js: &Context,
        record: &Record,
        body: bytes::Bytes,
        offset: u64,
    ) -> Result<PublishAckFuture, SinkError> {
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

    /// Waits for one PubAck; on an error or a timeout, publishes the record again
    /// (same `Nats-Msg-Id`) up to `retries` times.
    async fn settle(
        &mut self,
        js: &Context,
        batch: &SinkBatch,
        index: usize,
        mut ack: PublishAckFuture,
    ) -> Result<(), SinkError> {
        let mut attempt = 0;
        loop {
            match ack.await {
                Ok(pub_ack) => {
                    self.stats.published.fetch_add(1, Ordering::Relaxed);
                    if pub_ack.duplicate {
                        self.stats.duplicates.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(());
                }
                Err(e) => {
                    let message =
                        format!("PubAck for offset {}: {e}", batch.positions[index].offset);
                    self.stats.error(message.clone());
                    if attempt >= self.config.retries {
                        return Err(self.transient(message));
                    }
                    attempt += 1;
                    self.stats.retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(50 << attempt.min(6))).await;
                    let record = &batch.records[index];
                    // It was projected before it was first sent: it is again.
                    let body = self.body(record).unwrap_or_else(|_| record.payload.clone());
                    ack = self
                        .send(js, record, body, batch.positions[index].offset)
                        .await?;
                }
            }
        }
    }
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
        let max = self.config.max_inflight.get() as usize;
        let mut in_flight: VecDeque<(usize, PublishAckFuture)> = VecDeque::with_capacity(max);
        let result = async {
            for (i, record) in batch.records.iter().enumerate() {
                if in_flight.len() >= max
                    && let Some((j, ack)) = in_flight.pop_front()
                {
                    self.settle(&js, batch, j, ack).await?;
                }
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
                let ack = self
                    .send(&js, record, body, batch.positions[i].offset)
                    .await?;
                in_flight.push_back((i, ack));
                self.stats
                    .in_flight
                    .store(in_flight.len() as u64, Ordering::Relaxed);
            }
            while let Some((j, ack)) = in_flight.pop_front() {
                self.settle(&js, batch, j, ack).await?;
                self.stats
                    .in_flight
                    .store(in_flight.len() as u64, Ordering::Relaxed);
            }
            Ok::<(), SinkError>(())
        }
        .await;
        self.stats.in_flight.store(0, Ordering::Relaxed);
        result?;
        Ok(Written {
            durable_through: Some(batch.next_offset),
            unencodable: rejects.len() as u64,
            buffered_bytes: 0,
        })
    }
}
