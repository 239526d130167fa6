//! The critical path's predicted gains (issue 39), against the gains of
//! changes made by hand: tests/c/critical_path.c runs each program of
//! known structure as it is ("base") and with a lock (or the barrier) taken
//! out ("removed"), and measures its own run time. The report of the base
//! run predicts how much sooner the run would end with that lock's waits
//! removed; the variant, run plain, says how much sooner it did end.
//!
//! Both sides are medians of runs, and the measured side is what the
//! programs timed themselves: a busy machine slows base and variant alike.
//! The work is sleeping, so that it takes the same time on a loaded
//! processor.

use locksuit_tests::*;
use serde_json::Value;

const RUNS: usize = 3;

#[derive(Clone, Copy)]
struct How {
    /// A finding on the lock (its holder sleeps holding it) must carry the
    /// lock's gain.
    finding: bool,
    /// Record with `LOCKSUIT_EVENTS=all`.
    all_events: bool,
}

const FINDING: How = How {
    finding: true,
    all_events: false,
};
const NO_FINDING: How = How {
    finding: false,
    all_events: false,
};
const ALL_EVENTS: How = How {
    finding: true,
    all_events: true,
};

/// One program measured at a time: the tests of this file would otherwise
/// load the machine for each other, unevenly.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn run_ns(out: &std::process::Output, what: &str) -> u64 {
    assert_success(out, what);
    stdout_value(&stdout_str(out), "run-ns").parse().unwrap()
}

/// The predicted gain of removing `lock`'s waits in one recorded base run
/// (low and high ns), with the run's length under the shim.
fn predicted(program: &str, lock: &str, i: usize, how: How) -> (u64, u64, u64) {
    let bin = build_c("critical_path");
    let dir = fresh_dir(&format!("critical_path_{program}_{i}"));
    let env: &[(&str, &str)] = if how.all_events {
        &[("LOCKSUIT_EVENTS", "all")]
    } else {
        &[]
    };
    let out = run_under_shim_env(&bin, &[program, "base"], &dir, env);
    run_ns(&out, program);
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    let path = &p["critical_path"];
    let entry = arr(path, "locks")
        .iter()
        .find(|l| l["lock"] == lock)
        .unwrap_or_else(|| panic!("{program}: no {lock} in {}", short(path)));
    let gain = &entry["gain"]["if_removed"];
    let (low, high) = (u64_of(gain, "low_ns"), u64_of(gain, "high_ns"));
    assert!(low <= high, "{}", short(gain));
    // The finding on the lock alone (its sleeping holder) carries the same
    // gain. (A finding over a family of locks made at one line, which
    // series' A and B are, carries the family's: both removed.)
    if how.finding {
        let alone = |f: &&Value| {
            let ids: Vec<&str> = arr(f, "locks").iter().filter_map(|l| l.as_str()).collect();
            ids == [lock] || (ids.is_empty() && f["lock"] == lock)
        };
        let f = findings_for_lock(p, lock)
            .into_iter()
            .filter(alone)
            .find(|f| !f["predicted_gain"].is_null())
            .unwrap_or_else(|| panic!("{program}: no finding on {lock} alone has a gain"));
        assert_eq!(&f["predicted_gain"]["if_removed"], gain);
    }
    // A line that waited on this lock alone carries the same gain (the
    // line's: every wait made at it removed).
    let lines: Vec<&serde_json::Value> = sites(p)
        .iter()
        .filter(|s| u64_of(s, "wait_ns") > 0 && arr(s, "locks").iter().all(|l| l == lock))
        .collect();
    if matches!(program, "on-path" | "off-path") {
        assert!(
            !lines.is_empty(),
            "{program}: no line waited on {lock} alone"
        );
    }
    for line in lines {
        assert_eq!(
            &line["predicted_gain"]["if_removed"], gain,
            "{program}: the gain of {} (waits on {lock} alone)",
            line["id"]
        );
    }
    (low, high, u64_of(path, "run_ns"))
}

