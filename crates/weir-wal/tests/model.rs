//! Model-based property test: the WAL against an in-memory model of the log.
//!
//! Operations: appends of random batches, reads and commits on three cursors (two
//! required, one not), and reopening the log; under each `on_full` policy. The model
//! keeps the records, the segments (same rotation rule: a batch that would take the
//! active segment past `segment_bytes` starts a new one), the disk budget and the
//! cursors; after every operation the WAL's answers and figures must match it.

use std::collections::VecDeque;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use weir_wal::{AppendError, Batch, CursorConfig, Gap, OnFull, ReadLimits, Reader, Wal, WalConfig};

const HEADER: u64 = 40;
const FRAME: u64 = 16;
/// The mark in front of each batch (format version 2).
const MARK: u64 = 24;
const SEGMENT: u64 = 600;
const MAX_DISK: u64 = 2 * (SEGMENT + HEADER) + 200;
const CURSORS: [&str; 3] = ["a", "b", "loose"];

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<usize>),
    Read { cursor: usize, max_records: usize },
    Commit { cursor: usize },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop::collection::vec(0usize..90, 1..5).prop_map(Op::Append),
        3 => (0usize..3, 1usize..12).prop_map(|(cursor, max_records)| Op::Read { cursor, max_records }),
        2 => (0usize..3).prop_map(|cursor| Op::Commit { cursor }),
        1 => Just(Op::Reopen),
    ]
}

fn policy() -> impl Strategy<Value = OnFull> {
    prop_oneof![
        Just(OnFull::Block),
        Just(OnFull::Reject),
        Just(OnFull::DropOldest)
    ]
}

#[derive(Debug, Clone, Copy)]
struct Seg {
    first: u64,
    count: u64,
    bytes: u64,
}

#[derive(Debug, Clone, Copy)]
struct Cur {
    required: bool,
    /// Has a saved cursor file (committed at least once).
    saved: bool,
    committed: u64,
    read: u64,
}

#[derive(Debug)]
struct Model {
    policy: OnFull,
    payloads: Vec<Vec<u8>>, // by offset, including deleted ones
    segments: VecDeque<Seg>,
    cursors: [Cur; 3],
}

enum Outcome {
    Written(u64),
    Full,
    Wait,
}

impl Model {
    fn disk(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }
    fn end(&self) -> u64 {
        self.segments.back().map_or(0, |s| s.first + s.count)
    }
    fn start(&self) -> u64 {
        self.segments.front().map_or(0, |s| s.first)
    }
    /// Sealed segments below every required cursor (all sealed if none holds).
    fn releasable(&self, lazy: bool) -> usize {
        let floor = self
            .cursors
            .iter()
            .filter(|c| c.required)
            .map(|c| c.committed)
            .min();
        let floor = match floor {
            Some(f) => f,
            None if lazy => u64::MAX,
            None => return 0,
        };
        let sealed = self.segments.len() - 1;
        self.segments
            .iter()
            .take(sealed)
            .take_while(|s| s.first + s.count <= floor)
            .count()
    }
    fn drop_front(&mut self, n: usize) {
        for _ in 0..n {
            self.segments.pop_front();
        }
    }
    fn append(&mut self, sizes: &[usize], payloads: Vec<Vec<u8>>) -> Outcome {
        let len: u64 = MARK + sizes.iter().map(|&s| FRAME + s as u64).sum::<u64>();
        loop {
            let active = *self.segments.back().unwrap();
            let rotate = active.count > 0 && active.bytes + len > SEGMENT;
            let needed = len + if rotate { HEADER } else { 0 };
            if self.disk() + needed <= MAX_DISK {
                if rotate {
                    let end = self.end();
                    self.segments.push_back(Seg {
                        first: end,
                        count: 0,
                        bytes: HEADER,
                    });
                    // The writer applies retention right after a rotation: the segment
                    // it sealed may be behind every required cursor already.
                    let n = self.releasable(false);
                    self.drop_front(n);
                }
                let first = self.end();
                let seg = self.segments.back_mut().unwrap();
                seg.count += sizes.len() as u64;
                seg.bytes += len;
                self.payloads.extend(payloads);
                return Outcome::Written(first);
            }
            let releasable = self.releasable(true);
            if releasable > 0 {
                self.drop_front(releasable);
                continue;
            }
            match self.policy {
                OnFull::Reject => return Outcome::Full,
                OnFull::Block => return Outcome::Wait,
                _ => {
                    let mut freed = 0;
                    let mut n = 0;
                    for s in self.segments.iter().take(self.segments.len() - 1) {
                        if self.disk() - freed + needed <= MAX_DISK {
                            break;
                        }
                        freed += s.bytes;
                        n += 1;
                    }
                    assert!(n > 0, "model: nothing left to evict");
                    self.drop_front(n);
                }
            }
        }
    }
    /// What a read of `max_records` returns: (gap, offsets).
    fn read(&mut self, c: usize, max_records: usize) -> (Option<(u64, u64)>, Vec<u64>) {
        let start = self.start();
        let end = self.end();
        let cur = &mut self.cursors[c];
        let mut gap = None;
        if cur.read < start {
            gap = Some((cur.read, start));
            cur.read = start;
        }
        let to = end.min(cur.read.saturating_add(max_records as u64));
        let offsets: Vec<u64> = (cur.read..to).collect();
        cur.read = to;
        (gap, offsets)
    }
    fn commit(&mut self, c: usize) {
        let cur = &mut self.cursors[c];
        cur.committed = cur.committed.max(cur.read);
        cur.saved = true;
        let n = self.releasable(false);
        self.drop_front(n);
    }
}

