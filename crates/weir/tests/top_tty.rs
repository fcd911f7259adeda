//! `weir top` against a daemon whose sink is stalled: under a pseudo-terminal (a
//! private tmux server, read with `capture-pane`) the screen shows the components, the
//! wave and the sinks' lag, and `q` quits; with stdout a pipe it prints plain lines.

mod run_support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use run_support::{Daemon, free_addr, write_config};

fn config(dir: &Path, status: SocketAddr) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "1s"

[wal]
max_disk = "2 MiB"
segment_bytes = "256 KiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 5000
size = 200

[sinks.lake]
type = "blackhole"
inputs = ["gen"]

[sinks.stalled]
type = "blackhole"
inputs = ["gen"]
rate = 20
max_lag = {{ age = "1h" }}
"#,
        data = dir.join("data").display(),
    )
}

fn overloaded(dir: &Path) -> Daemon {
    let status_addr = free_addr();
    let path = write_config(dir, &config(dir, status_addr));
    let daemon = Daemon::start(dir, &path, status_addr, &[]);
    daemon.wait_for("the WAL full", Duration::from_secs(60), |s| {
        s["wal"]["budget_used"].as_f64().unwrap_or(0.0) >= 0.9
    });
    daemon
}

/// A tmux server of this test's own (`-L`), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn new() -> Tmux {
        Tmux {
            socket: format!("weir-top-test-{}", std::process::id()),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux (scripts/test.sh installs it)")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }

    fn alive(&self) -> bool {
        self.run(&["has-session", "-t", "top"]).status.success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

#[test]
fn top_shows_components_the_wave_and_the_lag_and_q_quits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let daemon = overloaded(dir.path());
    let tmux = Tmux::new();
    let command = format!(
        "{} top --addr {}",
        env!("CARGO_BIN_EXE_weir"),
        daemon.status_addr
    );
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "160",
        "-y",
        "50",
        &command,
    ]);
    assert!(started.status.success(), "{started:?}");
    // The screen is read until it shows what it must (each refresh is a second apart).
    let deadline = Instant::now() + Duration::from_secs(30);
    let wanted = [
        "COMPONENT",
        "gen",
        "backpressured",
        "lake",
        "stalled",
        "WAVE: slow sink stalled",
        "WAL budget",
        "LAG BYTES",
        "MiB",
        "1h",
        "q quits",
    ];
    let screen = loop {
        let screen = tmux.screen();
        let sink_row = screen
            .lines()
            .find(|l| l.contains("stalled") && l.contains("1h"))
            .unwrap_or_default()
            .to_owned();
        if wanted.iter().all(|w| screen.contains(w)) && sink_row.contains("MiB") {
            break screen;
        }
        assert!(
            Instant::now() < deadline,
            "the screen never showed {wanted:?}:\n{screen}\n{}",
            daemon.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(screen.contains('%'), "{screen}");
    assert!(screen.contains('█'), "fill bars are drawn:\n{screen}");
    tmux.run(&["send-keys", "-t", "top", "q"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while tmux.alive() {
        assert!(
            Instant::now() < deadline,
            "q did not quit:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    daemon.stop();
}

#[test]
fn top_prints_plain_lines_when_stdout_is_not_a_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let daemon = overloaded(dir.path());
    let output = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "top",
            "--addr",
            &daemon.status_addr.to_string(),
            "--iterations",
            "2",
        ])
        .output()
        .expect("weir top");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        text.matches("weir at ").count(),
        2,
        "two refreshes:\n{text}"
    );
    for line in [
        "component source gen ",
        "component sink lake ",
        "component sink stalled ",
        "queue wal->stalled ",
        "wal budget ",
        "sink stalled cursor ",
    ] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
    assert!(!text.contains('\u{1b}'), "no escape sequences:\n{text}");
    let lag: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("sink stalled cursor "))
        .and_then(|rest| rest.split(" lag ").nth(1))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no lag in:\n{text}"));
    assert!(lag > 0, "{text}");
    // Nothing listening: an error naming the address, not a hang.
    let nobody = free_addr().to_string();
    let output = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["top", "--addr", &nobody, "--iterations", "1"])
        .output()
        .expect("weir top");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains(&nobody));
    daemon.stop();
}

/// Right after the daemon starts, one refresh already shows rates (`top` takes two
/// samples one refresh apart before its first frame), and `max_lag` reads in human
/// units whichever of its parts are set.
#[test]
fn one_iteration_shows_rates_and_max_lag_in_human_units() {
    let dir = tempfile::tempdir().expect("tempdir");
    let status_addr = free_addr();
    let text = format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status_addr}"
shutdown_timeout = "1s"

[wal]
max_disk = "64 MiB"
segment_bytes = "1 MiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 2000
size = 100

[sinks.capped]
type = "blackhole"
inputs = ["gen"]
max_lag = {{ bytes = "24 MiB" }}

[sinks.both]
type = "blackhole"
inputs = ["gen"]
max_lag = {{ bytes = "24 MiB", age = "10m" }}
"#,
        data = dir.path().join("data").display(),
    );
    let path = write_config(dir.path(), &text);
    let daemon = Daemon::start(dir.path(), &path, status_addr, &[]);
    let output = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "top",
            "--addr",
            &status_addr.to_string(),
            "--iterations",
            "1",
        ])
        .output()
        .expect("weir top");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rate = |component: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(component))
            .and_then(|l| l.split(" in/out ").nth(1))
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no rate for {component:?}:\n{text}"))
    };
    for component in [
        "component source gen ",
        "component sink capped ",
        "component sink both ",
    ] {
        assert!(rate(component) > 0.0, "{component}: 0 rec/s:\n{text}");
    }
    let sink = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("sink {name} ")))
            .unwrap_or_else(|| panic!("no sink {name}:\n{text}"))
            .to_owned()
    };
    assert!(
        sink("capped").contains(" max_lag 24 MiB required "),
        "{text}"
    );
    assert!(
        sink("both").contains(" max_lag 24 MiB, 10m required "),
        "{text}"
    );
    assert!(
        !text.contains("age ,") && !text.contains("25165824"),
        "{text}"
    );
    daemon.stop();
}
