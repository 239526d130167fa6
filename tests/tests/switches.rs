//! LOCKSUIT_SWITCHES=1: the kernel's context-switch records show what the
//! hooks cannot see — preemption and blocking in system calls made around
//! libc — against what tests/c/switches.c measured itself.

use locksuit_tests::*;

/// Within 10 % of what the program measured, or 2 ms for short ones (a
/// switch shorter than the recording threshold, 0 here, is never lost, but
/// a spinner preempted for a few ms is dominated by scheduling noise).
fn close(reported: u64, measured: u64, what: &str) {
    let allowed = (measured / 10).max(2_000_000);
    assert!(
        reported.abs_diff(measured) <= allowed,
        "{what}: {:.2} ms reported, {:.2} ms measured by the program",
        reported as f64 / 1e6,
        measured as f64 / 1e6
    );
}

#[test]
fn preemption_and_raw_system_calls_are_seen_with_switches_on() {
    let bin = build_c("switches");
    let dir = fresh_dir("switches-on");
    let out = run_under_shim_env(
        &bin,
        &[] as &[&str],
        &dir,
        &[("LOCKSUIT_SWITCHES", "1"), ("LOCKSUIT_BLOCK_MIN_US", "0")],
    );
    assert_success(&out, "switches");
    assert!(out.stderr.is_empty(), "{}", describe(&out));
    let stdout = stdout_str(&out);
    let measured = |key: &str| stdout_value(&stdout, key).parse::<u64>().unwrap();
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    for i in 0..3 {
        let name = format!("spinner{i}");
        let t = thread_named(p, &name);
        close(
            class_ns(t, "preempted"),
            measured(&format!("{name}_off_ns")),
            &name,
        );
    }
    // A nanosleep made with the syscall instruction: no hook saw it.
    close(
        class_ns(thread_named(p, "raw"), "other"),
        measured("raw_sleep_ns"),
        "raw sleep",
    );
    // The joins the hooks recorded are not counted again as switches.
    let main = main_thread(p);
    let blocked: u64 = arr(main, "blocking_classes")
        .iter()
        .map(|c| u64_of(c, "total_ns"))
        .sum();
    assert!(blocked <= u64_of(p, "duration_ns"), "{main}");
    assert!(class_ns(main, "sync") > 0, "{main}");
}

#[test]
fn without_switches_only_the_hooks_are_seen() {
    let bin = build_c("switches");
    let dir = fresh_dir("switches-off");
    let out = run_under_shim_env(
        &bin,
        &[] as &[&str],
        &dir,
        &[("LOCKSUIT_BLOCK_MIN_US", "0")],
    );
    assert_success(&out, "switches");
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    for t in arr(p, "threads") {
        assert_eq!(class_ns(t, "preempted"), 0, "{t}");
        assert_eq!(class_ns(t, "other"), 0, "{t}");
    }
}

#[test]
fn a_kernel_that_refuses_is_named_once_and_recording_goes_on() {
    // As a container runtime starts a program: a filter that refuses
    // perf_event_open, installed without no-new-privs, then exec. (A filter
    // the program installs itself stops the shim's own calls instead: see
    // seccomp.rs.)
    let bin = build_c("switches");
    let dir = fresh_dir("switches-denied");
    let plain = run_plain(&bin, &["deny"]);
    assert_success(&plain, "switches deny, without the shim");
    if stdout_str(&plain).contains("not root") {
        return;
    }
    let out = run_under_shim_env(&bin, &["deny"], &dir, &[("LOCKSUIT_SWITCHES", "1")]);
    assert_success(&out, "switches deny");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("LOCKSUIT_SWITCHES"))
        .collect();
    assert_eq!(said.len(), 1, "said once: {stderr}");
    assert!(said[0].contains("refused"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "nothing else: {stderr}");
    // The hooks still record in the exec'd image: the joins are there.
    let report = report_json(&[&dir], None);
    let p = processes(&report)
        .iter()
        .find(|p| {
            arr(p, "threads")
                .iter()
                .any(|t| t["name"].as_str() == Some("spinner0"))
        })
        .unwrap_or_else(|| panic!("the exec'd image: {}", short(&report)));
    let main = main_thread(p);
    assert!(class_ns(main, "sync") > 0, "{main}");
    for i in 0..3 {
        assert_eq!(
            class_ns(thread_named(p, &format!("spinner{i}")), "preempted"),
            0
        );
    }
}

#[test]
fn a_wait_for_a_major_page_fault_is_memory_at_the_faulting_line() {
    let bin = build_c("switches");
    let dir = fresh_dir("switches-fault");
    let scratch = dir.canonicalize().unwrap();
    let out = run_under_shim_env(
        &bin,
        &["fault", scratch.to_str().unwrap()],
        &dir,
        &[("LOCKSUIT_SWITCHES", "1"), ("LOCKSUIT_BLOCK_MIN_US", "0")],
    );
    assert_success(&out, "switches fault");
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    let line = format!("switches.c:{}", line_of("switches.c", "marker: page fault"));
    let fault = arr(p, "blocking_stacks")
        .iter()
        .find(|s| str_of(s, "api") == "page fault")
        .unwrap_or_else(|| panic!("no page-fault wait: {:#?}", p["blocking_stacks"]));
    assert_eq!(str_of(fault, "class"), "memory");
    assert!(str_of(fault, "line").contains(&line), "{fault}");
    assert!(class_ns(thread_named(p, "faulter"), "memory") > 0);
}

#[test]
fn a_ring_that_fills_between_reads_is_said_in_the_report() {
    // 6,000 raw sleeps: 12,000 switch records, more than a ring holds, on a
    // thread that never reaches one of the shim's slow paths before it ends.
    let bin = build_c("switches");
    let dir = fresh_dir("switches-full");
    let out = run_under_shim_env(
        &bin,
        &["naps", "6000"],
        &dir,
        &[("LOCKSUIT_SWITCHES", "1"), ("LOCKSUIT_BLOCK_MIN_US", "0")],
    );
    assert_success(&out, "switches naps");
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    let warned = arr(p, "warnings").iter().any(|w| {
        w.as_str()
            .is_some_and(|w| w.contains("context-switch records were lost"))
    });
    assert!(warned, "{}", p["warnings"]);
    // The operations the shim itself dropped are another matter.
    assert_eq!(u64_of(p, "dropped_events"), 0);
}
