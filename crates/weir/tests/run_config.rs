//! `weir run` and `weir validate` with what the configuration meets outside the file:
//! `${VAR}` secrets (used, and shown as `***`), cursors that no configured sink owns
//! (warned about, listed and removed with `weir wal cursors`), and a sink's
//! `rename_from` (its cursor and object-store journal taken over, or refused).

mod run_support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use run_support::http_target::Target;
use run_support::{Daemon, free_addr, run_to_exit, write_config};
use weir_wal::{Batch, CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

fn weir(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run weir");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn head(dir: &Path, status: SocketAddr, count: u64) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "20s"

[wal]
max_disk = "64 MiB"
segment_bytes = "1 MiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 0
count = {count}
size = "64 B"
"#,
        data = dir.join("data").display()
    )
}

#[test]
fn a_secret_from_the_environment_is_used_and_shown_as_stars() {
    const SECRET: &str = "s3cr3t-7c1d9e";
    let tmp = tempfile::tempdir().unwrap();
    let target = Target::start();
    *target.behaviour().token.lock().unwrap() = Some(format!("Bearer {SECRET}"));
    let status = free_addr();
    let config = format!(
        r#"{}
[sinks.out]
type = "http"
inputs = ["gen"]
url = "{}?token=${{WEIR_TEST_TOKEN}}&tenant=${{WEIR_TEST_TENANT:-t1}}"
headers = {{ Authorization = "Bearer ${{WEIR_TEST_TOKEN}}" }}
"#,
        head(tmp.path(), status, 100),
        target.url()
    );
    let path = write_config(tmp.path(), &config);
    let file = path.to_str().unwrap();
    let env = [("WEIR_TEST_TOKEN", SECRET)];

    // Unset: one error per key, naming it and the variable.
    let (code, out) = weir(&["validate", file], &[]);
    assert_eq!(code, 1, "{out}");
    for key in ["sinks.out.url", "sinks.out.headers.Authorization"] {
        assert!(
            out.contains(&format!(
                "{key}: the environment variable WEIR_TEST_TOKEN is not set"
            )),
            "{key} in:\n{out}"
        );
    }
    let (code, out) = weir(&["validate", file], &env);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains(SECRET), "{out}");

    let daemon = Daemon::start(tmp.path(), &path, status, &env);
    // The token reached the endpoint: it answers 401 without it.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while target.shared.distinct().len() < 100 {
        assert!(std::time::Instant::now() < deadline, "{}", daemon.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
    let st = daemon.status();
    let shown = &st["config"]["values"]["sinks"]["out"];
    assert_eq!(shown["headers"][0]["value"]["literal"], "***", "{shown:#}");
    let url = shown["url"].as_str().unwrap();
    assert!(url.ends_with("/ingest?token=***&tenant=t1"), "{url}");
    assert!(!st.to_string().contains(SECRET), "{st:#}");
    assert!(
        st["config"]["hash"]
            .as_str()
            .is_some_and(|h| h.starts_with(st["config_hash"].as_str().unwrap())),
        "{st:#}"
    );
    let stderr = daemon.stderr();
    assert_eq!(daemon.stop(), Some(0));
    assert!(!stderr.contains(SECRET), "{stderr}");
}

/// A WAL in `dir` with `records` records and the cursors `committed` (name, offset).
fn make_wal(dir: &Path, records: u64, committed: &[(&str, u64)]) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut builder = WalConfig::builder(dir)
            .max_disk(64 << 20)
            .segment_bytes(1 << 20)
            .on_full(OnFull::Block);
        for (name, _) in committed {
            builder = builder.cursor(*name, CursorConfig::default());
        }
        let (wal, _) = Wal::open(builder.build().unwrap()).unwrap();
        for i in 0..records {
            let mut batch = Batch::new();
            batch.push(format!("{{\"seq\":{i}}}").as_bytes()).unwrap();
            wal.append(batch).await.unwrap();
        }
        for (name, offset) in committed {
            let mut reader = wal.reader(name).unwrap();
            let limits = ReadLimits {
                max_records: usize::try_from(*offset).unwrap(),
                max_bytes: 1 << 20,
            };
            let read = reader.read(limits).await.unwrap();
            reader.commit(read.next_offset()).await.unwrap();
        }
        wal.close().await;
    });
}

