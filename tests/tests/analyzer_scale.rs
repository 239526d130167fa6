//! The analyzer at scale: traces with hundreds of thousands of locks are
//! reported in bounded memory, a family of locks taken at the same lines is
//! one row and one finding, and running out of memory is exit status 2 with
//! a message, never an abort.
//!
//! Peak memory is the analyzer's own ru_maxrss (wait4). It also counts the
//! pages of the mapped trace, which the analyzer lets go of as it reads but
//! which the kernel maps in batches; so each bound is a budget for the
//! analyzer's own memory plus the trace's size, the most its pages can add.

use locksuit_tests::*;
use std::io::BufRead;
use std::path::Path;
use std::process::Command;

const MIB: u64 = 1024;

fn locksuit(args: &[&str]) -> Command {
    let mut cmd = Command::new(locksuit_path());
    cmd.args(args)
        .env_remove("LD_PRELOAD")
        .env_remove("LOCKSUIT_DIR");
    cmd
}

fn size_kb(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len()) / 1024
}

/// How many lines of a (large) output file contain each needle, read once
/// as a stream.
fn count_lines(path: &Path, needles: &[&str]) -> Vec<usize> {
    let file = std::fs::File::open(path).expect("output file");
    let mut counts = vec![0; needles.len()];
    for line in std::io::BufReader::new(file).lines().map_while(Result::ok) {
        for (n, needle) in needles.iter().enumerate() {
            if line.contains(needle) {
                counts[n] += 1;
            }
        }
    }
    counts
}

/// `scale locks N` under the shim: N heap mutexes, each initialised, locked
/// and unlocked once at one line by the main thread.
fn many_locks_trace(n: u64, tag: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let bin = build_c("scale");
    let dir = fresh_dir(tag);
    let n = n.to_string();
    let out = run_under_shim(&bin, &["locks", n.as_str()], &dir);
    assert_success(&out, "scale locks");
    assert_eq!(stdout_value(&stdout_str(&out), "locks"), n);
    (only_trace(&dir), dir)
}

