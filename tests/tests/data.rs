//! Data-level suitability: programs built with `locksuit cc` (clang-19,
//! which `.ci/run` installs). tests/c/data_locks.c: one lock guards a
//! shared counter at one line and each thread's own slot at another.
//! tests/c/data_shapes.c: a lock whose users each touch their own data,
//! and one guarding a table only read under it. tests/c/data_reuse.c: a
//! heap block freed and allocated again by another thread.
//! tests/c/data_churn.cpp: a C++ program's heap churning under a mutex.
//! The same program built normally, and the instrumented build run without
//! the shim, behave and report sensibly.
//!
//! Past 600 lines: each file under tests/tests is its own test binary,
//! linked apart; one subject stays in one file rather than pay another link.

use locksuit_tests::*;
use serde_json::Value;
use std::process::Command;

/// Every access the critical sections make: 4 threads × 2000 rounds × a
/// load and a store, at each of the two lines.
const ACCESSES_PER_LINE: u64 = 4 * 2000 * 2;

/// The text report of the traces in `dir`, its words joined by single
/// spaces (so a phrase is found however the report wrapped it).
fn report_words(dir: &std::path::Path) -> String {
    let text = stdout_str(&run_locksuit(&["report", dir.to_str().unwrap()]));
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn a_line_guarding_private_data_under_a_shared_lock_is_found() {
    let Some(bin) = instrumented("data_locks") else {
        return;
    };
    let run = record_plain_and_shim_env(&bin, "data-level", &[EVERY_ENGAGEMENT]);
    assert_same_output(&run.plain, &run.shim);
    assert_eq!(
        stdout_str(&run.shim),
        "shared_counter 8000\nslot_sum 8000\n"
    );
    let p = only_process(&run.report);
    assert_eq!(u64_of(&p["data_level"], "accesses"), 2 * ACCESSES_PER_LINE);
    assert_eq!(u64_of(&p["data_level"], "dropped"), 0);
    let shared = site_in(p, "bump_shared");
    assert_eq!(str_of(shared, "basis"), "data");
    assert_eq!(u64_of(shared, "suitable_accesses"), ACCESSES_PER_LINE);
    assert_eq!(u64_of(shared, "unsuitable_accesses"), 0);
    // The seed's line states, from its engagements by their own share of
    // suitable accesses (an engagement before another thread touched the
    // data scores 0): one qualifies when its share is at or above the
    // threshold (0.3: buckets 3 to 10) and another thread waited for the
    // lock meanwhile (a task switch); how many did is up to the scheduler.
    let ratios = &shared["engagement_ratios"];
    let count =
        |field: &str| -> u64 { arr(ratios, field).iter().map(|n| n.as_u64().unwrap()).sum() };
    let qualifying: u64 = arr(ratios, "waited_for")[3..]
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum();
    let all = count("waited_for") + count("not_waited_for");
    let expected = match qualifying {
        0 => "apparently-unsuitable",
        q if q == all => "apparently-suitable",
        _ => "definitely-suitable",
    };
    assert_eq!(str_of(shared, "status"), expected, "{}", short(shared));
    let own = site_in(p, "bump_own");
    assert_eq!(str_of(own, "basis"), "data");
    assert_eq!(u64_of(own, "suitable_accesses"), 0);
    assert_eq!(u64_of(own, "unsuitable_accesses"), ACCESSES_PER_LINE);
    let finding = arr(p, "findings")
        .iter()
        .find(|f| f["kind"] == "private-data-under-lock")
        .unwrap_or_else(|| panic!("{}", p["findings"]));
    assert_eq!(str_of(finding, "lock"), "&table_lock");
    assert_eq!(finding["sites"][0], own["id"]);
    assert_eq!(finding["sites"][1], shared["id"]);
    let message = str_of(finding, "message");
    assert!(
        message.contains("&slots") && message.contains("&shared_counter"),
        "{message}"
    );
    // The sharing-ratio verdict is not given for a line judged by its data.
    assert!(!arr(p, "findings")
        .iter()
        .any(|f| f["kind"] == "unsuitable-site"));
    // Every engagement by its share of suitable accesses: each thread's
    // slot, none (bucket 0); the shared counter, all (bucket 10) but those
    // made before a second thread had touched it.
    let buckets = |site: &Value, bucket: usize| -> u64 {
        ["waited_for", "not_waited_for"]
            .iter()
            .map(|split| site["engagement_ratios"][split][bucket].as_u64().unwrap())
            .sum()
    };
    let per_line = 4 * 2000;
    assert_eq!(buckets(own, 0), per_line, "{}", own["engagement_ratios"]);
    assert_eq!(buckets(shared, 0) + buckets(shared, 10), per_line);
    assert!(buckets(shared, 10) > 0, "{}", shared["engagement_ratios"]);
    // At the default threshold (0.3) the unsuitable ones are those with no
    // suitable access that another thread waited for: every such one of
    // the slot's line; of the counter's, only those made before a second
    // thread had touched it. A threshold of 0 leaves none, read from the
    // same trace.
    for line in [own, shared] {
        let waited = line["engagement_ratios"]["waited_for"][0].as_u64().unwrap();
        assert_eq!(u64_of(line, "unsuitable_engagements"), waited, "{line}");
    }
    let strict = report_json(&[&run.dir], Some(0.0));
    assert_eq!(
        u64_of(
            site_in(only_process(&strict), "bump_own"),
            "unsuitable_engagements"
        ),
        0
    );
}

#[test]
fn an_uninstrumented_build_is_judged_by_sharing_and_says_so() {
    let bin = build_c("data_locks");
    let dir = fresh_dir("data-level-none");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "data_locks");
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    assert!(p["data_level"].is_null());
    for s in arr(p, "sites") {
        assert_eq!(str_of(s, "basis"), "sharing", "{s}");
        assert!(s["suitable_accesses"].is_null());
    }
    assert!(!arr(p, "findings")
        .iter()
        .any(|f| f["kind"] == "private-data-under-lock"));
}

