//! Cursors in the WAL directory that no configured sink owns, and what a sink's
//! `rename_from` finds on disk.
//!
//! The WAL keeps one cursor file per sink (`<wal.dir>/cursors/<name>.cursor`) and a sink
//! may keep state of its own in `<data_dir>/sinks/<name>/` (the object store's journal).
//! A sink removed from the file, or renamed, leaves both behind: its cursor holds nothing
//! back (the WAL loads only configured cursors), but a renamed sink starts again from
//! its `start_from`. [`Config::cursor_warnings`] names each such cursor with its lag, and
//! each new sink that could take one over; [`Takeover`] decides what `rename_from` does.

use std::path::PathBuf;

use weir_wal::tools::{self, CursorLag};

use super::Config;
use crate::keys::{format_bytes, join};

/// What a sink's `rename_from = "old"` finds on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// `cursors/old.cursor` exists.
    pub old_cursor: bool,
    /// `cursors/<name>.cursor` exists.
    pub new_cursor: bool,
    /// `<data_dir>/sinks/old/` exists.
    pub old_state: bool,
    /// `<data_dir>/sinks/<name>/` exists.
    pub new_state: bool,
}

/// What `rename_from` does, decided from what is on disk alone. The state directory
/// moves first and the cursor last, so a takeover cut short by a crash is finished by
/// the next start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takeover {
    /// Move the state directory (`state`) and then the cursor (`cursor`).
    Move {
        /// Rename `old.cursor` to `<name>.cursor`.
        cursor: bool,
        /// Rename `sinks/old/` to `sinks/<name>/`.
        state: bool,
    },
    /// Done already: the old cursor is gone and the sink has its own.
    Done,
    /// Refused: moving would overwrite the sink's own cursor or state, or there is
    /// nothing to take over.
    Refuse(Refusal),
}

/// Why a takeover is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Both cursors exist.
    CursorExists,
    /// Both state directories exist.
    StateExists,
    /// Neither the old cursor nor the old state exists, and the sink has no cursor.
    NothingThere,
}

impl Takeover {
    /// The decision for `found`.
    pub fn plan(found: Found) -> Takeover {
        let Found {
            old_cursor,
            new_cursor,
            old_state,
            new_state,
        } = found;
        match (old_cursor, new_cursor) {
            (true, true) => Takeover::Refuse(Refusal::CursorExists),
            _ if old_state && new_state && !new_cursor => Takeover::Refuse(Refusal::StateExists),
            (true, false) => Takeover::Move {
                cursor: true,
                state: old_state,
            },
            _ if old_state && !new_state => Takeover::Move {
                cursor: false,
                state: true,
            },
            (false, true) => Takeover::Done,
            (false, false) => Takeover::Refuse(Refusal::NothingThere),
        }
    }
}

impl Config {
    /// The directory a sink keeps its own state in: `<data_dir>/sinks/<name>/`.
    pub fn sink_state_dir(&self, name: &str) -> PathBuf {
        self.runtime.data_dir.join("sinks").join(name)
    }

    /// What `[sinks.<name>] rename_from = "<old>"` finds on disk.
    ///
    /// # Errors
    ///
    /// The WAL's `cursors/` directory cannot be listed.
    pub fn found(&self, name: &str, old: &str) -> Result<Found, tools::ToolError> {
        let cursors = tools::cursor_names(&self.wal.dir)?;
        Ok(Found {
            old_cursor: cursors.iter().any(|c| c == old),
            new_cursor: cursors.iter().any(|c| c == name),
            old_state: self.sink_state_dir(old).is_dir(),
            new_state: self.sink_state_dir(name).is_dir(),
        })
    }