#[test]
fn a_family_of_200000_locks_is_one_row_and_one_finding_in_bounded_memory() {
    const LOCKS: u64 = 200_000;
    let (trace, dir) = many_locks_trace(LOCKS, "scale-analyzer-locks");
    let trace_str = trace.to_str().unwrap();
    let trace_kb = size_kb(&trace);

    // Text: a few dozen lines, whatever the number of locks.
    let text = run_measured(locksuit(&["report", trace_str]), &dir.join("report.txt"));
    assert!(text.status.success(), "{}", text.stderr);
    let report = std::fs::read_to_string(&text.stdout).unwrap();
    assert!(
        report.lines().count() < 60,
        "a bounded text report:\n{report}"
    );
    assert!(
        report.contains(&format!("{LOCKS} locks (1 family)")),
        "{report}"
    );
    // One run: what one thread alone took is an observation.
    let unnecessary: Vec<&str> = report
        .lines()
        .filter(|l| l.contains("[single-thread-lock]"))
        .collect();
    assert_eq!(
        unnecessary.len(),
        1,
        "one finding for the family:\n{report}"
    );
    // The locks are named by the line that made them (a stable name), the
    // family's members numbered. (The finding is wrapped to the width.)
    let flat = report.split_whitespace().collect::<Vec<_>>().join(" ");
    let finding = &flat[flat.find("[single-thread-lock]").unwrap()..];
    assert!(
        finding.contains(&format!("{LOCKS} mutexes of one family, main@scale.c:"))
            && finding.contains(&format!("#5 and {} more", LOCKS - 5)),
        "{finding}"
    );
    assert!(
        report.contains("│ main@scale"),
        "the family is one row of the locks table:\n{report}"
    );
    // The model holds ~224 bytes per lock, the reader ~170 bytes per lock of
    // records (let go of as the model is built); the rest is fixed. Before
    // families and the compact model this took over 1 GB.
    let budget = 400 * LOCKS / 1024 + 48 * MIB;
    assert!(
        text.max_rss_kb <= budget + trace_kb,
        "text report of {LOCKS} locks: peak {} KiB, budget {budget} KiB + trace {trace_kb} KiB",
        text.max_rss_kb
    );

    // JSON: every lock is listed, the finding covers the family.
    let json = run_measured(
        locksuit(&["report", trace_str, "--format", "json"]),
        &dir.join("report.json"),
    );
    assert!(json.status.success(), "{}", json.stderr);
    let family_size = format!(r#""family_size": {LOCKS}"#);
    let counts = count_lines(
        &json.stdout,
        &[
            r#""id": "main@scale.c:91#"#,
            r#""kind": "single-thread-lock""#,
            &family_size,
        ],
    );
    assert_eq!(counts[0] as u64, LOCKS, "every lock has its entry");
    assert_eq!(counts[1], 1, "one single-thread-lock finding");
    assert_eq!(counts[2], 1, "the finding names its family's size");
    assert!(
        json.max_rss_kb <= budget + trace_kb,
        "JSON report of {LOCKS} locks: peak {} KiB, budget {budget} KiB + trace {trace_kb} KiB",
        json.max_rss_kb
    );
    eprintln!(
        "{LOCKS} locks: text peak {} KiB, JSON peak {} KiB ({} MiB of JSON), trace {trace_kb} KiB",
        text.max_rss_kb,
        json.max_rss_kb,
        size_kb(&json.stdout) / MIB
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_fluid_simulation_trace_is_reported_within_200_mib_of_its_own() {
    // 720 x 480 cells, each with its own mutex, 2 steps, 4 threads, every
    // operation an event: 345,600 locks and 4,147,200 events (see
    // tests/c/fluid_cells.c), the shape of a real fluid simulation's trace.
    let bin = build_c("fluid_cells");
    let dir = fresh_dir("scale-analyzer-fluid");
    let out = run_under_shim_env(
        &bin,
        &["720", "480", "2", "4"],
        &dir,
        &[("LOCKSUIT_EVENTS", "all"), ("LOCKSUIT_MAX_MB", "1024")],
    );
    assert_success(&out, "fluid_cells");
    let stdout = stdout_str(&out);
    let cells: u64 = stdout_value(&stdout, "cells").parse().unwrap();
    let pairs: u64 = stdout_value(&stdout, "pairs").parse().unwrap();
    let shared_rows: u64 = stdout_value(&stdout, "shared-rows").parse().unwrap();
    assert_eq!((cells, pairs), (345_600, 3 * 345_600 * 2));
    let trace = only_trace(&dir);
    let trace_str = trace.to_str().unwrap();
    let trace_kb = size_kb(&trace);
    let budget = 200 * MIB;

    let text = run_measured(locksuit(&["report", trace_str]), &dir.join("report.txt"));
    assert!(text.status.success(), "{}", text.stderr);
    let report = std::fs::read_to_string(&text.stdout).unwrap();
    // Compact whatever the run: 345,600 locks must not mean more rows. A
    // thread preempted holding a cell's lock (2 cores, 4 threads) adds the
    // fixed-size tables of a contended run (who blocks whom, blocking
    // stacks, waits and holds), which took one run past 100 lines.
    assert!(report.lines().count() < 150, "{report}");
    assert!(
        // Every cell's lock is made at one line: one family.
        report.contains(&format!("{cells} locks (1 family)")),
        "{report}"
    );
    // Every acquisition and release; the four workers' creation, start,
    // exit and join (16 events); and the joins that blocked long enough to
    // be recorded as blocking calls (up to 4).
    let events: u64 = report
        .split(" events (every operation)")
        .next()
        .and_then(|before| before.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no event count in {report}"));
    assert!(
        (2 * pairs + 16..=2 * pairs + 20).contains(&events),
        "{events} events, expected {} and 16 to 20 of the workers' lives: {report}",
        2 * pairs
    );
    // Every cell's lock is made at one line (one family); the first row of
    // each band but the first is also engaged by the band above, so the
    // family is shared: which cells a run used from one thread alone is how
    // it split the grid, not a lock that could go.
    assert!(shared_rows > 0, "{stdout}");
    for kind in ["[single-thread-lock]", "[unnecessary-lock]"] {
        assert!(!report.contains(kind), "{kind}:\n{report}");
    }
    assert!(
        text.max_rss_kb <= budget + trace_kb,
        "text report: peak {} KiB, budget {budget} KiB + trace {trace_kb} KiB",
        text.max_rss_kb
    );

    let json = run_measured(
        locksuit(&["report", trace_str, "--format", "json"]),
        &dir.join("report.json"),
    );
    assert!(json.status.success(), "{}", json.stderr);
    let events = format!(r#""events": {events}"#);
    let counts = count_lines(
        &json.stdout,
        &[
            r#""id": "main@fluid_cells.c:87#"#,
            r#""kind": "single-thread-lock""#,
            &events,
        ],
    );
    assert_eq!(counts[0] as u64, cells, "every lock has its entry");
    assert_eq!(counts[1], 0, "no single-thread-lock: the family is shared");
    assert_eq!(counts[2], 1, "the same events as the text report");
    assert!(
        json.max_rss_kb <= budget + trace_kb,
        "JSON report: peak {} KiB, budget {budget} KiB + trace {trace_kb} KiB",
        json.max_rss_kb
    );
    eprintln!(
        "fluid: text peak {} KiB, JSON peak {} KiB, trace {trace_kb} KiB",
        text.max_rss_kb, json.max_rss_kb
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn running_out_of_memory_is_exit_status_2_with_a_message() {
    let (trace, dir) = many_locks_trace(100_000, "scale-analyzer-oom");
    let trace_str = trace.to_str().unwrap();
    let trace_kb = size_kb(&trace);
    // Address-space limits from just above the trace's mapping (the report
    // needs some 50 MiB more) to enough for it: each run either reports or
    // fails with status 2 and one line naming the trace; never a signal.
    let mut out_of_memory = 0;
    for extra_mib in [8, 16, 24, 32, 48, 256] {
        let limit_kb = trace_kb + extra_mib * MIB;
        let out = run_captured({
            let mut cmd = Command::new("/bin/sh");
            cmd.arg("-c")
                .arg(format!(
                    "ulimit -v {limit_kb} && exec \"$0\" report \"$1\" > /dev/null"
                ))
                .arg(locksuit_path())
                .arg(trace_str)
                .env_remove("LD_PRELOAD");
            cmd
        });
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => assert!(stderr.is_empty(), "{stderr}"),
            Some(2) => {
                assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
                assert!(
                    stderr.starts_with(&format!("locksuit: {trace_str}: ")),
                    "names the trace: {stderr}"
                );
                if stderr.contains("out of memory") {
                    out_of_memory += 1;
                }
            }
            _ => panic!(
                "limit {limit_kb} KiB: exit status {} (never an abort): {stderr}",
                out.status
            ),
        }
    }
    assert!(
        out_of_memory > 0,
        "some limit must run the report out of memory"
    );
    // And with room enough, the same trace is reported.
    assert!(run_locksuit(&["report", trace_str]).status.success());
    let _ = std::fs::remove_dir_all(&dir);
}
