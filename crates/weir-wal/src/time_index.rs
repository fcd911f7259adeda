//! A bounded index of append times per segment, for lag by age.

/// Entries kept per segment before downsampling.
const CAPACITY: usize = 64;

/// `(offset, time_ms)` of batch starts in a segment, at most [`CAPACITY`] of them. When
/// full, every other entry is dropped and only every `stride`-th batch start is kept
/// afterwards, so memory stays bounded however many batches a segment holds.
#[derive(Debug, Clone)]
pub(crate) struct TimeIndex {
    entries: Vec<(u64, u64)>,
    stride: u64,
    seen: u64,
    /// Every batch start is present: the time of an offset is exact.
    complete: bool,
}

impl TimeIndex {
    pub fn new(complete: bool) -> Self {
        TimeIndex {
            entries: Vec::new(),
            stride: 1,
            seen: 0,
            complete,
        }
    }

    /// Records a batch starting at `offset` appended at `time_ms`.
    pub fn push(&mut self, offset: u64, time_ms: u64) {
        let time_ms = self
            .entries
            .last()
            .map_or(time_ms, |&(_, t)| t.max(time_ms));
        self.seen += 1;
        if !(self.seen - 1).is_multiple_of(self.stride) {
            self.complete = false;
            return;
        }
        if self.entries.len() == CAPACITY {
            let mut i = 0;
            self.entries.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.stride *= 2;
            self.complete = false;
            if !(self.seen - 1).is_multiple_of(self.stride) {
                return;
            }
        }
        self.entries.push((offset, time_ms));
    }

    /// Forgets the batch starts at or after `offset` (writes that were rolled back).
    pub fn forget_from(&mut self, offset: u64) {
        self.entries.retain(|&(o, _)| o < offset);
    }

    /// The append time of `offset`: exact while complete, otherwise a late bound (so the
    /// age derived from it never overstates). `created_ms` and `next_created_ms` bound
    /// the segment's times when no entry does.
    pub fn time_of(&self, offset: u64, created_ms: u64, next_created_ms: Option<u64>) -> u64 {
        let at_or_before = self.entries.iter().rev().find(|&&(o, _)| o <= offset);
        if self.complete
            && let Some(&(_, t)) = at_or_before
        {
            return t;
        }
        if let Some(&(o, t)) = at_or_before
            && o == offset
        {
            return t;
        }
        match self.entries.iter().find(|&&(o, _)| o > offset) {
            Some(&(_, t)) => t,
            None => next_created_ms
                .or(self.entries.last().map(|&(_, t)| t))
                .unwrap_or(created_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_bounded_and_never_overstates_age() {
        let mut idx = TimeIndex::new(true);
        for i in 0..1000u64 {
            idx.push(i * 10, i);
        }
        assert!(idx.entries.len() <= CAPACITY);
        for i in 0..1000u64 {
            let t = idx.time_of(i * 10 + 3, 0, Some(2000));
            assert!(
                t >= i,
                "offset {} time {t} earlier than true {i}",
                i * 10 + 3
            );
        }
    }

    #[test]
    fn exact_while_complete() {
        let mut idx = TimeIndex::new(true);
        idx.push(0, 5);
        idx.push(10, 9);
        assert_eq!(idx.time_of(7, 0, None), 5);
        assert_eq!(idx.time_of(12, 0, None), 9);
    }
}
