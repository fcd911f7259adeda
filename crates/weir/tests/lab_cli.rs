//! `weir lab` end to end: the lesson's output against seed 000, determinism, flags and
//! output files.

use std::process::{Command, Output};

/// Seed 000's expected output block, copied verbatim from the seed.
const EXPECTED: &str = include_str!("../../weir-sim/tests/fixtures/seed_000_expected.txt");

fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .output()
        .expect("the weir binary runs")
}

fn stdout(args: &[&str]) -> String {
    let out = weir(args);
    assert!(
        out.status.success(),
        "weir {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("stdout is UTF-8")
}

/// The output without the two rows and the notes the lesson does not have.
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
fn weir_lab_prints_the_seed_tables_and_traces() {
    assert_eq!(seed_part(&stdout(&["lab"])), EXPECTED);
}

#[test]
fn weir_lab_lesson_is_the_default() {
    assert_eq!(stdout(&["lab", "lesson"]), stdout(&["lab"]));
}

#[test]
fn the_same_command_prints_the_same_bytes() {
    assert_eq!(weir(&["lab"]).stdout, weir(&["lab"]).stdout);
}

#[test]
fn flags_change_the_limits_of_every_row() {
    let out = stdout(&[
        "lab",
        "--capacity",
        "20",
        "--deadline",
        "300",
        "--window",
        "5",
        "--keys",
        "7",
    ]);
    assert!(out.contains("Limits: queue capacity 20, deadline 300 ms, credit window 5.\n"));
    let row = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row in {out}"))
            .split_whitespace()
            .filter_map(|w| w.parse::<u64>().ok())
            .collect::<Vec<u64>>()
    };
    // offered completed rejected expired maxDepth maxQueueWait producerWait finished
    assert_eq!(row("bounded, reject")[4], 20);
    assert_eq!(row("bounded, block")[4], 20);
    assert_eq!(row("credit (Flow)")[4], 5);
    assert_eq!(row("latest per key")[4], 7);
    assert_eq!(row("drop if too old")[5], 300);
    assert!(out.contains("key = message index mod 7"));
}

#[test]
fn zero_limits_are_refused_with_the_flag_named() {
    let out = weir(&["lab", "--window", "0"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--window"), "{stderr}");
}

#[test]
fn csv_and_svg_files_are_written_and_repeatable() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    for dir in [&a, &b] {
        let path = dir.path().to_str().unwrap();
        stdout(&["lab", "--csv", path, "--svg", path]);
    }
    let csv = std::fs::read_to_string(a.path().join("lesson-slow-unbounded-queue.csv")).unwrap();
    assert!(csv.starts_with("start_ms,depth_max,oldest_age_ms_max,completions,lost\n"));
    // Unbounded, slow consumer: the queue peaks at 200 waiting messages.
    let peak = csv
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(1)?.parse::<u64>().ok())
        .max();
    assert_eq!(peak, Some(200));
    let svg = std::fs::read_to_string(a.path().join("lesson-slow.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    assert!(svg.contains("simulated time (ms)"));
    let mut names: Vec<_> = std::fs::read_dir(a.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2 * 7 + 2, "{names:?}");
    for name in names {
        assert_eq!(
            std::fs::read(a.path().join(&name)).unwrap(),
            std::fs::read(b.path().join(&name)).unwrap(),
            "{name:?} differs between runs"
        );
    }
}

#[test]
fn weir_lab_kafka_prints_the_comparison_and_the_rate_trace_repeatably() {
    let out = stdout(&["lab", "kafka"]);
    for needle in [
        "time to fetch all 30000",
        "fetch-phase rate",
        "peak queue",
        "p99 in-client dwell",
        "total time",
        "paused",
        "resumed",
        "AIMD rate limiter",
        "Over the run:",
    ] {
        assert!(out.contains(needle), "no {needle:?} in {out}");
    }
    assert_eq!(out, stdout(&["lab", "kafka"]));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    assert_eq!(stdout(&["lab", "kafka", "--csv", path, "--svg", path]), out);
    for file in ["kafka-unbounded.csv", "kafka-pause-resume.csv", "kafka.svg"] {
        assert!(dir.path().join(file).exists(), "{file}");
    }
}

#[test]
fn weir_lab_run_runs_every_shipped_example() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/lab");
    let mut ran = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let path = path.to_str().unwrap();
        let out = stdout(&["lab", "run", path]);
        assert!(out.contains("strategy "), "{path}: {out}");
        assert_eq!(out, stdout(&["lab", "run", path]), "{path}");
        ran += 1;
    }
    assert!(ran >= 2);
}

#[test]
fn weir_lab_run_names_the_bad_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        "messages = 10\narrivals = { process = \"constant\", interval_ms = 10 }\n\
         service = { default_ms = 5 }\nstrategies = [{ kind = \"block\", capacity = 0 }]\n",
    )
    .unwrap();
    let out = weir(&["lab", "run", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("strategies[0].capacity: must be at least 1, found 0"),
        "{stderr}"
    );
}

#[test]
fn weir_lab_run_writes_csv_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/lab/bursts.toml");
    let out_dir = dir.path().to_str().unwrap();
    stdout(&[
        "lab",
        "run",
        example.to_str().unwrap(),
        "--csv",
        out_dir,
        "--svg",
        out_dir,
    ]);
    let svg = std::fs::read_to_string(dir.path().join("bursts.svg")).unwrap();
    assert!(svg.contains("messages waiting"));
    assert!(dir.path().join("bursts-unbounded-queue.csv").exists());
}

#[test]
fn weir_lab_littles_law_sweeps_the_depth_repeatably() {
    let args = ["lab", "littles-law", "--operations", "300"];
    let out = stdout(&args);
    assert!(
        out.contains("littles_law_depth(100/s, 1000 ms) = 100"),
        "{out}"
    );
    for depth in [1, 2, 4, 8, 16, 32, 64, 128, 256] {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(&format!("{depth} "))),
            "no depth {depth} row in {out}"
        );
    }
    assert_eq!(out, stdout(&args));
}

#[test]
fn weir_lab_littles_law_writes_held_back_over_time() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    stdout(&[
        "lab",
        "littles-law",
        "--operations",
        "300",
        "--csv",
        out_dir,
    ]);
    for latency in ["fixed", "heavy-tail"] {
        for depth in [1, 2, 4, 8, 16, 32, 64, 128, 256] {
            let path = dir
                .path()
                .join(format!("littles-law-{latency}-depth-{depth}.csv"));
            let csv = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(csv.starts_with("t_ms,held_back\n"), "{}", path.display());
            assert_eq!(csv.lines().count(), 301, "{}", path.display());
        }
    }
    // The heavy tail holds results back at some point; the fixed latency never does.
    let held = |name: &str| -> usize {
        std::fs::read_to_string(dir.path().join(name))
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(1).unwrap().parse::<usize>().unwrap())
            .max()
            .unwrap()
    };
    assert!(held("littles-law-heavy-tail-depth-16.csv") > 0);
    assert_eq!(held("littles-law-fixed-depth-16.csv"), 0);
}
