//! The `nats` source's appender: takes the fetched messages in stream order as units,
//! keeps several on their way to the WAL at once, acks each message once its unit is
//! durable (`+ACK`, confirmed with `ack_confirm`), and grants the freed credits back to
//! the fetcher.

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::Client;
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::watch;
use weir_flow::credit::{CreditReceiver, RecvError, WindowedDemand};
use weir_wal::Batch;

use super::fetch::{Item, Work};
use super::shell::{IN_FLIGHT, Shared, UNIT_BYTES, UNIT_RECORDS};
use crate::pipeline::appends::{Event, OrderedAppends};
use crate::pipeline::ingest::Ingest;
use crate::quarantine::{Quarantine, QuarantineError, Rejected};
use crate::telemetry::State;

/// How long, at shutdown, units may wait for admission.
const SHUTDOWN_ADMISSION: Duration = Duration::from_secs(5);
/// Confirmed acks (`ack_confirm`) in flight at once.
const CONFIRMS_IN_FLIGHT: usize = 64;

/// Takes the fetched messages in stream order as units, keeps up to [`IN_FLIGHT`] of
/// them on their way to the WAL at once (unit k+1 is appended while unit k is being
/// fsynced, in stream order, through [`OrderedAppends`]), acks each unit's messages once
/// it is durable, and grants the fetch loop new credits as they are acked.
#[allow(clippy::too_many_arguments, reason = "the task's parts, passed once")]
pub(super) async fn append_loop(
    name: Arc<str>,
    max_inflight: u32,
    client: Client,
    ack_confirm: bool,
    mut rx: CreditReceiver<Item>,
    ingest: Ingest,
    quarantine: Quarantine,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) {
    let mut window = WindowedDemand::new(NonZeroU64::from(
        std::num::NonZeroU32::new(max_inflight).unwrap_or(std::num::NonZeroU32::MIN),
    ));
    if let Some(n) = window.top_up() {
        let _ = rx.request(n.get());
    }
    let mut appends: OrderedAppends<Vec<u64>> = OrderedAppends::new(ingest.clone(), IN_FLIGHT);
    let mut open = true;
    let failure = loop {
        let stopping = *stop.borrow();
        let deadline = stopping.then(|| Instant::now() + SHUTDOWN_ADMISSION);
        tokio::select! {
            biased;
            event = appends.next(), if !appends.is_empty() => match event {
                Some(Event::Durable(seqs)) => {
                    let replies = {
                        let mut ledger = shared.ledger();
                        ledger.status_mut().units_in_flight = appends.in_flight().0 as u64;
                        ledger.durable(&seqs)
                    };
                    if ack_confirm {
                        futures::stream::iter(replies)
                            .for_each_concurrent(CONFIRMS_IN_FLIGHT, |reply| {
                                ack(&client, &shared, reply, true)
                            })
                            .await;
                    } else {
                        for reply in replies {
                            ack(&client, &shared, reply, false).await;
                        }
                    }
                    for _ in &seqs {
                        window.finished();
                    }
                    if let Some(n) = window.top_up() {
                        let _ = rx.request(n.get());
                    }
                }
                // on_full = "reject": nothing is acked meanwhile (no credit is freed, so
                // nothing more is fetched); the units go again, first, in their order.
                Some(Event::Refused) => {
                    if let Err((message, _)) = appends.resubmit(deadline).await {
                        break Some(message);
                    }
                }
                Some(Event::Failed(_, message)) => break Some(message),
                None => {}
            },
            first = rx.recv(), if open && appends.has_room() => match first {
                Ok(first) => {
                    let mut items = vec![first];
                    let mut bytes = items[0].bytes();
                    while items.len() < UNIT_RECORDS && bytes < UNIT_BYTES {
                        match rx.try_recv() {
                            Ok(item) => {
                                bytes += item.bytes();
                                items.push(item);
                            }
                            Err(_) => break,
                        }
                    }
                    let seqs: Vec<u64> = items.iter().map(|i| i.seq).collect();
                    let batches = match into_batches(&name, items, &ingest, &quarantine, &shared).await {
                        Ok(batches) => batches,
                        Err(message) => break Some(message),
                    };
                    if let Err((message, _)) = appends.submit(seqs, batches, deadline).await {
                        break Some(message);
                    }
                    let mut ledger = shared.ledger();
                    let s = ledger.status_mut();
                    s.units_in_flight = appends.in_flight().0 as u64;
                    s.max_units_in_flight = s.max_units_in_flight.max(s.units_in_flight);
                }
                Err(RecvError::Completed | RecvError::Cancelled | RecvError::Disconnected) => {
                    open = false;
                }
                Err(e) => {
                    tracing::error!(source = %name, "nats: credit channel failed: {e}");
                    open = false;
                }
            },
            else => break None,
        }
    };
    if let Some(message) = failure {
        // Nothing more is acked: the server redelivers what was not, after ack_wait.
        shared.ledger().abandon_all();
        if *stop.borrow() {
            tracing::info!(source = %name, "nats: at shutdown, {message}; the server redelivers what was not acked");
        } else {
            tracing::error!(source = %name, "nats: {message}; nothing more is acked, the server keeps it");
            shared.error(message.clone());
            ingest.stats().component.set_state(State::Failed(message));
        }
    }
    // Whatever is still buffered was fetched but not made durable: the server
    // redelivers it after ack_wait.
    let mut left = Vec::new();
    while let Ok(item) = rx.try_recv() {
        left.push(item.seq);
    }
    shared.ledger().abandon(&left);
}

