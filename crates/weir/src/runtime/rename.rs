//! What happens after the checks and before the WAL opens ([`before_wal`]): each sink's
//! `rename_from` takes its old cursor and state over, and the cursors no sink owns are
//! logged.
//!
//! A takeover of `old` by sink `new`, decided by
//! [`Takeover::plan`](crate::config::Takeover::plan) from what is on disk:
//! 1. `<data_dir>/sinks/old/` (an object store's journal) becomes `<data_dir>/sinks/new/`,
//!    then `<data_dir>/sinks/` is fsynced;
//! 2. `<wal.dir>/cursors/old.cursor` becomes `new.cursor`, under the WAL directory's
//!    lock, then `cursors/` is fsynced.
//!
//! The cursor moves last: after a crash between the two, the next start finds the state
//! moved and the old cursor still there, and finishes. Once done, the old cursor is gone
//! and the sink has its own: `rename_from` left in the file does nothing (logged at
//! INFO). A takeover that would overwrite the sink's own cursor or state, or that finds
//! nothing to take over, refuses to start; every takeover is decided before any file
//! moves.

use std::path::Path;

use anyhow::{Context as _, bail};
use weir_wal::tools;

use crate::config::{Config, Takeover};

/// Runs the takeovers and logs the cursors no sink owns.
///
/// # Errors
///
/// A refused takeover (naming `sinks.NAME.rename_from`, what is in the way and what to
/// do), or a rename that failed.
///
/// # Cancel safety
///
/// Not cancel safe: the file moves run on a blocking thread and finish even if this
/// future is dropped; a later start completes a takeover cut short.
pub async fn before_wal(config: &Config) -> anyhow::Result<()> {
    let owned = config.clone();
    tokio::task::spawn_blocking(move || {
        take_over(&owned)?;
        for warning in owned.cursor_warnings() {
            tracing::warn!("{warning}");
        }
        anyhow::Ok(())
    })
    .await
    .context("the takeover of renamed sinks did not run")??;
    Ok(())
}

/// Every sink's `rename_from`: all decided first, then carried out in name order.
///
/// # Errors
///
/// The first refusal or failed move.
pub fn take_over(config: &Config) -> anyhow::Result<()> {
    let renames: Vec<(&str, &str)> = config
        .sinks
        .iter()
        .filter_map(|(name, sink)| Some((name.as_str(), sink.rename_from.as_deref()?)))
        .collect();
    if renames.is_empty() {
        return Ok(());
    }
    let wal_dir = &config.wal.dir;
    // Held while anything moves: a daemon running on this WAL keeps its cursors in
    // memory and would write them back.
    let lock = if wal_dir.is_dir() {
        Some(tools::lock(wal_dir).context("wal.dir")?)
    } else {
        None
    };
    let mut plans = Vec::with_capacity(renames.len());
    for &(name, old) in &renames {
        let found = config
            .found(name, old)
            .with_context(|| format!("sinks.{name}.rename_from"))?;
        match Takeover::plan(found) {
            Takeover::Refuse(refusal) => bail!("{}", config.refusal(name, old, refusal)),
            plan => plans.push((name, old, plan)),
        }
    }
    for (name, old, plan) in plans {
        let Takeover::Move { cursor, state } = plan else {
            tracing::info!(
                "sinks.{name}.rename_from: {old:?} was taken over at an earlier start (its cursor is gone, \
                 {name:?} has its own); nothing to do, and rename_from may be removed"
            );
            continue;
        };
        let (from, to) = (config.sink_state_dir(old), config.sink_state_dir(name));
        if state {
            move_dir(&from, &to).with_context(|| format!("sinks.{name}.rename_from"))?;
        }
        let mut offset = None;
        if cursor {
            let lock = lock
                .as_ref()
                .context("the WAL directory vanished during the takeover")?;
            offset = tools::cursors(wal_dir)
                .ok()
                .and_then(|r| r.cursors.into_iter().find(|c| c.name == old))
                .and_then(|c| c.offset);
            lock.rename_cursor(old, name)
                .with_context(|| format!("sinks.{name}.rename_from"))?;
        }
        tracing::info!(
            "sinks.{name}.rename_from: took {old:?} over: {}{}",
            match (cursor, offset) {
                (true, Some(offset)) => format!("its cursor (resuming at offset {offset})"),
                (true, None) => "its cursor".to_owned(),
                (false, _) => "no cursor (it had committed none)".to_owned(),
            },
            if state {
                format!(", and its state {} → {}", from.display(), to.display())
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

/// Renames the directory `from` to `to` (which must not exist), then fsyncs their
/// parent so that the rename survives a crash.
fn move_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    if to.exists() {
        bail!("{} exists already; it would be overwritten", to.display());
    }
    std::fs::rename(from, to)
        .with_context(|| format!("renaming {} to {}", from.display(), to.display()))?;
    let parent = to.parent().unwrap_or(Path::new("."));
    std::fs::File::open(parent)
        .and_then(|dir| dir.sync_all())
        .with_context(|| format!("fsyncing {}", parent.display()))?;
    Ok(())
}
