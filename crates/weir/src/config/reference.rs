//! The configuration reference: every section's keys, listed by the documenting walk of
//! the same functions that parse them, and the check that every key a configuration
//! reads is listed.

use toml::Table;

use super::{Config, QuarantineConfig, RuntimeConfig, WalConfig};
use crate::keys::error::syntax_error;
use crate::keys::{ConfigErrors, Diagnostics, SectionDoc, document, join};
use crate::{sinks, sources};

/// Every section of the reference, in the order it is printed: `[runtime]`, `[wal]`,
/// `[quarantine]`, the keys every source has and each source type's, then the same for
/// sinks.
pub fn sections() -> Vec<SectionDoc> {
    let mut sections = vec![
        SectionDoc {
            header: "[runtime]",
            type_name: None,
            about: "Where weir keeps its data, how much memory it may plan for, where it reports.",
            built: true,
            keys: document(|mut s| {
                RuntimeConfig::parse(&mut s);
            }),
        },
        SectionDoc {
            header: "[wal]",
            type_name: None,
            about: "The write-ahead log every source writes to and every sink reads from.",
            built: true,
            keys: document(|mut s| {
                WalConfig::parse(&mut s, None);
            }),
        },
        SectionDoc {
            header: "[quarantine]",
            type_name: None,
            about: "Where records a sink cannot encode are kept, with the reason.",
            built: true,
            keys: document(|mut s| {
                QuarantineConfig::parse(&mut s, None);
            }),
        },
    ];
    sections.extend(sources::reference());
    sections.extend(sinks::reference());
    sections
}

/// Every key that reading the configuration `text` reads (whether or not it is valid)
/// and that [`sections`] does not list, as its path (`sinks.lake.rotate.bytes`).
///
/// # Errors
///
/// The syntax error, when `text` is not TOML.
pub fn undocumented_keys(text: &str) -> Result<Vec<String>, ConfigErrors> {
    let table: Table = text
        .parse()
        .map_err(|e| ConfigErrors::new(vec![syntax_error(text, &e)]))?;
    let diag = Diagnostics::recording();
    let _ = Config::walk(&table, &diag);
    let sections = sections();
    let mut missing = Vec::new();
    for read in diag.take_reads() {
        if read.section.is_empty() {
            // The file's own keys are its sections.
            continue;
        }
        let listed = applicable(&table, &read.section, &sections)
            .any(|section| section.keys.iter().any(|key| key.name == read.key));
        let path = join(&read.section, &read.key);
        if !listed && !missing.contains(&path) {
            missing.push(path);
        }
    }
    Ok(missing)
}

/// Unit tests: fails when reading `text` reads a key that the reference does not list.
#[cfg(test)]
pub(super) fn assert_documented(text: &str) {
    let missing = undocumented_keys(text).unwrap_or_default();
    assert!(
        missing.is_empty(),
        "read while parsing, but not in the reference (declare them with Section::key): {}",
        missing.join(", ")
    );
}

/// The sections of the reference whose keys the table at `path` of the file may have:
/// `[wal]` for `wal`; the keys every source has and those of its type for
/// `sources.NAME`.
fn applicable<'s>(
    file: &Table,
    path: &str,
    sections: &'s [SectionDoc],
) -> impl Iterator<Item = &'s SectionDoc> {
    let mut header = format!("[{path}]");
    let mut type_name = None;
    for (group, component_header) in [("sources", "[sources.NAME]"), ("sinks", "[sinks.NAME]")] {
        let components = file.get(group).and_then(toml::Value::as_table);
        for (name, entry) in components.into_iter().flatten() {
            if join(group, name) == path {
                header = component_header.to_owned();
                type_name = entry.get("type").and_then(toml::Value::as_str);
            }
        }
    }
    let type_name = type_name.map(str::to_owned);
    sections.iter().filter(move |section| {
        section.header == header
            && (section.type_name.is_none() || section.type_name == type_name.as_deref())
    })
}

#[cfg(test)]
mod tests;
