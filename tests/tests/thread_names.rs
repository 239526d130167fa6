//! Thread names: pthread_setname_np on the calling thread and on another,
//! running thread, and prctl(PR_SET_NAME) on a thread that is still alive
//! when the process exits (or that ended before it), all show up in
//! threads[].

use locksuit_tests::*;

fn name_of(p: &Value, tid: u64) -> String {
    let t = thread_by_tid(p, tid);
    t["name"]
        .as_str()
        .unwrap_or_else(|| panic!("thread {tid} has no name string: {}", short(t)))
        .to_string()
}

#[test]
fn setname_and_prctl_names() {
    let bin = build_c("thread_names");
    let dir = fresh_dir("thread_names");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "thread_names under the shim");
    let stdout = stdout_str(&out);
    let tid = |k: &str| -> u64 { stdout_value(&stdout, k).parse().unwrap() };
    let (main_tid, a_tid, b_tid, c_tid) =
        (tid("main-tid"), tid("a-tid"), tid("b-tid"), tid("c-tid"));
    // The kernel's view, read back by the program itself.
    for (k, want) in [
        ("main-name", "main-renamed"),
        ("a-name", "by-main"),
        ("b-name", "self-named"),
        ("c-name", "prctl-named"),
    ] {
        assert_eq!(stdout_value(&stdout, k), want, "test premise: {k}");
    }

    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    assert_eq!(p["complete"], Value::Bool(true));
    assert_eq!(
        arr(p, "threads").len(),
        4,
        "main, A, B, C: {}",
        short(&p["threads"])
    );

    let main = thread_by_tid(p, main_tid);
    assert_eq!(main["main"], Value::Bool(true));
    assert_eq!(
        name_of(p, main_tid),
        "main-renamed",
        "main named itself with pthread_setname_np"
    );
    assert_eq!(
        name_of(p, a_tid),
        "by-main",
        "main named the running thread A with pthread_setname_np"
    );
    assert_eq!(
        name_of(p, b_tid),
        "self-named",
        "B named itself with pthread_setname_np"
    );
    assert_eq!(
        name_of(p, c_tid),
        "prctl-named",
        "C named itself with prctl(PR_SET_NAME) and was alive at exit"
    );
    for t in [a_tid, b_tid] {
        assert_eq!(
            thread_by_tid(p, t)["ended"],
            Value::Bool(true),
            "thread {t} was joined before exit"
        );
    }
    assert_eq!(
        thread_by_tid(p, c_tid)["ended"],
        Value::Bool(false),
        "C was still running at exit: {}",
        short(thread_by_tid(p, c_tid))
    );
    let lock_uses: u64 = locks(p).iter().map(|l| u64_of(l, "acquisitions")).sum();
    assert_eq!(lock_uses, 4, "each of the four threads locked once");
}

#[test]
fn prctl_name_of_thread_that_ended() {
    let bin = build_c("thread_names");
    let dir = fresh_dir("thread_names_ended");
    let out = run_under_shim(&bin, &["ended"], &dir);
    assert_success(&out, "thread_names ended under the shim");
    let stdout = stdout_str(&out);
    assert_eq!(
        stdout_value(&stdout, "d-name"),
        "prctl-ended",
        "test premise"
    );
    let d_tid: u64 = stdout_value(&stdout, "d-tid").parse().unwrap();

    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    assert_eq!(p["complete"], Value::Bool(true));
    let d = thread_by_tid(p, d_tid);
    assert_eq!(d["ended"], Value::Bool(true), "{}", short(d));
    assert_eq!(
        name_of(p, d_tid),
        "prctl-ended",
        "D's prctl(PR_SET_NAME) name, which it had when it ended: {}",
        short(d)
    );
}

#[test]
fn a_name_given_before_the_shim_knew_the_thread_stays_with_it() {
    // E is named by main before it calls anything hooked; F, created after
    // E ended, reuses its pthread_t; the process kills itself, so only what
    // was recorded while E lived names anyone.
    let bin = build_c("thread_names");
    let dir = fresh_dir("thread_names_reuse");
    let out = run_under_shim(&bin, &["reuse"], &dir);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9), "it kills itself: {out:?}");
    let stdout = stdout_str(&out);
    let e_tid: u64 = stdout_value(&stdout, "e-tid").parse().unwrap();
    let f_tid: u64 = stdout_value(&stdout, "f-tid").parse().unwrap();
    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    assert_eq!(name_of(p, e_tid), "early-named", "{}", short(&p["threads"]));
    let f = thread_by_tid(p, f_tid);
    assert_ne!(
        f["name"].as_str(),
        Some("early-named"),
        "F (same pthread_t: {}) took E's name: {}",
        stdout_value(&stdout, "same-pthread"),
        short(f)
    );
}
