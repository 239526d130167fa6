//! Every pthread primitive, and real programs unchanged under the shim:
//! child programs started with posix_spawn and with vfork()+execv(), locks
//! inside a dlopen()ed library that is unloaded before exit, cancelled
//! waits, a thread that ends holding a mutex, signals interrupting waits
//! and handlers that lock, threads never joined, and PTHREAD_PROCESS_SHARED
//! locks used by two processes.
//!
//! Past 600 lines: each file under tests/tests is its own test binary,
//! linked apart; one subject stays in one file rather than pay another link.

use locksuit_tests::*;
use std::path::{Path, PathBuf};
use std::process::Output;

// ---------------------------------------------------------------------------
// Helpers of this file
// ---------------------------------------------------------------------------

/// stdout lines with the run-dependent ones left out: lines whose key (the
/// first word) is in `volatile` (pids) and lines whose value is an address.
fn stable_lines(out: &Output, volatile: &[&str]) -> Vec<String> {
    stdout_str(out)
        .lines()
        .filter(|l| {
            let key = l.split(' ').next().unwrap_or("");
            !volatile.contains(&key) && !l.contains(" 0x")
        })
        .map(str::to_string)
        .collect()
}

/// The program behaves the same with and without the shim: same exit
/// status, same stdout (apart from pids and addresses), and nothing on
/// stderr in either run.
fn assert_unchanged(plain: &Output, shim: &Output, volatile: &[&str], what: &str) {
    assert_eq!(
        shim.status.code(),
        plain.status.code(),
        "{what}: same exit status with and without the shim\nplain: {}\nshim: {}",
        describe(plain),
        describe(shim)
    );
    assert!(
        shim.status.code().is_some(),
        "{what}: the program must exit, not die of a signal\n{}",
        describe(shim)
    );
    assert_eq!(
        stable_lines(shim, volatile),
        stable_lines(plain, volatile),
        "{what}: same stdout with and without the shim\nplain: {}\nshim: {}",
        describe(plain),
        describe(shim)
    );
    assert!(
        plain.stderr.is_empty() && shim.stderr.is_empty(),
        "{what}: nothing on stderr\nplain: {}\nshim: {}",
        describe(plain),
        describe(shim)
    );
}

fn pid_value(stdout: &str, key: &str) -> u64 {
    stdout_value(stdout, key)
        .parse()
        .unwrap_or_else(|e| panic!("`{key}` is not a pid in:\n{stdout}\n{e}"))
}

/// Acquisitions of the lock at `addr`, 0 if the process has no such lock.
fn acquisitions_at(p: &Value, addr: &str) -> u64 {
    locks_at(p, addr)
        .iter()
        .map(|l| u64_of(l, "acquisitions"))
        .sum()
}

/// Sum of `acquisitions` over every lock of a process.
fn total_acquisitions(p: &Value) -> u64 {
    locks(p).iter().map(|l| u64_of(l, "acquisitions")).sum()
}

/// The one site that engaged `lock`.
fn only_site_of<'a>(p: &'a Value, lock: &Value) -> &'a Value {
    let s = sites_of_lock(p, id_of(lock));
    assert_eq!(
        s.len(),
        1,
        "exactly one site engaged {}: {:?}",
        short(lock),
        s.iter().map(|s| site_where(s)).collect::<Vec<_>>()
    );
    s[0]
}

