//! CPython's threading.Lock and queue.Queue are POSIX semaphores underneath
//! (CPython <= 3.12, `Python/thread_pthread.h` with USE_SEMAPHORES): the
//! trace shows them as `sem` locks with exact counts where CPython's code
//! fixes them.
//!
//! What CPython 3.11 does, and so what the counts must be:
//! - `Lock.acquire()` (`acquire_timed` in `Modules/_threadmodule.c`) first
//!   calls `sem_trywait`; only if that fails (EAGAIN) it calls `sem_wait`
//!   (no timeout). Exactly one of them succeeds per acquire, so a `with
//!   lock:` block is exactly one acquisition. `Lock.release()` is exactly
//!   one `sem_post`. Whether the first `sem_trywait` fails depends on GIL
//!   scheduling, so try failures are not exact.
//! - `Lock.acquire(False)` is one `sem_trywait`.
//! - `queue.Queue` (pure Python, `Lib/queue.py`) guards everything with one
//!   Lock `mutex` and three Conditions on it. `put()` is `with not_full:` +
//!   `not_empty.notify()`; `get()` is `with not_empty:` (+ `not_empty.wait()`
//!   while empty) + `not_full.notify()`. `Condition.notify()` and `.wait()`
//!   first call `_is_owned()`, which for a plain Lock is
//!   `lock.acquire(False)` — a `sem_trywait` that fails because the caller
//!   holds the mutex. `wait()` releases the mutex (`sem_post`), blocks on a
//!   fresh waiter Lock that `notify()` releases, and re-acquires the mutex.

use locksuit_tests::*;
use std::path::PathBuf;
use std::process::Command;

const WORKERS: u64 = 3;
const N: u64 = 1000;
const ITEMS: u64 = 500;

/// The real interpreter behind `python3` (pyenv shims are bash scripts) and
/// its (major, minor) version, or None without python3.
fn python() -> Option<(PathBuf, (u32, u32))> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys; print(sys.executable); print(sys.version_info[0], sys.version_info[1])",
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let exe = PathBuf::from(lines.next()?.trim());
    let mut v = lines.next()?.split_whitespace().map(|x| x.parse::<u32>());
    let version = (v.next()?.ok()?, v.next()?.ok()?);
    exe.is_file().then_some((exe, version))
}

