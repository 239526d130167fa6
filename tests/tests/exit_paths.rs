//! The ways a process or a thread can end: atexit handlers and destructors
//! after main returns or after exit(), pthread_key destructors, exit() from a
//! non-main thread while another thread waits on a cond, _exit(), and
//! pthread_exit() from main while a worker carries on.

use locksuit_tests::*;
use std::process::Output;

const N: u64 = 30;
const W: u64 = 20;
const M: u64 = 11;

/// Runs `exit_paths <mode>` with and without the shim; asserts both exit
/// with `code` and print the same stdout. Returns the shim run, its pid, and
/// its process from the report of the only trace.
fn run_mode(mode: &str, code: i32) -> (Output, Value) {
    let bin = build_c("exit_paths");
    let plain = run_plain(&bin, &[mode]);
    assert_eq!(
        plain.status.code(),
        Some(code),
        "{mode} without the shim\n{}",
        describe(&plain)
    );
    let dir = fresh_dir(&format!("exit_paths_{mode}"));
    let out = run_under_shim(&bin, &[mode], &dir);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{mode} under the shim must exit with the same status\n{}",
        describe(&out)
    );
    assert!(
        plain.stderr.is_empty() && out.stderr.is_empty(),
        "{mode}: nothing on stderr\nplain: {}\nshim: {}",
        describe(&plain),
        describe(&out)
    );
    assert_eq!(
        stable_stdout(&out),
        stable_stdout(&plain),
        "{mode}: same output with and without the shim"
    );

    let stdout = stdout_str(&out);
    let pid: u64 = stdout_value(&stdout, "pid").parse().unwrap();
    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let p = only_process(&report).clone();
    assert_eq!(p["pid"].as_u64(), Some(pid), "the trace is the program's");
    (out, p)
}

fn check_exit_handlers(mode: &str, code: i32, exit_code_guaranteed: bool) {
    let (out, p) = run_mode(mode, code);
    let stdout = stdout_str(&out);
    assert_eq!(
        p["complete"],
        Value::Bool(true),
        "{mode}: a normal exit is complete: {}",
        short(&p)
    );
    assert_eq!(p["ended_by"].as_str(), Some("exit"), "{mode}: ended_by");
    if exit_code_guaranteed {
        assert_eq!(
            p["exit_code"].as_i64(),
            Some(code as i64),
            "{mode}: exit_code of exit({code})"
        );
    } else {
        assert!(
            p["exit_code"].is_null() || p["exit_code"].as_i64() == Some(code as i64),
            "{mode}: exit_code must be null or {code}, got {}",
            p["exit_code"]
        );
    }
    for (what, key) in [
        ("atexit handler", "atexit_lock"),
        ("destructor", "dtor_lock"),
    ] {
        let lock = lock_by_address(&p, &stdout_value(&stdout, key));
        assert_eq!(
            u64_of(lock, "acquisitions"),
            N,
            "{mode}: the {what} locked {key} {N} times after main: {}",
            short(lock)
        );
        assert_eq!(u64_of(lock, "threads"), 1, "{mode}: {key} threads");
    }
}

/// (a) main returns 0, then an atexit handler and a destructor lock.
#[test]
fn atexit_and_destructor_after_main_returns() {
    check_exit_handlers("atexit", 0, false);
}

/// (a') main calls exit(7), then an atexit handler and a destructor lock.
#[test]
fn atexit_and_destructor_after_exit_call() {
    check_exit_handlers("atexit-exit", 7, true);
}

/// (b) a worker's pthread_key destructor locks while the thread exits.
#[test]
fn pthread_key_destructor_locks() {
    let (out, p) = run_mode("keydtor", 0);
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "worker-locks"), W.to_string());
    assert_eq!(
        stdout_value(&stdout, "key-destructor-locks"),
        M.to_string(),
        "the key destructor ran fully under the shim"
    );
    assert_eq!(p["complete"], Value::Bool(true));
    let lock = lock_by_address(&p, &stdout_value(&stdout, "key_lock"));
    // The shim keeps the thread open until glibc's last destructor round,
    // so the program's own key destructor is recorded too.
    assert_eq!(
        u64_of(lock, "acquisitions"),
        W + M,
        "key_lock: the worker's {W} acquisitions and the destructor's {M}"
    );
}