fn assert_site_at(site: &Value, function: &str, file: &str, line: u64, what: &str) {
    assert!(
        site_is_at(site, function, file, line),
        "{what}: the site must be {function} {file}:{line}, got {}\n{}",
        site_where(site),
        short(site)
    );
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

// ---------------------------------------------------------------------------
// 1. posix_spawn and vfork()+execv()
// ---------------------------------------------------------------------------

const PARENT_BEFORE: u64 = 120;
const PARENT_AFTER: u64 = 80;
const SPAWN_USES: u64 = 45;
const VFORK_USES: u64 = 65;

/// Runs `spawn_parent <mode> <spawn_child>` with and without the shim and
/// checks both processes' traces.
fn check_spawned_child(mode: &str, tag: &str, child_uses: u64) {
    let parent_bin = build_c("spawn_parent");
    let child_bin = build_c("spawn_child");
    let args = [mode.as_ref(), child_bin.as_os_str()];

    let plain = run_plain(&parent_bin, &args);
    assert_success(&plain, &format!("spawn_parent {mode} without the shim"));
    let dir = fresh_dir(&format!("lifecycle_{mode}"));
    let out = run_under_shim(&parent_bin, &args, &dir);
    let pid_keys = ["pid", "child", &format!("{tag}-pid") as &str];
    assert_unchanged(&plain, &out, &pid_keys, &format!("spawn_parent {mode}"));
    assert_success(&out, &format!("spawn_parent {mode} under the shim"));

    let stdout = stdout_str(&out);
    let parent_pid = pid_value(&stdout, "pid");
    let child_pid = pid_value(&stdout, "child");
    assert_eq!(
        pid_value(&stdout, &format!("{tag}-pid")),
        child_pid,
        "the child program printed its own pid"
    );
    assert_eq!(
        stdout_value(&stdout, "parent-uses"),
        (PARENT_BEFORE + PARENT_AFTER).to_string()
    );
    assert_eq!(
        stdout_value(&stdout, &format!("{tag}-uses")),
        child_uses.to_string()
    );

    // One trace per process, each under its own executable's name.
    let traces = traces_in(&dir);
    assert_eq!(
        traces.len(),
        2,
        "a trace for the parent and one for the child: {traces:?}"
    );
    let parent_trace = trace_named(&dir, "spawn_parent", parent_pid);
    let child_trace = trace_named(&dir, "spawn_child", child_pid);

    // The parent: only its own lock, with every acquisition before and after.
    let report = report_json(&[&parent_trace], None);
    let parent = only_process(&report);
    assert_eq!(parent["pid"].as_u64(), Some(parent_pid));
    assert_eq!(
        parent["complete"],
        Value::Bool(true),
        "{mode}: parent complete: {}",
        short(parent)
    );
    assert_eq!(
        parent["ended_by"].as_str(),
        Some("exit"),
        "{mode}: starting a child program does not end the parent's trace: {}",
        short(parent)
    );
    assert_eq!(
        u64_of(parent, "dropped_events"),
        0,
        "{mode}: parent dropped nothing"
    );
    let parent_lock = lock_by_address(parent, &stdout_value(&stdout, "parent_lock"));
    assert_eq!(
        u64_of(parent_lock, "acquisitions"),
        PARENT_BEFORE + PARENT_AFTER,
        "{mode}: the parent's {PARENT_BEFORE} acquisitions before starting the child and \
         {PARENT_AFTER} after it ended: {}",
        short(parent_lock)
    );
    assert_eq!(u64_of(parent_lock, "threads"), 1);
    assert_eq!(
        locks(parent).len(),
        1,
        "{mode}: the parent's trace holds only the parent's lock, none of the child's: {}",
        short(&parent["locks"])
    );
    assert_eq!(
        total_acquisitions(parent),
        PARENT_BEFORE + PARENT_AFTER,
        "{mode}: no acquisition of the child counted in the parent"
    );
    assert_site_at(
        only_site_of(parent, parent_lock),
        "parent_work",
        "spawn_parent.c",
        line_of("spawn_parent.c", "@parent-lock"),
        mode,
    );

    // The child program: its own trace, its own exact count.
    let report = report_json(&[&child_trace], None);
    let child = only_process(&report);
    assert_eq!(child["pid"].as_u64(), Some(child_pid));
    assert_eq!(
        child["ppid"].as_u64(),
        Some(parent_pid),
        "{mode}: the child's parent: {}",
        short(child)
    );
    assert!(
        str_of(child, "exe").ends_with("/spawn_child"),
        "{mode}: the child trace is spawn_child's: {}",
        child["exe"]
    );
    assert_eq!(child["complete"], Value::Bool(true));
    assert_eq!(child["ended_by"].as_str(), Some("exit"));
    let child_lock = lock_by_address(child, &stdout_value(&stdout, &format!("{tag}-lock")));
    assert_eq!(
        u64_of(child_lock, "acquisitions"),
        child_uses,
        "{mode}: the child's lock: {}",
        short(child_lock)
    );
    assert_eq!(
        locks(child).len(),
        1,
        "{mode}: the child's trace holds only the child's lock: {}",
        short(&child["locks"])
    );
    assert_site_at(
        only_site_of(child, child_lock),
        "main",
        "spawn_child.c",
        line_of("spawn_child.c", "@child-lock"),
        mode,
    );
}

#[test]
fn posix_spawn_child_has_its_own_trace() {
    check_spawned_child("spawn", "spawned", SPAWN_USES);
}

#[test]
fn vfork_execv_child_has_its_own_trace() {
    check_spawned_child("vfork", "vforked", VFORK_USES);
}

// ---------------------------------------------------------------------------
// 2. dlopen / dlclose
// ---------------------------------------------------------------------------

const DL_N: u64 = 37;
const DL_M: u64 = 23;

fn dl_main() -> PathBuf {
    build_c_with(&c_dir().join("dl_main.c"), "dl_main", &["-ldl"], &[])
}

/// The innermost frame of a site's call chain.
fn innermost_frame(site: &Value) -> &Value {
    let chain = arr(site, "call_chain");
    assert!(!chain.is_empty(), "empty call chain: {}", short(site));
    &chain[0]
}

/// The lock at `addr` was engaged `n` times by one site in `function`
/// (`file`:`line`) whose innermost frame is in the library `lib`.
fn check_library_lock(
    p: &Value,
    addr: &str,
    n: u64,
    lib: &Path,
    function: &str,
    file: &str,
    line: u64,
) {
    let lock = lock_by_address(p, addr);
    assert_eq!(
        u64_of(lock, "acquisitions"),
        n,
        "the library's lock: {}",
        short(lock)
    );
    assert_eq!(u64_of(lock, "threads"), 1);
    let site = only_site_of(p, lock);
    assert_site_at(
        site,
        function,
        file,
        line,
        &format!("lock taken in {} (unloaded before exit)", lib.display()),
    );
    assert!(
        site["path"]
            .as_str()
            .is_some_and(|p| p.ends_with(&format!("tests/c/{file}"))),
        "the site's full source path: {}",
        short(site)
    );
    let frame = innermost_frame(site);
    assert_eq!(
        frame["function"].as_str(),
        Some(function),
        "innermost frame: {}",
        short(frame)
    );
    assert_eq!(
        frame["module"].as_str().map(|m| canonical(Path::new(m))),
        Some(canonical(lib)),
        "the innermost frame is in the library: {}",
        short(frame)
    );
}

#[test]
fn dlopen_dlclose_library_lock_is_symbolized() {
    let lib = build_c_shared("dl_lib");
    let bin = dl_main();
    let args = ["one".as_ref(), lib.as_os_str()];
    let plain = run_plain(&bin, &args);
    assert_success(&plain, "dl_main one without the shim");
    let dir = fresh_dir("lifecycle_dlopen");
    let out = run_under_shim(&bin, &args, &dir);
    assert_unchanged(&plain, &out, &["pid"], "dl_main one");
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "uses1"), DL_N.to_string());
    assert_eq!(
        stdout_value(&stdout, "unloaded1"),
        "1",
        "test premise: dlclose unmapped the library before exit"
    );

    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    assert_eq!(p["pid"].as_u64(), Some(pid_value(&stdout, "pid")));
    assert_eq!(p["complete"], Value::Bool(true));
    check_library_lock(
        p,
        &stdout_value(&stdout, "lock1"),
        DL_N,
        &lib,
        "dl_lib_take",
        "dl_lib.c",
        line_of("dl_lib.c", "@dl-lib-lock"),
    );
}

