//! Which paths the file source reads: `path` (a file or a glob), `exclude`, and the
//! rotated names left out by default.
//!
//! A glob has `*`, `?`, `[..]` within a path component and `**` as a whole component
//! (any depth). The directories are listed from the glob's base (its longest prefix
//! without a wildcard), as deep as the glob reaches. An `exclude` glob with a `/`
//! matches the whole path; without one, the file name.
//!
//! Rotated names are left out unless `exclude_rotated = false` or `path` itself names
//! them: `app.log.1` … `app.log.999`, `app.log-20240101`, and compressed files (`.gz`,
//! `.bz2`, `.xz`, `.zst`, `.zip`, `.lz4`). "Names them" is read off the glob's own last
//! component: `*.gz` or `app.log.1` name them, `*.log` and `*` do not.

use std::path::{Component, Path, PathBuf};

use glob::{MatchOptions, Pattern};

/// Rotated names left out by default, matched against the file name.
const ROTATED: &[&str] = &[
    "*.[0-9]",
    "*.[0-9][0-9]",
    "*.[0-9][0-9][0-9]",
    "*-[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]",
    "*-[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]",
    "*.gz",
    "*.bz2",
    "*.xz",
    "*.zst",
    "*.zip",
    "*.lz4",
];

const OPTIONS: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

/// A pattern that does not compile, with the key it came from.
#[derive(Debug)]
pub struct PatternError {
    /// `path` or `exclude[i]`.
    pub key: &'static str,
    /// What is wrong.
    pub message: String,
}

/// An exclusion: against the whole path, or the file name alone.
#[derive(Debug, Clone)]
struct Exclude {
    pattern: Pattern,
    whole_path: bool,
}

/// The compiled `path`, `exclude` and rotated names.
#[derive(Debug, Clone)]
pub struct Patterns {
    include: Pattern,
    base: PathBuf,
    /// How many components below `base` a match has; `None` with `**`.
    depth: Option<usize>,
    literal: bool,
    exclude: Vec<Exclude>,
}