#[test]
fn cursors_no_sink_owns_are_warned_about_listed_and_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let wal_dir = tmp.path().join("data/wal");
    make_wal(&wal_dir, 40, &[("old", 10)]);
    let status = free_addr();
    let config = format!(
        "{}\n[sinks.lake]\ntype = \"blackhole\"\ninputs = [\"gen\"]\n",
        head(tmp.path(), status, 10)
    );
    let path = write_config(tmp.path(), &config);
    let (code, out) = weir(&["validate", path.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{out}");
    for expected in [
        "warning: wal.dir: cursor \"old\" (offset 10, 30 records and",
        "belongs to no configured sink",
        "--remove old",
        "warning: sinks.lake: has no cursor yet",
        "set rename_from = \"old\"",
    ] {
        assert!(out.contains(expected), "{expected:?} in:\n{out}");
    }

    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let stderr = daemon.stderr();
    assert!(
        stderr.contains("WARN") && stderr.contains("cursor \"old\" (offset 10, 30 records"),
        "{stderr}"
    );
    assert!(
        stderr.contains("sinks.lake: has no cursor yet")
            && stderr.contains("set rename_from = \"old\""),
        "{stderr}"
    );
    let wal = wal_dir.to_str().unwrap();
    // Refused while the daemon holds the WAL.
    let (code, out) = weir(&["wal", "cursors", wal, "--remove", "old"], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("open by a running weir"), "{out}");
    assert_eq!(daemon.stop(), Some(0));

    let (code, out) = weir(&["wal", "cursors", wal], &[]);
    assert_eq!(code, 0, "{out}");
    let old = out
        .lines()
        .find(|l| l.trim_start().starts_with("old "))
        .unwrap_or_default();
    assert_eq!(
        old.split_whitespace().take(3).collect::<Vec<_>>(),
        ["old", "10", "40"],
        "{out}"
    );
    assert!(out.contains("lake"), "{out}");

    let (code, out) = weir(&["wal", "cursors", wal, "--remove", "old"], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("removed cursor \"old\"") && out.contains("offset 10"),
        "{out}"
    );
    assert!(!wal_dir.join("cursors/old.cursor").exists());
    let (code, out) = weir(&["wal", "cursors", wal, "--remove", "old"], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("no cursor named \"old\"") && out.contains("cursors there: lake"),
        "{out}"
    );
    let (_, out) = weir(&["validate", path.to_str().unwrap()], &[]);
    assert!(!out.contains("cursor \"old\""), "{out}");
}

/// Every object under `dir` (recursively), with its lines.
fn objects(dir: &Path) -> Vec<(PathBuf, usize)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(objects(&path));
        } else if path.extension().is_some_and(|e| e == "ndjson") {
            let lines = std::fs::read_to_string(&path).unwrap().lines().count();
            out.push((path, lines));
        }
    }
    out.sort();
    out
}

/// The first WAL offset in an object's name (`…-{first:020}.ndjson`).
fn first_offset(path: &Path) -> u64 {
    let stem = path.file_stem().unwrap().to_str().unwrap();
    stem.rsplit('-').next().unwrap().parse().unwrap()
}

fn lake_sink(name: &str, lake: &Path, extra: &str) -> String {
    format!(
        "\n[sinks.{name}]\ntype = \"object_store\"\ninputs = [\"gen\"]\nurl = \"file://{}\"\n\
         format = \"ndjson\"\n{extra}\n",
        lake.display()
    )
}

