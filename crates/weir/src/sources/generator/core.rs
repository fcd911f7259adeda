//! The generator's sans-IO core: seeded records and the pacing schedule.

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
        const HEAD: &[u8] = b"{\"seq\":";
        const MIDDLE: &[u8] = b",\"pad\":\"";
        const TAIL: &[u8] = b"\"}";
        let mut payload = Vec::with_capacity(self.size);
        // The head is written straight into the payload (no temporary string); when it
        // does not fit, the payload is all padding instead.
        let mut digits = [0u8; 20];
        payload.extend_from_slice(HEAD);
        payload.extend_from_slice(decimal(seq, &mut digits));
        payload.extend_from_slice(MIDDLE);
        if payload.len() + TAIL.len() <= self.size {
            let head = payload.len();
            payload.resize(self.size - TAIL.len(), 0);
            self.fill(&mut payload[head..]);
            payload.extend_from_slice(TAIL);
        } else {
            payload.clear();
            payload.resize(self.size, 0);
            self.fill(&mut payload);
        }
        let mut key = String::with_capacity(KEY_PREFIX.len() + 10);
        key.push_str(KEY_PREFIX);
        key.extend(
            decimal(key_index, &mut digits)
                .iter()
                .map(|&d| char::from(d)),
        );
        Record {
            source: Arc::clone(&self.source),
            key,
            timestamp_ms,
            payload: Bytes::from(payload),
            attributes: Vec::new(),
        }
    }

    /// Fills `buf` with random characters of `[a-z0-9]`, eight from each random number:
    /// random bytes first, then each byte maps to one of 36 by a multiply and shift and
    /// to its character by arithmetic (no division, no table: the loop vectorises).
    fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for chunk in &mut chunks {
            chunk.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let tail = chunks.into_remainder();
        if !tail.is_empty() {
            let r = self.next_u64().to_le_bytes();
            tail.copy_from_slice(&r[..tail.len()]);
        }
        for b in buf.iter_mut() {
            // 0..36: a-z, then 0-9.
            let c = ((u16::from(*b) * 36) >> 8) as u8;
            *b = c + if c < 26 { b'a' } else { b'0' - 26 };
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

const KEY_PREFIX: &str = "key-";

/// `n` in decimal ASCII, written into `digits` (`write!` and `format!` showed in the
/// pipeline's profile).
fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &digits[at..]
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

    /// Records never to be made because the generator fell behind its schedule by
    /// more than [`MAX_CATCH_UP`] (a stall: backpressure, SIGSTOP, a suspended
    /// machine): with `made` records made `elapsed` after the start, those due beyond
    /// one [`MAX_CATCH_UP`] of records. The caller moves its start on by
    /// [`due_after`](Self::due_after) of them, so that it catches up at most one second
    /// of records at once instead of bursting everything it missed.
    pub fn behind(&self, made: u64, elapsed: Duration) -> u64 {
        if self.rate == 0 {
            return 0;
        }
        let due = (elapsed.as_secs_f64() * self.rate as f64) as u64;
        let allowed = (MAX_CATCH_UP.as_secs_f64() * self.rate as f64) as u64;
        due.saturating_sub(made).saturating_sub(allowed)
    }
}

/// The most a generator catches up at once after a stall: one second of records.
pub const MAX_CATCH_UP: Duration = Duration::from_secs(1);

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
    fn decimals_match_the_standard_formatting() {
        for n in [0, 1, 9, 10, 99, 100, 12_345, u64::from(u32::MAX), u64::MAX] {
            let mut digits = [0; 20];
            assert_eq!(decimal(n, &mut digits), n.to_string().as_bytes());
        }
    }

    #[test]
    fn records_count_up_and_pad_with_the_alphabet() {
        let mut m = RecordMaker::new("g".into(), 3, 1000, 200);
        let mut seen = std::collections::BTreeSet::new();
        for seq in 0..2000u64 {
            let r = m.next_record(1);
            let v: serde_json::Value = serde_json::from_slice(&r.payload).unwrap();
            assert_eq!(v["seq"].as_u64(), Some(seq));
            let pad = v["pad"].as_str().unwrap();
            assert!(
                pad.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            );
            seen.extend(pad.bytes());
            assert!(r.key.starts_with("key-"));
        }
        assert_eq!(seen.len(), 36, "every character of [a-z0-9] is used");
        let mut all_pad = RecordMaker::new("g".into(), 3, 1, 5);
        let r = all_pad.next_record(1);
        assert!(
            r.payload
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        );
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
    fn a_stall_is_caught_up_by_one_second_of_records_at_most() {
        let s = Schedule::new(2_000);
        // On schedule, or behind by less than a second: nothing is skipped.
        assert_eq!(s.behind(2_000, Duration::from_secs(1)), 0);
        assert_eq!(s.behind(1_000, Duration::from_millis(1_400)), 0);
        // 30 s stopped after 1 s: 62,000 due, 2,000 made; 2,000 may come at once and
        // 58,000 are never made.
        assert_eq!(s.behind(2_000, Duration::from_secs(31)), 58_000);
        // Moving the start on by those, at most one second of records is due.
        let start = s.due_after(58_000);
        assert_eq!(s.behind(2_000, Duration::from_secs(31) - start), 0);
        assert_eq!(Schedule::new(0).behind(0, Duration::from_secs(60)), 0);
    }

    #[test]
    fn schedule_spaces_records() {
        let s = Schedule::new(1000);
        assert_eq!(s.due_after(500), Duration::from_millis(500));
        assert_eq!(Schedule::new(0).due_after(1_000_000), Duration::ZERO);
    }
}
