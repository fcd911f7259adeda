//! Fuzz the segment reader: any bytes as a segment image, and any bytes as frames after
//! a valid header. It must never panic, and whatever it accepts must lie within the
//! input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_wal::format::{FORMAT_VERSION, SEGMENT_HEADER_LEN, SegmentHeader, scan_segment_bytes};

fuzz_target!(|data: &[u8]| {
    let scan = scan_segment_bytes(data);
    assert!(scan.good_len as usize <= data.len());

    let mut image = SegmentHeader { first_offset: 0, created_ms: 0, version: FORMAT_VERSION }.encode().to_vec();
    image.extend_from_slice(data);
    let scan = scan_segment_bytes(&image);
    assert!(scan.header.is_ok());
    assert!(scan.good_len >= SEGMENT_HEADER_LEN);
    assert!(scan.good_len as usize <= image.len());
});
