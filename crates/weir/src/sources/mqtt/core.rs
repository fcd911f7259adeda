//! The MQTT source's sans-IO part: the ledger of messages between the broker and the
//! WAL.
//!
//! The connection task [`offer`](Ledger::offer)s every PUBLISH; the appender task
//! [`take`](Ledger::take)s what is waiting for the WAL, reports each durable unit with
//! [`complete`](Ledger::complete), and sends the acks [`ready_acks`](Ledger::ready_acks)
//! returns. The ledger keeps:
//!
//! - **arrival order**: every message gets a sequence number; units are taken and
//!   completed in that order, and acks come out in it (MQTT requires PUBACKs in the
//!   order the PUBLISHes arrived);
//! - **the window**: QoS 1/2 messages of the current connection not yet acked, and the
//!   payload bytes of QoS 1/2 messages not yet durable (`held_bytes`). When more than
//!   `guard_limit` unacked messages hold a payload, or more than `held_max_bytes` are
//!   held, [`must_pause`](Ledger::must_pause) answers true: the caller stops reading
//!   the socket until the appender makes room (TCP backpressure: the broker's send
//!   queue fills and it stops sending), so a broker that overshoots its window (Mosquitto
//!   2.0.11) costs no more memory than one that holds it. Redeliveries of messages already
//!   held (below) hold no payload and do not count, so a reconnect that starts with
//!   them makes progress;
//! - **the QoS 0 budget**: bytes of QoS 0 payloads not yet durable. Above
//!   `qos0_max_bytes` the newest message is dropped, counted, and the next accepted QoS
//!   0 record carries `mqtt.gap = "true"` and `mqtt.gap_dropped = "N"`;
//! - **connection epochs**: acks owed on a connection that is gone are never sent on
//!   the next one. Their packet ids and fingerprints (topic and payload hash) are kept,
//!   so that the broker's redelivery (`dup` set, same packet id, same content) of a
//!   message already durable or on its way is not written twice: the redelivered copy
//!   is acked once the first copy is durable.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

pub use super::status::MqttStatus;

/// Attribute set on the first QoS 0 record after drops.
pub const GAP_ATTRIBUTE: &str = "mqtt.gap";
/// Attribute with the number of QoS 0 messages dropped just before this record.
pub const GAP_DROPPED_ATTRIBUTE: &str = "mqtt.gap_dropped";
/// Prefix of MQTT 5 user properties turned into attributes.
pub const USER_PROPERTY_PREFIX: &str = "mqtt.user.";

/// What to send back to the broker once a QoS 1/2 message is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckToken {
    /// 1 (PUBACK) or 2 (PUBREC; the client library completes the exchange).
    pub qos: u8,
    /// The PUBLISH's packet id.
    pub pkid: u16,
}

/// One PUBLISH as received, independent of the protocol version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The topic (the record's key).
    pub topic: String,
    /// The payload.
    pub payload: bytes::Bytes,
    /// 0, 1 or 2.
    pub qos: u8,
    /// The retain flag.
    pub retain: bool,
    /// Set by the broker on a redelivery.
    pub dup: bool,
    /// The packet id (0 for QoS 0).
    pub pkid: u16,
    /// MQTT 5 user properties, in the order sent.
    pub user_properties: Vec<(String, String)>,
}

/// The ledger's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerConfig {
    /// The source's name (each record's `source`).
    pub source: Arc<str>,
    /// The broker's expected window (`expected_broker_window`): at this many unacked
    /// messages the broker stops sending, and the source shows paused.
    pub window: u64,
    /// Unacked QoS 1/2 messages holding a payload above which reading pauses.
    pub guard_limit: u64,
    /// Payload bytes of QoS 1/2 messages not yet durable above which reading pauses
    /// (`expected_broker_window × max_message_bytes`, `weir validate`'s bound).
    pub held_max_bytes: u64,
    /// `max_message_bytes`: larger payloads are quarantined.
    pub max_message_bytes: u64,
    /// `qos0_queue_bytes`.
    pub qos0_max_bytes: u64,
}

/// What became of an offered message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Queued for the WAL (and, for QoS 1/2, for an ack once durable).
    Queued,
    /// Larger than `max_message_bytes`: queued for the quarantine, then acked.
    Oversized,
    /// A redelivery of a message already durable or on its way: not written again,
    /// acked once the first copy is durable.
    Duplicate,
    /// QoS 0 and the QoS 0 budget is spent: dropped and counted.
    Dropped,
}

