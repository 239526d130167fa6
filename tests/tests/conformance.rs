//! The conformance run of issue 33: the Open POSIX Test Suite's pthread,
//! semaphore and barrier interface tests (kept next to this repository, see
//! `open_posix::suite_dir`) give the same result with and without the
//! shim, but for the known differences listed below with their reasons,
//! and every trace the shim leaves is reportable.
//!
//! Each test that builds (those that do not are listed, not failures) runs
//! once plainly and once under the shim, at the same time, so both see the
//! same machine. A result is the test's exit class (PASS, FAIL, UNRESOLVED,
//! UNSUPPORTED, UNTESTED), another exit status, a signal, or a timeout. A
//! test whose two runs differ runs again with a longer deadline, and only a
//! difference seen again counts: a test that was merely slow or unlucky on
//! a busy machine is not a difference (the summary lists it). Tests that
//! use system-wide names (`sem_open`, `shm_open`), many of them fixed, run
//! one at a time, both ways one after the other.
//!
//! Under `--nocapture` a summary says how many tests gave which results,
//! the differences, and any line the shim wrote into a test's stderr. The
//! tests run under the shim as `run-under-shim.sh` runs a suite, with
//! `LOCKSUIT_QUIET=1`: a line of ours in a test's stderr is a problem
//! (issue 33 item 10), and its warnings are in the report instead.
//!
//! Knobs: `LOCKSUIT_CONFORMANCE_DIR` (the suite), `LOCKSUIT_CONFORMANCE_JOBS`
//! (tests run at once, each both ways; default 6: the tests mostly sleep),
//! `CC` (default gcc, as the suite's README says).

use locksuit_tests::open_posix::*;
use locksuit_tests::*;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

/// A test known to give another result under the shim, and why.
struct Known {
    test: &'static str,
    plain: Outcome,
    shim: Outcome,
    why: &'static str,
}

const KNOWN_DIFFERENCES: &[Known] = &[
    // The shim creates one thread-specific data key at start-up
    // (shim/src/lifecycle.rs, register_process_handlers): its destructor
    // is how the shim learns that a thread ends, after the program's own
    // key destructors. The test creates keys until EAGAIN and expects
    // exactly PTHREAD_KEYS_MAX (1024); under the shim it gets 1023. A shim
    // bug (the program loses one key), not small to fix: thread exit would
    // have to be learnt without a key, still after the program's own
    // destructors.
    Known {
        test: "pthread_key_create/speculative/5-1",
        plain: Outcome::Pass,
        shim: Outcome::Fail,
        why: "the shim takes one of the PTHREAD_KEYS_MAX thread-specific data keys",
    },
];

/// Tests not run, and why.
const NOT_RUN: &[(&str, &str)] = &[
    // 14 s plainly and 27 s under the shim on an idle machine, most of it in
    // the kernel: for each of its scenarios it starts up to 1,000 threads,
    // or forks up to 200 processes, that wait on one condition (~1,000
    // traces). On a busy 2-core machine, run beside the others, it passed
    // neither way within 40 s and slowed every other test. Needs
    // `testfrmw/`.
    (
        "pthread_cond_broadcast/1-2",
        "CPU-heavy fork stress: over 40 s both ways on a busy machine",
    ),
];

/// Deadline for each run. The slowest test run takes 14 s (it sleeps);
/// one that hangs by design costs this much.
const FIRST_DEADLINE: Duration = Duration::from_secs(40);
/// Deadline when a test whose runs differed runs again.
const RERUN_DEADLINE: Duration = Duration::from_secs(120);
/// Deadline for `locksuit report` on one trace.
const REPORT_DEADLINE: Duration = Duration::from_secs(60);

/// One run of a test, plainly and under the shim.
struct Attempt {
    plain: Outcome,
    shim: Outcome,
    plain_time: Duration,
    shim_time: Duration,
    /// Lines of the shim's own (`locksuit: …`) in the test's stderr.
    shim_stderr: Vec<String>,
    traces: usize,
    /// Traces `locksuit report --format json` failed on, and how.
    bad_traces: Vec<String>,
}

/// What one test gave: its first attempt and, if that differed, a rerun.
struct TestResult {
    name: String,
    first: Attempt,
    rerun: Option<Attempt>,
    dir: PathBuf,
}

impl TestResult {
    fn last(&self) -> &Attempt {
        self.rerun.as_ref().unwrap_or(&self.first)
    }

