//! The generator's sans-IO core: seeded records and the pacing schedule.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::record::Record;

/// Makes records: keys `key-0` … `key-{keys-1}`, payloads of `size` bytes that are
/// JSON objects (`{"seq":N,"pad":"…"}`) when `size` allows, all from a seed.
#[derive(Debug, Clone)]
pub struct RecordMaker {
    source: Arc<str>,
    rng: u64,
    keys: u32,
    size: usize,
    seq: u64,
}

impl RecordMaker {
    /// A maker for `source`.
    pub fn new(source: Arc<str>, seed: u64, keys: u32, size: usize) -> Self {
        RecordMaker {
            source,
            // splitmix64 of the seed, so seed 0 is as good as any.
            rng: splitmix(seed),
            keys: keys.max(1),
            size,
            seq: 0,
        }
    }

    /// Records made so far.
    pub fn made(&self) -> u64 {
        self.seq
    }

    /// The next record, stamped `timestamp_ms`.
    pub fn next_record(&mut self, timestamp_ms: i64) -> Record {
        let key_index = self.next_u64() % u64::from(self.keys);
        let seq = self.seq;
        self.seq += 1;
        const TAIL: &[u8] = b"\"}";
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let mut payload = Vec::with_capacity(self.size);
        // The head is written straight into the payload (no temporary string); when it
        // does not fit, the payload is all padding instead.
        let _ = write!(payload, "{{\"seq\":{seq},\"pad\":\"");
        if payload.len() + TAIL.len() <= self.size {
            while payload.len() < self.size - TAIL.len() {
                let r = self.next_u64();
                payload.push(ALPHABET[(r % ALPHABET.len() as u64) as usize]);
            }
            payload.extend_from_slice(TAIL);
        } else {
            payload.clear();
            while payload.len() < self.size {
                let r = self.next_u64();
                payload.push(ALPHABET[(r % ALPHABET.len() as u64) as usize]);
            }
        }
        Record {
            source: Arc::clone(&self.source),
            key: format!("key-{key_index}"),
            timestamp_ms,
            payload: Bytes::from(payload),
            attributes: Vec::new(),
        }
    }

    fn next_u64(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) | 1
}

/// When the next batch is due at `rate` records per second (0: at once).
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    rate: u64,
}

impl Schedule {
    /// A schedule of `rate` records per second.
    pub fn new(rate: u64) -> Self {
        Schedule { rate }
    }

    /// How long after the start the first `made` records are due.
    pub fn due_after(&self, made: u64) -> Duration {
        if self.rate == 0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(made as f64 / self.rate as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_records() {
        let mut a = RecordMaker::new("g".into(), 7, 4, 64);
        let mut b = RecordMaker::new("g".into(), 7, 4, 64);
        for _ in 0..100 {
            assert_eq!(a.next_record(1), b.next_record(1));
        }
        let mut c = RecordMaker::new("g".into(), 8, 4, 64);
        let differs = (0..10).any(|_| a.next_record(1) != c.next_record(1));
        assert!(differs);
    }

    #[test]
    fn payloads_have_the_size_and_parse_as_json() {
        let mut m = RecordMaker::new("g".into(), 0, 16, 200);
        for _ in 0..50 {
            let r = m.next_record(1);
            assert_eq!(r.payload.len(), 200);
            let v: serde_json::Value = serde_json::from_slice(&r.payload).unwrap();
            assert!(v["seq"].is_u64());
            let key: u32 = r.key.strip_prefix("key-").unwrap().parse().unwrap();
            assert!(key < 16);
        }
        let mut tiny = RecordMaker::new("g".into(), 0, 1, 3);
        assert_eq!(tiny.next_record(1).payload.len(), 3);
    }

    #[test]
    fn schedule_spaces_records() {
        let s = Schedule::new(1000);
        assert_eq!(s.due_after(500), Duration::from_millis(500));
        assert_eq!(Schedule::new(0).due_after(1_000_000), Duration::ZERO);
    }
}