/// A message on its way to the WAL, kept as received: its record's attributes are
/// written straight from these fields when it is encoded, so a message costs no owned
/// attribute strings (MQTT 5 user properties aside).
#[derive(Debug)]
pub struct MqttRecord {
    /// The topic (the record's key).
    pub topic: String,
    /// The payload.
    pub payload: bytes::Bytes,
    /// When it was received, ms since the epoch.
    pub timestamp_ms: i64,
    /// 0, 1 or 2 (`mqtt.qos`).
    pub qos: u8,
    /// `mqtt.retain`.
    pub retain: bool,
    /// QoS 0 messages dropped just before this one (`mqtt.gap`, `mqtt.gap_dropped`);
    /// 0 for none.
    pub gap_dropped: u64,
    /// MQTT 5 user properties as attributes: names prefixed with
    /// [`USER_PROPERTY_PREFIX`], the first of each name, sorted.
    pub user_properties: Vec<(String, String)>,
}

impl MqttRecord {
    /// Appends the record's WAL form (as [`Record::encode_into`](crate::record::Record::encode_into) would for the same
    /// record) for source `source`. Allocates only for a gap's count.
    pub fn encode_into(&self, source: &str, out: &mut Vec<u8>) {
        const QOS: [&str; 3] = ["0", "1", "2"];
        let gap = (self.gap_dropped > 0).then(|| self.gap_dropped.to_string());
        let gap_attributes = gap
            .as_deref()
            .map(|n| [(GAP_ATTRIBUTE, "true"), (GAP_DROPPED_ATTRIBUTE, n)]);
        // Sorted by name: mqtt.gap < mqtt.gap_dropped < mqtt.qos < mqtt.retain < mqtt.user.*
        let fixed = [
            ("mqtt.qos", QOS[usize::from(self.qos.min(2))]),
            ("mqtt.retain", if self.retain { "true" } else { "false" }),
        ];
        let attributes = gap_attributes.iter().flatten().copied().chain(fixed).chain(
            self.user_properties
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str())),
        );
        crate::record::encode_parts(
            out,
            source,
            &self.topic,
            self.timestamp_ms,
            attributes,
            &self.payload,
        );
    }

    /// The record this becomes, as a sink decodes it.
    #[cfg(test)]
    pub fn to_record(&self, source: &str) -> crate::record::Record {
        let mut wire = Vec::new();
        self.encode_into(source, &mut wire);
        crate::record::Record::decode(bytes::Bytes::from(wire))
            .expect("a record just encoded decodes")
    }
}

/// What a taken unit of work does with a message.
#[derive(Debug)]
pub enum Work {
    /// Append this message's record to the WAL.
    Append(MqttRecord),
    /// Write this message to the quarantine with the reason.
    Quarantine {
        /// The topic.
        topic: String,
        /// The payload.
        payload: bytes::Bytes,
        /// Why.
        reason: String,
    },
}

/// Messages taken for the WAL together; complete it with [`Ledger::complete`].
#[derive(Debug)]
pub struct Unit {
    /// The messages, in arrival order.
    pub work: Vec<Work>,
    /// The sequence number after the last message: completing the unit makes every
    /// message before it durable.
    pub end_seq: u64,
    /// QoS 0 payload bytes in the unit, released from the budget on completion.
    pub qos0_bytes: u64,
    /// QoS 0 messages in the unit.
    pub qos0_messages: u64,
    /// Payload bytes in the unit.
    pub bytes: u64,
    /// QoS 1/2 payload bytes in the unit, released from `held_bytes` on completion.
    pub held_bytes: u64,
}

/// What [`Ledger::complete`] needs of a unit once it is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    /// [`Unit::end_seq`].
    pub end_seq: u64,
    /// [`Unit::qos0_bytes`].
    pub qos0_bytes: u64,
    /// [`Unit::qos0_messages`].
    pub qos0_messages: u64,
    /// [`Unit::held_bytes`].
    pub held_bytes: u64,
}

impl Unit {
    /// What completing this unit releases.
    pub fn done(&self) -> Done {
        Done {
            end_seq: self.end_seq,
            qos0_bytes: self.qos0_bytes,
            qos0_messages: self.qos0_messages,
            held_bytes: self.held_bytes,
        }
    }
}

#[derive(Debug)]
struct Pending {
    work: Work,
    qos0_bytes: u64,
    qos0_messages: u64,
    bytes: u64,
    held_bytes: u64,
}

#[derive(Debug, Clone, Copy)]
struct Owed {
    /// The message whose durability this ack waits for (a duplicate's original).
    durable_at: u64,
    token: AckToken,
    fingerprint: u64,
    received_ms: u64,
    /// A redelivery acked once its original is durable: holds no payload.
    duplicate: bool,
}

