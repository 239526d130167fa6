//! Suppressions, in the style of Valgrind's and ThreadSanitizer's: named
//! entries that take findings about code the user does not own (an
//! interpreter's locks, glibc's) out of the report, counted apart, so that
//! `--fail-on-findings` gates the program's own code. This file reads the
//! entries (the built-in set, `--suppress FILE`, `$LOCKSUIT_SUPPRESS`, a
//! project's `locksuit.supp`); `apply.rs` matches them against the model's
//! findings and writes entries for findings (`--gen-suppressions`).
//!
//! The format, one entry after another:
//!
//! ```text
//! # a comment (a whole line)
//! [cpython-gil]            the entry's name, counted under it in the report
//! kind = high-contention   a finding kind (glob); any kind if none given
//! lock = &_PyRuntime*      each lock of the finding, by its stable name
//! frame = take_gil         a function in the call chain of each of its lines
//! module = libpython3*     the module of each of its lines (file name or path)
//! ```
//!
//! A key may be given several times: any of its globs will do. A finding
//! is suppressed when every key the entry gives matches (see `apply.rs`).

mod apply;

pub use apply::{apply, generate};

use glob::Pattern;
use std::path::{Path, PathBuf};

/// The file a project keeps its suppressions in, found from the current
/// directory up to its repository's root.
pub const PROJECT_FILE: &str = "locksuit.supp";

/// Every finding kind a report can have: a `kind` without wildcards must
/// be one of them (a misspelt kind would suppress nothing, silently).
pub const KINDS: [&str; 17] = [
    "deadlock",
    "potential-deadlock",
    "family-order-inversion",
    "misuse",
    "single-thread-lock",
    "unnecessary-lock",
    "unsuitable-site",
    "private-data-under-lock",
    "disjoint-data",
    "read-only-sharing",
    "false-sharing",
    "long-hold",
    "starvation",
    "high-contention",
    "asymmetric-contention",
    "over-synchronization",
    "blocking-under-lock",
];

const BUILT_IN: &str = include_str!("builtin.supp");

/// Where the built-in entries say they come from.
pub const BUILT_IN_SOURCE: &str = "built-in";

/// One named entry.
#[derive(Debug)]
pub struct Entry {
    pub name: String,
    /// Where it was written: `file:line` of its `[name]` line.
    pub source: String,
    kinds: Vec<Pattern>,
    locks: Vec<Pattern>,
    frames: Vec<Pattern>,
    modules: Vec<Pattern>,
}

/// Every entry in force, in the order they were read (the first that
/// matches a finding is the one it is counted under).
#[derive(Debug, Default)]
pub struct Suppressions {
    pub entries: Vec<Entry>,
}

/// Where suppressions come from, as the command line gathered them.
#[derive(Debug, Default)]
pub struct Sources {
    /// The built-in set (off with `--no-default-suppressions`).
    pub built_in: bool,
    /// `--suppress FILE` (each), else `$LOCKSUIT_SUPPRESS`.
    pub files: Vec<PathBuf>,
    /// Look for `locksuit.supp` from this directory up.
    pub project_from: Option<PathBuf>,
}

