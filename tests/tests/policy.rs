//! Recording policies (docs/policy.md): which processes are recorded, the
//! shortest wait whose events are written (counters stay exact), a
//! malformed file said once, and `locksuit run --policy`.

use locksuit_tests::*;
use serde_json::Value;
use std::path::Path;

fn apis(p: &Value) -> Vec<String> {
    arr(p, "blocking_stacks")
        .iter()
        .map(|s| str_of(s, "api").to_string())
        .collect()
}

#[test]
fn only_the_processes_of_interest_are_recorded() {
    let tiny = build_c("tiny");
    let dir = fresh_dir("policy-processes");
    let policy = write_policy(&dir, "processes = tin?, not-this-one\n");
    let suite = format!("{} && env > /dev/null", tiny.display());
    let out = run_under_shim_env(
        Path::new("/bin/sh"),
        &["-c", &suite],
        &dir,
        &[("LOCKSUIT_POLICY", &policy)],
    );
    assert_success(&out, "sh -c tiny && env");
    assert_eq!(stdout_str(&out), "counter 400\n");
    assert!(out.stderr.is_empty(), "{}", describe(&out));
    let traces = traces_in(&dir);
    assert_eq!(traces.len(), 1, "tiny's alone: {traces:?}");
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    assert!(str_of(p, "exe").ends_with("/tiny"));
    assert_eq!(p["policy"]["min_wait_us"], 0);
}

#[test]
fn short_waits_write_no_events_and_counters_stay_exact() {
    let bin = build_c("stops");
    let plain_dir = fresh_dir("policy-none");
    let out = run_under_shim(&bin, &[] as &[&str], &plain_dir);
    assert_success(&out, "stops");
    let dir = fresh_dir("policy-min-wait");
    // stops.c: the locker waits ~120 ms, the holder sleeps ~120 ms; the
    // cond wait (~80 ms), the read (~90), the poll (~70) and the futex
    // wait (~80) are shorter than 100 ms.
    let policy = write_policy(&dir, "min_wait_us = 100000 # 100 ms\n");
    let out = run_under_shim_env(&bin, &[] as &[&str], &dir, &[("LOCKSUIT_POLICY", &policy)]);
    assert_success(&out, "stops under a policy");
    let stdout = stdout_str(&out);
    let measured = |key: &str| stdout_value(&stdout, key).parse::<u64>().unwrap();
    assert!(measured("locker_wait_ns") >= 100_000_000 && measured("cond_wait_ns") < 100_000_000);
    let full = report_json(&[&plain_dir], None);
    let thinned = report_json(&[&dir], None);
    let (full, thinned) = (only_process(&full), only_process(&thinned));
    let kept = apis(thinned);
    assert!(kept.iter().any(|a| a == "pthread_mutex_lock"), "{kept:?}");
    assert!(kept.iter().any(|a| a == "nanosleep"), "{kept:?}");
    for short in ["pthread_cond_wait", "poll", "read", "futex"] {
        assert!(!kept.iter().any(|a| a == short), "{short} kept: {kept:?}");
    }
    assert_eq!(thinned["policy"]["min_wait_us"], 100_000);
    assert!(
        u64_of(&thinned["policy"], "events_filtered") >= 4,
        "{}",
        thinned["policy"]
    );
    // Counters are exact whatever the policy.
    for id in ["&shared", "&alone", "&cond_mutex"] {
        let (a, b) = (lock_by_id(full, id), lock_by_id(thinned, id));
        for field in ["acquisitions", "contended"] {
            assert_eq!(a[field], b[field], "{id} {field}");
        }
    }
    let warned = arr(thinned, "warnings")
        .iter()
        .any(|w| w.as_str().is_some_and(|w| w.contains("recording policy")));
    assert!(warned, "{}", thinned["warnings"]);
}

#[test]
fn a_malformed_policy_is_said_once_and_changes_nothing_else() {
    let bin = build_c("tiny");
    let dir = fresh_dir("policy-malformed");
    let policy = write_policy(&dir, "min_wait_us = 10\nwaiters = 3\n");
    let plain = run_plain(&bin, &[] as &[&str]);
    let out = run_under_shim_env(&bin, &[] as &[&str], &dir, &[("LOCKSUIT_POLICY", &policy)]);
    assert_eq!(out.status.code(), plain.status.code());
    assert_eq!(stdout_str(&out), stdout_str(&plain));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&format!("{policy}:2:")), "{stderr}");
    assert!(stderr.contains("unknown key"), "{stderr}");
    // Recorded with the defaults: no policy in force, so the min_wait_us
    // of line 1 is not applied either.
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    assert!(p["policy"].is_null(), "{}", p["policy"]);
}

