//! fork: parent and child each get their own trace, holding only their own
//! lock activity.

use locksuit_tests::*;

const PARENT_USES: u64 = 300;
const CHILD_USES: u64 = 200;

#[test]
fn fork_gives_two_separate_traces() {
    let bin = build_c("fork");
    let dir = fresh_dir("fork");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "fork under the shim");
    let stdout = stdout_str(&out);
    let parent_pid: u64 = stdout_value(&stdout, "parent").parse().unwrap();
    let child_pid: u64 = stdout_value(&stdout, "child").parse().unwrap();
    let a = stdout_value(&stdout, "A");
    let b = stdout_value(&stdout, "B");

    let traces = traces_in(&dir);
    assert_eq!(traces.len(), 2, "one trace per process: {traces:?}");
    for pid in [parent_pid, child_pid] {
        assert!(
            traces.iter().any(|p| p
                .file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with(&format!(".{pid}.trace"))),
            "a trace named locksuit.fork.{pid}.trace exists: {traces:?}"
        );
    }

    let report = report_json(&[&dir], None);
    assert_eq!(
        processes(&report).len(),
        2,
        "the directory holds two processes"
    );

    let parent = process_by_pid(&report, parent_pid);
    assert_eq!(parent["complete"], Value::Bool(true));
    let lock_a = lock_by_address(parent, &a);
    assert_eq!(
        u64_of(lock_a, "acquisitions"),
        PARENT_USES,
        "parent's lock A"
    );
    assert!(
        locks_at(parent, &b).is_empty(),
        "the parent never touched B: {}",
        short(&parent["locks"])
    );

    let child = process_by_pid(&report, child_pid);
    assert_eq!(child["complete"], Value::Bool(true));
    let lock_b = lock_by_address(child, &b);
    assert_eq!(u64_of(lock_b, "acquisitions"), CHILD_USES, "child's lock B");
    assert!(
        locks_at(child, &a).is_empty(),
        "the child's trace must not contain the parent's lock A: {}",
        short(&child["locks"])
    );

    // The per-file reports agree with the directory report.
    for t in &traces {
        let r = report_json(&[t.as_path()], None);
        assert_eq!(processes(&r).len(), 1, "one process per trace file {t:?}");
    }
}

/// A fork child whose first lock comes late still has a trace from the
/// fork on: its first call starts the trace from the time the fork was
/// noted (not from the call, as for a child no hook saw made), so the
/// child's duration covers the wait it measured itself before that call,
/// whichever handler the call reached.
#[test]
fn a_fork_child_locking_late_is_recorded_from_the_fork() {
    let bin = build_c("fork_late_lock");
    let dir = fresh_dir("fork_late_lock");
    let out = run_under_shim(&bin, &["300"], &dir);
    assert_success(&out, "fork_late_lock under the shim");
    let stdout = stdout_str(&out);
    // Without the shim: the same exit status and the same lines, but for
    // the child's pid and its measured wait.
    let plain = run_plain(&bin, &["300"]);
    assert_eq!(
        out.status.code(),
        plain.status.code(),
        "{}",
        describe(&plain)
    );
    let keys = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        keys(&stdout),
        keys(&stdout_str(&plain)),
        "the same output lines"
    );
    let child_pid: u64 = stdout_value(&stdout, "child").parse().unwrap();
    let waited: u64 = stdout_value(&stdout, "waited_ns").parse().unwrap();
    let report = report_json(&[&dir], None);
    let child = process_by_pid(&report, child_pid);
    assert_eq!(child["fork_child"], Value::Bool(true), "{}", short(child));
    let locks = locks(child);
    assert_eq!(
        locks.iter().map(|l| u64_of(l, "acquisitions")).sum::<u64>(),
        100,
        "the child's own lock, and no other: {}",
        short(&child["locks"])
    );
    let duration = u64_of(child, "duration_ns");
    assert!(
        duration >= waited,
        "the child's trace lasts {duration} ns, less than the {waited} ns it waited after the fork"
    );
}
