//! `type = "nats"` sinks: the servers, the subject template, the publishes in flight.

use std::num::NonZeroU32;
use std::path::PathBuf;

use serde::Serialize;

use super::core::SubjectTemplate;
use crate::keys::nats::{nats_auth, nats_ca_file, nats_urls};
use crate::keys::{Bounds, Duration, Section};
use crate::sinks::SinkKeys;

/// `type = "nats"`: publishes each record to a JetStream subject; the cursor moves
/// past a record only once its PubAck came back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NatsSinkConfig {
    /// `url`: the server URLs (`nats://` or `tls://`).
    pub url: Vec<String>,
    /// `subject`: a template over the record (`{key}`, `{source}`).
    pub subject: String,
    /// `stream`: the stream the publishes must land in (`Nats-Expected-Stream`).
    pub stream: Option<String>,
    /// `max_inflight`: publishes awaiting their PubAck at once.
    pub max_inflight: NonZeroU32,
    /// `ack_timeout`: how long a PubAck may take.
    pub ack_timeout: Duration,
    /// `retries`: of one publish (same `Nats-Msg-Id`) before the batch fails.
    pub retries: u32,
    /// `creds_file`: a NATS `.creds` file.
    pub creds_file: Option<PathBuf>,
    /// `token_env`: the environment variable holding a token.
    pub token_env: Option<String>,
    /// `nkey_seed_file`: the file holding an nkey seed.
    pub nkey_seed_file: Option<PathBuf>,
    /// `nkey_seed_env`: the environment variable holding an nkey seed.
    pub nkey_seed_env: Option<String>,
    /// `ca_file`: the CA certificate(s) that `tls://` trusts.
    pub ca_file: Option<PathBuf>,
    /// `fields`: publish an object of these payload fields instead of the payload.
    pub fields: Option<Vec<(String, String)>>,
}

impl SinkKeys for NatsSinkConfig {
    const TYPE: &'static str = "nats";
    const ABOUT: &'static str = "Publishes each record to a JetStream subject; the cursor moves once its PubAck came back (`Nats-Msg-Id` deduplicates a replay).";

    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let url = nats_urls(s);
        let subject = s
            .key(
                "subject",
                "The subject, a template over the record: `{key}` (MQTT's `/` becomes `.`, wildcards and whitespace escaped) and `{source}`.",
            )
            .example("weir.{key}")
            .req::<String>("a template like \"weir.{key}\"");
        if let Some(t) = &subject
            && let Err(e) = SubjectTemplate::parse(t)
        {
            s.error("subject", e);
        }
        let retries = s
            .key(
                "retries",
                "Retries of one publish (same `Nats-Msg-Id`) before the batch fails and the driver retries it with backoff (at most 100).",
            )
            .or(3u64);
        let auth = nats_auth(s);
        let stream = s
            .key(
                "stream",
                "The stream the publishes must land in (sent as `Nats-Expected-Stream`).",
            )
            .default_text("any stream")
            .example("EVENTS")
            .opt();
        let max_inflight = s
            .key("max_inflight", "Publishes awaiting their PubAck at once.")
            .or(NonZeroU32::new(256).expect("256 > 0"));
        let ack_timeout = s
            .key("ack_timeout", "How long a PubAck may take.")
            .or(Duration::secs(5));
        let ca_file = nats_ca_file(s);
        let fields = crate::sinks::lines::parse_fields(s, true, "");
        Some(Self {
            fields,
            stream,
            max_inflight,
            ack_timeout,
            retries: u32::try_from(retries.min(100)).unwrap_or(100),
            creds_file: auth.creds_file,
            token_env: auth.token_env,
            nkey_seed_file: auth.nkey_seed_file,
            nkey_seed_env: auth.nkey_seed_env,
            ca_file,
            url: url?,
            subject: subject?,
        })
    }

    fn bounds(&self, bounds: &mut Bounds<'_>) {
        bounds.add(
            "publishes",
            Some(self.max_inflight.get().into()),
            0,
            format!(
                "publishes awaiting their PubAck: max_inflight {} (their payloads are the batch being written, shared)",
                self.max_inflight
            ),
        );
    }
}
