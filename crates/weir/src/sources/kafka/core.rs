//! The `kafka` source's policy, sans IO: the bytes held against the watermarks, the
//! assignment and, per partition, what was fetched, what is durable and what is
//! committed, and the gaps.
//!
//! The shell feeds it what happens (a record fetched, a unit durable, a rebalance, a
//! commit answered) and does what it answers (pause or resume the assignment, commit
//! these offsets).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;
use weir_flow::Timestamp;
use weir_flow::watermark::{Transition, Watermark, WatermarkError};

/// A partition: topic and number.
pub type Partition = (String, i32);

/// What one unit handed to the WAL covers: for each partition its last offset (in the
/// generation it was fetched in), and its bytes held against the watermarks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitTag {
    marks: Vec<Mark>,
    /// Bytes the unit's records hold against the watermarks.
    pub bytes: u64,
    /// Records in the unit.
    pub records: u64,
    /// When its first record was fetched.
    first_fetched: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Mark {
    partition: Partition,
    generation: u64,
    last_offset: i64,
}

impl UnitTag {
    /// Adds one record fetched at `at` (its partition's mark moves to its offset).
    pub fn add(&mut self, fetched: &Fetched, bytes: u64, at: Timestamp) {
        self.first_fetched.get_or_insert(at);
        self.bytes += bytes;
        self.records += 1;
        match self
            .marks
            .iter_mut()
            .find(|m| m.partition == fetched.partition)
        {
            Some(m) => {
                m.last_offset = m.last_offset.max(fetched.offset);
                m.generation = fetched.generation;
            }
            None => self.marks.push(Mark {
                partition: fetched.partition.clone(),
                generation: fetched.generation,
                last_offset: fetched.offset,
            }),
        }
    }

    /// Whether the unit has no record.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }
}

/// A fetched record as [`Core::fetched`] saw it, for its unit's [`UnitTag`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    partition: Partition,
    generation: u64,
    offset: i64,
}

/// Offsets missing between two records of a partition (retention deleted them before
/// they were read, or the group's offset was out of range): `from..to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gap {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// First missing offset.
    pub from: i64,
    /// First offset after the gap (the record that arrived).
    pub to: i64,
}

/// One assigned partition as `/status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PartitionStatus {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Paused (above the high watermark).
    pub paused: bool,
    /// Next offset to read after the last record fetched, if any was.
    pub fetched: Option<i64>,
    /// Next offset after the last record durable in the WAL.
    pub durable: Option<i64>,
    /// The group's committed offset as last confirmed.
    pub committed: Option<i64>,
    /// The broker's high watermark (next offset to be written), as last read.
    pub high_watermark: Option<i64>,
    /// `high_watermark - committed` (records not yet committed by the group).
    pub lag: Option<i64>,
}

/// The time from a record's fetch to its durability in the WAL, since the start (each
/// record counted with the time of its unit's first record: an upper bound).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FetchToDurable {
    /// Records measured.
    pub records: u64,
    /// Median, in milliseconds.
    pub p50_ms: u64,
    /// 99th percentile, in milliseconds.
    pub p99_ms: u64,
    /// Longest, in milliseconds.
    pub max_ms: u64,
}

/// `/status` `sources.NAME.kafka`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KafkaStatus {
    /// The assigned partitions.
    pub partitions: Vec<PartitionStatus>,
    /// Bytes fetched and not yet durable, against the watermarks.
    pub held_bytes: u64,
    /// The watermarks.
    pub low_watermark: u64,
    /// The watermarks.
    pub high_watermark: u64,
    /// Whether the assignment is paused now.
    pub paused: bool,
    /// Pauses and resumes so far.
    pub pauses: u64,
    /// Resumes so far.
    pub resumes: u64,
    /// Rebalances (assignments and revocations) so far.
    pub rebalances: u64,
    /// Records fetched.
    pub fetched: u64,
    /// Records durable in the WAL.
    pub durable: u64,
    /// Commits sent, and how many failed.
    pub commits: u64,
    /// Commits that failed.
    pub commit_errors: u64,
    /// Gaps seen, and the offsets they miss.
    pub gaps: u64,
    /// Offsets missed by gaps.
    pub gap_offsets: u64,
    /// The last gap.
    pub last_gap: Option<Gap>,
    /// From fetch to durable.
    pub fetch_to_durable: FetchToDurable,
    /// The last error, if any.
    pub last_error: Option<String>,
}

#[derive(Debug, Default)]
struct PartitionState {
    generation: u64,
    paused: bool,
    /// The offset the next record should have (none until known).
    expected: Option<i64>,
    /// The first offset fetched in this generation (checked against the group's
    /// committed offset when that arrives after it).
    first: Option<i64>,
    /// Next offset after the last durable record (what a commit says).
    durable: Option<i64>,
    /// Sent in a commit and not yet answered.
    sent: Option<i64>,
    committed: Option<i64>,
    high_watermark: Option<i64>,
}

