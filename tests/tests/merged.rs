//! `locksuit events --merged`: one stream per process, checked edge by
//! edge on real runs (bench/pingpong.c hands a turn back and forth through
//! a mutex and a condition variable; tests/c/knob.c hands a lock over
//! through pipes). The properties over random executions and clock offsets
//! are in analyzer/src/merge_tests.rs.

use locksuit_tests::*;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

fn pingpong_trace(name: &str) -> std::path::PathBuf {
    let bin = workspace_root().join("target/c-tests/pingpong-merged");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    let built = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O2", "-g", "-pthread", "-o"])
        .arg(&bin)
        .arg(workspace_root().join("bench/pingpong.c"))
        .status()
        .unwrap();
    assert!(built.success());
    let dir = fresh_dir(name);
    assert_success(&run_under_shim(&bin, &["2000"], &dir), "pingpong");
    dir
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
/// thread's own events in its own clock's order; each event once.
fn check_edges(events: &[Value]) {
    let mut released: HashMap<(String, u64), u64> = HashMap::new();
    let mut notified: HashMap<String, u64> = HashMap::new();
    let mut last_ts: HashMap<u64, u64> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(u64_of(e, "n"), i as u64, "{e}");
        assert_eq!(e["released_early"], false, "{e}");
        let object = e["object"].as_str().unwrap_or("").to_string();
        let seq = u64_of(e, "object_seq");
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
            "cond-wait" => {
                // Woken by a notify: one of its condition came first.
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

#[test]
fn the_merged_stream_keeps_every_handoff_under_each_policy() {
    let dir = pingpong_trace("merged-pingpong");
    let minimal = merged(&dir, "minimal");
    assert!(minimal.len() > 1000, "{} events", minimal.len());
    assert!(minimal.iter().any(|e| e["kind"] == "acquire-after-wait"));
    assert!(minimal.iter().any(|e| e["kind"] == "cond-wait"));
    check_edges(&minimal);
    let adjusted = merged(&dir, "adjusted");
    check_edges(&adjusted);
    let mut last = 0;
    for e in &adjusted {
        let at = u64_of(e, "adjusted_ts_ns");
        assert!(at >= last, "{e}");
        assert_eq!(at - u64_of(e, "ts_ns"), u64_of(e, "adjustment_ns"));
        // The least raise: to the previous event's time, or none.
        assert!(at == u64_of(e, "ts_ns") || at == last, "{e}");
        last = at;
    }
    let concurrent = merged(&dir, "concurrent");
    check_edges(&concurrent);
    let mut step_threads: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut last_step = 0;
    for e in &concurrent {
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
    assert_eq!(minimal.len(), adjusted.len());
    assert_eq!(minimal.len(), concurrent.len());
}

#[test]
fn merged_options_are_checked() {
    let dir = pingpong_trace("merged-options");
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
}