fn per_thread_counts(lock: &Value) -> Vec<u64> {
    let mut v: Vec<u64> = arr(lock, "engagements_by_thread")
        .iter()
        .map(|t| u64_of(t, "count"))
        .filter(|&c| c > 0)
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn python_lock_and_queue() {
    let Some((python, version)) = python() else {
        eprintln!("SKIPPED python_lock_and_queue: `python3` is not on PATH");
        return;
    };
    if version > (3, 13) {
        // Seen as a POSIX semaphore up to 3.13; later versions not checked.
        eprintln!(
            "SKIPPED python_lock_and_queue: Python {}.{}'s threading.Lock is not a POSIX semaphore",
            version.0, version.1
        );
        return;
    }
    let script = c_dir().join("py_queue.py");
    let args = [script.as_os_str()];

    let plain = run_plain(&python, &args);
    assert_success(&plain, "py_queue.py without the shim");
    let expected = format!(
        "workers {WORKERS}\nn {N}\nitems {ITEMS}\ncounter {}\nconsumed {ITEMS}\ntotal {}\n",
        WORKERS * N,
        (0..ITEMS).map(|i| 7 * i).sum::<u64>()
    );
    assert_eq!(stdout_str(&plain), expected, "plain run output");

    let dir = fresh_dir("python_queue");
    let shim = run_under_shim(&python, &args, &dir);
    assert_same_output(&plain, &shim);

    assert!(!traces_in(&dir).is_empty(), "python left a trace");
    // Every trace in the directory (the interpreter may start helpers).
    let report = report_json(&[&dir], None);
    let p = only_python_process(&report);
    assert_eq!(p["complete"], Value::Bool(true));
    let sems: Vec<&Value> = locks(p).iter().filter(|l| l["kind"] == "sem").collect();
    let describe_sems = |ls: &[&Value]| -> Vec<String> {
        ls.iter()
            .map(|l| {
                format!(
                    "{} acq {} posts {} threads {} try_failures {}",
                    id_of(l),
                    l["acquisitions"],
                    l["posts"],
                    l["threads"],
                    l["try_failures"]
                )
            })
            .filter(|s| !s.contains("acq 0 posts 0"))
            .collect()
    };

    // --- the Lock: WORKERS threads x N `with lock:` -------------------------
    // Nothing else in the process comes near WORKERS * N acquisitions (the
    // queue's mutex has at most 3 * (ITEMS + 1)).
    let big: Vec<&Value> = sems
        .iter()
        .copied()
        .filter(|l| u64_of(l, "acquisitions") >= WORKERS * N)
        .collect();
    assert_eq!(
        big.len(),
        1,
        "exactly one sem with >= {} acquisitions (the threading.Lock); sems: {:?}",
        WORKERS * N,
        describe_sems(&sems)
    );
    let lock = big[0];
    assert_eq!(
        u64_of(lock, "acquisitions"),
        WORKERS * N,
        "one successful sem_trywait or sem_wait per acquire: {}",
        short(lock)
    );
    assert_eq!(
        u64_of(lock, "posts"),
        WORKERS * N,
        "one sem_post per release: {}",
        short(lock)
    );
    assert_eq!(u64_of(lock, "threads"), WORKERS, "{}", short(lock));
    assert_eq!(
        per_thread_counts(lock),
        vec![2 * N; WORKERS as usize],
        "each worker: N waits + N posts"
    );
    assert_eq!(u64_of(lock, "timeouts"), 0);
    assert_eq!(
        str_of(lock, "origin"),
        "init",
        "PyThread_allocate_lock calls sem_init"
    );
    assert!(
        findings_taken_alone(p, id_of(lock)).is_empty(),
        "a Lock of {WORKERS} threads is no unnecessary-lock"
    );

    // --- the queue's mutex: producer and consumer ----------------------------
    let puts = ITEMS + 1; // the items and the None sentinel
    let qm: Vec<&Value> = sems
        .iter()
        .copied()
        .filter(|l| u64_of(l, "threads") == 2 && u64_of(l, "acquisitions") >= 2 * puts)
        .collect();
    assert_eq!(
        qm.len(),
        1,
        "exactly one sem of two threads with >= {} acquisitions (the queue's mutex); sems: {:?}",
        2 * puts,
        describe_sems(&sems)
    );
    let qm = qm[0];
    let acq = u64_of(qm, "acquisitions");
    // puts + gets, plus one re-acquisition per not_empty.wait() (W).
    let waits = acq - 2 * puts;
    assert!(waits <= puts, "at most one wait per get: {}", short(qm));
    assert_eq!(
        u64_of(qm, "posts"),
        acq,
        "every acquire of the mutex is released: {}",
        short(qm)
    );
    // Producer: one acquire + one release per put, never waits.
    // Consumer: the same per get, plus one release + one re-acquire per wait.
    assert_eq!(
        per_thread_counts(qm),
        {
            let mut v = vec![2 * puts, 2 * puts + 2 * waits];
            v.sort_unstable();
            v
        },
        "queue mutex engagements_by_thread: {}",
        short(qm)
    );
    // Every notify() (one per put, one per get) and every wait() probes the
    // held mutex with acquire(False): a failed sem_trywait each. A blocking
    // acquire whose first sem_trywait fails adds more, depending on the GIL.
    let tf = u64_of(qm, "try_failures");
    assert!(
        tf >= 2 * puts + waits,
        "try_failures {tf} < {} (notify/wait ownership probes): {}",
        2 * puts + waits,
        short(qm)
    );
    assert!(
        findings_taken_alone(p, id_of(qm)).is_empty(),
        "the queue's mutex is shared"
    );

    // Semaphores posted in one thread and waited on in another exist (the
    // queue's mutex at least).
    let shared_posted = sems
        .iter()
        .filter(|l| u64_of(l, "posts") > 0 && u64_of(l, "threads") >= 2)
        .count();
    assert!(
        shared_posted >= 2,
        "the Lock and the queue's mutex at least"
    );
}