fn finding_on<'a>(p: &'a Value, kind: &str, lock: &str) -> Option<&'a Value> {
    arr(p, "findings")
        .iter()
        .find(|f| f["kind"] == kind && f["lock"] == lock)
}

#[test]
fn disjoint_data_and_read_only_sharing_are_found() {
    let Some(bin) = instrumented("data_shapes") else {
        return;
    };
    let run = record_plain_and_shim_env(&bin, "data-shapes", &[EVERY_ENGAGEMENT]);
    // The shim's look-ups of unlocked stores change nothing the program sees.
    assert_same_output(&run.plain, &run.shim);
    assert_eq!(stdout_value(&stdout_str(&run.shim), "tally_sum"), "3000");
    let p = only_process(&run.report);
    let disjoint =
        finding_on(p, "disjoint-data", "&pair_lock").unwrap_or_else(|| panic!("{}", p["findings"]));
    assert!(
        str_of(disjoint, "message").contains("&tallies"),
        "{disjoint}"
    );
    let read_only = finding_on(p, "read-only-sharing", "&config_lock")
        .unwrap_or_else(|| panic!("{}", p["findings"]));
    assert!(
        str_of(read_only, "message").contains("&config"),
        "{read_only}"
    );
    // Data read under its lock but written without it is not read-only,
    // though every access the lock saw was a shared read.
    assert!(
        finding_on(p, "read-only-sharing", "&status_lock").is_none(),
        "{}",
        p["findings"]
    );
    let status_line = arr(p, "sites")
        .iter()
        .find(|s| arr(s, "locks").iter().any(|l| l == "&status_lock"))
        .unwrap_or_else(|| panic!("{}", p["sites"]));
    assert!(
        u64_of(status_line, "suitable_accesses") > 0,
        "{status_line}"
    );
    assert_eq!(
        u64_of(status_line, "unsuitable_accesses"),
        0,
        "{status_line}"
    );
    // So is data written only by a thread that never takes a lock.
    assert!(
        finding_on(p, "read-only-sharing", "&watch_lock").is_none(),
        "{}",
        p["findings"]
    );
    // And data written once under its lock.
    assert!(
        finding_on(p, "read-only-sharing", "&rare_lock").is_none(),
        "{}",
        p["findings"]
    );
    // Each worker's tally has a cache line of its own: no false sharing.
    assert!(
        !arr(p, "findings")
            .iter()
            .any(|f| f["kind"] == "false-sharing"),
        "{}",
        p["findings"]
    );
    // Every engagement recorded: each lock is judged, none left to rerun.
    assert!(arr(&p["data_level"], "read_only_unjudged").is_empty());
    // Neither lock's data is the other shape.
    assert!(finding_on(p, "read-only-sharing", "&pair_lock").is_none());
    assert!(finding_on(p, "disjoint-data", "&config_lock").is_none());
    // Each worker's tally: 1000 loads and stores under pair_lock, by one thread.
    let tally_line = arr(p, "sites")
        .iter()
        .find(|s| s["suitable_accesses"] == 0 && s["unsuitable_accesses"] == 6000)
        .unwrap_or_else(|| panic!("{}", p["sites"]));
    assert_eq!(str_of(tally_line, "status"), "apparently-unsuitable");
    // Its ratio is the figure the verdict used: none of its accesses were
    // suitable, whatever the lock's sharing ratio (issue 32, item 7).
    assert_eq!(f64_of(tally_line, "ratio"), 0.0, "{}", short(tally_line));
    assert!(
        f64_of(tally_line, "sharing_ratio") > 0.0,
        "{}",
        short(tally_line)
    );
}

