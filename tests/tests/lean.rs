//! Lean mode (`LOCKSUIT_MODE=lean`, issue 37): counts exact, contended
//! waits as the program measured them, who blocked whom at the holder's
//! line, and the findings a lean trace cannot give absent rather than
//! wrong. Each program is also run plain: the output must not change.

use locksuit_tests::*;

const LEAN: &[(&str, &str)] = &[("LOCKSUIT_MODE", "lean")];

fn run_lean(
    bin: &std::path::Path,
    args: &[&str],
    name: &str,
) -> (String, Value, std::path::PathBuf) {
    let plain = run_plain(bin, args);
    let dir = fresh_dir(name);
    let out = run_under_shim_env(bin, args, &dir, LEAN);
    assert_success(&out, name);
    assert_same_output_keys(&plain, &out);
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report).clone();
    assert_eq!(str_of(&p, "recording"), "lean", "{name}");
    (stdout_str(&out), p, dir)
}

/// tests/c/holder.c `rounds`: ten holds of 20 ms, each made main wait.
#[test]
fn lean_counts_are_exact_and_waits_are_the_programs() {
    let bin = build_c("holder");
    let (stdout, p, dir) = run_lean(&bin, &["rounds"], "lean_rounds");
    let waited: u64 = stdout_value(&stdout, "waited-ns").parse().unwrap();
    let lock = lock_by_id(&p, "&held_lock");
    // The holder and main each take it once a round; main waits each time.
    assert_eq!(u64_of(lock, "acquisitions"), 20, "{}", short(lock));
    assert_eq!(u64_of(lock, "contended"), 10, "{}", short(lock));
    // Measured inside main's lock calls, which the program timed around.
    let wait = u64_of(lock, "wait_ns");
    assert!(
        wait <= waited && wait * 10 >= waited * 9,
        "{wait} ns recorded, main measured {waited} ns: {}",
        short(lock)
    );
    // No owner changes or timed holds: lean keeps nothing per hold.
    assert_eq!(u64_of(lock, "owner_changes"), 0, "{}", short(lock));
    assert_eq!(u64_of(lock, "hold_samples"), 0, "{}", short(lock));
    // Who blocked whom, named by the holder's own line.
    let rows = p["blocking"].as_array().expect("blocking rows");
    assert!(
        rows.iter()
            .any(|r| r["lock"] == "&held_lock" && u64_of(r, "count") == 10),
        "{}",
        short(&p["blocking"])
    );
    let text = stdout_str(&run_locksuit(&[
        "report",
        dir.to_str().unwrap(),
        "--width",
        "200",
    ]));
    let functions = text
        .split("Which functions block which")
        .nth(1)
        .unwrap_or_else(|| panic!("no function table: {text}"));
    assert!(
        functions
            .lines()
            .take(6)
            .any(|l| l.contains("hold_rounds") && l.contains("rounds")),
        "{text}"
    );
    // The report says once what a lean trace cannot give.
    assert!(text.matches("recorded lean").count() == 1, "{text}");
    // Both lines made a task switch each round: the holder's is counted
    // from the releases it wrote, so its line is no less suitable than in
    // the full mode.
    for site in p["sites"].as_array().unwrap() {
        assert_eq!(u64_of(site, "task_switches"), 10, "{}", short(site));
        assert_ne!(
            str_of(site, "status"),
            "apparently-unsuitable",
            "{}",
            short(site)
        );
    }
}

