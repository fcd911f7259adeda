//! `type = "nats"`: its keys, their checks and its bounds.

use std::num::NonZeroU32;
use std::path::PathBuf;

use serde::Serialize;

use crate::keys::units::string_enum;
use crate::keys::{Bounds, ByteSize, Duration, Section, check_env_name, join, times};
use crate::sources::SourceKeys;

/// Where a consumer that weir creates starts in the stream (applied only when it is
/// created: a bound consumer keeps its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliverPolicy {
    /// The whole stream (default).
    All,
    /// Only messages stored after the consumer is created.
    New,
    /// Messages stored at or after `start_time`.
    ByStartTime,
}

string_enum!(DeliverPolicy { "all" => All, "new" => New, "by_start_time" => ByStartTime });

/// `type = "nats"`: a NATS JetStream durable pull consumer. At most `max_inflight`
/// messages are fetched and not yet durable (the credits); each is acked once its WAL
/// batch is fsynced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NatsConfig {
    /// Server URLs, `nats://host:port` or `tls://host:port`: one string, or a list for a
    /// cluster (the client fails over between them). Required.
    pub url: Vec<String>,
    /// JetStream stream name. Required.
    pub stream: String,
    /// Durable consumer name (several weir instances may share it). Required.
    pub consumer: String,
    /// Subject filters; the whole stream when empty. More than one needs a server
    /// of 2.10 or later (checked at connect).
    pub subjects: Vec<String>,
    /// The consumer's `max_ack_pending` when weir creates it. Default 256.
    pub max_ack_pending: NonZeroU32,
    /// The consumer's `ack_wait` when weir creates it. Default 30 s.
    pub ack_wait: Duration,
    /// Where a consumer weir creates starts. Default `all`.
    pub deliver_policy: DeliverPolicy,
    /// With `deliver_policy = "by_start_time"`: an RFC 3339 time.
    pub start_time: Option<String>,
    /// Messages fetched and not yet durable in the WAL, at most: the credits. Default
    /// `max_ack_pending / instances`.
    pub max_inflight: NonZeroU32,
    /// Messages asked for per fetch, at most `max_inflight`. Default 64 (or less).
    pub fetch_batch: NonZeroU32,
    /// How many weir instances share the consumer (a hint for the startup warning on
    /// `max_ack_pending`). Default 1.
    pub instances: NonZeroU32,
    /// Wait for the server to confirm each ack (a double ack). Default false.
    pub ack_confirm: bool,
    /// Largest message accepted; larger ones are quarantined, then acked. Default 256 KiB.
    pub max_message_bytes: ByteSize,
    /// A NATS `.creds` file (JWT and nkey seed).
    pub creds_file: Option<PathBuf>,
    /// Environment variable holding a token.
    pub token_env: Option<String>,
    /// File holding an nkey seed (`SU…`).
    pub nkey_seed_file: Option<PathBuf>,
    /// Environment variable holding an nkey seed.
    pub nkey_seed_env: Option<String>,
    /// PEM file of the CA certificate(s) that `tls://` trusts (the system's when absent).
    pub ca_file: Option<PathBuf>,
}

impl SourceKeys for NatsConfig {
    const TYPE: &'static str = "nats";

