//! One face over rumqttc's MQTT 3.1.1 and MQTT 5 clients: options from the config,
//! events reduced to what the source needs, acks by packet id.

use std::sync::Arc;
use std::time::Duration;

use rumqttc::v5::mqttbytes::v5 as m5;
use rumqttc::{QoS, v5};
use rustls::pki_types::ServerName;

use crate::keys::tls;

use super::config::{MqttConfig, MqttProtocol, MqttScheme, Qos};
use super::core::{AckToken, Message};

/// Room above `max_message_bytes` for the rest of a PUBLISH packet (topic up to 64 KiB,
/// properties), so that a payload a little too large still arrives, is acked and goes
/// to the quarantine instead of breaking the connection.
const PACKET_ROOM: u64 = 64 * 1024 + 1024;

/// What the connection task sees.
#[derive(Debug)]
pub enum Event {
    /// Connected; `session_present` tells whether the broker kept our session.
    Connected {
        /// The broker kept the session (subscriptions and unacked messages).
        session_present: bool,
    },
    /// A PUBLISH.
    Publish(Message),
    /// The broker refused some subscriptions: their positions in the SUBSCRIBE (the
    /// order of `topics`) and the broker's reason.
    SubscriptionRefused(Vec<(usize, String)>),
    /// Anything else (pings, outgoing acks, SUBACKs that succeeded).
    Other,
}

/// The event-loop half: polled by the connection task and nothing else.
pub enum Connection {
    /// MQTT 3.1.1.
    V4(Box<rumqttc::EventLoop>, rumqttc::AsyncClient),
    /// MQTT 5.
    V5(Box<v5::EventLoop>, v5::AsyncClient),
}

/// The ack half, used by the appender.
#[derive(Clone)]
pub enum Acker {
    /// MQTT 3.1.1.
    V4(rumqttc::AsyncClient),
    /// MQTT 5.
    V5(v5::AsyncClient),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Connection")
    }
}

impl std::fmt::Debug for Acker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Acker")
    }
}

fn qos(q: Qos) -> QoS {
    match q {
        Qos::AtMostOnce => QoS::AtMostOnce,
        Qos::AtLeastOnce => QoS::AtLeastOnce,
        Qos::ExactlyOnce => QoS::ExactlyOnce,
    }
}

fn qos5(q: QoS) -> rumqttc::v5::mqttbytes::QoS {
    match q {
        QoS::AtMostOnce => rumqttc::v5::mqttbytes::QoS::AtMostOnce,
        QoS::AtLeastOnce => rumqttc::v5::mqttbytes::QoS::AtLeastOnce,
        QoS::ExactlyOnce => rumqttc::v5::mqttbytes::QoS::ExactlyOnce,
    }
}

/// The largest incoming packet the client accepts.
pub fn packet_limit(config: &MqttConfig) -> u64 {
    let max = config.max_message_bytes.bytes();
    (max + max.min(PACKET_ROOM)).max(max + 1024)
}

