//! Suppressions against the report: which findings an entry takes out
//! (`apply`), and ready entries for the findings left (`generate`).
//!
//! An entry matches a finding when each key it gives matches: a `kind`
//! line its kind; `lock` lines every lock it is about (by stable name);
//! `frame` lines, for every line it is at, some function of that line's
//! call chain; `module` lines, for every line it is at, the module of the
//! chain's innermost frame (the code that called the lock API). "Every",
//! not "any": a deadlock between the GIL and a lock of the program's own
//! is the program's, and stays.

use super::{Entry, Suppressions};
use crate::model::{Finding, Frame, LockId, Process, Report, Site, SiteId, SuppressedFindings};
use glob::Pattern;

/// Takes the findings an entry matches out of each process's `findings`
/// and counts them in its `suppressed`, under the first entry that
/// matches.
pub fn apply(report: &mut Report, suppressions: &Suppressions) {
    if suppressions.is_empty() {
        return;
    }
    for p in &mut report.processes {
        // Lock ids print as their stable names while the names are current.
        let verdicts: Vec<Option<usize>> = crate::model::names::with(&p.names, || {
            p.findings
                .iter()
                .map(|f| suppressions.entries.iter().position(|e| matches(e, f, p)))
                .collect()
        });
        let findings = std::mem::take(&mut p.findings);
        for (f, verdict) in findings.into_iter().zip(verdicts) {
            match verdict {
                None => p.findings.push(f),
                Some(i) => count(&mut p.suppressed, &suppressions.entries[i], f.kind),
            }
        }
    }
}

fn count(counts: &mut Vec<SuppressedFindings>, entry: &Entry, kind: &'static str) {
    match counts
        .iter_mut()
        .find(|c| c.source == entry.source && c.kind == kind)
    {
        Some(c) => c.findings += 1,
        None => counts.push(SuppressedFindings {
            suppression: entry.name.clone(),
            source: entry.source.clone(),
            kind,
            findings: 1,
        }),
    }
}

fn any(patterns: &[Pattern], text: &str) -> bool {
    patterns.iter().any(|p| p.matches(text))
}

fn matches(entry: &Entry, f: &Finding, p: &Process) -> bool {
    if !kind_and_locks_match(entry, f) {
        return false;
    }
    if entry.frames.is_empty() && entry.modules.is_empty() {
        return true;
    }
    let sites = sites_of(f, p);
    !sites.is_empty()
        && sites.iter().all(|site| {
            let chain = &site.call_chain;
            (entry.frames.is_empty()
                || chain
                    .iter()
                    .filter_map(|fr| fr.function.as_deref())
                    .any(|name| any(&entry.frames, name)))
                && (entry.modules.is_empty()
                    || chain
                        .first()
                        .filter(|fr| !is_programs_python_line(fr))
                        .and_then(|fr| fr.module.as_deref())
                        .is_some_and(|m| module_matches(&entry.modules, m)))
        })
}

/// A Python frame of the program's own `.py` files: it carries the
/// interpreter as its module, but it is the program's line, which no
/// `module` line of an entry covers (frames of the interpreter's own
/// library, `threading.py`, stay the interpreter's).
fn is_programs_python_line(frame: &Frame) -> bool {
    crate::model::frames::is_python_frame(frame)
        && !frame
            .path
            .as_deref()
            .or(frame.file.as_deref())
            .is_some_and(crate::model::frames::is_python_library)
}

/// The entry's `kind` lines (if any) match the finding's kind, and its
/// `lock` lines (if any) every lock the finding is about.
fn kind_and_locks_match(entry: &Entry, f: &Finding) -> bool {
    if !entry.kinds.is_empty() && !any(&entry.kinds, f.kind) {
        return false;
    }
    if entry.locks.is_empty() {
        return true;
    }
    let locks = locks_of(f);
    !locks.is_empty() && locks.iter().all(|l| any(&entry.locks, &l.to_string()))
}

/// A module pattern with a `/` is matched against the full path, one
/// without against the file name (as `--exe` takes either).
fn module_matches(patterns: &[Pattern], path: &str) -> bool {
    let base = crate::base::words::basename(path);
    patterns.iter().any(|p| {
        if p.as_str().contains('/') {
            p.matches(path)
        } else {
            p.matches(base)
        }
    })
}

/// Every lock a finding is about: its locks, or its one lock, and the
/// locks a deadlock's threads hold.
fn locks_of(f: &Finding) -> Vec<LockId> {
    let mut locks: Vec<LockId> = f.locks.clone();
    locks.extend(f.lock);
    locks.extend(f.cycle.iter().filter_map(|s| s.holds));
    locks.sort();
    locks.dedup();
    locks
}

/// Every line a finding is at: its sites and its cycle's.
fn sites_of<'a>(f: &Finding, p: &'a Process) -> Vec<&'a Site> {
    let mut ids: Vec<SiteId> = f.sites.clone();
    for step in &f.cycle {
        ids.extend(step.holds_site);
        ids.extend(step.waits_site);
    }
    ids.sort();
    ids.dedup();
    ids.iter()
        .filter_map(|id| p.sites.get(id.index()))
        .collect()
}

