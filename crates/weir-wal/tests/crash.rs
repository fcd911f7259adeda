//! Crash safety with a real process kill: a child appends and prints every acknowledged
//! range; it is killed with SIGKILL at seeded random moments; the log is reopened and
//! every acknowledged record must be there, intact, and nothing on disk may be corrupt.
//!
//! 20 kills by default, 200 with `WEIR_SOAK=1`; `WEIR_SEED=N` replays a run.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use weir_wal::{CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

/// Same as the helper binary's payload function.
fn record(task: u64, seq: u64, j: u64, len: usize) -> Vec<u8> {
    let mut p = format!("t{task} s{seq} j{j} n{len};").into_bytes();
    let mut x = task.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seq.rotate_left(17) ^ j;
    while p.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p.push(b'a' + (x % 26) as u8);
    }
    p
}

/// Parses `t{task} s{seq} j{j} n{len};` and regenerates the payload it must be.
fn self_consistent(payload: &[u8]) -> Option<(u64, u64, u64, usize)> {
    let text = std::str::from_utf8(payload).ok()?;
    let head = text.split(';').next()?;
    let mut it = head.split(' ');
    let mut field = |prefix: char| it.next()?.strip_prefix(prefix)?.parse::<u64>().ok();
    let (t, s, j, n) = (field('t')?, field('s')?, field('j')?, field('n')?);
    let n = usize::try_from(n).ok()?;
    (record(t, s, j, n) == payload).then_some((t, s, j, n))
}

struct Ack {
    first: u64,
    count: u64,
    task: u64,
    seq: u64,
    len: usize,
}

fn parse_ack(line: &str) -> Option<Ack> {
    let mut it = line.strip_prefix("ack ")?.split(' ');
    let mut next = || it.next()?.parse::<u64>().ok();
    Some(Ack {
        first: next()?,
        count: next()?,
        task: next()?,
        seq: next()?,
        len: usize::try_from(next()?).ok()?,
    })
}

fn check_config(dir: &std::path::Path) -> WalConfig {
    WalConfig::builder(dir)
        .max_disk(256 << 20)
        .segment_bytes(64 * 1024)
        .on_full(OnFull::Block)
        .cursor("sink", CursorConfig::default())
        .cursor(
            "check",
            CursorConfig {
                required: false,
                ..CursorConfig::default()
            },
        )
        .build()
        .unwrap()
}

#[test]
fn every_acknowledged_record_survives_sigkill() {
    let seed: u64 = std::env::var("WEIR_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_2026);
    let kills = if std::env::var_os("WEIR_SOAK").is_some() {
        200
    } else {
        20
    };
    eprintln!("crash test seed {seed} ({kills} kills); replay with WEIR_SEED={seed}");
    let result = std::panic::catch_unwind(|| run(seed, kills));
    if let Err(e) = result {
        eprintln!("crash test FAILED with seed {seed}; replay with WEIR_SEED={seed}");
        std::panic::resume_unwind(e);
    }
}

fn run(seed: u64, kills: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut acks: Vec<Ack> = Vec::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for kill in 0..kills {
        let mut child = Command::new(env!("CARGO_BIN_EXE_wal-crash-writer"))
            .arg(dir.path())
            .arg((seed ^ kill).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.random_range(5..250)));
        child.kill().unwrap(); // SIGKILL
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let status = child.wait().unwrap();
        assert!(
            !status.success(),
            "kill {kill}: the writer exited by itself: {status}"
        );
        let before = acks.len();
        acks.extend(out.lines().filter_map(parse_ack));
        let new_acks = acks.len() - before;

        let (wal, report) = Wal::open(check_config(dir.path())).unwrap();
        assert!(report.quarantined.is_empty(), "kill {kill}: {report}");
        assert!(
            report.cursors_reset.is_empty(),
            "kill {kill}: cursor file torn: {report}"
        );
        let end = report.durable_end;
        // Read every record on disk with a cursor that starts at the beginning.
        let mut on_disk = std::collections::HashMap::new();
        runtime.block_on(async {
            let mut reader = wal.reader("check").unwrap();
            loop {
                let batch = reader
                    .try_read(ReadLimits {
                        max_records: 4096,
                        max_bytes: 8 << 20,
                    })
                    .await
                    .unwrap();
                if batch.is_empty() {
                    break;
                }
                assert!(
                    batch.gap.is_none(),
                    "kill {kill}: unexpected gap {:?}",
                    batch.gap
                );
                for r in batch.records {
                    let id = self_consistent(&r.payload).unwrap_or_else(|| {
                        panic!(
                            "kill {kill}: record {} is not a record the writer made",
                            r.offset
                        )
                    });
                    on_disk.insert(r.offset, id);
                }
            }
        });
        assert_eq!(on_disk.len() as u64, end - report.start, "kill {kill}");
        for a in &acks {
            assert!(
                a.first + a.count <= end,
                "kill {kill}: ack {}+{} beyond end {end}",
                a.first,
                a.count
            );
            for j in 0..a.count {
                let got = on_disk.get(&(a.first + j));
                assert_eq!(
                    got,
                    Some(&(a.task, a.seq, j, a.len)),
                    "kill {kill}: acknowledged record {} lost or wrong",
                    a.first + j
                );
            }
        }
        eprintln!(
            "kill {kill}: {new_acks} new acks, end {end}, cut {} bytes / {} records",
            report.truncated_bytes, report.truncated_records
        );
        // Wait for the writer to exit: the next child opens the same directory.
        runtime.block_on(wal.close());
    }
    assert!(!acks.is_empty(), "the writer never acknowledged anything");
}
