//! `type = "mqtt"` sources: broker URL, subscriptions, session and the bounds of the
//! incoming window.

use std::num::NonZeroU32;
use std::path::PathBuf;

use serde::Serialize;
use toml::Value;

use crate::keys::units::{FromValue, ToValue, describe, mismatch, string_enum};
use crate::keys::{Bounds, ByteSize, Duration, Section, check_env_name, join, times};
use crate::sources::SourceKeys;

/// MQTT quality of service of a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(into = "u8")]
#[allow(clippy::enum_variant_names, reason = "the MQTT specification's names")]
pub enum Qos {
    /// At most once: nothing to withhold; a byte-bounded queue drops the newest.
    AtMostOnce,
    /// At least once: the PUBACK is withheld until the record is durable.
    AtLeastOnce,
    /// Exactly once: PUBREC withheld until durable.
    ExactlyOnce,
}

impl From<Qos> for u8 {
    fn from(qos: Qos) -> Self {
        match qos {
            Qos::AtMostOnce => 0,
            Qos::AtLeastOnce => 1,
            Qos::ExactlyOnce => 2,
        }
    }
}

impl ToValue for Qos {
    fn to_value(&self) -> Value {
        Value::Integer(u8::from(*self).into())
    }
}

impl FromValue for Qos {
    const EXPECTED: &'static str = "a QoS of 0, 1 or 2";
    const KIND: &'static str = "one of 0 | 1 | 2";
    fn from_value(value: &Value) -> Result<Self, String> {
        match value.as_integer() {
            Some(0) => Ok(Self::AtMostOnce),
            Some(1) => Ok(Self::AtLeastOnce),
            Some(2) => Ok(Self::ExactlyOnce),
            _ => Err(mismatch(Self::EXPECTED, value)),
        }
    }
}

/// MQTT protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MqttProtocol {
    /// MQTT 3.1.1: the receive window is the broker's setting.
    V311,
    /// MQTT 5: the client announces its receive maximum.
    V5,
}

string_enum!(MqttProtocol { "3.1.1" => V311, "5" => V5 });

/// Plain TCP or TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MqttScheme {
    /// `mqtt://`, default port 1883.
    Tcp,
    /// `mqtts://`, default port 8883.
    Tls,
}

string_enum!(MqttScheme { "mqtt" => Tcp, "mqtts" => Tls });

/// A parsed broker URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MqttUrl {
    /// `mqtt` or `mqtts`.
    pub scheme: MqttScheme,
    /// Host name or IP address.
    pub host: String,
    /// Port (1883 or 8883 when not written).
    pub port: u16,
}

impl FromValue for MqttUrl {
    const EXPECTED: &'static str = r#"a URL like "mqtt://127.0.0.1:1883" or "mqtts://broker:8883""#;
    const KIND: &'static str = r#"URL ("mqtt://host:1883", "mqtts://host:8883")"#;
    fn from_value(value: &Value) -> Result<Self, String> {
        let bad = || mismatch(Self::EXPECTED, value);
        let text = value.as_str().ok_or_else(bad)?;
        let (scheme, rest) = text.split_once("://").ok_or_else(bad)?;
        let scheme = match scheme {
            "mqtt" => MqttScheme::Tcp,
            "mqtts" => MqttScheme::Tls,
            _ => return Err(bad()),
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(['@', '/', '?', '#']) {
            return Err(format!(
                "{}: credentials go in username_env/password_env, and the URL has no path",
                bad()
            ));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && !host.ends_with(':') => {
                (host, port.parse::<u16>().map_err(|_| bad())?)
            }
            Some(_) => return Err(bad()),
            None => (
                authority,
                if scheme == MqttScheme::Tls {
                    8883
                } else {
                    1883
                },
            ),
        };
        if host.is_empty() || port == 0 {
            return Err(bad());
        }
        Ok(Self {
            scheme,
            host: host.to_owned(),
            port,
        })
    }
}

/// One subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MqttTopic {
    /// Topic filter; `+` matches one level, `#` the rest.
    pub filter: String,
    /// Requested QoS.
    pub qos: Qos,
}