#[test]
fn run_passes_its_policy_to_the_command() {
    let tiny = build_c("tiny");
    let dir = fresh_dir("policy-run");
    let policy = write_policy(&dir, "processes = tiny\n");
    let runs = dir.join("traces");
    let suite = format!("{} && env > /dev/null", tiny.display());
    let out = run_locksuit(&[
        "run",
        "--policy",
        &policy,
        "--dir",
        runs.to_str().unwrap(),
        "--format",
        "json",
        "--",
        "/bin/sh",
        "-c",
        &suite,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(traces_in(&runs).len(), 1, "tiny's alone");
    // A policy that cannot be read stops `run` before the command starts.
    let out = run_locksuit(&["run", "--policy", "/no/such/policy", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/policy"));
}

#[test]
fn a_thread_of_interest_alone_writes_events_and_every_counter_stays_exact() {
    let bin = build_c("stops");
    let plain_dir = fresh_dir("policy-threads-none");
    assert_success(&run_under_shim(&bin, &[] as &[&str], &plain_dir), "stops");
    let dir = fresh_dir("policy-threads");
    let policy = write_policy(&dir, "threads = lock*\n");
    let out = run_under_shim_env(&bin, &[] as &[&str], &dir, &[("LOCKSUIT_POLICY", &policy)]);
    assert_success(&out, "stops under a policy");
    let full = report_json(&[&plain_dir], None);
    let thinned = report_json(&[&dir], None);
    let (full, thinned) = (only_process(&full), only_process(&thinned));
    // Only the locker's wait was written: its stack alone.
    let stacks = arr(thinned, "blocking_stacks");
    assert!(!stacks.is_empty());
    let locker = arr(thinned, "threads")
        .iter()
        .find(|t| t["name"] == "locker")
        .map(|t| u64_of(t, "tid"))
        .unwrap();
    for s in stacks {
        let threads: Vec<u64> = arr(s, "threads")
            .iter()
            .filter_map(|t| t.as_u64())
            .collect();
        assert_eq!(threads, vec![locker], "{s}");
    }
    assert!(u64_of(&thinned["policy"], "events_filtered") > 0);
    for id in ["&shared", "&alone", "&cond_mutex"] {
        let (a, b) = (lock_by_id(full, id), lock_by_id(thinned, id));
        for field in ["acquisitions", "contended"] {
            assert_eq!(a[field], b[field], "{id} {field}");
        }
    }
}

#[test]
fn a_policy_path_that_is_a_fifo_never_blocks_the_program() {
    let bin = build_c("tiny");
    let dir = fresh_dir("policy-fifo");
    let fifo = dir.join("policy.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Nobody writes the FIFO: a blocking open or read would hang tiny.
    let out = run_under_shim_env(
        &bin,
        &[] as &[&str],
        &dir,
        &[("LOCKSUIT_POLICY", fifo.to_str().unwrap())],
    );
    assert_success(&out, "tiny with a FIFO for a policy");
    assert_eq!(stdout_str(&out), "counter 400\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cannot be read"), "{stderr}");
}

/// `sites = FILE:LINE` under `locksuit run --policy`: the line is resolved
/// into addresses of the program before it starts. knob.c's main waits
/// ten times at one line; its helper's holds, taken at another line, write
/// no events, and are counted as left out; the counters stay whole.
#[test]
fn a_line_named_as_a_site_is_resolved_by_run() {
    let knob = build_c("knob");
    let source = std::fs::read_to_string(workspace_root().join("tests/c/knob.c")).unwrap();
    let contend = source.find("static void contend").unwrap();
    let line = source[..contend].lines().count()
        + source[contend..]
            .lines()
            .position(|l| l.contains("pthread_mutex_lock(&knob_lock)"))
            .unwrap()
        + 1;
    let dir = fresh_dir("policy-line");
    let policy = write_policy(&dir, &format!("sites = knob.c:{line}\n"));
    let runs = dir.join("traces");
    let mut command = std::process::Command::new(locksuit_path());
    command
        .env_remove("LD_PRELOAD")
        .env_remove("LOCKSUIT_DIR")
        .args([
            "run",
            "--policy",
            &policy,
            "--dir",
            runs.to_str().unwrap(),
            "--format",
            "json",
            "--",
            knob.to_str().unwrap(),
        ]);
    let out = command.env("KNOB_CONTENDED", "10").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let resolved = std::fs::read_to_string(runs.join("locksuit.policy")).unwrap();
    assert!(resolved.contains("sites = knob@0x"), "{resolved}");
    assert!(resolved.contains(&format!("knob.c:{line}")), "{resolved}");
    let stream = run_locksuit(&[
        "events",
        "--merged",
        "--format",
        "jsonl",
        runs.to_str().unwrap(),
    ]);
    assert_eq!(stream.status.code(), Some(0), "{}", describe(&stream));
    let events: Vec<Value> = stdout_str(&stream)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at_line = format!("knob.c:{line}");
    let waits: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "acquire-after-wait")
        .collect();
    assert_eq!(waits.len(), 10, "main's ten waits");
    for w in &waits {
        assert!(str_of(w, "site").ends_with(&at_line), "{w}");
    }
    // The helper's holds (taken at another line) wrote nothing; main's
    // own releases carry the line that took the lock.
    for e in events.iter().filter(|e| e["kind"] == "release") {
        assert!(str_of(e, "site").ends_with(&at_line), "{e}");
    }
    let report = report_json(&[&runs], None);
    let p = only_process(&report);
    assert!(u64_of(&p["policy"], "events_filtered") >= 10);
    assert_eq!(u64_of(lock_by_id(p, "&knob_lock"), "contended"), 10);
    // A line with no code stops `run` before the program starts.
    let empty = write_policy(&fresh_dir("policy-line-empty"), "sites = knob.c:1\n");
    let out = run_locksuit(&["run", "--policy", &empty, "--", knob.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("policy line 1: no code at knob.c:1"),
        "{said}"
    );
    // Outside `run`, a line cannot be resolved: the shim says so.
    let out = run_under_shim_env(
        &knob,
        &[] as &[&str],
        &fresh_dir("policy-line-by-hand"),
        &[("LOCKSUIT_POLICY", &policy)],
    );
    assert_success(&out, "knob with a line policy by hand");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("locksuit run --policy"),
        "{}",
        describe(&out)
    );
}