/// See the [module docs](self).
#[derive(Debug)]
pub struct Core {
    watermark: Watermark,
    held_bytes: u64,
    generation: u64,
    assigned: BTreeMap<Partition, PartitionState>,
    /// Fetch to durable, in milliseconds (1 ms to 1 h, 2 significant digits: 2 KiB).
    fetch_to_durable: Histogram<u64>,
    status: KafkaStatus,
}

impl Core {
    /// A core that pauses at `high` bytes held and resumes at `low`.
    ///
    /// # Errors
    ///
    /// Unless `low < high`.
    pub fn new(low: u64, high: u64) -> Result<Self, WatermarkError> {
        Ok(Core {
            watermark: Watermark::new(low, high)?,
            held_bytes: 0,
            generation: 0,
            assigned: BTreeMap::new(),
            fetch_to_durable: Histogram::new_with_bounds(1, 3_600_000, 2)
                .expect("valid histogram bounds"),
            status: KafkaStatus {
                low_watermark: low,
                high_watermark: high,
                ..KafkaStatus::default()
            },
        })
    }

    /// Partitions added to the assignment: they start unpaused (as librdkafka assigns
    /// them), so the watermarks reset; the next [`observe`](Self::observe) pauses them
    /// again if the bytes held are still above the high mark.
    pub fn assign(&mut self, now: Timestamp, partitions: &[Partition]) {
        self.generation += 1;
        self.status.rebalances += 1;
        self.watermark.reset(now);
        for st in self.assigned.values_mut() {
            st.paused = false;
        }
        for p in partitions {
            self.assigned.insert(
                p.clone(),
                PartitionState {
                    generation: self.generation,
                    ..PartitionState::default()
                },
            );
        }
    }

    /// Partitions revoked: the commits owed for them (durable, not yet committed), to
    /// send before they go. Units of them still in flight are written all the same,
    /// but no longer committed (the new owner reads them again: at least once).
    pub fn revoke(&mut self, partitions: &[Partition]) -> Vec<(Partition, i64)> {
        self.status.rebalances += 1;
        let mut owed = Vec::new();
        for p in partitions {
            if let Some(st) = self.assigned.remove(p)
                && let Some(d) = st.durable
                && st.committed.is_none_or(|c| c < d)
            {
                owed.push((p.clone(), d));
            }
        }
        owed
    }

    /// The generation of the latest assignment (see [`set_committed`](Self::set_committed)).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The partitions assigned now.
    pub fn assignment(&self) -> Vec<Partition> {
        self.assigned.keys().cloned().collect()
    }

    /// The group's committed offset of a partition, read after its assignment: the
    /// offset its first record should have (a later one is a gap).
    ///
    /// Records may have been fetched before it arrives: if the first of them is past
    /// `offset`, the missing range is a gap all the same.
    /// An answer read for an earlier `generation` than the partition's is ignored.
    pub fn set_committed(
        &mut self,
        partition: &Partition,
        offset: i64,
        generation: u64,
    ) -> Option<Gap> {
        let st = self
            .assigned
            .get_mut(partition)
            .filter(|st| st.generation == generation)?;
        st.committed = Some(offset);
        match st.first {
            None => {
                st.expected = Some(offset);
                None
            }
            Some(first) if first > offset => {
                let gap = Gap {
                    topic: partition.0.clone(),
                    partition: partition.1,
                    from: offset,
                    to: first,
                };
                self.count_gap(&gap);
                Some(gap)
            }
            Some(_) => None,
        }
    }

    fn count_gap(&mut self, g: &Gap) {
        self.status.gaps += 1;
        self.status.gap_offsets += u64::try_from(g.to - g.from).unwrap_or(0);
        self.status.last_gap = Some(g.clone());
    }

    /// The broker's high watermark of a partition, for its lag.
    pub fn set_high_watermark(&mut self, partition: &Partition, offset: i64) {
        if let Some(st) = self.assigned.get_mut(partition) {
            st.high_watermark = Some(offset);
        }
    }

    /// A record fetched: `bytes` are held until its unit is durable. Returns what its
    /// unit's tag needs, and a gap if offsets are missing before it. `None` for a
    /// partition not assigned (a record fetched just before a revocation): drop it.
    pub fn fetched(
        &mut self,
        partition: &Partition,
        offset: i64,
        bytes: u64,
    ) -> Option<(Fetched, Option<Gap>)> {
        let st = self.assigned.get_mut(partition)?;
        let gap = match st.expected {
            Some(e) if offset > e => Some(Gap {
                topic: partition.0.clone(),
                partition: partition.1,
                from: e,
                to: offset,
            }),
            _ => None,
        };
        st.expected = Some(offset + 1);
        st.first.get_or_insert(offset);
        let generation = st.generation;
        self.held_bytes += bytes;
        self.status.fetched += 1;
        if let Some(g) = &gap {
            self.count_gap(g);
        }
        Some((
            Fetched {
                partition: partition.clone(),
                generation,
                offset,
            },
            gap,
        ))
    }

