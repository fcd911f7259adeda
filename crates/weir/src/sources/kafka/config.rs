//! `type = "kafka"`: its keys, their checks and its bounds.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use toml::Value;

use crate::keys::units::string_enum;
use crate::keys::{Bounds, ByteSize, Section, check_env_name, join};
use crate::sources::SourceKeys;

/// Where a group with no committed offset starts (librdkafka's `auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    /// The oldest record the broker keeps (default).
    Earliest,
    /// Only records written after the group first joins.
    Latest,
}

string_enum!(StartFrom { "earliest" => Earliest, "latest" => Latest });

/// `security.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// No TLS, no SASL (default).
    Plaintext,
    /// TLS.
    Ssl,
    /// SASL without TLS.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

string_enum!(Security {
    "plaintext" => Plaintext,
    "ssl" => Ssl,
    "sasl_plaintext" => SaslPlaintext,
    "sasl_ssl" => SaslSsl,
});

/// Client properties weir sets itself: a `properties` entry naming one is refused.
pub const OWNED_PROPERTIES: &[(&str, &str)] = &[
    (
        "enable.auto.commit",
        "weir commits only offsets already durable in the WAL",
    ),
    (
        "enable.auto.offset.store",
        "weir stores only offsets already durable in the WAL",
    ),
    ("group.id", "set group_id"),
    ("bootstrap.servers", "set brokers"),
    ("metadata.broker.list", "set brokers"),
    ("auto.offset.reset", "set start_from"),
    ("fetch.max.bytes", "set fetch_max_bytes"),
    ("max.partition.fetch.bytes", "set fetch_max_bytes"),
    ("queued.max.messages.kbytes", "set prefetch_bytes"),
    ("queued.min.messages", "weir bounds the prefetch by bytes"),
    ("security.protocol", "set security_protocol"),
    ("sasl.password", "set sasl_password_env"),
    ("ssl.ca.location", "set ca_file"),
];

/// `type = "kafka"`: a consumer in a consumer group whose partitions are paused while
/// the bytes fetched and not yet durable are above `high_watermark`, and whose offsets
/// are committed only once durable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KafkaConfig {
    /// Bootstrap brokers, `host:port`: one string or a list. Required.
    pub brokers: Vec<String>,
    /// Topics to consume (or `topic_pattern`).
    pub topics: Vec<String>,
    /// A regular expression of topic names (librdkafka's `^…` subscription).
    pub topic_pattern: Option<String>,
    /// The consumer group. Required.
    pub group_id: String,
    /// Where a new group starts. Default `earliest`.
    pub start_from: StartFrom,
    /// Bytes fetched and not yet durable above which the assignment is paused.
    /// Default 32 MiB.
    pub high_watermark: ByteSize,
    /// ... and below which it is resumed. Default a quarter of `high_watermark`.
    pub low_watermark: ByteSize,
    /// librdkafka's `fetch.max.bytes` (and `max.partition.fetch.bytes`): one fetch.
    /// Default 1 MiB.
    pub fetch_max_bytes: ByteSize,
    /// librdkafka's prefetch queue (`queued.max.messages.kbytes`). Default 1 MiB.
    pub prefetch_bytes: ByteSize,
    /// The source's byte budget: records fetched and not yet durable, at most. Default
    /// `high_watermark + fetch_max_bytes + prefetch_bytes`; at least
    /// `high_watermark + fetch_max_bytes`.
    pub max_held_bytes: ByteSize,
    /// `security.protocol`. Default `plaintext`.
    pub security_protocol: Security,
    /// `sasl.mechanism` (`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`).
    pub sasl_mechanism: Option<String>,
    /// `sasl.username`.
    pub sasl_username: Option<String>,
    /// Environment variable holding `sasl.password`.
    pub sasl_password_env: Option<String>,
    /// PEM file of the CA certificate(s) for TLS (the system's when absent).
    pub ca_file: Option<PathBuf>,
    /// Other librdkafka properties, passed through (those weir owns are refused).
    pub properties: BTreeMap<String, String>,
}

impl KafkaConfig {
    /// The largest record the source hands over: one fetch.
    fn largest_record(&self) -> u64 {
        self.fetch_max_bytes.bytes()
    }
}

/// A size of `bytes` (at least one byte).
fn size(bytes: u64) -> ByteSize {
    ByteSize::new(bytes.max(1)).unwrap_or(ByteSize::kib(1))
}

fn brokers(s: &mut Section<'_>) -> Option<Vec<String>> {
    let Some(value) = s.raw("brokers") else {
        s.error(
            "brokers",
            "missing required key (e.g. \"127.0.0.1:9092\", or a list)",
        );
        return None;
    };
    let list: Vec<String> = match value {
        Value::String(b) => b.split(',').map(|b| b.trim().to_owned()).collect(),
        Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_str) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => {
            s.error(
                "brokers",
                "expected \"host:port\" or a non-empty list of them",
            );
            return None;
        }
    };
    for b in &list {
        let b = b.strip_prefix("tcp://").unwrap_or(b);
        let ok = b
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if !ok {
            s.error("brokers", format!("expected \"host:port\", found {b:?}"));
            return None;
        }
    }
    Some(list)
}

