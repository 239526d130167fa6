//! Locks that never call pthread, seen through their futex waits (issue
//! 36): real programs with Rust std's locks (tests/rust/std_futex_locks.rs),
//! parking_lot's (tests/rust/parking_lot_locks/) and abseil's
//! (tests/cxx/absl_locks.cc). In each, a holder keeps a lock until its
//! waiter is seen blocked in futex(2) and then some more, and every waiter
//! times its own wait; the report must name the lock as a `futex` word of
//! the right role, the waiter's own source line, the wait within 10 % of
//! what the program measured, and who blocked whom. Then a futex deadlock
//! under `locksuit run --deadlock-timeout`.

use locksuit_tests::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn within_tenth(reported: u64, measured: u64, what: &str) {
    let ms = |ns: u64| ns as f64 / 1e6;
    assert!(
        reported.abs_diff(measured) <= measured / 10,
        "{what}: {:.2} ms reported, the program measured {:.2} ms (±10 % allowed)",
        ms(reported),
        ms(measured)
    );
}

/// Which waits of a case the report says the holder caused.
#[derive(Clone, Copy, PartialEq)]
enum Blocked {
    /// Every waiter's: `holder → waiter` in `blocking[]`.
    Each,
    /// At least one waiter's (see the case for why not each).
    Some,
    /// None: a condition variable's word has no holder.
    Nobody,
}

/// One forced wait of a program, and where its source says it happens.
struct Case<'a> {
    what: &'a str,
    /// `futex_role` the words waited on must have.
    role: &'a str,
    /// `key` of the tid and of the wait (ns) each waiter printed.
    waiters: &'a [(&'a str, &'a str)],
    /// Marker of the line every waiter waits at.
    wait_marker: &'a str,
    /// Key of the holder's (or notifier's) tid, and the marker of the line
    /// where it let go (or notified): the wake.
    holder: &'a str,
    let_go_marker: &'a str,
    blocked: Blocked,
}

/// A finished run of one program under the shim.
struct Recorded {
    source: PathBuf,
    stdout: String,
    report: Value,
}

impl Recorded {
    fn measured(&self, key: &str) -> u64 {
        stdout_value(&self.stdout, key)
            .parse()
            .unwrap_or_else(|e| panic!("{key}: {e}\n{}", self.stdout))
    }

    fn file_name(&self) -> &str {
        self.source.file_name().unwrap().to_str().unwrap()
    }

    fn line(&self, marker: &str) -> u64 {
        line_in(&self.source, &format!("marker: {marker}"))
    }

    fn sites_at(&self, marker: &str) -> Vec<&Value> {
        let line = self.line(marker);
        let p = only_process(&self.report);
        sites(p)
            .iter()
            .filter(|s| s["file"].as_str() == Some(self.file_name()) && s["line"] == line)
            .collect()
    }

    /// Checks one case; returns the ids of the words its waiters waited on.
    fn check(&self, case: &Case) -> Vec<String> {
        let p = only_process(&self.report);
        let what = case.what;
        let waited_at = self.sites_at(case.wait_marker);
        assert!(
            !waited_at.is_empty(),
            "{what}: no site at {}:{} (the waiter's own line): {:#}",
            self.file_name(),
            self.line(case.wait_marker),
            p["sites"]
        );
        let mut words: Vec<String> = waited_at
            .iter()
            .flat_map(|s| arr(s, "locks"))
            .map(|l| l.as_str().unwrap().to_string())
            .collect();
        words.sort();
        words.dedup();
        for id in &words {
            let lock = lock_by_id(p, id);
            assert_eq!(str_of(lock, "kind"), "futex", "{what}: {}", short(lock));
            assert_eq!(
                lock["futex"]["futex_role"], case.role,
                "{what}: role of {id}: {}",
                lock["futex"]
            );
        }
        // The waits at the waiter's line, against what the waiters measured.
        let reported: u64 = waited_at.iter().map(|s| u64_of(s, "wait_ns")).sum();
        let measured: u64 = case.waiters.iter().map(|(_, w)| self.measured(w)).sum();
        within_tenth(reported, measured, &format!("{what}: waits at its line"));
        let contended: u64 = waited_at.iter().map(|s| u64_of(s, "contended")).sum();
        assert_eq!(contended, case.waiters.len() as u64, "{what}: waits");
        // The wake: the holder's line is a site of the words.
        let holder = self.measured(case.holder);
        let let_go = self.sites_at(case.let_go_marker);
        assert!(
            let_go
                .iter()
                .flat_map(|s| arr(s, "locks"))
                .any(|l| words.iter().any(|w| l == w.as_str())),
            "{what}: the line that let go, {}:{}, engages {words:?}: {let_go:#?}",
            self.file_name(),
            self.line(case.let_go_marker)
        );
        // Who blocked whom.
        let blocking = arr(p, "blocking");
        let pair = |waiter: u64| {
            blocking.iter().find(|b| {
                u64_of(b, "blocked_tid") == waiter && words.iter().any(|w| b["lock"] == w.as_str())
            })
        };
        let mut seen = 0;
        for (tid_key, wait_key) in case.waiters {
            let waiter = self.measured(tid_key);
            match (pair(waiter), case.blocked) {
                (Some(b), Blocked::Each | Blocked::Some) => {
                    assert_eq!(u64_of(b, "blocker_tid"), holder, "{what}: {b}");
                    within_tenth(
                        u64_of(b, "wait_ns"),
                        self.measured(wait_key),
                        &format!("{what}: {holder} blocked {waiter}"),
                    );
                    seen += 1;
                }
                (None, Blocked::Each) => {
                    panic!("{what}: no {holder} → {waiter} in blocking: {blocking:#?}")
                }
                (Some(b), Blocked::Nobody) => panic!("{what}: nobody holds it: {b}"),
                (None, _) => {}
            }
        }
        if case.blocked == Blocked::Some {
            assert!(seen > 0, "{what}: no {holder} → waiter: {blocking:#?}");
        }
        if case.blocked != Blocked::Nobody {
            // The holder's long hold, at the line where it let go (its
            // acquisition made no call).
            let at = format!("{}:{}", self.file_name(), self.line(case.let_go_marker));
            let by = format!("by thread {holder} at");
            assert!(
                findings(p).iter().any(|f| {
                    f["kind"] == "long-hold"
                        && arr(f, "locks")
                            .iter()
                            .any(|l| words.iter().any(|w| l == w.as_str()))
                        && str_of(f, "message").contains(&by)
                        && str_of(f, "message").contains(&at)
                }),
                "{what}: a long-hold {by} … {at}: {:#}",
                p["findings"]
            );
        }
        words
    }
}