/// Predicted against measured for `program`, with `lock`'s waits removed.
/// Returns (predicted, measured, base run, the plain runs' spread) in ns.
fn compare(program: &str, lock: &str, how: How) -> (u64, u64, u64, u64) {
    let bin = build_c("critical_path");
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut lows = Vec::new();
    let mut highs = Vec::new();
    for i in 0..RUNS {
        let (low, high, run) = predicted(program, lock, i, how);
        assert_eq!(
            low, high,
            "{program}: every wait's ender is recorded, so the gain is one figure"
        );
        assert!(high <= run, "{program}: gains {high} of a {run} ns run");
        lows.push(low);
        highs.push(high);
    }
    let predicted = median(highs);
    let mut base = Vec::new();
    let mut removed = Vec::new();
    for _ in 0..RUNS {
        base.push(run_ns(&run_plain(&bin, &[program, "base"]), program));
        removed.push(run_ns(&run_plain(&bin, &[program, "removed"]), program));
    }
    // How far apart the plain runs of each variant came: on a busy machine
    // their wake-ups are late by different amounts, and no prediction can
    // be checked closer than the measurement repeats itself.
    let spread = |v: &[u64]| v.iter().max().unwrap() - v.iter().min().unwrap();
    let noise = spread(&base) + spread(&removed);
    let base = median(base);
    let measured = median(removed);
    let gain = base.saturating_sub(measured);
    eprintln!(
        "{program}: predicted gain {:.2} ms, measured {:.2} ms (base {:.2} ms, removed {:.2} ms)",
        predicted as f64 / 1e6,
        gain as f64 / 1e6,
        base as f64 / 1e6,
        measured as f64 / 1e6
    );
    (predicted, gain, base, noise)
}

/// Within 25% of the measured gain, or within 3 percentage points of the
/// run where the gain is small, beyond what the plain runs themselves
/// varied (`noise`: the spread of the base runs plus that of the changed
/// ones; on a quiet machine well under a millisecond).
fn assert_close(program: &str, (predicted, measured, base, noise): (u64, u64, u64, u64)) {
    let off = predicted.abs_diff(measured).saturating_sub(noise) as f64;
    let pct_points = off * 100.0 / base as f64;
    assert!(
        off <= measured as f64 * 0.25 || pct_points <= 3.0,
        "{program}: predicted {predicted} ns, measured {measured} ns of a {base} ns run ({pct_points:.1} points apart beyond the runs' own spread of {noise} ns)"
    );
}

#[test]
fn a_lock_on_the_path_is_predicted_to_gain_what_removing_it_does() {
    let got = compare("on-path", "&lock_l", FINDING);
    // It serialises three workers: removing it halves the run, about.
    assert!(got.1 * 4 > got.2, "measured gain {} of {}", got.1, got.2);
    assert_close("on-path", got);
}

#[test]
fn a_lock_whose_waits_overlap_other_work_is_predicted_to_gain_nothing() {
    let got = compare("off-path", "&lock_l", FINDING);
    assert_close("off-path", got);
    // Near zero, however long its waits were (about 40 ms).
    assert!(
        got.0 * 100 <= got.2 * 3,
        "predicted {} ns of a {} ns run",
        got.0,
        got.2
    );
    let bin = build_c("critical_path");
    let dir = fresh_dir("critical_path_off_path_report");
    assert_success(
        &run_under_shim(&bin, &["off-path", "base"], &dir),
        "off-path",
    );
    let report = report_json(&[&only_trace(&dir)], None);
    let path = &only_process(&report)["critical_path"];
    assert!(
        arr(path, "off_path").iter().any(|l| l == "&lock_l"),
        "{}",
        short(path)
    );
}