    /// The sentence a refused takeover of `old` by sink `name` is reported with.
    pub fn refusal(&self, name: &str, old: &str, refusal: Refusal) -> String {
        let cursors = self.wal.dir.join("cursors");
        let path = join(&join("sinks", name), "rename_from");
        match refusal {
            Refusal::CursorExists => format!(
                "{path}: both {old}.cursor and {name}.cursor exist in {}: taking {old:?} over would \
                 overwrite the sink's own cursor; remove rename_from to keep {name:?}'s, or remove \
                 its cursor first (weir wal cursors {} --remove {name})",
                cursors.display(),
                self.wal.dir.display()
            ),
            Refusal::StateExists => format!(
                "{path}: both {} and {} exist: taking {old:?} over would overwrite the sink's own \
                 state; remove rename_from, or move one of them away with weir stopped",
                self.sink_state_dir(old).display(),
                self.sink_state_dir(name).display()
            ),
            Refusal::NothingThere => format!(
                "{path}: there is no cursor {old}.cursor in {} and no state {}: nothing to take \
                 over, so the sink would start from its start_from; check the name ({}) or remove \
                 rename_from",
                cursors.display(),
                self.sink_state_dir(old).display(),
                match tools::cursor_names(&self.wal.dir) {
                    Ok(names) if !names.is_empty() =>
                        format!("cursors there: {}", names.join(", ")),
                    _ => "there are no cursors".to_owned(),
                }
            ),
        }
    }

    /// Cursor files in the WAL directory that no configured sink owns and no
    /// `rename_from` takes over, with their lag; none when the directory does not exist
    /// yet.
    ///
    /// # Errors
    ///
    /// The WAL directory exists but cannot be read.
    pub fn orphan_cursors(&self) -> Result<Vec<CursorLag>, tools::ToolError> {
        if !self.wal.dir.is_dir() {
            return Ok(Vec::new());
        }
        let names = tools::cursor_names(&self.wal.dir)?;
        if names.iter().all(|name| self.owns(name)) {
            return Ok(Vec::new());
        }
        let mut report = tools::cursors(&self.wal.dir)?;
        report.cursors.retain(|c| !self.owns(&c.name));
        Ok(report.cursors)
    }

    fn owns(&self, cursor: &str) -> bool {
        self.sinks.contains_key(cursor)
            || self
                .sinks
                .values()
                .any(|sink| sink.rename_from.as_deref() == Some(cursor))
    }

    /// One sentence per cursor no configured sink owns (with its lag and how to remove
    /// it), per sink without a cursor that could take one over (`rename_from`), and per
    /// `rename_from` that `weir run` would refuse. For `weir validate` and the startup
    /// log.
    pub fn cursor_warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        let orphans = match self.orphan_cursors() {
            Ok(orphans) => orphans,
            Err(e) => {
                warnings.push(format!("wal.dir: the cursors could not be listed: {e}"));
                return warnings;
            }
        };
        for orphan in &orphans {
            warnings.push(format!(
                "wal.dir: cursor {:?} ({}) belongs to no configured sink; it holds nothing back. \
                 Remove it with `weir wal cursors {} --remove {}` (weir stopped), or set \
                 rename_from = {:?} on the sink that replaces it",
                orphan.name,
                describe(orphan),
                self.wal.dir.display(),
                orphan.name,
                orphan.name
            ));
        }
        let cursors = tools::cursor_names(&self.wal.dir).unwrap_or_default();
        for (name, sink) in &self.sinks {
            match &sink.rename_from {
                Some(old) => match self.found(name, old).map(Takeover::plan) {
                    Ok(Takeover::Refuse(refusal)) if self.wal.dir.is_dir() => {
                        warnings.push(format!(
                            "weir run will refuse to start: {}",
                            self.refusal(name, old, refusal)
                        ))
                    }
                    _ => {}
                },
                None if !orphans.is_empty() && !cursors.contains(name) => {
                    let names: Vec<String> =
                        orphans.iter().map(|o| format!("{:?}", o.name)).collect();
                    warnings.push(format!(
                        "{}: has no cursor yet, so it starts from its start_from ({}); if it is {} \
                         renamed, set rename_from = {} to resume where that one stopped",
                        join("sinks", name),
                        match sink.start_from {
                            weir_wal::StartFrom::Earliest =>
                                "\"earliest\": every record in the WAL again",
                            weir_wal::StartFrom::Latest =>
                                "\"latest\": only records appended from now on",
                        },
                        names.join(" or "),
                        names[0]
                    ));
                }
                None => {}
            }
        }
        warnings
    }
}

