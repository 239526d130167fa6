//! exec after threads have run: the pre-exec trace is complete, ended by
//! exec, and holds every acquisition of the threads; the exec'd image, when
//! it is the same program again (same pid, same executable name), gets a
//! trace of its own.

use locksuit_tests::*;

const THREADS: u64 = 3;
const N: u64 = 100;
const AFTER_USES: u64 = 17;
const EXE: &str = "exec_after_threads";

/// Checks the pre-exec process: complete, ended by exec, `shared` taken
/// exactly THREADS*N times by THREADS threads.
fn check_pre_exec(p: &Value, shared_addr: &str) {
    assert_eq!(
        p["complete"],
        Value::Bool(true),
        "the pre-exec image ended cleanly: {}",
        short(p)
    );
    assert_eq!(
        p["ended_by"].as_str(),
        Some("exec"),
        "ended_by: {}",
        short(p)
    );
    let lock = lock_by_address(p, shared_addr);
    assert_eq!(
        u64_of(lock, "acquisitions"),
        THREADS * N,
        "{THREADS} threads x {N}: {}",
        short(lock)
    );
    assert_eq!(u64_of(lock, "threads"), THREADS);
    let counts: Vec<u64> = arr(lock, "engagements_by_thread")
        .iter()
        .map(|e| u64_of(e, "count"))
        .collect();
    assert_eq!(
        counts,
        vec![N; THREADS as usize],
        "each thread engaged it {N} times"
    );
}

#[test]
fn exec_self_after_threads() {
    let bin = build_c(EXE);
    let dir = fresh_dir("exec_after_threads_self");
    let out = run_under_shim(&bin, &["self"], &dir);
    assert_success(&out, "exec_after_threads self under the shim");
    let stdout = stdout_str(&out);
    let pid: u64 = stdout_value(&stdout, "pid").parse().unwrap();
    let after_pid: u64 = stdout_value(&stdout, "after-pid").parse().unwrap();
    assert_eq!(after_pid, pid, "exec keeps the pid");
    let shared_addr = stdout_value(&stdout, "shared");
    let after_addr = stdout_value(&stdout, "after_lock");

    // Both images are `exec_after_threads` with the same pid, and each has
    // its own trace.
    let traces = traces_in(&dir);
    assert_eq!(
        traces.len(),
        2,
        "one trace before and one after the exec (same exe name, same pid {pid}): {traces:?}"
    );
    let report = report_json(&[&dir], None);
    let procs = processes(&report);
    assert_eq!(procs.len(), 2, "two processes in the directory report");
    assert!(
        procs.iter().all(|p| p["pid"].as_u64() == Some(pid)),
        "both images have pid {pid}: {:?}",
        procs.iter().map(|p| p["pid"].clone()).collect::<Vec<_>>()
    );
    let pre: Vec<&Value> = procs
        .iter()
        .filter(|p| p["ended_by"].as_str() == Some("exec"))
        .collect();
    let post: Vec<&Value> = procs
        .iter()
        .filter(|p| p["ended_by"].as_str() != Some("exec"))
        .collect();
    assert_eq!(
        (pre.len(), post.len()),
        (1, 1),
        "one image ended by exec, one not: {:?}",
        procs
            .iter()
            .map(|p| p["ended_by"].clone())
            .collect::<Vec<_>>()
    );
    check_pre_exec(pre[0], &shared_addr);

    let post = post[0];
    assert_eq!(post["complete"], Value::Bool(true), "{}", short(post));
    assert_eq!(post["ended_by"].as_str(), Some("exit"));
    let after = lock_by_address(post, &after_addr);
    assert_eq!(
        u64_of(after, "acquisitions"),
        AFTER_USES,
        "{}",
        short(after)
    );
    assert!(
        locks(post)
            .iter()
            .all(|l| l["acquisitions"].as_u64() != Some(THREADS * N)),
        "the exec'd image must not carry the old image's lock: {}",
        short(&post["locks"])
    );
    assert_eq!(
        arr(post, "threads").len(),
        1,
        "the exec'd image only had its main thread: {}",
        short(&post["threads"])
    );
}

#[test]
fn exec_bin_true_after_threads() {
    let bin = build_c(EXE);
    let dir = fresh_dir("exec_after_threads_true");
    let out = run_under_shim(&bin, &["true"], &dir);
    assert_success(
        &out,
        "exec_after_threads true (exec /bin/true) under the shim",
    );
    let stdout = stdout_str(&out);
    let pid: u64 = stdout_value(&stdout, "pid").parse().unwrap();

    let trace = trace_named(&dir, EXE, pid);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    assert_eq!(p["pid"].as_u64(), Some(pid));
    check_pre_exec(p, &stdout_value(&stdout, "shared"));
}