/// After the first library is unloaded, a second one with a different code
/// layout is loaded (usually at the same address): each lock's site is
/// symbolized from its own library.
#[test]
fn dlopen_second_library_at_same_address_is_symbolized() {
    second_library_at_same_address("full");
}

/// The same in lean mode, whose quick path keys a call by lock and return
/// address: a line learned before the `dlclose` must not be taken for the
/// second library's (issue 37).
#[test]
fn dlopen_second_library_at_same_address_in_lean_mode() {
    second_library_at_same_address("lean");
}

fn second_library_at_same_address(recording: &str) {
    let lib1 = build_c_shared("dl_lib");
    let lib2 = build_c_shared("dl_lib2");
    let bin = dl_main();
    let args = ["swap".as_ref(), lib1.as_os_str(), lib2.as_os_str()];
    let plain = run_plain(&bin, &args);
    assert_success(&plain, "dl_main swap without the shim");
    let dir = fresh_dir(&format!("lifecycle_dlopen_swap_{recording}"));
    let out = run_under_shim_env(&bin, &args, &dir, &[("LOCKSUIT_MODE", recording)]);
    assert_unchanged(&plain, &out, &["pid"], "dl_main swap");
    let stdout = stdout_str(&out);
    for i in ["1", "2"] {
        assert_eq!(
            stdout_value(&stdout, &format!("unloaded{i}")),
            "1",
            "test premise: library {i} was unmapped by dlclose"
        );
    }
    // The interesting case is the same base address; report it if not.
    let same_base = stdout_value(&stdout, "base1") == stdout_value(&stdout, "base2");
    eprintln!("dl_main swap: second library at the first one's address: {same_base}");

    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    check_library_lock(
        p,
        &stdout_value(&stdout, "lock1"),
        DL_N,
        &lib1,
        "dl_lib_take",
        "dl_lib.c",
        line_of("dl_lib.c", "@dl-lib-lock"),
    );
    check_library_lock(
        p,
        &stdout_value(&stdout, "lock2"),
        DL_M,
        &lib2,
        "take_in_lib2",
        "dl_lib2.c",
        line_of("dl_lib2.c", "@dl-lib2-lock"),
    );
}