/// `offset 1000, 3000 records and 1.2 MiB behind the end`.
fn describe(cursor: &CursorLag) -> String {
    match (cursor.offset, cursor.lag_records, cursor.lag_bytes) {
        (Some(offset), Some(records), Some(bytes)) => format!(
            "offset {offset}, {records} records and {} behind the end",
            format_bytes(bytes)
        ),
        (Some(offset), ..) => format!("offset {offset}"),
        (None, ..) => "unreadable".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(bits: [bool; 4]) -> Found {
        Found {
            old_cursor: bits[0],
            new_cursor: bits[1],
            old_state: bits[2],
            new_state: bits[3],
        }
    }

    fn rename_errors(sinks: &str) -> Vec<String> {
        let text = format!(
            r#"
            [runtime]
            data_dir = "/tmp/weir-orphans-never-created"
            [wal]
            max_disk = "1 GiB"
            on_full = "block"
            [sources.gen]
            type = "generator"
            rate = 0
            {sinks}
            "#
        );
        match Config::from_toml(&text) {
            Ok(_) => Vec::new(),
            Err(e) => e.errors().iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn rename_from_must_name_a_sink_that_is_gone() {
        let sink = |name: &str, from: &str| {
            format!(
                "[sinks.{name}]\ntype = \"blackhole\"\ninputs = [\"gen\"]\nrename_from = {from:?}\n"
            )
        };
        assert_eq!(rename_errors(&sink("new", "old")), Vec::<String>::new());
        let errors = rename_errors(&format!(
            "{}{}[sinks.c]\ntype = \"blackhole\"\ninputs = [\"gen\"]\n",
            sink("a", "c"),
            sink("b", "b")
        ));
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].starts_with("sinks.a.rename_from: \"c\" is a configured sink"),
            "{errors:?}"
        );
        assert!(
            errors[1].starts_with("sinks.b.rename_from: \"b\" is this sink's own name"),
            "{errors:?}"
        );
        let errors = rename_errors(&format!("{}{}", sink("a", "old"), sink("b", "old")));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("sinks.b.rename_from: sinks.a.rename_from takes \"old\" over"),
            "{errors:?}"
        );
        let errors = rename_errors(&sink("a", "../x"));
        assert!(
            errors[0].starts_with("sinks.a.rename_from: expected a sink name"),
            "{errors:?}"
        );
    }

    #[test]
    fn a_takeover_moves_what_is_there_and_never_overwrites() {
        use Refusal::*;
        use Takeover::*;
        let cases = [
            // old cursor, new cursor, old state, new state
            (
                [true, false, false, false],
                Move {
                    cursor: true,
                    state: false,
                },
            ),
            (
                [true, false, true, false],
                Move {
                    cursor: true,
                    state: true,
                },
            ),
            // The state moved, then a crash before the cursor did: finish.
            (
                [true, false, false, true],
                Move {
                    cursor: true,
                    state: false,
                },
            ),
            ([true, false, true, true], Refuse(StateExists)),
            ([true, true, false, false], Refuse(CursorExists)),
            ([true, true, true, true], Refuse(CursorExists)),
            // Done at an earlier start: rename_from left in the file is harmless.
            ([false, true, false, false], Done),
            ([false, true, false, true], Done),
            ([false, true, true, true], Done),
            // An old sink that never committed a cursor: its state alone moves.
            (
                [false, false, true, false],
                Move {
                    cursor: false,
                    state: true,
                },
            ),
            (
                [false, true, true, false],
                Move {
                    cursor: false,
                    state: true,
                },
            ),
            ([false, false, true, true], Refuse(StateExists)),
            ([false, false, false, false], Refuse(NothingThere)),
            ([false, false, false, true], Refuse(NothingThere)),
        ];
        for (bits, expected) in cases {
            assert_eq!(Takeover::plan(found(bits)), expected, "{bits:?}");
        }
    }
}
