//! One face over rumqttc's MQTT 3.1.1 and MQTT 5 clients: options from the config,
//! events reduced to what the source needs, acks by packet id written in batches.

use std::sync::Arc;
use std::time::Duration;

use rumqttc::v5::mqttbytes::v5 as m5;
use rumqttc::{QoS, v5};
use rustls::pki_types::ServerName;

use crate::keys::tls;

use super::config::MqttConfig;
use super::core::{AckToken, Message};
use super::values::{MqttProtocol, MqttScheme, Qos};

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

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Connection")
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
pub fn build(config: &MqttConfig) -> Result<Connection, String> {
    let tls = match config.url.scheme {
        MqttScheme::Tls => Some(tls_config(config)?),
        MqttScheme::Tcp => None,
    };
    let credentials = credentials(config)?;
    let window = u64::from(config.expected_broker_window.get());
    let capacity = request_channel(config);
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
            Ok(Connection::V4(Box::new(eventloop), client))
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
            Ok(Connection::V5(Box::new(eventloop), client))
        }
    }
}

/// Requests rumqttc's channel holds. MQTT 3.1.1: subscriptions only (acks are written
/// by [`Connection::write_acks`] itself). MQTT 5: also the acks, up to the guard's
/// number of them.
pub fn request_channel(config: &MqttConfig) -> usize {
    match config.protocol {
        MqttProtocol::V311 => 16,
        MqttProtocol::V5 => {
            usize::try_from(config.guard_limit().saturating_add(64)).unwrap_or(1 << 16)
        }
    }
}

/// Bytes one queued request takes in the client's channel (the larger protocol's).
pub fn request_bytes() -> u64 {
    std::mem::size_of::<rumqttc::Request>().max(std::mem::size_of::<v5::Request>()) as u64
}

/// Bytes one ack takes while it is written: its token, and its packet in the write
/// buffer (a PUBACK or PUBREC is 4 bytes; an MQTT 5 one with a reason code and no
/// properties, 4 to 6).
pub const ACK_BYTES: u64 = std::mem::size_of::<AckToken>() as u64 + 6;

/// How long writing a batch of acks may take before the connection counts as broken
/// (rumqttc's own flush timeout).
const ACK_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

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

    /// Writes the acks for `tokens` in order (PUBACK for QoS 1, PUBREC for QoS 2; the
    /// client library completes a QoS 2 exchange) and flushes them once: one write for
    /// a unit's acks. rumqttc's own channel writes and flushes one request per poll,
    /// between reads, a syscall and a segment per ack.
    ///
    /// # Errors
    ///
    /// No connection, or writing failed or took longer than rumqttc's flush timeout:
    /// the connection is broken; drop it.
    ///
    /// # Cancel safety
    ///
    /// Not cancel-safe: acks written to the buffer but not flushed go with the next
    /// write or poll, but acks not yet written are lost (the broker redelivers).
    pub async fn write_acks(&mut self, tokens: &[AckToken]) -> Result<(), String> {
        let flushed = match self {
            Connection::V4(eventloop, _) => {
                let rumqttc::EventLoop { state, network, .. } = &mut **eventloop;
                let network = network.as_mut().ok_or("not connected")?;
                for t in tokens {
                    let request = if t.qos == 2 {
                        rumqttc::Request::PubRec(rumqttc::PubRec::new(t.pkid))
                    } else {
                        rumqttc::Request::PubAck(rumqttc::PubAck::new(t.pkid))
                    };
                    let packet = state
                        .handle_outgoing_packet(request)
                        .map_err(|e| e.to_string())?;
                    // The outgoing event it queued: nothing the source reports.
                    state.events.pop_back();
                    if let Some(packet) = packet {
                        network.write(packet).await.map_err(|e| e.to_string())?;
                    }
                }
                tokio::time::timeout(ACK_FLUSH_TIMEOUT, network.flush())
                    .await
                    .map(|r| r.map_err(|e| e.to_string()))
            }
            // rumqttc's MQTT 5 event loop keeps its connection to itself: its acks go
            // through the request channel, written one per poll. The channel holds a
            // guard's number of them; when it is full the connection is dropped (the
            // broker redelivers what was not acked) rather than an ack lost and its
            // window slot with it.
            Connection::V5(_, client) => {
                for t in tokens {
                    let q = if t.qos == 2 {
                        QoS::ExactlyOnce
                    } else {
                        QoS::AtLeastOnce
                    };
                    let mut p = m5::Publish::new("", qos5(q), Vec::new(), None);
                    p.pkid = t.pkid;
                    client.try_ack(&p).map_err(|e| {
                        format!("the client's request channel took no more acks: {e}")
                    })?;
                }
                return Ok(());
            }
        };
        match flushed {
            Ok(result) => result,
            Err(_) => Err(format!(
                "writing acks took longer than {ACK_FLUSH_TIMEOUT:?}"
            )),
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

/// How long to wait before reconnecting after `failures` consecutive failures: 100 ms
/// doubling up to `max`.
pub fn backoff(failures: u32, max: Duration) -> Duration {
    let base = Duration::from_millis(100);
    base.saturating_mul(1u32 << failures.min(16)).min(max)
}