// ---------------------------------------------------------------------------
// 3. Cancellation, and a thread that ends holding a mutex
// ---------------------------------------------------------------------------

const CANCEL_W: u64 = 25;

fn run_cancel() -> (Output, Value) {
    let bin = build_c("cancel");
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(&plain, "cancel without the shim");
    let dir = fresh_dir("lifecycle_cancel");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_unchanged(&plain, &out, &["pid"], "cancel");
    let stdout = stdout_str(&out);
    for (key, want) in [
        ("cond-joined", "canceled"),
        ("cv-relock", "0"),
        ("sem-joined", "canceled"),
        ("sem-trywait", "0"),
        ("held-trylock", "EBUSY"),
    ] {
        assert_eq!(stdout_value(&stdout, key), want, "{key} under the shim");
    }
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report).clone();
    assert_eq!(p["pid"].as_u64(), Some(pid_value(&stdout, "pid")));
    (out, p)
}

/// A thread cancelled in pthread_cond_wait (its cleanup handler unlocks the
/// mutex), one cancelled in sem_wait, and one that returns holding a
/// normal mutex: the program runs as without the shim and every count
/// that does not depend on the cancellation itself is exact.
#[test]
fn cancelled_waits_and_thread_ending_with_lock_held() {
    let (out, p) = run_cancel();
    let stdout = stdout_str(&out);
    assert_eq!(p["complete"], Value::Bool(true), "{}", short(&p));
    assert_eq!(p["ended_by"].as_str(), Some("exit"));
    assert_eq!(u64_of(&p, "dropped_events"), 0);

    // Both cancelled threads did their work before waiting.
    let work = lock_by_address(&p, &stdout_value(&stdout, "work_lock"));
    assert_eq!(
        u64_of(work, "acquisitions"),
        2 * CANCEL_W,
        "work_lock: {CANCEL_W} by each cancelled thread: {}",
        short(work)
    );
    let counts: Vec<u64> = arr(work, "engagements_by_thread")
        .iter()
        .map(|e| u64_of(e, "count"))
        .collect();
    assert_eq!(counts, vec![CANCEL_W, CANCEL_W], "{}", short(work));

    // The semaphore: the cancelled sem_wait took nothing; main's post and
    // trywait afterwards are one post and one acquisition.
    let sem = lock_by_address(&p, &stdout_value(&stdout, "sem"));
    assert_eq!(str_of(sem, "kind"), "sem");
    assert_eq!(
        u64_of(sem, "acquisitions"),
        1,
        "only main's sem_trywait acquired the semaphore: {}",
        short(sem)
    );
    assert_eq!(u64_of(sem, "posts"), 1, "{}", short(sem));
    assert_eq!(u64_of(sem, "timeouts"), 0, "{}", short(sem));
    assert_eq!(u64_of(sem, "contended"), 0, "{}", short(sem));
    assert_eq!(sem["destroyed"], Value::Bool(true));

    // The thread that returned holding held_lock, and main's failed trylock.
    let held = lock_by_address(&p, &stdout_value(&stdout, "held_lock"));
    assert_eq!(str_of(held, "mutex_type"), "normal");
    assert_eq!(
        u64_of(held, "acquisitions"),
        1,
        "held_lock: the holder's one lock: {}",
        short(held)
    );
    assert_eq!(
        u64_of(held, "try_failures"),
        1,
        "held_lock: main's EBUSY trylock: {}",
        short(held)
    );
    assert_eq!(u64_of(held, "contended"), 0);

    // cv_lock: main's acquisitions after the cancel were recorded.
    let cv_lock = lock_by_address(&p, &stdout_value(&stdout, "cv_lock"));
    let main_tid = arr(&p, "threads")
        .iter()
        .find(|t| t["main"] == Value::Bool(true))
        .map(|t| u64_of(t, "tid"))
        .expect("a main thread");
    let main_count: u64 = arr(cv_lock, "engagements_by_thread")
        .iter()
        .filter(|e| e["tid"].as_u64() == Some(main_tid))
        .map(|e| u64_of(e, "count"))
        .sum();
    assert_eq!(
        main_count,
        2,
        "cv_lock: main locked it once while the waiter waited and once after the cancel: {}",
        short(cv_lock)
    );
    assert!(
        u64_of(cv_lock, "acquisitions") >= 3,
        "cv_lock: waiter 1 + main 2 at least: {}",
        short(cv_lock)
    );

    // The three workers ended (cancelled or returned) before the process.
    let workers: Vec<&Value> = arr(&p, "threads")
        .iter()
        .filter(|t| t["main"] == Value::Bool(false))
        .collect();
    assert_eq!(
        workers.len(),
        3,
        "three worker threads: {}",
        short(&p["threads"])
    );
    for w in workers {
        assert_eq!(w["ended"], Value::Bool(true), "worker ended: {}", short(w));
    }
}

