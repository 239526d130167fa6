//! The command line as users and scripts see it: `locksuit run` exit
//! statuses and output, `--fail-on-findings`, `--help`, and
//! `scripts/run-under-shim.sh` over a whole process tree.
//!
//! Past 600 lines: each file under tests/tests is its own test binary,
//! linked apart; one subject stays in one file rather than pay another link.

use locksuit_tests::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()))
}

fn locksuit_run(dir: &Path, report: &Path, cmd: &[&str]) -> std::process::Output {
    let mut args = vec!["run", "--format", "json", "--dir"];
    args.push(dir.to_str().unwrap());
    args.extend(["--output", report.to_str().unwrap(), "--"]);
    args.extend(cmd);
    run_locksuit(&args)
}

#[test]
fn run_keeps_the_program_output_and_status_and_reports_json() {
    let bin = build_c("tiny");
    let dir = fresh_dir("cli-run");
    let report = dir.join("report.json");
    let out = locksuit_run(&dir.join("traces"), &report, &[bin.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        stdout_str(&out),
        "counter 400\n",
        "the program's stdout is untouched"
    );
    let json = read_json(&report);
    assert_eq!(json["schema"], "locksuit.report/3");
    let p = only_process(&json);
    assert_eq!(p["complete"], true);
    let total: u64 = locks(p).iter().map(|l| u64_of(l, "acquisitions")).sum();
    // Two workers, each 200 private and 200 shared engagements.
    assert_eq!(total, 800);
}

#[test]
fn run_exits_with_the_commands_status_or_128_plus_signal() {
    let bin = build_c("crash");
    let dir = fresh_dir("cli-status");
    let report = dir.join("report.json");
    let out = locksuit_run(&dir.join("t1"), &report, &[bin.to_str().unwrap(), "kill"]);
    assert_eq!(out.status.code(), Some(128 + 9), "{}", describe(&out));
    assert_eq!(only_process(&read_json(&report))["complete"], false);

    let out = locksuit_run(&dir.join("t2"), &report, &["/bin/sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
}

#[test]
fn run_without_a_runnable_command_is_bad_usage() {
    let dir = fresh_dir("cli-missing");
    let out = locksuit_run(
        &dir.join("t"),
        &dir.join("r.json"),
        &["/nonexistent/program"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("/nonexistent/program"), "{stderr}");
}

#[test]
fn fail_on_findings_gates_with_status_1() {
    let bin = build_c("tiny");
    let dir = fresh_dir("cli-gate");
    assert_success(&run_under_shim(&bin, &[] as &[&str], &dir), "tiny");
    let trace = only_trace(&dir);
    let trace = trace.to_str().unwrap();
    // tiny's private locks, 400 acquisitions in all, are below the default
    // cost floor; at a floor of 1 they are a finding, and the gate trips.
    let out = run_locksuit(&[
        "report",
        trace,
        "--fail-on-findings",
        "--min-acquisitions",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(stdout_str(&out).contains("single-thread-lock"));
    // Without the gate the same report succeeds.
    assert_eq!(
        run_locksuit(&["report", trace, "--min-acquisitions", "1"])
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn mutrace_columns_and_sorting() {
    let bin = build_c("contention");
    let dir = fresh_dir("cli-mutrace");
    assert_success(&run_under_shim(&bin, &[] as &[&str], &dir), "contention");
    let trace = only_trace(&dir);
    let trace = trace.to_str().unwrap();
    let out = run_locksuit(&["report", trace, "--columns", "mutrace", "--sort", "changes"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let text = stdout_str(&out);
    for column in [
        "Locked",
        "Changed",
        "Cont.",
        "tot.Time[ms]",
        "avg.Time[ms]",
        "max.Time[ms]",
    ] {
        assert!(
            text.contains(column),
            "mutrace column {column} missing:\n{text}"
        );
    }
    // The contended lock: 20 acquisitions, 19 owner changes, 10 contended.
    assert!(
        text.lines().any(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            cells.windows(3).any(|w| w == ["20", "19", "10"])
        }),
        "a row with Locked 20, Changed 19, Cont. 10:\n{text}"
    );
    let bad = run_locksuit(&["report", trace, "--sort", "bogus"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn help_teaches_and_bad_options_are_usage_errors() {
    let out = run_locksuit(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = stdout_str(&out);
    for needle in [
        "report",
        "run",
        "LOCKSUIT_DIR",
        "Exit status",
        "unnecessary-lock",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}:\n{help}");
    }
    let out = run_locksuit(&["report", "--no-such-option"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}

fn run_script(args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(workspace_root().join("scripts/run-under-shim.sh"));
    cmd.args(args)
        .env_remove("LD_PRELOAD")
        .env_remove("LOCKSUIT_DIR");
    run_captured(cmd)
}

#[test]
fn suite_script_records_every_process_and_combines_the_report() {
    let bin = build_c("fork");
    let dir = fresh_dir("cli-script");
    let traces = dir.join("traces");
    let report = dir.join("report.json");
    let out = run_script(&[
        "--format",
        "json",
        "--dir",
        traces.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        traces_in(&traces).len(),
        2,
        "parent and child both recorded"
    );
    assert_eq!(processes(&read_json(&report)).len(), 2);
}

/// Issue 11: the script's report never mixes with the suite's own output
/// (stderr, or --report FILE), every report option reaches `locksuit
/// report`, and it ends with a one-screen summary: processes recorded,
/// findings by kind, which processes fail the gate.
#[test]
fn suite_script_reports_apart_passes_options_and_ends_with_a_summary() {
    let tiny = build_c("tiny");
    let dir = fresh_dir("cli-script-summary");
    let suite = format!("{} && env > /dev/null", tiny.display());
    let out = run_script(&[
        "--width",
        "80",
        "--top",
        "1",
        "--fail-on-findings",
        "--min-acquisitions",
        "1",
        "--dir",
        dir.join("a").to_str().unwrap(),
        "--",
        "/bin/sh",
        "-c",
        &suite,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_eq!(
        stdout_str(&out),
        "counter 400\n",
        "stdout is the suite's alone: {}",
        describe(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // The text report, at the width asked for, one finding listed.
    assert!(stderr.contains("  1. ["), "{stderr}");
    assert!(!stderr.contains("  2. ["), "--top 1: {stderr}");
    // tiny's second finding depends on timing (over-synchronization when
    // its locks ran fast, starvation when they contended): the line that
    // says what --top left out is there whenever there was one.
    let found: usize = stderr
        .split("Findings at threshold 0.30 (")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|n| n.parse().ok())
        .expect("a findings heading");
    assert_eq!(stderr.contains("more findings"), found > 1, "{stderr}");
    for line in stderr
        .lines()
        .filter(|l| !l.starts_with("run-under-shim.sh:"))
    {
        assert!(line.chars().count() <= 80, "--width 80: {line}");
    }
    // The summary comes last.
    let summary = &stderr[stderr.find("locksuit summary").expect("a summary")..];
    assert!(
        summary.contains("3 processes recorded, 1 with lock activity"),
        "{summary}"
    );
    assert!(summary.contains("Findings by kind"), "{summary}");
    assert!(summary.contains("single-thread-lock"), "{summary}");
    assert!(
        summary.contains("Failed the gate (--fail-on-findings): 1")
            && summary.contains("tiny (pid"),
        "{summary}"
    );
    assert!(summary.lines().count() < 25, "one screen: {summary}");

    // --report FILE: the report there, the summary still on stderr.
    let report = dir.join("report.txt");
    let out = run_script(&[
        "--report",
        report.to_str().unwrap(),
        "--min-acquisitions",
        "1",
        "--dir",
        dir.join("b").to_str().unwrap(),
        "--",
        tiny.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(stdout_str(&out), "counter 400\n");
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(text.contains("[single-thread-lock]"), "{text}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("[single-thread-lock]"), "{stderr}");
    assert!(
        stderr.contains("Processes with findings (these fail --fail-on-findings): 1"),
        "{stderr}"
    );

    // A report option locksuit refuses stops the script before the suite runs.
    let marker = dir.join("ran");
    let touch = format!("touch {}", marker.display());
    let out = run_script(&["--widht", "80", "--", "/bin/sh", "-c", &touch]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(!marker.exists(), "the suite did not run");
}

#[test]
fn suite_script_keeps_a_failing_status_and_gates_findings() {
    let crash = build_c("crash");
    let dir = fresh_dir("cli-script-status");
    let out = run_script(&[
        "--dir",
        dir.join("a").to_str().unwrap(),
        "--",
        crash.to_str().unwrap(),
        "abort",
    ]);
    assert_eq!(
        out.status.code(),
        Some(128 + 6),
        "the suite's own failure wins: {}",
        describe(&out)
    );

    // A finding every run has, whatever the machine's load: two locks
    // taken in both orders (tiny's over-synchronization, read from timing,
    // did not come on a busy machine).
    let abba = build_c("lock_order");
    let gated = run_script(&[
        "--fail-on-findings",
        "--dir",
        dir.join("b").to_str().unwrap(),
        "--",
        abba.to_str().unwrap(),
        "abba",
    ]);
    assert_eq!(gated.status.code(), Some(1), "{}", describe(&gated));
    let plain = run_script(&[
        "--dir",
        dir.join("c").to_str().unwrap(),
        "--",
        abba.to_str().unwrap(),
        "abba",
    ]);
    assert_eq!(plain.status.code(), Some(0), "{}", describe(&plain));
}

/// Issue 10, item 15: a usage error is one line saying what is wrong, then
/// one line saying where to read more (clap's own took five or six).
#[test]
fn usage_errors_are_one_line_and_a_hint() {
    for (args, needle, hint) in [
        (
            &["report", "--no-such-option"][..],
            "--no-such-option",
            "locksuit report --help",
        ),
        (
            &["report", "--threshold", "1.5"][..],
            "1.5",
            "locksuit report --help",
        ),
        (
            &["events", "--format", "xml"][..],
            "xml",
            "locksuit events --help",
        ),
        (&["run", "--dir", "x"][..], "<CMD>", "locksuit run --help"),
        (&["bogus"][..], "bogus", "locksuit --help"),
        (&[][..], "no command", "locksuit --help"),
    ] {
        let out = run_locksuit(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 2, "{args:?}: two lines:\n{stderr}");
        assert!(
            lines[0].starts_with("locksuit: error: ") && lines[0].contains(needle),
            "{args:?}: {stderr}"
        );
        assert!(lines[1].contains(hint), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

/// Issue 10, item 15: `events --object` with an id no process has is bad
/// usage (exit 2, one line naming the trace); a known id is not.
#[test]
fn events_with_an_unknown_object_is_bad_usage() {
    let bin = build_c("tiny");
    let dir = fresh_dir("cli-events-object");
    assert_success(&run_under_shim(&bin, &[] as &[&str], &dir), "tiny");
    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let known = id_of(&locks(only_process(&report))[0]).to_string();
    let trace = trace.to_str().unwrap();
    let out = run_locksuit(&["events", trace, "--object", "L999"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("L999") && stderr.contains(trace),
        "{stderr}"
    );
    // Unknown among known ones: still an error.
    let out = run_locksuit(&["events", trace, "--object", &known, "--object", "C77"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("C77"));
    let out = run_locksuit(&["events", trace, "--object", &known]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}

/// Sends `signal` (a name such as "TERM") to `pid` with kill(1).
fn send_signal(signal: &str, pid: u32) {
    let sent = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -{signal} {pid}");
}

fn alive(pid: u32) -> bool {
    // A zombie is as good as gone: it ran to its end.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

/// `locksuit run -- until_signal`, `signal` sent to locksuit alone once the
/// command is ready. Returns locksuit's output, the command's pid and the
/// report written.
fn run_and_signal(tag: &str, signal: &str) -> (std::process::Output, u32, Value) {
    use std::io::{BufRead, BufReader, Read};
    let bin = build_c("until_signal");
    let dir = fresh_dir(tag);
    let report = dir.join("report.json");
    let mut locksuit = Command::new(locksuit_path())
        .args(["run", "--format", "json", "--dir"])
        .arg(dir.join("traces"))
        .arg("--output")
        .arg(&report)
        .arg("--")
        .arg(&bin)
        .env_remove("LD_PRELOAD")
        .env_remove("LOCKSUIT_DIR")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn locksuit run");
    let mut stdout = BufReader::new(locksuit.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let command_pid: u32 = line
        .strip_prefix("ready ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("until_signal did not start: {line:?}"));
    send_signal(signal, locksuit.id());
    // Its output is small: locksuit cannot block on the pipes meanwhile.
    let status = locksuit.wait().unwrap();
    let orphaned = alive(command_pid);
    if orphaned {
        send_signal("KILL", command_pid);
    }
    // The command shares the pipes: read them once it is gone.
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let mut stderr = Vec::new();
    let mut stderr_pipe = locksuit.stderr.take().unwrap();
    stderr_pipe.read_to_end(&mut stderr).unwrap();
    let out = std::process::Output {
        status,
        stdout: format!("{line}{rest}").into_bytes(),
        stderr,
    };
    assert!(
        !orphaned,
        "SIG{signal}: locksuit left its command running\n{}",
        describe(&out)
    );
    let json = if report.exists() {
        read_json(&report)
    } else {
        Value::Null
    };
    (out, command_pid, json)
}

/// Issue 10, item 14: SIGTERM or SIGHUP sent to `locksuit run` reaches the
/// command; locksuit waits for it, reports, and exits with its status.
/// Before, locksuit died at once and left the command running.
#[test]
fn run_forwards_sigterm_and_sighup_to_the_command_then_reports() {
    // until_signal catches SIGTERM and exits 7 by itself.
    let (out, _, report) = run_and_signal("cli-sigterm", "TERM");
    assert_eq!(out.status.code(), Some(7), "{}", describe(&out));
    assert!(
        stdout_str(&out).contains("got SIGTERM"),
        "{}",
        describe(&out)
    );
    assert_eq!(only_process(&report)["complete"], true);
    // SIGHUP kills it (default action): 128 + 1, and the trace says so.
    let (out, _, report) = run_and_signal("cli-sighup", "HUP");
    assert_eq!(out.status.code(), Some(128 + 1), "{}", describe(&out));
    assert_eq!(only_process(&report)["complete"], false);
    // SIGINT sent to locksuit alone (not from a terminal) is passed on too.
    let (out, _, _) = run_and_signal("cli-sigint", "INT");
    assert_eq!(out.status.code(), Some(128 + 2), "{}", describe(&out));
}

/// Runs `locksuit args…` in `cwd` under `umask`.
fn locksuit_in(cwd: &Path, umask: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(locksuit_path())
        .args(args)
        .current_dir(cwd)
        .env_remove("LD_PRELOAD")
        .env_remove("LOCKSUIT_DIR");
    run_captured(cmd)
}

/// Issue 33, item 10: under `locksuit run` and `run-under-shim.sh` the
/// shim's warnings go into the report, not the program's stderr.
#[test]
fn run_and_the_suite_script_keep_the_shims_warnings_out_of_the_programs_stderr() {
    let bin = build_c("tiny");
    let bin = bin.to_str().unwrap();
    let cwd = fresh_dir("cli-quiet");
    let suite = workspace_root().join("scripts/run-under-shim.sh");
    let runners = [
        (locksuit_path(), "--output", "run.txt"),
        (suite, "--report", "suite.txt"),
    ];
    for (runner, report_option, report) in runners {
        let mut cmd = Command::new(&runner);
        if report == "run.txt" {
            cmd.arg("run");
        }
        cmd.args([report_option, report, "--", bin])
            .current_dir(&cwd)
            .env_remove("LD_PRELOAD")
            .env_remove("LOCKSUIT_DIR")
            .env_remove("LOCKSUIT_QUIET")
            .env("LOCKSUIT_EVENTS", "some");
        let out = run_captured(cmd);
        assert_eq!(out.status.code(), Some(0), "{report}: {}", describe(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("LOCKSUIT_EVENTS"), "{report}: {stderr}");
        let text = std::fs::read_to_string(cwd.join(report)).unwrap();
        assert!(
            text.contains("the shim said: LOCKSUIT_EVENTS must be"),
            "{report}: {text}"
        );
    }
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// Issue 10, item 11: the directory `locksuit run` makes (./locksuit-run.N
/// or a missing --dir) is mode 0700 whatever the umask.
#[test]
fn run_directories_are_private() {
    let bin = build_c("tiny");
    let bin = bin.to_str().unwrap();
    let cwd = fresh_dir("cli-private");
    for umask in ["000", "022", "277"] {
        let out = locksuit_in(&cwd, umask, &["run", "--output", "r.txt", "--", bin]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let nested = format!("given-{umask}/traces");
        let out = locksuit_in(
            &cwd,
            umask,
            &["run", "--output", "r.txt", "--dir", &nested, "--", bin],
        );
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert_eq!(
            mode_of(&cwd.join(&nested)),
            0o700,
            "--dir under umask {umask}"
        );
    }
    for n in 1..=3 {
        let made = cwd.join(format!("locksuit-run.{n}"));
        assert_eq!(mode_of(&made), 0o700, "{}", made.display());
        assert_eq!(traces_in(&made).len(), 1, "{}", made.display());
    }
    // A --dir that exists is used as it is.
    let existing = cwd.join("existing");
    std::fs::create_dir(&existing).unwrap();
    std::fs::set_permissions(
        &existing,
        std::os::unix::fs::PermissionsExt::from_mode(0o750),
    )
    .unwrap();
    let out = locksuit_in(
        &cwd,
        "022",
        &["run", "--output", "r.txt", "--dir", "existing", "--", bin],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(mode_of(&existing), 0o750);
}

/// Issue 10, item 15: a command that cannot be started leaves no empty
/// run directory behind (one it did not make is kept).
#[test]
fn run_of_a_missing_command_leaves_no_directory() {
    let cwd = fresh_dir("cli-no-leftover");
    let out = locksuit_in(&cwd, "022", &["run", "--", "/nonexistent/program"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let out = locksuit_in(
        &cwd,
        "022",
        &["run", "--dir", "new/traces", "--", "/nonexistent/program"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    std::fs::create_dir(cwd.join("kept")).unwrap();
    let out = locksuit_in(
        &cwd,
        "022",
        &["run", "--dir", "kept", "--", "/nonexistent/program"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let mut left: Vec<String> = std::fs::read_dir(&cwd)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["kept"], "left behind: {left:?}");
}
