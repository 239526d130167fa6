//! Full tracing (`LOCKSUIT_EVENTS=all`) and the flight recorder
//! (`LOCKSUIT_FLIGHT=1`), on one thread taking one lock N times: release i
//! leaves the lock's sequence at i, so which releases are in the trace says
//! exactly which part of the run was kept.

use locksuit_format::reader::read_trace;
use locksuit_format::*;
use locksuit_tests::*;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Enough operations to fill a 1 MiB trace several times over with events
/// (2 events of 64 bytes each per iteration).
const MANY: u64 = 60_000;

fn run(n: u64, env: &[(&str, &str)], tag: &str) -> (Output, PathBuf, Value) {
    let bin = build_c("one_lock_loop");
    let dir = fresh_dir(tag);
    let plain = run_plain(&bin, &[n.to_string()]);
    assert_success(&plain, "one_lock_loop without the shim");
    let out = run_under_shim_env(&bin, &[n.to_string()], &dir, env);
    assert_success(&out, tag);
    assert_eq!(
        stdout_value(&stdout_str(&out), "count"),
        n.to_string(),
        "the program's own output\n{}",
        describe(&out)
    );
    assert_eq!(out.status.code(), plain.status.code());
    let trace = only_trace(&dir);
    let p = only_process(&report_json(&[&trace], None)).clone();
    (out, trace, p)
}

/// Sequence numbers left by the recorded releases of the lock at `addr`, and
/// the number of recorded acquisitions of it.
fn releases_and_acquires(trace: &Path, addr: u64) -> (Vec<u32>, usize) {
    let t = read_trace(trace).unwrap_or_else(|e| panic!("{}: {e}", trace.display()));
    let id = trace_lock_id(&t, addr);
    let mine = |e: &EventRecord| e.lock_id == id;
    let kind = |e: &EventRecord| e.hdr.aux & 0xff;
    let mut releases: Vec<u32> = t
        .events
        .iter()
        .filter(mine)
        .filter(|e| kind(e) == EVENT_RELEASED)
        .map(|e| e.seq2)
        .collect();
    releases.sort_unstable();
    let acquires = t
        .events
        .iter()
        .filter(mine)
        .filter(|e| kind(e) == EVENT_ACQUIRED)
        .count();
    (releases, acquires)
}

fn lock_of<'a>(p: &'a Value, out: &Output) -> (&'a Value, u64) {
    let addr = stdout_value(&stdout_str(out), "lock");
    (lock_by_address(p, &addr), parse_addr(&addr))
}

#[test]
fn full_tracing_records_every_acquisition_and_release() {
    let n = 2000;
    let (out, trace, p) = run(n, &[("LOCKSUIT_EVENTS", "all")], "events_all");
    assert_eq!(str_of(&p, "events_mode"), "all");
    assert_eq!(p["events_overwritten"], Value::Bool(false));
    assert_eq!(u64_of(&p, "dropped_events"), 0, "{}", short(&p));
    let (lock, addr) = lock_of(&p, &out);
    assert_eq!(u64_of(lock, "acquisitions"), n);
    assert_eq!(u64_of(lock, "contended"), 0);
    assert_eq!(
        u64_of(lock, "hold_samples"),
        n,
        "every hold is timed: {}",
        short(lock)
    );
    let (releases, acquires) = releases_and_acquires(&trace, addr);
    assert_eq!(acquires as u64, n, "one ACQUIRED event per acquisition");
    let want: Vec<u32> = (1..=n as u32).collect();
    assert_eq!(
        releases, want,
        "one RELEASED event per release, sequences 1..=n"
    );
}

#[test]
fn default_mode_writes_no_events_for_uncontended_locks() {
    let n = 2000;
    let (out, trace, p) = run(n, &[], "events_default");
    assert_eq!(str_of(&p, "events_mode"), "contended");
    let (lock, addr) = lock_of(&p, &out);
    assert_eq!(u64_of(lock, "acquisitions"), n);
    assert_eq!(releases_and_acquires(&trace, addr), (vec![], 0));
}

#[test]
fn flight_recorder_keeps_the_newest_events_and_exact_counts() {
    let env = [
        ("LOCKSUIT_EVENTS", "all"),
        ("LOCKSUIT_FLIGHT", "1"),
        ("LOCKSUIT_MAX_MB", "1"),
    ];
    let (out, trace, p) = run(MANY, &env, "events_flight");
    assert!(std::fs::metadata(&trace).unwrap().len() <= 1 << 20);
    assert_eq!(p["events_overwritten"], Value::Bool(true), "{}", short(&p));
    assert!(
        arr(&p, "warnings")
            .iter()
            .any(|w| w.as_str().unwrap_or("").contains("overwritten")),
        "{}",
        short(&p["warnings"])
    );
    assert_eq!(
        u64_of(&p, "dropped_events"),
        0,
        "nothing is dropped: {}",
        short(&p)
    );
    let (lock, addr) = lock_of(&p, &out);
    assert_eq!(
        u64_of(lock, "acquisitions"),
        MANY,
        "counters cover the whole run"
    );
    let (releases, _) = releases_and_acquires(&trace, addr);
    let (first, last) = (releases[0], *releases.last().unwrap());
    assert_eq!(last as u64, MANY, "the newest release is kept");
    assert!(first > 1, "the oldest releases were overwritten");
    let want: Vec<u32> = (first..=last).collect();
    assert!(releases == want, "what is kept is one unbroken stretch ending at the last release: {first}..={last}, {} events", releases.len());
    assert!(
        releases.len() as u64 > MANY / 10,
        "most of the 1 MiB holds events: {} releases kept",
        releases.len()
    );
}