/// POSIX: a thread cancelled in pthread_cond_wait re-acquires the mutex
/// before its cleanup handlers run (here the handler then unlocks it). The
/// report counts cond-wait re-acquisitions as acquisitions, so cv_lock was
/// acquired 4 times: the waiter's lock, the re-acquisition on cancellation,
/// and main's two.
#[test]
fn cancelled_cond_wait_reacquisition_is_counted() {
    let (out, p) = run_cancel();
    let stdout = stdout_str(&out);
    let cv_lock = lock_by_address(&p, &stdout_value(&stdout, "cv_lock"));
    assert_eq!(
        u64_of(cv_lock, "acquisitions"),
        4,
        "cv_lock: waiter's lock + re-acquisition when the wait was cancelled + main's 2: {}",
        short(cv_lock)
    );
    assert_eq!(
        u64_of(cv_lock, "cond_reacquires"),
        1,
        "the cancelled wait ended with a re-acquisition: {}",
        short(cv_lock)
    );
}

// ---------------------------------------------------------------------------
// 4. Signals
// ---------------------------------------------------------------------------

const SIG_K: u64 = 9;

fn run_signals(mode: &str) -> (Output, Value) {
    let bin = build_c("signals");
    let plain = run_plain(&bin, &[mode]);
    assert_success(&plain, &format!("signals {mode} without the shim"));
    let dir = fresh_dir(&format!("lifecycle_signals_{mode}"));
    let out = run_under_shim(&bin, &[mode], &dir);
    // The shim may say once on stderr that it dropped something; the
    // program itself prints nothing there.
    assert_eq!(
        out.status.code(),
        Some(0),
        "signals {mode} under the shim (SIGALRM = the watchdog: it hung)\n{}",
        describe(&out)
    );
    let mut shim_clean = out.clone();
    shim_clean.stderr = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.starts_with("locksuit: "))
        .collect::<Vec<_>>()
        .join("\n")
        .into_bytes();
    assert_unchanged(&plain, &shim_clean, &["pid"], &format!("signals {mode}"));
    let stdout = stdout_str(&out);
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report).clone();
    assert_eq!(p["pid"].as_u64(), Some(pid_value(&stdout, "pid")));
    assert_eq!(p["complete"], Value::Bool(true));
    (out, p)
}