/// Ready entries for every finding in the report (those no suppression
/// took out), one per distinct set of lines, each after a comment saying
/// which finding it is for. Lock names numbered within their family
/// (`make@t.c:40#3`) become the family's glob (`make@t.c:40#*`): which
/// number a lock gets can change from run to run.
pub fn generate(report: &Report) -> String {
    let mut out = String::new();
    let mut written: Vec<String> = Vec::new();
    for p in &report.processes {
        crate::model::names::with(&p.names, || {
            for f in &p.findings {
                let Some((subject, body)) = entry_body(f, p) else {
                    out.push_str(&format!(
                        "# {}: [{}] has no lock, function or module to name: no entry\n\n",
                        crate::base::words::basename(&p.exe),
                        f.kind
                    ));
                    continue;
                };
                if written.contains(&body) {
                    continue;
                }
                out.push_str(&format!(
                    "# {} (pid {}): [{}] {}\n[{} {}]\n{body}\n",
                    crate::base::words::basename(&p.exe),
                    p.pid,
                    f.kind,
                    first_words(&f.message),
                    f.kind,
                    subject
                ));
                written.push(body);
            }
        });
    }
    out
}

/// The lines of an entry for `f`, and what its name says it is about: its
/// locks when it has any, else the functions (or, unnamed, the modules)
/// its lines are in.
fn entry_body(f: &Finding, p: &Process) -> Option<(String, String)> {
    let mut lines = vec![format!("kind = {}", f.kind)];
    let locks = locks_of(f);
    if let Some(first) = locks.first() {
        let mut globs: Vec<String> = locks.iter().map(lock_glob).collect();
        globs.sort();
        globs.dedup();
        lines.extend(globs.iter().map(|l| format!("lock = {l}")));
        return Some((family_name(first), lines.join("\n") + "\n"));
    }
    let innermost: Vec<&Frame> = sites_of(f, p)
        .iter()
        .filter_map(|s| s.call_chain.first())
        .collect();
    if innermost.is_empty() {
        return None;
    }
    let (key, mut names): (&str, Vec<&str>) = if innermost.iter().all(|fr| fr.function.is_some()) {
        let names = innermost.iter().filter_map(|fr| fr.function.as_deref());
        ("frame", names.collect())
    } else if innermost.iter().all(|fr| fr.module.is_some()) {
        let names = innermost
            .iter()
            .filter_map(|fr| fr.module.as_deref())
            .map(crate::base::words::basename);
        ("module", names.collect())
    } else {
        return None;
    };
    names.sort();
    names.dedup();
    let subject = names.first()?.to_string();
    lines.extend(
        names
            .iter()
            .map(|n| format!("{key} = {}", Pattern::escape(n))),
    );
    Some((subject, lines.join("\n") + "\n"))
}

/// A lock's stable name with its number within its family (`#3`), if
/// it has one, made `#*`.
fn family_name(lock: &LockId) -> String {
    let name = lock.to_string();
    match name.rsplit_once('#') {
        Some((family, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{family}#*")
        }
        _ => name,
    }
}

/// A lock's stable name as a pattern: escaped, and its number within its
/// family a wildcard.
fn lock_glob(lock: &LockId) -> String {
    let name = family_name(lock);
    match name.strip_suffix("#*") {
        Some(family) if name != lock.to_string() => format!("{}#*", Pattern::escape(family)),
        _ => Pattern::escape(&name),
    }
}

/// The start of a message, for a comment line.
fn first_words(message: &str) -> String {
    const SHOWN: usize = 100;
    let flat: String = message.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(SHOWN) {
        Some((at, _)) => format!("{}…", &flat[..at]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> Entry {
        let mut entries = super::super::parse(text, "t").expect("parses");
        entries.remove(0)
    }

    // Without a process's names current, lock ids print as L1, L2, …
    fn finding(kind: &'static str, locks: &[u32]) -> Finding {
        Finding {
            kind,
            lock: locks.first().map(|&i| LockId(i)),
            locks: locks.iter().map(|&i| LockId(i)).collect(),
            ..Finding::default()
        }
    }

    #[test]
    fn every_lock_of_a_finding_must_match_not_just_one() {
        let gil = entry("[gil]\nlock = L1\n");
        assert!(kind_and_locks_match(
            &gil,
            &finding("high-contention", &[0])
        ));
        // A deadlock between the interpreter's lock and the program's stays.
        assert!(!kind_and_locks_match(&gil, &finding("deadlock", &[0, 1])));
        let both = entry("[both]\nlock = L1\nlock = L2\n");
        assert!(kind_and_locks_match(&both, &finding("deadlock", &[0, 1])));
        // A lock entry never matches a finding about no lock.
        assert!(!kind_and_locks_match(
            &gil,
            &finding("unsuitable-site", &[])
        ));
    }

    #[test]
    fn a_kind_line_narrows_the_entry() {
        let e = entry("[e]\nkind = starv*\nlock = L*\n");
        assert!(kind_and_locks_match(&e, &finding("starvation", &[3])));
        assert!(!kind_and_locks_match(&e, &finding("high-contention", &[3])));
    }

    #[test]
    fn module_patterns_take_the_file_name_unless_they_have_a_slash() {
        let p = |s: &str| vec![Pattern::new(s).expect("pattern")];
        let path = "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0";
        assert!(module_matches(&p("libpython3*"), path));
        assert!(!module_matches(&p("/opt/*"), path));
        assert!(module_matches(&p("/usr/lib/*"), path));
    }

    #[test]
    fn family_numbers_become_wildcards_in_generated_lock_patterns() {
        // Unnamed ids have no family number; names with one are covered
        // by the integration tests (they need a process's names).
        assert_eq!(lock_glob(&LockId(0)), "L1");
        assert_eq!(first_words("a  b\nc"), "a b c");
    }
}
