//! Evidence across runs: one run in which a single thread took a lock is an
//! observation (`single-thread-lock`); the same in every one of enough runs
//! of the program is a verdict (`unnecessary-lock`), and one run in which
//! two threads took it clears it.
//!
//! The runs are the processes of one executable reported together (a
//! suite's traces, several runs of a program, a fork's parent and child)
//! and, with `report --against-history N`, the last N runs saved in the
//! history. Locks are joined across runs by their stable names: a lock in a
//! variable by the variable (`&stats.lock`), any other by the line that
//! made it, so that all the locks made at one line stand or fall together
//! (which merge-node mutex one run used from one thread alone is chance).

use crate::analysis::findings::Limits;
use crate::model::*;
use std::collections::{BTreeMap, BTreeSet};

/// One run saved in the history: its program's file name, the processes
/// it summed (pid, start on the wall clock; empty if saved before they
/// were kept) and, per lock, the most threads that asked for it (0: not
/// known).
#[derive(Debug, Clone)]
pub struct PriorRun {
    pub exe: String,
    pub identities: Vec<(u64, u64)>,
    pub locks: BTreeMap<String, u64>,
    /// Per lock, the lines (site names) that took it, where saved.
    pub lines: BTreeMap<String, Vec<String>>,
}

/// Per lock key of a saved run, whether that run shared it: several
/// threads asked for one of its locks, or one was taken at a line where
/// locks of one key were both shared and one thread's (the saved form of
/// `findings::shared_in_run`). Locks saved before thread counts were are
/// no evidence and left out.
fn prior_keys(run: &PriorRun) -> BTreeMap<&str, bool> {
    let known = || run.locks.iter().filter(|(_, &threads)| threads > 0);
    let chance = crate::analysis::findings::lines_where_sharing_was_chance(known().flat_map(
        |(lock, &threads)| {
            run.lines
                .get(lock)
                .into_iter()
                .flatten()
                .map(move |line| (line.as_str(), join_key(lock), threads > 1))
        },
    ));
    let mut keys: BTreeMap<&str, bool> = BTreeMap::new();
    for (lock, &threads) in known() {
        let by_line = run
            .lines
            .get(lock)
            .is_some_and(|lines| lines.iter().any(|l| chance.contains(l.as_str())));
        *keys.entry(join_key(lock)).or_default() |= threads > 1 || by_line;
    }
    keys
}

/// A lock's name without its number: `make@a.c:9#3` → `make@a.c:9`,
/// `&total#2` → `&total`.
pub fn join_key(name: &str) -> &str {
    match name.rsplit_once('#') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    }
}

/// Per lock key: in how many runs it was taken, and in how many of those
/// by more than one thread.
#[derive(Default, Clone, Copy)]
struct Seen {
    runs: u64,
    shared_runs: u64,
}

/// Each taken lock's key in `p`, and whether it was shared there (or is
/// no evidence of being one thread's: `shared_in_run`).
fn keys_of(p: &Process) -> BTreeMap<String, bool> {
    let mut keys: BTreeMap<String, bool> = BTreeMap::new();
    let shared_in_run = crate::analysis::findings::shared_in_run(&p.locks);
    crate::model::names::with(&p.names, || {
        for (lock, &shared) in p.locks.iter().zip(&shared_in_run) {
            if lock.acquisitions + lock.posts == 0 {
                continue;
            }
            let name = lock.id.to_string();
            *keys.entry(join_key(&name).to_string()).or_default() |= shared;
        }
    });
    keys
}