/// SIGUSR1 without SA_RESTART interrupts sem_wait and sem_timedwait: both
/// return -1/EINTR under the shim too, and nothing was acquired.
#[test]
fn signal_interrupts_sem_wait_with_eintr() {
    let (out, p) = run_signals("sem-eintr");
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "sem_wait"), "-1 EINTR");
    assert_eq!(stdout_value(&stdout, "sem_timedwait"), "-1 EINTR");
    assert_eq!(stdout_value(&stdout, "handler-runs"), "2");
    assert!(out.stderr.is_empty(), "{}", describe(&out));
    let sem = lock_by_address(&p, &stdout_value(&stdout, "sem"));
    assert_eq!(u64_of(sem, "acquisitions"), 0, "{}", short(sem));
    assert_eq!(
        u64_of(sem, "timeouts"),
        0,
        "EINTR is no timeout: {}",
        short(sem)
    );
    assert_eq!(u64_of(sem, "try_failures"), 0, "{}", short(sem));
    assert_eq!(u64_of(sem, "posts"), 0, "{}", short(sem));
}

/// A handler that locks a different mutex K times runs while main is
/// blocked in a contended pthread_mutex_lock: no deadlock, same output,
/// and the contended lock's counts are exact.
#[test]
fn signal_handler_locks_while_main_blocked_in_mutex_lock() {
    let (out, p) = run_signals("in-lock");
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "lock"), "0");
    assert_eq!(stdout_value(&stdout, "handler-locks"), SIG_K.to_string());
    let busy = lock_by_address(&p, &stdout_value(&stdout, "busy"));
    assert_eq!(
        u64_of(busy, "acquisitions"),
        2,
        "busy: the holder's and main's: {}",
        short(busy)
    );
    assert_eq!(
        u64_of(busy, "contended"),
        1,
        "main waited for busy: {}",
        short(busy)
    );
    assert_eq!(u64_of(busy, "threads"), 2);
}

/// The same handler runs while main waits on a condition variable.
#[test]
fn signal_handler_locks_while_main_in_cond_wait() {
    let (out, p) = run_signals("in-condwait");
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "cond_wait"), "0");
    assert_eq!(stdout_value(&stdout, "handler-locks"), SIG_K.to_string());
    let waits: u64 = stdout_value(&stdout, "cond-waits").parse().unwrap();
    let cv_lock = lock_by_address(&p, &stdout_value(&stdout, "cv_lock"));
    assert_eq!(
        u64_of(cv_lock, "acquisitions"),
        2 + waits,
        "cv_lock: main's lock, the notifier's, and one re-acquisition per wait ({waits}): {}",
        short(cv_lock)
    );
    assert_eq!(
        u64_of(cv_lock, "cond_reacquires"),
        waits,
        "{}",
        short(cv_lock)
    );
    let cond = conds(&p)
        .into_iter()
        .find(|c| c["waits"].as_u64().is_some_and(|w| w > 0))
        .unwrap_or_else(|| panic!("a cond with waits: {}", short(&p["conds"])));
    assert_eq!(u64_of(cond, "waits"), waits, "{}", short(cond));
    assert_eq!(u64_of(cond, "signals"), 1, "{}", short(cond));
}

/// The K acquisitions made inside the signal handler happened (the program
/// counted them). The shim must either record them or count them as
/// dropped (with a warning in the report); it may not lose them silently.
#[test]
fn signal_handler_locks_are_recorded_or_counted_as_dropped() {
    let mut lost = Vec::new();
    for mode in ["in-lock", "in-condwait"] {
        let (out, p) = run_signals(mode);
        let stdout = stdout_str(&out);
        assert_eq!(stdout_value(&stdout, "handler-locks"), SIG_K.to_string());
        let recorded = acquisitions_at(&p, &stdout_value(&stdout, "sig_lock"));
        if recorded == SIG_K {
            continue;
        }
        let dropped = u64_of(&p, "dropped_events");
        if dropped < SIG_K - recorded || arr(&p, "warnings").is_empty() {
            lost.push(format!(
                "{mode}: the handler locked sig_lock {SIG_K} times while main was inside a \
                 hooked call; the report shows {recorded} acquisitions of it, dropped_events \
                 {dropped}, warnings {}, shim stderr {:?}; locks: {}",
                p["warnings"],
                String::from_utf8_lossy(&out.stderr),
                short(&p["locks"])
            ));
        }
    }
    assert!(
        lost.is_empty(),
        "acquisitions neither recorded nor counted as dropped:\n{}",
        lost.join("\n")
    );
}

// ---------------------------------------------------------------------------
// 5. Threads never joined
// ---------------------------------------------------------------------------

const UJ_T: u64 = 4;
const UJ_N: u64 = 150;