/// (c) exit(3) from a non-main thread while another waits on a cond.
#[test]
fn exit_from_thread_while_other_waits() {
    let (out, p) = run_mode("exit-thread", 3);
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "exiting"), "3", "the exiter ran");
    assert_eq!(
        p["complete"],
        Value::Bool(true),
        "exit() is complete: {}",
        short(&p)
    );
    assert_eq!(p["ended_by"].as_str(), Some("exit"));
    assert_eq!(p["exit_code"].as_i64(), Some(3), "exit_code of exit(3)");
    let lock = lock_by_address(&p, &stdout_value(&stdout, "wait_lock"));
    assert_eq!(
        u64_of(lock, "acquisitions"),
        2,
        "wait_lock: the waiter once, the exiter once; the wait never returned: {}",
        short(lock)
    );
    assert_eq!(u64_of(lock, "threads"), 2);
    assert_eq!(
        u64_of(lock, "cond_reacquires"),
        0,
        "the wait never returned"
    );
}

/// (d) _exit(5).
#[test]
fn underscore_exit() {
    let (out, p) = run_mode("_exit", 5);
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "uses"), N.to_string());
    assert_eq!(
        p["complete"],
        Value::Bool(true),
        "_exit() is complete: {}",
        short(&p)
    );
    assert_eq!(p["ended_by"].as_str(), Some("exit"));
    assert_eq!(p["exit_code"].as_i64(), Some(5), "exit_code of _exit(5)");
    let lock = lock_by_address(&p, &stdout_value(&stdout, "lock"));
    assert_eq!(u64_of(lock, "acquisitions"), N);
}

/// quick_exit(6): a normal end (not "died"), with the at_quick_exit
/// handler's locks recorded.
#[test]
fn quick_exit_is_a_normal_exit() {
    let (out, p) = run_mode("quick_exit", 6);
    let stdout = stdout_str(&out);
    assert_eq!(
        p["complete"],
        Value::Bool(true),
        "quick_exit() is complete: {}",
        short(&p)
    );
    assert_eq!(p["ended_by"].as_str(), Some("exit"));
    assert_eq!(
        p["exit_code"].as_i64(),
        Some(6),
        "exit_code of quick_exit(6)"
    );
    let lock = lock_by_address(&p, &stdout_value(&stdout, "lock"));
    assert_eq!(u64_of(lock, "acquisitions"), N);
    let handler_lock = lock_by_address(&p, &stdout_value(&stdout, "atexit_lock"));
    assert_eq!(
        u64_of(handler_lock, "acquisitions"),
        N,
        "the at_quick_exit handler's locks"
    );
}

/// (e) pthread_exit from main; a worker carries on and locks.
#[test]
fn pthread_exit_from_main() {
    let (out, p) = run_mode("pthread-exit", 0);
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "survivor-uses"), N.to_string());
    assert_eq!(
        p["complete"],
        Value::Bool(true),
        "last thread's exit is complete: {}",
        short(&p)
    );
    assert_eq!(p["ended_by"].as_str(), Some("exit"));
    assert!(
        p["exit_code"].is_null() || p["exit_code"].as_i64() == Some(0),
        "exit_code must be null or 0, got {}",
        p["exit_code"]
    );
    let lock = lock_by_address(&p, &stdout_value(&stdout, "lock"));
    assert_eq!(
        u64_of(lock, "acquisitions"),
        N,
        "the survivor's acquisitions after main ended: {}",
        short(lock)
    );
    assert_eq!(u64_of(lock, "threads"), 1);
    let main_threads: Vec<&Value> = arr(&p, "threads")
        .iter()
        .filter(|t| t["main"] == Value::Bool(true))
        .collect();
    assert_eq!(
        main_threads.len(),
        1,
        "one main thread: {}",
        short(&p["threads"])
    );
    assert_eq!(
        main_threads[0]["ended"],
        Value::Bool(true),
        "the main thread ended (pthread_exit) before the process: {}",
        short(main_threads[0])
    );
}