/// Which run each process belongs to (an index): a fork child reported
/// with its parent is part of the parent's run (one invocation of the
/// program, however many processes it forks), and a trace read twice (a
/// copy) is one process.
fn run_of_each(processes: &[Process]) -> Vec<usize> {
    let mut first: BTreeMap<(u32, u64, &str), usize> = BTreeMap::new();
    let mut by_pid: BTreeMap<u32, usize> = BTreeMap::new();
    let mut runs: Vec<usize> = Vec::with_capacity(processes.len());
    for (i, p) in processes.iter().enumerate() {
        let same = *first
            .entry((p.pid, p.start_unix_ns, p.exe.as_str()))
            .or_insert(i);
        runs.push(same);
        by_pid.entry(p.pid).or_insert(same);
    }
    // A fork child takes its parent's run, up the tree (pids may repeat
    // across runs, so only a parent of the same program that started
    // before it counts).
    for i in 0..processes.len() {
        let mut at = i;
        for _ in 0..64 {
            let p = &processes[at];
            if !p.fork_child {
                break;
            }
            match by_pid.get(&p.ppid).copied() {
                Some(parent)
                    if processes[parent].exe == p.exe
                        && processes[parent].start_unix_ns <= p.start_unix_ns =>
                {
                    at = parent;
                }
                _ => break,
            }
        }
        runs[i] = runs[at];
    }
    runs
}

/// Joins the runs of each program in `processes` (and `prior`): turns
/// `single-thread-lock` into `unnecessary-lock` where every run had one
/// thread alone take the locks, drops it (and a data-level
/// `unnecessary-lock`) where some run shared them, and says how many runs
/// stand behind each.
pub fn join(processes: &mut [Process], prior: &[PriorRun], limits: &Limits) {
    let keys: Vec<BTreeMap<String, bool>> = processes.iter().map(keys_of).collect();
    let runs = run_of_each(processes);
    // (executable, key) → per run in this report, whether any of its
    // processes shared the lock.
    let mut by_run: BTreeMap<(&str, &str), BTreeMap<usize, bool>> = BTreeMap::new();
    for ((p, keys), &run) in processes.iter().zip(&keys).zip(&runs) {
        for (key, &shared) in keys {
            *by_run
                .entry((p.exe.as_str(), key.as_str()))
                .or_default()
                .entry(run)
                .or_default() |= shared;
        }
    }
    let mut seen: BTreeMap<(String, String), Seen> = by_run
        .into_iter()
        .map(|((exe, key), runs)| {
            let s = Seen {
                runs: runs.len() as u64,
                shared_runs: runs.values().filter(|&&shared| shared).count() as u64,
            };
            ((exe.to_string(), key.to_string()), s)
        })
        .collect();
    // Saved runs, matched by file name: each one run, its locks by key. A
    // run saved twice, or one reported here too, is counted once.
    let here: BTreeSet<(u64, u64)> = processes
        .iter()
        .map(|p| (u64::from(p.pid), p.start_unix_ns))
        .collect();
    let mut counted: BTreeSet<&[(u64, u64)]> = BTreeSet::new();
    let exes: BTreeSet<String> = processes.iter().map(|p| p.exe.clone()).collect();
    for exe in &exes {
        let name = crate::base::words::basename(exe);
        for run in prior.iter().filter(|r| r.exe == name) {
            if !run.identities.is_empty()
                && (run.identities.iter().any(|id| here.contains(id))
                    || !counted.insert(&run.identities))
            {
                continue;
            }
            for (key, shared) in prior_keys(run) {
                let s = seen.entry((exe.clone(), key.to_string())).or_default();
                s.runs += 1;
                s.shared_runs += u64::from(shared);
            }
        }
    }
    for p in processes.iter_mut() {
        let exe = p.exe.clone();
        let names = std::mem::take(&mut p.names);
        let mut cleared = 0usize;
        crate::model::names::with(&names, || {
            p.findings.retain_mut(|f| {
                let verdict = f.kind == FINDING_SINGLE_THREAD
                    || (f.kind == FINDING_UNNECESSARY && f.evidence.is_some());
                if !verdict {
                    return true;
                }
                let runs: Vec<Seen> = f
                    .locks
                    .iter()
                    .map(|l| {
                        let name = l.to_string();
                        let key = (exe.clone(), join_key(&name).to_string());
                        seen.get(&key).copied().unwrap_or(Seen {
                            runs: 1,
                            shared_runs: 0,
                        })
                    })
                    .collect();
                if runs.iter().any(|s| s.shared_runs > 0) {
                    cleared += f.locks.len();
                    return false;
                }
                let all = runs.iter().map(|s| s.runs).min().unwrap_or(1).max(1);
                if let Some(e) = f.evidence.as_mut() {
                    e.runs = all;
                }
                if f.kind == FINDING_SINGLE_THREAD && all > 1 {
                    reword(f, all, &exe, limits);
                }
                true
            });
        });
        p.names = names;
        if cleared > 0 {
            p.warnings.push(format!(
                "{} taken by one thread alone in this run {} taken by several in another run of {} reported with it (or taken at a line where which of a family's locks one thread took alone was chance), so {} no finding",
                crate::base::words::count(cleared as u64, "lock", "locks"),
                if cleared == 1 { "was" } else { "were" },
                crate::base::words::basename(&exe),
                if cleared == 1 { "it is" } else { "they are" },
            ));
        }
    }
}

