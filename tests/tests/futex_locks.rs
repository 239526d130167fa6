//! Locks that never call pthread, seen through their futex waits (issue
//! 36): real programs with Rust std's locks (tests/rust/std_futex_locks.rs),
//! parking_lot's (tests/rust/parking_lot_locks/) and abseil's
//! (tests/cxx/absl_locks.cc). In each, a holder keeps a lock until its
//! waiter is seen blocked in futex(2) and then some more, and every waiter
//! times its own wait; the report must name the lock as a `futex` word of
//! the right role, the waiter's own source line, the wait within 10 % of
//! what the program measured, and who blocked whom. A futex deadlock is
//! in futex_deadlock.rs.

use locksuit_tests::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A reported futex wait against the program's two measures of it: at
/// least the time the holder held on once it saw the waiter blocked in
/// futex(2), at most the waiter's own time in the lock call, each ±10 %.
/// On an idle machine the two are alike; on a busy one the waiter's also
/// has the library's spinning and yielding before its futex call (7
/// sched_yield calls in parking_lot's SpinWait), which makes no call the
/// shim sees as a wait.
fn within_measures(reported: u64, held: u64, waited: u64, what: &str) {
    let ms = |ns: u64| ns as f64 / 1e6;
    assert!(
        reported >= held - held / 10 && reported <= waited + waited / 10,
        "{what}: {:.2} ms reported; the holder held on {:.2} ms after it saw the \
         waiter blocked, the waiter measured {:.2} ms (from the first -10 % to the \
         second +10 % allowed)",
        ms(reported),
        ms(held),
        ms(waited)
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
    /// Key of how long the holder held on after it saw its waiters blocked.
    held: &'a str,
    /// Key of the holder's (or notifier's) tid, and the marker of the line
    /// where it let go (or notified): the wake.
    holder: &'a str,
    let_go_marker: &'a str,
    blocked: Blocked,
}

/// A finished run of one program under the shim.
struct Recorded {
    source: PathBuf,
    /// Whether the waits are expected at the waiter's own line.
    own_wait_lines: bool,
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

    /// The ids of the locks the sites at `marker`'s line engaged.
    fn words_at(&self, marker: &str) -> Vec<String> {
        let mut words: Vec<String> = self
            .sites_at(marker)
            .iter()
            .flat_map(|s| arr(s, "locks"))
            .map(|l| l.as_str().unwrap().to_string())
            .collect();
        words.sort();
        words.dedup();
        words
    }

    /// Checks one case; returns the ids of the words its waiters waited on
    /// (those the holder's line woke).
    fn check(&self, case: &Case) -> Vec<String> {
        let p = only_process(&self.report);
        let what = case.what;
        let holder = self.measured(case.holder);
        let words = self.words_at(case.let_go_marker);
        assert!(
            !words.is_empty(),
            "{what}: no site at {}:{} (where the holder let go): {:#}",
            self.file_name(),
            self.line(case.let_go_marker),
            p["sites"]
        );
        let locks: Vec<&Value> = words.iter().map(|id| lock_by_id(p, id)).collect();
        for lock in &locks {
            assert_eq!(str_of(lock, "kind"), "futex", "{what}: {}", short(lock));
            assert_eq!(
                lock["futex_role"], case.role,
                "{what}: role of {}: {}",
                lock["id"], lock["futex_library"]
            );
        }
        // Their waits, against what the program measured.
        let waited: u64 = case.waiters.iter().map(|(_, w)| self.measured(w)).sum();
        let n = case.waiters.len() as u64;
        let held_each = self.measured(case.held);
        let held = n * held_each;
        let reported: u64 = locks.iter().map(|l| u64_of(l, "wait_ns")).sum();
        within_measures(reported, held, waited, &format!("{what}: waits"));
        let contended: u64 = locks.iter().map(|l| u64_of(l, "contended")).sum();
        assert_eq!(contended, n, "{what}: waits");
        // Each at the waiter's own line. Waits there may be on more words
        // than the holder woke: abseil's readers, woken, may wait again
        // and be woken by each other.
        if self.own_wait_lines {
            let waited_at = self.sites_at(case.wait_marker);
            let waited_words = self.words_at(case.wait_marker);
            assert!(
                words.iter().all(|w| waited_words.contains(w)),
                "{what}: the words the holder woke, {words:?}, are not all waited on at {}:{} (the waiter's own line), {waited_words:?}: {:#}",
                self.file_name(),
                self.line(case.wait_marker),
                p["sites"]
            );
            let reported: u64 = waited_at.iter().map(|s| u64_of(s, "wait_ns")).sum();
            within_measures(
                reported,
                held,
                waited,
                &format!("{what}: waits at its line"),
            );
        }
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
                    within_measures(
                        u64_of(b, "wait_ns"),
                        held_each,
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
            // acquisition made no call). A finding over a family names
            // only its longest hold: when the family reaches past this
            // case's words (abseil's: every waiter's semaphore is made at
            // one line of abseil), that may be another case's.
            let at = format!("{}:{}", self.file_name(), self.line(case.let_go_marker));
            let by = format!("by thread {holder}, which let it go at");
            let covers = |f: &&Value| {
                f["kind"] == "long-hold"
                    && arr(f, "locks")
                        .iter()
                        .any(|l| words.iter().any(|w| l == w.as_str()))
            };
            let hold = findings(p).iter().find(covers).unwrap_or_else(|| {
                panic!("{what}: no long-hold over {words:?}: {:#}", p["findings"])
            });
            let own = arr(hold, "locks")
                .iter()
                .all(|l| words.iter().any(|w| l == w.as_str()));
            if own {
                let message = str_of(hold, "message");
                assert!(
                    message.contains(&by) && message.contains(&at),
                    "{what}: a long-hold {by} … {at}: {message}"
                );
                // A waiting thread's own parker word is held by nobody.
                for w in &words {
                    assert!(
                        !(w.starts_with("parker(") && message.contains(&format!("{w} was held"))),
                        "{what}: a parker word is not what was held: {message}"
                    );
                }
            }
        }
        words
    }
}

/// Runs `bin` under the shim (its source `source`) and reports on it.
fn record(bin: &Path, source: PathBuf, tag: &str) -> Recorded {
    let dir = fresh_dir(tag);
    let out = run_under_shim(bin, &[] as &[&str], &dir);
    assert_success(&out, tag);
    // The shim changes nothing the program does: its exit status, stderr
    // and the lines it prints (their figures are times) are a plain run's.
    assert_same_output_keys(&run_plain(bin, &[] as &[&str]), &out);
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
        own_wait_lines: true,
        stdout: stdout_str(&out),
        report,
    }
}