#[test]
fn rename_from_carries_the_cursor_and_the_object_store_journal_over() {
    let tmp = tempfile::tempdir().unwrap();
    let lake = tmp.path().join("lake");
    let data = tmp.path().join("data");
    let status = free_addr();

    // Run 1: the sink `old` writes offsets 0..500.
    let config = format!(
        "{}{}",
        head(tmp.path(), status, 500),
        lake_sink("old", &lake, "")
    );
    let path = write_config(tmp.path(), &config);
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("500 durable records", Duration::from_secs(30), |s| {
        s["wal"]["durable_end"] == 500
    });
    assert_eq!(daemon.stop(), Some(0));
    let report = weir_wal::tools::cursors(&data.join("wal")).unwrap();
    assert_eq!(report.cursors[0].name, "old");
    assert_eq!(report.cursors[0].offset, Some(500));

    // As a crash would leave it: the journal records the object from 500 to 699,
    // closed (perhaps stored) under the old sink's name but not yet passed by the cursor.
    let journal = data.join("sinks/old/object_store.journal");
    let recorded_key = "old/recorded-00000000000000000500.ndjson";
    let mut text = std::fs::read_to_string(&journal).unwrap_or_default();
    text.push_str(&format!(
        "{{\"first\":500,\"key\":\"{recorded_key}\",\"last\":699}}\n"
    ));
    std::fs::write(&journal, text).unwrap();

    // Run 2: renamed to `new`; the generator appends 500..1000.
    let config = format!(
        "{}{}",
        head(tmp.path(), status, 500),
        lake_sink("new", &lake, "rename_from = \"old\"")
    );
    let path = write_config(tmp.path(), &config);
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("1000 durable records", Duration::from_secs(30), |s| {
        s["wal"]["durable_end"] == 1000
    });
    let stderr = daemon.stderr();
    assert_eq!(daemon.stop(), Some(0));
    let report = weir_wal::tools::cursors(&data.join("wal")).unwrap();
    let offsets: Vec<(&str, Option<u64>)> = report
        .cursors
        .iter()
        .map(|c| (c.name.as_str(), c.offset))
        .collect();
    assert_eq!(offsets, [("new", Some(1000))]);
    assert!(
        stderr.contains(
            "sinks.new.rename_from: took \"old\" over: its cursor (resuming at offset 500)"
        ),
        "{stderr}"
    );
    assert!(
        !stderr.contains("belongs to no configured sink"),
        "{stderr}"
    );
    assert!(!data.join("sinks/old").exists() && data.join("sinks/new").is_dir());

    let all = objects(&lake);
    // The journal's object, under the key it recorded, cut where it recorded.
    let recorded = all
        .iter()
        .find(|(p, _)| p.ends_with(recorded_key))
        .unwrap_or_else(|| panic!("{recorded_key} in {all:?}"));
    assert_eq!(recorded.1, 200, "{all:?}");
    // Nothing replayed from 0: the new name's objects start at 700 and hold the rest.
    let new: Vec<&(PathBuf, usize)> = all
        .iter()
        .filter(|(p, _)| p.strip_prefix(&lake).unwrap().starts_with("new"))
        .collect();
    assert!(!new.is_empty(), "{all:?}");
    assert!(new.iter().all(|(p, _)| first_offset(p) >= 700), "{all:?}");
    assert_eq!(new.iter().map(|(_, n)| n).sum::<usize>(), 300, "{all:?}");
    assert_eq!(all.iter().map(|(_, n)| n).sum::<usize>(), 1000, "{all:?}");

    // Run 3: rename_from left in the file does nothing.
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let stderr = daemon.stderr();
    assert_eq!(daemon.stop(), Some(0));
    assert!(
        stderr.contains("was taken over at an earlier start"),
        "{stderr}"
    );
}

#[test]
fn rename_from_refuses_to_overwrite_the_sinks_own_cursor() {
    let tmp = tempfile::tempdir().unwrap();
    let wal_dir = tmp.path().join("data/wal");
    make_wal(&wal_dir, 20, &[("old", 5), ("new", 15)]);
    let status = free_addr();
    let config = format!(
        "{}\n[sinks.new]\ntype = \"blackhole\"\ninputs = [\"gen\"]\nrename_from = \"old\"\n",
        head(tmp.path(), status, 10)
    );
    let path = write_config(tmp.path(), &config);
    let (code, out) = weir(&["validate", path.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("warning: weir run will refuse to start"),
        "{out}"
    );

    let (code, stderr) = run_to_exit(&path, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("sinks.new.rename_from: both old.cursor and new.cursor exist"),
        "{stderr}"
    );
    // Nothing moved.
    let report = weir_wal::tools::cursors(&wal_dir).unwrap();
    let offsets: Vec<(String, Option<u64>)> = report
        .cursors
        .into_iter()
        .map(|c| (c.name, c.offset))
        .collect();
    assert_eq!(
        offsets,
        [("new".to_owned(), Some(15)), ("old".to_owned(), Some(5))]
    );
}
