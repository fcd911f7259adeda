//! The log under injected I/O failures ([`weir_wal::faults`]): random appends, reads,
//! commits and reopens, with faults armed at random I/O steps, under each `on_full`
//! policy. After every operation:
//!
//! - a lack of space or descriptors (`ENOSPC` on a write or a segment's creation,
//!   `EMFILE` on a creation) never poisons the log: under `reject` the batch is refused
//!   and handed back whole; under `block` and `drop_oldest` it waits and is written
//!   once the step succeeds;
//! - any other failure (`EIO` on a write or a creation, any failed fsync) poisons it:
//!   that append is answered "in doubt", later ones fail at once;
//! - offsets never shift: an append that succeeds starts where the previous one ended
//!   (after a reopen, at the recovered end), and a refused batch uses no offset;
//! - nothing acknowledged is lost: every acknowledged record the cursor has not
//!   committed is read back with its own payload, across any number of reopens; a
//!   record answered "in doubt" comes back whole or not at all; nothing refused ever
//!   appears.
//!
//! 32 cases by default (`PROPTEST_CASES` sets it; the soak run uses 1,000).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use weir_wal::faults::{FaultPlan, IoStep};
use weir_wal::{AppendError, Batch, CursorConfig, OnFull, ReadLimits, Reader, Wal, WalConfig};

const ENOSPC: i32 = 28;
const EMFILE: i32 = 24;
const EIO: i32 = 5;

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<usize>),
    Read(usize),
    Commit,
    Reopen,
    Arm(IoStep, i32),
}