/// The path goes through a condition wait into the notifier: the waiter's
/// end depends on the worker whose signal ended its wait, and so on the
/// lock the workers shared (a wait whose notifier was not followed would
/// make the gain a range, which `compare` refuses).
#[test]
fn a_condition_wait_is_followed_into_the_thread_that_notified_it() {
    let got = compare("notified", "&lock_l", FINDING);
    // L is on the path: taking it out gains about a sixth of the run, as
    // far as the plain runs (their spread `got.3`) can tell.
    assert!(
        (got.1 + got.3) * 8 > got.2,
        "measured gain {} of {} (spread {})",
        got.1,
        got.2,
        got.3
    );
    assert_close("notified", got);
}

/// Recorded with every operation: B, never waited for in this run, becomes
/// the bottleneck once A is gone, and the re-play keeps its holds apart
/// (recording contended operations only, it would not know they meet).
#[test]
fn of_two_locks_in_series_removing_the_slower_gains_only_down_to_the_other() {
    let got = compare("series", "&lock_a", ALL_EVENTS);
    assert_close("series", got);
}

#[test]
fn a_barrier_is_predicted_to_gain_what_the_imbalance_between_rounds_costs() {
    let got = compare("barrier", "&barrier", NO_FINDING);
    assert_close("barrier", got);
}

/// `locksuit diff` of `program`'s "removed" run (base) against its "base"
/// run (current): the JSON diff's critical path and the text.
fn diff_of(program: &str) -> (serde_json::Value, String, u64, u64) {
    let bin = build_c("critical_path");
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let before = fresh_dir(&format!("critical_path_diff_{program}_removed"));
    let after = fresh_dir(&format!("critical_path_diff_{program}_base"));
    let was = run_ns(
        &run_under_shim(&bin, &[program, "removed"], &before),
        program,
    );
    let now = run_ns(&run_under_shim(&bin, &[program, "base"], &after), program);
    let (b, a) = (before.to_str().unwrap(), after.to_str().unwrap());
    let json = run_locksuit(&["diff", b, a, "--format", "json"]);
    let diffs: serde_json::Value = serde_json::from_str(&stdout_str(&json))
        .unwrap_or_else(|e| panic!("{e}: {}", describe(&json)));
    let text = stdout_str(&run_locksuit(&["diff", b, a]));
    (diffs[0]["critical_path"].clone(), text, was, now)
}

#[test]
fn a_diff_ranks_a_lock_by_its_share_of_the_path_and_says_when_it_is_off_it() {
    // On the path: L serialises the workers; the run got slower (the
    // program's own measure) by what the path through L grew.
    let (path, text, was, now) = diff_of("on-path");
    assert!(now > was, "base {now} ns, removed {was} ns");
    assert!(i64_of(&path, "length_change_ns") > 0, "{}", short(&path));
    let l = &arr(&path, "locks")[0];
    assert_eq!(l["lock"], "&lock_l", "{}", short(&path));
    assert_eq!(l["off_path"], false);
    assert!(i64_of(l, "path_change_ns") > 0, "{}", short(&path));
    assert!(text.contains("&lock_l: on the critical path +"), "{text}");

    // Off the path: its waits grew as much, but overlap the other work.
    let (path, text, _, _) = diff_of("off-path");
    let l = arr(&path, "locks")
        .iter()
        .find(|l| l["lock"] == "&lock_l")
        .unwrap_or_else(|| panic!("{}", short(&path)))
        .clone();
    assert_eq!(l["off_path"], true, "{}", short(&path));
    assert!(i64_of(&l, "wait_change_ns") > 0, "{}", short(&path));
    assert_eq!(i64_of(&l, "path_change_ns"), 0);
    assert!(
        text.contains("&lock_l: waits +")
            && text.contains("off the critical path: the run did not get slower for it"),
        "{text}"
    );
}

fn i64_of(v: &serde_json::Value, key: &str) -> i64 {
    v[key]
        .as_i64()
        .unwrap_or_else(|| panic!("no {key} in {}", short(v)))
}
