//! `locksuit events --merged`: one stream per process, checked edge by
//! edge on real runs: tests/c/knob.c (ten acquisitions that surely wait,
//! each let in by a release) and tests/c/conds.c (a handshake whose every
//! signal finds its waiter waiting). The properties over random executions
//! and clock offsets are in analyzer/src/input/merge_tests.rs.

use locksuit_tests::*;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// A recorded run of knob.c (10 contended acquisitions) and of conds.c,
/// in one directory.
fn handoffs_trace(name: &str) -> std::path::PathBuf {
    let dir = fresh_dir(name);
    let knob = build_c("knob");
    let out = run_under_shim_env(&knob, &[] as &[&str], &dir, &[("KNOB_CONTENDED", "10")]);
    assert_success(&out, "knob");
    assert_success(
        &run_under_shim(&build_c("conds"), &[] as &[&str], &dir),
        "conds",
    );
    dir
}

/// The events of one program (by its pid's executable name).
fn of(events: &[Value], exe_pid: u64) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| u64_of(e, "pid") == exe_pid)
        .collect()
}

fn merged(dir: &Path, policy: &str) -> Vec<Value> {
    let out = run_locksuit(&[
        "events",
        "--merged",
        "--policy",
        policy,
        "--format",
        "jsonl",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    stdout_str(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every acquisition after a wait comes after the release that let it in;
/// every notified condition wait after a notify of its condition; each
/// thread's own events in its own clock's order; each event once. An event
/// released early is one whose predecessor is nowhere in the stream (a
/// release that raced with the start of the wait it ended does not see the
/// waiter, and writes no event).
fn check_edges(events: &[&Value]) {
    let recorded: std::collections::HashSet<(String, u64)> = events
        .iter()
        .filter(|e| e["kind"] == "release")
        .map(|e| {
            (
                e["object"].as_str().unwrap_or("").to_string(),
                u64_of(e, "object_seq"),
            )
        })
        .collect();
    let mut released: HashMap<(String, u64), u64> = HashMap::new();
    let mut notified: HashMap<String, u64> = HashMap::new();
    let mut last_ts: HashMap<u64, u64> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(u64_of(e, "n"), i as u64, "{e}");
        let e = *e;
        let object = e["object"].as_str().unwrap_or("").to_string();
        let seq = u64_of(e, "object_seq");
        if e["released_early"] == true {
            assert_eq!(str_of(e, "kind"), "acquire-after-wait", "{e}");
            assert!(
                !recorded.contains(&(object.clone(), seq)),
                "{e}: its release is there"
            );
            continue;
        }
        match str_of(e, "kind") {
            "release" => {
                released.insert((object, seq), i as u64);
            }
            "notify" => {
                notified.entry(object).or_insert(i as u64);
            }
            "acquire-after-wait" if seq > 0 => {
                let r = released.get(&(object.clone(), seq));
                assert!(r.is_some_and(|&r| r < i as u64), "{e} before its release");
            }
            "cond-wait" if seq > 0 => {
                // Its condition had been notified by its end: a notify of
                // it came first (a wait that timed out before any has 0).
                assert!(notified.contains_key(&object), "{e} before any notify");
            }
            _ => {}
        }
        let tid = u64_of(e, "tid");
        let ts = u64_of(e, "ts_ns");
        let last = last_ts.insert(tid, ts).unwrap_or(0);
        assert!(ts >= last, "thread {tid} went back in time: {e}");
    }
}

/// Each process's events, checked; returns them.
fn checked(dir: &Path, policy: &str) -> Vec<Vec<Value>> {
    let all = merged(dir, policy);
    let mut pids: Vec<u64> = all.iter().map(|e| u64_of(e, "pid")).collect();
    pids.dedup();
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), 2, "knob and conds");
    pids.iter()
        .map(|&pid| {
            let events = of(&all, pid);
            check_edges(&events);
            events.into_iter().cloned().collect()
        })
        .collect()
}

#[test]
fn the_merged_stream_keeps_every_handoff_under_each_policy() {
    let dir = handoffs_trace("merged-handoffs");
    let minimal = checked(&dir, "minimal");
    let kinds = |events: &[Value], kind: &str| events.iter().filter(|e| e["kind"] == kind).count();
    let all: Vec<Value> = minimal.iter().flatten().cloned().collect();
    assert!(kinds(&all, "acquire-after-wait") >= 10, "knob's ten waits");
    assert!(kinds(&all, "cond-wait") >= 12, "conds' twelve handshakes");
    assert!(kinds(&all, "notify") >= 12);
    for events in checked(&dir, "adjusted") {
        let mut last = 0;
        for e in &events {
            let at = u64_of(e, "adjusted_ts_ns");
            assert!(at >= last, "{e}");
            assert_eq!(at - u64_of(e, "ts_ns"), u64_of(e, "adjustment_ns"));
            // The least raise: to the previous event's time, or none.
            assert!(at == u64_of(e, "ts_ns") || at == last, "{e}");
            last = at;
        }
    }
    let concurrent = checked(&dir, "concurrent");
    for events in &concurrent {
        let mut step_threads: HashMap<u64, Vec<u64>> = HashMap::new();
        let mut last_step = 0;
        for e in events {
            let step = u64_of(e, "step");
            assert!(step >= last_step, "{e}");
            last_step = step;
            let threads = step_threads.entry(step).or_default();
            assert!(
                !threads.contains(&u64_of(e, "tid")),
                "two of one thread in step {step}"
            );
            threads.push(u64_of(e, "tid"));
        }
    }
    let count = |v: &[Vec<Value>]| v.iter().map(Vec::len).sum::<usize>();
    assert_eq!(count(&minimal), count(&concurrent));
}

#[test]
fn merged_options_are_checked() {
    let dir = handoffs_trace("merged-options");
    let d = dir.to_str().unwrap();
    let out = run_locksuit(&["events", "--policy", "adjusted", d]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--policy needs --merged: {}",
        describe(&out)
    );
    let out = run_locksuit(&["events", "--format", "jsonl", d]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let text = run_locksuit(&["events", "--merged", "--width", "80", d]);
    assert_eq!(text.status.code(), Some(0), "{}", describe(&text));
    let text = stdout_str(&text);
    assert!(text.contains("acquire-after-wait"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80));
    // One JSON document (written as the events come): the same events as
    // the JSON lines, per process.
    let doc = run_locksuit(&[
        "events", "--merged", "--policy", "adjusted", "--format", "json", d,
    ]);
    assert_eq!(doc.status.code(), Some(0), "{}", describe(&doc));
    let doc: Value = serde_json::from_str(&stdout_str(&doc)).unwrap();
    let lines = merged(&dir, "adjusted");
    let processes = doc["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 2);
    for p in processes {
        let events = p["events"].as_array().unwrap();
        assert_eq!(events.len(), of(&lines, u64_of(p, "pid")).len());
        assert!(p["perturbation"].is_array(), "{p}");
        assert_eq!(
            u64_of(p, "released_early") as usize,
            events
                .iter()
                .filter(|e| e["released_early"] == true)
                .count()
        );
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `locksuit events --merged --follow --format jsonl TRACE`, its output piped.
fn follow_jsonl(trace: &Path) -> std::process::Child {
    std::process::Command::new(locksuit_path())
        .args(["events", "--merged", "--follow", "--format", "jsonl"])
        .arg(trace)
        .env_remove("LD_PRELOAD")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn following_a_running_program_streams_its_events_and_ends_with_it() {
    use std::io::{BufRead, BufReader};

    let bin = build_c("top_target");
    let dir = fresh_dir("merged-follow");
    let target = spawn_ready_under_shim(&bin, &dir);
    let trace = traces_in(&dir).pop().unwrap();
    let mut follow = follow_jsonl(&trace);
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    // While the program runs: events arrive, each soon after it was
    // written (its own CLOCK_MONOTONIC timestamp against ours on arrival).
    let mut events = Vec::new();
    let mut latencies = Vec::new();
    while events.len() < 300 {
        let line = lines
            .next()
            .expect("the stream ended while the program ran")
            .unwrap();
        let e: Value = serde_json::from_str(&line).unwrap();
        latencies.push(monotonic_ns().saturating_sub(u64_of(&e, "mono_ns")));
        events.push(e);
    }
    terminate(target);
    // The process exiting ends the stream.
    for line in lines {
        events.push(serde_json::from_str(&line.unwrap()).unwrap());
    }
    assert!(follow.wait().unwrap().success());
    let refs: Vec<&Value> = events.iter().collect();
    check_edges(&refs);
    assert!(events.iter().any(|e| e["kind"] == "acquire-after-wait"));
    // Objects are named while the program runs, as after.
    for e in events.iter().filter(|e| e["kind"] == "release") {
        assert_eq!(e["object"], "&hot_lock", "{e}");
    }
    latencies.sort_unstable();
    let median = latencies[latencies.len() / 2];
    eprintln!(
        "follow: median latency {:.1} ms over {} events",
        median as f64 / 1e6,
        latencies.len()
    );
    assert!(median < 100_000_000, "median latency {median} ns");
}

#[test]
fn following_to_the_end_delivers_every_event_the_trace_holds() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    // tests/c/burst.c writes 800,000 events as fast as it can and exits,
    // while the follower reads the trace: what it delivers, in pieces as it
    // reads, is every event, as reading the finished trace gives. A follower
    // that finds the process gone after a read that began while it ran must
    // read once more (without that, this run lost 130,000-220,000 events in
    // each of three tries).
    let bin = build_c("burst");
    // The second run is a short burst that ends with exit(3) and an exit
    // handler that takes the lock 200 more times, 1 ms apart, after the exit
    // hook marked the trace complete: the stream ends only when the process
    // is gone, not when the trace says it is complete.
    for (attempt, (rounds, mode)) in [(200_000u64, ""), (1_000, "exit-handler")]
        .into_iter()
        .enumerate()
    {
        let dir = fresh_dir(&format!("merged-follow-burst-{attempt}"));
        let mut program = Command::new(&bin)
            .args([rounds.to_string().as_str(), mode])
            .env("LD_PRELOAD", shim_path())
            .env("LOCKSUIT_DIR", &dir)
            .env("LOCKSUIT_EVENTS", "all")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(program.stdout.take().unwrap());
        let mut ready = String::new();
        out.read_line(&mut ready).unwrap();
        assert_eq!(ready, "ready\n");
        let trace = traces_in(&dir).pop().unwrap();
        let follow = follow_jsonl(&trace);
        // Read as it writes: a follower blocked on a full pipe would only
        // read the trace again once the program had finished.
        let reader = std::thread::spawn(move || follow.wait_with_output().unwrap());
        // Let the follower read the trace once before the burst.
        std::thread::sleep(std::time::Duration::from_millis(100));
        program.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let status = program.wait().unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
        // The program behaves as it does without the shim.
        let mut plain = Command::new(&bin)
            .args([rounds.to_string().as_str(), mode])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        plain.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let plain = plain.wait_with_output().unwrap();
        assert!(status.success() && plain.status.success());
        assert_eq!(format!("{ready}{rest}"), stdout_str(&plain));
        let followed = reader.join().unwrap();
        assert!(followed.status.success(), "{}", describe(&followed));
        let live = stdout_str(&followed).lines().count();
        let trace_arg = trace.to_string_lossy();
        let whole = run_locksuit(&["events", "--merged", "--format", "jsonl", &trace_arg]);
        let whole = stdout_str(&whole).lines().count();
        let handler = if mode.is_empty() { 0 } else { 200 };
        assert!(
            whole as u64 >= 4 * rounds + 2 * handler,
            "{whole} events in the trace"
        );
        assert_eq!(
            live, whole,
            "followed live: {live} events; the finished trace holds {whole}"
        );
    }
}

/// tests/c/handoffs.c: semaphore posts before the waits they ended, both
/// arrivals of a barrier round before either departure, both readers'
/// releases before the writer that waited for them, creations before the
/// created threads' starts, exits before the joins that returned them,
/// under each policy.
#[test]
fn semaphores_barriers_rwlocks_creations_and_joins_keep_their_order() {
    let dir = fresh_dir("merged-threads");
    let bin = build_c("handoffs");
    // The same program without the shim: it succeeds and measures its
    // waits the same way (their number depends on timing, not the shim).
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(&plain, "handoffs without the shim");
    assert!(
        stdout_str(&plain).starts_with("blocked "),
        "{}",
        describe(&plain)
    );
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "handoffs");
    let blocked: usize = stdout_str(&out)
        .trim()
        .strip_prefix("blocked ")
        .and_then(|n| n.parse().ok())
        .expect("blocked K");
    for policy in ["minimal", "concurrent", "adjusted"] {
        let events = merged(&dir, policy);
        let count = |kind: &str| events.iter().filter(|e| e["kind"] == kind).count();
        // Every wait the program measured as blocked is there, and more
        // may be (a wait that blocked for under 1 ms).
        assert!(count("sem-acquire-after-wait") >= blocked, "{policy}");
        assert_eq!(count("create"), 2, "{policy}");
        assert_eq!(count("start"), 2, "{policy}");
        assert_eq!(count("exit"), 2, "{policy}");
        assert_eq!(count("join"), 2, "{policy}");
        // Two threads three times at one barrier, three once at another.
        assert_eq!(count("arrive"), 9, "{policy}");
        assert_eq!(count("depart"), 9, "{policy}");
        let mut rw_released: Vec<u64> = Vec::new();
        let mut writer_seen = false;
        let mut arrived: Vec<u64> = Vec::new();
        let mut created: HashMap<u64, u64> = HashMap::new();
        let mut exited: HashMap<u64, u64> = HashMap::new();
        let mut posted: HashMap<String, u64> = HashMap::new();
        for e in &events {
            assert_eq!(e["released_early"], false, "{policy}: {e}");
            let seq = u64_of(e, "object_seq");
            let object = e["object"].as_str().unwrap_or("").to_string();
            match str_of(e, "kind") {
                "create" => {
                    created.insert(seq, u64_of(e, "peer_tid"));
                }
                "start" => {
                    let by = created.get(&seq);
                    assert_eq!(
                        by,
                        Some(&u64_of(e, "tid")),
                        "{policy}: {e} before its creation"
                    );
                }
                "exit" => {
                    exited.insert(seq, u64_of(e, "tid"));
                }
                "join" => {
                    let who = exited.get(&seq);
                    assert_eq!(
                        who,
                        Some(&u64_of(e, "peer_tid")),
                        "{policy}: {e} before the exit"
                    );
                }
                "post" => {
                    posted.entry(object).or_insert(seq);
                }
                "arrive" => arrived.push(seq),
                "release" if object == "&rw" => rw_released.push(seq),
                "acquire-after-wait" if object == "&rw" => {
                    // main's write: every recorded release of `rw` found it
                    // waiting, so each came before it.
                    assert!(seq >= 1, "{e}");
                    for r in (1..=seq).filter(|r| !rw_released.contains(r)) {
                        let later = events.iter().any(|l| {
                            l["kind"] == "release"
                                && l["object"] == "&rw"
                                && u64_of(l, "object_seq") == r
                        });
                        assert!(!later, "{policy}: {e} before release {r}");
                    }
                    writer_seen = true;
                }
                "depart" if object == "&meet" => {
                    // Its round: arrivals seq - 1 and seq (a barrier for two).
                    for a in [seq - 1, seq] {
                        assert!(arrived.contains(&a), "{policy}: {e} before arrival {a}");
                    }
                }
                "sem-acquire-after-wait" => {
                    let first = posted.get(&object);
                    assert!(
                        first.is_some_and(|&p| p <= seq),
                        "{policy}: {e} before a post"
                    );
                }
                _ => {}
            }
        }
        assert!(writer_seen, "{policy}: main waited to write");
    }
}

/// tests/c/barrier_passed.c: a barrier arrival the shim could not record
/// (its thread had already closed) still takes its number, so the later
/// rounds' departures follow their own rounds' arrivals. Only the round
/// that holds the unrecorded arrival has its departure released early.
#[test]
fn a_barrier_arrival_that_passed_through_does_not_shift_later_rounds() {
    let dir = fresh_dir("merged-barrier-passed");
    let bin = build_c("barrier_passed");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "barrier_passed");
    // The destructor ran in glibc's last round, after the shim's own key,
    // as without the shim.
    assert_same_output(&run_plain(&bin, &[] as &[&str]), &out);
    assert_eq!(stdout_str(&out).trim(), "destructor runs 4");
    for policy in ["minimal", "concurrent", "adjusted"] {
        let events = merged(&dir, policy);
        let at_meet: Vec<&Value> = events.iter().filter(|e| e["object"] == "&meet").collect();
        let seqs = |kind: &str| -> Vec<u64> {
            let mut seqs: Vec<u64> = at_meet
                .iter()
                .filter(|e| e["kind"] == kind)
                .map(|e| u64_of(e, "object_seq"))
                .collect();
            seqs.sort_unstable();
            seqs
        };
        // Main's first arrival shares round 1 with the one that passed
        // through; rounds 2 and 3 are main's and B's.
        let arrivals = seqs("arrive");
        assert_eq!(arrivals.len(), 5, "{policy}: {arrivals:?}");
        assert!(arrivals[0] <= 2, "{policy}: {arrivals:?}");
        assert_eq!(arrivals[1..], [3, 4, 5, 6], "{policy}: {arrivals:?}");
        assert_eq!(seqs("depart"), [2, 4, 4, 6, 6], "{policy}");
        let mut arrived: Vec<u64> = Vec::new();
        for e in &at_meet {
            let seq = u64_of(e, "object_seq");
            match str_of(e, "kind") {
                "arrive" => arrived.push(seq),
                "depart" if seq == 2 => {
                    assert_eq!(e["released_early"], true, "{policy}: {e}");
                }
                "depart" => {
                    assert_eq!(e["released_early"], false, "{policy}: {e}");
                    for a in [seq - 1, seq] {
                        assert!(arrived.contains(&a), "{policy}: {e} before arrival {a}");
                    }
                }
                _ => {}
            }
        }
    }
}
