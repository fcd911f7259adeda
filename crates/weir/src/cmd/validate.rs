//! `weir validate CONFIG`: checks a configuration and prints every queue's bound, the
//! worst-case memory estimate against `runtime.memory_target`, the disk budgets, the
//! configuration hash, when budget-aware rotation closes a sink's files before its
//! `rotate.bytes` would (`note: sinks.NAME: …`), and warns of the WAL's cursors that no
//! configured sink owns. Exits 0 when valid, 1 with every error (one per line, on
//! stderr) otherwise.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::{Config, Inventory, format_bytes};

/// Arguments of `weir validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The configuration file (TOML).
    pub config: PathBuf,
}

/// Runs `weir validate`.
pub fn run(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let shown = args.config.display();
    match Config::load(&args.config) {
        Ok(config) => {
            out!("{}", report(&shown.to_string(), &config));
            Ok(ExitCode::SUCCESS)
        }
        Err(errors) => {
            for error in errors.errors() {
                eprintln!("error: {error}");
            }
            let count = errors.errors().len();
            let noun = if count == 1 { "error" } else { "errors" };
            eprintln!("{shown}: invalid, {count} {noun}");
            Ok(ExitCode::from(1))
        }
    }
}

/// The report printed for a valid configuration.
fn report(name: &str, config: &Config) -> String {
    let inventory = config.inventory();
    let mut out = String::new();
    let _ = writeln!(out, "{name}: valid");
    let _ = writeln!(
        out,
        "config hash: {} (written into every Parquet footer as weir.config_hash)",
        config.hash()
    );
    for warning in config.warnings() {
        let _ = writeln!(out, "warning: {warning}");
    }
    for (name, sink) in &config.sinks {
        if let Some(note) = sink
            .kind
            .early_close_note(name, config.wal.max_disk.bytes())
        {
            let _ = writeln!(out, "note: {note}");
        }
    }
    for warning in config.cursor_warnings() {
        let _ = writeln!(out, "warning: {warning}");
    }
    out.push('\n');
    write_queues(&mut out, &inventory);
    out.push('\n');
    write_memory(&mut out, &inventory);
    out.push('\n');
    let _ = writeln!(out, "disk budgets:");
    for disk in &inventory.disks {
        let _ = writeln!(
            out,
            "  {:<11} {:>10}  {}  {}",
            disk.name,
            format_bytes(disk.max_bytes),
            disk.dir.display(),
            disk.when_full
        );
    }
    out
}

fn write_queues(out: &mut String, inventory: &Inventory) {
    let width = inventory
        .queues
        .iter()
        .map(|q| q.name.len())
        .max()
        .unwrap_or(0)
        .max("queue".len());
    let _ = writeln!(out, "queues (worst case):");
    let _ = writeln!(
        out,
        "  {:<width$} {:>8} {:>11}  note",
        "queue", "items", "bytes"
    );
    for queue in &inventory.queues {
        let items = queue
            .items
            .map_or_else(|| "-".to_owned(), |n| n.to_string());
        let bytes = if queue.bytes == 0 {
            "-".to_owned()
        } else {
            format_bytes(queue.bytes)
        };
        let _ = writeln!(
            out,
            "  {:<width$} {items:>8} {bytes:>11}  {}",
            queue.name, queue.note
        );
    }
}

fn write_memory(out: &mut String, inventory: &Inventory) {
    let estimate = inventory.memory_estimate_bytes;
    let target = inventory.memory_target_bytes;
    let percent = u128::from(estimate) * 100 / u128::from(target.max(1));
    let _ = writeln!(
        out,
        "memory estimate: {} ({estimate} bytes, the sum of the bounds above) = {percent}% of runtime.memory_target = {}",
        format_bytes(estimate),
        format_bytes(target)
    );
    if inventory.over_target() {
        let _ = writeln!(
            out,
            "WARNING: the worst-case memory estimate {} is above runtime.memory_target {}; \
             lower the largest bounds above or raise memory_target",
            format_bytes(estimate),
            format_bytes(target)
        );
    }
}