/// `type = "mqtt"`: QoS 1/2 acks withheld until durable while the event loop keeps
/// polling; QoS 0 through a byte-bounded queue that drops (and counts) the newest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MqttConfig {
    /// The broker. Required.
    pub url: MqttUrl,
    /// PEM file of the CA certificate(s) that `mqtts://` trusts for the broker's
    /// certificate (the system's CA certificates when absent). Read at startup.
    pub ca_file: Option<PathBuf>,
    /// Client id; stable across restarts so a persistent session survives them.
    /// Default `weir-<source name>`.
    pub client_id: String,
    /// Subscriptions, written as `{ filter, qos }` tables or as filters with the
    /// source's `qos` (default 1). Required, not empty.
    pub topics: Vec<MqttTopic>,
    /// Start with a fresh session. Default false (a persistent session) when any
    /// subscription is QoS 1 or 2, true otherwise.
    pub clean_session: bool,
    /// MQTT 5 only: how long the broker keeps the session after a disconnect. Default 1 h
    /// for a persistent session, 0 s for a clean one.
    #[serde(serialize_with = "serialize_opt_duration")]
    pub session_expiry: Option<std::time::Duration>,
    /// Keepalive, whole seconds up to 65535. Default 30 s.
    pub keepalive: Duration,
    /// Environment variable holding the user name.
    pub username_env: Option<String>,
    /// Environment variable holding the password (needs `username_env`).
    pub password_env: Option<String>,
    /// `"3.1.1"` (default) or `"5"`.
    pub protocol: MqttProtocol,
    /// Largest message accepted (the client's maximum packet size). Default 256 KiB.
    pub max_message_bytes: ByteSize,
    /// The broker's inflight window for QoS 1/2 (mosquitto's `max_inflight_messages`),
    /// or the receive maximum weir announces under MQTT 5. Default 20.
    pub expected_broker_window: NonZeroU32,
    /// Above `expected_broker_window × unacked_guard_multiple` unacked messages (a
    /// broker sending beyond its window) reading pauses until the WAL makes room; if
    /// none comes within a keepalive, the guard drops the connection. Default 4.
    pub unacked_guard_multiple: NonZeroU32,
    /// Byte budget of the QoS 0 queue; when full the newest message is dropped and
    /// counted. Default 8 MiB.
    pub qos0_queue_bytes: ByteSize,
}

fn serialize_opt_duration<S: serde::Serializer>(
    duration: &Option<std::time::Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match duration {
        Some(duration) => serializer.collect_str(&humantime::format_duration(*duration)),
        None => serializer.serialize_none(),
    }
}

/// MQTT's largest packet (the remaining-length field's limit).
const MQTT_MAX_PACKET_BYTES: u64 = 268_435_455;

impl SourceKeys for MqttConfig {
    const TYPE: &'static str = "mqtt";

    fn parse(s: &mut Section<'_>, name: &str) -> Option<Self> {
        let url = s.req::<MqttUrl>("url", "e.g. \"mqtt://127.0.0.1:1883\"");
        let ca_file = s.opt::<PathBuf>("ca_file");
        if ca_file.is_some() && url.as_ref().is_some_and(|u| u.scheme == MqttScheme::Tcp) {
            s.error(
                "ca_file",
                "only applies to mqtts:// URLs; use mqtts:// or remove ca_file",
            );
        }
        let client_id = s.or("client_id", format!("weir-{name}"));
        let default_qos = s.or("qos", Qos::AtLeastOnce);
        let topics = parse_topics(s, default_qos);
        let any_acked = topics
            .as_ref()
            .is_none_or(|t| t.iter().any(|t| t.qos > Qos::AtMostOnce));
        let clean_session = s.or("clean_session", !any_acked);
        // An integer version gets one error that says how to write it.
        let protocol = match s.raw("protocol") {
            Some(value) if value.is_integer() => {
                s.error(
                    "protocol",
                    format!("expected a string, found {value}: write protocol = \"{value}\""),
                );
                None
            }
            Some(_) => s.opt::<MqttProtocol>("protocol"),
            None => Some(MqttProtocol::V311),
        };
        let expiry = s.opt::<std::time::Duration>("session_expiry");
        let session_expiry = match (protocol, expiry) {
            (Some(MqttProtocol::V311), Some(_)) => {
                s.error("session_expiry", "needs protocol = \"5\"; MQTT 3.1.1 sessions last until the broker expires them");
                None
            }
            (Some(MqttProtocol::V311) | None, _) => None,
            (Some(MqttProtocol::V5), Some(expiry)) => Some(expiry),
            (Some(MqttProtocol::V5), None) if clean_session => Some(std::time::Duration::ZERO),
            (Some(MqttProtocol::V5), None) => Some(std::time::Duration::from_secs(3600)),
        };
        if let Some(expiry) = session_expiry {
            if expiry.as_secs() > u64::from(u32::MAX) {
                s.error(
                    "session_expiry",
                    format!(
                        "expected at most {} s (MQTT's limit), found {}",
                        u32::MAX,
                        humantime::format_duration(expiry)
                    ),
                );
            } else if expiry.is_zero() && !clean_session {
                s.error("session_expiry", "0s ends the session at disconnect, so clean_session = false keeps nothing; give a duration or set clean_session = true");
            }
        }
        let keepalive = s.or("keepalive", Duration::secs(30));
        if keepalive.get().subsec_nanos() != 0 || keepalive.get().as_secs() > u64::from(u16::MAX) {
            s.error(
                "keepalive",
                format!(
                    "expected whole seconds between 1s and 65535s (MQTT's field), found {keepalive}"
                ),
            );
        }
        if protocol == Some(MqttProtocol::V5) && keepalive.get() < std::time::Duration::from_secs(5)
        {
            s.error(
                "keepalive",
                format!("expected at least 5s with protocol = \"5\" (the MQTT 5 client's minimum), found {keepalive}"),
            );
        }
        let username_env = s.opt::<String>("username_env");
        let password_env = s.opt::<String>("password_env");
        for (key, env) in [
            ("username_env", &username_env),
            ("password_env", &password_env),
        ] {
            if let Some(env) = env {
                check_env_name(s, key, env);
            }
        }
        if password_env.is_some() && username_env.is_none() {
            s.error(
                "password_env",
                "MQTT sends a password only with a user name; add username_env",
            );
        }
        let max_message_bytes = s.or("max_message_bytes", ByteSize::kib(256));
        if max_message_bytes.bytes() > MQTT_MAX_PACKET_BYTES {
            s.error(
                "max_message_bytes",
                format!(
                    "expected at most 256 MiB (MQTT's largest packet), found {max_message_bytes}"
                ),
            );
        }
        let expected_broker_window = s.or(
            "expected_broker_window",
            NonZeroU32::new(20).expect("20 > 0"),
        );
        if protocol == Some(MqttProtocol::V5) && expected_broker_window.get() > u32::from(u16::MAX)
        {
            s.error(
                "expected_broker_window",
                format!(
                    "is MQTT 5's receive maximum, at most 65535, found {expected_broker_window}"
                ),
            );
        }
        Some(Self {
            ca_file,
            client_id,
            clean_session,
            session_expiry,
            keepalive,
            username_env,
            password_env,
            protocol: protocol?,
            max_message_bytes,
            expected_broker_window,
            unacked_guard_multiple: s
                .or("unacked_guard_multiple", NonZeroU32::new(4).expect("4 > 0")),
            qos0_queue_bytes: s.or("qos0_queue_bytes", ByteSize::mib(8)),
            url: url?,
            topics: topics?,
        })
    }

