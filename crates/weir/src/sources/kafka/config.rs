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
    /// `brokers`: the bootstrap brokers, `host:port`.
    pub brokers: Vec<String>,
    /// `topics`: the topics to consume (or `topic_pattern`).
    pub topics: Vec<String>,
    /// `topic_pattern`: a regular expression of topic names.
    pub topic_pattern: Option<String>,
    /// `group_id`: the consumer group.
    pub group_id: String,
    /// `start_from`: where a new group starts.
    pub start_from: StartFrom,
    /// `high_watermark`: bytes fetched and not yet durable above which the assignment
    /// is paused.
    pub high_watermark: ByteSize,
    /// `low_watermark`: ... and below which it is resumed.
    pub low_watermark: ByteSize,
    /// `fetch_max_bytes`: librdkafka's `fetch.max.bytes` (and
    /// `max.partition.fetch.bytes`): one fetch.
    pub fetch_max_bytes: ByteSize,
    /// `prefetch_bytes`: librdkafka's prefetch queue (`queued.max.messages.kbytes`).
    pub prefetch_bytes: ByteSize,
    /// `max_held_bytes`: the source's byte budget, records fetched and not yet durable.
    pub max_held_bytes: ByteSize,
    /// `security_protocol`: `security.protocol`.
    pub security_protocol: Security,
    /// `sasl_mechanism`: `sasl.mechanism`.
    pub sasl_mechanism: Option<String>,
    /// `sasl_username`: `sasl.username`.
    pub sasl_username: Option<String>,
    /// `sasl_password_env`: the environment variable holding `sasl.password`.
    pub sasl_password_env: Option<String>,
    /// `ca_file`: the CA certificate(s) for TLS (the system's when `None`).
    pub ca_file: Option<PathBuf>,
    /// `properties`: other librdkafka properties, passed through.
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
    let declared = s
        .key(
            "brokers",
            "Bootstrap brokers, `host:port`: one string (comma-separated) or a list.",
        )
        .required()
        .example("127.0.0.1:9092")
        .raw("string or list of strings");
    let Some(value) = declared else {
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
    let declared = s
        .key(
            "properties",
            "Other librdkafka properties, passed through (those weir sets itself are refused).",
        )
        .example(toml::Table::from_iter([(
            "session.timeout.ms".to_owned(),
            Value::from("6000"),
        )]))
        .raw("table of librdkafka properties to strings, numbers or booleans");
    let Some(value) = declared else {
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
    const ABOUT: &'static str = "A consumer in a consumer group: partitions paused above a byte watermark while polling goes on; offsets committed only once durable.";

    fn parse(s: &mut Section<'_>, _name: &str) -> Option<Self> {
        let brokers = brokers(s);
        let topics: Vec<String> = s
            .key("topics", "Topics to consume.")
            .required_unless("topic_pattern")
            .example(vec!["events"])
            .list()
            .unwrap_or_default();
        let topic_pattern = s
            .key(
                "topic_pattern",
                "A regular expression of topic names (librdkafka's `^…` subscription), instead of `topics`.",
            )
            .example("^events-.*")
            .opt::<String>();
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
        let group_id = s
            .key("group_id", "The consumer group.")
            .example("weir")
            .req::<String>("the consumer group");
        let high = s
            .key(
                "high_watermark",
                "Bytes fetched and not yet durable above which the assignment is paused.",
            )
            .or(ByteSize::mib(32));
        let low = s
            .key(
                "low_watermark",
                "Bytes fetched and not yet durable below which a paused assignment is resumed.",
            )
            .default_text("a quarter of `high_watermark`")
            .or(size(high.bytes() / 4));
        if low.bytes() >= high.bytes() && !s.failed(&["low_watermark", "high_watermark"]) {
            s.error(
                "low_watermark",
                format!("{low} is not below high_watermark = {high}"),
            );
        }
        let fetch_max_bytes = s
            .key(
                "fetch_max_bytes",
                "librdkafka's `fetch.max.bytes` and `max.partition.fetch.bytes`: one fetch (at least 1 KiB).",
            )
            .or(ByteSize::mib(1));
        if fetch_max_bytes.bytes() < 1024 {
            s.error(
                "fetch_max_bytes",
                format!("expected at least 1 KiB, found {fetch_max_bytes}"),
            );
        }
        let prefetch_bytes = s
            .key(
                "prefetch_bytes",
                "librdkafka's prefetch queue (`queued.max.messages.kbytes`; at least 1 KiB).",
            )
            .or(ByteSize::mib(1));
        if prefetch_bytes.bytes() < 1024 {
            s.error(
                "prefetch_bytes",
                format!("expected at least 1 KiB, found {prefetch_bytes}"),
            );
        }
        let floor = high.bytes() + fetch_max_bytes.bytes();
        let max_held_bytes = s
            .key(
                "max_held_bytes",
                "The source's byte budget: records fetched and not yet durable, at most (at least `high_watermark + fetch_max_bytes`).",
            )
            .default_text("`high_watermark + fetch_max_bytes + prefetch_bytes`")
            .or(size(floor + prefetch_bytes.bytes()));
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
        let security_protocol = s
            .key("security_protocol", "librdkafka's `security.protocol`.")
            .or(Security::Plaintext);
        let sasl_mechanism = s
            .key(
                "sasl_mechanism",
                "`sasl.mechanism`: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.",
            )
            .example("SCRAM-SHA-256")
            .opt::<String>();
        let sasl_username = s
            .key("sasl_username", "`sasl.username`.")
            .example("weir")
            .opt::<String>();
        let sasl_password_env = s
            .key(
                "sasl_password_env",
                "Environment variable holding `sasl.password`.",
            )
            .example("WEIR_KAFKA_PASSWORD")
            .opt::<String>();
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
        let ca_file = s
            .key(
                "ca_file",
                "PEM file of the CA certificate(s) for TLS (`ssl` and `sasl_ssl`).",
            )
            .default_text("the system's CA certificates")
            .example("/etc/weir/ca.pem")
            .opt::<PathBuf>();
        if ca_file.is_some() && !matches!(security_protocol, Security::Ssl | Security::SaslSsl) {
            s.error(
                "ca_file",
                "only applies with security_protocol = \"ssl\" or \"sasl_ssl\"",
            );
        }
        let properties = properties(s);
        let start_from = s
            .key(
                "start_from",
                "Where a group with no committed offset starts (librdkafka's `auto.offset.reset`).",
            )
            .or(StartFrom::Earliest);
        Some(Self {
            topics,
            topic_pattern,
            start_from,
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
#[path = "config_tests.rs"]
mod tests;