    fn parse(s: &mut Section<'_>, _name: &str) -> Option<Self> {
        let url = crate::keys::nats::nats_urls(s);
        let stream = s.req::<String>("stream", "the JetStream stream to consume");
        let consumer = s.req::<String>("consumer", "the durable consumer name");
        for (key, value) in [("stream", &stream), ("consumer", &consumer)] {
            if let Some(v) = value
                && (v.is_empty() || v.contains(['.', '*', '>', ' ', '\t', '/', '\\']))
            {
                s.error(
                    key,
                    format!("{v:?} is not a valid JetStream name (no '.', '*', '>', '/', '\\' or whitespace)"),
                );
            }
        }
        let subjects: Vec<String> = s.list("subjects").unwrap_or_default();
        for (i, subject) in subjects.iter().enumerate() {
            if let Err(message) = super::core::check_filter(subject) {
                s.error("subjects", format!("subjects[{i}]: {message}"));
            }
        }
        let max_ack_pending = s.or("max_ack_pending", NonZeroU32::new(256).expect("256 > 0"));
        let instances = s.or("instances", NonZeroU32::MIN);
        let default_inflight =
            NonZeroU32::new(max_ack_pending.get() / instances.get()).unwrap_or(NonZeroU32::MIN);
        let max_inflight = s.or("max_inflight", default_inflight);
        let fetch_batch = s.or(
            "fetch_batch",
            NonZeroU32::new(64.min(max_inflight.get())).unwrap_or(NonZeroU32::MIN),
        );
        if fetch_batch > max_ack_pending && !s.failed(&["fetch_batch", "max_ack_pending"]) {
            s.error(
                "fetch_batch",
                format!("{fetch_batch} is more than max_ack_pending = {max_ack_pending}; a fetch can never return more than the free credits"),
            );
        } else if fetch_batch > max_inflight && !s.failed(&["fetch_batch", "max_inflight"]) {
            s.error(
                "fetch_batch",
                format!("{fetch_batch} is more than max_inflight = {max_inflight}; a fetch asks only for the free credits"),
            );
        }
        let deliver_policy = s.or("deliver_policy", DeliverPolicy::All);
        let start_time = s.opt::<String>("start_time");
        match (&start_time, deliver_policy) {
            (Some(t), DeliverPolicy::ByStartTime) => {
                if humantime::parse_rfc3339_weak(t).is_err() {
                    s.error(
                        "start_time",
                        format!(
                            "expected an RFC 3339 time like \"2026-01-31T12:00:00Z\", found {t:?}"
                        ),
                    );
                }
            }
            (None, DeliverPolicy::ByStartTime) => s.error(
                "start_time",
                "missing: deliver_policy = \"by_start_time\" needs start_time (RFC 3339)",
            ),
            (Some(_), _) => s.error(
                "start_time",
                "only applies with deliver_policy = \"by_start_time\"",
            ),
            (None, _) => {}
        }
        let ack_wait = s.or("ack_wait", Duration::secs(30));
        if ack_wait.get() < std::time::Duration::from_secs(1) {
            s.error(
                "ack_wait",
                format!(
                    "expected at least 1s (progress acks go out at half of it), found {ack_wait}"
                ),
            );
        }
        let creds_file = s.opt::<PathBuf>("creds_file");
        let token_env = s.opt::<String>("token_env");
        let nkey_seed_file = s.opt::<PathBuf>("nkey_seed_file");
        let nkey_seed_env = s.opt::<String>("nkey_seed_env");
        for (key, env) in [("token_env", &token_env), ("nkey_seed_env", &nkey_seed_env)] {
            if let Some(env) = env {
                check_env_name(s, key, env);
            }
        }
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
        let ca_file = s.opt::<PathBuf>("ca_file");
        if ca_file.is_some()
            && url
                .as_ref()
                .is_some_and(|u| u.iter().all(|u| !u.starts_with("tls://")))
        {
            s.error(
                "ca_file",
                "only applies to tls:// URLs; use tls:// or remove ca_file",
            );
        }
        Some(Self {
            subjects,
            max_ack_pending,
            ack_wait,
            deliver_policy,
            start_time,
            max_inflight,
            fetch_batch,
            instances,
            ack_confirm: s.or("ack_confirm", false),
            max_message_bytes: s.or("max_message_bytes", ByteSize::kib(256)),
            creds_file,
            token_env,
            nkey_seed_file,
            nkey_seed_env,
            ca_file,
            url: url?,
            stream: stream?,
            consumer: consumer?,
        })
    }