    /// The same result both ways (or the known difference) and every run
    /// under the shim left only reportable traces: nothing to look at.
    fn clean(&self) -> bool {
        let last = self.last();
        let agrees = last.plain == last.shim
            || known(&self.name).is_some_and(|k| (k.plain, k.shim) == (last.plain, last.shim));
        let traces_fine = std::iter::once(&self.first)
            .chain(&self.rerun)
            .all(|a| a.traces > 0 && a.bad_traces.is_empty());
        agrees && traces_fine
    }
}

fn known(name: &str) -> Option<&'static Known> {
    KNOWN_DIFFERENCES.iter().find(|k| k.test == name)
}

/// Runs `bin` in `dir` (its stdout, stderr and, under the shim, its traces).
fn run_side(bin: &Path, dir: &Path, shim: Option<&Path>, deadline: Duration) -> DeadlineRun {
    fs::create_dir_all(dir).expect("create a run directory");
    let mut cmd = Command::new(bin);
    cmd.current_dir(dir)
        .env_remove("LD_PRELOAD")
        .env_remove("LOCKSUIT_DIR");
    if let Some(shim) = shim {
        cmd.env("LD_PRELOAD", shim)
            .env("LOCKSUIT_DIR", dir)
            .env("LOCKSUIT_QUIET", "1");
    }
    run_with_deadline(cmd, &dir.join("stdout"), &dir.join("stderr"), deadline)
}

/// `locksuit report TRACE --format json` exits 0 with a locksuit report.
fn check_trace(trace: &Path) -> Result<(), String> {
    let json = trace.with_extension("json");
    let err = trace.with_extension("report-stderr");
    let mut cmd = Command::new(locksuit_path());
    cmd.arg("report")
        .arg(trace)
        .args(["--format", "json"])
        .env_remove("LD_PRELOAD")
        .env_remove("LOCKSUIT_DIR");
    let run = run_with_deadline(cmd, &json, &err, REPORT_DEADLINE);
    let stderr = fs::read_to_string(&err).unwrap_or_default();
    let name = trace.file_name().unwrap_or_default().to_string_lossy();
    match run.status {
        None => {
            return Err(format!(
                "{name}: report still running after {REPORT_DEADLINE:?}"
            ))
        }
        Some(s) if !s.success() => return Err(format!("{name}: report {s}: {}", stderr.trim())),
        Some(_) => {}
    }
    let text = fs::read(&json).unwrap_or_default();
    let report: Value =
        serde_json::from_slice(&text).map_err(|e| format!("{name}: report is not JSON: {e}"))?;
    if report["schema"].as_str() != Some("locksuit.report/3") {
        return Err(format!("{name}: report schema {}", report["schema"]));
    }
    // Kept only if something is wrong: a run leaves up to a thousand traces.
    let _ = fs::remove_file(&json);
    let _ = fs::remove_file(&err);
    Ok(())
}

/// Runs `bin` both ways in `dir`, at the same time unless `one_by_one`.
fn attempt(bin: &Path, dir: &Path, deadline: Duration, one_by_one: bool) -> Attempt {
    let shim_path = shim_path();
    let (plain_dir, shim_dir) = (dir.join("plain"), dir.join("shim"));
    let (plain, shim) = if one_by_one {
        let plain = run_side(bin, &plain_dir, None, deadline);
        (plain, run_side(bin, &shim_dir, Some(&shim_path), deadline))
    } else {
        thread::scope(|s| {
            let plain = s.spawn(|| run_side(bin, &plain_dir, None, deadline));
            let shim = run_side(bin, &shim_dir, Some(&shim_path), deadline);
            (plain.join().expect("plain run"), shim)
        })
    };
    let stderr_of = |d: &Path| fs::read_to_string(d.join("stderr")).unwrap_or_default();
    let plain_stderr = stderr_of(&plain_dir);
    let shim_stderr = stderr_of(&shim_dir)
        .lines()
        .filter(|l| l.starts_with("locksuit: ") && !plain_stderr.contains(*l))
        .map(str::to_string)
        .collect();
    let traces = traces_in(&shim_dir);
    let bad_traces = traces.iter().filter_map(|t| check_trace(t).err()).collect();
    Attempt {
        plain: Outcome::of(plain.status),
        shim: Outcome::of(shim.status),
        plain_time: plain.elapsed,
        shim_time: shim.elapsed,
        shim_stderr,
        traces: traces.len(),
        bad_traces,
    }
}