fn has_wildcard(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

impl Patterns {
    /// Compiles `path` and `exclude`.
    ///
    /// # Errors
    ///
    /// A pattern that is not a valid glob, or a `**` that is not a whole component.
    pub fn new(
        path: &Path,
        exclude: &[String],
        exclude_rotated: bool,
    ) -> Result<Self, PatternError> {
        let text = path.to_str().ok_or_else(|| PatternError {
            key: "path",
            message: format!("expected a UTF-8 path, found {}", path.display()),
        })?;
        let include = Pattern::new(text).map_err(|e| PatternError {
            key: "path",
            message: format!("not a valid glob at character {}: {}", e.pos, e.msg),
        })?;
        let mut base = PathBuf::new();
        let mut rest = Vec::new();
        for component in path.components() {
            let part = component.as_os_str().to_str().unwrap_or_default();
            if rest.is_empty() && !has_wildcard(part) {
                base.push(component);
            } else {
                if part.contains("**") && part != "**" {
                    return Err(PatternError {
                        key: "path",
                        message: format!(
                            "`**` must be a whole path component (as in \"logs/**/*.log\"), found {part:?}"
                        ),
                    });
                }
                rest.push(part.to_owned());
            }
        }
        let literal = rest.is_empty();
        let (base, depth) = if literal {
            let parent = path.parent().map_or_else(PathBuf::new, Path::to_path_buf);
            (parent, Some(1))
        } else {
            let depth = (!rest.iter().any(|p| p == "**")).then_some(rest.len());
            (base, depth)
        };
        let base = if base.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            base
        };
        let last = path
            .components()
            .next_back()
            .and_then(|c| match c {
                Component::Normal(s) => s.to_str(),
                _ => None,
            })
            .unwrap_or_default()
            .to_owned();
        let mut excludes = Vec::new();
        for (i, text) in exclude.iter().enumerate() {
            let pattern = Pattern::new(text).map_err(|e| PatternError {
                key: "exclude",
                message: format!(
                    "exclude[{i}] {text:?} is not a valid glob at character {}: {}",
                    e.pos, e.msg
                ),
            })?;
            excludes.push(Exclude {
                pattern,
                whole_path: text.contains('/'),
            });
        }
        if exclude_rotated {
            for text in ROTATED {
                let pattern = Pattern::new(text).expect("the rotated patterns are valid");
                // `path` names such files itself: its last component, read as a name,
                // is one of them (`*.gz`, `app.log.1`).
                if pattern.matches(&last) {
                    continue;
                }
                excludes.push(Exclude {
                    pattern,
                    whole_path: false,
                });
            }
        }
        Ok(Patterns {
            include,
            base,
            depth,
            literal,
            exclude: excludes,
        })
    }

    /// Whether `path` is one plain file (no wildcard).
    pub fn is_literal(&self) -> bool {
        self.literal
    }

    /// The directory listed (and watched) for matches.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// How deep below [`base`](Self::base) matches lie: `None` for any depth.
    pub fn depth(&self) -> Option<usize> {
        self.depth
    }

    /// Whether `path` is one to read: it matches `path` and no exclusion.
    pub fn matches(&self, path: &Path) -> bool {
        self.include.matches_path_with(path, OPTIONS) && !self.excluded(path)
    }

    /// Whether an exclusion (or a rotated name) leaves `path` out.
    pub fn excluded(&self, path: &Path) -> bool {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        self.exclude.iter().any(|e| {
            if e.whole_path {
                e.pattern.matches_path_with(path, OPTIONS)
            } else {
                e.pattern.matches_with(name, OPTIONS)
            }
        })
    }

    /// Whether `name` is a rotated name of `of` (`app.log.1`, `app.log-20241206` of
    /// `app.log`; not a compressed one).
    pub fn rotated_name_of(name: &str, of: &str) -> bool {
        let Some(rest) = name.strip_prefix(of) else {
            return false;
        };
        let suffix = rest.strip_prefix(['.', '-']).unwrap_or_default();
        !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit())
    }

    /// Every file under the base that matches, with the errors met while listing
    /// (unreadable directories), which do not stop the listing.
    pub fn list(&self) -> (Vec<PathBuf>, Vec<String>) {
        let mut walk = walkdir::WalkDir::new(&self.base)
            .min_depth(1)
            .follow_links(true);
        if let Some(depth) = self.depth {
            walk = walk.max_depth(depth);
        }
        let mut found = Vec::new();
        let mut errors = Vec::new();
        for entry in walk {
            match entry {
                Ok(entry) => {
                    if entry.file_type().is_file() && self.matches(entry.path()) {
                        found.push(entry.into_path());
                    }
                }
                Err(e) => {
                    // A missing base is not an error here: the glob matches nothing yet.
                    let missing_base = e.depth() == 0
                        && e.io_error()
                            .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound);
                    if !missing_base {
                        errors.push(e.to_string());
                    }
                }
            }
        }
        found.sort();
        (found, errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patterns(path: &str, exclude: &[&str]) -> Patterns {
        let exclude: Vec<String> = exclude.iter().map(|s| (*s).to_owned()).collect();
        Patterns::new(Path::new(path), &exclude, true).unwrap()
    }

    #[test]
    fn bases_and_depths() {
        let p = patterns("/var/log/app/*.log", &[]);
        assert_eq!((p.base(), p.depth()), (Path::new("/var/log/app"), Some(1)));
        let p = patterns("/var/log/**/*.log", &[]);
        assert_eq!((p.base(), p.depth()), (Path::new("/var/log"), None));
        let p = patterns("/var/log/*/app.log", &[]);
        assert_eq!((p.base(), p.depth()), (Path::new("/var/log"), Some(2)));
        let p = patterns("/var/log/app.log", &[]);
        assert!(p.is_literal());
        assert_eq!((p.base(), p.depth()), (Path::new("/var/log"), Some(1)));
        let p = patterns("*.log", &[]);
        assert_eq!(p.base(), Path::new("."));
    }

    #[test]
    fn rotated_names_are_left_out_unless_named() {
        let p = patterns("/l/*.log*", &[]);
        assert!(p.matches(Path::new("/l/app.log")));
        for rotated in [
            "/l/app.log.1",
            "/l/app.log.12",
            "/l/app.log.gz",
            "/l/app.log-20241206",
            "/l/app.log.2.gz",
        ] {
            assert!(!p.matches(Path::new(rotated)), "{rotated}");
        }
        assert!(patterns("/l/*.gz", &[]).matches(Path::new("/l/app.log.gz")));
        assert!(patterns("/l/app.log.1", &[]).matches(Path::new("/l/app.log.1")));
        let all = Patterns::new(Path::new("/l/*"), &[], false).unwrap();
        assert!(all.matches(Path::new("/l/app.log.1")));
        // `*` alone does not name rotated files.
        assert!(!patterns("/l/*", &[]).matches(Path::new("/l/app.log.1")));
    }

    #[test]
    fn rotated_names_of_a_file() {
        assert!(Patterns::rotated_name_of("app.log.1", "app.log"));
        assert!(Patterns::rotated_name_of("app.log-20241206", "app.log"));
        assert!(!Patterns::rotated_name_of("app.log.1.gz", "app.log"));
        assert!(!Patterns::rotated_name_of("app.log", "app.log"));
        assert!(!Patterns::rotated_name_of("app.logger", "app.log"));
        assert!(!Patterns::rotated_name_of("other.log.1", "app.log"));
    }

    #[test]
    fn excludes_by_name_or_whole_path() {
        let p = patterns("/l/**/*.log", &["debug*", "/l/skip/**"]);
        assert!(p.matches(Path::new("/l/a/app.log")));
        assert!(p.matches(Path::new("/l/app.log")));
        assert!(!p.matches(Path::new("/l/a/debug.log")));
        assert!(!p.matches(Path::new("/l/skip/x/app.log")));
        assert!(!p.matches(Path::new("/l/a/app.txt")));
    }

    #[test]
    fn wildcards_do_not_cross_directories() {
        let p = patterns("/l/*.log", &[]);
        assert!(!p.matches(Path::new("/l/a/app.log")));
        assert!(patterns("/l/[ab]?.log", &[]).matches(Path::new("/l/a1.log")));
    }

    #[test]
    fn bad_patterns_name_the_key() {
        let e = Patterns::new(Path::new("/l/[.log"), &[], true).unwrap_err();
        assert_eq!(e.key, "path");
        let e = Patterns::new(Path::new("/l/a**/x"), &[], true).unwrap_err();
        assert!(e.message.contains("path component"), "{}", e.message);
        let e = Patterns::new(Path::new("/l/*.log"), &["[x".into()], true).unwrap_err();
        assert_eq!(e.key, "exclude");
    }

    #[test]
    fn lists_matches_below_the_base() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        for f in ["x.log", "x.log.1", "a/y.log", "a/b/z.log", "a/b/z.txt"] {
            std::fs::write(tmp.path().join(f), "1\n").unwrap();
        }
        let glob = format!("{}/**/*.log", tmp.path().display());
        let (found, errors) = patterns(&glob, &[]).list();
        assert!(errors.is_empty(), "{errors:?}");
        let names: Vec<_> = found
            .iter()
            .map(|p| {
                p.strip_prefix(tmp.path())
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(names, ["a/b/z.log", "a/y.log", "x.log"]);
        let missing = format!("{}/nope/*.log", tmp.path().display());
        assert_eq!(patterns(&missing, &[]).list(), (vec![], vec![]));
    }
}
