//! Processes made without glibc's fork, so with none of its fork handlers:
//! the raw `clone`, `clone3` and `fork` system calls through `syscall`,
//! glibc's `clone` and `_Fork`, and a clone in inline assembly that no hook
//! sees. A child with a copy of the memory used to write into its parent's
//! trace (four children running 30 waves of 16 threads made the parent's
//! report show 2,405 threads and 96,001 locks, and no child had a trace):
//! now each has its own trace, holding what it did and nothing of its
//! parent's, and the parent's holds only its own. A vfork child, which
//! borrows the parent's memory, records nothing.

use locksuit_tests::*;
use std::process::Output;

const CHILDREN: usize = 2;

/// A child's own account: "child <n> pid <pid> threads <t> uses <u>".
struct ChildLine {
    pid: u64,
    threads: u64,
    uses: u64,
}

fn child_lines(stdout: &str) -> Vec<ChildLine> {
    stdout
        .lines()
        .filter(|l| l.starts_with("child "))
        .map(|l| {
            let words: Vec<&str> = l.split(' ').collect();
            let at = |key: &str| -> u64 {
                let i = words.iter().position(|w| *w == key).unwrap();
                words[i + 1].parse().unwrap()
            };
            ChildLine {
                pid: at("pid"),
                threads: at("threads"),
                uses: at("uses"),
            }
        })
        .collect()
}

