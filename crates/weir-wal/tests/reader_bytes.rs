//! The segment reader on arbitrary and mutated bytes: it never panics, never accepts a
//! damaged record, keeps every record before the damage, and never allocates in
//! proportion to a length field it has not checked against the bytes present.
#![allow(unsafe_code)] // the counting allocator below

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use weir_wal::format::{
    FORMAT_VERSION, MAX_RECORD_BYTES, SEGMENT_HEADER_LEN, SegmentHeader, scan_segment_bytes,
};

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

/// Records the largest single allocation made by this thread.
struct Counting;

// SAFETY: forwards to the system allocator unchanged; only records sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(layout.size())));
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr was allocated by System with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(new_size)));
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Scans `bytes`, returning the scan and the largest allocation it made.
fn scan_counting(bytes: &[u8]) -> (weir_wal::format::SegmentImageScan, usize) {
    LARGEST.with(|l| l.set(0));
    let scan = scan_segment_bytes(bytes);
    (scan, LARGEST.with(Cell::get))
}

/// A valid segment image with the given payloads; returns it and each record's end.
/// Frames are built here from the documented layout, independently of the crate.
fn image(payloads: &[Vec<u8>]) -> (Vec<u8>, Vec<usize>) {
    let mut out = SegmentHeader {
        first_offset: 0,
        created_ms: 1,
        version: FORMAT_VERSION,
    }
    .encode()
    .to_vec();
    let mut ends = Vec::new();
    for p in payloads {
        let len = (p.len() as u32).to_le_bytes();
        let time = 7u64.to_le_bytes();
        let mut crc = crc32c::crc32c(&len);
        crc = crc32c::crc32c_append(crc, &time);
        crc = crc32c::crc32c_append(crc, p);
        out.extend_from_slice(&len);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&time);
        out.extend_from_slice(p);
        ends.push(out.len());
    }
    (out, ends)
}

fn config() -> Config {
    Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(512),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/proptest-regressions/reader_bytes.txt"
        )))),
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic_or_overallocate(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let (scan, largest) = scan_counting(&bytes);
        prop_assert!(scan.good_len as usize <= bytes.len());
        prop_assert!(largest <= bytes.len() + 1024, "allocated {largest} for {} bytes", bytes.len());
    }

    #[test]
    fn a_valid_header_then_arbitrary_frames(tail in prop::collection::vec(any::<u8>(), 0..4096)) {
        let mut bytes = SegmentHeader { first_offset: 9, created_ms: 0, version: FORMAT_VERSION }.encode().to_vec();
        bytes.extend_from_slice(&tail);
        let (scan, largest) = scan_counting(&bytes);
        prop_assert!(scan.header.is_ok());
        prop_assert!(scan.good_len as usize <= bytes.len());
        prop_assert!(largest <= bytes.len() + 1024, "allocated {largest} for {} bytes", bytes.len());
    }

    #[test]
    fn damage_keeps_the_records_before_it_and_accepts_none_after(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..12),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
        truncate in any::<bool>(),
    ) {
        let (mut bytes, ends) = image(&payloads);
        let clean = scan_segment_bytes(&bytes);
        prop_assert_eq!(clean.records, payloads.len() as u64);
        prop_assert_eq!(clean.good_len as usize, bytes.len());
        prop_assert!(clean.problem.is_none());

        let body = SEGMENT_HEADER_LEN as usize..bytes.len();
        let pos = body.start + at.index(body.len());
        if truncate {
            bytes.truncate(pos);
        } else {
            bytes[pos] ^= flip;
        }
        let scan = scan_segment_bytes(&bytes);
        let intact = ends.iter().filter(|&&e| e <= pos).count() as u64;
        // Every record that ends before the damage is kept; the damaged one never is.
        prop_assert_eq!(scan.records, intact);
        let expected_len = if intact == 0 { SEGMENT_HEADER_LEN as usize } else { ends[intact as usize - 1] };
        prop_assert_eq!(scan.good_len as usize, expected_len);
        // A flip always shows; a cut shows unless it falls exactly between records.
        let clean_cut = truncate && (pos == SEGMENT_HEADER_LEN as usize || ends.contains(&pos));
        prop_assert_eq!(scan.problem.is_none(), clean_cut);
    }
}

#[test]
fn a_huge_length_field_is_refused_without_allocating_it() {
    let bytes = SegmentHeader {
        first_offset: 0,
        created_ms: 0,
        version: FORMAT_VERSION,
    }
    .encode()
    .to_vec();
    for len in [MAX_RECORD_BYTES, MAX_RECORD_BYTES + 1, u32::MAX] {
        let mut b = bytes.clone();
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&[1u8; 40]);
        let (scan, largest) = scan_counting(&b);
        assert_eq!(scan.records, 0);
        assert!(scan.problem.is_some());
        assert!(
            largest < 4096,
            "allocated {largest} for a {len}-byte length field"
        );
    }
}
