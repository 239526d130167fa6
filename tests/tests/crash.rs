//! Crash safety: a process that dies (SIGKILL, SIGSEGV, abort) leaves a
//! readable trace containing every acquisition made before it died, marked
//! incomplete; a normal exit is marked complete.

use locksuit_tests::*;
use std::os::unix::process::ExitStatusExt;

const ACQUISITIONS: u64 = 1234;
const SIGABRT: i32 = 6;
const SIGKILL: i32 = 9;
const SIGSEGV: i32 = 11;

fn check_variant(mode: &str, signal: Option<i32>) {
    let bin = build_c("crash");

    // The program's own exit status, without the shim.
    let plain = run_plain(&bin, &[mode]);
    let dir = fresh_dir(&format!("crash_{mode}"));
    let out = run_under_shim(&bin, &[mode], &dir);
    match signal {
        None => {
            assert_success(&plain, "crash normal without the shim");
            assert_success(&out, "crash normal under the shim");
        }
        Some(sig) => {
            assert_eq!(
                plain.status.signal(),
                Some(sig),
                "plain run: {}",
                describe(&plain)
            );
            assert_eq!(
                out.status.signal(),
                Some(sig),
                "under the shim the process must die of the same signal\n{}",
                describe(&out)
            );
        }
    }
    let stdout = stdout_str(&out);
    assert_eq!(
        stdout_value(&stdout, "acquisitions"),
        ACQUISITIONS.to_string()
    );

    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    let lock = lock_by_address(p, &stdout_value(&stdout, "lock"));
    assert_eq!(
        u64_of(lock, "acquisitions"),
        ACQUISITIONS,
        "every acquisition before the death ({mode}) is in the trace"
    );
    assert_eq!(
        u64_of(lock, "threads"),
        2,
        "worker and main both engaged the lock"
    );
    assert_eq!(
        p["complete"],
        Value::Bool(signal.is_none()),
        "complete must be {} for {mode}",
        signal.is_none()
    );
}

#[test]
fn normal_exit_is_complete() {
    check_variant("normal", None);
}

#[test]
fn sigkill() {
    check_variant("kill", Some(SIGKILL));
}

#[test]
fn segv() {
    check_variant("segv", Some(SIGSEGV));
}

#[test]
fn abort() {
    check_variant("abort", Some(SIGABRT));
}