fn run_unjoined(mode: &str) -> (Output, Value) {
    let bin = build_c("unjoined");
    let plain = run_plain(&bin, &[mode]);
    assert_success(&plain, &format!("unjoined {mode} without the shim"));
    let dir = fresh_dir(&format!("lifecycle_unjoined_{mode}"));
    let out = run_under_shim(&bin, &[mode], &dir);
    assert_unchanged(&plain, &out, &["pid"], &format!("unjoined {mode}"));
    assert_success(&out, &format!("unjoined {mode} under the shim"));
    let stdout = stdout_str(&out);
    assert_eq!(
        stdout_value(&stdout, "work-uses"),
        (UJ_T * UJ_N).to_string()
    );
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report).clone();
    assert_eq!(p["pid"].as_u64(), Some(pid_value(&stdout, "pid")));
    (out, p)
}

fn check_unjoined(mode: &str) {
    let (out, p) = run_unjoined(mode);
    let stdout = stdout_str(&out);
    assert_eq!(p["complete"], Value::Bool(true), "{mode}: {}", short(&p));
    assert_eq!(p["ended_by"].as_str(), Some("exit"));
    if mode == "exit" {
        assert_eq!(p["exit_code"].as_i64(), Some(0), "exit(0)");
    } else {
        assert!(
            p["exit_code"].is_null() || p["exit_code"].as_i64() == Some(0),
            "exit_code null or 0: {}",
            p["exit_code"]
        );
    }
    assert_eq!(u64_of(&p, "dropped_events"), 0);

    let work = lock_by_address(&p, &stdout_value(&stdout, "work_lock"));
    assert_eq!(
        u64_of(work, "acquisitions"),
        UJ_T * UJ_N + 1,
        "{mode}: {UJ_T} workers x {UJ_N}, plus main's one: {}",
        short(work)
    );
    let mut counts: Vec<u64> = arr(work, "engagements_by_thread")
        .iter()
        .map(|e| u64_of(e, "count"))
        .collect();
    counts.sort();
    assert_eq!(counts, vec![1, UJ_N, UJ_N, UJ_N, UJ_N], "{}", short(work));

    let held = lock_by_address(&p, &stdout_value(&stdout, "held_lock"));
    assert_eq!(
        u64_of(held, "acquisitions"),
        1,
        "{mode}: held_lock was taken once; the blocked thread never got it: {}",
        short(held)
    );
    let never = lock_by_address(&p, &stdout_value(&stdout, "never"));
    assert_eq!(u64_of(never, "acquisitions"), 0, "{}", short(never));
    assert_eq!(u64_of(never, "posts"), 0, "{}", short(never));
    let progress = lock_by_address(&p, &stdout_value(&stdout, "progress"));
    assert_eq!(
        u64_of(progress, "acquisitions"),
        UJ_T + 1,
        "{}",
        short(progress)
    );
    assert_eq!(u64_of(progress, "posts"), UJ_T + 1, "{}", short(progress));

    // Six threads besides main, all still running (blocked) at exit.
    let others: Vec<&Value> = arr(&p, "threads")
        .iter()
        .filter(|t| t["main"] == Value::Bool(false))
        .collect();
    assert_eq!(
        others.len(),
        UJ_T as usize + 2,
        "{mode}: workers, holder, blocked: {}",
        short(&p["threads"])
    );
    for t in others {
        assert_eq!(
            t["ended"],
            Value::Bool(false),
            "{mode}: the thread was still blocked when the process exited: {}",
            short(t)
        );
    }
}

#[test]
fn unjoined_threads_main_returns() {
    check_unjoined("return");
}

#[test]
fn unjoined_threads_main_calls_exit() {
    check_unjoined("exit");
}

/// A thread's `acquisitions` counts what it acquired; a sem_post is an
/// engagement but not an acquisition (docs/report-schema.md, LOCK), so the
/// per-thread numbers add up to the per-lock ones.
#[test]
fn thread_acquisitions_match_lock_acquisitions() {
    let (_out, p) = run_unjoined("return");
    let threads = arr(&p, "threads");
    let by_thread: u64 = threads.iter().map(|t| u64_of(t, "acquisitions")).sum();
    let mut per: Vec<u64> = threads.iter().map(|t| u64_of(t, "acquisitions")).collect();
    per.sort();
    // blocked 0, holder 1 (held_lock), workers UJ_N each, main T+1 sem waits + 1 lock.
    let mut want = vec![0, 1, UJ_N, UJ_N, UJ_N, UJ_N, UJ_T + 2];
    want.sort();
    assert_eq!(
        per,
        want,
        "per-thread acquisitions (sem_post calls are not acquisitions): {}",
        short(&p["threads"])
    );
    assert_eq!(by_thread, total_acquisitions(&p), "threads and locks agree");
}

