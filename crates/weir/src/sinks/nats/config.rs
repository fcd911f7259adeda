//! `type = "nats"` sinks: the servers, the subject template, the publishes in flight.

use std::num::NonZeroU32;
use std::path::PathBuf;

use serde::Serialize;

use super::core::SubjectTemplate;
use crate::keys::{Bounds, Duration, Section, check_env_name};
use crate::sinks::SinkKeys;

/// `type = "nats"`: publishes each record to a JetStream subject; the cursor moves
/// past a record only once its PubAck came back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NatsSinkConfig {
    /// Server URLs (`nats://` or `tls://`), one string or a list. Required.
    pub url: Vec<String>,
    /// The subject, a template over the record: `{key}` (MQTT's `/` becomes `.`,
    /// wildcards and whitespace escaped) and `{source}`. Required, e.g. `"weir.{key}"`.
    pub subject: String,
    /// The stream the publishes must land in (sent as `Nats-Expected-Stream`).
    pub stream: Option<String>,
    /// Publishes awaiting their PubAck at once. Default 256.
    pub max_inflight: NonZeroU32,
    /// How long a PubAck may take. Default 5 s.
    pub ack_timeout: Duration,
    /// Retries of one publish (same `Nats-Msg-Id`) before the batch fails and the
    /// driver retries it with backoff. Default 3.
    pub retries: u32,
    /// A NATS `.creds` file.
    pub creds_file: Option<PathBuf>,
    /// Environment variable holding a token.
    pub token_env: Option<String>,
    /// File holding an nkey seed.
    pub nkey_seed_file: Option<PathBuf>,
    /// Environment variable holding an nkey seed.
    pub nkey_seed_env: Option<String>,
    /// PEM file of the CA certificate(s) that `tls://` trusts.
    pub ca_file: Option<PathBuf>,
}

impl SinkKeys for NatsSinkConfig {
    const TYPE: &'static str = "nats";

    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let url = crate::keys::nats::nats_urls(s);
        let subject = s.req::<String>("subject", "a template like \"weir.{key}\"");
        if let Some(t) = &subject
            && let Err(e) = SubjectTemplate::parse(t)
        {
            s.error("subject", e);
        }
        let retries = s.or("retries", 3u64);
        let token_env = s.opt::<String>("token_env");
        let nkey_seed_env = s.opt::<String>("nkey_seed_env");
        for (key, env) in [("token_env", &token_env), ("nkey_seed_env", &nkey_seed_env)] {
            if let Some(env) = env {
                check_env_name(s, key, env);
            }
        }
        let creds_file = s.opt::<PathBuf>("creds_file");
        let nkey_seed_file = s.opt::<PathBuf>("nkey_seed_file");
        let ways = [
            creds_file.is_some(),
            token_env.is_some(),
            nkey_seed_file.is_some(),
            nkey_seed_env.is_some(),
        ];
        if ways.iter().filter(|w| **w).count() > 1 {
            s.error(
                "creds_file",
                "choose one of creds_file, token_env, nkey_seed_file, nkey_seed_env",
            );
        }
        Some(Self {
            stream: s.opt("stream"),
            max_inflight: s.or("max_inflight", NonZeroU32::new(256).expect("256 > 0")),
            ack_timeout: s.or("ack_timeout", Duration::secs(5)),
            retries: u32::try_from(retries.min(100)).unwrap_or(100),
            creds_file,
            token_env,
            nkey_seed_file,
            nkey_seed_env,
            ca_file: s.opt("ca_file"),
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
