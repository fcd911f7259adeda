use proptest::prelude::*;

use super::*;

fn p(n: i32) -> Partition {
    ("t".to_owned(), n)
}

fn t(ms: u64) -> Timestamp {
    Timestamp::from_millis(ms)
}

/// Fetches `offsets` of partition `n` into one unit of `bytes` each.
fn unit(core: &mut Core, n: i32, offsets: std::ops::Range<i64>, bytes: u64) -> UnitTag {
    let mut tag = UnitTag::default();
    for o in offsets {
        let (f, _) = core.fetched(&p(n), o, bytes).expect("assigned");
        tag.add(&f, bytes, t(0));
    }
    tag
}

#[test]
fn pauses_above_high_and_resumes_below_low_on_bytes_held() {
    let mut core = Core::new(100, 400).unwrap();
    core.assign(t(0), &[p(0), p(1)]);
    let a = unit(&mut core, 0, 0..3, 100);
    assert_eq!(core.observe(t(1)), None);
    let b = unit(&mut core, 1, 0..1, 100);
    assert_eq!(core.held_bytes(), 400);
    assert_eq!(core.observe(t(2)), Some(Transition::Pause));
    assert!(core.status().partitions.iter().all(|p| p.paused));
    assert_eq!(core.observe(t(3)), None, "one pause, not a series");
    core.durable(&a, t(10));
    assert_eq!(core.held_bytes(), 100);
    assert_eq!(core.observe(t(4)), Some(Transition::Resume));
    core.durable(&b, t(10));
    assert_eq!(core.held_bytes(), 0);
    let s = core.status();
    assert_eq!((s.pauses, s.resumes, s.paused), (1, 1, false));
}

#[test]
fn a_rebalance_resets_the_watermarks() {
    let mut core = Core::new(100, 400).unwrap();
    core.assign(t(0), &[p(0)]);
    let tag = unit(&mut core, 0, 0..4, 100);
    assert_eq!(core.observe(t(1)), Some(Transition::Pause));
    core.revoke(&[p(0)]);
    core.assign(t(2), &[p(0), p(1)]);
    assert!(!core.is_paused(), "a new assignment starts unpaused");
    // Still above the high mark: paused again at the next observation.
    assert_eq!(core.observe(t(3)), Some(Transition::Pause));
    core.durable(&tag, t(10));
    assert_eq!(core.observe(t(4)), Some(Transition::Resume));
}

#[test]
fn commits_only_durable_offsets_in_order() {
    let mut core = Core::new(100, 1_000_000).unwrap();
    core.assign(t(0), &[p(0), p(1)]);
    let a = unit(&mut core, 0, 0..10, 1);
    let b = unit(&mut core, 0, 10..20, 1);
    let c = unit(&mut core, 1, 0..5, 1);
    assert!(core.commits_due().is_empty(), "nothing durable yet");
    core.durable(&a, t(10));
    assert_eq!(core.commits_due(), vec![(p(0), 10)]);
    assert!(core.commits_due().is_empty(), "sent once");
    core.durable(&b, t(10));
    core.durable(&c, t(10));
    assert_eq!(core.commits_due(), vec![(p(0), 20), (p(1), 5)]);
    core.committed(&p(0), 20);
    core.commit_failed("broker went away".into());
    assert_eq!(core.commits_due(), vec![(p(1), 5)], "the failed one again");
    let s = core.status();
    assert_eq!(s.partitions[0].committed, Some(20));
    assert_eq!(s.commit_errors, 1);
}

#[test]
fn revoke_hands_back_the_durable_offsets_owed_and_forgets_the_rest() {
    let mut core = Core::new(100, 1_000_000).unwrap();
    core.assign(t(0), &[p(0), p(1)]);
    let a = unit(&mut core, 0, 0..10, 1);
    let late = unit(&mut core, 0, 10..20, 1);
    let b = unit(&mut core, 1, 0..5, 1);
    core.durable(&a, t(10));
    core.durable(&b, t(10));
    core.committed(&p(1), 5);
    assert_eq!(core.revoke(&[p(0), p(1)]), vec![(p(0), 10)]);
    // p0 comes back in a new generation, read again from 10 by the group.
    core.assign(t(1), &[p(0)]);
    core.set_committed(&p(0), 10, core.generation());
    core.durable(&late, t(10));
    assert!(
        core.commits_due().is_empty(),
        "a unit of the old generation is not committed for the new one"
    );
    let again = unit(&mut core, 0, 10..20, 1);
    core.durable(&again, t(10));
    assert_eq!(core.commits_due(), vec![(p(0), 20)]);
    assert_eq!(core.held_bytes(), 0);
}

#[test]
fn a_record_of_a_partition_not_assigned_is_refused() {
    let mut core = Core::new(1, 2).unwrap();
    core.assign(t(0), &[p(0)]);
    assert!(core.fetched(&p(7), 0, 10).is_none());
    assert_eq!(core.held_bytes(), 0);
}

