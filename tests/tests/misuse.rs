//! Misuse (issue 32, item 6): each way tests/c/misuse.c uses a lock
//! against its rules is one `misuse` finding at the line that did it, the
//! program behaves the same with and without the shim, allowed uses that
//! look alike are no finding, and a misused lock is never said to be one
//! thread's (`single-thread-lock`, `unnecessary-lock`).

use locksuit_tests::*;

const SRC: &str = "misuse.c";

/// `misuse MODE` without and under the shim (same status and output):
/// its process in the JSON report.
fn run(mode: &str) -> Value {
    let bin = build_c("misuse");
    let plain = run_plain(&bin, &[mode]);
    let dir = fresh_dir(&format!("misuse_{mode}"));
    let out = run_under_shim(&bin, &[mode], &dir);
    assert_success(&out, mode);
    assert_same_output(&plain, &out);
    let report = report_json(&[&only_trace(&dir)], None);
    only_process(&report).clone()
}

/// The misuse findings, each as (first word of what was done, the line
/// of each of its sites, its locks' names).
fn misuses(p: &Value) -> Vec<(String, Vec<u64>, Vec<String>)> {
    findings(p)
        .iter()
        .filter(|f| f["kind"] == "misuse")
        .map(|f| {
            let lines = finding_sites(p, f)
                .iter()
                .map(|s| u64_of(s, "line"))
                .collect();
            let locks = arr(f, "locks")
                .iter()
                .map(|l| l.as_str().unwrap().to_string())
                .collect();
            (str_of(f, "message").to_string(), lines, locks)
        })
        .collect()
}

fn line(marker: &str) -> u64 {
    line_of(SRC, &format!("/* @{marker} */"))
}

/// The one misuse finding of `mode`: its message, lines and locks.
fn one(mode: &str) -> (String, Vec<u64>, Vec<String>, Value) {
    let p = run(mode);
    let found = misuses(&p);
    assert_eq!(found.len(), 1, "{mode}: {}", short(&p["findings"]));
    let (message, lines, locks) = found.into_iter().next().unwrap();
    (message, lines, locks, p)
}

#[test]
fn an_unlock_of_an_unlocked_mutex_is_misuse_and_never_a_single_thread_lock() {
    let (message, lines, locks, p) = one("unlock-unlocked");
    assert_eq!(lines, vec![line("extra-unlock")]);
    assert_eq!(locks, vec!["&m"]);
    assert!(message.contains("which no thread held"), "{message}");
    // One thread took &m 2000 times; it is misused, not unneeded, and the
    // line that took it is not over-locked either.
    assert!(
        findings_taken_alone(&p, "&m").is_empty(),
        "{}",
        short(&p["findings"])
    );
    assert!(
        findings(&p).iter().all(|f| f["kind"] != "unsuitable-site"),
        "{}",
        short(&p["findings"])
    );
    // The line is a site of the report, engaging nothing.
    let site = sites(&p)
        .iter()
        .find(|s| s["line"].as_u64() == Some(line("extra-unlock")))
        .unwrap();
    assert_eq!(str_of(site, "status"), "not-engaged");
    assert_eq!(u64_of(site, "engagements"), 0);
}

/// Under full tracing the mutex unlock goes a handler of its own (every
/// hold is timed, so none is tried the quick way first): the same misuse is
/// named at the same line, and the program runs as it does without it.
#[test]
fn an_unlock_of_an_unlocked_mutex_is_named_under_full_tracing_too() {
    let bin = build_c("misuse");
    let plain = run_plain(&bin, &["unlock-unlocked"]);
    let dir = fresh_dir("misuse_unlock_unlocked_traced");
    let out = run_under_shim_env(
        &bin,
        &["unlock-unlocked"],
        &dir,
        &[("LOCKSUIT_EVENTS", "all")],
    );
    assert_success(&out, "unlock-unlocked, fully traced");
    assert_same_output(&plain, &out);
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    let found = misuses(p);
    assert_eq!(found.len(), 1, "{}", short(&p["findings"]));
    assert_eq!(found[0].1, vec![line("extra-unlock")]);
    assert_eq!(found[0].2, vec!["&m"]);
}

#[test]
fn an_unlock_by_another_thread_names_the_holder() {
    let (message, lines, locks, p) = one("unlock-not-owner");
    assert_eq!(lines, vec![line("foreign")]);
    assert_eq!(locks, vec!["&m"]);
    let main = main_thread(&p);
    assert!(
        message.contains(&format!("while thread {} ", u64_of(main, "tid"))),
        "{message}"
    );
}

