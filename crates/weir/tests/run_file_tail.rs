//! The file source as a log tailer, end to end: `weir run` tails files into a file sink
//! through the WAL, across rotations, restarts and `kill -9`; every line must arrive
//! exactly once and whole.

mod run_support;

use std::io::Write;
use std::time::{Duration, Instant};

use run_support::tail::{Delivered, Writer, append, config, wait_delivered};
use run_support::{Daemon, free_addr};

/// logrotate's default (`create`): rename, create the file again, tell the writer.
fn rename_rotate(dir: &std::path::Path, writer: &Writer, generation: u32) {
    let log = dir.join("app.log");
    std::fs::rename(&log, dir.join(format!("app.log.{generation}"))).unwrap();
    std::fs::File::create(&log).unwrap();
    writer.reopen();
}

#[test]
fn rename_rotation_every_100ms_loses_and_repeats_nothing_across_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let status = free_addr();
    let path = config(
        tmp.path(),
        status,
        &format!("{}/*.log", logs.display()),
        "batch_size = 128",
    );
    let writer = Writer::start(logs.join("app.log"), 5_000);
    let mut daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let started = Instant::now();
    let mut generation = 0;
    let mut restarted = false;
    while started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
        generation += 1;
        rename_rotate(&logs, &writer, generation);
        // Halfway: stopped and started again while rotations go on.
        if !restarted && started.elapsed() > Duration::from_secs(5) {
            assert_eq!(daemon.stop(), Some(0));
            std::thread::sleep(Duration::from_millis(300));
            daemon = Daemon::start(tmp.path(), &path, status, &[]);
            restarted = true;
        }
    }
    let written = writer.stop();
    assert!(written >= 40_000, "the writer wrote only {written} lines");
    let out = tmp.path().join("out");
    wait_delivered(&daemon, &out, written, Duration::from_secs(60));
    let s = daemon.status();
    assert_eq!(daemon.stop(), Some(0));
    let d = Delivered::read(&out);
    assert!(
        d.fragments.is_empty(),
        "fragments: {:?}",
        &d.fragments[..d.fragments.len().min(5)]
    );
    assert_eq!(d.missing(written), Vec::<u64>::new());
    assert_eq!(d.duplicates(), 0, "every line exactly once");
    assert!(
        s["sources"]["tail"]["rotations"].as_u64().unwrap() > 0,
        "{s:#}"
    );
}