/// A `single-thread-lock` that one thread alone took in each of `runs`
/// runs: a verdict once they are `min_runs`, else said how far along.
fn reword(f: &mut Finding, runs: u64, exe: &str, limits: &Limits) {
    let (it, they, guard) = if f.locks.len() == 1 {
        ("it", "it protects", "it guards")
    } else {
        ("them", "they protect", "they guard")
    };
    let program = crate::base::words::basename(exe);
    if runs >= limits.min_runs {
        f.kind = FINDING_UNNECESSARY;
        if let Some(e) = f.evidence.as_mut() {
            e.basis = "runs";
        }
        f.message = format!(
            "{} in this run, and one thread alone took {it} in each of the {runs} recorded runs of {program}: {they} nothing shared in any of them; remove {it} or make the data {guard} thread-local, unless a code path none of these runs took shares {it} (the runs must cover what the program does: a command, a setting or an input they left out may).",
            f.observed,
        );
    } else {
        f.message = format!(
            "{} in this run, and one thread alone took {it} in each of the {runs} recorded runs of {program} ({} such runs make it unnecessary-lock). If no other code path shares {it}, {it} can go.",
            f.observed, limits.min_runs,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_run_shares_a_lock_taken_where_a_family_was_shared_and_not() {
        // sort's queue pop: node N#1 shared, N#2 one thread's, both at
        // pop; leaf L#1 one thread's at pop too, and A one thread's
        // elsewhere.
        let run = PriorRun {
            exe: "sort".into(),
            identities: Vec::new(),
            locks: [("N#1", 2), ("N#2", 1), ("L#1", 1), ("A", 1), ("old", 0)]
                .into_iter()
                .map(|(l, t)| (l.to_string(), t))
                .collect(),
            lines: [("N#1", "pop"), ("N#2", "pop"), ("L#1", "pop"), ("A", "add")]
                .into_iter()
                .map(|(l, line)| (l.to_string(), vec![line.to_string()]))
                .collect(),
        };
        let keys = prior_keys(&run);
        assert_eq!(keys.get("N"), Some(&true));
        assert_eq!(keys.get("L"), Some(&true));
        assert_eq!(keys.get("A"), Some(&false));
        assert_eq!(keys.get("old"), None);
    }

    #[test]
    fn numbers_come_off_names() {
        assert_eq!(join_key("make@a.c:9#3"), "make@a.c:9");
        assert_eq!(join_key("&total#2"), "&total");
        assert_eq!(join_key("&total"), "&total");
        assert_eq!(join_key("&table[3]"), "&table[3]");
        assert_eq!(join_key("f@a#b.c:3"), "f@a#b.c:3");
        assert_eq!(join_key("weird#"), "weird#");
    }
}
