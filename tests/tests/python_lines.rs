//! Python programs at their own `.py` lines: a worker thread waiting on a
//! `threading` primitive is reported at the line of the program that
//! waited (not inside CPython's C code), with the waits the program
//! measured itself, and a `time.sleep` under a held lock is
//! `blocking-under-lock` at the `.py` line of the sleep.
//!
//! `tests/python/primitives.py KIND` is the program: a holder sleeps
//! 0.1 s holding a Lock, RLock, Condition or Semaphore (or before setting
//! an Event or filling a Queue) while workers wait for it, and prints each
//! wait it measured with `time.perf_counter_ns`. Lines are found by their
//! `# marker:` comments.
//!
//! Run under every CPython 3.11 or later the machine has (pyenv's, and
//! Debian's `/usr/bin/python3`); one missing is skipped, saying so.

use locksuit_tests::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const KINDS: &[&str] = &["lock", "rlock", "condition", "semaphore", "event", "queue"];
const WAITS: usize = 6; // ROUNDS x WORKERS in primitives.py
const WORKERS: usize = 2;

fn script() -> PathBuf {
    workspace_root().join("tests/python/primitives.py")
}

/// The interpreter's (major, minor), or None if it does not run.
fn version(python: &Path) -> Option<(u32, u32)> {
    let out = Command::new(python)
        .args(["-c", "import sys; print(*sys.version_info[:2])"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut v = text.split_whitespace().map(|x| x.parse::<u32>());
    Some((v.next()?.ok()?, v.next()?.ok()?))
}

/// Every CPython the test can find: pyenv's 3.11, 3.12, 3.13, and
/// `/usr/bin/python3`, each with its version.
fn interpreters() -> Vec<(PathBuf, (u32, u32))> {
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")))
        .unwrap_or_else(|| PathBuf::from("/root/.pyenv"));
    let mut found = Vec::new();
    for minor in [11, 12, 13] {
        let versions = std::fs::read_dir(pyenv.join("versions"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("3.{minor}."))
            })
            .map(|e| e.path().join(format!("bin/python3.{minor}")))
            .find(|p| p.is_file());
        match versions {
            Some(p) => found.push(p),
            None => eprintln!(
                "SKIPPED python 3.{minor} from pyenv: not installed under {}",
                pyenv.display()
            ),
        }
    }
    let debian = PathBuf::from("/usr/bin/python3");
    if debian.exists() {
        found.push(debian);
    } else {
        eprintln!("SKIPPED /usr/bin/python3: not installed");
    }
    found
        .into_iter()
        .filter_map(|p| match version(&p) {
            Some(v) if v >= (3, 11) => Some((p, v)),
            Some(v) => {
                eprintln!(
                    "SKIPPED {}: Python {}.{} is older than 3.11",
                    p.display(),
                    v.0,
                    v.1
                );
                None
            }
            None => {
                eprintln!("SKIPPED {}: does not run", p.display());
                None
            }
        })
        .collect()
}

fn measured_waits(out: &std::process::Output) -> Vec<u64> {
    stdout_str(out)
        .lines()
        .filter_map(|l| l.strip_prefix("wait "))
        .map(|n| n.trim().parse().expect("a wait in ns"))
        .collect()
}

/// The report's site at `primitives.py:line`, if any.
fn site_at(p: &Value, line: u64) -> Option<&Value> {
    sites(p)
        .iter()
        .find(|s| s["file"] == "primitives.py" && s["line"].as_u64() == Some(line))
}

fn names_line(site_id: &str, line: u64) -> bool {
    let at = format!("primitives.py:{line}");
    site_id.ends_with(&at) || site_id.contains(&format!("{at}#"))
}

fn check(python: &Path, (major, minor): (u32, u32), kind: &str) {
    let what = format!("{kind} under Python {major}.{minor} ({})", python.display());
    let script = script();
    let dir = fresh_dir(&format!("python_lines_{minor}_{kind}"));
    let out = run_under_shim(python, &[script.as_os_str(), kind.as_ref()], &dir);
    assert_success(&out, &what);
    // Exit status, stderr and the printed lines' names are a plain run's.
    let plain = run_plain(python, &[script.as_os_str(), kind.as_ref()]);
    assert_same_output_keys(&plain, &out);
    let waits = measured_waits(&out);
    assert_eq!(waits.len(), WAITS, "{what}: the program's waits");
    let measured: u64 = waits.iter().sum();

    let report = report_json(&[&dir], None);
    let p = only_python_process(&report);
    let marker = match kind {
        "event" | "queue" | "semaphore" => format!("# marker: wait-{kind}"),
        _ => "# marker: wait-held".to_string(),
    };
    let wait_line = line_in(&script, &marker);
    let site = site_at(p, wait_line).unwrap_or_else(|| {
        panic!(
            "{what}: no site at primitives.py:{wait_line}; sites: {:?}",
            sites(p).iter().map(id_of).collect::<Vec<_>>()
        )
    });
    assert_eq!(
        str_of(site, "function"),
        "wait_once",
        "{what}: {}",
        short(site)
    );
    let chain = arr(site, "call_chain");
    assert_eq!(
        chain.first().map(|f| &f["address"]),
        Some(&Value::from("python")),
        "{what}: the chain starts with the Python frames: {}",
        short(&site["call_chain"])
    );
    assert!(
        chain.iter().any(|f| f["address"] != "python"),
        "{what}: the interpreter's C frames are below them"
    );
    // The lock waited for is named by the `.py` line that made it: the
    // primitive's statement, or (a queue's or event's condition makes a
    // lock per wait) the waiting line.
    if minor <= 13 {
        let made: Vec<u64> = if matches!(kind, "event" | "queue") {
            vec![wait_line]
        } else {
            (line_in(&script, "# marker: made")..=line_in(&script, "# marker: end-made")).collect()
        };
        let locks = arr(site, "locks");
        assert!(
            locks.iter().any(|l| l
                .as_str()
                .is_some_and(|id| made.iter().any(|&line| names_line(id, line)))),
            "{what}: the lock waited for at line {wait_line} is named by its making line {made:?}: {locks:?}"
        );
    }
    // Who blocked whom: the holder thread, each worker it made wait.
    if minor <= 13 && matches!(kind, "lock" | "rlock" | "condition") {
        let made = line_in(&script, "# marker: made");
        let rows: Vec<&Value> = arr(p, "blocking")
            .iter()
            .filter(|r| r["lock"].as_str().is_some_and(|id| names_line(id, made)))
            .collect();
        let blockers: std::collections::BTreeSet<u64> =
            rows.iter().map(|r| u64_of(r, "blocker_tid")).collect();
        let blocked: std::collections::BTreeSet<u64> =
            rows.iter().map(|r| u64_of(r, "blocked_tid")).collect();
        assert!(
            blockers.len() == 1 && blocked.len() == WORKERS && blockers.is_disjoint(&blocked),
            "{what}: the holder blocked both workers: {}",
            short(&p["blocking"])
        );
    }
    let reported = u64_of(site, "wait_ns");
    let diff = reported.abs_diff(measured) as f64;
    assert!(
        diff <= 0.10 * measured as f64,
        "{what}: the report's wait at line {wait_line} is {reported} ns, the program measured {measured} ns: {}",
        short(site)
    );

    // Findings at the program's .py lines advise what Python code can do:
    // no atomics, no lock of another kind.
    for f in findings(p) {
        let message = str_of(f, "message");
        if message.contains("primitives.py:") {
            for c in ["atomic", "ticket lock", "hands over in turn"] {
                assert!(!message.contains(c), "{what}: {c:?} in {message}");
            }
        }
    }

    let held = matches!(kind, "lock" | "rlock" | "condition");
    if held && minor <= 13 {
        let sleep_line = line_in(&script, "# marker: sleep");
        let hold_line = line_in(&script, "# marker: hold");
        // The sleep's line is named in the message (a line that engaged no
        // lock is no site of the report, in C as in Python).
        let at_sleep = format!("primitives.py:{sleep_line} ");
        let found = findings(p).iter().find(|f| {
            f["kind"] == "blocking-under-lock"
                && (str_of(f, "message").contains(&at_sleep)
                    || arr(f, "sites")
                        .iter()
                        .any(|s| s.as_str().is_some_and(|s| names_line(s, sleep_line))))
        });
        let f = found.unwrap_or_else(|| {
            panic!(
                "{what}: no blocking-under-lock at primitives.py:{sleep_line}; findings: {}",
                short(&p["findings"])
            )
        });
        assert!(
            arr(f, "sites")
                .iter()
                .any(|s| s.as_str().is_some_and(|s| names_line(s, hold_line))),
            "{what}: the lock was taken at line {hold_line}: {}",
            short(f)
        );
        assert!(
            arr(f, "sites")
                .iter()
                .any(|s| s.as_str().is_some_and(|s| names_line(s, wait_line))),
            "{what}: the workers waited at line {wait_line}: {}",
            short(f)
        );
    } else if held {
        eprintln!(
            "NOT CHECKED {what}: blocking-under-lock (checked up to 3.13, whose threading.Lock is a semaphore)"
        );
    }
}

#[test]
fn python_waits_are_at_their_py_lines() {
    let found = interpreters();
    assert!(
        !found.is_empty(),
        "no CPython 3.11 or later on this machine"
    );
    for (python, version) in &found {
        for kind in KINDS {
            check(python, *version, kind);
        }
    }
}

/// A lock one thread takes (tests/python/one_thread.py), under 3.11 to 3.13:
/// named by its making line; the taking line's site engages that
/// lock alone (the GIL's calls from the interpreter are not given the
/// `.py` frames of whichever line first made them); and the finding at
/// that line is the program's, not hidden as the interpreter's. The same
/// in lean mode (`LOCKSUIT_MODE=lean` keys mutex calls by their line only;
/// CPython's locks, semaphores, keep their `.py` lines).
#[test]
fn a_lock_of_one_thread_is_judged_at_its_own_py_line() {
    let script = workspace_root().join("tests/python/one_thread.py");
    let made = line_in(&script, "# marker: made");
    let take = line_in(&script, "# marker: take");
    let runs = interpreters()
        .into_iter()
        .filter(|(_, v)| v.1 <= 13)
        .flat_map(|run| [(run.clone(), "full"), (run, "lean")]);
    for ((python, (major, minor)), mode) in runs {
        let what = format!("Python {major}.{minor} ({}), {mode} mode", python.display());
        let dir = fresh_dir(&format!("python_one_thread_{minor}_{mode}"));
        let out = run_under_shim_env(
            &python,
            &[script.as_os_str()],
            &dir,
            &[("LOCKSUIT_MODE", mode)],
        );
        assert_success(&out, &what);
        let report = report_json(&[&dir], None);
        let p = only_python_process(&report);
        let at = |line: u64| {
            move |id: &str| {
                id.ends_with(&format!("one_thread.py:{line}"))
                    || id.contains(&format!("one_thread.py:{line}#"))
            }
        };
        let site = sites(p)
            .iter()
            .find(|s| s["file"] == "one_thread.py" && s["line"].as_u64() == Some(take))
            .unwrap_or_else(|| panic!("{what}: no site at line {take}"));
        let locks: Vec<&str> = arr(site, "locks")
            .iter()
            .filter_map(|l| l.as_str())
            .collect();
        assert!(
            !locks.is_empty() && locks.iter().all(|id| at(made)(id)),
            "{what}: the site at line {take} engages only the lock made at line {made}: {locks:?}"
        );
        // `with lock:` takes and posts the semaphore at one line: one
        // engagement per take, as the lock's own count says.
        let taken: u64 = locksuit_tests::locks(p)
            .iter()
            .filter(|l| l["id"].as_str().is_some_and(at(made)))
            .map(|l| l["acquisitions"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(
            (site["engagements"].as_u64(), taken),
            (Some(200_000), 200_000),
            "{what}: the line's engagements and the lock's acquisitions are the script's takes"
        );
        let found = findings(p).iter().any(|f| {
            f["kind"] == "single-thread-lock"
                && arr(f, "locks")
                    .iter()
                    .any(|l| l.as_str().is_some_and(at(made)))
        });
        assert!(found, "{what}: {}", short(&p["findings"]));
        assert!(
            !findings(p)
                .iter()
                .any(|f| str_of(f, "message").contains("_PyRuntime")),
            "{what}: no finding about the interpreter's own locks: {}",
            short(&p["findings"])
        );
    }
}

/// A ThreadPoolExecutor and a SimpleQueue (tests/python/pool.py), under
/// 3.11 to 3.13, read as the programmer acting on the report would: the
/// `with lock:` line engaged the lock once per task (a CPython lock is a
/// semaphore taken and posted at that line); the SimpleQueue's lock (in
/// 3.13, the parking-lot semaphores its gets wait on), which the consumer
/// takes and the main thread posts, signals (`signals`) and
/// is in no contention finding and no "who blocks whom" row; and no
/// single-thread-lock finding is about a lock made as the program imported
/// `concurrent.futures` (the library's own, taken by the main thread alone
/// inside `submit`).
#[test]
fn a_thread_pool_and_a_queue_are_read_as_the_programmer_would() {
    let script = workspace_root().join("tests/python/pool.py");
    let import = line_in(&script, "# marker: import");
    let take = line_in(&script, "# marker: take");
    let made_queue = line_in(&script, "# marker: queue");
    let get = line_in(&script, "# marker: get");
    let runs: Vec<_> = interpreters()
        .into_iter()
        .filter(|(_, v)| v.1 <= 13)
        .collect();
    assert!(!runs.is_empty(), "no CPython 3.11 to 3.13 on this machine");
    for (python, (major, minor)) in runs {
        let what = format!("Python {major}.{minor} ({})", python.display());
        let dir = fresh_dir(&format!("python_pool_{minor}"));
        let out = run_under_shim(&python, &[script.as_os_str()], &dir);
        assert_success(&out, &what);
        assert!(
            stdout_str(&out).contains("tasks 2000 total 39800000 got 5"),
            "{what}: {}",
            stdout_str(&out)
        );
        let report = report_json(&[&dir], None);
        let p = only_python_process(&report);
        let site = sites(p)
            .iter()
            .find(|s| s["file"] == "pool.py" && s["line"].as_u64() == Some(take))
            .unwrap_or_else(|| panic!("{what}: no site at line {take}"));
        assert_eq!(
            site["engagements"].as_u64(),
            Some(2000),
            "{what}: one engagement per task at line {take}"
        );
        // Every CPython lock (a semaphore: not the GIL's mutex) taken once a
        // task or more is named by the line of pool.py that made it, the
        // executor's too (made inside ThreadPoolExecutor(...)): not by the
        // interpreter's C function that allocates locks.
        for l in locks(p) {
            let id = str_of(l, "id");
            if u64_of(l, "acquisitions") >= 2000 && str_of(l, "kind") == "sem" {
                assert!(
                    id.starts_with("<module>@pool.py:"),
                    "{what}: a lock taken {} times is named {id}, not by its pool.py line",
                    l["acquisitions"]
                );
            }
        }
        // The SimpleQueue's lock up to 3.12 (made at its line); 3.13's
        // SimpleQueue has none and waits in the parking lot, on a semaphore
        // made for each wait at the waiting line.
        let queue_names: Vec<String> = if minor <= 12 {
            vec![format!("<module>@pool.py:{made_queue}")]
        } else {
            locks(p)
                .iter()
                .map(|l| str_of(l, "id").to_string())
                .filter(|id| id.starts_with(&format!("consume@pool.py:{get}")))
                .collect()
        };
        assert!(
            !queue_names.is_empty(),
            "{what}: no lock the queue's get waited on: {}",
            short(&p["locks"])
        );
        for queue_name in &queue_names {
            let queue_lock = locks(p)
                .iter()
                .find(|l| str_of(l, "id") == queue_name)
                .unwrap_or_else(|| panic!("{what}: no lock {queue_name}"));
            assert_eq!(
                queue_lock["signals"],
                true,
                "{what}: the SimpleQueue's lock signals: {}",
                short(queue_lock)
            );
        }
        let is_queue = |id: &str| queue_names.iter().any(|q| q == id);
        for f in findings(p) {
            let kind = str_of(f, "kind");
            let about: Vec<&str> = arr(f, "locks").iter().filter_map(|l| l.as_str()).collect();
            assert!(
                !(about.iter().any(|l| is_queue(l))
                    && matches!(
                        kind,
                        "high-contention" | "asymmetric-contention" | "starvation" | "long-hold"
                    )),
                "{what}: a {kind} finding about the queue's signal: {}",
                short(f)
            );
            let made_by_import = format!("<module>@pool.py:{import}");
            assert!(
                !(kind == "single-thread-lock"
                    && about.iter().any(|l| l.starts_with(&made_by_import))),
                "{what}: the library's lock made at the import is not the program's to drop: {}",
                short(f)
            );
        }
        assert!(
            !arr(p, "blocking")
                .iter()
                .any(|b| is_queue(str_of(b, "lock"))),
            "{what}: nobody held the queue's signal: {}",
            short(&p["blocking"])
        );
    }
}
