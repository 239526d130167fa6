//! Scale: 1,000 threads alive at once, 30,000 threads created and joined,
//! 1,000,000 locks alive at once — exact counts, and the shim's own memory
//! bounded as docs/performance.md documents (anonymous memory: the 64 MiB object
//! table at most, plus about 27 KiB per live thread; trace pages: the trace
//! size).

use locksuit_format::{read_trace, ObjectKind, MODE_EXCLUSIVE};
use locksuit_tests::*;
use std::process::Output;

const MIB: i64 = 1024;

/// (RssAnon, RssFile) in kB, as the program printed them.
fn memory(out: &Output) -> (i64, i64) {
    let stdout = stdout_str(out);
    let kb = |key: &str| -> i64 {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key} not printed:\n{stdout}"))
    };
    (kb("RssAnon:"), kb("RssFile:"))
}

fn run_both(args: &[&str], tag: &str) -> (Output, Output, std::path::PathBuf) {
    let bin = build_c("scale");
    let plain = run_plain(&bin, args);
    assert_success(&plain, &format!("scale {args:?} without the shim"));
    let dir = fresh_dir(tag);
    let traced = run_under_shim(&bin, args, &dir);
    assert_success(&traced, &format!("scale {args:?} under the shim"));
    assert!(
        traced.stderr.is_empty(),
        "the shim printed: {}",
        String::from_utf8_lossy(&traced.stderr)
    );
    (plain, traced, dir)
}

#[test]
fn thousand_live_threads() {
    let (plain, traced, dir) = run_both(&["live", "1000"], "scale-live");
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    assert_eq!(p["dropped_events"], 0);
    let shared = locks_engaged_in_function(p, "live_worker")
        .into_iter()
        .find(|l| u64_of(l, "threads") > 1)
        .expect("the shared lock");
    assert_eq!(u64_of(shared, "acquisitions"), 1000);
    assert_eq!(u64_of(shared, "threads"), 1000);
    let own: Vec<_> = locks_engaged_in_function(p, "live_worker")
        .into_iter()
        .filter(|l| u64_of(l, "threads") == 1)
        .collect();
    assert_eq!(own.len(), 1000, "one private lock per thread");
    assert_eq!(arr(p, "threads").len(), 1001, "1000 workers and main");

    let (anon0, file0) = memory(&plain);
    let (anon1, file1) = memory(&traced);
    assert!(
        anon1 - anon0 < 40 * MIB,
        "shim anonymous memory for 1000 live threads: {} kB",
        anon1 - anon0
    );
    // Each thread has its lane block and, as every worker waits at the
    // barrier (a blocking period, an event), an event block: 2 × 16 KiB.
    assert!(
        file1 - file0 < 40 * MIB,
        "trace pages for 1000 live threads: {} kB",
        file1 - file0
    );
}

#[test]
fn thirty_thousand_threads_recycle_their_state() {
    let (plain, traced, dir) = run_both(&["churn", "30000", "100"], "scale-churn");
    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    assert_eq!(p["dropped_events"], 0);
    let shared = locks_engaged_in_function(p, "churn_worker");
    assert_eq!(shared.len(), 1);
    assert_eq!(u64_of(shared[0], "acquisitions"), 30_000);
    assert_eq!(
        arr(p, "threads").len(),
        30_001,
        "every thread recorded, main included"
    );
    // Lanes (and their blocks) are recycled: about 100 live at once, so the
    // trace stays small although 30,000 threads came and went (without
    // recycling, a block each would be 469 MiB). How many lanes are live at
    // once depends on scheduling: 6.4 MiB on a quiet machine, 8.5 MiB seen
    // on a loaded one. Each thread's creation, start, exit and join are
    // events of the merged stream (4 x 64 bytes a thread: 7.3 MiB more).
    let size = std::fs::metadata(&trace).unwrap().len();
    assert!(
        size < 24 << 20,
        "trace of 30,000 short threads is {size} bytes"
    );
    let (anon0, _) = memory(&plain);
    let (anon1, _) = memory(&traced);
    assert!(
        anon1 - anon0 < 16 * MIB,
        "shim anonymous memory after 30,000 threads: {} kB",
        anon1 - anon0
    );
}

#[test]
fn a_million_live_locks() {
    let (plain, traced, dir) = run_both(&["locks", "1000000"], "scale-locks");
    let stdout = stdout_str(&traced);
    let first = parse_addr(&stdout_value(&stdout, "first"));
    let last = parse_addr(&stdout_value(&stdout, "last"));
    // Read the trace directly: a million locks as JSON would be ~500 MB.
    let trace = read_trace(&only_trace(&dir)).expect("readable trace");
    assert!(trace.warnings.is_empty(), "{:?}", trace.warnings);
    assert_eq!(trace.header.dropped_ops + trace.header.dropped_records, 0);
    let ours: std::collections::HashSet<u32> = trace
        .locks
        .iter()
        .filter(|l| l.kind == ObjectKind::Mutex as u32 && (first..=last).contains(&l.address))
        .map(|l| l.id)
        .collect();
    assert_eq!(ours.len(), 1_000_000, "one identity per lock");
    let engaged: u64 = trace
        .counters
        .iter()
        .filter(|(_, c)| ours.contains(&c.lock_id) && c.hdr.aux == MODE_EXCLUSIVE)
        .map(|(_, c)| c.engagements)
        .sum();
    assert_eq!(engaged, 1_000_000);
    assert_eq!(
        trace
            .destroys
            .iter()
            .filter(|d| ours.contains(&d.id))
            .count(),
        1_000_000
    );
    // The bounds: the object table (2 Mi slots x 32 bytes, 64 MiB) and the
    // thread's counter index at its largest (512 Ki slots x 32 bytes,
    // 16 MiB).
    let (anon0, _) = memory(&plain);
    let (anon1, _) = memory(&traced);
    assert!(
        anon1 - anon0 < 92 * MIB,
        "shim anonymous memory with 1M live locks: {} kB",
        anon1 - anon0
    );
}