/// Runs `bin` under the shim (its source `source`) and reports on it.
fn record(bin: &Path, source: PathBuf, tag: &str) -> Recorded {
    let dir = fresh_dir(tag);
    let out = run_under_shim(bin, &[] as &[&str], &dir);
    assert_success(&out, tag);
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    assert!(
        arr(p, "warnings")
            .iter()
            .any(|w| w.as_str().unwrap_or("").contains("futex word")),
        "{tag}: the note on futex words: {}",
        p["warnings"]
    );
    Recorded {
        source,
        stdout: stdout_str(&out),
        report,
    }
}

/// Compiles a one-file Rust program of tests/rust/ with rustc.
fn build_rust(name: &str) -> (PathBuf, PathBuf) {
    let source = workspace_root().join(format!("tests/rust/{name}.rs"));
    let bin = workspace_root().join(format!("target/c-tests/{name}"));
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    let tmp = bin.with_extension(format!("tmp{}", std::process::id()));
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let built = Command::new(rustc)
        .args(["-O", "-g", "--edition", "2021", "-o"])
        .arg(&tmp)
        .arg(&source)
        .status()
        .expect("rustc");
    assert!(built.success(), "rustc {}", source.display());
    std::fs::rename(&tmp, &bin).unwrap();
    (bin, source)
}

#[test]
fn rust_std_mutex_rwlock_and_condvar_are_futex_locks_at_the_programs_lines() {
    let (bin, source) = build_rust("std_futex_locks");
    let run = record(&bin, source, "futex-std");
    assert_eq!(stdout_value(&run.stdout, "mutex_count"), "2");
    assert_eq!(stdout_value(&run.stdout, "rwlock_count"), "2");
    let mutex = run.check(&Case {
        what: "Mutex",
        role: "lock",
        waiters: &[("mutex_waiter_tid", "mutex_wait_ns")],
        wait_marker: "mutex waiter",
        holder: "mutex_holder_tid",
        let_go_marker: "mutex holder unlocks",
        blocked: Blocked::Each,
    });
    assert_eq!(mutex, ["&std_futex_locks::MUTEX.inner"]);
    // A writer's unlock wakes both readers with one FUTEX_WAKE; the report
    // gives the writer → reader pair of one of them only.
    let readers = run.check(&Case {
        what: "RwLock, readers wait",
        role: "lock",
        waiters: &[
            ("rw_reader1_tid", "rw_reader1_wait_ns"),
            ("rw_reader2_tid", "rw_reader2_wait_ns"),
        ],
        wait_marker: "readers wait",
        holder: "rw_writer_tid",
        let_go_marker: "writer unlocks",
        blocked: Blocked::Some,
    });
    // std's RwLock is two words: readers wait on its state, writers on
    // writer_notify; each is an object of the report, named by its field.
    assert_eq!(readers, ["&std_futex_locks::RWLOCK.inner.state"]);
    let writer = run.check(&Case {
        what: "RwLock, a writer waits",
        role: "lock",
        waiters: &[("wr_writer_tid", "wr_writer_wait_ns")],
        wait_marker: "writer waits",
        holder: "wr_reader_tid",
        let_go_marker: "reader unlocks",
        blocked: Blocked::Each,
    });
    assert_eq!(writer, ["&std_futex_locks::RWLOCK.inner.writer_notify"]);
    let condvar = run.check(&Case {
        what: "Condvar",
        role: "signal",
        waiters: &[("condvar_waiter_tid", "condvar_wait_ns")],
        wait_marker: "condvar wait",
        holder: "condvar_notifier_tid",
        let_go_marker: "condvar notify",
        blocked: Blocked::Nobody,
    });
    assert_eq!(condvar, ["&std_futex_locks::CONDVAR"]);
}