/// The ledger. See the module docs.
#[derive(Debug)]
pub struct Ledger {
    config: LedgerConfig,
    next_seq: u64,
    /// Every message with a sequence number below this is durable (or quarantined).
    durable_end: u64,
    /// Waiting for the appender, in arrival order; `pending_first_seq` is the first's.
    pending: VecDeque<(u64, Pending)>,
    /// Acks owed on the current connection, in arrival order.
    owed: VecDeque<Owed>,
    /// Acks owed on connections that are gone: packet id → (fingerprint, sequence).
    orphans: HashMap<u16, (u64, u64)>,
    gap_dropped: u64,
    /// Owed acks that are redeliveries (see [`Owed::duplicate`]).
    owed_duplicates: u64,
    status: MqttStatus,
    ack_latency_ms_sum: u64,
}

/// A fingerprint of a message's topic and payload, for recognising redeliveries: CRC-32C
/// of each (hardware-accelerated; computed for every QoS 1/2 message, so SipHash over
/// the payload would cost a few percent of a core at full rate). It is only compared
/// for a redelivery with the same packet id, so a collision needs both.
pub fn fingerprint(topic: &str, payload: &[u8]) -> u64 {
    (u64::from(crc32c::crc32c(topic.as_bytes())) << 32) | u64::from(crc32c::crc32c(payload))
}

impl Ledger {
    /// An empty ledger, not connected.
    pub fn new(config: LedgerConfig) -> Self {
        let status = MqttStatus {
            window: config.window,
            guard_limit: config.guard_limit,
            held_limit_bytes: config.held_max_bytes,
            qos0_queue_max_bytes: config.qos0_max_bytes,
            ..MqttStatus::default()
        };
        Ledger {
            config,
            next_seq: 0,
            durable_end: 0,
            pending: VecDeque::new(),
            owed: VecDeque::new(),
            orphans: HashMap::new(),
            gap_dropped: 0,
            owed_duplicates: 0,
            status,
            ack_latency_ms_sum: 0,
        }
    }

    /// A connection is up. Without a session on the broker (`session_present`
    /// false) nothing will be redelivered, so the orphans are forgotten.
    pub fn on_connect(&mut self, session_present: bool) {
        self.status.connected = true;
        self.status.connections += 1;
        self.status.reconnects = self.status.connections - 1;
        if !session_present {
            self.orphans.clear();
        }
    }

    /// The connection is gone (an error, or the guard): acks owed on it will never
    /// be sent; their messages become orphans the broker may redeliver.
    pub fn on_disconnect(&mut self, error: Option<String>) {
        if !self.status.connected {
            return;
        }
        self.status.connected = false;
        if let Some(error) = error {
            self.status.connection_errors += 1;
            self.status.last_error = Some(error);
        }
        for owed in self.owed.drain(..) {
            self.orphans
                .insert(owed.token.pkid, (owed.fingerprint, owed.durable_at));
        }
        self.status.unacked = 0;
        self.owed_duplicates = 0;
        self.status.paused_since_ms = None;
    }

    /// Whether the caller must stop reading the socket now: more than `guard_limit`
    /// unacked messages hold a payload, or more than `held_max_bytes` of QoS 1/2
    /// payloads are not yet durable. Only a broker sending beyond its window gets here
    /// (one that holds it stops at `window` messages of at most `max_message_bytes`).
    /// Counts each pause as it begins.
    pub fn must_pause(&mut self) -> bool {
        let over = self.status.unacked - self.owed_duplicates > self.config.guard_limit
            || self.status.held_bytes > self.config.held_max_bytes;
        if over && !self.status.reading_paused {
            self.status.read_pauses += 1;
        }
        self.status.reading_paused = over;
        over
    }

    /// Reading stayed paused for a keepalive: the caller drops the connection (the
    /// broker redelivers what was not acked). Counted as a guard disconnect.
    pub fn guard_disconnect(&mut self) {
        self.status.guard_disconnects += 1;
        self.on_disconnect(None);
    }

    /// Records an error that did not come from an established connection (a failed
    /// connection attempt).
    pub fn on_connect_error(&mut self, error: String) {
        self.status.last_error = Some(error);
    }

