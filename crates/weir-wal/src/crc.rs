//! CRC32C (Castagnoli) of a frame's pieces, without the per-call setup that dominates
//! for small frames.
//!
//! A 100-byte record's frame is CRC'd twice in its life: when the appender encodes it
//! and when a cursor reads it back. The `crc32c` crate's entry point aligns its input
//! byte by byte and picks between its parallel and serial loops on every call, which
//! for a frame's three small pieces (length, time, payload) costs more than the CRC
//! itself: it was about half of a cursor's CPU time replaying 100 B records. Here the
//! pieces are folded in one pass, 8 bytes per `crc32` instruction, with unaligned loads.
//! Frames from 512 bytes on go to `crc_fast` instead ([`crate::format`]).

/// CRC32C of the concatenation of `parts`.
#[inline]
pub(crate) fn crc32c_of(parts: &[&[u8]]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            #[allow(unsafe_code)]
            // SAFETY: the CPU has SSE4.2 (checked just above), all `sse42::of` needs.
            return unsafe { sse42::of(parts) };
        }
    }
    parts
        .iter()
        .fold(0, |crc, part| crc32c::crc32c_append(crc, part))
}

/// CRC32C of a 4-byte little-endian `head` followed by `rest`, for four such pairs at
/// once (a frame's CRC covers its length field, then its time and payload).
///
/// One frame's CRC is a chain of `crc32` instructions, each waiting for the last (three
/// cycles apiece); four frames' chains interleaved keep the CPU's one-a-cycle
/// throughput busy instead, so a cursor checks four small frames in about the time of
/// one.
#[inline]
pub(crate) fn crc32c_of4(heads: [u32; 4], rests: [&[u8]; 4]) -> [u32; 4] {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            #[allow(unsafe_code)]
            // SAFETY: the CPU has SSE4.2 (checked just above), all `sse42::of4` needs.
            return unsafe { sse42::of4(heads, rests) };
        }
    }
    std::array::from_fn(|i| crc32c_of(&[&heads[i].to_le_bytes(), rests[i]]))
}

#[cfg(target_arch = "x86_64")]
mod sse42 {
    use std::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u32, _mm_crc32_u64};

    #[target_feature(enable = "sse4.2")]
    pub(super) fn of4(heads: [u32; 4], rests: [&[u8]; 4]) -> [u32; 4] {
        let mut crc = heads.map(|h| u64::from(_mm_crc32_u32(u32::MAX, h)));
        // The words all four have, in lockstep; then each one's remainder.
        let common = rests.iter().map(|r| r.len()).min().unwrap_or(0) / 8 * 8;
        let [a, b, c, d] = rests.map(|r| r[..common].chunks_exact(8));
        let word = |w: &[u8]| u64::from_le_bytes(w.try_into().expect("8 bytes"));
        for (((wa, wb), wc), wd) in a.zip(b).zip(c).zip(d) {
            crc[0] = _mm_crc32_u64(crc[0], word(wa));
            crc[1] = _mm_crc32_u64(crc[1], word(wb));
            crc[2] = _mm_crc32_u64(crc[2], word(wc));
            crc[3] = _mm_crc32_u64(crc[3], word(wd));
        }
        for (c, rest) in crc.iter_mut().zip(rests) {
            *c = update(*c, &rest[common..]);
        }
        crc.map(|c| !(c as u32))
    }

    #[target_feature(enable = "sse4.2")]
    pub(super) fn of(parts: &[&[u8]]) -> u32 {
        let mut crc = u64::from(u32::MAX);
        for part in parts {
            crc = update(crc, part);
        }
        !(crc as u32)
    }

    #[target_feature(enable = "sse4.2")]
    #[inline]
    fn update(mut crc: u64, bytes: &[u8]) -> u64 {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            crc = _mm_crc32_u64(crc, u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        let mut rest = words.remainder();
        if let Some((w, tail)) = rest.split_first_chunk::<4>() {
            crc = u64::from(_mm_crc32_u32(crc as u32, u32::from_le_bytes(*w)));
            rest = tail;
        }
        for &b in rest {
            crc = u64::from(_mm_crc32_u8(crc as u32, b));
        }
        crc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equals_the_crc32c_crate_for_every_split_and_length() {
        let bytes: Vec<u8> = (0..300u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
            .collect();
        for len in 0..bytes.len() {
            let whole = &bytes[..len];
            let want = crc32c::crc32c(whole);
            assert_eq!(crc32c_of(&[whole]), want, "{len} bytes");
            for cut in [0, 1, 3, 4, 5, 8, 12, 16].into_iter().filter(|&c| c <= len) {
                let (a, b) = whole.split_at(cut);
                let (b, c) = b.split_at(b.len() / 2);
                assert_eq!(crc32c_of(&[a, b, c]), want, "{len} bytes cut at {cut}");
            }
        }
        assert_eq!(crc32c_of(&[]), 0);
    }

    #[test]
    fn four_at_once_equal_one_at_a_time_for_mixed_lengths() {
        let bytes: Vec<u8> = (0..400u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 9) as u8)
            .collect();
        let head = &bytes[..4];
        let head_word = u32::from_le_bytes(head.try_into().unwrap());
        for lens in [
            [0, 0, 0, 0],
            [100, 100, 100, 100],
            [1, 9, 17, 300],
            [64, 7, 0, 8],
        ] {
            for shift in 0..8 {
                let rests: [&[u8]; 4] =
                    std::array::from_fn(|i| &bytes[4 + shift + i..4 + shift + i + lens[i]]);
                let want = rests.map(|r| crc32c::crc32c(&[head, r].concat()));
                assert_eq!(
                    crc32c_of4([head_word; 4], rests),
                    want,
                    "{lens:?} shifted {shift}"
                );
            }
        }
    }
}
