//! Policy rules beyond processes, threads and short waits (docs/policy.md):
//! snapshot triggers, objects and sites of interest, the waiter-count
//! threshold, sampling and call-chain depth. Ground truth from
//! tests/c/snapshots.c, whose waiters pile onto one lock one at a time.

use locksuit_tests::*;
use serde_json::Value;
use std::path::Path;

/// Runs snapshots.c under `policy`; returns its output and its report.
fn run_with(bin: &Path, name: &str, policy: Option<&str>) -> (String, Value) {
    let dir = fresh_dir(name);
    let env: Vec<(&str, String)> = policy
        .map(|text| ("LOCKSUIT_POLICY", write_policy(&dir, text)))
        .into_iter()
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = run_under_shim_env(bin, &[] as &[&str], &dir, &env);
    assert_success(&out, name);
    assert!(out.stderr.is_empty(), "{}", describe(&out));
    (stdout_str(&out), report_json(&[&dir], None))
}

fn first_function(stack: &Value) -> &str {
    stack[0]["function"].as_str().unwrap_or("?")
}

/// The functions of a copied stack's frames in the test program's own
/// sources, innermost first.
fn own_functions(stack: &Value) -> Vec<&str> {
    arr(stack, "frames")
        .iter()
        .filter(|f| {
            let file = f["file"].as_str().unwrap_or("");
            file == "snapshots.c" || file == "common.h"
        })
        .filter_map(|f| f["function"].as_str())
        .collect()
}

/// Checks the stacks copied for threads in unrecorded system calls: the
/// reader, in `fgets` all along, every time, and the raw reader, in a
/// `syscall` instruction of a frame-pointer function (the walk must find
/// its frame record past stale ones); the holder, which polls with
/// `nanosleep` and stdio reads of `/proc`, whenever its stack was copied
/// (in a call it stayed in) or sampled (running); the spinner, running in user
/// space, whenever the kernel sampled it. Returns how many holder and
/// spinner stacks were checked.
fn check_copied_stacks(
    s: &Value,
    (holder, spinner): (u64, u64),
    (reader, raw_reader): (u64, u64),
) -> (usize, usize) {
    let threads = arr(s, "threads");
    let of = |tid: u64| {
        threads
            .iter()
            .find(|t| u64_of(t, "tid") == tid)
            .unwrap_or_else(|| panic!("thread {tid} missing: {s}"))
    };
    for (tid, expected) in [
        (reader, ["wait_for_line", "reader"]),
        (raw_reader, ["raw_wait_for_byte", "raw_reader"]),
    ] {
        let r = of(tid);
        assert!(r["waiting"].is_null(), "{r}");
        assert_eq!(str_of(r, "syscall"), "read", "{r}");
        assert_eq!(own_functions(&r["stack"]), expected, "{r}");
        assert_eq!(r["stack"]["complete"], true, "{r}");
    }
    let spun = of(spinner);
    let spun = match spun["stack"].is_null() {
        true => 0,
        false => {
            assert!(spun["syscall"].is_null(), "{spun}");
            let own = own_functions(&spun["stack"]);
            assert_eq!(own, ["spin_until_stopped", "spinner"], "{spun}");
            1
        }
    };
    let h = of(holder);
    if h["stack"].is_null() {
        return (0, spun);
    }
    let own = own_functions(&h["stack"]);
    if h["syscall"].is_null() {
        // Sampled while running: polling, or (the sample comes after
        // 100 µs of its running) already starting the next waiter.
        assert!(own.ends_with(&["hold_and_pile", "main"]), "{h}");
    } else {
        assert!(
            own.ends_with(&["start_and_wait_blocked", "hold_and_pile", "main"]),
            "{h}"
        );
        // It polls (sleeps, reads /proc) or starts the next waiter.
        assert!(
            ["sleep_ms", "in_syscall", "start_and_wait_blocked"].contains(&own[0]),
            "the holder is in one of these: {h}"
        );
    }
    assert_eq!(h["stack"]["complete"], true, "{h}");
    // A thread in a recorded wait keeps its wait's stack instead.
    for t in threads.iter().filter(|t| !t["waiting"].is_null()) {
        assert!(t["stack"].is_null(), "{t}");
    }
    (1, spun)
}

/// Every thread's run statistics so far, in each snapshot: they only
/// grow from one snapshot to the next; the spinner's CPU time grows while
/// it spins and stays within what it read itself at its end (`getrusage`
/// counts whole microseconds).
fn check_run_statistics(snapshots: &[Value], spinner: u64, spinner_own_cpu: u64) {
    let mut last: std::collections::HashMap<u64, (u64, u64)> = Default::default();
    for s in snapshots {
        for t in arr(s, "threads") {
            let now = (u64_of(t, "cpu_ns"), u64_of(t, "voluntary_switches"));
            assert!(t["runnable_ns"].is_u64(), "{t}");
            assert!(t["involuntary_switches"].is_u64(), "{t}");
            if let Some(before) = last.insert(u64_of(t, "tid"), now) {
                assert!(
                    now.0 >= before.0 && now.1 >= before.1,
                    "{before:?} then {t}"
                );
            }
        }
    }
    let spun = |s: &Value| {
        arr(s, "threads")
            .iter()
            .find(|t| u64_of(t, "tid") == spinner)
            .map(|t| u64_of(t, "cpu_ns"))
            .unwrap_or_else(|| panic!("no spinner in {s}"))
    };
    let (first, end) = (spun(&snapshots[0]), spun(&snapshots[snapshots.len() - 1]));
    assert!(end > first, "the spinner spun: {first} then {end} ns");
    assert!(
        end <= spinner_own_cpu + 1_000_000,
        "{end} ns so far, {spinner_own_cpu} ns in all"
    );
}

