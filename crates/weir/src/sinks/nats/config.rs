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
}

impl SinkKeys for NatsSinkConfig {
    const TYPE: &'static str = "nats";
    const ABOUT: &'static str = "Publishes each record to a JetStream subject; the cursor moves once its PubAck came back (`Nats-Msg-Id` deduplicates a replay).";

    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let url = crate::keys::nats::nats_urls(s);
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
        let token_env = s
            .key("token_env", "Environment variable holding a token.")
            .example("WEIR_NATS_TOKEN")
            .opt::<String>();
        let nkey_seed_env = s
            .key(
                "nkey_seed_env",
                "Environment variable holding an nkey seed.",
            )
            .example("WEIR_NATS_NKEY")
            .opt::<String>();
        for (key, env) in [("token_env", &token_env), ("nkey_seed_env", &nkey_seed_env)] {
            if let Some(env) = env {
                check_env_name(s, key, env);
            }
        }
        let creds_file = s
            .key("creds_file", "A NATS `.creds` file (JWT and nkey seed).")
            .example("/etc/weir/nats.creds")
            .opt::<PathBuf>();
        let nkey_seed_file = s
            .key("nkey_seed_file", "File holding an nkey seed (`SU…`).")
            .example("/etc/weir/nats.nk")
            .opt::<PathBuf>();
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
        let ca_file = s
            .key(
                "ca_file",
                "PEM file of the CA certificate(s) that `tls://` trusts.",
            )
            .default_text("the system's CA certificates")
            .example("/etc/weir/ca.pem")
            .opt();
        Some(Self {
            stream,
            max_inflight,
            ack_timeout,
            retries: u32::try_from(retries.min(100)).unwrap_or(100),
            creds_file,
            token_env,
            nkey_seed_file,
            nkey_seed_env,
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