    /// Takes in one PUBLISH received at `now_ms`.
    pub fn offer(&mut self, message: Message, now_ms: u64) -> Offer {
        self.status.received += 1;
        let bytes = message.payload.len() as u64;
        if message.qos == 0 {
            self.status.qos0_received += 1;
            return self.offer_qos0(message, bytes, now_ms);
        }
        let fingerprint = fingerprint(&message.topic, &message.payload);
        let token = AckToken {
            qos: message.qos,
            pkid: message.pkid,
        };
        let orphan = match self.orphans.get(&message.pkid) {
            Some(&(fp, seq)) if message.dup && fp == fingerprint => Some(seq),
            _ => None,
        };
        // Either way the packet id now names this message, not an older one.
        self.orphans.remove(&message.pkid);
        let (durable_at, offer) = match orphan {
            Some(seq) => {
                self.status.duplicates_skipped += 1;
                self.owed_duplicates += 1;
                (seq, Offer::Duplicate)
            }
            None => {
                let seq = self.next_seq;
                let offer = self.enqueue(message, bytes, now_ms);
                if let Some((_, p)) = self.pending.back_mut() {
                    p.held_bytes = bytes;
                }
                self.status.held_bytes += bytes;
                self.status.max_held_bytes = self.status.max_held_bytes.max(self.status.held_bytes);
                (seq, offer)
            }
        };
        self.owed.push_back(Owed {
            durable_at,
            token,
            fingerprint,
            received_ms: now_ms,
            duplicate: orphan.is_some(),
        });
        self.status.unacked += 1;
        self.status.max_unacked = self.status.max_unacked.max(self.status.unacked);
        if self.status.unacked >= self.config.window && self.status.paused_since_ms.is_none() {
            self.status.paused_since_ms = Some(now_ms);
        }
        offer
    }

    /// Takes note of a PUBLISH that arrived after shutdown began: it is not kept.
    pub fn discard_at_shutdown(&mut self, message: &Message) {
        self.status.received += 1;
        if message.qos == 0 {
            self.status.qos0_dropped_at_shutdown += 1;
        }
    }

    /// A unit the WAL did not take before shutdown: its QoS 0 messages are lost and
    /// counted as dropped at shutdown (its QoS 1/2 messages were never acked).
    pub fn lost_at_shutdown(&mut self, unit: &Done) {
        self.status.units_in_flight = self.status.units_in_flight.saturating_sub(1);
        self.status.held_bytes = self.status.held_bytes.saturating_sub(unit.held_bytes);
        self.status.qos0_dropped_at_shutdown += unit.qos0_messages;
        self.status.qos0_queue_bytes = self.status.qos0_queue_bytes.saturating_sub(unit.qos0_bytes);
        self.status.qos0_queue_messages = self
            .status
            .qos0_queue_messages
            .saturating_sub(unit.qos0_messages);
    }

    fn offer_qos0(&mut self, message: Message, bytes: u64, now_ms: u64) -> Offer {
        // Oversized QoS 0 messages count against the budget too: a flood of them must
        // not grow memory on its way to the quarantine.
        if self.status.qos0_queue_bytes.saturating_add(bytes) > self.config.qos0_max_bytes {
            self.status.qos0_dropped += 1;
            self.gap_dropped += 1;
            return Offer::Dropped;
        }
        let offer = self.enqueue(message, bytes, now_ms);
        self.status.qos0_queue_bytes += bytes;
        self.status.qos0_queue_messages += 1;
        if let Some((_, p)) = self.pending.back_mut() {
            p.qos0_bytes = bytes;
            p.qos0_messages = 1;
        }
        offer
    }

    /// Gives the message a sequence number and queues its work.
    fn enqueue(&mut self, message: Message, bytes: u64, now_ms: u64) -> Offer {
        let seq = self.next_seq;
        self.next_seq += 1;
        let Message {
            topic,
            payload,
            qos,
            retain,
            user_properties,
            ..
        } = message;
        let (work, offer) = if bytes > self.config.max_message_bytes {
            self.status.oversized += 1;
            let reason = format!(
                "mqtt message on topic {topic:?} has {bytes} payload bytes, above max_message_bytes ({})",
                self.config.max_message_bytes
            );
            (
                Work::Quarantine {
                    topic,
                    payload,
                    reason,
                },
                Offer::Oversized,
            )
        } else {
            let gap_dropped = if qos == 0 {
                std::mem::take(&mut self.gap_dropped)
            } else {
                0
            };
            let mut user: Vec<(String, String)> = Vec::new();
            for (name, value) in user_properties {
                let name = format!("{USER_PROPERTY_PREFIX}{name}");
                // A repeated property keeps its first value.
                if !user.iter().any(|(n, _)| *n == name) {
                    user.push((name, value));
                }
            }
            user.sort_by(|a, b| a.0.cmp(&b.0));
            let record = MqttRecord {
                topic,
                payload,
                timestamp_ms: i64::try_from(now_ms).unwrap_or(i64::MAX),
                qos,
                retain,
                gap_dropped,
                user_properties: user,
            };
            (Work::Append(record), Offer::Queued)
        };
        self.pending.push_back((
            seq,
            Pending {
                work,
                qos0_bytes: 0,
                qos0_messages: 0,
                bytes,
                held_bytes: 0,
            },
        ));
        offer
    }

