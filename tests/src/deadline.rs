//! Running a program that may hang (or fork children that linger) with a
//! deadline, for suites of programs not written for these tests: a program
//! that times out is a result, not a failure of the harness.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// What [`run_with_deadline`] saw.
pub struct DeadlineRun {
    /// How the program ended; `None` if it was still running at the deadline.
    pub status: Option<ExitStatus>,
    /// From start to exit (or to the deadline).
    pub elapsed: Duration,
}

/// Runs `cmd` in a process group of its own, stdin from `/dev/null`, stdout
/// and stderr into the files `stdout` and `stderr` (files, not pipes: a
/// child the program leaves behind would hold a pipe open). Once it exits,
/// or at `deadline` after the start, whatever is left of its process group
/// is killed, so nothing it started outlives the run.
pub fn run_with_deadline(
    mut cmd: Command,
    stdout: &Path,
    stderr: &Path,
    deadline: Duration,
) -> DeadlineRun {
    let desc = format!("{cmd:?}");
    let out =
        fs::File::create(stdout).unwrap_or_else(|e| panic!("create {}: {e}", stdout.display()));
    let err =
        fs::File::create(stderr).unwrap_or_else(|e| panic!("create {}: {e}", stderr.display()));
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {desc}: {e}"));
    // The child leads its group, so the group's id is its pid.
    let group = child.id() as libc::pid_t;
    // Wait without reaping: while the leader is a zombie its pid, the
    // group's id, cannot be reused, so the kill below hits only its group.
    let exited = loop {
        // SAFETY: an all-zero siginfo_t is a valid value for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child, `info` valid for writing; WNOWAIT
        // leaves it for `child.wait()` to reap.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                group as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        assert_eq!(r, 0, "waitid for {desc} failed");
        // SAFETY: waitid filled `info` (si_pid stays 0 while it runs).
        if unsafe { info.si_pid() } != 0 {
            break true;
        }
        if start.elapsed() >= deadline {
            break false;
        }
        thread::sleep(Duration::from_millis(10));
    };
    let elapsed = start.elapsed();
    // SAFETY: kill(2) on the process group this function started, whose
    // leader is not yet reaped; it touches no memory of ours. ESRCH
    // (nothing left) is fine.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let reaped = child.wait().expect("reap child");
    let status = exited.then_some(reaped);
    DeadlineRun { status, elapsed }
}