#[test]
fn missing_offsets_are_a_counted_gap() {
    let mut core = Core::new(1, 1000).unwrap();
    core.assign(t(0), &[p(0)]);
    core.set_committed(&p(0), 100, core.generation());
    // Retention deleted 100..250 before weir read it.
    let (_, gap) = core.fetched(&p(0), 250, 1).unwrap();
    assert_eq!(
        gap,
        Some(Gap {
            topic: "t".into(),
            partition: 0,
            from: 100,
            to: 250
        })
    );
    assert_eq!(core.fetched(&p(0), 251, 1).unwrap().1, None);
    let (_, gap) = core.fetched(&p(0), 260, 1).unwrap();
    assert_eq!(gap.map(|g| (g.from, g.to)), Some((252, 260)));
    let s = core.status();
    assert_eq!((s.gaps, s.gap_offsets), (2, 158));
}

#[test]
fn records_fetched_before_the_committed_offset_is_known_are_checked_against_it() {
    let mut core = Core::new(1, 1000).unwrap();
    core.assign(t(0), &[p(0), p(1)]);
    // The first fetches arrive before the committed offsets are read.
    unit(&mut core, 0, 300..310, 1);
    unit(&mut core, 1, 40..50, 1);
    let gap = core.set_committed(&p(0), 120, core.generation());
    assert_eq!(gap.map(|g| (g.from, g.to)), Some((120, 300)));
    assert_eq!(
        core.set_committed(&p(1), 40, core.generation()),
        None,
        "started where committed"
    );
    let s = core.status();
    assert_eq!((s.gaps, s.gap_offsets), (1, 180));
    // A new generation starts over; an answer read for the old one is ignored.
    let old = core.generation();
    core.revoke(&[p(0), p(1)]);
    core.assign(t(1), &[p(0)]);
    assert_eq!(core.set_committed(&p(0), 0, old), None);
    assert_eq!(core.status().partitions[0].committed, None);
    assert_eq!(core.set_committed(&p(0), 310, core.generation()), None);
}

#[test]
fn lag_is_high_watermark_minus_committed() {
    let mut core = Core::new(1, 1000).unwrap();
    core.assign(t(0), &[p(0)]);
    core.set_committed(&p(0), 40, core.generation());
    core.set_high_watermark(&p(0), 100);
    assert_eq!(core.status().partitions[0].lag, Some(60));
}

proptest! {
    /// Whatever the interleaving of fetches, units and durability, the bytes held are
    /// what was fetched and not yet durable, the commits of a partition never go back,
    /// and no committed offset is past a durable record.
    #[test]
    fn commits_never_pass_durable_and_never_go_back(
        steps in proptest::collection::vec((0..3i32, 1..20i64, 1..100u64, any::<bool>()), 1..60),
    ) {
        let mut core = Core::new(1_000, 100_000).unwrap();
        let parts: Vec<Partition> = (0..3).map(p).collect();
        core.assign(t(0), &parts);
        let mut next = [0i64; 3];
        let mut in_flight: std::collections::VecDeque<(UnitTag, Vec<(i32, i64)>)> = Default::default();
        let mut durable_end = [0i64; 3];
        let mut last_commit = [-1i64; 3];
        let mut held = 0u64;
        for (n, count, bytes, finish) in steps {
            let mut tag = UnitTag::default();
            let start = next[n as usize];
            for o in start..start + count {
                let (f, gap) = core.fetched(&p(n), o, bytes).unwrap();
                prop_assert!(gap.is_none());
                tag.add(&f, bytes, t(0));
                held += bytes;
            }
            next[n as usize] += count;
            in_flight.push_back((tag, vec![(n, start + count)]));
            if finish && let Some((tag, ends)) = in_flight.pop_front() {
                core.durable(&tag, t(10));
                held -= tag.bytes;
                for (n, end) in ends {
                    durable_end[n as usize] = durable_end[n as usize].max(end);
                }
            }
            prop_assert_eq!(core.held_bytes(), held);
            for ((_, n), offset) in core.commits_due() {
                let i = n as usize;
                prop_assert!(offset <= durable_end[i], "commit {} past durable {}", offset, durable_end[i]);
                prop_assert!(offset > last_commit[i]);
                last_commit[i] = offset;
                core.committed(&p(n), offset);
            }
        }
    }
}

#[test]
fn fetch_to_durable_counts_each_record_from_its_units_first_fetch() {
    let mut core = Core::new(100, 1_000_000).unwrap();
    core.assign(t(0), &[p(0)]);
    let mut quick = UnitTag::default();
    for o in 0..98 {
        let (f, _) = core.fetched(&p(0), o, 1).unwrap();
        quick.add(&f, 1, t(1_000));
    }
    let mut slow = UnitTag::default();
    for (o, at) in [(98, 2_000), (99, 2_500)] {
        let (f, _) = core.fetched(&p(0), o, 1).unwrap();
        slow.add(&f, 1, t(at));
    }
    core.durable(&quick, t(1_005));
    core.durable(&slow, t(3_000));
    let l = core.status().fetch_to_durable;
    assert_eq!(l.records, 100);
    assert_eq!(l.p50_ms, 5);
    // 2 of 100 records waited 1 s (from the unit's first fetch, at 2 000), within
    // the histogram's 2 significant digits.
    assert!((1_000..1_010).contains(&l.p99_ms), "{l:?}");
    assert!((1_000..1_010).contains(&l.max_ms), "{l:?}");
}