/// Builds the client from the config. Credentials are read from the environment here,
/// and for `mqtts://` the CA certificates.
///
/// # Errors
///
/// A message naming the key when a credential variable is unset, or for `mqtts://`
/// when the host is no TLS server name or no CA certificate can be loaded.
pub fn build(config: &MqttConfig) -> Result<(Connection, Acker), String> {
    let tls = match config.url.scheme {
        MqttScheme::Tls => Some(tls_config(config)?),
        MqttScheme::Tcp => None,
    };
    let credentials = credentials(config)?;
    let window = u64::from(config.expected_broker_window.get());
    // Acks and subscriptions pass through this channel. The appender never waits for
    // room in it (it keeps what does not fit, see `Acker::try_ack`): while reading is
    // paused nothing drains it, and a broker sending beyond its window is read faster
    // than the event loop writes acks (one per poll against up to ten packets per read).
    let capacity = ack_channel(config);
    let keepalive = config.keepalive.get();
    let limit = packet_limit(config);
    let host = config.url.host.clone();
    let port = config.url.port;
    // What both option types share: the same method names on different types.
    macro_rules! shared_options {
        ($o:ident) => {
            $o.set_keep_alive(keepalive)
                .set_manual_acks(true)
                .set_request_channel_capacity(capacity);
            if let Some((user, password)) = credentials {
                $o.set_credentials(user, password.unwrap_or_default());
            }
            if let Some(tls) = tls {
                $o.set_transport(rumqttc::Transport::tls_with_config(tls));
            }
        };
    }
    match config.protocol {
        MqttProtocol::V311 => {
            let mut o = rumqttc::MqttOptions::new(&config.client_id, host, port);
            shared_options!(o);
            o.set_clean_session(config.clean_session)
                .set_max_packet_size(usize::try_from(limit).unwrap_or(usize::MAX), 64 * 1024);
            let (client, eventloop) = rumqttc::AsyncClient::new(o, capacity);
            Ok((
                Connection::V4(Box::new(eventloop), client.clone()),
                Acker::V4(client),
            ))
        }
        MqttProtocol::V5 => {
            let mut o = v5::MqttOptions::new(&config.client_id, host, port);
            shared_options!(o);
            o.set_clean_start(config.clean_session)
                .set_receive_maximum(Some(u16::try_from(window).unwrap_or(u16::MAX)))
                .set_max_packet_size(Some(u32::try_from(limit).unwrap_or(u32::MAX)))
                .set_session_expiry_interval(
                    config
                        .session_expiry
                        .map(|d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX)),
                );
            let (client, eventloop) = v5::AsyncClient::new(o, capacity);
            Ok((
                Connection::V5(Box::new(eventloop), client.clone()),
                Acker::V5(client),
            ))
        }
    }
}

/// Requests the client's channel holds: the guard's number of acks and a few
/// subscriptions.
pub fn ack_channel(config: &MqttConfig) -> usize {
    usize::try_from(config.guard_limit().saturating_add(64)).unwrap_or(1 << 16)
}

/// Bytes one queued request takes in the client's channel (the larger protocol's).
pub fn request_bytes() -> u64 {
    std::mem::size_of::<rumqttc::Request>().max(std::mem::size_of::<v5::Request>()) as u64
}

/// The TLS setup for `mqtts://`: rustls with the ring provider, chosen here rather
/// than process-wide; the roots are the PEM certificates of `ca_file`, or the system's
/// when it is absent. rumqttc checks the certificate against the URL's host (a DNS name
/// or an IP address).
fn tls_config(config: &MqttConfig) -> Result<rumqttc::TlsConfiguration, String> {
    let host = config.url.host.as_str();
    if ServerName::try_from(host).is_err() {
        return Err(format!(
            "url: {host:?} cannot be checked against a TLS certificate (expected a DNS name \
             or an IP address without brackets)"
        ));
    }
    let roots = tls::roots(config.ca_file.as_deref(), "broker")?;
    let client = tls::client_config(roots)?;
    Ok(rumqttc::TlsConfiguration::Rustls(Arc::new(client)))
}

fn credentials(config: &MqttConfig) -> Result<Option<(String, Option<String>)>, String> {
    let read = |key: &str, var: &str| {
        std::env::var(var)
            .map_err(|_| format!("{key}: the environment variable {var} is not set (or not UTF-8)"))
    };
    let Some(user_var) = &config.username_env else {
        return Ok(None);
    };
    let user = read("username_env", user_var)?;
    let password = match &config.password_env {
        Some(var) => Some(read("password_env", var)?),
        None => None,
    };
    Ok(Some((user, password)))
}

impl Connection {
    /// The next event. Polling also reconnects after an error, sends queued acks and
    /// keepalive pings.
    ///
    /// # Errors
    ///
    /// The connection's error, as text; poll again (after a backoff) to reconnect.
    ///
    /// # Cancel safety
    ///
    /// As rumqttc's `poll`: cancel-safe between packets.
    pub async fn poll(&mut self) -> Result<Event, String> {
        match self {
            Connection::V4(eventloop, _) => match eventloop.poll().await {
                Ok(rumqttc::Event::Incoming(packet)) => Ok(v4_event(packet)),
                Ok(rumqttc::Event::Outgoing(_)) => Ok(Event::Other),
                Err(e) => Err(describe_v4(&e)),
            },
            Connection::V5(eventloop, _) => match eventloop.poll().await {
                Ok(v5::Event::Incoming(packet)) => Ok(v5_event(packet)),
                Ok(v5::Event::Outgoing(_)) => Ok(Event::Other),
                Err(e) => Err(e.to_string()),
            },
        }
    }

