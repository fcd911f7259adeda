//! `type = "nats"`: its keys and its bounds. The source itself is not built yet
//! (`weir validate` and `weir run` refuse the type); its keys are read so that a
//! configuration written for it is checked all the same.

use std::num::NonZeroU32;

use serde::Serialize;

use crate::keys::{Bounds, ByteSize, Section, times};

/// `type = "nats"`: a NATS JetStream durable pull consumer; credits are
/// `max_ack_pending`, acked once durable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NatsConfig {
    /// Server URL, `nats://host:port` or `tls://host:port`. Required.
    pub url: String,
    /// JetStream stream name. Required.
    pub stream: String,
    /// Durable consumer name (several weir instances may share it). Required.
    pub consumer: String,
    /// Subject filters; the whole stream when empty.
    pub subjects: Vec<String>,
    /// Messages delivered but not yet acked: the credit window. Default 256.
    pub max_ack_pending: NonZeroU32,
    /// Messages asked for per fetch, at most `max_ack_pending`. Default 64.
    pub fetch_batch: NonZeroU32,
    /// Largest message accepted; larger ones are quarantined. Default 256 KiB.
    pub max_message_bytes: ByteSize,
}

impl NatsConfig {
    /// Reads the keys of `[sources.NAME]` with `type = "nats"`.
    pub fn parse(s: &mut Section<'_>, _name: &str) -> Option<Self> {
        let url = s.req::<String>("url", "e.g. \"nats://127.0.0.1:4222\"");
        if let Some(url) = &url
            && !(url.starts_with("nats://") || url.starts_with("tls://"))
        {
            s.error(
                "url",
                format!("expected a URL starting with nats:// or tls://, found {url:?}"),
            );
        }
        let stream = s.req("stream", "the JetStream stream to consume");
        let consumer = s.req("consumer", "the durable consumer name");
        let subjects = s.list("subjects").unwrap_or_default();
        let max_ack_pending = s.or("max_ack_pending", NonZeroU32::new(256).expect("256 > 0"));
        let fetch_batch = s.or("fetch_batch", NonZeroU32::new(64).expect("64 > 0"));
        if fetch_batch > max_ack_pending && !s.failed(&["fetch_batch", "max_ack_pending"]) {
            s.error(
                "fetch_batch",
                format!("{fetch_batch} is more than max_ack_pending = {max_ack_pending}; a fetch can never return more than the free credits"),
            );
        }
        Some(Self {
            subjects,
            max_ack_pending,
            fetch_batch,
            max_message_bytes: s.or("max_message_bytes", ByteSize::kib(256)),
            url: url?,
            stream: stream?,
            consumer: consumer?,
        })
    }

    /// Its buffers and their bounds, for the memory inventory once the source runs.
    pub fn bounds(&self, bounds: &mut Bounds<'_>) {
        bounds.add(
            "ack_pending",
            Some(self.max_ack_pending.get().into()),
            times(self.max_ack_pending.get(), self.max_message_bytes.bytes()),
            format!(
                "messages delivered, not yet acked: max_ack_pending {} × max_message_bytes {}",
                self.max_ack_pending, self.max_message_bytes
            ),
        );
    }
}