fn properties(s: &mut Section<'_>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(value) = s.raw("properties") else {
        return out;
    };
    let Some(table) = value.as_table() else {
        s.error(
            "properties",
            "expected a table of librdkafka properties, e.g. { \"session.timeout.ms\" = \"6000\" }",
        );
        return out;
    };
    for (k, v) in table {
        let path = format!("{}.{k:?}", s.key_path("properties"));
        if let Some((_, why)) = OWNED_PROPERTIES.iter().find(|(p, _)| *p == k) {
            s.diagnostics()
                .error(&path, format!("weir owns {k}: {why}"));
            continue;
        }
        let text = match v {
            Value::String(t) => t.clone(),
            Value::Integer(i) => i.to_string(),
            Value::Boolean(b) => b.to_string(),
            Value::Float(f) => f.to_string(),
            _ => {
                s.diagnostics()
                    .error(&path, "expected a string, number or boolean");
                continue;
            }
        };
        out.insert(k.clone(), text);
    }
    out
}

impl SourceKeys for KafkaConfig {
    const TYPE: &'static str = "kafka";

    fn parse(s: &mut Section<'_>, _name: &str) -> Option<Self> {
        let brokers = brokers(s);
        let topics: Vec<String> = s.list("topics").unwrap_or_default();
        let topic_pattern = s.opt::<String>("topic_pattern");
        match (&topic_pattern, topics.is_empty()) {
            (None, true) => s.error(
                "topics",
                "missing: give topics = [\"name\", …] or topic_pattern = \"^regex\"",
            ),
            (Some(_), false) => s.error("topic_pattern", "choose topics or topic_pattern"),
            _ => {}
        }
        for (i, t) in topics.iter().enumerate() {
            if t.is_empty() || t.starts_with('^') {
                s.error(
                    "topics",
                    format!(
                        "topics[{i}]: {t:?} is not a topic name (use topic_pattern for a regex)"
                    ),
                );
            }
        }
        let group_id = s.req::<String>("group_id", "the consumer group");
        let high = s.or("high_watermark", ByteSize::mib(32));
        let low = s.or("low_watermark", size(high.bytes() / 4));
        if low.bytes() >= high.bytes() && !s.failed(&["low_watermark", "high_watermark"]) {
            s.error(
                "low_watermark",
                format!("{low} is not below high_watermark = {high}"),
            );
        }
        let fetch_max_bytes = s.or("fetch_max_bytes", ByteSize::mib(1));
        if fetch_max_bytes.bytes() < 1024 {
            s.error(
                "fetch_max_bytes",
                format!("expected at least 1 KiB, found {fetch_max_bytes}"),
            );
        }
        let prefetch_bytes = s.or("prefetch_bytes", ByteSize::mib(1));
        if prefetch_bytes.bytes() < 1024 {
            s.error(
                "prefetch_bytes",
                format!("expected at least 1 KiB, found {prefetch_bytes}"),
            );
        }
        let floor = high.bytes() + fetch_max_bytes.bytes();
        let max_held_bytes = s.or("max_held_bytes", size(floor + prefetch_bytes.bytes()));
        if max_held_bytes.bytes() < floor
            && !s.failed(&["max_held_bytes", "high_watermark", "fetch_max_bytes"])
        {
            s.error(
                "max_held_bytes",
                format!(
                    "{max_held_bytes} is below high_watermark {high} + fetch_max_bytes {fetch_max_bytes} ({}): \
                     the partitions are paused only once the high mark is reached, and one fetch may be on its way; \
                     raise max_held_bytes or lower high_watermark",
                    size(floor)
                ),
            );
        }
        let security_protocol = s.or("security_protocol", Security::Plaintext);
        let sasl_mechanism = s.opt::<String>("sasl_mechanism");
        let sasl_username = s.opt::<String>("sasl_username");
        let sasl_password_env = s.opt::<String>("sasl_password_env");
        if let Some(env) = &sasl_password_env {
            check_env_name(s, "sasl_password_env", env);
        }
        let sasl = matches!(
            security_protocol,
            Security::SaslPlaintext | Security::SaslSsl
        );
        if let Some(m) = &sasl_mechanism
            && !["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"].contains(&m.as_str())
        {
            s.error(
                "sasl_mechanism",
                format!("expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, found {m:?}"),
            );
        }
        if !sasl
            && (sasl_mechanism.is_some() || sasl_username.is_some() || sasl_password_env.is_some())
        {
            s.error(
                "security_protocol",
                "SASL keys are set: use security_protocol = \"sasl_plaintext\" or \"sasl_ssl\"",
            );
        }
        if sasl && (sasl_username.is_none() || sasl_password_env.is_none()) {
            s.error(
                "sasl_username",
                "SASL needs sasl_username and sasl_password_env",
            );
        }
        let ca_file = s.opt::<PathBuf>("ca_file");
        if ca_file.is_some() && !matches!(security_protocol, Security::Ssl | Security::SaslSsl) {
            s.error(
                "ca_file",
                "only applies with security_protocol = \"ssl\" or \"sasl_ssl\"",
            );
        }
        let properties = properties(s);
        Some(Self {
            topics,
            topic_pattern,
            start_from: s.or("start_from", StartFrom::Earliest),
            high_watermark: high,
            low_watermark: low,
            fetch_max_bytes,
            prefetch_bytes,
            max_held_bytes,
            security_protocol,
            sasl_mechanism,
            sasl_username,
            sasl_password_env,
            ca_file,
            properties,
            brokers: brokers?,
            group_id: group_id?,
        })
    }