#[test]
fn copytruncate_loses_only_the_copy_window_and_counts_the_truncation() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("app.log");
    let status = free_addr();
    let path = config(tmp.path(), status, &log.display().to_string(), "");
    let writer = Writer::start(log.clone(), 2_000);
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let mut windows = Vec::new();
    for generation in 1..=5 {
        std::thread::sleep(Duration::from_millis(700));
        // logrotate's copytruncate: copy, then truncate in place; the writer goes on
        // with its O_APPEND descriptor.
        let before = writer.next.load(std::sync::atomic::Ordering::Acquire);
        std::fs::copy(&log, tmp.path().join(format!("app.log.{generation}"))).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .unwrap()
            .set_len(0)
            .unwrap();
        let after = writer.next.load(std::sync::atomic::Ordering::Acquire);
        windows.push(before.saturating_sub(1)..after + 1);
    }
    std::thread::sleep(Duration::from_millis(500));
    let written = writer.stop();
    let out = tmp.path().join("out");
    // Everything outside the copy windows arrives.
    let outside: Vec<u64> = (0..written)
        .filter(|n| !windows.iter().any(|w| w.contains(n)))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let d = loop {
        let d = Delivered::read(&out);
        if outside.iter().all(|n| d.counts.contains_key(n)) || Instant::now() > deadline {
            break d;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let s = daemon.status();
    assert_eq!(daemon.stop(), Some(0));
    assert!(
        d.fragments.is_empty(),
        "fragments: {:?}",
        &d.fragments[..d.fragments.len().min(5)]
    );
    let lost: Vec<u64> = d
        .missing(written)
        .into_iter()
        .filter(|n| !windows.iter().any(|w| w.contains(n)))
        .collect();
    assert_eq!(
        lost,
        Vec::<u64>::new(),
        "lost outside the copy windows {windows:?}"
    );
    assert_eq!(d.duplicates(), 0);
    assert_eq!(
        s["sources"]["tail"]["truncations"], 5,
        "{:#}",
        s["sources"]["tail"]
    );
}

#[test]
fn a_file_deleted_while_open_is_read_to_its_end() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("app.log");
    append(&log, 0..100);
    let status = free_addr();
    let path = config(
        tmp.path(),
        status,
        &log.display().to_string(),
        "rotate_wait = \"500ms\"",
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let out = tmp.path().join("out");
    wait_delivered(&daemon, &out, 100, Duration::from_secs(10));
    // The logger keeps its descriptor; the file is deleted, and it writes on.
    let mut logger = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::fs::remove_file(&log).unwrap();
    for n in 100..200 {
        logger
            .write_all(run_support::tail::line(n).as_bytes())
            .unwrap();
    }
    drop(logger);
    let d = wait_delivered(&daemon, &out, 200, Duration::from_secs(10));
    daemon.wait_for(
        "the deleted file to be released",
        Duration::from_secs(10),
        |s| s["sources"]["tail"]["released"] == 1,
    );
    assert_eq!(daemon.stop(), Some(0));
    assert_eq!(d.duplicates(), 0);
}

#[test]
fn rotation_while_stopped_resumes_under_the_new_name() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("app.log");
    append(&log, 0..100);
    let status = free_addr();
    let path = config(
        tmp.path(),
        status,
        &log.display().to_string(),
        "rotate_wait = \"500ms\"",
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let out = tmp.path().join("out");
    wait_delivered(&daemon, &out, 100, Duration::from_secs(10));
    assert_eq!(daemon.stop(), Some(0));
    // While weir is stopped: more lines, a rename rotation, a new file.
    append(&log, 100..150);
    std::fs::rename(&log, tmp.path().join("app.log.1")).unwrap();
    append(&log, 150..200);
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let d = wait_delivered(&daemon, &out, 200, Duration::from_secs(10));
    assert_eq!(daemon.stop(), Some(0));
    assert!(d.fragments.is_empty());
    assert_eq!(
        d.duplicates(),
        0,
        "the renamed file resumed at its saved position"
    );
}

#[test]
fn kill9_mid_rotation_loses_nothing_and_repeats_only_what_was_in_flight() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let status = free_addr();
    let path = config(
        tmp.path(),
        status,
        &format!("{}/*.log", logs.display()),
        "batch_size = 64",
    );
    let writer = Writer::start(logs.join("app.log"), 5_000);
    let mut daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let mut generation = 0;
    for round in 0..3 {
        for _ in 0..8 {
            std::thread::sleep(Duration::from_millis(150));
            generation += 1;
            rename_rotate(&logs, &writer, generation);
        }
        // kill -9 right after a rotation, with batches in flight.
        generation += 1;
        rename_rotate(&logs, &writer, generation);
        daemon.kill9();
        std::thread::sleep(Duration::from_millis(100 * (round + 1)));
        daemon = Daemon::start(tmp.path(), &path, status, &[]);
    }
    let written = writer.stop();
    let out = tmp.path().join("out");
    let d = wait_delivered(&daemon, &out, written, Duration::from_secs(60));
    assert_eq!(daemon.stop(), Some(0));
    assert!(
        d.fragments.is_empty(),
        "fragments: {:?}",
        &d.fragments[..d.fragments.len().min(5)]
    );
    assert_eq!(d.missing(written), Vec::<u64>::new());
    // Per kill: at most the source's batches in flight (4 × 64 lines, and one whose
    // position was being saved) and the sink's last unconfirmed read (1024).
    let bound = 3 * (5 * 64 + 1024);
    assert!(
        d.duplicates() <= bound,
        "{} duplicates, more than {bound}",
        d.duplicates()
    );
}

