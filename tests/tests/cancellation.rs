//! Thread cancellation and fork under the shim: the shim never adds a
//! cancellation point (its own I/O is made with raw system calls), lets a
//! real one unwind through its frames (mutex re-acquired, cleanup handlers
//! run), and a fork child never takes a lock another thread may have held
//! at the fork (the loader's, while that thread was in dlopen).
//!
//! Each mode runs once with and once without the shim and must print the
//! same; the soak tests repeat them 20 times and allow no difference.

use locksuit_tests::*;
use std::path::PathBuf;
use std::process::Output;

const MODES: &[&[&str]] = &[
    &["create", "1000"],
    &["pending"],
    &["cond", "200"],
    &["sem", "200"],
    &["join", "100"],
];

fn cancel_corners() -> PathBuf {
    build_c("cancel_corners")
}

/// Runs one mode plainly and under the shim; both must agree, exit 0, and
/// leave a complete trace.
fn same_with_and_without(bin: &std::path::Path, args: &[&str], tag: &str) -> Output {
    let plain = run_plain(bin, args);
    assert_success(&plain, &format!("{args:?} without the shim"));
    let dir = fresh_dir(tag);
    let shim = run_under_shim(bin, args, &dir);
    assert_same_output(&plain, &shim);
    assert!(
        shim.stderr.is_empty(),
        "{args:?}: nothing on stderr\n{}",
        describe(&shim)
    );
    let report = report_json(&[&only_trace(&dir)], None);
    assert_eq!(
        only_process(&report)["complete"],
        Value::Bool(true),
        "{args:?}"
    );
    shim
}

/// create, cancel, join, 1000 times: the thread-start wrapper used to write
/// through a cancellation point and abort the process.
#[test]
fn create_cancel_join_a_thousand_times() {
    let out = same_with_and_without(&cancel_corners(), MODES[0], "cancel_create");
    assert_eq!(stdout_value(&stdout_str(&out), "create canceled"), "1000");
}

/// A cancel pending while the thread initialises, locks and unlocks 300
/// mutexes (none a cancellation point): it must reach pthread_testcancel.
#[test]
fn a_pending_cancel_waits_for_a_real_cancellation_point() {
    let out = same_with_and_without(&cancel_corners(), MODES[1], "cancel_pending");
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "pending reached-testcancel"), "1");
    assert_eq!(stdout_value(&stdout, "pending left-locked"), "0");
}

/// Cancelled in pthread_cond_wait: the cleanup handler runs with the mutex
/// held, every time.
#[test]
fn cancelled_condition_waits_reacquire_the_mutex() {
    let out = same_with_and_without(&cancel_corners(), MODES[2], "cancel_cond");
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "cond canceled"), "200");
    assert_eq!(stdout_value(&stdout, "cond cleanup-unlock-ok"), "200");
}

/// Cancelled in sem_wait and in pthread_join: cleanup handlers run.
#[test]
fn cancelled_semaphore_waits_and_joins_run_their_cleanup() {
    let bin = cancel_corners();
    let out = same_with_and_without(&bin, MODES[3], "cancel_sem");
    assert_eq!(stdout_value(&stdout_str(&out), "sem cleanups"), "200");
    let out = same_with_and_without(&bin, MODES[4], "cancel_join");
    assert_eq!(stdout_value(&stdout_str(&out), "join cleanups"), "100");
}

/// Soak: every mode 20 times under the shim, each run printing exactly what
/// the program prints without it.
#[test]
fn cancellation_soak() {
    let bin = cancel_corners();
    for mode in MODES {
        let plain = run_plain(&bin, mode);
        assert_success(&plain, &format!("{mode:?} without the shim"));
        for round in 0..20 {
            let dir = fresh_dir("cancel_soak");
            let shim = run_under_shim(&bin, mode, &dir);
            assert!(
                shim.status.success() && shim.stdout == plain.stdout && shim.stderr.is_empty(),
                "{mode:?}, round {round}: differs from the plain run\n{}",
                describe(&shim)
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// fork while another thread loops dlopen/dlclose: no child may hang (the
/// shim's module lookup used to take the loader lock in the child).
#[test]
fn fork_while_another_thread_loads_libraries() {
    let bin = build_c("fork_dlopen");
    let args = ["100", "libm.so.6"];
    let plain = run_plain(&bin, &args);
    assert_success(&plain, "fork_dlopen without the shim");
    assert_eq!(stdout_value(&stdout_str(&plain), "hung"), "0");
    for round in 0..20 {
        let dir = fresh_dir("fork_dlopen");
        let shim = run_under_shim(&bin, &args, &dir);
        assert!(
            shim.status.success() && shim.stdout == plain.stdout && shim.stderr.is_empty(),
            "round {round}: differs from the plain run\n{}",
            describe(&shim)
        );
        if round == 0 {
            // Every child recorded its lock at its own line.
            let report = report_json(&[&dir], None);
            let children: Vec<&Value> = processes(&report)
                .iter()
                .filter(|p| p["fork_child"] == Value::Bool(true))
                .collect();
            assert_eq!(children.len(), 100);
            for child in children {
                assert!(
                    sites(child).iter().any(
                        |s| s["line"].as_u64() == Some(line_of("fork_dlopen.c", "@child-lock"))
                    ),
                    "the child's lock is symbolized: {}",
                    short(&child["sites"])
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