    fn bounds(&self, bounds: &mut Bounds<'_>) {
        bounds.add(
            "held",
            None,
            self.max_held_bytes.bytes(),
            format!(
                "records fetched, not yet durable: paused at high_watermark {} + one fetch (fetch_max_bytes {}) + librdkafka's prefetch queue (prefetch_bytes {})",
                self.high_watermark, self.fetch_max_bytes, self.prefetch_bytes
            ),
        );
    }

    fn max_batch_bytes(&self) -> (u64, &'static str) {
        (self.largest_record(), "fetch_max_bytes")
    }

    fn warnings(&self, path: &str, out: &mut Vec<String>) {
        if let Some(v) = self.properties.get("max.poll.interval.ms")
            && v.parse::<u64>().is_ok_and(|ms| ms < 1000)
        {
            out.push(format!(
                "{}: max.poll.interval.ms = {v} is below 1 s: a slow WAL append may look like a dead consumer",
                join(path, "properties")
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Option<KafkaConfig>, Vec<String>) {
        crate::keys::walk::parse_section("sources.k", text, KafkaConfig::parse)
    }

    #[test]
    fn defaults() {
        let (c, errors) = parse("brokers = '127.0.0.1:9092'\ntopics = ['a']\ngroup_id = 'g'");
        assert!(errors.is_empty(), "{errors:?}");
        let c = c.unwrap();
        assert_eq!(c.start_from, StartFrom::Earliest);
        assert_eq!(c.low_watermark.bytes(), 8 << 20);
        assert_eq!(c.max_held_bytes.bytes(), (32 << 20) + (2 << 20));
    }

    #[test]
    fn weir_owned_properties_are_refused() {
        let (_, errors) = parse(
            "brokers = 'h:1'\ntopics = ['a']\ngroup_id = 'g'\n[properties]\n\"enable.auto.commit\" = true\n\"group.id\" = 'x'\n\"queued.max.messages.kbytes\" = 10\n\"session.timeout.ms\" = 6000",
        );
        let all = errors.join("\n");
        assert_eq!(errors.len(), 3, "{all}");
        for needle in [
            "enable.auto.commit",
            "group.id",
            "queued.max.messages.kbytes",
        ] {
            assert!(all.contains(needle), "{needle} missing in:\n{all}");
        }
        assert!(all.contains("weir owns"), "{all}");
    }

    #[test]
    fn a_budget_below_high_plus_one_fetch_is_refused() {
        let (_, errors) = parse(
            "brokers = 'h:1'\ntopics = ['a']\ngroup_id = 'g'\nhigh_watermark = '4 MiB'\nfetch_max_bytes = '1 MiB'\nmax_held_bytes = '4.5 MiB'",
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("sources.k.max_held_bytes") && e.contains("one fetch")),
            "{errors:?}"
        );
        let (_, errors) = parse(
            "brokers = 'h:1'\ntopics = ['a']\ngroup_id = 'g'\nhigh_watermark = '4 MiB'\nfetch_max_bytes = '1 MiB'\nmax_held_bytes = '5 MiB'",
        );
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn bad_keys_are_reported_with_their_path() {
        let (_, errors) = parse(
            "brokers = 'nohost'\ngroup_id = 'g'\nlow_watermark = '64 MiB'\nsasl_username = 'u'\nca_file = 'ca.pem'",
        );
        let all = errors.join("\n");
        for needle in [
            "sources.k.brokers",
            "sources.k.topics",
            "sources.k.low_watermark",
            "sources.k.security_protocol",
            "sources.k.ca_file",
        ] {
            assert!(all.contains(needle), "{needle} missing in:\n{all}");
        }
    }
}
