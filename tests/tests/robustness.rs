//! Regressions from a review of the shim: each program behaved differently
//! under the shim, or crashed, before the fix.

use locksuit_tests::*;

/// Call-path offsets learned on one stack must not be read on another: a
/// lock taken from a coroutine on a 16 KB stack after the same line was
/// reached through a 60 KB frame crashed the program.
#[test]
fn lock_calls_from_a_small_coroutine_stack() {
    let bin = build_c("stack_paths");
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(&plain, "stack_paths without the shim");
    let dir = fresh_dir("stack_paths");
    let shim = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_same_output(&plain, &shim);
    assert_eq!(stdout_str(&shim), "ok 4\n");
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    let took: u64 = locks_engaged_in_function(p, "take")
        .iter()
        .map(|l| u64_of(l, "acquisitions"))
        .sum();
    assert_eq!(took, 4);
}

/// sem_wait is a cancellation point even when a token is there.
#[test]
fn sem_wait_honours_a_pending_cancel() {
    let bin = build_c("sem_cancel");
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_eq!(stdout_str(&plain), "cancelled 1 value 1\n");
    let dir = fresh_dir("sem_cancel");
    let shim = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_same_output(&plain, &shim);
}

/// `_exit` in a vfork child must not mark the parent's trace.
#[test]
fn vfork_child_exit_leaves_the_parent_trace_alone() {
    let bin = build_c("vfork_exit");
    let dir = fresh_dir("vfork_exit");
    let shim = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&shim, "vfork_exit under the shim");
    assert_eq!(stdout_str(&shim), "child 42\n");
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    assert_eq!(p["complete"], true);
    assert!(
        p["exit_code"].is_null(),
        "the parent returned from main; the child's _exit(42) is not its status: {}",
        short(p)
    );
}