    /// Takes the waiting messages in arrival order, up to `max_records` and about
    /// `max_bytes` payload bytes (at least one message). A quarantined message is
    /// taken alone, so a unit is either all WAL appends or one quarantine write.
    pub fn take(&mut self, max_records: usize, max_bytes: u64) -> Option<Unit> {
        let (first_seq, first) = self.pending.front()?;
        let mut end_seq = *first_seq;
        let alone = matches!(first.work, Work::Quarantine { .. });
        let mut unit = Unit {
            work: Vec::new(),
            end_seq,
            qos0_bytes: 0,
            qos0_messages: 0,
            bytes: 0,
            held_bytes: 0,
        };
        while let Some((seq, p)) = self.pending.front() {
            let is_quarantine = matches!(p.work, Work::Quarantine { .. });
            let full = unit.work.len() >= max_records.max(1)
                || (!unit.work.is_empty() && unit.bytes + p.bytes > max_bytes);
            if !unit.work.is_empty() && (alone || is_quarantine || full) {
                break;
            }
            end_seq = seq + 1;
            let (_, p) = self.pending.pop_front().expect("front exists");
            unit.qos0_bytes += p.qos0_bytes;
            unit.qos0_messages += p.qos0_messages;
            unit.bytes += p.bytes;
            unit.held_bytes += p.held_bytes;
            unit.work.push(p.work);
        }
        unit.end_seq = end_seq;
        self.status.units_in_flight += 1;
        self.status.max_units_in_flight = self
            .status
            .max_units_in_flight
            .max(self.status.units_in_flight);
        Some(unit)
    }

    /// A unit taken earlier is durable (or quarantined). Units complete in the order
    /// they were taken.
    pub fn complete(&mut self, unit: &Done) {
        debug_assert!(unit.end_seq >= self.durable_end, "units complete in order");
        self.durable_end = self.durable_end.max(unit.end_seq);
        self.status.units_in_flight = self.status.units_in_flight.saturating_sub(1);
        self.status.held_bytes = self.status.held_bytes.saturating_sub(unit.held_bytes);
        self.status.qos0_queue_bytes = self.status.qos0_queue_bytes.saturating_sub(unit.qos0_bytes);
        self.status.qos0_queue_messages = self
            .status
            .qos0_queue_messages
            .saturating_sub(unit.qos0_messages);
    }

    /// Acks that may go out now, at `now_ms`, in arrival order: the leading owed
    /// acks whose messages are durable. Counted as sent.
    pub fn ready_acks(&mut self, now_ms: u64) -> Vec<AckToken> {
        let mut ready = Vec::new();
        while let Some(owed) = self.owed.front() {
            if owed.durable_at >= self.durable_end {
                break;
            }
            let owed = self.owed.pop_front().expect("front exists");
            if owed.duplicate {
                self.owed_duplicates -= 1;
            }
            let latency = now_ms.saturating_sub(owed.received_ms);
            self.ack_latency_ms_sum += latency;
            self.status.ack_latency_ms_max = self.status.ack_latency_ms_max.max(latency);
            ready.push(owed.token);
        }
        let n = ready.len() as u64;
        self.status.acked += n;
        self.status.unacked -= n;
        if self.status.unacked < self.config.window {
            self.status.paused_since_ms = None;
        }
        ready
    }

    /// Whether a connection is up.
    pub fn connected(&self) -> bool {
        self.status.connected
    }

    /// Counts `n` acks due that were not sent: their connection was gone.
    pub fn acks_dropped(&mut self, n: u64) {
        self.status.acks_dropped += n;
    }

    /// The counters now.
    pub fn status(&self) -> MqttStatus {
        let mut status = self.status.clone();
        #[allow(clippy::cast_precision_loss, reason = "a mean for display")]
        if status.acked > 0 {
            status.ack_latency_ms_mean = self.ack_latency_ms_sum as f64 / status.acked as f64;
        }
        status
    }

    /// Messages waiting for the appender.
    #[cfg(test)]
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Redelivery candidates kept from lost connections.
    #[cfg(test)]
    pub fn orphans_len(&self) -> usize {
        self.orphans.len()
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