fn payload(offset: u64, size: usize) -> Vec<u8> {
    (0..size)
        .map(|i| (offset as usize * 31 + i) as u8)
        .collect()
}

fn config(dir: &std::path::Path, policy: OnFull) -> WalConfig {
    let mut b = WalConfig::builder(dir)
        .segment_bytes(SEGMENT)
        .max_disk(MAX_DISK)
        .on_full(policy);
    for (i, name) in CURSORS.iter().enumerate() {
        b = b.cursor(
            *name,
            CursorConfig {
                required: i < 2,
                ..CursorConfig::default()
            },
        );
    }
    b.build().unwrap()
}

/// One op in a few characters, for failure messages that must fit on one line (CI
/// logs cut long multi-line dumps): `a22.52` appends two records of 22 and 52 bytes,
/// `r1x8` reads 8 from cursor 1, `c1` commits cursor 1, `o` reopens.
fn compact(op: &Op) -> String {
    match op {
        Op::Append(sizes) => {
            let s: Vec<String> = sizes.iter().map(ToString::to_string).collect();
            format!("a{}", s.join("."))
        }
        Op::Read {
            cursor,
            max_records,
        } => format!("r{cursor}x{max_records}"),
        Op::Commit { cursor } => format!("c{cursor}"),
        Op::Reopen => "o".to_owned(),
    }
}