/// Runs one test, again if its runs differed (and not as known).
fn run_test(test: &SuiteTest, bin: &Path, root: &Path, one_by_one: bool) -> TestResult {
    let dir = root.join(test.bin_name());
    let first = attempt(bin, &dir.join("1"), FIRST_DEADLINE, one_by_one);
    let as_known =
        known(&test.name).is_some_and(|k| (k.plain, k.shim) == (first.plain, first.shim));
    let rerun = (first.plain != first.shim && !as_known)
        .then(|| attempt(bin, &dir.join("2"), RERUN_DEADLINE, one_by_one));
    let result = TestResult {
        name: test.name.clone(),
        first,
        rerun,
        dir,
    };
    // At once: the traces of a whole run take up to hundreds of MB.
    if result.clean() {
        let _ = fs::remove_dir_all(&result.dir);
    }
    result
}

/// How long each test took last time (`target/conformance/durations.tsv`),
/// so the slowest start first and do not make the tail.
fn durations_file() -> PathBuf {
    workspace_root().join("target/conformance/durations.tsv")
}

fn load_durations() -> HashMap<String, f64> {
    fs::read_to_string(durations_file())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (name, secs) = l.split_once('\t')?;
            Some((name.to_string(), secs.parse().ok()?))
        })
        .collect()
}

fn save_durations(results: &[TestResult]) {
    let text: String = results
        .iter()
        .map(|r| {
            let a = &r.first;
            format!(
                "{}\t{:.2}\n",
                r.name,
                a.plain_time.max(a.shim_time).as_secs_f64()
            )
        })
        .collect();
    let path = durations_file();
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    if fs::write(&tmp, text).is_ok() {
        let _ = fs::rename(&tmp, &path);
    }
}