/// The output with what differs from run to run masked (pids, addresses),
/// its lines sorted (the children write theirs in any order).
fn comparable(out: &Output) -> Vec<String> {
    let mut lines: Vec<String> = stdout_str(out)
        .lines()
        .map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            words
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    if w.starts_with("0x") || (i > 0 && words[i - 1] == "pid") {
                        "…"
                    } else {
                        w
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    lines.sort();
    lines
}

/// Runs `raw_clone args` without and with the shim: the same status and
/// output. Returns the shim's run and its directory.
fn run_both(args: &[&str], tag: &str) -> (Output, std::path::PathBuf) {
    let bin = build_c("raw_clone");
    let plain = run_plain(&bin, args);
    assert_success(&plain, &format!("raw_clone {args:?} without the shim"));
    let dir = fresh_dir(tag);
    let shim = run_under_shim(&bin, args, &dir);
    assert_eq!(
        shim.status.code(),
        plain.status.code(),
        "{}",
        describe(&shim)
    );
    assert_eq!(comparable(&shim), comparable(&plain), "{}", describe(&shim));
    (shim, dir)
}

fn value(stdout: &str, key: &str) -> u64 {
    stdout_value(stdout, key).parse().unwrap()
}

/// The parent's trace holds the parent's threads and locks only.
fn check_parent(report: &Value, stdout: &str) {
    let parent = process_by_pid(report, value(stdout, "pid"));
    assert_eq!(parent["complete"], Value::Bool(true), "{}", short(parent));
    assert_eq!(parent["fork_child"], Value::Bool(false));
    assert_eq!(
        arr(parent, "threads").len() as u64,
        1 + value(stdout, "parent-threads"),
        "the main thread and the parent's own: {}",
        short(&parent["threads"])
    );
    let parent_lock = lock_by_address(parent, &stdout_value(stdout, "parent_lock"));
    assert_eq!(
        u64_of(parent_lock, "acquisitions"),
        value(stdout, "parent-uses")
    );
    assert!(
        locks_at(parent, &stdout_value(stdout, "child_lock")).is_empty(),
        "no child's lock in the parent's trace: {}",
        short(&parent["locks"])
    );
    assert_eq!(u64_of(parent, "dropped_events"), 0);
}

fn check_clone(how: &str) {
    let (shim, dir) = run_both(&["clone", how], &format!("raw_clone_{how}"));
    assert!(shim.stderr.is_empty(), "{}", describe(&shim));
    let stdout = stdout_str(&shim);
    let children = child_lines(&stdout);
    assert_eq!(children.len(), CHILDREN, "{stdout}");
    assert_eq!(
        traces_in(&dir).len(),
        1 + CHILDREN,
        "a trace per process: {:?}",
        traces_in(&dir)
    );
    let report = report_json(&[&dir], None);
    assert_eq!(processes(&report).len(), 1 + CHILDREN);
    check_parent(&report, &stdout);
    for c in &children {
        let child = process_by_pid(&report, c.pid);
        assert_eq!(child["fork_child"], Value::Bool(true), "{}", short(child));
        assert_eq!(child["complete"], Value::Bool(true), "{}", short(child));
        assert_eq!(child["ended_by"].as_str(), Some("exit"));
        assert_eq!(child["exit_code"].as_i64(), Some(0), "{}", short(child));
        assert_eq!(
            arr(child, "threads").len() as u64,
            1 + c.threads,
            "the child's first thread and those it made: {}",
            short(&child["threads"])
        );
        let child_lock = lock_by_address(child, &stdout_value(&stdout, "child_lock"));
        assert_eq!(
            u64_of(child_lock, "acquisitions"),
            c.uses,
            "{}",
            short(child_lock)
        );
        assert!(
            locks_at(child, &stdout_value(&stdout, "parent_lock")).is_empty(),
            "nothing of the parent's in the child's trace: {}",
            short(&child["locks"])
        );
        assert_eq!(u64_of(child, "dropped_events"), 0);
    }
}

#[test]
fn children_of_the_clone_system_call_have_their_own_traces() {
    check_clone("syscall");
}

#[test]
fn children_of_the_clone3_system_call_have_their_own_traces() {
    check_clone("clone3");
}

#[cfg(target_arch = "x86_64")]
#[test]
fn children_of_the_fork_system_call_have_their_own_traces() {
    check_clone("sys-fork");
}

/// glibc's `clone` runs the child's function on its own stack and ends
/// the child with the exit system call when it returns: a normal exit.
#[test]
fn children_of_glibc_clone_have_their_own_traces() {
    check_clone("glibc");
}

/// The child starts on a 4 KiB stack and jumps back into its copy of the
/// parent's (runc, Chromium): starting its trace there would not fit.
#[test]
fn children_of_glibc_clone_on_a_small_stack_have_their_own_traces() {
    check_clone("glibc-small");
}

#[test]
fn children_of_underscore_fork_have_their_own_traces() {
    check_clone("_Fork");
}

/// No hook sees this clone: the child notices on its first slow path
/// (its first new lock), while it has one thread, and starts its trace.
#[cfg(target_arch = "x86_64")]
#[test]
fn children_of_a_clone_no_hook_saw_have_their_own_traces() {
    check_clone("asm");
}

/// The same, and the child's first thread takes no lock: it notices when
/// it makes its first thread.
#[cfg(target_arch = "x86_64")]
#[test]
fn children_of_a_clone_no_hook_saw_notice_at_their_first_thread() {
    check_clone("asm-late");
}

/// No hook sees this clone, and the child's first recorded work is on a
/// second thread (made with C11 thrd_create, out of our hooks' sight): the
/// child cannot start a trace safely then. It is cut off from the
/// parent's trace, says so once, and the parent's trace stays its own.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_child_noticed_too_late_is_cut_off_from_the_parents_trace() {
    let (shim, dir) = run_both(&["cut-off"], "raw_clone_cut_off");
    let stdout = stdout_str(&shim);
    assert_eq!(child_lines(&stdout).len(), 1, "{stdout}");
    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    check_parent(&report, &stdout);
    let stderr = String::from_utf8_lossy(&shim.stderr);
    assert_eq!(
        stderr.lines().count(),
        1,
        "one line, from the shim in the child: {stderr}"
    );
    assert!(stderr.starts_with("locksuit: "), "{stderr}");
}

/// A child that borrows the parent's memory and thread (glibc `clone`
/// with CLONE_VM | CLONE_VFORK, and `vfork`) takes locks: none of them
/// land in the parent's trace, as the parent's.
#[test]
fn vfork_children_record_nothing_in_the_parents_trace() {
    let (shim, dir) = run_both(&["vfork"], "raw_clone_vfork");
    assert!(shim.stderr.is_empty(), "{}", describe(&shim));
    let stdout = stdout_str(&shim);
    assert_eq!(value(&stdout, "children-ok"), 2);
    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    check_parent(&report, &stdout);
}