/// Whether the kernel lets a process sample its own threads in user space.
fn perf_allowed() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok())
        .is_some_and(|level| level <= 2)
}

#[test]
fn snapshots_are_taken_at_two_four_six_and_eight_waiters() {
    let bin = build_c("snapshots");
    let policy = "snapshot_waiters = 2\nsnapshot_step = 2\n";
    let (stdout, report) = run_with(&bin, "snapshots-steps", Some(policy));
    // Snapshots read every thread's state: the program notices nothing
    // (its lines name tids, compared by what they name).
    let dir = fresh_dir("snapshots-with-without");
    let traced = run_under_shim_env(
        &bin,
        &[] as &[&str],
        &dir,
        &[("LOCKSUIT_POLICY", &write_policy(&dir, policy))],
    );
    assert_same_output_keys(&run_plain(&bin, &[] as &[&str]), &traced);
    let tid = |key: &str| stdout_value(&stdout, key).parse::<u64>().unwrap();
    let holder = tid("holder");
    let readers = (tid("reader"), tid("raw_reader"));
    let (mut holder_stacks, mut spinner_stacks) = (0, 0);
    let p = only_process(&report);
    let snapshots = arr(p, "snapshots");
    let levels: Vec<u64> = snapshots.iter().map(|s| u64_of(s, "waiters")).collect();
    assert_eq!(levels, vec![2, 4, 6, 8], "{}", p["snapshots"]);
    assert_eq!(u64_of(&p["policy"], "snapshots_taken"), 4);
    for s in snapshots {
        let k = u64_of(s, "waiters");
        assert_eq!(str_of(s, "trigger"), "waiters");
        assert_eq!(str_of(s, "object"), "&pile_lock");
        // The k-th waiter to arrive set it off; all k are listed waiting
        // for the lock, each at pile_on, held by the holder.
        assert_eq!(u64_of(s, "by_tid"), tid(&format!("waiter_{k}")), "{s}");
        let threads = arr(s, "threads");
        let mut waiting: Vec<u64> = Vec::new();
        for t in threads {
            let w = &t["waiting"];
            if w.is_null() {
                continue;
            }
            assert_eq!(str_of(w, "object"), "&pile_lock", "{t}");
            assert_eq!(u64_of(w, "holder_tid"), holder, "{t}");
            assert_eq!(first_function(&w["stack"]), "pile_on", "{t}");
            waiting.push(u64_of(t, "tid"));
        }
        waiting.sort_unstable();
        let mut expected: Vec<u64> = (1..=k).map(|i| tid(&format!("waiter_{i}"))).collect();
        expected.sort_unstable();
        assert_eq!(waiting, expected, "{s}");
        // The holder: not waiting, holding the lock taken in hold_and_pile.
        let h = threads
            .iter()
            .find(|t| u64_of(t, "tid") == holder)
            .unwrap_or_else(|| panic!("holder missing: {s}"));
        assert!(h["waiting"].is_null(), "{h}");
        let holds = arr(h, "holds");
        assert_eq!(holds.len(), 1, "{h}");
        assert_eq!(str_of(&holds[0], "lock"), "&pile_lock");
        assert_eq!(first_function(&holds[0]["stack"]), "hold_and_pile", "{h}");
        let (held, spun) = check_copied_stacks(s, (holder, tid("spinner")), readers);
        holder_stacks += held;
        spinner_stacks += spun;
        // Every other waiter had blocked before the next one started.
        for t in threads.iter().filter(|t| !t["waiting"].is_null()) {
            if u64_of(t, "tid") != u64_of(s, "by_tid") {
                assert_eq!(str_of(t, "state"), "sleeping", "{t}");
            }
        }
    }
    check_run_statistics(snapshots, tid("spinner"), tid("spinner_cpu_ns"));
    // The holder spends nearly all its time in its calls: four misses in
    // a row would mean the copies do not work, not bad luck.
    assert!(holder_stacks >= 1, "{}", p["snapshots"]);
    // The spinner runs all along: where the kernel allows sampling, every
    // snapshot should have its stack.
    if perf_allowed() {
        assert!(spinner_stacks >= 1, "{}", p["snapshots"]);
    }
    let trace = str_of(p, "trace");
    let text = run_locksuit(&["report", "--width", "80", trace]);
    let text = stdout_str(&text);
    assert!(text.contains("Snapshots (a policy's triggers)"), "{text}");
    // Words as they read, however the lines wrap.
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("sleeping in read, called from wait_for_line"),
        "{text}"
    );
    assert!(text.contains("#4 at"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
}

#[test]
fn snapshot_max_bounds_the_snapshots_and_counts_the_refused() {
    let bin = build_c("snapshots");
    let policy = "snapshot_waiters = 2\nsnapshot_step = 2\nsnapshot_max = 2\n";
    let (_, report) = run_with(&bin, "snapshots-max", Some(policy));
    let p = only_process(&report);
    let levels: Vec<u64> = arr(p, "snapshots")
        .iter()
        .map(|s| u64_of(s, "waiters"))
        .collect();
    assert_eq!(levels, vec![2, 4]);
    assert_eq!(u64_of(&p["policy"], "snapshots_taken"), 2);
    assert!(
        u64_of(&p["policy"], "snapshots_refused") >= 2,
        "{}",
        p["policy"]
    );
}

/// The lock waits written as events: (pile_on's, other_waiter's).
fn lock_waits(p: &Value) -> (u64, u64) {
    let count = |line: &str| {
        arr(p, "blocking_stacks")
            .iter()
            .filter(|s| {
                str_of(s, "line").starts_with(line) && str_of(s, "api") == "pthread_mutex_lock"
            })
            .map(|s| u64_of(s, "count"))
            .sum()
    };
    (count("pile_on@"), count("other_waiter@"))
}

fn filtered_by(p: &Value, rule: &str) -> u64 {
    arr(&p["policy"], "filtered_by_rule")
        .iter()
        .find(|r| r["rule"] == rule)
        .map_or(0, |r| u64_of(r, "events"))
}

#[test]
fn objects_sites_waiters_sampling_and_depth_thin_events_not_counters() {
    let bin = build_c("snapshots");
    let (_, full) = run_with(&bin, "policy-rules-none", None);
    let full = only_process(&full);
    assert_eq!(lock_waits(full), (8, 1));
    let same_counters = |p: &Value| {
        for id in ["&pile_lock", "&other_lock"] {
            let (a, b) = (lock_by_id(full, id), lock_by_id(p, id));
            for field in ["acquisitions", "contended"] {
                assert_eq!(a[field], b[field], "{id} {field}");
            }
        }
    };
    // (policy, lock waits kept, the rule that left the others out)
    let cases = [
        ("objects = &pile_*", (8, 0), "object"),
        ("objects = kind:rwlock, 0x10", (0, 0), "object"),
        ("sites = pile_on", (8, 0), "site"),
        // The k-th waiter began with k waiting: k = 4..8 are kept.
        ("min_waiters = 4", (5, 0), "few-waiters"),
    ];
    for (i, (policy, kept, rule)) in cases.into_iter().enumerate() {
        let (_, report) = run_with(&bin, &format!("policy-rules-{i}"), Some(policy));
        let p = only_process(&report);
        assert_eq!(lock_waits(p), kept, "{policy}: {}", p["blocking_stacks"]);
        assert!(filtered_by(p, rule) > 0, "{policy}: {}", p["policy"]);
        same_counters(p);
    }
    // One lock wait in two, counted over the process: 9 waits, 4 kept.
    let (_, report) = run_with(&bin, "policy-rules-sampled", Some("sample_every = 2"));
    let p = only_process(&report);
    let (pile, other) = lock_waits(p);
    assert_eq!(pile + other, 4, "{}", p["blocking_stacks"]);
    assert!(filtered_by(p, "sampled") >= 5);
    same_counters(p);
    // Call chains of two frames (the tests build without inlining).
    let (_, report) = run_with(&bin, "policy-rules-depth", Some("depth = 2"));
    let p = only_process(&report);
    for site in arr(p, "sites") {
        assert!(arr(site, "call_chain").len() <= 2, "{site}");
    }
    assert_eq!(lock_waits(p), (8, 1));
    same_counters(p);
}

#[test]
fn an_idle_processor_trigger_watches_the_objects_of_interest_only() {
    let bin = build_c("snapshots");
    let policy = "objects = &other_lock\nsnapshot_on_idle = yes\n";
    let (stdout, report) = run_with(&bin, "snapshots-idle", Some(policy));
    let p = only_process(&report);
    let other = stdout_value(&stdout, "other").parse::<u64>().unwrap();
    // Whether a processor is idle depends on the machine's load: when one
    // was, the snapshot is other_waiter's, and says how many were idle.
    let snapshots = arr(p, "snapshots");
    assert!(snapshots.len() <= 1, "{}", p["snapshots"]);
    for s in snapshots {
        assert_eq!(str_of(s, "trigger"), "idle-processor");
        assert_eq!(str_of(s, "object"), "&other_lock");
        assert_eq!(u64_of(s, "by_tid"), other);
        assert!(u64_of(s, "idle_processors") >= 1, "{s}");
    }
    assert_eq!(
        u64_of(&p["policy"], "snapshots_taken"),
        snapshots.len() as u64
    );
}