/// Waits until the writer has applied retention the model already applied; on a
/// mismatch names the ops done so far (`trace`) and the WAL's counters.
async fn settle(wal: &Wal, model: &Model, trace: &[String]) {
    for _ in 0..500 {
        let s = wal.stats();
        if s.start == model.start() && s.disk_bytes == model.disk() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let s = wal.stats();
    panic!(
        "WAL start {} disk {} != model start {} disk {} (model segments {:?}; WAL: {} \
         segments, end {}, retention-deleted {}, evicted {}, fs room {:?}, fs-full events {}, \
         resource refusals {}, quarantined {:?}, cursors {:?}); ops {}",
        s.start,
        s.disk_bytes,
        model.start(),
        model.disk(),
        model
            .segments
            .iter()
            .map(|g| (g.first, g.count, g.bytes))
            .collect::<Vec<_>>(),
        s.segments,
        s.durable_end,
        s.retention_deleted_segments,
        s.evicted_segments,
        s.fs_room_bytes,
        s.fs_full_events,
        s.resource_refusals,
        s.quarantined_ranges,
        s.cursors.iter().map(|c| c.committed).collect::<Vec<_>>(),
        trace.join(" ")
    );
}

async fn run(policy: OnFull, ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model {
        policy,
        payloads: Vec::new(),
        segments: VecDeque::from([Seg {
            first: 0,
            count: 0,
            bytes: HEADER,
        }]),
        cursors: [
            Cur {
                required: true,
                saved: false,
                committed: 0,
                read: 0,
            },
            Cur {
                required: true,
                saved: false,
                committed: 0,
                read: 0,
            },
            Cur {
                required: false,
                saved: false,
                committed: 0,
                read: 0,
            },
        ],
    };
    let (mut wal, _) = Wal::open(config(dir.path(), policy)).unwrap();
    let mut readers: Vec<Reader> = CURSORS.iter().map(|n| wal.reader(n).unwrap()).collect();
    let mut trace = Vec::new();
    for op in ops {
        trace.push(compact(&op));
        match op {
            Op::Append(sizes) => {
                let first = model.payloads.len() as u64;
                let payloads: Vec<Vec<u8>> = sizes
                    .iter()
                    .enumerate()
                    .map(|(i, &s)| payload(first + i as u64, s))
                    .collect();
                let mut batch = Batch::with_time_ms(1);
                for p in &payloads {
                    batch.push(p).unwrap();
                }
                let n = sizes.len() as u64;
                match model.append(&sizes, payloads.clone()) {
                    Outcome::Written(at) => {
                        let got = wal.append(batch).await.unwrap();
                        assert_eq!(got, at..at + n);
                    }
                    Outcome::Full => match wal.append(batch).await {
                        Err(AppendError::Full { batch, .. }) => {
                            assert_eq!(batch.payloads().collect::<Vec<_>>(), payloads);
                        }
                        other => panic!("model says Full, WAL says {other:?}"),
                    },
                    Outcome::Wait => {
                        trace.push("(waits".to_owned());
                        let w = wal.clone();
                        let mut pending = tokio::spawn(async move { w.append(batch).await });
                        let early =
                            tokio::time::timeout(Duration::from_millis(20), &mut pending).await;
                        assert!(
                            early.is_err(),
                            "model says the append waits; it returned {early:?}"
                        );
                        // The required cursors catch up and commit, one after the other;
                        // the append resumes as soon as the model says it fits.
                        let mut placed = None;
                        for (c, reader) in readers.iter_mut().enumerate().take(2) {
                            model.read(c, usize::MAX);
                            while !reader
                                .try_read(ReadLimits {
                                    max_records: 10_000,
                                    max_bytes: u64::MAX,
                                })
                                .await
                                .unwrap()
                                .is_empty()
                            {}
                            assert_eq!(reader.position(), model.cursors[c].read);
                            reader.commit(model.cursors[c].read).await.unwrap();
                            model.commit(c);
                            trace.push(format!("caught-up{c}"));
                            if placed.is_none() {
                                match model.append(&sizes, payloads.clone()) {
                                    Outcome::Written(at) => placed = Some(at),
                                    Outcome::Wait => {
                                        settle(&wal, &model, &trace).await;
                                        assert!(
                                            !pending.is_finished(),
                                            "the WAL appended while the model waits"
                                        );
                                    }
                                    Outcome::Full => unreachable!("block never rejects"),
                                }
                            }
                            if placed.is_some() {
                                break;
                            }
                        }
                        trace.push("placed)".to_owned());
                        let at = placed
                            .expect("model: still no room after every required cursor caught up");
                        let got = tokio::time::timeout(Duration::from_secs(5), pending)
                            .await
                            .expect("append stayed blocked")
                            .unwrap()
                            .unwrap();
                        assert_eq!(got, at..at + n);
                    }
                }
            }
            Op::Read {
                cursor,
                max_records,
            } => {
                let (gap, offsets) = model.read(cursor, max_records);
                let b = readers[cursor]
                    .try_read(ReadLimits {
                        max_records,
                        max_bytes: u64::MAX,
                    })
                    .await
                    .unwrap();
                let want_gap = gap.map(|(from, to)| Gap::Evicted {
                    from,
                    to,
                    records: to - from,
                });
                assert_eq!(b.gap, want_gap, "cursor {cursor}");
                let got: Vec<u64> = b.records.iter().map(|r| r.offset).collect();
                assert_eq!(got, offsets, "cursor {cursor}");
                for r in &b.records {
                    assert_eq!(r.payload, model.payloads[r.offset as usize]);
                }
                assert_eq!(b.next_offset(), model.cursors[cursor].read);
            }
            Op::Commit { cursor } => {
                let at = model.cursors[cursor].read;
                readers[cursor].commit(at).await.unwrap();
                model.commit(cursor);
            }
            Op::Reopen => {
                drop(readers);
                wal.close().await;
                let (w, report) = Wal::open(config(dir.path(), policy)).unwrap();
                assert_eq!(report.truncated_bytes, 0);
                assert_eq!(
                    (report.start, report.durable_end),
                    (model.start(), model.end())
                );
                wal = w;
                readers = CURSORS.iter().map(|n| wal.reader(n).unwrap()).collect();
                let start = model.start();
                for (c, r) in model.cursors.iter_mut().zip(&readers) {
                    if !c.saved {
                        // No saved position: start_from = earliest.
                        c.committed = start;
                    }
                    assert_eq!(r.position(), c.committed);
                    c.read = c.committed;
                }
            }
        }
        settle(&wal, &model, &trace).await;
        let s = wal.stats();
        assert!(s.disk_bytes <= MAX_DISK);
        assert_eq!(s.durable_end, model.end());
        assert_eq!(s.segments, model.segments.len());
        for (c, m) in s.cursors.iter().zip(&model.cursors) {
            assert_eq!(c.committed, m.committed, "{}", c.name);
            assert_eq!(c.lag_records, model.end() - m.committed.max(model.start()));
        }
    }
}

proptest! {
    #![proptest_config(Config {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            concat!(env!("CARGO_MANIFEST_DIR"), "/proptest-regressions/model.txt"),
        ))),
        ..Config::default()
    })]

    #[test]
    fn the_wal_behaves_like_the_model(policy in policy(), ops in prop::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(policy, ops));
    }
}