/// (e') pthread_exit from a worker thread; main joins it and returns.
#[test]
fn pthread_exit_from_worker() {
    let (out, p) = run_mode("pthread-exit-worker", 0);
    let stdout = stdout_str(&out);
    assert_eq!(
        stdout_value(&stdout, "worker-returned"),
        "42",
        "pthread_join got the value passed to pthread_exit"
    );
    assert_eq!(p["complete"], Value::Bool(true));
    let lock = lock_by_address(&p, &stdout_value(&stdout, "lock"));
    assert_eq!(
        u64_of(lock, "acquisitions"),
        N,
        "the worker's acquisitions: {}",
        short(lock)
    );
    let by_thread = arr(lock, "engagements_by_thread");
    assert_eq!(
        by_thread.len(),
        1,
        "one thread engaged the lock: {}",
        short(lock)
    );
    let worker = thread_by_tid(&p, u64_of(&by_thread[0], "tid"));
    assert_eq!(worker["main"], Value::Bool(false), "the worker engaged it");
    assert_eq!(
        worker["ended"],
        Value::Bool(true),
        "the worker ended (pthread_exit) before the process: {}",
        short(worker)
    );
}

/// `syscall(SYS_exit_group, 9)`: a normal exit with status 9, as `_exit(9)`
/// (it used to read as "DIED without a normal exit").
#[test]
fn exit_group_system_call_is_a_normal_exit() {
    let (out, p) = run_mode("syscall-exit-group", 9);
    let stdout = stdout_str(&out);
    assert_eq!(
        p["complete"],
        Value::Bool(true),
        "exit_group is complete: {}",
        short(&p)
    );
    assert_eq!(p["ended_by"].as_str(), Some("exit"), "{}", short(&p));
    assert_eq!(
        p["exit_code"].as_i64(),
        Some(9),
        "exit_code of exit_group(9)"
    );
    let lock = lock_by_address(&p, &stdout_value(&stdout, "lock"));
    assert_eq!(u64_of(lock, "acquisitions"), N);
}

/// `syscall(SYS_exit, 0)` on a worker ends the worker, which skips glibc's
/// thread-exit work: its record says it ended, and the process goes on.
#[test]
fn exit_system_call_on_a_thread_is_a_thread_exit() {
    let (out, p) = run_mode("syscall-exit-thread", 0);
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "worker-uses"), N.to_string());
    assert_eq!(p["complete"], Value::Bool(true));
    assert_eq!(p["ended_by"].as_str(), Some("exit"));
    let lock = lock_by_address(&p, &stdout_value(&stdout, "lock"));
    assert_eq!(u64_of(lock, "acquisitions"), N);
    let by_thread = arr(lock, "engagements_by_thread");
    assert_eq!(by_thread.len(), 1, "{}", short(lock));
    let worker = thread_by_tid(&p, u64_of(&by_thread[0], "tid"));
    assert_eq!(worker["main"], Value::Bool(false));
    assert_eq!(
        worker["ended"],
        Value::Bool(true),
        "the worker ended (exit system call) before the process: {}",
        short(worker)
    );
}

/// `syscall(SYS_exit, 4)` on the only thread, the main one, ends the
/// process with status 4: a normal exit.
#[test]
fn exit_system_call_on_the_last_thread_is_a_normal_exit() {
    let (out, p) = run_mode("syscall-exit-last", 4);
    let stdout = stdout_str(&out);
    assert_eq!(p["complete"], Value::Bool(true), "{}", short(&p));
    assert_eq!(p["ended_by"].as_str(), Some("exit"), "{}", short(&p));
    assert_eq!(p["exit_code"].as_i64(), Some(4), "exit_code of exit(4)");
    let lock = lock_by_address(&p, &stdout_value(&stdout, "lock"));
    assert_eq!(u64_of(lock, "acquisitions"), N);
}