// ---------------------------------------------------------------------------
// 6. PTHREAD_PROCESS_SHARED locks in shared memory, used across fork
// ---------------------------------------------------------------------------

const PS_P: u64 = 140;
const PS_C: u64 = 90;
const PS_PR: u64 = 60;
const PS_CW: u64 = 30;
const PS_SEM: u64 = 17;

#[test]
fn process_shared_locks_across_fork() {
    let bin = build_c("pshared");
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(&plain, "pshared without the shim");
    let dir = fresh_dir("lifecycle_pshared");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_unchanged(&plain, &out, &["parent", "child"], "pshared");
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "child-status"), "0");
    assert_eq!(stdout_value(&stdout, "counter"), (PS_P + PS_C).to_string());
    let parent_pid = pid_value(&stdout, "parent");
    let child_pid = pid_value(&stdout, "child");
    let mutex = stdout_value(&stdout, "mutex");
    let rwlock = stdout_value(&stdout, "rwlock");
    let sem = stdout_value(&stdout, "sem");

    assert_eq!(traces_in(&dir).len(), 2, "{:?}", traces_in(&dir));
    let report = report_json(&[&dir], None);
    let parent = process_by_pid(&report, parent_pid);
    let child = process_by_pid(&report, child_pid);
    assert_eq!(parent["fork_child"], Value::Bool(false));
    assert_eq!(child["fork_child"], Value::Bool(true));

    for (who, p, mutex_n) in [("parent", parent, PS_P), ("child", child, PS_C)] {
        assert_eq!(p["complete"], Value::Bool(true), "{who}: {}", short(p));
        assert_eq!(
            arr(p, "threads").len(),
            1,
            "{who} is single-threaded: {}",
            short(&p["threads"])
        );
        let m = lock_by_address(p, &mutex);
        assert_eq!(str_of(m, "kind"), "mutex");
        assert_eq!(
            u64_of(m, "acquisitions"),
            mutex_n,
            "{who}: its own acquisitions of the shared mutex: {}",
            short(m)
        );
        for addr in [&mutex, &rwlock, &sem] {
            let l = lock_by_address(p, addr);
            assert_eq!(
                l["process_shared"],
                Value::Bool(true),
                "{who}: the lock at {addr} is process-shared: {}",
                short(l)
            );
            assert!(
                findings_taken_alone(p, id_of(l)).is_empty(),
                "{who}: a process-shared lock is never unnecessary: {}",
                short(&p["findings"])
            );
        }
    }

    // rwlock: the parent read-locks, the child write-locks.
    let prw = lock_by_address(parent, &rwlock);
    assert_eq!(u64_of(prw, "acquisitions"), PS_PR, "{}", short(prw));
    assert_eq!(
        u64_of(&prw["read"], "acquisitions"),
        PS_PR,
        "{}",
        short(prw)
    );
    assert_eq!(u64_of(&prw["write"], "acquisitions"), 0, "{}", short(prw));
    let crw = lock_by_address(child, &rwlock);
    assert_eq!(u64_of(crw, "acquisitions"), PS_CW, "{}", short(crw));
    assert_eq!(
        u64_of(&crw["write"], "acquisitions"),
        PS_CW,
        "{}",
        short(crw)
    );
    assert_eq!(u64_of(&crw["read"], "acquisitions"), 0, "{}", short(crw));

    // Semaphore: the parent posts, the child waits.
    let psem = lock_by_address(parent, &sem);
    assert_eq!(u64_of(psem, "posts"), PS_SEM, "{}", short(psem));
    assert_eq!(u64_of(psem, "acquisitions"), 0, "{}", short(psem));
    let csem = lock_by_address(child, &sem);
    assert_eq!(u64_of(csem, "acquisitions"), PS_SEM, "{}", short(csem));
    assert_eq!(u64_of(csem, "posts"), 0, "{}", short(csem));

    // Each side only has these three locks.
    assert_eq!(locks(parent).len(), 3, "{}", short(&parent["locks"]));
    assert_eq!(locks(child).len(), 3, "{}", short(&child["locks"]));
}