/// The four cases of the programs (each prints the same lines): the words each waited on, in the order Mutex, RwLock with
/// readers waiting, RwLock with a writer waiting, Condvar.
fn cases(run: &Recorded, readers_blocked: Blocked) -> [Vec<String>; 4] {
    let case = |what, role, waiters, wait_marker, held, holder, let_go_marker, blocked| {
        run.check(&Case {
            what,
            role,
            waiters,
            wait_marker,
            held,
            holder,
            let_go_marker,
            blocked,
        })
    };
    let readers = [
        ("rw_reader1_tid", "rw_reader1_wait_ns"),
        ("rw_reader2_tid", "rw_reader2_wait_ns"),
    ];
    [
        case(
            "Mutex",
            "lock",
            &[("mutex_waiter_tid", "mutex_waiter_wait_ns")],
            "mutex waiter",
            "mutex_held_ns",
            "mutex_holder_tid",
            "mutex holder unlocks",
            Blocked::Each,
        ),
        case(
            "RwLock, readers wait",
            "lock",
            &readers,
            "readers wait",
            "rw_held_ns",
            "rw_writer_tid",
            "writer unlocks",
            readers_blocked,
        ),
        case(
            "RwLock, a writer waits",
            "lock",
            &[("wr_writer_tid", "wr_writer_wait_ns")],
            "writer waits",
            "wr_held_ns",
            "wr_reader_tid",
            "reader unlocks",
            Blocked::Each,
        ),
        case(
            "Condvar",
            "signal",
            &[("condvar_waiter_tid", "condvar_waiter_wait_ns")],
            "condvar wait",
            "condvar_held_ns",
            "condvar_notifier_tid",
            "condvar notify",
            Blocked::Nobody,
        ),
    ]
}

