//! `type = "nats"`: its keys, their checks and its bounds.

use std::num::NonZeroU32;
use std::path::PathBuf;

use serde::Serialize;

use crate::keys::nats::{nats_auth, nats_ca_file, nats_urls};
use crate::keys::units::string_enum;
use crate::keys::{Bounds, ByteSize, Duration, Section, join, times};
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
    /// `url`: the server URLs, `nats://host:port` or `tls://host:port` (the client
    /// fails over between them).
    pub url: Vec<String>,
    /// `stream`: the JetStream stream name.
    pub stream: String,
    /// `consumer`: the durable consumer name.
    pub consumer: String,
    /// `subjects`: subject filters; the whole stream when empty.
    pub subjects: Vec<String>,
    /// `max_ack_pending`: the consumer's, when weir creates it.
    pub max_ack_pending: NonZeroU32,
    /// `ack_wait`: the consumer's, when weir creates it.
    pub ack_wait: Duration,
    /// `deliver_policy`: where a consumer weir creates starts.
    pub deliver_policy: DeliverPolicy,
    /// `start_time`: with `deliver_policy = "by_start_time"`, an RFC 3339 time.
    pub start_time: Option<String>,
    /// `max_inflight`: messages fetched and not yet durable, at most (the credits).
    pub max_inflight: NonZeroU32,
    /// `fetch_batch`: messages asked for per fetch, at most `max_inflight`.
    pub fetch_batch: NonZeroU32,
    /// `instances`: how many weir instances share the consumer.
    pub instances: NonZeroU32,
    /// `ack_confirm`: whether each ack waits for the server's confirmation.
    pub ack_confirm: bool,
    /// `max_message_bytes`: the largest message accepted.
    pub max_message_bytes: ByteSize,
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

impl SourceKeys for NatsConfig {
    const TYPE: &'static str = "nats";
    const ABOUT: &'static str = "A JetStream durable pull consumer: at most `max_inflight` messages fetched and not yet durable, each acked once its WAL batch is fsynced.";

    fn parse(s: &mut Section<'_>, _name: &str) -> Option<Self> {
        let url = nats_urls(s);
        let stream = s
            .key("stream", "JetStream stream name.")
            .example("EVENTS")
            .req::<String>("the JetStream stream to consume");
        let consumer = s
            .key(
                "consumer",
                "Durable consumer name (several weir instances may share it).",
            )
            .example("weir")
            .req::<String>("the durable consumer name");
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
        let subjects: Vec<String> = s
            .key(
                "subjects",
                "Subject filters (more than one needs a server of 2.10 or later).",
            )
            .default_text("the whole stream")
            .example(vec!["events.>"])
            .list()
            .unwrap_or_default();
        for (i, subject) in subjects.iter().enumerate() {
            if let Err(message) = super::core::check_filter(subject) {
                s.error("subjects", format!("subjects[{i}]: {message}"));
            }
        }
        let max_ack_pending = s
            .key(
                "max_ack_pending",
                "The consumer's `max_ack_pending` when weir creates it.",
            )
            .unit("messages")
            .or(NonZeroU32::new(256).expect("256 > 0"));
        let instances = s
            .key(
                "instances",
                "How many weir instances share the consumer (a hint for the warning on `max_ack_pending`).",
            )
            .or(NonZeroU32::MIN);
        let default_inflight =
            NonZeroU32::new(max_ack_pending.get() / instances.get()).unwrap_or(NonZeroU32::MIN);
        let max_inflight = s
            .key(
                "max_inflight",
                "Messages fetched and not yet durable in the WAL, at most: the credits.",
            )
            .unit("messages")
            .default_text("`max_ack_pending / instances`")
            .or(default_inflight);
        let fetch_batch = s
            .key(
                "fetch_batch",
                "Messages asked for per fetch, at most `max_inflight`.",
            )
            .unit("messages")
            .default_text("64, or `max_inflight` if smaller")
            .or(NonZeroU32::new(64.min(max_inflight.get())).unwrap_or(NonZeroU32::MIN));
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
        let deliver_policy = s
            .key(
                "deliver_policy",
                "Where a consumer that weir creates starts (a bound consumer keeps its own).",
            )
            .or(DeliverPolicy::All);
        let start_time = s
            .key(
                "start_time",
                "With `deliver_policy = \"by_start_time\"`: an RFC 3339 time.",
            )
            .example("2026-01-31T12:00:00Z")
            .opt::<String>();
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
        let ack_wait = s
            .key(
                "ack_wait",
                "The consumer's `ack_wait` when weir creates it (progress acks go out at half of it).",
            )
            .or(Duration::secs(30));
        if ack_wait.get() < std::time::Duration::from_secs(1) {
            s.error(
                "ack_wait",
                format!(
                    "expected at least 1s (progress acks go out at half of it), found {ack_wait}"
                ),
            );
        }
        let auth = nats_auth(s);
        let ca_file = nats_ca_file(s);
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
        let ack_confirm = s
            .key(
                "ack_confirm",
                "Wait for the server to confirm each ack (a double ack).",
            )
            .or(false);
        let max_message_bytes = s
            .key(
                "max_message_bytes",
                "Largest message accepted; a larger one is quarantined, then acked.",
            )
            .or(ByteSize::kib(256));
        Some(Self {
            subjects,
            max_ack_pending,
            ack_wait,
            deliver_policy,
            start_time,
            max_inflight,
            fetch_batch,
            instances,
            ack_confirm,
            max_message_bytes,
            creds_file: auth.creds_file,
            token_env: auth.token_env,
            nkey_seed_file: auth.nkey_seed_file,
            nkey_seed_env: auth.nkey_seed_env,
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
