//! Processors idle while threads wait (tests/c/idle.c): two threads taking
//! turns on one lock keep one processor busy, so all but one stand idle
//! while they wait; two threads spinning freely leave none idle (beyond
//! the processors they cannot fill) while main waits to join them.

use locksuit_tests::*;
use serde_json::Value;

fn idle_of(mode: &str) -> Value {
    let bin = build_c("idle");
    let dir = fresh_dir(&format!("idle-{mode}"));
    let out = run_under_shim(&bin, &[mode], &dir);
    assert_success(&out, "idle");
    let report = report_json(&[&dir], None);
    only_process(&report)["idle_while_waiting"].clone()
}

#[test]
fn threads_serialised_on_a_lock_leave_all_but_one_processor_idle() {
    let idle = idle_of("serial");
    let cpus = u64_of(&idle, "cpus") as f64;
    let avg = f64_of(&idle, "idle_processors");
    // Over the whole run main's join counts too, and a worker between its
    // unlock and its next wait (its sched_yield) counts as running: on a
    // loaded machine those windows grow (seen: 0.85 under a parallel test
    // run), so the process-wide figure gets a wider tolerance than the
    // lock's own.
    assert!((avg - (cpus - 1.0)).abs() < 0.25, "{idle}");
    let lock = &arr(&idle, "by_lock")[0];
    assert_eq!(str_of(lock, "lock"), "&turn");
    assert!(
        (f64_of(lock, "idle_processors") - (cpus - 1.0)).abs() < 0.15,
        "{idle}"
    );
}

#[test]
fn threads_running_freely_leave_none_idle_beyond_what_they_cannot_fill() {
    let idle = idle_of("parallel");
    let cpus = u64_of(&idle, "cpus") as f64;
    let avg = f64_of(&idle, "idle_processors");
    assert!((avg - (cpus - 2.0).max(0.0)).abs() < 0.15, "{idle}");
    assert!(arr(&idle, "by_lock").is_empty(), "{idle}");
}

/// The text says which figure is wall-clock time and which adds waits up
/// over threads: the process's time with a waiter counts waits at the same
/// time once, so it can be less than one lock's added-up waits, and must
/// not read as a total just before a larger one (issue 32, item 7).
#[test]
fn the_idle_lines_say_what_each_time_measures() {
    let bin = build_c("idle");
    let dir = fresh_dir("idle-text");
    assert_success(&run_under_shim(&bin, &["serial"], &dir), "idle");
    let text = stdout_str(&run_locksuit(&[
        "report",
        dir.to_str().unwrap(),
        "--width",
        "300",
    ]));
    let first = text
        .lines()
        .find(|l| l.contains("processors stood idle"))
        .expect(&text);
    assert!(
        first.contains("of wall-clock time") && !first.contains("in all"),
        "{first}"
    );
    let per_lock = text
        .lines()
        .find(|l| l.contains("while threads waited on"))
        .expect(&text);
    assert!(per_lock.contains("added up over the threads"), "{per_lock}");
}
