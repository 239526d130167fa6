//! Blocking classes: why a thread stopped. A blocking period's class comes
//! from its call stack, matched against signatures of known blocking APIs
//! (the seed's "blocking API signatures"): the built-in table knows the
//! calls the shim records; a user's file adds classes or overrides them,
//! one `class = glob` line each, matched against the blocking call's name
//! and every function of its stack. Classes are assigned at report time,
//! so one trace can be classified again with another file.

use locksuit_format::{FD_FILE, FD_NONE, FD_SOCKET};
use std::path::Path;

/// The built-in classes, in the order reports list them.
pub const BUILT_IN: [&str; 8] = [
    "sync",
    "sleep",
    "io-file",
    "io-net",
    "poll",
    "memory",
    "preempted",
    "other",
];

/// The built-in class of a blocking call: by its name, and for reads and
/// writes by what the descriptor was (a socket's I/O is network I/O).
pub fn built_in(api: &str, fd_kind: u32) -> &'static str {
    match api {
        a if a.starts_with("pthread_") || a.starts_with("sem_") || a == "futex" => "sync",
        "nanosleep" | "clock_nanosleep" | "usleep" | "sleep" => "sleep",
        "poll" | "ppoll" | "select" | "pselect" | "epoll_wait" | "epoll_pwait" => "poll",
        "recv" | "recvfrom" | "recvmsg" | "send" | "sendto" | "sendmsg" | "accept" | "accept4"
        | "connect" => "io-net",
        "read" | "write" | "pread" | "pwrite" | "readv" | "writev" => match fd_kind {
            FD_SOCKET => "io-net",
            FD_FILE | FD_NONE => "io-file",
            // Pipes, terminals and devices: waiting on another party, but
            // through the file API; counted with file I/O.
            _ => "io-file",
        },
        "fsync" | "fdatasync" | "open" | "openat" => "io-file",
        // The kernel's context switches (LOCKSUIT_SWITCHES=1).
        "preempted" => "preempted",
        "page fault" => "memory",
        _ => "other",
    }
}

/// A user's signature: frames matching `pattern` make the class `class`.
#[derive(Debug)]
struct Rule {
    class: String,
    pattern: glob::Pattern,
    /// Characters that are not wildcards: the more, the more specific.
    literal: usize,
}

/// The user's signatures, most specific first (ties: file order).
#[derive(Debug, Default)]
pub struct Signatures {
    rules: Vec<Rule>,
}

impl Signatures {
    /// Reads a signature file; the error names the file and line.
    pub fn load(path: &Path) -> Result<Signatures, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read the class signatures: {e}", path.display()))?;
        Signatures::parse(&text)
            .map_err(|(line, what)| format!("{}:{line}: {what}", path.display()))
    }

    /// Parses `class = glob` lines; `#` starts a comment. Errors carry the
    /// line number.
    pub fn parse(text: &str) -> Result<Signatures, (usize, String)> {
        let mut rules = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split_once('#').map_or(raw, |(before, _)| before).trim();
            if line.is_empty() {
                continue;
            }
            let Some((class, glob)) = line.split_once('=') else {
                return Err((i + 1, format!("expected 'class = pattern', found '{line}'")));
            };
            let (class, glob) = (class.trim(), glob.trim());
            if class.is_empty()
                || !class
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err((
                    i + 1,
                    format!("class name '{class}' must be letters, digits, '-' or '_'"),
                ));
            }
            if glob.is_empty() {
                return Err((i + 1, format!("no pattern for class '{class}'")));
            }
            let pattern = glob::Pattern::new(glob)
                .map_err(|e| (i + 1, format!("bad pattern '{glob}': {e}")))?;
            let literal = glob
                .chars()
                .filter(|c| !matches!(c, '*' | '?' | '[' | ']'))
                .count();
            rules.push(Rule {
                class: class.to_string(),
                pattern,
                literal,
            });
        }
        // Stable: equally specific rules keep their order in the file.
        rules.sort_by_key(|r| std::cmp::Reverse(r.literal));
        Ok(Signatures { rules })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The class of a period blocked in `api`, called through `functions`
    /// (innermost first): the most specific user signature that matches
    /// the call or any function, else the built-in class.
    pub fn classify<'a>(&'a self, api: &str, fd_kind: u32, functions: &[Option<&str>]) -> &'a str {
        let names = std::iter::once(api).chain(functions.iter().flatten().copied());
        let names: Vec<&str> = names.collect();
        self.rules
            .iter()
            .find(|r| names.iter().any(|n| r.pattern.matches(n)))
            .map_or_else(|| built_in(api, fd_kind), |r| r.class.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locksuit_format::{FD_PIPE, FD_SOCKET};

    #[test]
    fn built_in_classes_follow_the_call_and_the_descriptor() {
        let none = Signatures::default();
        assert_eq!(none.classify("pthread_mutex_lock", 0, &[]), "sync");
        assert_eq!(none.classify("nanosleep", 0, &[]), "sleep");
        assert_eq!(none.classify("read", FD_PIPE, &[]), "io-file");
        assert_eq!(none.classify("read", FD_SOCKET, &[]), "io-net");
        assert_eq!(none.classify("epoll_wait", 0, &[]), "poll");
        assert_eq!(none.classify("waitpid", 0, &[]), "other");
    }

    #[test]
    fn the_most_specific_user_signature_wins_over_the_built_in_table() {
        let s = Signatures::parse(
            "# databases\n\
             database = *sqlite3_step*\n\
             storage = *sqlite3*   # less specific\n\
             naps = nanosleep\n",
        )
        .unwrap();
        let frames = [Some("pager_read"), None, Some("sqlite3_step"), Some("main")];
        assert_eq!(s.classify("read", FD_FILE, &frames), "database");
        assert_eq!(
            s.classify("read", FD_FILE, &[Some("sqlite3_open")]),
            "storage"
        );
        assert_eq!(s.classify("nanosleep", 0, &[Some("main")]), "naps");
        assert_eq!(s.classify("usleep", 0, &[Some("main")]), "sleep");
    }

    #[test]
    fn a_malformed_line_is_named() {
        assert_eq!(
            Signatures::parse("ok = a*\n\nno equals sign\n")
                .unwrap_err()
                .0,
            3
        );
        assert!(Signatures::parse("bad class = x")
            .unwrap_err()
            .1
            .contains("class name"));
        assert!(Signatures::parse("x = [")
            .unwrap_err()
            .1
            .contains("bad pattern"));
        assert!(Signatures::parse("x = ")
            .unwrap_err()
            .1
            .contains("no pattern"));
    }
}