    /// Drops the network connection at once (no DISCONNECT packet: the broker keeps
    /// the session and redelivers what was not acked). The next poll reconnects.
    /// Returns the QoS 0 messages already read off it (see [`take_stale`](Self::take_stale)).
    #[must_use = "QoS 0 messages already received: offer them"]
    pub fn drop_connection(&mut self) -> Vec<Message> {
        match self {
            Connection::V4(eventloop, _) => eventloop.clean(),
            Connection::V5(eventloop, _) => eventloop.clean(),
        }
        self.take_stale()
    }

    /// Empties the events rumqttc read off a connection that is gone but had not
    /// handed out yet. One read yields many packets, and neither `clean` nor an error
    /// drops them: the next polls would hand them out after the new CONNACK, as if the
    /// new connection had sent them — written after the redelivered messages that came
    /// before them (per-topic order broken) and acked by packet ids the new connection
    /// never used. QoS 1/2 PUBLISHes are discarded (never acked, so the broker
    /// redelivers them); QoS 0 ones are returned, to be taken like any other.
    #[must_use = "QoS 0 messages already received: offer them"]
    pub fn take_stale(&mut self) -> Vec<Message> {
        let events: Vec<Event> = match self {
            Connection::V4(eventloop, _) => eventloop
                .state
                .events
                .drain(..)
                .filter_map(|e| match e {
                    rumqttc::Event::Incoming(p) => Some(v4_event(p)),
                    rumqttc::Event::Outgoing(_) => None,
                })
                .collect(),
            Connection::V5(eventloop, _) => eventloop
                .state
                .events
                .drain(..)
                .filter_map(|e| match e {
                    v5::Event::Incoming(p) => Some(v5_event(p)),
                    v5::Event::Outgoing(_) => None,
                })
                .collect(),
        };
        events
            .into_iter()
            .filter_map(|e| match e {
                Event::Publish(m) if m.qos == 0 => Some(m),
                _ => None,
            })
            .collect()
    }

    /// Subscribes to the configured topics.
    ///
    /// # Errors
    ///
    /// When the request cannot be queued.
    pub fn subscribe(&self, config: &MqttConfig) -> Result<(), String> {
        match self {
            Connection::V4(_, client) => client
                .try_subscribe_many(
                    config
                        .topics
                        .iter()
                        .map(|t| rumqttc::SubscribeFilter::new(t.filter.clone(), qos(t.qos))),
                )
                .map_err(|e| e.to_string()),
            Connection::V5(_, client) => client
                .try_subscribe_many(
                    config
                        .topics
                        .iter()
                        .map(|t| m5::Filter::new(t.filter.clone(), qos5(qos(t.qos)))),
                )
                .map_err(|e| e.to_string()),
        }
    }

    /// After resuming a session, the broker may resend PUBREL for QoS 2 messages whose
    /// PUBREC it got before the connection broke; rumqttc forgot those packet ids with
    /// the old connection and would answer by disconnecting ("unsolicited pubrel",
    /// rumqtt issue #664), forever. Marking every packet id as an incoming QoS 2
    /// exchange makes it answer any PUBREL with PUBCOMP, which MQTT 5 prescribes for an
    /// unknown packet id (§4.3.3) and which completes what was already acked.
    pub fn expect_pubrels(&mut self) {
        match self {
            Connection::V4(eventloop, _) => {
                for pkid in 1..=u16::MAX {
                    let mut p = rumqttc::Publish::new("", QoS::ExactlyOnce, Vec::new());
                    p.pkid = pkid;
                    let _ = eventloop
                        .state
                        .handle_incoming_packet(rumqttc::Incoming::Publish(p));
                    eventloop.state.events.pop_back();
                }
            }
            Connection::V5(eventloop, _) => {
                for pkid in 1..=u16::MAX {
                    let mut p = m5::Publish::new(
                        "",
                        rumqttc::v5::mqttbytes::QoS::ExactlyOnce,
                        Vec::new(),
                        None,
                    );
                    p.pkid = pkid;
                    let _ = eventloop
                        .state
                        .handle_incoming_packet(m5::Packet::Publish(p));
                    eventloop.state.events.pop_back();
                }
            }
        }
    }
}