    fn bounds(&self, bounds: &mut Bounds<'_>) {
        bounds.add(
            "window",
            Some(self.expected_broker_window.get().into()),
            self.held_limit_bytes(),
            format!(
                "QoS 1/2 messages awaiting durability: expected_broker_window {} × max_message_bytes {}; \
                 above that many bytes or {} unacked (a broker sending beyond its window), reading pauses \
                 until the WAL makes room",
                self.expected_broker_window,
                self.max_message_bytes,
                self.guard_limit()
            ),
        );
        bounds.add(
            "qos0_queue",
            None,
            self.qos0_queue_bytes.bytes(),
            "QoS 0 messages (a broker may downgrade any subscription): newest dropped and counted when full".to_owned(),
        );
        // Acks due and not yet written: taken from the ledger by the connection task and
        // written at once. They are at most the unacked messages: one past the guard, plus
        // redeliveries the guard does not count, and never more than one per packet id.
        // MQTT 5 queues them in rumqttc's request channel instead.
        let guard = self.guard_limit();
        let ids = u64::from(u16::MAX);
        let channel = super::client::request_channel(self) as u64;
        let request = super::client::request_bytes();
        let ack = super::client::ACK_BYTES;
        let (items, bytes, how) = match self.protocol {
            MqttProtocol::V311 => (
                ids,
                times(ids, ack).saturating_add(times(channel, request)),
                format!(
                    "acks due, written by the connection task in one flush per batch: one per \
                     packet id ({ids} × {ack} bytes, token and packet; about the guard's {guard} \
                     unless the broker redelivers), and {channel} queued subscriptions × \
                     {request} bytes"
                ),
            ),
            MqttProtocol::V5 => (
                channel,
                times(channel, request),
                format!(
                    "acks due, queued in the client's request channel ({channel} × {request} bytes; \
                     when it is full the connection is dropped and the broker redelivers)"
                ),
            ),
        };
        bounds.add("acks", Some(items), bytes, how);
        let in_flight = super::shell::IN_FLIGHT;
        let one_unit = super::shell::UNIT_BYTES.max(self.max_message_bytes.bytes());
        bounds.add(
            "appends_in_flight",
            Some(in_flight.units as u64),
            in_flight.bytes.saturating_add(one_unit),
            format!(
                "units encoded for the WAL and not yet durable (appended in arrival order while earlier ones are fsynced): \
                 at most {} units, new ones only below {} (a unit is up to {} records or about {})",
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
        if self.clean_session && self.topics.iter().any(|t| t.qos > Qos::AtMostOnce) {
            out.push(format!(
                "{}: QoS 1/2 with a clean session: messages not yet durable at a disconnect are not redelivered",
                join(path, "clean_session")
            ));
        }
    }
}

impl MqttConfig {
    /// Payload bytes of QoS 1/2 messages not yet durable above which reading pauses:
    /// the `window` bound of `weir validate`.
    pub fn held_limit_bytes(&self) -> u64 {
        times(
            self.expected_broker_window.get(),
            self.max_message_bytes.bytes(),
        )
    }

    /// Unacked QoS 1/2 messages holding a payload above which reading pauses.
    pub fn guard_limit(&self) -> u64 {
        u64::from(self.expected_broker_window.get())
            .saturating_mul(u64::from(self.unacked_guard_multiple.get()))
    }
}

/// Reads `topics`: a non-empty list of filters or `{ filter, qos }` tables.
fn parse_topics(s: &mut Section<'_>, default_qos: Qos) -> Option<Vec<MqttTopic>> {
    let path = s.key_path("topics");
    let diag = s.diagnostics();
    let Some(value) = s.raw("topics") else {
        s.error("topics", r#"missing required key (expected a list like ["sensors/#"] or [{ filter = "sensors/#", qos = 1 }])"#);
        return None;
    };
    let Some(array) = value.as_array().filter(|a| !a.is_empty()) else {
        s.error(
            "topics",
            format!(
                "expected a non-empty list of topic filters, found {}",
                describe(value)
            ),
        );
        return None;
    };
    let mut topics = Vec::with_capacity(array.len());
    let mut ok = true;
    for (i, element) in array.iter().enumerate() {
        let element_path = format!("{path}[{i}]");
        let topic = match element {
            Value::String(filter) => Some(MqttTopic {
                filter: filter.clone(),
                qos: default_qos,
            }),
            Value::Table(table) => {
                let mut t = Section::new(element_path.clone(), table, diag);
                let filter = t.req::<String>("filter", "");
                let qos = t.or("qos", default_qos);
                t.finish();
                filter.map(|filter| MqttTopic { filter, qos })
            }
            other => {
                diag.error(
                    &element_path,
                    format!(
                        "expected a topic filter or {{ filter, qos }}, found {}",
                        describe(other)
                    ),
                );
                None
            }
        };
        match topic {
            Some(topic) => {
                if let Err(message) = check_filter(&topic.filter) {
                    let filter_path = if element.is_table() {
                        join(&element_path, "filter")
                    } else {
                        element_path
                    };
                    diag.error(&filter_path, message);
                    ok = false;
                } else if topics.iter().any(|t: &MqttTopic| t.filter == topic.filter) {
                    diag.error(
                        &element_path,
                        format!("{:?} is subscribed twice", topic.filter),
                    );
                    ok = false;
                }
                topics.push(topic);
            }
            None => ok = false,
        }
    }
    ok.then_some(topics)
}

/// Checks an MQTT topic filter: non-empty, `#` only as the whole last level, `+` only as
/// a whole level.
fn check_filter(filter: &str) -> Result<(), String> {
    if filter.is_empty() {
        return Err("expected a topic filter, found an empty string".to_owned());
    }
    let levels: Vec<&str> = filter.split('/').collect();
    for (i, level) in levels.iter().enumerate() {
        let wildcard_misused = (level.contains('#') && (*level != "#" || i + 1 != levels.len()))
            || (level.contains('+') && *level != "+");
        if wildcard_misused {
            return Err(format!(
                "{filter:?} is not a valid topic filter: '+' must be a whole level and '#' the whole last level"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Result<MqttUrl, String> {
        MqttUrl::from_value(&Value::String(text.to_owned()))
    }

    #[test]
    fn urls_take_scheme_host_and_port() {
        assert_eq!(
            url("mqtt://127.0.0.1:18830"),
            Ok(MqttUrl {
                scheme: MqttScheme::Tcp,
                host: "127.0.0.1".into(),
                port: 18830
            })
        );
        assert_eq!(url("mqtts://broker").map(|u| u.port), Ok(8883));
        assert_eq!(url("mqtt://broker/").map(|u| u.port), Ok(1883));
        assert!(url("http://broker").is_err());
        assert!(
            url("mqtt://user:pw@broker")
                .unwrap_err()
                .contains("username_env")
        );
        assert!(url("mqtt://broker:99999").is_err());
        assert!(url("mqtt://:1883").is_err());
    }

    #[test]
    fn filters_check_wildcards() {
        assert!(check_filter("sensors/#").is_ok());
        assert!(check_filter("sensors/+/temp").is_ok());
        assert!(check_filter("#").is_ok());
        assert!(check_filter("sensors/#/temp").is_err());
        assert!(check_filter("sensors/te+").is_err());
        assert!(check_filter("").is_err());
    }
}
