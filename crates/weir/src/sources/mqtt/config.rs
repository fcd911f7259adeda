//! `type = "mqtt"` sources: broker URL, subscriptions, session and the bounds of the
//! incoming window.

use std::num::NonZeroU32;
use std::path::PathBuf;

use serde::Serialize;

use super::values::{MqttProtocol, MqttScheme, MqttTopic, MqttUrl, Qos, parse_topics};
use crate::keys::units::FromValue;
use crate::keys::{Bounds, ByteSize, Duration, Section, check_env_name, join, times};
use crate::sources::SourceKeys;

/// `type = "mqtt"`: QoS 1/2 acks withheld until durable while the event loop keeps
/// polling; QoS 0 through a byte-bounded queue that drops (and counts) the newest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MqttConfig {
    /// `url`: the broker.
    pub url: MqttUrl,
    /// `ca_file`: the CA certificate(s) that `mqtts://` trusts (the system's when
    /// `None`).
    pub ca_file: Option<PathBuf>,
    /// `client_id`: stable across restarts, so that a persistent session survives them.
    pub client_id: String,
    /// `topics`: the subscriptions (not empty).
    pub topics: Vec<MqttTopic>,
    /// `clean_session`: whether to start with a fresh session.
    pub clean_session: bool,
    /// `session_expiry`: MQTT 5 only, how long the broker keeps the session after a
    /// disconnect.
    #[serde(serialize_with = "serialize_opt_duration")]
    pub session_expiry: Option<std::time::Duration>,
    /// `keepalive`: whole seconds up to 65535.
    pub keepalive: Duration,
    /// `username_env`: the environment variable holding the user name.
    pub username_env: Option<String>,
    /// `password_env`: the environment variable holding the password.
    pub password_env: Option<String>,
    /// `protocol`: `"3.1.1"` or `"5"`.
    pub protocol: MqttProtocol,
    /// `max_message_bytes`: the largest message accepted (the client's maximum packet
    /// size).
    pub max_message_bytes: ByteSize,
    /// `expected_broker_window`: the broker's inflight window for QoS 1/2, or the
    /// receive maximum weir announces under MQTT 5.
    pub expected_broker_window: NonZeroU32,
    /// `unacked_guard_multiple`: above `expected_broker_window ×` this many unacked
    /// messages (a broker sending beyond its window) reading pauses until the WAL makes
    /// room; if none comes within a keepalive, the guard drops the connection.
    pub unacked_guard_multiple: NonZeroU32,
    /// `qos0_queue_bytes`: the byte budget of the QoS 0 queue.
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
    const ABOUT: &'static str = "Subscriptions to an MQTT broker: QoS 1/2 acks withheld until durable while the event loop keeps polling; QoS 0 through a byte-bounded queue that drops the newest, counted.";

    fn parse(s: &mut Section<'_>, name: &str) -> Option<Self> {
        let url = s
            .key(
                "url",
                "The broker: `mqtt://host:port` or `mqtts://host:port` (TLS).",
            )
            .example("mqtt://127.0.0.1:1883")
            .req::<MqttUrl>("e.g. \"mqtt://127.0.0.1:1883\"");
        let ca_file = s
            .key(
                "ca_file",
                "PEM file of the CA certificate(s) that `mqtts://` trusts for the broker's certificate; read at startup.",
            )
            .default_text("the system's CA certificates")
            .example("/etc/weir/ca.pem")
            .opt::<PathBuf>();
        if ca_file.is_some() && url.as_ref().is_some_and(|u| u.scheme == MqttScheme::Tcp) {
            s.error(
                "ca_file",
                "only applies to mqtts:// URLs; use mqtts:// or remove ca_file",
            );
        }
        let client_id = s
            .key(
                "client_id",
                "Client id; keep it stable across restarts so that a persistent session survives them.",
            )
            .default_text("`weir-<source name>`")
            .or(format!("weir-{name}"));
        let default_qos = s
            .key("qos", "QoS of the subscriptions written as plain filters.")
            .or(Qos::AtLeastOnce);
        let topics = parse_topics(s, default_qos);
        let any_acked = topics
            .as_ref()
            .is_none_or(|t| t.iter().any(|t| t.qos > Qos::AtMostOnce));
        let clean_session = s
            .key("clean_session", "Start with a fresh session.")
            .default_text(
                "false (a persistent session) when any subscription is QoS 1 or 2, else true",
            )
            .or(!any_acked);
        let protocol = s
            .key("protocol", "MQTT protocol version.")
            .default(&MqttProtocol::V311)
            .raw(<MqttProtocol as FromValue>::KIND);
        // An integer version gets one error that says how to write it.
        let protocol = match protocol {
            Some(value) if value.is_integer() => {
                s.error(
                    "protocol",
                    format!("expected a string, found {value}: write protocol = \"{value}\""),
                );
                None
            }
            Some(value) => s.convert::<MqttProtocol>("protocol", value),
            None => Some(MqttProtocol::V311),
        };
        let expiry = s
            .key(
                "session_expiry",
                "MQTT 5 only: how long the broker keeps the session after a disconnect.",
            )
            .default_text("1h for a persistent session, 0s for a clean one")
            .example("1h")
            .opt::<std::time::Duration>();
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
        let keepalive = s
            .key(
                "keepalive",
                "Keepalive, whole seconds up to 65535s (at least 5s with MQTT 5).",
            )
            .or(Duration::secs(30));
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
        let username_env = s
            .key(
                "username_env",
                "Environment variable holding the user name.",
            )
            .example("WEIR_MQTT_USER")
            .opt::<String>();
        let password_env = s
            .key(
                "password_env",
                "Environment variable holding the password (needs `username_env`).",
            )
            .example("WEIR_MQTT_PASSWORD")
            .opt::<String>();
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
        let max_message_bytes = s
            .key(
                "max_message_bytes",
                "Largest message accepted (the client's maximum packet size, at most 256 MiB).",
            )
            .or(ByteSize::kib(256));
        if max_message_bytes.bytes() > MQTT_MAX_PACKET_BYTES {
            s.error(
                "max_message_bytes",
                format!(
                    "expected at most 256 MiB (MQTT's largest packet), found {max_message_bytes}"
                ),
            );
        }
        let expected_broker_window = s
            .key(
                "expected_broker_window",
                "The broker's inflight window for QoS 1/2 (mosquitto's `max_inflight_messages`), or the receive maximum weir announces under MQTT 5.",
            )
            .unit("messages")
            .or(NonZeroU32::new(20).expect("20 > 0"));
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
            // Read after `protocol?`, as they always were: with a bad `protocol` they are
            // not read (and, when present, reported as unknown).
            protocol: protocol?,
            max_message_bytes,
            expected_broker_window,
            unacked_guard_multiple: s
                .key(
                    "unacked_guard_multiple",
                    "Above `expected_broker_window ×` this many unacked messages, reading pauses until the WAL makes room; the connection is dropped if none comes within a keepalive.",
                )
                .or(NonZeroU32::new(4).expect("4 > 0")),
            qos0_queue_bytes: s
                .key(
                    "qos0_queue_bytes",
                    "Byte budget of the QoS 0 queue; when it is full the newest message is dropped and counted.",
                )
                .or(ByteSize::mib(8)),
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