#[test]
fn rust_std_mutex_rwlock_and_condvar_are_futex_locks_at_the_programs_lines() {
    let (bin, source) = build_rust("std_futex_locks");
    let run = record(&bin, source, "futex-std");
    assert_eq!(stdout_value(&run.stdout, "mutex_count"), "2");
    assert_eq!(stdout_value(&run.stdout, "rwlock_count"), "2");
    // A writer's unlock wakes both readers with one FUTEX_WAKE on the
    // lock's state word; the report gives the writer → reader pair of one
    // of them only.
    let [mutex, readers, writer, condvar] = cases(&run, Blocked::Some);
    // Each a word of the program's own statics, named by the static the
    // program wrote, not by std's private fields; std's RwLock is two
    // words: readers and writers wait on its state (named as the RwLock),
    // a writer waits for the readers to go on its writer_notify (named so
    // after the RwLock). The whole path is `futex_path`.
    assert_eq!(mutex, ["&std_futex_locks::MUTEX"]);
    assert_eq!(readers, ["&std_futex_locks::RWLOCK"]);
    assert_eq!(writer, ["&std_futex_locks::RWLOCK/writer_notify"]);
    assert_eq!(condvar, ["&std_futex_locks::CONDVAR"]);
    let p = only_process(&run.report);
    let path = |id: &str| str_of(lock_by_id(p, id), "futex_path").to_string();
    assert_eq!(
        path("&std_futex_locks::MUTEX"),
        "std_futex_locks::MUTEX.inner"
    );
    assert_eq!(
        path("&std_futex_locks::RWLOCK"),
        "std_futex_locks::RWLOCK.inner.state"
    );
    assert_eq!(
        path("&std_futex_locks::RWLOCK/writer_notify"),
        "std_futex_locks::RWLOCK.inner.writer_notify"
    );
    // The main thread's own parker (`thread::scope` waits on it for the
    // scope's threads) is no lock of the program: named as a parker, for
    // the line that first parked on it.
    let scope_line = run.line("scope parks");
    let parker = format!("parker(std_futex_locks::mutex_phase@std_futex_locks.rs:{scope_line})");
    let lock = lock_by_id(p, &parker);
    assert_eq!(lock["futex_per_thread"], true, "{}", short(lock));
    assert_eq!(lock["futex_role"], "signal", "{}", short(lock));
}

/// Every per-thread word (a waiting thread's own, which the library parks
/// it on) is named as that thread's parker, for the line of its first
/// wait, never as a lock of the program.
fn parkers_are_named_so(run: &Recorded, words: &[Vec<String>; 4]) {
    let p = only_process(&run.report);
    for id in words.iter().flatten() {
        let lock = lock_by_id(p, id);
        assert_eq!(lock["futex_per_thread"], true, "{}", short(lock));
        assert!(
            id.starts_with("parker(") && id.contains(&format!("{}:", run.file_name())),
            "{id}: named as a parker, for its line"
        );
    }
}

/// Builds tests/rust/parking_lot_locks (offline from the registry cache
/// first) into target/parking_lot_locks.
fn build_parking_lot() -> (PathBuf, PathBuf) {
    let project = workspace_root().join("tests/rust/parking_lot_locks");
    let target = workspace_root().join("target/parking_lot_locks");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let build = |offline: bool| {
        let mut cmd = Command::new(&cargo);
        cmd.current_dir(&project)
            .args(["build", "--release", "--locked", "--target-dir"])
            .arg(&target);
        if offline {
            cmd.arg("--offline");
        }
        run_captured(cmd)
    };
    let out = build(true);
    let out = if out.status.success() {
        out
    } else {
        build(false)
    };
    assert_success(&out, "cargo build of tests/rust/parking_lot_locks");
    (
        target.join("release/parking_lot_locks"),
        project.join("src/main.rs"),
    )
}