/// tests/c/contention.c: the holder sleeps under the lock. The full mode
/// says blocking-under-lock; lean mode keeps no held locks, so it must say
/// nothing of the kind, and nothing wrong instead.
#[test]
fn what_lean_cannot_see_is_absent_not_wrong() {
    let bin = build_c("contention");
    let (stdout, p, _) = run_lean(&bin, &[], "lean_contention");
    let lock = lock_by_address(&p, &stdout_value(&stdout, "lock"));
    assert_eq!(u64_of(lock, "acquisitions"), 20, "{}", short(lock));
    assert_eq!(u64_of(lock, "contended"), 10, "{}", short(lock));
    let kinds: Vec<&str> = findings(&p).iter().map(|f| str_of(f, "kind")).collect();
    for absent in [
        "blocking-under-lock",
        "misuse",
        "potential-deadlock",
        "unnecessary-lock",
    ] {
        assert!(
            !kinds.contains(&absent),
            "{kinds:?}: {}",
            short(&p["findings"])
        );
    }

    // A lock-order inversion: lean keeps no lock order, so no cycle.
    let bin = build_c("lock_order");
    let (_, p, _) = run_lean(&bin, &["abba"], "lean_lock_order");
    assert!(
        findings(&p)
            .iter()
            .all(|f| str_of(f, "kind") != "potential-deadlock"),
        "{}",
        short(&p["findings"])
    );
    let taken: u64 = p["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| u64_of(l, "acquisitions"))
        .sum();
    assert!(taken > 0, "{}", short(&p["locks"]));
}

/// Condition waits release and retake their mutex inside the C library:
/// lean mode must neither call that misuse nor lose the waits.
#[test]
fn condition_waits_in_lean_mode_are_no_misuse() {
    let bin = build_c("conds");
    let (stdout, p, _) = run_lean(&bin, &[], "lean_conds");
    // As tests/tests/conds.rs counts them: 12 handshakes, 20 timed waits.
    let (h, t) = (12, 20);
    let m = lock_by_address(&p, &stdout_value(&stdout, "mutex"));
    assert_eq!(u64_of(m, "cond_reacquires"), h + t, "{}", short(m));
    assert_eq!(u64_of(m, "acquisitions"), h + h + 1 + h + t, "{}", short(m));
    assert!(
        findings(&p).iter().all(|f| str_of(f, "kind") != "misuse"),
        "{}",
        short(&p["findings"])
    );
    let waits: u64 = p["conds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| u64_of(c, "waits"))
        .sum();
    assert!(waits > 0, "{}", short(&p["conds"]));
}

/// A mode the shim does not know: one warning, the full mode.
#[test]
fn an_unknown_mode_is_said_and_the_full_mode_used() {
    let bin = build_c("contention");
    let dir = fresh_dir("lean_bad_mode");
    let out = run_under_shim_env(&bin, &[] as &[&str], &dir, &[("LOCKSUIT_MODE", "thin")]);
    assert_success(&out, "bad mode");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("LOCKSUIT_MODE must be 'full' or 'lean'"),
        "{stderr}"
    );
    let report = report_json(&[&only_trace(&dir)], None);
    assert_eq!(str_of(only_process(&report), "recording"), "full");
}

/// `locksuit run --lean` records lean.
#[test]
fn run_lean_records_lean() {
    let bin = build_c("contention");
    let dir = fresh_dir("lean_run");
    let out = run_locksuit(&[
        "run",
        "--lean",
        "--format",
        "json",
        "--dir",
        dir.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    assert_eq!(str_of(p, "recording"), "lean");
    let contended: u64 = p["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| u64_of(l, "contended"))
        .sum();
    assert_eq!(contended, 10, "{}", short(&p["locks"]));
}

/// tests/c/signal_storm.c: main's two million lock calls interrupted
/// every 20 µs by a handler that locks another mutex. Lean mode's quick
/// path enters no hook, so the handler's calls run the shim in the middle
/// of it: main's count must stay exact, and each of the handler's calls be
/// recorded or passed through and counted as dropped, in either mode.
#[test]
fn signal_handlers_that_lock_leave_counts_exact() {
    let bin = build_c("signal_storm");
    for mode in ["lean", "full"] {
        let dir = fresh_dir(&format!("signal_storm_{mode}"));
        let out = run_under_shim_env(&bin, &["2000000"], &dir, &[("LOCKSUIT_MODE", mode)]);
        assert_success(&out, mode);
        let stdout = stdout_str(&out);
        let report = report_json(&[&only_trace(&dir)], None);
        let p = only_process(&report);
        let a = lock_by_address(p, &stdout_value(&stdout, "a"));
        assert_eq!(u64_of(a, "acquisitions"), 2_000_000, "{mode}: {}", short(a));
        let handled: u64 = stdout_value(&stdout, "b-locks").parse().unwrap();
        let b = lock_by_address(p, &stdout_value(&stdout, "b"));
        let recorded = u64_of(b, "acquisitions");
        let dropped = u64_of(p, "dropped_events");
        // A handler call passed through is counted as dropped: its lock
        // and, in the full mode, its unlock too (lean's unlock records
        // nothing to drop).
        let passed = if mode == "full" { dropped / 2 } else { dropped };
        assert_eq!(
            recorded + passed,
            handled,
            "{mode}: the handler locked {handled} times; {recorded} recorded, {dropped} dropped"
        );
    }
}

/// tests/c/trylock_counts.c: failed and successful trylocks, counted as
/// the full mode counts them.
#[test]
fn lean_trylocks_are_counted() {
    let bin = build_c("trylock_counts");
    for mode in ["lean", "full"] {
        let dir = fresh_dir(&format!("trylock_counts_{mode}"));
        let out = run_under_shim_env(&bin, &[] as &[&str], &dir, &[("LOCKSUIT_MODE", mode)]);
        assert_success(&out, mode);
        let stdout = stdout_str(&out);
        let report = report_json(&[&only_trace(&dir)], None);
        let p = only_process(&report);
        assert_eq!(str_of(p, "recording"), mode);
        let m = lock_by_address(p, &stdout_value(&stdout, "m"));
        let busy: u64 = stdout_value(&stdout, "busy").parse().unwrap();
        let taken: u64 = stdout_value(&stdout, "taken").parse().unwrap();
        assert_eq!(u64_of(m, "try_failures"), busy, "{mode}: {}", short(m));
        assert_eq!(u64_of(m, "acquisitions"), taken + 1, "{mode}: {}", short(m));
    }
}

/// What a continuous-profiling backend ingests: the pprof profile of a lean
/// trace, read by `go tool pprof` (skipped, saying so, without Go), has
/// main's waits in its lock calls as main measured them.
#[test]
fn a_lean_trace_makes_a_pprof_profile() {
    let Some(go) = ["/usr/bin/go", "/usr/lib/go/bin/go"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.exists())
    else {
        eprintln!("go is not installed; the pprof check is skipped");
        return;
    };
    let bin = build_c("holder");
    let (stdout, _, dir) = run_lean(&bin, &["rounds"], "lean_pprof");
    let waited: u64 = stdout_value(&stdout, "waited-ns").parse().unwrap();
    let profile = dir.join("lean.pb.gz");
    let made = run_locksuit(&[
        "report",
        "--format",
        "pprof",
        "-o",
        profile.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert_success(&made, "report --format pprof");
    let out = std::process::Command::new(go)
        .args(["tool", "pprof", "-top", "-unit=ms"])
        .arg(&profile)
        .env("HOME", &dir)
        .env("PPROF_TMPDIR", &dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let top = stdout_str(&out);
    // The row of the lock call main waited in: "  196.54ms 47.40% ... pthread_mutex_lock".
    let shown: f64 = top
        .lines()
        .find(|l| l.trim_end().ends_with(" pthread_mutex_lock"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|flat| flat.strip_suffix("ms"))
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("{top}"));
    let waited_ms = waited as f64 / 1e6;
    assert!(
        shown <= waited_ms * 1.01 && shown >= waited_ms * 0.9,
        "{shown} ms in the profile, main waited {waited_ms} ms: {top}"
    );
}

/// More lines than a thread's table of lines takes (tests/c/fluid_cells.c:
/// 10,000 cells engaged at three lines each by two threads, about 15,000
/// lines a thread against the table's 8,192), each used again and again:
/// every engagement counted once, whether the table found it or the
/// general way did.
#[test]
fn more_lines_than_the_table_takes_are_all_counted() {
    let bin = build_c("fluid_cells");
    let (stdout, p, _) = run_lean(&bin, &["100", "100", "6", "2"], "lean_many_lines");
    let pairs: u64 = stdout_value(&stdout, "pairs").parse().unwrap();
    let cells: usize = stdout_value(&stdout, "cells").parse().unwrap();
    let cell_locks: Vec<&Value> = locks(&p)
        .iter()
        .filter(|l| u64_of(l, "acquisitions") > 1)
        .collect();
    assert_eq!(cell_locks.len(), cells, "every cell's lock was engaged");
    let acquired: u64 = cell_locks.iter().map(|l| u64_of(l, "acquisitions")).sum();
    assert_eq!(acquired, pairs, "the program's own count of lock pairs");
    let engaged: u64 = p["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| u64_of(s, "engagements"))
        .sum();
    let all: u64 = locks(&p).iter().map(|l| u64_of(l, "acquisitions")).sum();
    assert_eq!(engaged, all, "the lines' counts add up to the locks'");
}

/// 20,000 mutexes made and taken once each, between two batches of a
/// marker taken at one line: the table of lines fills to its limit and
/// refuses more, the thread's quick path stops looking in it, and the
/// marker's line, learned before, is still counted (by the hot cache).
#[test]
fn a_full_table_of_lines_still_counts_its_lines() {
    let bin = build_c("many_locks");
    let (stdout, p, _) = run_lean(&bin, &["20000"], "lean_full_table");
    let marker = lock_by_address(&p, &stdout_value(&stdout, "marker"));
    assert_eq!(u64_of(marker, "acquisitions"), 100, "{}", short(marker));
    let once = locks(&p)
        .iter()
        .filter(|l| l["address"] != marker["address"])
        .filter(|l| u64_of(l, "acquisitions") == 1)
        .count();
    assert_eq!(once, 20_000);
}

/// tests/c/lane_reuse.c: threads one after another on the same two lines.
/// Each new thread takes over the last one's lane, table of lines
/// included: every thread's count is its own, in either mode.
#[test]
fn a_thread_that_takes_over_a_lane_counts_into_its_own_records() {
    let bin = build_c("lane_reuse");
    let plain = run_plain(&bin, &["6"]);
    for mode in ["lean", "full"] {
        let dir = fresh_dir(&format!("lane_reuse_{mode}"));
        let out = run_under_shim_env(&bin, &["6"], &dir, &[("LOCKSUIT_MODE", mode)]);
        assert_success(&out, mode);
        assert_same_output_keys(&plain, &out);
        let stdout = stdout_str(&out);
        let report = report_json(&[&only_trace(&dir)], None);
        let p = only_process(&report);
        let mut want: Vec<u64> = (1..=6)
            .map(|i| {
                stdout_value(&stdout, &format!("thread{i}"))
                    .parse()
                    .unwrap()
            })
            .collect();
        want.push(0); // main takes neither
        want.sort();
        let mut per: Vec<u64> = arr(p, "threads")
            .iter()
            .map(|t| u64_of(t, "acquisitions"))
            .collect();
        per.sort();
        assert_eq!(per, want, "{mode}: {}", short(&p["threads"]));
    }
}