#[test]
fn an_inode_reused_by_a_file_with_another_start_is_read_from_its_start() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("app.log");
    append(&log, 0..50);
    let status = free_addr();
    let path = config(tmp.path(), status, &log.display().to_string(), "");
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let out = tmp.path().join("out");
    wait_delivered(&daemon, &out, 50, Duration::from_secs(10));
    assert_eq!(daemon.stop(), Some(0));
    // Deleted and created again: the new file may well get the same inode. Where the
    // filesystem gives another, the saved entry is made to name the new one, so the
    // test always meets a reused inode with other first bytes.
    std::fs::remove_file(&log).unwrap();
    let mut f = std::fs::File::create(&log).unwrap();
    for n in 1000..1010u64 {
        f.write_all(
            format!(
                "{{\"n\":{n},\"pad\":\"{}\",\"other\":true}}\n",
                "x".repeat(180)
            )
            .as_bytes(),
        )
        .unwrap();
    }
    drop(f);
    let inode = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&log).unwrap().ino()
    };
    let store = tmp.path().join("data/sources/tail.positions.json");
    let mut positions: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&store).unwrap()).unwrap();
    assert_eq!(
        positions["files"].as_array().unwrap().len(),
        1,
        "{positions}"
    );
    positions["files"][0]["inode"]["ino"] = inode.into();
    std::fs::write(&store, positions.to_string()).unwrap();
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("the new file read", Duration::from_secs(10), |s| {
        s["sinks"]["out"]["records"] == 10
    });
    assert_eq!(daemon.stop(), Some(0));
    let d = Delivered::read(&out);
    assert_eq!(
        d.counts.keys().filter(|&&n| n >= 1000).count(),
        10,
        "read from its first byte"
    );
}

#[test]
fn two_hundred_files_under_64_slots_are_all_read() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    for i in 0..200u64 {
        append(&logs.join(format!("f{i:03}.log")), i * 1000..i * 1000 + 50);
    }
    let status = free_addr();
    let path = config(
        tmp.path(),
        status,
        &format!("{}/*.log", logs.display()),
        "max_open_files = 64",
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let out = tmp.path().join("out");
    wait_delivered(&daemon, &out, 200 * 50, Duration::from_secs(30));
    let s = daemon.status();
    assert!(
        s["sources"]["tail"]["open_files"].as_u64().unwrap() <= 64,
        "{:#}",
        s["sources"]["tail"]
    );
    assert_eq!(s["sources"]["tail"]["files"].as_array().unwrap().len(), 200);
    assert_eq!(daemon.stop(), Some(0));
    let d = Delivered::read(&out);
    let expected: Vec<u64> = (0..200u64).flat_map(|i| i * 1000..i * 1000 + 50).collect();
    assert_eq!(d.counts.keys().copied().collect::<Vec<_>>(), expected);
    assert_eq!(d.duplicates(), 0);
}

#[test]
fn two_hundred_growing_files_under_64_slots_all_progress() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let files: Vec<_> = (0..200u64)
        .map(|i| logs.join(format!("f{i:03}.log")))
        .collect();
    for (i, f) in files.iter().enumerate() {
        append(f, i as u64 * 100_000..i as u64 * 100_000 + 1);
    }
    let status = free_addr();
    let path = config(
        tmp.path(),
        status,
        &format!("{}/*.log", logs.display()),
        "max_open_files = 64\nscan_interval = \"250ms\"",
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    // Every file grows, round after round; after each round every file has moved on.
    let mut written = vec![1u64; 200];
    for round in 0..6 {
        for (i, f) in files.iter().enumerate() {
            let base = i as u64 * 100_000;
            append(f, base + written[i]..base + written[i] + 20);
            written[i] += 20;
        }
        std::thread::sleep(Duration::from_millis(500));
        if round == 2 {
            let s = daemon.status();
            let behind: Vec<_> = s["sources"]["tail"]["files"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["position"].as_u64().unwrap() == 0)
                .map(|f| f["path"].clone())
                .collect();
            assert!(behind.is_empty(), "files that never progressed: {behind:?}");
        }
    }
    let total: u64 = written.iter().sum();
    let out = tmp.path().join("out");
    let d = wait_delivered(&daemon, &out, total, Duration::from_secs(30));
    assert_eq!(daemon.stop(), Some(0));
    assert_eq!(d.duplicates(), 0);
}