/// Holds an exclusive lock on a file shared by every checkout on this
/// machine, while tests that use fixed system-wide names run: two
/// conformance runs at once (two checkouts) would otherwise collide.
fn lock_named_objects() -> fs::File {
    let path = std::env::temp_dir().join("locksuit-conformance-named-objects.lock");
    let file = fs::File::create(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    // SAFETY: flock(2) on a descriptor we own; released when it is closed.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(r, 0, "flock {}", path.display());
    file
}

/// Runs every built test: those with system-wide names one at a time, both
/// ways one after the other; the rest `jobs` at a time, slowest first.
fn run_all(built: &[(SuiteTest, PathBuf)], root: &Path, jobs: usize) -> Vec<TestResult> {
    let durations = load_durations();
    let (named, mut free): (Vec<_>, Vec<_>) =
        built.iter().partition(|(t, _)| t.uses_named_objects());
    free.sort_by(|(a, _), (b, _)| {
        let d = |t: &SuiteTest| durations.get(&t.name).copied().unwrap_or(f64::MAX);
        d(b).total_cmp(&d(a))
    });
    let results = Mutex::new(Vec::new());
    let next = AtomicUsize::new(0);
    thread::scope(|s| {
        s.spawn(|| {
            let _lock = lock_named_objects();
            for (t, bin) in &named {
                let r = run_test(t, bin, root, true);
                results.lock().unwrap().push(r);
            }
        });
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((t, bin)) = free.get(i) else { break };
                let r = run_test(t, bin, root, false);
                results.lock().unwrap().push(r);
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by(|a, b| a.name.cmp(&b.name));
    results
}

fn secs(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64())
}

#[test]
fn open_posix_tests_behave_the_same_under_the_shim() {
    let Some(suite) = suite_dir() else { return };
    let started = Instant::now();
    let all_tests = suite_tests(&suite);
    assert!(
        !all_tests.is_empty(),
        "no tests found in {}",
        suite.display()
    );
    let (not_run, tests): (Vec<SuiteTest>, Vec<SuiteTest>) = all_tests
        .into_iter()
        .partition(|t| NOT_RUN.iter().any(|(name, _)| *name == t.name));
    let cores = thread::available_parallelism().map_or(2, |n| n.get());
    let built = build_suite(&suite, &tests, cores.clamp(1, 4));
    let build_time = started.elapsed();
    assert!(
        !built.built.is_empty(),
        "not one test of {} built; the first error: {:?}",
        suite.display(),
        built.failed.first()
    );
    let jobs = std::env::var("LOCKSUIT_CONFORMANCE_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(6);
    let root = fresh_dir("conformance");
    let results = run_all(&built.built, &root, jobs);
    let run_time = started.elapsed() - build_time;
    save_durations(&results);

    let mut problems = Vec::new();
    let mut counts: BTreeMap<(Outcome, Outcome), Vec<&str>> = BTreeMap::new();
    let mut once = Vec::new();
    let mut stderr_notes = Vec::new();
    let mut traces = 0;
    for r in &results {
        let last = r.last();
        counts
            .entry((last.plain, last.shim))
            .or_default()
            .push(&r.name);
        let k = known(&r.name);
        let as_known = k.is_some_and(|k| (k.plain, k.shim) == (last.plain, last.shim));
        if last.plain != last.shim && !as_known {
            problems.push(format!(
                "{}: {} without the shim, {} with it (twice; first run {} / {}); see {}",
                r.name,
                last.plain,
                last.shim,
                r.first.plain,
                r.first.shim,
                r.dir.display()
            ));
        } else if let Some(k) = k.filter(|_| last.plain == last.shim && r.rerun.is_none()) {
            problems.push(format!(
                "{}: listed as a known difference ({} / {}: {}) but gave {} both ways: \
                 take it off KNOWN_DIFFERENCES",
                r.name, k.plain, k.shim, k.why, last.plain
            ));
        } else if r.rerun.is_some() && last.plain == last.shim {
            once.push(format!(
                "{}: {} / {} at first, {} both ways when run again",
                r.name, r.first.plain, r.first.shim, last.plain
            ));
        }
        for a in std::iter::once(&r.first).chain(&r.rerun) {
            traces += a.traces;
            if a.traces == 0 {
                problems.push(format!("{}: the run under the shim left no trace", r.name));
            }
            for bad in &a.bad_traces {
                problems.push(format!("{}: unreportable trace {bad}", r.name));
            }
            for line in &a.shim_stderr {
                stderr_notes.push(format!("{}: {line}", r.name));
                problems.push(format!("{}: the shim wrote on stderr: {line}", r.name));
            }
        }
    }
    stderr_notes.dedup();

    println!(
        "Open POSIX Test Suite at {}: {} tests, {} not run, {} built, {} did not build",
        suite.display(),
        tests.len() + not_run.len(),
        not_run.len(),
        built.built.len(),
        built.failed.len()
    );
    for t in &not_run {
        let why = NOT_RUN
            .iter()
            .find(|(name, _)| *name == t.name)
            .map(|(_, why)| why);
        println!("  not run: {}: {}", t.name, why.unwrap_or(&""));
    }
    for (t, why) in &built.failed {
        println!("  did not build: {}: {why}", t.name);
    }
    println!("\n  {:<12} {:<12} {:>5}", "plain", "shim", "tests");
    for ((plain, shim), names) in &counts {
        let which = if plain == shim {
            String::new()
        } else {
            format!("  {}", names.join(", "))
        };
        let (plain, shim) = (plain.to_string(), shim.to_string());
        println!("  {plain:<12} {shim:<12} {:>5}{which}", names.len());
    }
    println!("\nKnown differences:");
    for k in KNOWN_DIFFERENCES {
        let seen = results.iter().any(|r| r.name == k.test);
        let state = if seen { "" } else { " (did not build here)" };
        println!("  {}: {} / {}: {}{state}", k.test, k.plain, k.shim, k.why);
    }
    println!("\nDiffered once, the same when run again ({}):", once.len());
    once.iter().for_each(|l| println!("  {l}"));
    println!(
        "\nThe shim's own lines in a test's stderr, quiet as it was ({}):",
        stderr_notes.len()
    );
    stderr_notes.iter().for_each(|l| println!("  {l}"));
    let mut slowest: Vec<&TestResult> = results.iter().collect();
    slowest.sort_by_key(|r| std::cmp::Reverse(r.first.plain_time.max(r.first.shim_time)));
    println!("\nSlowest (seconds plain / under the shim):");
    for r in slowest.iter().take(8) {
        println!(
            "  {}: {} / {}",
            r.name,
            secs(r.first.plain_time),
            secs(r.first.shim_time)
        );
    }
    println!(
        "\n{traces} traces, each reported. Build {} s, runs {} s ({jobs} tests at a time), total {} s.",
        secs(build_time),
        secs(run_time),
        secs(started.elapsed())
    );
    println!("\nProblems ({}):", problems.len());
    problems.iter().for_each(|p| println!("  {p}"));
    assert!(
        problems.is_empty(),
        "{} problem(s) in the conformance run:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