/// Sends `+ACK` to `reply` (waiting for the server's confirmation with `confirm`).
pub(super) async fn ack(client: &Client, shared: &Shared, reply: String, confirm: bool) {
    let result = if confirm {
        match tokio::time::timeout(
            Duration::from_secs(5),
            client.request(reply, Bytes::from_static(b"+ACK")),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("ack not confirmed: {e}")),
            Err(_) => Err("ack not confirmed within 5s".to_owned()),
        }
    } else {
        client
            .publish(reply, Bytes::from_static(b"+ACK"))
            .await
            .map_err(|e| format!("ack not sent: {e}"))
    };
    let mut ledger = shared.ledger();
    let s = ledger.status_mut();
    match result {
        Ok(()) => s.acked += 1,
        Err(e) => {
            s.ack_errors += 1;
            s.last_error = Some(e);
        }
    }
}

/// Turns one unit into WAL batches (split below the WAL's batch limit), in stream
/// order; a message the WAL cannot take is written to the quarantine (fsynced) now, and
/// acked with its unit.
async fn into_batches(
    name: &Arc<str>,
    items: Vec<Item>,
    ingest: &Ingest,
    quarantine: &Quarantine,
    shared: &Shared,
) -> Result<Vec<Batch>, String> {
    let max_batch_bytes = ingest.max_batch_bytes();
    let mut batches = Vec::new();
    let mut batch = Batch::new();
    for item in items {
        match item.work {
            Work::Append(wire) => {
                let framed = weir_wal::format::FRAME_HEADER_LEN + wire.len() as u64;
                if framed > max_batch_bytes {
                    let reason = format!(
                        "nats message (stream sequence {}): its record is {framed} bytes, above the WAL's batch limit ({max_batch_bytes}); lower max_message_bytes or raise wal.max_pending_bytes",
                        item.seq
                    );
                    put_quarantine(name, quarantine, shared, Bytes::from(wire), reason).await?;
                    continue;
                }
                if !batch.is_empty() && batch.encoded_len() + framed > max_batch_bytes {
                    batches.push(std::mem::replace(&mut batch, Batch::new()));
                }
                batch
                    .push(&wire)
                    .map_err(|e| format!("a record does not fit the WAL: {e}"))?;
            }
            Work::Quarantine { payload, reason } => {
                put_quarantine(name, quarantine, shared, payload, reason).await?;
            }
        }
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    Ok(batches)
}

/// Writes a message the WAL cannot take to the quarantine (fsynced), so that it can be
/// acked. The quarantine logs (rate-limited: the first at once, then a summary at most
/// every 10 s) and counts what it keeps and what it drops, full or failing; the message
/// is acked either way so the credits are never wedged.
async fn put_quarantine(
    name: &Arc<str>,
    quarantine: &Quarantine,
    shared: &Shared,
    payload: Bytes,
    reason: String,
) -> Result<(), String> {
    shared.ledger().status_mut().quarantined += 1;
    match quarantine
        .put_durable(name, vec![Rejected { reason, payload }])
        .await
    {
        Err(QuarantineError::Blocking(e)) => Err(format!("quarantine task failed: {e}")),
        Ok(()) | Err(_) => Ok(()),
    }
}
