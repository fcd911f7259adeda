//! Changes to an open log: its disk budget and its cursors, applied while it runs (a
//! daemon's configuration reload).
//!
//! - [`Wal::set_budget`]: a new `max_disk` or `on_full`. Appends waiting for room plan
//!   again at once: a larger budget lets them in, a smaller one is reached by retention
//!   (or eviction under `drop_oldest`) as appends need room; nothing is deleted to
//!   shrink the log on the spot.
//! - [`Wal::add_cursor`]: a cursor declared after open (a sink added), starting at its
//!   saved position or `start_from`, like the cursors declared at open.
//! - [`Wal::set_cursor`]: a cursor's `required` and `max_lag`, applied at the next
//!   retention round.
//! - [`Wal::detach_cursor`]: a cursor whose sink is gone stops holding retention. Its
//!   file stays in `cursors/` (what it had committed is kept), and `add_cursor` under
//!   the same name takes it back.

use crate::config::{CursorConfig, OnFull, valid_cursor_name};
use crate::core::CursorState;
use crate::error::OpenError;
use crate::recovery::load_cursor;
use crate::wal::Wal;

/// Why a live change was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LiveError {
    /// `max_disk` is below what the segment size needs.
    #[error(
        "max_disk: expected at least twice segment_bytes plus headers ({min} bytes), found \
         {found}; raise max_disk"
    )]
    BudgetTooSmall {
        /// The smallest budget the segment size allows.
        min: u64,
        /// The budget asked for.
        found: u64,
    },
    /// Not a valid cursor name.
    #[error("cursor {0:?}: names are 1 to 64 characters of [A-Za-z0-9_.-]")]
    BadName(String),
    /// No attached cursor of that name.
    #[error("no cursor named {0:?} is attached")]
    Unknown(String),
    /// The saved cursor could not be read.
    #[error(transparent)]
    Io(#[from] OpenError),
}

impl Wal {
    /// Sets the disk budget and its policy. Appends waiting for room look again at
    /// once.
    ///
    /// # Errors
    ///
    /// [`LiveError::BudgetTooSmall`] below two segments (the same bound as at open);
    /// nothing changes then.
    pub fn set_budget(&self, max_disk: u64, on_full: OnFull) -> Result<(), LiveError> {
        let shared = self.shared();
        {
            let mut core = shared.core();
            let min = 2 * (core.segment_bytes + crate::format::SEGMENT_HEADER_LEN);
            if max_disk < min {
                return Err(LiveError::BudgetTooSmall {
                    min,
                    found: max_disk,
                });
            }
            core.max_disk = max_disk;
            core.on_full = on_full;
        }
        // The writer plans a waiting append again on a retention round; waiters on
        // `room_freed` check `would_block` again.
        shared.request_retention();
        shared.room.notify_waiters();
        Ok(())
    }

    /// Adds cursor `name` to the open log, or takes back a detached one (with
    /// `config`). A new one starts at its saved position in `cursors/`, else at
    /// `config.start_from`, exactly as a cursor declared at open. An attached one
    /// only gets `config`.
    ///
    /// Reads one small file: from async code call it in `spawn_blocking`.
    ///
    /// # Errors
    ///
    /// [`LiveError::BadName`], or [`LiveError::Io`] when the saved cursor cannot be read.
    pub fn add_cursor(&self, name: &str, config: CursorConfig) -> Result<(), LiveError> {
        if !valid_cursor_name(name) {
            return Err(LiveError::BadName(name.to_owned()));
        }
        let shared = self.shared();
        {
            let mut core = shared.core();
            if let Some(c) = core.cursors.iter_mut().find(|c| c.name == name) {
                c.config = config;
                c.detached = false;
                c.released = false;
                drop(core);
                shared.request_retention();
                return Ok(());
            }
        }
        // Read outside the lock: the writer must not wait on this file.
        let (start, end) = {
            let core = shared.core();
            (core.start(), core.durable_end)
        };
        let (committed, _) = load_cursor(&shared.dir, name, &config, start, end)?;
        let mut core = shared.core();
        // Retention may have run meanwhile: a position below the new start reads as a
        // gap, as after any eviction.
        if !core.cursors.iter().any(|c| c.name == name) {
            core.cursors
                .push(CursorState::new(name.to_owned(), config, committed));
        }
        Ok(())
    }

    /// Sets an attached cursor's `required` and `max_lag` (its `start_from` only
    /// matters when it is added). Applied at the next retention round.
    ///
    /// # Errors
    ///
    /// [`LiveError::Unknown`] when no attached cursor has that name.
    pub fn set_cursor(&self, name: &str, config: CursorConfig) -> Result<(), LiveError> {
        self.with_attached(name, |c| {
            c.config = config;
            if !config.required || (config.max_lag.bytes.is_none() && config.max_lag.age.is_none())
            {
                c.released = false;
            }
        })
    }

    /// Detaches cursor `name`: it no longer holds retention, has no reader and is no
    /// longer in [`stats`](Self::stats). Its saved file stays. Call it once its reader
    /// is dropped (a reader still out keeps reading, holding nothing).
    ///
    /// # Errors
    ///
    /// [`LiveError::Unknown`] when no attached cursor has that name.
    pub fn detach_cursor(&self, name: &str) -> Result<(), LiveError> {
        // What it held may now be deleted.
        self.with_attached(name, |c| c.detached = true)
    }

    /// Applies `change` to the attached cursor `name`, then asks for a retention round.
    fn with_attached(
        &self,
        name: &str,
        change: impl FnOnce(&mut CursorState),
    ) -> Result<(), LiveError> {
        let shared = self.shared();
        {
            let mut core = shared.core();
            let Some(c) = core
                .cursors
                .iter_mut()
                .find(|c| c.name == name && !c.detached)
            else {
                return Err(LiveError::Unknown(name.to_owned()));
            };
            change(c);
        }
        shared.request_retention();
        Ok(())
    }
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
