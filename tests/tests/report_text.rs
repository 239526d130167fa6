//! Issue 11, "a report that reads well": the text report fits the width it
//! is given (`--width`, `$COLUMNS`, a stable width when piped) without
//! splitting an id, an address or a header word; `report` without a PATH
//! picks the newest trace with lock activity and sums up the processes
//! that recorded none in one line; `--exe`, `--pid` and `--top` select;
//! deadlines print relative to the process start; `run --fail-on-findings`
//! gates; large traces show progress on a terminal only.

use locksuit_tests::*;
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `locksuit args…` with `COLUMNS` as given (removed when `None`).
fn locksuit_with_columns(args: &[&str], columns: Option<&str>) -> Output {
    let mut cmd = Command::new(locksuit_path());
    cmd.args(args)
        .env_remove("LD_PRELOAD")
        .env_remove("LOCKSUIT_DIR");
    match columns {
        Some(c) => cmd.env("COLUMNS", c),
        None => cmd.env_remove("COLUMNS"),
    };
    run_captured(cmd)
}

fn text_report(args: &[&str], columns: Option<&str>) -> String {
    let out = locksuit_with_columns(args, columns);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", describe(&out));
    stdout_str(&out)
}

/// The longest line, in characters (every character locksuit prints,
/// box drawing included, is one column wide).
fn longest_line(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

fn assert_fits(text: &str, width: usize, what: &str) {
    for line in text.lines() {
        assert!(
            line.chars().count() <= width,
            "{what}: a line of {} columns, more than {width}:\n{line}\n\n{text}",
            line.chars().count()
        );
    }
}

/// The words of a text report: split at spaces and table borders, outer
/// punctuation trimmed, leaving out the notes that say which columns a
/// narrow table left out.
fn words(text: &str) -> HashSet<String> {
    let mut kept = String::new();
    let mut in_note = false;
    for line in text.lines() {
        if line.trim_start().starts_with("(left out at this width:") {
            in_note = true;
        }
        if !in_note {
            kept.push_str(line);
            kept.push('\n');
        }
        if in_note && line.trim_end().ends_with("shows them)") {
            in_note = false;
        }
    }
    kept.split(|c: char| c.is_whitespace() || "│┌┐└┘─═╞╡".contains(c))
        .map(|w| w.trim_matches(|c: char| "(),;:".contains(c)))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// The words of `narrow` that are no word of `wide`: pieces of broken
/// words. Paths may break after a slash, so a piece of a path is fine.
fn broken_words(narrow: &str, wide: &str) -> Vec<String> {
    let wide = words(wide);
    let paths: Vec<&String> = wide.iter().filter(|w| w.contains('/')).collect();
    words(narrow)
        .into_iter()
        .filter(|w| !wide.contains(w) && !paths.iter().any(|p| p.contains(w.as_str())))
        .collect()
}

fn record(name: &str, tag: &str) -> PathBuf {
    let bin = build_c(name);
    let dir = fresh_dir(tag);
    assert_success(&run_under_shim(&bin, &[] as &[&str], &dir), name);
    dir
}

fn record_sample(tag: &str) -> PathBuf {
    let src = workspace_root().join("examples").join("sample.c");
    let bin = build_c_source(&src, "sample");
    let dir = fresh_dir(tag);
    assert_success(&run_under_shim(&bin, &[] as &[&str], &dir), "sample");
    dir
}

/// Done when: the sample and the tests' C programs read cleanly at 80
/// columns. No line is longer than 80, and every word of the report at 80
/// columns is a word of the report at 1000 (where nothing is broken): an
/// id, an address or a header word broken across lines would leave a piece
/// that is no word of the wide report. Every lock id and address that the
/// 80-column report shows is one of the process's own.
#[test]
fn the_sample_and_the_test_programs_read_cleanly_at_80_columns() {
    let mut dirs = vec![("sample".to_string(), record_sample("text80-sample"))];
    for name in [
        "tiny",
        "contention",
        "conds",
        "private_locks",
        "primitives",
        "blocking",
    ] {
        dirs.push((name.to_string(), record(name, &format!("text80-{name}"))));
    }
    for (name, dir) in &dirs {
        let dir = dir.to_str().unwrap();
        let narrow = text_report(&["report", dir, "--width", "80"], None);
        assert_fits(&narrow, 80, name);
        let wide = text_report(&["report", dir, "--width", "1000"], None);
        let broken = broken_words(&narrow, &wide);
        assert!(
            broken.is_empty(),
            "{name}: pieces of broken words at 80 columns: {broken:?}\n{narrow}"
        );
        // The same report through $COLUMNS.
        let by_env = text_report(&["report", dir], Some("80"));
        assert_eq!(by_env, narrow, "{name}: COLUMNS=80 is --width 80");

        // Every address shown is one of the process's own, whole.
        let json = report_json(&[Path::new(dir)], None);
        let p = only_process(&json);
        let addresses: HashSet<&str> = locks(p)
            .iter()
            .map(|l| str_of(l, "address"))
            .chain(conds(p).iter().map(|c| str_of(c, "address")))
            .collect();
        for w in words(&narrow) {
            if w.starts_with("0x") && w.len() > 6 {
                assert!(
                    addresses.contains(w.as_str()),
                    "{name}: {w} is no address of the process"
                );
            }
        }
        // No word is a piece of a lock's, site's or family's id without
        // being an id itself (the ids are names such as &total_lock or
        // count_own_item@sample.c:53).
        let ids: HashSet<&str> = locks(p)
            .iter()
            .chain(sites(p))
            .chain(arr(p, "families"))
            .map(id_of)
            .collect();
        let id_like = |w: &str| w.contains('@') || w.starts_with('&');
        for w in words(&narrow).into_iter().filter(|w| id_like(w)) {
            let piece = !ids.contains(w.as_str()) && ids.iter().any(|id| id.contains(w.as_str()));
            assert!(
                !piece,
                "{name}: {w} is a piece of an id at 80 columns:\n{narrow}"
            );
        }
    }

    // The sample's four private locks read as one finding that counts them.
    let sample = dirs[0].1.to_str().unwrap();
    let text = text_report(&["report", sample, "--width", "80"], None);
    let findings: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("[single-thread-lock]"))
        .collect();
    assert_eq!(findings.len(), 1, "one finding for the four:\n{text}");
    assert!(
        text.replace('\n', " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .contains("4 mutexes of one family"),
        "{text}"
    );
}

/// Piped, with neither --width nor COLUMNS: a stable width, the same as
/// --width 100; --width wins over COLUMNS; a width below 40 is bad usage.
#[test]
fn piped_text_has_a_stable_width_and_width_overrides_columns() {
    let dir = record("contention", "text-width");
    let dir = dir.to_str().unwrap();
    let piped = text_report(&["report", dir], None);
    assert_fits(&piped, 100, "piped");
    assert!(
        longest_line(&piped) > 80,
        "piped text uses the stable width of 100:\n{piped}"
    );
    assert_eq!(piped, text_report(&["report", dir], None), "stable");
    assert_eq!(
        piped,
        text_report(&["report", dir, "--width", "100"], None),
        "piped is --width 100"
    );
    let sixty = text_report(&["report", dir, "--width", "60"], Some("200"));
    assert_fits(&sixty, 60, "--width 60 over COLUMNS=200");
    let out = locksuit_with_columns(&["report", dir, "--width", "20"], None);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}

/// `tiny` run by a shell that also runs `env`: three traces, one with
/// lock activity. Returns the directory, and the trace of each program.
fn shell_run(tag: &str) -> (PathBuf, PathBuf, PathBuf) {
    let tiny = build_c("tiny");
    let dir = fresh_dir(tag);
    let traces = dir.join("traces");
    let script = format!("{} > /dev/null && env > /dev/null", tiny.display());
    let out = run_locksuit(&[
        "run",
        "--dir",
        traces.to_str().unwrap(),
        "--format",
        "json",
        "--output",
        dir.join("run.json").to_str().unwrap(),
        "--",
        "/bin/sh",
        "-c",
        &script,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let all = traces_in(&traces);
    assert_eq!(all.len(), 3, "sh, tiny and env: {all:?}");
    let named = |part: &str| {
        all.iter()
            .find(|t| t.file_name().unwrap().to_string_lossy().contains(part))
            .unwrap_or_else(|| panic!("a {part} trace in {all:?}"))
            .clone()
    };
    (traces.clone(), named(".tiny."), named(".env."))
}

fn set_age(path: &Path, seconds_ago: u64) {
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(seconds_ago);
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(when))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// No PATH: the newest trace that recorded lock activity, not the newest
/// trace (the shell's or `env`'s), and stderr says which. A directory's
/// processes without lock activity share one line; --exe and --pid select
/// processes; an unknown one is bad usage; --top limits findings.
#[test]
fn report_picks_the_newest_active_trace_and_sums_up_idle_processes() {
    let (traces, tiny, env) = shell_run("text-default");
    // The shell's and env's traces are newer than tiny's, whatever the
    // file system's clock resolution.
    for t in traces_in(&traces) {
        set_age(&t, if t == tiny { 60 } else { 1 });
    }
    let mut cmd = Command::new(locksuit_path());
    cmd.args(["report", "--width", "80"])
        .env_remove("LD_PRELOAD")
        .env("LOCKSUIT_DIR", &traces);
    let out = run_captured(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(tiny.file_name().unwrap().to_str().unwrap())
            && stderr.contains("lock activity"),
        "stderr names the trace chosen: {stderr}"
    );
    let text = stdout_str(&out);
    assert!(
        text.contains("== ") && text.contains("tiny"),
        "tiny's report:\n{text}"
    );

    // The whole directory: tiny's report, then one line for sh and env.
    let dir = traces.to_str().unwrap();
    let text = text_report(&["report", dir, "--width", "80"], None);
    let headers: Vec<&str> = text.lines().filter(|l| l.starts_with("== ")).collect();
    assert_eq!(headers.len(), 1, "one process report:\n{text}");
    assert!(headers[0].contains("tiny"), "{text}");
    let idle: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("recorded no lock activity"))
        .collect();
    assert_eq!(idle.len(), 1, "{text}");
    assert!(
        idle[0].starts_with("2 more processes") && idle[0].contains("env (pid"),
        "{text}"
    );

    // --exe and --pid select processes.
    let json: Value = serde_json::from_str(&stdout_str(&run_locksuit(&[
        "report", dir, "--exe", "tiny", "--format", "json",
    ])))
    .expect("JSON");
    let p = only_process(&json);
    assert!(str_of(p, "exe").ends_with("/tiny"), "{}", short(p));
    let env_json = report_json(&[&env], None);
    let env_pid = u64_of(only_process(&env_json), "pid").to_string();
    let out = run_locksuit(&["report", dir, "--pid", &env_pid, "--format", "json"]);
    let json: Value = serde_json::from_str(&stdout_str(&out)).expect("JSON");
    assert_eq!(u64_of(only_process(&json), "pid").to_string(), env_pid);
    let out = run_locksuit(&["report", dir, "--exe", "no-such-program"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("tiny (pid"),
        "names what there is: {stderr}"
    );

    // --top 1 lists one finding and says how many it left out. With no
    // cost floor tiny has one or two: its private locks' single-thread-lock,
    // and a second (over-synchronization, or starvation when its threads
    // contended) that depends on how fast the run went.
    let floor = ["--min-acquisitions", "1"];
    let all = findings(only_process(&report_json_with(&[&tiny], &floor))).len();
    assert!(all >= 1, "tiny has a finding");
    let text = text_report(
        &[
            "report",
            tiny.to_str().unwrap(),
            "--top",
            "1",
            floor[0],
            floor[1],
        ],
        None,
    );
    assert!(
        text.contains("  1. [") && !text.contains("  2. ["),
        "{text}"
    );
    if all > 1 {
        assert!(
            text.contains(&format!("… and {} more findings", all - 1)),
            "{text}"
        );
    }
    let out = run_locksuit(&[
        "report",
        tiny.to_str().unwrap(),
        "--top",
        "1",
        "--format",
        "json",
        floor[0],
        floor[1],
    ]);
    let json: Value = serde_json::from_str(&stdout_str(&out)).expect("JSON");
    assert_eq!(findings(only_process(&json)).len(), 1);
}

/// Timed waits' deadlines (absolute, on REALTIME or MONOTONIC) print as
/// times from the process start, like the events' own times; the JSON keeps
/// the raw deadline and adds `deadline_since_start_ns`.
#[test]
fn deadlines_print_relative_to_the_process_start() {
    let dir = record("timed_waits", "text-deadlines");
    let dir = dir.to_str().unwrap();
    let out = run_locksuit(&["events", dir, "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let json: Value = serde_json::from_str(&stdout_str(&out)).expect("JSON");
    let p = only_process(&json);
    let start_unix = u64_of(p, "start_unix_ns") as i128;
    let start_mono = u64_of(p, "start_mono_ns") as i128;
    let mut seen = (0, 0);
    let mut expected_text = Vec::new();
    for s in arr(p, "streams") {
        for e in arr(s, "events") {
            let Some(deadline) = e["deadline_ns"].as_u64() else {
                continue;
            };
            // timed_waits asks for REALTIME deadlines (timedlock,
            // timedwrlock, sem_timedwait) and one MONOTONIC (clocklock).
            let wall = deadline > 100_000_000_000_000_000;
            let start = if wall { start_unix } else { start_mono };
            if wall {
                seen.0 += 1;
            } else {
                seen.1 += 1;
            }
            let since = e["deadline_since_start_ns"]
                .as_i64()
                .unwrap_or_else(|| panic!("deadline_since_start_ns in {}", short(e)));
            assert_eq!(since as i128, deadline as i128 - start, "{}", short(e));
            // The deadline falls after the request that carried it.
            if e["kind"] == "enter" {
                assert!(since > e["time_ns"].as_i64().unwrap(), "{}", short(e));
            }
            expected_text.push(since);
        }
    }
    assert_eq!(seen, (3, 1), "three wall-clock deadlines and one monotonic");
    let narrow = text_report(&["events", dir, "--width", "40"], None);
    assert_fits(&narrow, 40, "events at 40");
    let text = text_report(&["events", dir, "--width", "80"], None);
    assert_fits(&text, 80, "events at 80");
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for since in expected_text {
        let shown = format!("deadline at {}", human(since as u64));
        assert!(flat.contains(&shown), "{shown} in:\n{text}");
    }
    assert!(
        !flat
            .split(' ')
            .any(|w| w.len() >= 13 && w.chars().all(|c| c.is_ascii_digit())),
        "no raw nanosecond timestamps:\n{text}"
    );
}

/// The analyzer's short duration format (render::duration).
fn human(ns: u64) -> String {
    let ns = ns as f64;
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// `locksuit run --fail-on-findings` gates as `report`'s does: 1 when a
/// process has a finding and the command succeeded; the command's own
/// failure wins; 0 without findings.
#[test]
fn run_fail_on_findings_gates_like_report() {
    let tiny = build_c("tiny");
    let tiny = tiny.to_str().unwrap();
    let dir = fresh_dir("text-run-gate");
    let run = |sub: &str, gate: bool, cmd: &[&str]| {
        // tiny's private locks are a finding with no cost floor.
        let mut args = vec![
            "run",
            "--format",
            "summary",
            "--min-acquisitions",
            "1",
            "--dir",
        ];
        let d = dir.join(sub);
        args.push(d.to_str().unwrap());
        if gate {
            args.push("--fail-on-findings");
        }
        args.push("--");
        args.extend(cmd);
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        run_locksuit(&args)
    };
    let out = run("a", true, &[tiny]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let summary = stdout_str(&out);
    assert!(
        summary.contains("Failed the gate (--fail-on-findings): 1"),
        "{summary}"
    );
    assert!(summary.contains("single-thread-lock"), "{summary}");
    let out = run("b", false, &[tiny]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let failing = format!("{tiny} > /dev/null; exit 3");
    let out = run("c", true, &["/bin/sh", "-c", &failing]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    // A program without findings passes the gate.
    let out = run("d", true, &["/bin/true"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}

/// Runs `program args…` with its stderr (and stdout) on a pseudo-terminal,
/// through python3's pty module; returns what it wrote there.
fn on_a_terminal(program: &Path, args: &[&str]) -> (Option<i32>, String) {
    const SPAWN: &str = r#"
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
out = b""
while True:
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
sys.exit(os.waitstatus_to_exitcode(status))
"#;
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(SPAWN)
        .arg(program)
        .args(args)
        .env_remove("LD_PRELOAD")
        .env_remove("LOCKSUIT_DIR");
    let out = run_captured(cmd);
    (out.status.code(), stdout_str(&out))
}

/// A large trace shows its progress on stderr when stderr is a terminal,
/// and nothing at all when it is a pipe.
#[test]
fn reading_a_large_trace_shows_progress_on_a_terminal_only() {
    let bin = build_c("one_lock_loop");
    let dir = fresh_dir("text-progress");
    // 64 bytes per event, two events per pair: 300,000 pairs is 37 MiB,
    // over the 32 MiB from which progress is shown.
    let out = run_under_shim_env(&bin, &["300000"], &dir, &[("LOCKSUIT_EVENTS", "all")]);
    assert_success(&out, "one_lock_loop");
    let trace = only_trace(&dir);
    let size = std::fs::metadata(&trace).unwrap().len();
    assert!(size >= 32 << 20, "a large trace: {size} bytes");
    let trace = trace.to_str().unwrap();
    let args = ["report", trace, "--format", "json", "--output", "/dev/null"];

    let (status, terminal) = on_a_terminal(&locksuit_path(), &args);
    assert_eq!(status, Some(0), "{terminal}");
    assert!(
        terminal.contains("reading records") || terminal.contains("events ["),
        "progress on the terminal: {terminal:?}"
    );
    let piped = run_locksuit(&args);
    assert_eq!(piped.status.code(), Some(0), "{}", describe(&piped));
    assert!(
        piped.stderr.is_empty(),
        "nothing on a piped stderr: {}",
        describe(&piped)
    );
}
