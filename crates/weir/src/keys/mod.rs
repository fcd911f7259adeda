//! Reading configuration keys: what every component's `config.rs` is built from.
//!
//! - [`walk`]: a [`Section`] over one TOML table; reading a key marks it known, every
//!   problem is recorded with its dotted path and the walk goes on, unknown keys are
//!   reported with the allowed ones.
//! - [`declare`]: [`Section::key`], the one declaration that reads a key and documents
//!   it; the documenting walk ([`document`]) that lists a section's keys.
//! - [`reference`]: those lists rendered as markdown tables, or one section as a
//!   commented TOML example.
//! - [`units`]: sizes ([`ByteSize`], `"8 MiB"`), durations ([`Duration`], `"30s"`),
//!   and how a TOML value becomes a typed one ([`FromValue`](units::FromValue)).
//! - [`error`]: [`ConfigError`] and [`ConfigErrors`].
//! - [`bounds`]: [`QueueBound`], what a component reports to the memory inventory.
//! - [`redact`]: which values are credentials, and `***` in their place.
//! - [`tls`]: the roots of a `ca_file` key (or the system's) and a rustls client setup.
//!
//! The whole file (`[runtime]`, `[wal]`, the sources and sinks as a whole) is
//! [`crate::config`], above the components; this module sits below them.

pub mod bounds;
pub mod declare;
pub mod error;
pub mod nats;
pub mod redact;
pub mod reference;
pub mod tls;
pub mod units;
pub mod walk;

pub use self::bounds::{Bounds, QueueBound, times};
pub use self::declare::{Key, KeyDoc, KeyRead, SectionDoc, document};
pub use self::error::{ConfigError, ConfigErrors};
pub use self::units::{ByteSize, Duration, format_bytes};
pub use self::walk::{Diagnostics, Section, join};

/// Reports an environment variable name that the shell could not set.
pub fn check_env_name(s: &Section<'_>, key: &str, name: &str) {
    let valid = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if !valid {
        s.error(
            key,
            format!("expected the name of an environment variable (letters, digits, _), found {name:?}; the secret itself never goes in the file"),
        );
    }
}

/// Reads a component's `type`: one of `built` (returned), or one of `not_built`
/// (reported as not built yet, and returned so that its keys are still checked).
/// Missing or unknown: reported with the choices and the closest one. `description`
/// documents the key.
pub fn read_type<'t>(
    s: &mut Section<'_>,
    built: &[&'t str],
    not_built: impl Iterator<Item = &'t str> + Clone,
    what: &str,
    description: &'static str,
) -> Option<&'t str> {
    let quoted: Vec<String> = built.iter().map(|t| format!("{t:?}")).collect();
    let declared = s
        .key("type", description)
        .required()
        .example(built.first().copied().unwrap_or_default())
        .raw(format!("one of {}", quoted.join(" | ")));
    let Some(value) = declared else {
        s.error(
            "type",
            format!(
                "missing required key; expected one of: {}",
                built.join(", ")
            ),
        );
        return None;
    };
    let text = value.as_str();
    if let Some(t) = built.iter().find(|t| Some(**t) == text) {
        return Some(t);
    }
    if let Some(t) = not_built.clone().find(|t| Some(*t) == text) {
        s.error(
            "type",
            format!(
                "{t:?} {what}s are not built yet in this version of weir; available: {}",
                built.join(", ")
            ),
        );
        return Some(t);
    }
    let all: Vec<&str> = built.iter().copied().chain(not_built).collect();
    let expected = format!("one of {}", quoted.join(", "));
    s.error("type", units::choice_mismatch(&expected, value, &all));
    None
}