fn fault() -> impl Strategy<Value = (IoStep, i32)> {
    prop_oneof![
        Just((IoStep::Write, ENOSPC)),
        Just((IoStep::Write, EIO)),
        Just((IoStep::CreateSegment, ENOSPC)),
        Just((IoStep::CreateSegment, EMFILE)),
        Just((IoStep::CreateSegment, EIO)),
        Just((IoStep::Fsync, EIO)),
        Just((IoStep::Fsync, ENOSPC)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop::collection::vec(0usize..120, 1..5).prop_map(Op::Append),
        3 => (1usize..12).prop_map(Op::Read),
        2 => Just(Op::Commit),
        1 => Just(Op::Reopen),
        2 => fault().prop_map(|(step, errno)| Op::Arm(step, errno)),
    ]
}

fn policy() -> impl Strategy<Value = OnFull> {
    prop_oneof![
        Just(OnFull::Block),
        Just(OnFull::Reject),
        Just(OnFull::DropOldest)
    ]
}

/// Whether a failure of `step` with `errno` is a refusal (never poisons).
fn is_resource(step: IoStep, errno: i32) -> bool {
    step != IoStep::Fsync && (errno == ENOSPC || errno == EMFILE)
}

/// A record's payload: its batch's number first, so a refused batch's records can
/// never pass for those of a later batch at the same offsets.
fn payload(batch_no: u32, index: usize, size: usize) -> Vec<u8> {
    let mut p = batch_no.to_le_bytes().to_vec();
    p.extend((0..size).map(|i| (i * 7 + index) as u8));
    p
}

fn open(dir: &std::path::Path, policy: OnFull, plan: &Arc<FaultPlan>) -> Wal {
    let config = WalConfig::builder(dir)
        .segment_bytes(600)
        .max_disk(1 << 20)
        .on_full(policy)
        .cursor("a", CursorConfig::default())
        .io_faults(plan.clone())
        .build()
        .unwrap();
    let (wal, _) = Wal::open(config).unwrap();
    wal
}

/// What the test knows of the log.
#[derive(Debug, Default)]
struct Ledger {
    /// Acknowledged records by offset.
    acked: BTreeMap<u64, Vec<u8>>,
    /// Records answered "in doubt", by the offsets they were booked at.
    doubt: BTreeMap<u64, Vec<u8>>,
    /// Where the next successful append must start.
    next: u64,
    /// Where the cursor reads next.
    read: u64,
    committed: u64,
    saved: bool,
    poisoned: bool,
}

impl Ledger {
    /// A record read back at `offset`: it must be the acknowledged one, or an in-doubt
    /// one (which is then known to be in the log).
    fn check(&mut self, offset: u64, got: &[u8], ops: &str) {
        assert_eq!(offset, self.read, "offsets shifted; ops {ops}");
        if let Some(want) = self.acked.get(&offset) {
            assert_eq!(got, &want[..], "record {offset}; ops {ops}");
        } else if let Some(want) = self.doubt.remove(&offset) {
            assert_eq!(got, &want[..], "in-doubt record {offset}; ops {ops}");
            self.acked.insert(offset, want);
        } else {
            panic!("record {offset} was never appended; ops {ops}");
        }
        self.read += 1;
    }
}

async fn read_some(reader: &mut Reader, ledger: &mut Ledger, max: usize, ops: &str) -> usize {
    let b = reader
        .try_read(ReadLimits {
            max_records: max,
            max_bytes: u64::MAX,
        })
        .await
        .unwrap();
    assert_eq!(b.gap, None, "a required cursor never sees a gap; ops {ops}");
    for r in &b.records {
        ledger.check(r.offset, &r.payload, ops);
    }
    b.records.len()
}

async fn run(policy: OnFull, ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let plan = Arc::new(FaultPlan::new());
    let mut wal = open(dir.path(), policy, &plan);
    let mut reader = wal.reader("a").unwrap();
    let mut ledger = Ledger::default();
    let mut trace = Vec::new();
    for (batch_no, op) in (0u32..).zip(ops) {
        trace.push(format!("{op:?}"));
        let ops = trace.join(", ");
        match op {
            Op::Append(sizes) => {
                let payloads: Vec<Vec<u8>> = sizes
                    .iter()
                    .enumerate()
                    .map(|(i, &s)| payload(batch_no, i, s))
                    .collect();
                let mut batch = Batch::new();
                for p in &payloads {
                    batch.push(p).unwrap();
                }
                let n = payloads.len() as u64;
                let result = tokio::time::timeout(Duration::from_secs(10), wal.append(batch))
                    .await
                    .unwrap_or_else(|_| panic!("append stayed blocked; ops {ops}"));
                let fired = plan.take_fired();
                let poisons = fired.iter().any(|&(s, e)| !is_resource(s, e));
                match result {
                    _ if ledger.poisoned => {
                        assert!(
                            matches!(result, Err(AppendError::Poisoned { .. })),
                            "a poisoned log fails appends at once: {result:?}; ops {ops}"
                        );
                        assert!(fired.is_empty(), "no I/O after poisoning; ops {ops}");
                    }
                    Ok(range) => {
                        assert!(
                            !poisons,
                            "{fired:?} fired and the append succeeded; ops {ops}"
                        );
                        assert!(
                            policy != OnFull::Reject || fired.is_empty(),
                            "reject refuses on {fired:?}; ops {ops}"
                        );
                        assert_eq!(range, ledger.next..ledger.next + n, "ops {ops}");
                        for (o, p) in range.clone().zip(payloads) {
                            ledger.doubt.remove(&o);
                            ledger.acked.insert(o, p);
                        }
                        ledger.next = range.end;
                    }
                    Err(AppendError::InDoubt { .. }) => {
                        assert!(
                            poisons,
                            "in doubt without a poisoning fault ({fired:?}); ops {ops}"
                        );
                        for (o, p) in (ledger.next..).zip(payloads) {
                            ledger.doubt.insert(o, p);
                        }
                        ledger.poisoned = true;
                    }
                    Err(
                        AppendError::NoSpace { batch, .. } | AppendError::Resource { batch, .. },
                    ) => {
                        assert_eq!(policy, OnFull::Reject, "only reject refuses; ops {ops}");
                        assert!(
                            !fired.is_empty() && !poisons,
                            "refused on {fired:?}; ops {ops}"
                        );
                        assert_eq!(
                            batch.payloads().collect::<Vec<_>>(),
                            payloads,
                            "handed back whole; ops {ops}"
                        );
                    }
                    Err(other) => panic!("unexpected {other:?} after {fired:?}; ops {ops}"),
                }
            }
            Op::Read(max) => {
                read_some(&mut reader, &mut ledger, max, &ops).await;
            }
            Op::Commit => {
                reader.commit(ledger.read).await.unwrap();
                ledger.committed = ledger.read;
                ledger.saved = true;
            }
            Op::Reopen => {
                drop(reader);
                wal.close().await;
                assert!(plan.take_fired().is_empty(), "no I/O step failed at close");
                wal = open(dir.path(), policy, &plan);
                reader = wal.reader("a").unwrap();
                let end = wal.durable_end();
                let acked_end = ledger.acked.keys().next_back().map_or(0, |o| o + 1);
                assert!(
                    end >= acked_end,
                    "acknowledged records lost: end {end} < {acked_end}; ops {ops}"
                );
                // In-doubt records below the recovered end are in the log; the others
                // are not, and their offsets go to the next appends.
                let (kept, gone): (BTreeMap<_, _>, BTreeMap<_, _>) =
                    std::mem::take(&mut ledger.doubt)
                        .into_iter()
                        .partition(|(o, _)| *o < end);
                assert!(
                    end == acked_end.max(kept.keys().next_back().map_or(0, |o| o + 1)),
                    "recovered end {end} is neither an acknowledged nor an in-doubt end; ops {ops}"
                );
                drop(gone);
                ledger.doubt = kept;
                ledger.next = end;
                ledger.poisoned = false;
                let start = if ledger.saved {
                    ledger.committed
                } else {
                    wal.stats().start
                };
                assert_eq!(reader.position(), start, "ops {ops}");
                ledger.read = start;
            }
            Op::Arm(step, errno) => plan.arm(step, errno),
        }
        assert_eq!(wal.is_poisoned(), ledger.poisoned, "poisoned; ops {ops}");
    }
    // Everything acknowledged and not committed is there, after one more reopen with
    // nothing armed.
    let ops = trace.join(", ");
    plan.disarm();
    drop(reader);
    wal.close().await;
    let wal = open(dir.path(), policy, &plan);
    let mut reader = wal.reader("a").unwrap();
    ledger.read = reader.position();
    assert_eq!(
        ledger.read,
        if ledger.saved {
            ledger.committed
        } else {
            wal.stats().start
        }
    );
    while read_some(&mut reader, &mut ledger, 64, &ops).await > 0 {}
    let missing: Vec<u64> = ledger.acked.range(ledger.read..).map(|(o, _)| *o).collect();
    assert!(
        missing.is_empty(),
        "acknowledged records {missing:?} not read back; ops {ops}"
    );
    drop(reader);
    wal.close().await;
}

proptest! {
    #![proptest_config(Config {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(32),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            concat!(env!("CARGO_MANIFEST_DIR"), "/proptest-regressions/faults.txt"),
        ))),
        ..Config::default()
    })]

    #[test]
    fn injected_failures_refuse_or_poison_and_lose_nothing_acknowledged(
        policy in policy(),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(policy, ops));
    }
}