#[test]
fn without_flight_recorder_a_full_trace_keeps_the_oldest_and_counts_the_rest() {
    let env = [("LOCKSUIT_EVENTS", "all"), ("LOCKSUIT_MAX_MB", "1")];
    let (out, trace, p) = run(MANY, &env, "events_capped");
    assert_eq!(p["events_overwritten"], Value::Bool(false));
    let (lock, addr) = lock_of(&p, &out);
    assert_eq!(u64_of(lock, "acquisitions"), MANY);
    let (releases, acquires) = releases_and_acquires(&trace, addr);
    let kept = (releases.len() + acquires) as u64;
    assert_eq!(releases[0], 1, "the oldest release is kept");
    assert!(
        (*releases.last().unwrap() as u64) < MANY,
        "the newest are dropped"
    );
    assert_eq!(
        u64_of(&p, "dropped_events"),
        2 * MANY - kept,
        "every event not written is counted: {}",
        short(&p)
    );
}

#[test]
fn malformed_event_settings_warn_once_and_use_defaults() {
    for (var, value) in [("LOCKSUIT_EVENTS", "some"), ("LOCKSUIT_FLIGHT", "yes")] {
        let (out, _trace, p) = run(100, &[(var, value)], "events_malformed");
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{var}={value}: one line: {err}");
        assert!(lines[0].contains(var), "names {var}: {}", lines[0]);
        assert_eq!(str_of(&p, "events_mode"), "contended");
    }
}

/// Writes a request into a running program's trace header, as
/// `locksuit top` does.
fn ask(trace: &Path, request: u32) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(trace)
        .unwrap_or_else(|e| panic!("{}: {e}", trace.display()));
    let at = core::mem::offset_of!(FileHeader, control) as u64;
    file.write_all_at(&request.to_le_bytes(), at).unwrap();
}

/// Full tracing switched on while the program runs, then off again: the
/// releases of the middle phase are traced, from the shim's next look at
/// the request on (its sampled call, one in 1,024) to the same point after
/// the switch back; none of the first phase; every acquisition counted.
/// The mutex hooks' handlers for untimed engagements do not test whether
/// engagements are timed: the switch swaps them.
#[test]
fn full_tracing_switched_on_and_off_while_running_traces_only_between() {
    use std::io::{BufRead, BufReader, Write};
    let pairs: u32 = 20_000;
    // The request is seen within one sampled call: 1,024 calls, about 342
    // pairs (a pair counts three: the look, the acquisition, the release).
    let late: u32 = 1_100;
    let bin = build_c("switched_tracing");
    let dir = fresh_dir("events_switched");
    let mut child = std::process::Command::new(&bin)
        .arg(pairs.to_string())
        .env("LD_PRELOAD", shim_path())
        .env("LOCKSUIT_DIR", &dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut said = |want: &str| {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim_end(), want, "switched_tracing's stdout");
    };
    said("ready");
    let trace = only_trace(&dir);
    ask(&trace, CONTROL_EVENTS_ALL);
    stdin.write_all(b"go\n").unwrap();
    said("traced");
    ask(&trace, CONTROL_EVENTS_CONTENDED);
    stdin.write_all(b"go\n").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "switched_tracing failed");
    assert!(
        rest.contains(&format!("count {}", 3 * pairs)),
        "its output: {rest}"
    );

    // The same program without the shim says the same, but for where its
    // lock lies.
    let mut plain = std::process::Command::new(&bin)
        .arg(pairs.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    plain.stdin.take().unwrap().write_all(b"go\ngo\n").unwrap();
    let plain = plain.wait_with_output().unwrap();
    assert!(plain.status.success(), "switched_tracing without the shim");
    let without_lock = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with("lock "))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        without_lock(&String::from_utf8_lossy(&plain.stdout)),
        [
            vec!["ready".to_owned(), "traced".to_owned()],
            without_lock(&rest)
        ]
        .concat(),
        "the same output with and without the shim"
    );

    let p = only_process(&report_json(&[&trace], None)).clone();
    assert_eq!(str_of(&p, "events_mode"), "switched");
    let addr = stdout_value(&rest, "lock");
    let lock = lock_by_address(&p, &addr);
    assert_eq!(u64_of(lock, "acquisitions"), u64::from(3 * pairs));
    let (releases, acquires) = releases_and_acquires(&trace, parse_addr(&addr));
    let (first, last) = (releases[0], *releases.last().unwrap());
    assert!(
        first > pairs && first <= pairs + late,
        "traced from release {first}: the second phase starts after {pairs}"
    );
    assert!(
        last >= 2 * pairs && last <= 2 * pairs + late,
        "traced up to release {last}: the third phase starts after {}",
        2 * pairs
    );
    let want: Vec<u32> = (first..=last).collect();
    assert_eq!(releases, want, "every release in between traced");
    assert!(
        acquires.abs_diff(releases.len()) <= 1,
        "{acquires} acquisitions traced against {} releases",
        releases.len()
    );
}