/// A thread that engages 20,000 (lock, line) pairs in 10 rounds keeps one
/// counter record per pair (its index grows rather than evicting), so the
/// trace holds 20,000 counters, not one per round, and a 4 MiB cap that
/// would not fit 200,000 of them loses nothing.
#[test]
fn many_pairs_from_one_thread_keep_one_counter_each() {
    one_counter_per_pair(20_000, 10, Some("4"), "scale_rounds");
}

/// The same for 300,000 pairs, more than the index held before it could
/// grow past 262,144 slots: a fine-grained kernel (a lock per grid cell,
/// a few lines each) then evicted counters on every sweep, and its trace
/// grew by a fresh counter per pair and sweep until it reached its cap.
#[test]
fn three_hundred_thousand_pairs_from_one_thread_keep_one_counter_each() {
    one_counter_per_pair(300_000, 3, None, "scale_rounds_big");
}

fn one_counter_per_pair(locks: u64, rounds: u64, max_mb: Option<&str>, tag: &str) {
    let bin = build_c("lock_rounds");
    let dir = fresh_dir(tag);
    let env: Vec<(&str, &str)> = max_mb
        .map(|mb| ("LOCKSUIT_MAX_MB", mb))
        .into_iter()
        .collect();
    let out = run_under_shim_env(&bin, &[locks.to_string(), rounds.to_string()], &dir, &env);
    assert_success(&out, "lock_rounds under the shim");
    let trace_path = only_trace(&dir);
    let trace = read_trace(&trace_path).unwrap();
    assert_eq!(trace.header.dropped_records + trace.header.dropped_ops, 0);
    let round_counters = trace
        .counters
        .iter()
        .filter(|(_, c)| c.engagements == rounds)
        .count() as u64;
    assert_eq!(
        round_counters, locks,
        "one counter per lock, each with every round"
    );
    assert!(
        (trace.counters.len() as u64) < locks + 100,
        "no duplicate counters: {}",
        trace.counters.len()
    );
}

/// A fine-grained kernel (tests/c/fluid_cells.c: a lock per grid cell,
/// four threads each sweeping a band of 86,400 cells, each cell taken at
/// two lines by its own thread and at a third by the thread of the row
/// above) makes the same counters on every sweep. Its trace holds each
/// once, however many sweeps it makes: one per (cell, line), after two
/// sweeps and after six. Its acquisitions are the program's own count,
/// though each thread's by-lock cache grows on its second sweep (86,400
/// cells, three lines each, do not fit its first 65,536 sets), and it
/// prints what it prints without the shim.
#[test]
fn a_fine_grained_kernel_keeps_its_counters_across_sweeps() {
    let bin = build_c("fluid_cells");
    let counters = |steps: &str| {
        let dir = fresh_dir(&format!("scale_fluid_{steps}"));
        let out = run_under_shim(&bin, &["720", "480", steps, "4"], &dir);
        assert_success(&out, "fluid_cells under the shim");
        assert!(
            out.stderr.is_empty(),
            "the shim printed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let trace = read_trace(&only_trace(&dir)).unwrap();
        assert_eq!(trace.header.dropped_records + trace.header.dropped_ops, 0);
        // The program does what it does without the shim (its counts and
        // the grid's total mass, summed in a fixed order).
        let plain = run_plain(&bin, &["720", "480", steps, "4"]);
        assert_success(&plain, "fluid_cells");
        assert_eq!(
            stdout_str(&out),
            stdout_str(&plain),
            "output, {steps} sweeps"
        );
        let pairs_done: u64 = stdout_value(&stdout_str(&out), "pairs").parse().unwrap();
        let engagements: u64 = trace
            .counters
            .iter()
            .filter(|(_, c)| c.hdr.aux == MODE_EXCLUSIVE)
            .map(|(_, c)| c.engagements)
            .sum();
        assert_eq!(engagements, pairs_done, "acquisitions, {steps} sweeps");
        trace.counters.len()
    };
    // Three lines per cell, but the grid's first row is below no row.
    let pairs = 3 * 720 * 480 - 480;
    assert_eq!(
        counters("2"),
        pairs,
        "a counter per cell and line, two sweeps"
    );
    assert_eq!(counters("6"), pairs, "the same after six sweeps");
}