#[test]
fn a_partial_last_line_waits_for_its_newline() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("app.log");
    append(&log, 0..3);
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let whole = run_support::tail::line(3);
    let (head, tail) = whole.split_at(40);
    f.write_all(head.as_bytes()).unwrap();
    let status = free_addr();
    let path = config(tmp.path(), status, &log.display().to_string(), "");
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("the whole lines", Duration::from_secs(10), |s| {
        s["sinks"]["out"]["records"] == 3
    });
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        daemon.status()["sinks"]["out"]["records"],
        3,
        "the partial line waits"
    );
    f.write_all(tail.as_bytes()).unwrap();
    let d = wait_delivered(&daemon, &tmp.path().join("out"), 4, Duration::from_secs(10));
    assert_eq!(daemon.stop(), Some(0));
    assert!(d.fragments.is_empty(), "{:?}", d.fragments);
}

#[test]
fn a_file_created_between_scans_is_found_by_notification() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    append(&logs.join("first.log"), 0..10);
    let status = free_addr();
    let path = config(
        tmp.path(),
        status,
        &format!("{}/*.log", logs.display()),
        "scan_interval = \"1m\"",
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let out = tmp.path().join("out");
    wait_delivered(&daemon, &out, 10, Duration::from_secs(10));
    // The next listing is a minute away: only inotify can find this one in time.
    let created = Instant::now();
    append(&logs.join("second.log"), 10..20);
    wait_delivered(&daemon, &out, 20, Duration::from_secs(10));
    assert!(created.elapsed() < Duration::from_secs(30));
    assert_eq!(daemon.stop(), Some(0));
}

#[test]
fn a_glob_that_matches_nothing_warns_and_waits_for_files() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("not-yet");
    let status = free_addr();
    let path = config(
        tmp.path(),
        status,
        &format!("{}/*.log", logs.display()),
        "scan_interval = \"200ms\"",
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    std::thread::sleep(Duration::from_millis(500));
    let s = daemon.status();
    let tail = s["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "tail")
        .unwrap()
        .clone();
    assert_eq!(tail["state"], "running", "{s:#}");
    assert!(
        daemon.stderr().contains("no file matches"),
        "{}",
        daemon.stderr()
    );
    std::fs::create_dir(&logs).unwrap();
    append(&logs.join("late.log"), 0..5);
    wait_delivered(&daemon, &tmp.path().join("out"), 5, Duration::from_secs(10));
    assert_eq!(daemon.stop(), Some(0));
}

#[test]
fn an_upgrade_resumes_at_the_position_an_earlier_weir_saved() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("app.log");
    append(&log, 0..100);
    // What an earlier weir kept: one byte position for one path.
    let sources = tmp.path().join("data/sources");
    std::fs::create_dir_all(&sources).unwrap();
    let position: usize = (0..60).map(|n| run_support::tail::line(n).len()).sum();
    std::fs::write(sources.join("tail.position"), format!("{position}\n")).unwrap();
    let status = free_addr();
    let path = config(tmp.path(), status, &log.display().to_string(), "");
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for(
        "the lines after the old position",
        Duration::from_secs(10),
        |s| s["sinks"]["out"]["records"] == 40,
    );
    assert_eq!(daemon.stop(), Some(0));
    let d = Delivered::read(&tmp.path().join("out"));
    assert_eq!(
        d.counts.keys().copied().collect::<Vec<_>>(),
        (60..100).collect::<Vec<_>>()
    );
    assert!(
        !sources.join("tail.position").exists(),
        "the old file is replaced"
    );
    assert!(sources.join("tail.positions.json").exists());
}
