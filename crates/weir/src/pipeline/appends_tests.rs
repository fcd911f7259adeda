//! Units in flight are reported in order, bounded, and kept in order across a refusal.

use std::sync::Arc;
use std::time::Duration;

use weir_flow::semaphore::{DualSemaphore, DualSemaphoreConfig};
use weir_wal::{Batch, CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

use super::*;
use crate::pipeline::{Reserved, SourceStats};

fn batch(tag: u8, bytes: usize) -> Batch {
    let mut b = Batch::new();
    b.push(&vec![tag; bytes]).unwrap();
    b
}

fn open(dir: &std::path::Path, on_full: OnFull) -> (Wal, Ingest) {
    let config = WalConfig::builder(dir)
        .max_disk(256 << 10)
        .segment_bytes(32 << 10)
        .on_full(on_full)
        .cursor("sink", CursorConfig::default())
        .build()
        .unwrap();
    let (wal, _) = Wal::open(config).unwrap();
    let telemetry = crate::telemetry::Telemetry::new("test".into());
    let stats = Arc::new(SourceStats::new(
        telemetry.component(crate::telemetry::ComponentKind::Source, "s"),
    ));
    let ingest = Ingest::new(
        wal.clone(),
        DualSemaphore::new(DualSemaphoreConfig::new(256, 8 << 20)),
        Arc::new(Reserved::new()),
        64,
        stats,
    );
    (wal, ingest)
}

/// Every record's first byte, in log order; commits the cursor as it reads.
async fn drain(wal: &Wal) -> Vec<u8> {
    let mut reader = wal.reader("sink").unwrap();
    let mut out = Vec::new();
    while reader.position() < wal.durable_end() {
        let read = reader.read(ReadLimits::default()).await.unwrap();
        out.extend(read.records.iter().map(|r| r.payload[0]));
        reader.commit(read.next_offset()).await.unwrap();
    }
    out
}

const LIMIT: InFlight = InFlight {
    units: 3,
    bytes: 1 << 20,
};

/// Three units are in flight at once (submitting does not wait for durability), the
/// bound stops a fourth, and they are reported in submission order, an empty unit (a
/// quarantined message) in its turn; the log holds their records in that order.
#[tokio::test]
async fn units_in_flight_are_bounded_and_reported_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, ingest) = open(dir.path(), OnFull::Block);
    let mut appends = OrderedAppends::new(ingest, LIMIT);
    assert!(appends.has_room());
    appends
        .submit(0, vec![batch(b'a', 100), batch(b'b', 100)], None)
        .await
        .unwrap();
    appends.submit(1, Vec::new(), None).await.unwrap();
    appends
        .submit(2, vec![batch(b'c', 100)], None)
        .await
        .unwrap();
    assert_eq!(appends.in_flight().0, 3, "three units in flight at once");
    assert!(!appends.has_room(), "the bound holds a fourth back");
    let mut order = Vec::new();
    while let Some(event) = appends.next().await {
        match event {
            Event::Durable(tag) => order.push(tag),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(order, [0, 1, 2]);
    assert_eq!(appends.in_flight(), (0, 0));
    assert_eq!(drain(&wal).await, b"abc");
    wal.close().await;
}

/// The byte bound: a unit larger than the bound is allowed alone, and nothing joins it.
#[tokio::test]
async fn a_unit_above_the_byte_bound_goes_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, ingest) = open(dir.path(), OnFull::Block);
    let limit = InFlight {
        units: 8,
        bytes: 1000,
    };
    let mut appends = OrderedAppends::new(ingest, limit);
    appends
        .submit(0, vec![batch(b'a', 2000)], None)
        .await
        .unwrap();
    assert!(!appends.has_room());
    assert!(matches!(appends.next().await, Some(Event::Durable(0))));
    assert!(appends.has_room());
    wal.close().await;
}

/// Under `on_full = "reject"`, unit 0 (a batch that does not fit) is refused and unit 1
/// (a small batch that would fit) is taken back with it; after room is freed they are
/// resubmitted and land in their order, reported in order. Without the chain the small
/// one would be written first.
#[tokio::test]
async fn a_refusal_takes_back_every_unit_behind_it_and_keeps_the_order() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, ingest) = open(dir.path(), OnFull::Reject);
    while wal.stats().disk_bytes + 20_100 <= wal.max_disk() {
        wal.append(batch(b'f', 2_000)).await.unwrap();
    }
    let mut appends = OrderedAppends::new(ingest, LIMIT);
    appends
        .submit("first", vec![batch(b'x', 100), batch(b'A', 20_000)], None)
        .await
        .unwrap();
    appends
        .submit("second", vec![batch(b'b', 100)], None)
        .await
        .unwrap();
    assert!(matches!(appends.next().await, Some(Event::Refused)));
    assert!(!appends.has_room(), "nothing new before the refused units");
    assert!(!appends.is_empty());
    // The sink catches up: room for everything.
    let filled = drain(&wal).await;
    assert_eq!(
        filled.last(),
        Some(&b'x'),
        "the first batch of unit 0 was written"
    );
    appends.resubmit(None).await.unwrap();
    let mut order = Vec::new();
    while let Some(event) = appends.next().await {
        match event {
            Event::Durable(tag) => order.push(tag),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(order, ["first", "second"]);
    assert_eq!(
        drain(&wal).await,
        b"Ab",
        "unit 0's refused batch, then unit 1; unit 0's first batch not written twice"
    );
    wal.close().await;
}

/// At shutdown the refused units can be given up: their tags come back in order.
#[tokio::test]
async fn refused_units_can_be_given_up_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, ingest) = open(dir.path(), OnFull::Reject);
    while wal.stats().disk_bytes + 20_100 <= wal.max_disk() {
        wal.append(batch(b'f', 2_000)).await.unwrap();
    }
    let mut appends = OrderedAppends::new(ingest, LIMIT);
    appends
        .submit(7, vec![batch(b'A', 20_000)], None)
        .await
        .unwrap();
    appends
        .submit(8, vec![batch(b'b', 10)], None)
        .await
        .unwrap();
    assert!(matches!(appends.next().await, Some(Event::Refused)));
    assert_eq!(appends.give_up(), [7, 8]);
    assert!(appends.is_empty());
    assert_eq!(appends.in_flight(), (0, 0));
    wal.close().await;
}

/// A unit larger than the source → WAL channel (here 3 batches for room of about 1):
/// each batch's admission waits for the previous batch's answer, which comes while
/// `next` is not being polled: submitting must not wait on itself.
#[tokio::test]
async fn a_unit_larger_than_the_channel_is_submitted_piece_by_piece() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = open(dir.path(), OnFull::Block);
    let telemetry = crate::telemetry::Telemetry::new("test".into());
    let stats = Arc::new(SourceStats::new(
        telemetry.component(crate::telemetry::ComponentKind::Source, "s"),
    ));
    let room = batch(b'a', 1000).encoded_len();
    let ingest = Ingest::new(
        wal.clone(),
        DualSemaphore::new(DualSemaphoreConfig::new(256, room)),
        Arc::new(Reserved::new()),
        64,
        stats,
    );
    let mut appends = OrderedAppends::new(ingest, LIMIT);
    let unit = vec![batch(b'a', 1000), batch(b'b', 1000), batch(b'c', 1000)];
    tokio::time::timeout(Duration::from_secs(10), appends.submit(0, unit, None))
        .await
        .expect("submitted without waiting on itself")
        .unwrap();
    assert!(matches!(appends.next().await, Some(Event::Durable(0))));
    assert_eq!(drain(&wal).await, b"abc");
    wal.close().await;
}