    fn bounds(&self, bounds: &mut Bounds<'_>) {
        bounds.add(
            "credits",
            Some(self.max_inflight.get().into()),
            times(self.max_inflight.get(), self.max_message_bytes.bytes()),
            format!(
                "messages fetched, not yet durable: max_inflight {} × max_message_bytes {}",
                self.max_inflight, self.max_message_bytes
            ),
        );
        let in_flight = super::shell::IN_FLIGHT;
        bounds.add(
            "appends_in_flight",
            Some(in_flight.units as u64),
            0,
            format!(
                "units encoded for the WAL and not yet durable (appended in stream order while earlier ones are fsynced): \
                 at most {} units, new ones only below {} (a unit is up to {} records or about {}); their records are \
                 the credits' messages, moved into WAL batches, so their bytes are counted there",
                in_flight.units,
                crate::keys::units::format_bytes(in_flight.bytes),
                super::shell::UNIT_RECORDS,
                crate::keys::units::format_bytes(super::shell::UNIT_BYTES),
            ),
        );
    }

    fn max_batch_bytes(&self) -> (u64, &'static str) {
        (self.max_message_bytes.bytes(), "max_message_bytes")
    }

    fn warnings(&self, path: &str, out: &mut Vec<String>) {
        if u64::from(self.max_ack_pending.get())
            < u64::from(self.max_inflight.get()) * u64::from(self.instances.get())
        {
            out.push(format!(
                "{}: {} is below max_inflight {} × instances {}: the instances will wait for each other's acks",
                join(path, "max_ack_pending"),
                self.max_ack_pending,
                self.max_inflight,
                self.instances
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Option<NatsConfig>, Vec<String>) {
        crate::keys::walk::parse_section("sources.n", text, NatsConfig::parse)
    }

    #[test]
    fn defaults_follow_max_ack_pending_and_instances() {
        let (c, errors) = parse(
            "url = 'nats://127.0.0.1:4222'\nstream = 'S'\nconsumer = 'c'\nmax_ack_pending = 512\ninstances = 2",
        );
        assert!(errors.is_empty(), "{errors:?}");
        let c = c.unwrap();
        assert_eq!(c.max_inflight.get(), 256);
        assert_eq!(c.fetch_batch.get(), 64);
        assert_eq!(c.url, vec!["nats://127.0.0.1:4222".to_owned()]);
        assert_eq!(c.deliver_policy, DeliverPolicy::All);
    }

    #[test]
    fn a_cluster_is_a_list_of_urls() {
        let (c, errors) = parse(
            "url = ['nats://127.0.0.1:1', 'nats://127.0.0.1:2']\nstream = 'S'\nconsumer = 'c'",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(c.unwrap().url.len(), 2);
        let (_, errors) =
            parse("url = ['nats://127.0.0.1:1', 'tls://h:2']\nstream = 'S'\nconsumer = 'c'");
        assert!(errors.iter().any(|e| e.contains("mixes")), "{errors:?}");
    }

    #[test]
    fn bad_keys_are_reported_with_their_path() {
        let (_, errors) = parse(
            "url = 'http://x'\nstream = 'a.b'\nconsumer = 'c'\nmax_inflight = 8\nfetch_batch = 16\n\
             deliver_policy = 'by_start_time'\ntoken_env = 'T'\ncreds_file = 'x.creds'\nsubjects = ['a..b']",
        );
        let all = errors.join("\n");
        for needle in [
            "sources.n.url",
            "sources.n.stream",
            "sources.n.fetch_batch",
            "sources.n.start_time",
            "sources.n.creds_file",
            "sources.n.subjects",
        ] {
            assert!(all.contains(needle), "{needle} missing in:\n{all}");
        }
    }

    #[test]
    fn start_time_is_rfc3339() {
        let (c, errors) = parse(
            "url = 'nats://h:1'\nstream = 'S'\nconsumer = 'c'\ndeliver_policy = 'by_start_time'\nstart_time = '2026-01-31T12:00:00Z'",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(c.unwrap().deliver_policy, DeliverPolicy::ByStartTime);
    }

    #[test]
    fn a_shared_consumer_too_small_for_the_instances_is_a_warning() {
        let (c, _) = parse(
            "url = 'nats://h:1'\nstream = 'S'\nconsumer = 'c'\nmax_ack_pending = 100\nmax_inflight = 100\ninstances = 2",
        );
        let mut out = Vec::new();
        c.unwrap().warnings("sources.n", &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].contains("max_ack_pending"));
    }
}
