//! The group's offsets as the poll loop handles them, in the background so that it
//! never waits for the broker: a commit's answer applied to the core, the committed
//! offsets of newly assigned partitions (where their first record should be: a later
//! one is a gap), and the high watermarks behind the lag.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::{Offset, TopicPartitionList};

use super::client::Context;
use super::core::Partition;
use super::poll::warn_gap;
use super::shell::Shared;

/// How long broker queries (committed offsets, watermarks, the last commit) wait.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long reading one partition's high watermark waits.
const LAG_TIMEOUT: Duration = Duration::from_secs(2);

/// The offsets of one commit and its answer.
pub(super) type CommitOutcome = (Vec<(Partition, i64)>, rdkafka::error::KafkaResult<()>);

/// Applies a commit's answer to the core.
pub(super) fn apply_commit(
    shared: &Shared,
    outcome: Result<CommitOutcome, tokio::task::JoinError>,
) {
    let mut core = shared.core();
    match outcome {
        Ok((offsets, Ok(()))) => {
            for (p, o) in offsets {
                core.committed(&p, o);
            }
        }
        Ok((_, Err(e))) => core.commit_failed(format!("commit failed: {e}")),
        Err(e) => core.commit_failed(format!("commit failed: {e}")),
    }
}

/// Starts reading the group's committed offsets of newly assigned partitions (where
/// their first record should be: a later one is a gap) in the background, unless a
/// read is still running: the poll loop never waits for the broker's answer (it may
/// take seconds during a rebalance, longer than `max.poll.interval.ms`).
pub(super) fn start_read_committed(
    name: &Arc<str>,
    consumer: &Arc<StreamConsumer<Context>>,
    shared: &Arc<Shared>,
    running: &mut Option<tokio::task::JoinHandle<()>>,
) {
    if running.as_ref().is_some_and(|h| !h.is_finished()) {
        return;
    }
    let mut new: Vec<Partition> = std::mem::take(
        &mut *shared
            .assigned
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    if new.is_empty() {
        return;
    }
    // Assignments made while a read ran may name a partition twice.
    new.sort_unstable();
    new.dedup();
    // Answers apply only to partitions still in this generation.
    let generation = shared.core().generation();
    let mut tpl = TopicPartitionList::new();
    for (topic, p) in &new {
        tpl.add_partition(topic, *p);
    }
    let (name, c, shared) = (Arc::clone(name), Arc::clone(consumer), Arc::clone(shared));
    *running = Some(tokio::spawn(async move {
        match tokio::task::spawn_blocking(move || c.committed_offsets(tpl, QUERY_TIMEOUT)).await {
            Ok(Ok(tpl)) => {
                let mut core = shared.core();
                for e in tpl.elements() {
                    let partition = (e.topic().to_owned(), e.partition());
                    if let Offset::Offset(o) = e.offset()
                        && let Some(g) = core.set_committed(&partition, o, generation)
                    {
                        warn_gap(&name, &g);
                    }
                }
            }
            Ok(Err(e)) => shared.error(format!("reading committed offsets: {e}")),
            Err(e) => shared.error(format!("reading committed offsets: {e}")),
        }
    }));
}

/// Reads the assigned partitions' high watermarks from the brokers (for the lag).
pub(super) async fn read_lag(consumer: Arc<StreamConsumer<Context>>, shared: Arc<Shared>) {
    let assignment = shared.core().assignment();
    let c = consumer;
    let read = tokio::task::spawn_blocking(move || {
        assignment
            .into_iter()
            .filter_map(|p| {
                let (_, high) = c.fetch_watermarks(&p.0, p.1, LAG_TIMEOUT).ok()?;
                Some((p, high))
            })
            .collect::<Vec<_>>()
    })
    .await;
    if let Ok(highs) = read {
        let mut core = shared.core();
        for (p, high) in highs {
            core.set_high_watermark(&p, high);
        }
    }
}