fn describe_v4(e: &rumqttc::ConnectionError) -> String {
    match e {
        rumqttc::ConnectionError::MqttState(rumqttc::StateError::Deserialization(
            rumqttc::Error::PayloadSizeLimitExceeded(n),
        )) => format!(
            "the broker sent a {n}-byte packet, above the client's limit (max_message_bytes plus room for the topic); \
             it will be redelivered: raise max_message_bytes or cap the broker's message_size_limit"
        ),
        e => e.to_string(),
    }
}

fn v4_event(packet: rumqttc::Packet) -> Event {
    match packet {
        rumqttc::Packet::ConnAck(ack) => Event::Connected {
            session_present: ack.session_present,
        },
        rumqttc::Packet::Publish(p) => Event::Publish(Message {
            topic: p.topic,
            payload: p.payload,
            qos: p.qos as u8,
            retain: p.retain,
            dup: p.dup,
            pkid: p.pkid,
            user_properties: Vec::new(),
        }),
        rumqttc::Packet::SubAck(ack) => {
            let refused = ack
                .return_codes
                .iter()
                .enumerate()
                .filter(|(_, c)| matches!(c, rumqttc::SubscribeReasonCode::Failure))
                .map(|(i, _)| (i, "failure".to_owned()))
                .collect::<Vec<_>>();
            if refused.is_empty() {
                Event::Other
            } else {
                Event::SubscriptionRefused(refused)
            }
        }
        _ => Event::Other,
    }
}

fn v5_event(packet: m5::Packet) -> Event {
    match packet {
        m5::Packet::ConnAck(ack) => Event::Connected {
            session_present: ack.session_present,
        },
        m5::Packet::Publish(p) => Event::Publish(Message {
            topic: String::from_utf8_lossy(&p.topic).into_owned(),
            payload: p.payload,
            qos: p.qos as u8,
            retain: p.retain,
            dup: p.dup,
            pkid: p.pkid,
            user_properties: p.properties.map(|p| p.user_properties).unwrap_or_default(),
        }),
        m5::Packet::SubAck(ack) => {
            let refused = ack
                .return_codes
                .iter()
                .enumerate()
                .filter(|(_, c)| !matches!(c, m5::SubscribeReasonCode::Success(_)))
                .map(|(i, c)| (i, format!("{c:?}")))
                .collect::<Vec<_>>();
            if refused.is_empty() {
                Event::Other
            } else {
                Event::SubscriptionRefused(refused)
            }
        }
        _ => Event::Other,
    }
}

impl Acker {
    /// Queues the ack for `token` (PUBACK for QoS 1, PUBREC for QoS 2) if the client's
    /// channel has room; the event loop writes it on its next poll. Never waits.
    /// Returns false when the channel is full (or the client is gone): try again later.
    #[must_use = "an ack not queued must be tried again"]
    pub fn try_ack(&self, token: AckToken) -> bool {
        let q = if token.qos == 2 {
            QoS::ExactlyOnce
        } else {
            QoS::AtLeastOnce
        };
        match self {
            Acker::V4(client) => {
                let mut p = rumqttc::Publish::new("", q, Vec::new());
                p.pkid = token.pkid;
                client.try_ack(&p).is_ok()
            }
            Acker::V5(client) => {
                let mut p = m5::Publish::new("", qos5(q), Vec::new(), None);
                p.pkid = token.pkid;
                client.try_ack(&p).is_ok()
            }
        }
    }
}

/// How long to wait before reconnecting after `failures` consecutive failures: 100 ms
/// doubling up to `max`.
pub fn backoff(failures: u32, max: Duration) -> Duration {
    let base = Duration::from_millis(100);
    base.saturating_mul(1u32 << failures.min(16)).min(max)
}