    /// Bytes given back without a unit (a record dropped or quarantined before it
    /// joined one).
    pub fn release(&mut self, bytes: u64) {
        self.held_bytes = self.held_bytes.saturating_sub(bytes);
    }

    /// A unit is durable at `now` (units are reported in the order they were handed
    /// over): its bytes are released and its partitions' durable offsets move on, for
    /// those still assigned in the generation it was fetched in.
    pub fn durable(&mut self, tag: &UnitTag, now: Timestamp) {
        self.held_bytes = self.held_bytes.saturating_sub(tag.bytes);
        self.status.durable += tag.records;
        if let Some(first) = tag.first_fetched {
            let ms =
                u64::try_from(now.saturating_duration_since(first).as_millis()).unwrap_or(u64::MAX);
            self.fetch_to_durable
                .saturating_record_n(ms.max(1), tag.records);
        }
        for m in &tag.marks {
            if let Some(st) = self.assigned.get_mut(&m.partition)
                && st.generation == m.generation
            {
                let next = m.last_offset + 1;
                st.durable = Some(st.durable.map_or(next, |d| d.max(next)));
            }
        }
    }

    /// Offsets to commit now: each partition whose durable offset is past what was
    /// committed or sent. They count as sent until [`committed`](Self::committed) or
    /// [`commit_failed`](Self::commit_failed) answers.
    pub fn commits_due(&mut self) -> Vec<(Partition, i64)> {
        let mut due = Vec::new();
        for (p, st) in &mut self.assigned {
            let Some(d) = st.durable else { continue };
            let done = st.sent.max(st.committed);
            if done.is_none_or(|c| c < d) {
                st.sent = Some(d);
                due.push((p.clone(), d));
            }
        }
        if !due.is_empty() {
            self.status.commits += 1;
        }
        due
    }

    /// The broker confirmed a commit of `offset` for `partition`.
    pub fn committed(&mut self, partition: &Partition, offset: i64) {
        if let Some(st) = self.assigned.get_mut(partition) {
            st.committed = Some(st.committed.map_or(offset, |c| c.max(offset)));
            if st.sent.is_some_and(|s| s <= offset) {
                st.sent = None;
            }
        }
    }

    /// A commit failed: what was sent goes again with the next [`commits_due`](Self::commits_due).
    pub fn commit_failed(&mut self, message: String) {
        self.status.commit_errors += 1;
        self.status.last_error = Some(message);
        for st in self.assigned.values_mut() {
            st.sent = None;
        }
    }

    /// Feeds the bytes held to the watermarks: `Pause` or `Resume` the whole
    /// assignment when one is crossed.
    pub fn observe(&mut self, now: Timestamp) -> Option<Transition> {
        let t = self.watermark.observe(now, self.held_bytes)?;
        let paused = t == Transition::Pause;
        for st in self.assigned.values_mut() {
            st.paused = paused;
        }
        Some(t)
    }

    /// Bytes fetched and not yet durable.
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    /// Whether the assignment is paused.
    pub fn is_paused(&self) -> bool {
        self.watermark.is_paused()
    }

    /// Records an error for `/status`.
    pub fn error(&mut self, message: String) {
        self.status.last_error = Some(message);
    }

    /// The figures now.
    pub fn status(&self) -> KafkaStatus {
        let mut s = self.status.clone();
        s.held_bytes = self.held_bytes;
        s.paused = self.watermark.is_paused();
        s.pauses = self.watermark.pauses();
        let h = &self.fetch_to_durable;
        if !h.is_empty() {
            s.fetch_to_durable = FetchToDurable {
                records: h.len(),
                p50_ms: h.value_at_quantile(0.5),
                p99_ms: h.value_at_quantile(0.99),
                max_ms: h.max(),
            };
        }
        s.resumes = self.watermark.resumes();
        s.partitions = self
            .assigned
            .iter()
            .map(|((topic, partition), st)| PartitionStatus {
                topic: topic.clone(),
                partition: *partition,
                paused: st.paused,
                fetched: st.expected,
                durable: st.durable,
                committed: st.committed,
                high_watermark: st.high_watermark,
                lag: st
                    .high_watermark
                    .zip(st.committed)
                    .map(|(h, c)| (h - c).max(0)),
            })
            .collect();
        s
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
