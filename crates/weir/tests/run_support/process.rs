//! What the benches read of a process from /proc (CPU time, peak RSS), and the
//! convention by which a bench runs its baseline in a child process (this binary run
//! again) that prints its elapsed seconds, CPU seconds and peak RSS.

use std::process::Command;
use std::time::Instant;

/// CPU seconds (user + system) of process `pid` so far.
pub fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 of stat (utime, stime), counted after the ")": 12 and 13.
    (ticks(11) + ticks(12)) / 100.0
}

/// Peak RSS (VmHWM) of process `pid`, in bytes.
pub fn peak_rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// Elapsed seconds, CPU seconds and peak RSS of a run.
pub struct Figures {
    pub secs: f64,
    pub cpu_secs: f64,
    pub peak_rss: u64,
}

/// Runs this binary again with `env` (the child's side calls [`report`]) and reads
/// what it printed.
pub fn run_child(env: &[(&str, String)]) -> Figures {
    let out = Command::new(std::env::current_exe().expect("this binary"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run the child");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Vec<f64> = text
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    assert!(
        v.len() == 3,
        "child: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Figures {
        secs: v[0],
        cpu_secs: v[1],
        peak_rss: v[2] as u64,
    }
}

/// The child's side: prints the seconds since `started`, the CPU seconds since
/// `cpu0` and this process's peak RSS, for [`run_child`].
pub fn report(started: Instant, cpu0: f64) {
    let pid = std::process::id();
    println!(
        "{} {} {}",
        started.elapsed().as_secs_f64(),
        cpu_secs(pid) - cpu0,
        peak_rss(pid)
    );
}

/// Whether the bench prints its table as markdown for `docs/benchmarks.md`
/// (`WEIR_BENCH_MARKDOWN=1`, which `--markdown` of the bench scripts sets): then its
/// usual report goes to stderr ([`say`]) and the markdown to stdout ([`md_row`]).
pub fn markdown() -> bool {
    std::env::var_os("WEIR_BENCH_MARKDOWN").is_some_and(|v| v == "1")
}

/// A line of the bench's usual report: stdout, or stderr when it prints markdown.
pub fn say(line: &str) {
    if markdown() {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

/// A markdown table: its header row and the alignment row (text left, figures right),
/// printed only when the bench prints markdown.
pub fn md_header(cells: &[&str]) {
    let align: Vec<String> = (0..cells.len())
        .map(|i| if i == 0 { "---" } else { "---:" }.to_owned())
        .collect();
    md_row(&cells.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>());
    md_row(&align);
}

/// A markdown table row, printed only when the bench prints markdown.
pub fn md_row(cells: &[String]) {
    if markdown() {
        println!("| {} |", cells.join(" | "));
    }
}