impl Suppressions {
    /// Reads every source; the first malformed or unreadable file is the
    /// error, as `file:line: problem`.
    pub fn gather(sources: &Sources) -> Result<Suppressions, String> {
        let mut entries = if sources.built_in {
            built_in()
        } else {
            Vec::new()
        };
        let project = sources.project_from.as_deref().and_then(project_file);
        let mut read: Vec<PathBuf> = Vec::new();
        for path in sources.files.iter().chain(project.as_ref()) {
            // The project's file named with --suppress too is read once.
            let same = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
            if read.contains(&same) {
                continue;
            }
            read.push(same);
            entries.extend(load(path)?);
        }
        Ok(Suppressions { entries })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The built-in entries.
pub fn built_in() -> Vec<Entry> {
    // Not user input: the unit tests parse it.
    parse(BUILT_IN, BUILT_IN_SOURCE).expect("the built-in suppressions parse")
}

/// Reads a suppression file; the error names the file, and the line.
pub fn load(path: &Path) -> Result<Vec<Entry>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read the suppressions: {e}", path.display()))?;
    let origin = path.display().to_string();
    parse(&text, &origin).map_err(|(line, what)| format!("{origin}:{line}: {what}"))
}

/// `locksuit.supp` in `start` or the nearest of its ancestors up to the
/// repository's root (a directory with `.git`); outside a repository,
/// only `start` itself is looked in (a stray file in `/tmp` or `/` must
/// not suppress findings of every program under it).
pub fn project_file(start: &Path) -> Option<PathBuf> {
    let in_repository = start.ancestors().any(|d| d.join(".git").exists());
    for dir in start.ancestors() {
        let candidate = dir.join(PROJECT_FILE);
        if candidate.is_file() {
            return Some(candidate);
        }
        if !in_repository || dir.join(".git").exists() {
            break;
        }
    }
    None
}

/// Parses entries; `origin` names the file in each entry's source. Errors
/// carry the line number.
pub fn parse(text: &str, origin: &str) -> Result<Vec<Entry>, (usize, String)> {
    let mut entries: Vec<Entry> = Vec::new();
    // The line of the entry being read, to name it if it stays empty.
    let mut header_line = 0;
    for (i, raw) in text.lines().enumerate() {
        let number = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(inner) = line.strip_prefix('[') {
            let Some(name) = inner.strip_suffix(']').map(str::trim) else {
                return Err((number, format!("an entry's name ends with ']': '{line}'")));
            };
            if name.is_empty() {
                return Err((number, "an entry needs a name between '[' and ']'".into()));
            }
            check_not_empty(entries.last(), header_line)?;
            header_line = number;
            entries.push(Entry {
                name: name.to_string(),
                source: format!("{origin}:{number}"),
                kinds: Vec::new(),
                locks: Vec::new(),
                frames: Vec::new(),
                modules: Vec::new(),
            });
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err((
                number,
                format!("expected '[name]' or 'key = pattern', found '{line}'"),
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        let Some(entry) = entries.last_mut() else {
            return Err((
                number,
                format!("'{key} = …' before any '[name]' line: which entry is it for?"),
            ));
        };
        if value.is_empty() {
            return Err((number, format!("no pattern after '{key} ='")));
        }
        let pattern =
            Pattern::new(value).map_err(|e| (number, format!("bad pattern '{value}': {e}")))?;
        let list = match key {
            "kind" => {
                let literal = !value.contains(['*', '?', '[']);
                if literal && !KINDS.contains(&value) {
                    return Err((
                        number,
                        format!("no finding kind '{value}' (kinds: {})", KINDS.join(", ")),
                    ));
                }
                &mut entry.kinds
            }
            "lock" => &mut entry.locks,
            "frame" => &mut entry.frames,
            "module" => &mut entry.modules,
            _ => {
                return Err((
                    number,
                    format!(
                        "unknown key '{key}' (an entry has kind, lock, frame and module lines)"
                    ),
                ))
            }
        };
        list.push(pattern);
    }
    check_not_empty(entries.last(), header_line)?;
    Ok(entries)
}

/// An entry with no lines would suppress every finding: refused, so that
/// a file cut short does not silence a whole report.
fn check_not_empty(entry: Option<&Entry>, line: usize) -> Result<(), (usize, String)> {
    match entry {
        Some(e)
            if e.kinds.is_empty()
                && e.locks.is_empty()
                && e.frames.is_empty()
                && e.modules.is_empty() =>
        {
            Err((
                line,
                format!(
                    "entry [{}] has no kind, lock, frame or module line: it would suppress every finding",
                    e.name
                ),
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(text: &str) -> (usize, String) {
        match parse(text, "t.supp") {
            Ok(entries) => panic!("parsed {} entries from {text:?}", entries.len()),
            Err(e) => e,
        }
    }

    #[test]
    fn entries_keep_their_name_source_and_patterns() {
        let text =
            "# comment\n\n[gil]\nkind = high-contention\nkind = starv*\nlock = &_PyRuntime*\n\
                    [mine]\nframe = work_private\nmodule = libfoo.so*\n";
        let entries = parse(text, "t.supp").expect("parses");
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].name, "gil");
        assert_eq!(entries[0].source, "t.supp:3");
        assert_eq!(entries[0].kinds.len(), 2);
        assert_eq!(entries[0].locks.len(), 1);
        assert_eq!(entries[1].source, "t.supp:7");
        assert_eq!(entries[1].frames[0].as_str(), "work_private");
        assert_eq!(entries[1].modules[0].as_str(), "libfoo.so*");
    }

    #[test]
    fn lock_names_with_hashes_and_spaces_are_patterns_not_comments() {
        let entries = parse(
            "[q]\nlock = make@t.c:40#*\nframe = std::mutex::lock()\n",
            "t",
        )
        .expect("parses");
        assert!(entries[0].locks[0].matches("make@t.c:40#3"));
        assert!(entries[0].frames[0].matches("std::mutex::lock()"));
    }

    #[test]
    fn malformed_lines_name_their_line_and_the_problem() {
        let (line, what) = error_of("[a]\nkind = high-contention\nfrme = x\n");
        assert_eq!(line, 3);
        assert!(what.contains("unknown key 'frme'"), "{what}");

        let (line, what) = error_of("kind = misuse\n");
        assert_eq!(line, 1);
        assert!(what.contains("before any '[name]'"), "{what}");

        let (line, what) = error_of("[a]\nkind = high-contension\n");
        assert_eq!(line, 2);
        assert!(what.contains("no finding kind 'high-contension'"), "{what}");

        let (line, what) = error_of("[a]\nlock = [abc\n");
        assert_eq!(line, 2);
        assert!(what.contains("bad pattern"), "{what}");

        let (line, what) = error_of("[a\n");
        assert_eq!(line, 1);
        assert!(what.contains("ends with ']'"), "{what}");

        let (line, what) = error_of("[a]\nkind\n");
        assert_eq!(line, 2);
        assert!(
            what.contains("expected '[name]' or 'key = pattern'"),
            "{what}"
        );

        let (line, what) = error_of("[a]\nlock =\n");
        assert_eq!(line, 2);
        assert!(what.contains("no pattern after 'lock ='"), "{what}");
    }

    #[test]
    fn an_entry_with_no_lines_is_refused_at_its_header() {
        let (line, what) = error_of("[a]\nkind = misuse\n\n[empty]\n[b]\nkind = misuse\n");
        assert_eq!(line, 4);
        assert!(what.contains("entry [empty]"), "{what}");
        let (line, _) = error_of("[a]\nkind = misuse\n[last]\n");
        assert_eq!(line, 3);
    }

    #[test]
    fn kinds_with_wildcards_need_not_be_known() {
        assert!(parse("[a]\nkind = *-deadlock\n", "t").is_ok());
    }

    #[test]
    fn the_built_in_set_parses_and_names_its_source() {
        let entries = built_in();
        assert!(entries.iter().any(|e| e.name == "cpython-runtime-state"));
        assert!(entries.iter().all(|e| e.source.starts_with("built-in:")));
    }

    #[test]
    fn the_project_file_is_found_up_to_the_repository_root_only() {
        let base = std::env::temp_dir().join(format!("locksuit-supp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let deep = base.join("repo/src/sub");
        std::fs::create_dir_all(&deep).expect("mkdir");
        // Above the repository: never read.
        std::fs::write(base.join(PROJECT_FILE), "[x]\nkind = misuse\n").expect("write");
        assert_eq!(
            project_file(&deep),
            None,
            "outside a repository: only the start"
        );
        std::fs::create_dir(base.join("repo/.git")).expect("mkdir");
        assert_eq!(project_file(&deep), None, "not above the repository root");
        std::fs::write(base.join("repo").join(PROJECT_FILE), "").expect("write");
        assert_eq!(
            project_file(&deep),
            Some(base.join("repo").join(PROJECT_FILE))
        );
        std::fs::write(deep.join(PROJECT_FILE), "").expect("write");
        assert_eq!(project_file(&deep), Some(deep.join(PROJECT_FILE)));
        let _ = std::fs::remove_dir_all(&base);
    }
}
