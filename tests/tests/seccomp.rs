//! Programs that confine themselves (issue 33, items 1 and 2): under
//! seccomp strict mode, an allowlist filter installed on every thread
//! after threads exist, a filter inherited across exec, the TSC turned off,
//! and a thread that registers its own rseq area. Each runs the same with
//! and without the shim (tests/c/seccomp.c), and the trace says what the
//! confinement cost it.

use locksuit_tests::*;

/// Runs `mode` plainly and under the shim (with `env`), checks both ended
/// alike and printed the same, and returns the shim run's trace directory
/// and output.
fn same_both_ways(mode: &str, env: &[(&str, &str)]) -> (std::path::PathBuf, String) {
    let bin = build_c("seccomp");
    let plain = run_plain(&bin, &[mode]);
    let dir = fresh_dir(&format!("seccomp-{mode}-{}", env.len()));
    let traced = run_under_shim_env(&bin, &[mode], &dir, env);
    assert_eq!(
        traced.status.code(),
        plain.status.code(),
        "{mode}: plain {}\nunder the shim {}",
        describe(&plain),
        describe(&traced)
    );
    assert_eq!(
        stdout_str(&traced),
        stdout_str(&plain),
        "{mode}: the same output"
    );
    assert_eq!(
        String::from_utf8_lossy(&traced.stderr),
        String::from_utf8_lossy(&plain.stderr),
        "{mode}: nothing of ours on stderr"
    );
    (dir, stdout_str(&traced))
}

fn warnings(p: &Value) -> Vec<String> {
    arr(p, "warnings")
        .iter()
        .map(|w| w.as_str().unwrap_or_default().to_string())
        .collect()
}

fn acquisitions(p: &Value) -> u64 {
    locks(p).iter().map(|l| u64_of(l, "acquisitions")).sum()
}

#[test]
fn strict_mode_runs_and_is_recorded_into_what_was_mapped() {
    // With blocking calls timed (each write is hooked) and without.
    for env in [&[][..], &[("LOCKSUIT_BLOCK_MIN_US", "off")][..]] {
        let (dir, _) = same_both_ways("strict", env);
        let report = report_json(&[&only_trace(&dir)], None);
        let p = only_process(&report);
        assert_eq!(acquisitions(p), 200, "{}", short(p));
        // Its way out, syscall(SYS_exit, 7) on its one thread, is a
        // normal exit, although /proc could not be read to tell.
        assert_eq!(p["complete"], true, "{}", short(p));
        assert_eq!(p["exit_code"], 7, "{}", short(p));
        let w = warnings(p);
        assert!(
            w.iter().any(|w| w.contains("confined itself with seccomp")),
            "{w:?}"
        );
        assert!(w.iter().any(|w| w.contains("coarse clock")), "{w:?}");
    }
}

#[test]
fn a_filter_installed_on_every_thread_after_threads_exist() {
    let (dir, stdout) = same_both_ways("filter", &[]);
    let locked: u64 = stdout_value(&stdout, "locked").parse().unwrap();
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    // Threads started after the filter, too: named by the id glibc keeps.
    assert_eq!(arr(p, "threads").len(), 6, "main and 5 workers");
    let (got, dropped) = (acquisitions(p), u64_of(p, "dropped_events"));
    assert!(
        got == locked || (got < locked && dropped > 0),
        "{got} of {locked} acquisitions, {dropped} dropped: {}",
        short(p)
    );
    assert_eq!(p["exit_code"], 3);
    let w = warnings(p);
    assert!(
        w.iter()
            .any(|w| w.contains("confined itself with seccomp") && w.contains("not made")),
        "{w:?}"
    );
}

#[test]
fn a_sandbox_filter_inherited_across_exec_leaves_the_new_program_alone() {
    let (dir, _) = same_both_ways("inherited", &[]);
    // Only the trace from before the exec: the new image, confined from
    // its start, made no trace (that would take calls the filter kills).
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    let w = warnings(p);
    assert!(
        w.iter()
            .any(|w| w.contains("confined itself") && w.contains("exec'd another program")),
        "{w:?}"
    );
}

#[test]
fn a_runtime_filter_without_no_new_privs_is_recorded_as_usual() {
    // As root, as a container runtime installs its profile: the new image
    // is recorded (its refused calls get errors, not kills).
    let (dir, stdout) = same_both_ways("privileged", &[]);
    assert!(stdout.contains("after exec, locked 200"), "{stdout}");
    let report = report_json(&[&dir], None);
    let after = processes(&report)
        .iter()
        .find(|p| p["exit_code"] == 5)
        .unwrap_or_else(|| panic!("the exec'd image's trace: {}", short(&report)));
    assert_eq!(acquisitions(after), 200, "{}", short(after));
    let before = processes(&report)
        .iter()
        .find(|p| p["exit_code"] != 5)
        .unwrap_or_else(|| panic!("the trace before the exec: {}", short(&report)));
    assert!(
        warnings(before)
            .iter()
            .any(|w| w.contains("recorded in a trace of its own")),
        "{:?}",
        warnings(before)
    );
}

#[test]
fn a_thread_without_its_tsc_is_timed_by_the_coarse_clock() {
    let (dir, stdout) = same_both_ways("tsc", &[]);
    if stdout.contains("no PR_SET_TSC") {
        return;
    }
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    assert_eq!(acquisitions(p), 200, "{}", short(p));
    assert!(
        warnings(p).iter().any(|w| w.contains("coarse clock")),
        "{:?}",
        warnings(p)
    );
}

#[test]
fn a_thread_that_registers_its_own_rseq_area_is_left_alone() {
    let (dir, stdout) = same_both_ways("rseq", &[]);
    if !stdout.contains("registered its own") {
        return; // no rseq here: nothing to show
    }
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    assert_eq!(acquisitions(p), 50, "{}", short(p));
}