/// tests/c/data_reuse.c: a heap block freed by one thread and allocated
/// again, at the same address, by another. liblocksuit_cov.so tells the
/// shim of the free, so the second block is a resource of its own: the
/// line that fills each thread's block guards private data, not data two
/// threads share.
#[test]
fn a_freed_block_reused_by_another_thread_is_not_shared_data() {
    let Some(bin) = instrumented("data_reuse") else {
        return;
    };
    // One arena (set by the program) and no per-thread cache: the second
    // thread's block is the first's.
    let tunables = [("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0")];
    let dir = fresh_dir("data-reuse");
    let out = run_under_shim_env(&bin, &[] as &[&str], &dir, &[tunables[0], EVERY_ENGAGEMENT]);
    assert_success(&out, "data_reuse");
    assert_eq!(stdout_str(&out), "reused yes\ncounter 200\n");
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    let fill = site_in(p, "fill");
    // Six stores a fill: a hundred rounds by two threads, then a hundred
    // blocks at one address: every store to a block only its thread had,
    // and none dropped (freed blocks give their table slots back).
    assert_eq!(u64_of(fill, "suitable_accesses"), 0, "{fill}");
    assert_eq!(
        u64_of(fill, "unsuitable_accesses"),
        (2 * 100 + 100) * 6,
        "{fill}"
    );
    assert_eq!(u64_of(&p["data_level"], "dropped"), 0);
    let bump = site_in(p, "bump");
    assert_eq!(u64_of(bump, "unsuitable_accesses"), 0, "{bump}");
    let finding = arr(p, "findings")
        .iter()
        .find(|f| f["kind"] == "private-data-under-lock")
        .unwrap_or_else(|| panic!("{}", p["findings"]));
    assert_eq!(finding["sites"][0], fill["id"]);
    // Heap data is named by the line that allocated it.
    let message = str_of(finding, "message");
    for allocator in ["first", "second"] {
        let named = format!("blocks from {allocator}@data_reuse.c:");
        assert!(message.contains(&named), "{message}");
    }
    // The two blocks never lived at once: their granules at one address
    // are not two threads' data in one cache line.
    assert!(
        !arr(p, "findings")
            .iter()
            .any(|f| f["kind"] == "false-sharing"),
        "{}",
        p["findings"]
    );
    // Without the shim, the instrumented build's `free` only forwards.
    let plain = Command::new(&bin)
        .env_remove("LD_PRELOAD")
        .env(tunables[0].0, tunables[0].1)
        .output()
        .unwrap();
    assert_success(&plain, "data_reuse without the shim");
    assert_eq!(stdout_str(&plain), "reused yes\ncounter 200\n");
}

/// The granules' records are in the trace from the first touch: a
/// process killed with SIGKILL after its work is judged by its data as
/// one that exited, and the report says the totals are missing.
#[test]
fn a_killed_process_keeps_its_data_level_records() {
    use std::io::{BufRead, BufReader};
    let Some(bin) = instrumented("data_locks") else {
        return;
    };
    let dir = fresh_dir("data-level-killed");
    let mut child = Command::new(&bin)
        .arg("hang")
        .env("LD_PRELOAD", shim_path())
        .env("LOCKSUIT_DIR", &dir)
        .env(EVERY_ENGAGEMENT.0, EVERY_ENGAGEMENT.1)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready, "ready\n");
    child.kill().unwrap();
    child.wait().unwrap();
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    assert_eq!(p["data_level"]["complete"], false, "{}", p["data_level"]);
    assert_eq!(u64_of(&p["data_level"], "accesses"), 2 * ACCESSES_PER_LINE);
    let shared = site_in(p, "bump_shared");
    assert_eq!(str_of(shared, "basis"), "data");
    assert_eq!(u64_of(shared, "suitable_accesses"), ACCESSES_PER_LINE);
    let own = site_in(p, "bump_own");
    assert_eq!(u64_of(own, "unsuitable_accesses"), ACCESSES_PER_LINE);
    assert!(arr(p, "findings")
        .iter()
        .any(|f| f["kind"] == "private-data-under-lock"));
    let words = report_words(&dir);
    assert!(
        words.contains("recorded; no totals (it did not exit)"),
        "{words}"
    );
}

