//! Traces that change while locksuit reads them: a trace its process is
//! still writing is read up to what is there (never refused), and a trace
//! that another process cuts while it is read ends the report with exit 2
//! and one line naming it (not a silent SIGBUS).

use locksuit_tests::*;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The shim caps each trace at this many MiB, which bounds the disk these
/// tests use however long they take.
const CAP_MB: &str = "64";

/// Starts `growing PAIRS` under the shim, fully traced, and waits until it
/// says its trace is growing. It stops when its standard input is closed.
fn start_growing(dir: &Path, pairs: u32) -> (Child, BufReader<std::process::ChildStdout>) {
    let bin = build_c("growing");
    let mut child = Command::new(&bin)
        .arg(pairs.to_string())
        .env("LD_PRELOAD", shim_path())
        .env("LOCKSUIT_DIR", fs::canonicalize(dir).unwrap())
        .env("LOCKSUIT_EVENTS", "all")
        .env("LOCKSUIT_MAX_MB", CAP_MB)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn growing");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read growing's stdout");
    assert_eq!(line.trim(), "ready", "growing did not start");
    (child, stdout)
}

/// Closes `growing`'s standard input and waits for it; returns its last line.
fn stop_growing(mut child: Child, mut stdout: BufReader<std::process::ChildStdout>) -> String {
    drop(child.stdin.take());
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stdout, &mut rest);
    let status = child.wait().expect("wait for growing");
    assert!(status.success(), "growing failed: {status}");
    rest
}

fn trace_size(trace: &Path) -> u64 {
    fs::metadata(trace).map(|m| m.len()).unwrap_or(0)
}

/// Issue 10, item 6: 30 reports on a trace while its process keeps adding
/// blocks to it (new locks and every engagement as an event). Before the
/// fix about one report in 30 was refused as "truncated": the file was
/// mapped, then the writer backed another block and the header said so.
#[test]
fn a_trace_being_written_is_read_every_time() {
    let dir = fresh_dir("live-read");
    let (child, stdout) = start_growing(&dir, 200);
    let trace = only_trace(&dir);
    let first_size = trace_size(&trace);
    let mut read_while_written = 0;
    let mut incomplete = 0;
    for attempt in 1..=30 {
        let out = run_locksuit(&[
            "report".as_ref(),
            trace.as_os_str(),
            "--format".as_ref(),
            "json".as_ref(),
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "report {attempt} on the live trace\n{}",
            describe(&out)
        );
        let report: Value = serde_json::from_str(&stdout_str(&out)).expect("JSON");
        let process = only_process(&report);
        if process["complete"] == false {
            incomplete += 1;
        }
        let warned = arr(process, "warnings")
            .iter()
            .any(|w| w.as_str().unwrap_or("").contains("still writing it"));
        if warned {
            read_while_written += 1;
        }
    }
    let last_size = trace_size(&trace);
    let end = stop_growing(child, stdout);
    eprintln!(
        "trace grew from {first_size} to {last_size} bytes during the reports; \
         {read_while_written} of 30 caught the writer ahead of the mapping; {end}"
    );
    assert!(
        last_size > first_size,
        "the trace must grow while it is read ({first_size} -> {last_size})"
    );
    assert!(
        incomplete > 0,
        "at least the first reports saw a live trace"
    );
    // Once the process has exited, the same trace reads whole, as complete.
    let report = report_json(&[&trace], None);
    let process = only_process(&report);
    assert_eq!(process["complete"], true, "{}", short(process));
    assert!(
        !arr(process, "warnings")
            .iter()
            .any(|w| w.as_str().unwrap_or("").contains("still writing it")),
        "{}",
        short(&process["warnings"])
    );
    let _ = fs::remove_dir_all(&dir);
}

/// A finished trace of some megabytes (every engagement an event).
fn big_trace(dir: &Path) -> PathBuf {
    let (child, stdout) = start_growing(dir, 200);
    let trace = only_trace(dir);
    let start = Instant::now();
    while trace_size(&trace) < 24 << 20 && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop_growing(child, stdout);
    trace
}

/// Whether `pid` has `path` mapped.
fn maps_file(pid: u32, path: &Path) -> bool {
    let needle = path.to_string_lossy();
    fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| m.contains(needle.as_ref()))
}

/// Issue 10, item 9: the trace is cut to one block while locksuit has it
/// mapped. Before the fix locksuit died of SIGBUS without a word.
#[test]
fn a_trace_cut_while_it_is_read_is_an_error_naming_it() {
    let dir = fresh_dir("live-cut");
    let source_dir = dir.join("src");
    fs::create_dir(&source_dir).unwrap();
    let source = big_trace(&source_dir);
    let mut caught = 0;
    let mut finished_first = 0;
    for attempt in 0..5 {
        let victim = fs::canonicalize(&dir)
            .unwrap()
            .join(format!("locksuit.victim.{attempt}.trace"));
        fs::copy(&source, &victim).unwrap();
        let mut report = Command::new(locksuit_path())
            .args(["report".as_ref(), victim.as_os_str()])
            .args(["--format", "json"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn locksuit");
        let pid = report.id();
        // Cut the file as soon as locksuit has mapped it.
        let start = Instant::now();
        let mut cut = false;
        while start.elapsed() < Duration::from_secs(30) {
            if maps_file(pid, &victim) {
                fs::OpenOptions::new()
                    .write(true)
                    .open(&victim)
                    .unwrap()
                    .set_len(locksuit_format::BLOCK_SIZE as u64)
                    .unwrap();
                cut = true;
                break;
            }
            if report.try_wait().unwrap().is_some() {
                break;
            }
        }
        let out = report.wait_with_output().expect("wait for locksuit");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.signal().is_none(),
            "locksuit was killed by signal {:?}; stderr: {stderr}",
            out.status.signal()
        );
        if !cut || out.status.code() == Some(0) {
            // It had read everything before the cut: try again.
            finished_first += 1;
            continue;
        }
        assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        let name = victim.file_name().unwrap().to_string_lossy();
        assert!(stderr.contains(name.as_ref()), "names the file: {stderr}");
        caught += 1;
        break;
    }
    eprintln!("cut while read: {caught}; finished before the cut: {finished_first}");
    assert_eq!(
        caught, 1,
        "in 5 attempts the cut never came while locksuit was reading"
    );
    let _ = fs::remove_dir_all(&dir);
}
