//! The `kafka` source's librdkafka glue: the client configuration weir builds (its own
//! properties, then those passed through), and the consumer's callbacks: librdkafka's
//! logs and errors, rebalances (the durable offsets of revoked partitions committed
//! before they go, new assignments noted for the poll loop) and commit answers.

use std::sync::{Arc, PoisonError};

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::config::{KafkaConfig, Security, StartFrom};
use super::core::Partition;
use super::shell::{Shared, now};

/// The librdkafka configuration weir builds: its own properties, then those passed
/// through (never one weir owns: the config refuses them).
pub(super) fn client_config(config: &KafkaConfig, name: &str) -> Result<ClientConfig, String> {
    let mut c = ClientConfig::new();
    for (k, v) in &config.properties {
        c.set(k, v);
    }
    let kib = config.prefetch_bytes.bytes().div_ceil(1024).max(1);
    let fetch = config.fetch_max_bytes.bytes();
    c.set("bootstrap.servers", config.brokers.join(","))
        .set("group.id", &config.group_id)
        .set("client.id", format!("weir-{name}"))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set(
            "auto.offset.reset",
            match config.start_from {
                StartFrom::Earliest => "earliest",
                StartFrom::Latest => "latest",
            },
        )
        .set("fetch.max.bytes", fetch.to_string())
        .set("max.partition.fetch.bytes", fetch.to_string())
        .set("queued.max.messages.kbytes", kib.to_string())
        .set("queued.min.messages", "1")
        .set(
            "security.protocol",
            match config.security_protocol {
                Security::Plaintext => "plaintext",
                Security::Ssl => "ssl",
                Security::SaslPlaintext => "sasl_plaintext",
                Security::SaslSsl => "sasl_ssl",
            },
        );
    // librdkafka refuses a fetch.max.bytes below message.max.bytes (1 MB by default).
    if fetch < 1_000_000 && !config.properties.contains_key("message.max.bytes") {
        c.set("message.max.bytes", fetch.to_string());
    }
    if let Some(m) = &config.sasl_mechanism {
        c.set("sasl.mechanism", m);
    }
    if let Some(u) = &config.sasl_username {
        c.set("sasl.username", u);
    }
    if let Some(env) = &config.sasl_password_env {
        let password = std::env::var(env)
            .map_err(|_| format!("sasl_password_env: the variable {env} is not set"))?;
        c.set("sasl.password", password);
    }
    if let Some(ca) = &config.ca_file {
        std::fs::metadata(ca).map_err(|e| format!("ca_file: cannot read {}: {e}", ca.display()))?;
        c.set("ssl.ca.location", ca.display().to_string());
    }
    // librdkafka's `debug` contexts (passed through) are logged at INFO.
    c.set_log_level(if config.properties.contains_key("debug") {
        RDKafkaLogLevel::Debug
    } else {
        RDKafkaLogLevel::Warning
    });
    Ok(c)
}

/// librdkafka's callbacks: rebalances, commits, errors and logs.
pub(super) struct Context {
    name: Arc<str>,
    shared: Arc<Shared>,
}

impl Context {
    pub(super) fn new(name: &str, shared: Arc<Shared>) -> Self {
        Context {
            name: name.into(),
            shared,
        }
    }
}

fn partitions(tpl: &TopicPartitionList) -> Vec<Partition> {
    tpl.elements()
        .iter()
        .map(|e| (e.topic().to_owned(), e.partition()))
        .collect()
}

pub(super) fn offsets_list(offsets: &[(Partition, i64)]) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for ((topic, partition), offset) in offsets {
        let _ = tpl.add_partition_offset(topic, *partition, Offset::Offset(*offset));
    }
    tpl
}

impl ClientContext for Context {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(source = %self.name, "kafka: librdkafka {fac}: {message}");
            }
            RDKafkaLogLevel::Warning => {
                tracing::warn!(source = %self.name, "kafka: librdkafka {fac}: {message}");
            }
            _ => tracing::info!(source = %self.name, "kafka: librdkafka {fac}: {message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        tracing::warn!(source = %self.name, "kafka: {error}: {reason}");
        self.shared.error(format!("{error}: {reason}"));
    }
}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(tpl) => {
                let revoked = partitions(tpl);
                let owed = self.shared.core().revoke(&revoked);
                tracing::info!(source = %self.name, "kafka: {} partitions revoked; committing {} durable offsets first", revoked.len(), owed.len());
                if !owed.is_empty()
                    && let Err(e) = consumer.commit(&offsets_list(&owed), CommitMode::Sync)
                {
                    let message = format!(
                        "commit of durable offsets before a revocation failed: {e}; the new owner reads them again"
                    );
                    tracing::warn!(source = %self.name, "kafka: {message}");
                    self.shared.error(message);
                }
            }
            Rebalance::Error(e) => {
                let message = format!("rebalance failed: {e}");
                tracing::warn!(source = %self.name, "kafka: {message}");
                self.shared.error(message);
            }
            Rebalance::Assign(_) => {}
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            let assigned = partitions(tpl);
            tracing::info!(source = %self.name, "kafka: assigned {} partitions: {assigned:?}", assigned.len());
            self.shared.core().assign(now(), &assigned);
            self.shared
                .assigned
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(assigned);
        }
    }

    fn commit_callback(
        &self,
        result: rdkafka::error::KafkaResult<()>,
        offsets: &TopicPartitionList,
    ) {
        let mut core = self.shared.core();
        match result {
            Ok(()) => {
                for e in offsets.elements() {
                    if let Offset::Offset(o) = e.offset() {
                        core.committed(&(e.topic().to_owned(), e.partition()), o);
                    }
                }
            }
            Err(e) => core.commit_failed(format!("commit failed: {e}")),
        }
    }
}