/// tests/c/data_churn.cpp, built with `locksuit c++`: short-lived strings
/// made and freed at the same addresses by four threads, under one mutex.
/// It runs as it does uninstrumented, with the shim or without, and the
/// shim's table keeps room (a freed block's slots are free again).
#[test]
fn a_cxx_program_churning_its_heap_runs_and_drops_nothing() {
    let Some(bin) = instrumented_with("c++", "data_churn.cpp") else {
        return;
    };
    let run = record_plain_and_shim(&bin, "data-churn");
    assert_same_output(&run.plain, &run.shim);
    let p = only_process(&run.report);
    assert!(
        u64_of(&p["data_level"], "accesses") > 0,
        "{}",
        p["data_level"]
    );
    assert_eq!(
        u64_of(&p["data_level"], "dropped"),
        0,
        "{}",
        p["data_level"]
    );
}

/// `locksuit cc` puts each access's call behind the access gate (an inline
/// test of the shim's thread-local words), unless `LOCKSUIT_GATE=off`,
/// which falls back to clang's sanitizer coverage (a call on every access).
#[test]
fn each_access_call_sits_behind_the_gate_unless_turned_off() {
    if !has_clang() {
        return;
    }
    let src = c_dir().join("data_shapes.c");
    let assembly = |gate: &str| {
        let mut cmd = Command::new(locksuit_path());
        cmd.args(["cc", "-O2", "-pthread", "-S", "-o", "-"])
            .arg(&src)
            .env("LOCKSUIT_GATE", gate)
            .env_remove("LOCKSUIT_CC");
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", describe(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let gated = assembly("on");
    assert!(
        gated.contains("__locksuit_gate_skip_loads@GOTTPOFF")
            && gated.contains("__locksuit_gate_skip_stores@GOTTPOFF")
            && gated.contains("__sanitizer_cov_load4"),
        "the gate plugin was not used (is llvm-19-dev installed?)"
    );
    let ungated = assembly("off");
    assert!(!ungated.contains("__locksuit_gate"));
    assert!(ungated.contains("__sanitizer_cov_load4"));

    // Run without the shim, with callbacks that count themselves: behind
    // the gate the program makes no call at all; without it, one per access.
    let counter = counting_callbacks();
    let dir = workspace_root().join("target/c-tests");
    let callbacks = |gate: &str| {
        let bin = dir.join(format!("data_shapes.gate-{gate}"));
        let mut cmd = Command::new(locksuit_path());
        cmd.args(["cc", "-O2", "-pthread", "-o"])
            .arg(&bin)
            .arg(&src)
            .env("LOCKSUIT_GATE", gate)
            .env_remove("LOCKSUIT_CC");
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", describe(&out));
        let run = Command::new(&bin)
            .env("LD_PRELOAD", &counter)
            .env_remove("LOCKSUIT_DIR")
            .output()
            .unwrap();
        assert_success(&run, "data_shapes with counting callbacks");
        let err = String::from_utf8_lossy(&run.stderr).into_owned();
        let n = err
            .lines()
            .find_map(|l| l.strip_prefix("callbacks "))
            .unwrap_or_else(|| panic!("{err}"));
        n.trim().parse::<u64>().unwrap()
    };
    assert_eq!(callbacks("on"), 0);
    assert!(callbacks("off") > 10_000);
}

/// tests/c/count_callbacks.c built: preloaded, it counts the load and
/// store callbacks a program makes, and passes each on to the shim's.
fn counting_callbacks() -> std::path::PathBuf {
    let dir = workspace_root().join("target/c-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let counter = dir.join(format!("libcount_callbacks.{}.so", std::process::id()));
    if !counter.exists() {
        let built = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&counter)
            .arg(c_dir().join("count_callbacks.c"))
            .arg("-ldl")
            .output()
            .unwrap();
        assert!(built.status.success(), "{}", describe(&built));
    }
    counter
}

/// tests/c/data_runs.c: the gate is tested once per run of accesses with
/// no call between them, and again after each call the run makes to the
/// shim. When the first of six loads made holding no lock shuts it, the
/// other five make no call: about 2 load calls a round, not 7.
#[test]
fn a_run_of_accesses_stops_calling_once_the_shim_shuts_the_gate() {
    let Some(bin) = instrumented("data_runs") else {
        return;
    };
    let rounds = 20_000;
    let dir = fresh_dir("data-runs");
    let preload = format!(
        "{} {}",
        counting_callbacks().display(),
        shim_path().display()
    );
    let out = Command::new(&bin)
        .env("LD_PRELOAD", preload)
        .env("LOCKSUIT_DIR", &dir)
        .env(EVERY_ENGAGEMENT.0, EVERY_ENGAGEMENT.1)
        .output()
        .unwrap();
    assert_success(&out, "data_runs");
    assert_same_output(&run_plain(&bin, &[] as &[&str]), &out);
    assert_eq!(
        stdout_value(&stdout_str(&out), "counter"),
        rounds.to_string()
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let counts: Vec<u64> = err
        .lines()
        .find_map(|l| l.strip_prefix("loads "))
        .and_then(|l| {
            let (loads, stores) = l.split_once(" stores ")?;
            Some(vec![loads.parse().ok()?, stores.parse().ok()?])
        })
        .unwrap_or_else(|| panic!("{err}"));
    let (loads, stores) = (counts[0], counts[1]);
    assert!(
        (2 * rounds..3 * rounds).contains(&loads),
        "{loads} load calls for {rounds} rounds"
    );
    assert!(stores >= rounds, "{stores} store calls for {rounds} rounds");
    // And the shim took the calls it was passed: the counter's accesses.
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    assert_eq!(u64_of(&p["data_level"], "accesses"), 2 * rounds);
}

/// Sampling, the default (1 in 64) and `LOCKSUIT_DATA_SAMPLE=16`: each
/// line's first 4 engagements of a lock on a thread, then those whose
/// number is a multiple of N, have their accesses recorded, exactly; the
/// report says it was sampled, adds that to the findings that say data
/// was private, and makes no read-only verdict (a write in an engagement
/// left out, or to a part of the data no recorded engagement touched,
/// would be missed).
#[test]
fn sampled_engagements_are_recorded_exactly_and_the_report_says_so() {
    let Some(bin) = instrumented("data_shapes") else {
        return;
    };
    for (every, env) in [(64, None), (16, Some(("LOCKSUIT_DATA_SAMPLE", "16")))] {
        let tag = format!("data-sampled-{every}");
        // The default: set empty, which overrides any value the tests'
        // own environment may carry.
        let env: Vec<(&str, &str)> = env.into_iter().collect();
        let run = if env.is_empty() {
            record_plain_and_shim_env(&bin, &tag, &[("LOCKSUIT_DATA_SAMPLE", "")])
        } else {
            record_plain_and_shim_env(&bin, &tag, &env)
        };
        // Sampling shuts the gate for a while; the program sees nothing of it.
        assert_same_output(&run.plain, &run.shim);
        assert_eq!(stdout_value(&stdout_str(&run.shim), "tally_sum"), "3000");
        let p = only_process(&run.report);
        assert_eq!(
            p["data_level"]["sample_every"], every,
            "{}",
            p["data_level"]
        );
        assert_eq!(p["data_level"]["sample_first"], 4, "{}", p["data_level"]);
        // Each worker's 1,000 engagements of pair_lock at one line: the
        // first 4, then every N-th; each makes a load and a store of its
        // own tally. Three workers.
        let recorded = 3 * 2 * (4 + (5..=1000).filter(|n| n % every == 0).count() as u64);
        let tally_line = arr(p, "sites")
            .iter()
            .find(|s| s["suitable_accesses"] == 0 && s["unsuitable_accesses"] == recorded)
            .unwrap_or_else(|| {
                panic!(
                    "{every}: no line with {recorded} private accesses: {}",
                    p["sites"]
                )
            });
        assert_eq!(str_of(tally_line, "basis"), "data");
        let disjoint = finding_on(p, "disjoint-data", "&pair_lock")
            .unwrap_or_else(|| panic!("{every}: {}", p["findings"]));
        assert!(
            str_of(disjoint, "message").contains("Sampled"),
            "{disjoint}"
        );
        assert!(
            !arr(p, "findings")
                .iter()
                .any(|f| f["kind"] == "read-only-sharing"),
            "{every}: {}",
            p["findings"]
        );
        // Instead the report names the locks whose samples only read
        // shared data: config_lock (only read), and status_lock and
        // rare_lock, whose writes no sampled engagement saw; not pair_lock.
        let unjudged = arr(&p["data_level"], "read_only_unjudged");
        for lock in ["&config_lock", "&status_lock", "&rare_lock"] {
            assert!(
                unjudged.iter().any(|l| l == lock),
                "{every}: {lock}: {unjudged:?}"
            );
        }
        assert!(!unjudged.iter().any(|l| l == "&pair_lock"), "{unjudged:?}");
        let words = report_words(&run.dir);
        assert!(
            words.contains("lines judged by data touched in sampled engagements")
                && words.contains("LOCKSUIT_DATA_SAMPLE=all judges it"),
            "{words}"
        );
        // That phrase is longer than a line: it wraps at its spaces, and
        // no word of it is cut in two (glued whole, it was cut wherever
        // the line ended).
        let said = format!(
            "lines judged by data touched in sampled engagements (each line's first 4, then 1 in {every}, and the first accesses of each; read-only sharing not judged (the samples under "
        );
        assert!(words.contains(&said), "{words}");
        assert!(
            words.contains("only read shared data): LOCKSUIT_DATA_SAMPLE=all judges it):"),
            "{words}"
        );
    }
}

/// tests/c/data_false_sharing.c: two threads each count in a slot of
/// their own under a lock of their own. The slots of `counters` share a
/// cache line (a `false-sharing` finding names both); those of `padded`
/// do not (nothing about them).
#[test]
fn slots_of_different_threads_in_one_cache_line_are_false_sharing() {
    let Some(bin) = instrumented("data_false_sharing") else {
        return;
    };
    let run = record_plain_and_shim_env(&bin, "data-false-sharing", &[EVERY_ENGAGEMENT]);
    assert_same_output(&run.plain, &run.shim);
    assert_eq!(stdout_value(&stdout_str(&run.shim), "counters"), "4000");
    let p = only_process(&run.report);
    let shares: Vec<&Value> = arr(p, "findings")
        .iter()
        .filter(|f| f["kind"] == "false-sharing")
        .collect();
    assert_eq!(shares.len(), 1, "{}", p["findings"]);
    let message = str_of(shares[0], "message");
    assert!(
        message.contains("&counters+0x0 and &counters+0x8"),
        "{message}"
    );
    assert!(message.contains("(2 threads, 8000 accesses"), "{message}");
    assert!(!message.contains("padded"), "{message}");
    assert!(!arr(shares[0], "sites").is_empty(), "{}", shares[0]);
}

/// tests/c/data_long.c: three engagements of 5,000 loads each, with a lock
/// taken inside each (and an access under it). Recording everything keeps all 15,000;
/// sampling keeps each engagement's first 4,096 (the inner lock does not
/// restart the count), and either way each counts once in its line's
/// engagement ratios.
#[test]
fn sampling_keeps_each_long_engagements_first_accesses() {
    let Some(bin) = instrumented("data_long") else {
        return;
    };
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(&plain, "data_long without the shim");
    for (setting, expected) in [("all", 15_000), ("16", 3 * 4096)] {
        let dir = fresh_dir(&format!("data-long-{setting}"));
        let out = run_under_shim_env(
            &bin,
            &[] as &[&str],
            &dir,
            &[("LOCKSUIT_DATA_SAMPLE", setting)],
        );
        assert_success(&out, "data_long");
        assert_eq!(stdout_value(&stdout_str(&out), "sum"), "37492500");
        assert_eq!(stdout_str(&out), stdout_str(&plain));
        let report = report_json(&[&dir], None);
        let p = only_process(&report);
        let scan = arr(p, "sites")
            .iter()
            .find(|s| arr(s, "locks").iter().any(|l| l == "&outer"))
            .unwrap_or_else(|| panic!("{}", p["sites"]));
        assert_eq!(
            u64_of(scan, "unsuitable_accesses"),
            expected,
            "LOCKSUIT_DATA_SAMPLE={setting}: {scan}"
        );
        // Three engagements in the ratios, not six: the inner lock does
        // not cut each in two.
        let engagements: u64 = arr(&scan["engagement_ratios"], "not_waited_for")
            .iter()
            .chain(arr(&scan["engagement_ratios"], "waited_for"))
            .map(|n| n.as_u64().unwrap())
            .sum();
        assert_eq!(engagements, 3, "LOCKSUIT_DATA_SAMPLE={setting}: {scan}");
    }
}