#[test]
fn parking_lot_waits_are_futex_words_of_each_waiting_thread() {
    let (bin, source) = build_parking_lot();
    let run = record(&bin, source, "futex-parking-lot");
    assert_eq!(stdout_value(&run.stdout, "mutex_count"), "2");
    assert_eq!(stdout_value(&run.stdout, "rwlock_count"), "2");
    // parking_lot parks a waiter on its own thread's word, which the
    // unlocker wakes alone: every waiter's pair is there.
    let words = cases(&run, Blocked::Each);
    // No word is the lock's own: one per waiting thread, each named by the
    // line of its first wait.
    for (ws, waiters) in words.iter().zip([1, 2, 1, 1]) {
        assert_eq!(ws.len(), waiters, "a word per waiting thread: {ws:?}");
    }
    let p = only_process(&run.report);
    let all: Vec<&String> = words.iter().flatten().collect();
    let mut addresses: Vec<&str> = all
        .iter()
        .map(|id| str_of(lock_by_id(p, id), "address"))
        .collect();
    addresses.sort();
    addresses.dedup();
    assert_eq!(addresses.len(), 5, "five parker words: {all:?}");
    parkers_are_named_so(&run, &words);
}

/// Builds tests/cxx/absl_locks.cc against Debian's libabsl-dev (once for
/// the tests of this file), or says why not and gives None.
fn build_absl() -> Option<(PathBuf, PathBuf)> {
    static BUILT: std::sync::OnceLock<Option<(PathBuf, PathBuf)>> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_absl_now).clone()
}

fn build_absl_now() -> Option<(PathBuf, PathBuf)> {
    if !Path::new("/usr/include/absl/synchronization/mutex.h").is_file() {
        eprintln!("skipped: abseil's headers are missing (apt-get install libabsl-dev)");
        return None;
    }
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "absl_synchronization"])
        .output()
        .ok()
        .filter(|o| o.status.success());
    let Some(flags) = flags else {
        eprintln!("skipped: pkg-config knows no absl_synchronization");
        return None;
    };
    let source = workspace_root().join("tests/cxx/absl_locks.cc");
    let bin = workspace_root().join("target/c-tests/absl_locks");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    let tmp = bin.with_extension(format!("tmp{}", std::process::id()));
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let out = run_captured({
        let mut cmd = Command::new(cxx);
        cmd.args(["-O1", "-g", "-std=c++17", "-o"])
            .arg(&tmp)
            .arg(&source)
            .args(String::from_utf8_lossy(&flags.stdout).split_whitespace())
            .arg("-lpthread");
        cmd
    });
    assert_success(&out, "g++ absl_locks.cc");
    std::fs::rename(&tmp, &bin).unwrap();
    Some((bin, source))
}

#[test]
fn abseil_mutex_and_condvar_are_futex_words_woken_at_the_programs_lines() {
    let Some((bin, source)) = build_absl() else {
        return;
    };
    let run = record(&bin, source, "futex-absl");
    assert_eq!(stdout_value(&run.stdout, "mutex_count"), "1");
    // Each waiter parks on its own thread's semaphore word, woken alone by
    // the holder's unlock: found by the holder's line, every pair there,
    // and the waits at the waiter's own line (past abseil's frames, named
    // or not).
    let words = cases(&run, Blocked::Each);
    for (ws, waiters) in words.iter().zip([1, 2, 1, 1]) {
        assert_eq!(ws.len(), waiters, "a word per waiting thread: {ws:?}");
    }
    parkers_are_named_so(&run, &words);
}