#[test]
fn destroying_a_held_mutex_or_rwlock_is_misuse() {
    let p = run("destroy-held");
    let mut found = misuses(&p);
    found.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(found.len(), 2, "{}", short(&p["findings"]));
    assert_eq!(found[0].1, vec![line("destroy-mutex")]);
    assert_eq!(found[0].2, vec!["&m"]);
    assert!(found[0].0.contains("it held it itself"), "{}", found[0].0);
    assert_eq!(found[1].1, vec![line("destroy-rwlock")]);
    assert_eq!(found[1].2, vec!["&rw"]);
}

#[test]
fn a_condition_wait_with_an_unheld_mutex_is_misuse() {
    let (message, lines, locks, _) = one("wait-unheld");
    assert_eq!(lines, vec![line("wait-unheld")]);
    assert_eq!(locks, vec!["&m"]);
    assert!(message.contains("no thread held"), "{message}");
}

#[test]
fn one_condition_with_two_mutexes_at_once_is_misuse_and_in_turn_is_not() {
    let (message, mut lines, mut locks, _) = one("two-mutexes");
    lines.sort_unstable();
    locks.sort();
    assert_eq!(lines, vec![line("wait-m1"), line("wait-m2")]);
    assert_eq!(locks, vec!["&m1", "&m2"]);
    assert!(
        message.contains("&c was waited on with two mutexes"),
        "{message}"
    );
    let p = run("two-in-turn");
    assert!(misuses(&p).is_empty(), "{}", short(&p["findings"]));
}

#[test]
fn destroying_a_condition_with_a_blocked_waiter_is_misuse_and_with_woken_ones_is_not() {
    let (message, lines, locks, _) = one("destroy-blocked");
    assert_eq!(lines, vec![line("destroy-cond")]);
    assert!(locks.is_empty(), "a condition is no lock: {locks:?}");
    assert!(
        message.contains("destroyed &c") && message.contains("1 thread was blocked"),
        "{message}"
    );
    let p = run("destroy-woken");
    assert!(misuses(&p).is_empty(), "{}", short(&p["findings"]));
}

#[test]
fn an_error_checking_mutex_relocked_is_misuse() {
    let (message, lines, locks, _) = one("relock");
    assert_eq!(lines, vec![line("relock")]);
    assert_eq!(locks.len(), 1);
    assert!(message.contains("EDEADLK"), "{message}");
    assert!(message.contains("error-checking mutex"), "{message}");
    // An rwlock's relock is told as one: no "error-checking mutex", no
    // advice to make it recursive.
    let (message, lines, locks, _) = one("relock-rw");
    assert_eq!(lines, vec![line("relock-rw")]);
    assert_eq!(locks.len(), 1);
    assert!(
        message.contains("the rwlock") && message.contains("EDEADLK"),
        "{message}"
    );
    assert!(
        !message.contains("mutex") && !message.contains("recursive"),
        "{message}"
    );
}

#[test]
fn locks_used_by_the_rules_are_no_misuse() {
    // Nested past the depth the shim tracks, recursive, unlocked by
    // pthread_atfork handlers in parent and child, or by a fork child that
    // owns its copy: holds the shim may not know of, none misused.
    for mode in ["none", "deep", "recursive", "atfork", "fork-unlock"] {
        let bin = build_c("misuse");
        let dir = fresh_dir(&format!("misuse_{mode}"));
        let plain = run_plain(&bin, &[mode]);
        let out = run_under_shim(&bin, &[mode], &dir);
        assert_success(&out, mode);
        assert_same_output(&plain, &out);
        let report = report_json(&[&dir], None);
        for p in processes(&report) {
            assert!(misuses(p).is_empty(), "{mode}: {}", short(&p["findings"]));
        }
    }
}

#[test]
fn each_line_that_misuses_a_lock_is_named() {
    let p = run("two-lines");
    let mut lines: Vec<Vec<u64>> = misuses(&p).into_iter().map(|(_, l, _)| l).collect();
    lines.sort();
    assert_eq!(lines, vec![vec![line("twice-a")], vec![line("twice-b")]]);
}

#[test]
fn an_unlock_of_a_mutex_never_locked_is_misuse() {
    let (message, lines, locks, _) = one("never-locked");
    assert_eq!(lines, vec![line("never-locked")]);
    assert_eq!(locks, vec!["&never"]);
    assert!(message.contains("which no thread held"), "{message}");
}

/// glibc's rwlock destroy reads nothing, so a program may destroy one it
/// already unmapped; the shim must not read it either (it would fault).
#[test]
fn destroying_an_unmapped_rwlock_runs_as_without_the_shim() {
    let p = run("unmapped");
    assert!(misuses(&p).is_empty(), "{}", short(&p["findings"]));
}
