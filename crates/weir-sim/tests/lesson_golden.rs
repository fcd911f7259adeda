//! The lesson's report against seed 000's "Expected output", number for number.

use std::num::NonZeroU64;

use weir_sim::lesson::{Lesson, Limits, part3};

/// Seed 000's expected output block, copied verbatim from the seed.
const EXPECTED: &str = include_str!("fixtures/seed_000_expected.txt");

/// The report without what the lesson does not have: the two extra rows and the lines
/// under each table.
fn seed_part(report: &str) -> String {
    report
        .lines()
        .filter(|l| {
            !l.starts_with("latest per key")
                && !l.starts_with("adaptive credit")
                && !l.starts_with("  superseded:")
                && !l.starts_with("  adaptive credit:")
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn parts_1_2_and_3_equal_the_seed_byte_for_byte() {
    let lesson = Lesson::run(Limits::default()).expect("the lesson runs");
    assert_eq!(seed_part(&lesson.report()), EXPECTED);
}

#[test]
fn part_3_traces_equal_the_seed() {
    let start = EXPECTED.find("Part 3.").expect("the fixture has Part 3");
    assert_eq!(part3(), &EXPECTED[start..]);
}

#[test]
fn the_extra_rows_follow_the_five_seed_rows_in_both_parts() {
    let report = Lesson::run(Limits::default())
        .expect("the lesson runs")
        .report();
    let names: Vec<&str> = report
        .lines()
        .filter(|l| l.ends_with(" ms") && !l.starts_with(' '))
        .map(|l| l[..16].trim_end())
        .collect();
    let part = [
        "unbounded queue",
        "bounded, reject",
        "drop if too old",
        "bounded, block",
        "credit (Flow)",
        "latest per key",
        "adaptive credit",
    ];
    assert_eq!(names, [part, part].concat());
}

#[test]
fn latest_per_key_never_holds_more_than_one_message_per_key() {
    for keys in [1, 5, 20, 100] {
        let limits = Limits {
            keys: NonZeroU64::new(keys).unwrap(),
            ..Limits::default()
        };
        let lesson = Lesson::run(limits).unwrap();
        let row = lesson
            .slow
            .iter()
            .find(|r| r.name == "latest per key")
            .unwrap();
        assert!(
            row.outcome.max_depth <= keys,
            "{keys} keys: {:?}",
            row.outcome
        );
        assert_eq!(
            row.outcome.offered,
            row.outcome.completed + row.outcome.superseded,
            "{keys} keys: every message is finished or superseded"
        );
    }
}

#[test]
fn a_smaller_credit_window_gives_a_shorter_wait() {
    let wait = |window: u64| {
        let limits = Limits {
            window: NonZeroU64::new(window).unwrap(),
            ..Limits::default()
        };
        let lesson = Lesson::run(limits).unwrap();
        lesson.slow[4].outcome.max_queue_wait_ms
    };
    let waits: Vec<u64> = [40, 20, 10, 5].into_iter().map(wait).collect();
    assert!(waits.windows(2).all(|w| w[0] > w[1]), "{waits:?}");
}

#[test]
fn bounded_rows_stay_within_their_bound_for_every_capacity() {
    for capacity in [1, 7, 50, 300] {
        let limits = Limits {
            capacity: NonZeroU64::new(capacity).unwrap(),
            ..Limits::default()
        };
        let lesson = Lesson::run(limits).unwrap();
        for row in lesson.slow.iter().filter(|r| r.name.starts_with("bounded")) {
            assert!(
                row.outcome.max_depth <= capacity,
                "{}: {:?}",
                row.name,
                row.outcome
            );
        }
    }
}

#[test]
fn the_report_is_the_same_every_time() {
    let a = Lesson::run(Limits::default()).unwrap().report();
    let b = Lesson::run(Limits::default()).unwrap().report();
    assert_eq!(a, b);
}
