//! Contention accuracy: who blocked whom, for how long, at which functions,
//! against forced timings (a 300 ms hold entered 100 ms late; a 50 ms
//! timedlock deadline). Counts are exact; times match the program's own
//! measure within 2 %, and the forced times within ±10 % whenever the
//! program kept to them.

use locksuit_tests::*;
use std::process::Output;

const MS: u64 = 1_000_000;

/// The tests here compare measured times with forced ones (±10 %), and one
/// of them keeps a core busy: they run one at a time so they do not steal
/// each other's CPU on a 2-core machine.
static TIMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    TIMING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `actual` (what locksuit reports) against the forced time and against
/// `own`, the program's own measure of the same interval. The report must
/// match what really happened within 2 % (or 5 ms); and when the machine kept to the
/// forced timing (own within ±10 % of it), the report must be within ±10 %
/// of the forced time, as the issue asks. On a loaded machine a sleep can
/// overshoot by tens of milliseconds, so the forced time alone is not what
/// happened.
fn within(actual: u64, forced: u64, own: u64, what: &str) {
    let ms = |ns: u64| ns as f64 / MS as f64;
    // The program's measure also spans the shim's work before the wait
    // starts (on a first sight of the line, the unwinder), hence the floor.
    assert!(
        actual.abs_diff(own) <= (own / 50).max(5 * MS),
        "{what}: {:.1} ms reported, {:.1} ms measured by the program (2 % or 5 ms allowed; forced {:.1} ms)",
        ms(actual),
        ms(own),
        ms(forced)
    );
    let (low, high) = (forced * 9 / 10, forced * 11 / 10);
    if (low..=high).contains(&own) {
        assert!(
            (low..=high).contains(&actual),
            "{what}: {:.1} ms, expected {:.1} ms ±10 %",
            ms(actual),
            ms(forced)
        );
    } else {
        eprintln!(
            "{what}: the machine did not keep to the forced {:.1} ms (the program measured {:.1} ms); compared with that",
            ms(forced),
            ms(own)
        );
    }
}

/// The program's own measures: (A's hold, B's wait, B2's wait).
fn own_measures(stderr: &str) -> (u64, u64, u64) {
    let ns = |k: &str| stdout_value(stderr, k).parse::<u64>().unwrap();
    (ns("a-hold-ns"), ns("b-wait-ns"), ns("b2-wait-ns"))
}

#[test]
fn one_blocking_row_from_the_holder_to_the_late_asker() {
    let _serial = one_at_a_time();
    let bin = build_c("blocking");
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(&plain, "blocking without the shim");
    let dir = fresh_dir("blocking");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "blocking under the shim");
    assert_eq!(
        plain.stdout,
        out.stdout,
        "same output: {}",
        stdout_str(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let tid = |k: &str| stdout_value(&stderr, k).parse::<u64>().unwrap();

    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    let lock = lock_by_address(p, &stdout_value(&stderr, "lock"));
    let id = id_of(lock);

    // Exactly one row: A blocked B, once, for about 200 ms.
    let rows: Vec<&Value> = arr(p, "blocking")
        .iter()
        .filter(|b| b["lock"] == id)
        .collect();
    assert_eq!(rows.len(), 1, "one blocking row: {rows:?}");
    let row = rows[0];
    assert_eq!(u64_of(row, "blocker_tid"), tid("tid-a"));
    assert_eq!(u64_of(row, "blocked_tid"), tid("tid-b"));
    assert_eq!(u64_of(row, "count"), 1);
    let (_, b_wait, b2_wait) = own_measures(&stderr);
    within(
        u64_of(row, "wait_ns"),
        200 * MS,
        b_wait,
        "B's wait behind A",
    );

    let functions = arr(p, "blocking_functions");
    assert!(
        functions.iter().any(|f| f["blocker_function"] == "thread_a"
            && f["blocked_function"] == "thread_b"
            && f["count"] == 1),
        "thread_a blocked thread_b once: {functions:?}"
    );

    // Two contended waits on L: B's (≈200 ms) and B2's timed-out one (≈50 ms).
    assert_eq!(u64_of(lock, "contended"), 1);
    assert_eq!(u64_of(lock, "timeouts"), 1);
    let wait = &lock["wait"];
    assert_eq!(u64_of(wait, "count"), 2, "{wait}");
    within(
        u64_of(wait, "max_ns"),
        200 * MS,
        b_wait.max(b2_wait),
        "longest wait",
    );
    within(
        u64_of(wait, "total_ns"),
        250 * MS,
        b_wait + b2_wait,
        "total wait",
    );

    // A held L for ~200 ms while B waited: a long hold (default 10 ms).
    let long: Vec<&Value> = findings_for_lock(p, id)
        .into_iter()
        .filter(|f| f["kind"] == "long-hold")
        .collect();
    assert_eq!(
        long.len(),
        1,
        "one long-hold finding: {:?}",
        findings_for_lock(p, id)
    );
    // A slept holding it: off the CPU, and blocked, not a long critical
    // section (issue 32, item 5).
    assert_eq!(long[0]["holder"]["state"], "off-cpu", "{}", short(long[0]));
    let message = str_of(long[0], "message");
    assert!(
        message.contains("it blocked holding the lock") && !message.contains("shorten"),
        "{message}"
    );
    // At a 500 ms limit there is none.
    let relaxed = run_locksuit(&[
        "report",
        only_trace(&dir).to_str().unwrap(),
        "--format",
        "json",
        "--long-hold-ms",
        "500",
    ]);
    let relaxed: Value = serde_json::from_slice(&relaxed.stdout).expect("JSON");
    assert!(
        arr(only_process(&relaxed), "findings")
            .iter()
            .all(|f| f["kind"] != "long-hold"),
        "no long-hold at 500 ms"
    );
}

/// The shim's own slow-path time inside a hold (here: 100 lines seen for the
/// first time while holding L) is taken out of the compensated hold and out
/// of the wait it caused; the raw figures keep it.
#[test]
fn compensation_takes_the_shims_time_out_of_holds_and_waits() {
    let _serial = one_at_a_time();
    let bin = build_c("compensation");
    let dir = fresh_dir("compensation");
    // Time every hold, so A's (uncontended) acquisition of L is timed too.
    let out = run_under_shim_env(&bin, &[] as &[&str], &dir, &[("LOCKSUIT_HOLD_SAMPLE", "1")]);
    assert_success(&out, "compensation under the shim");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    let lock = lock_by_address(p, &stdout_value(&stderr, "lock"));
    let (hold, hold_c) = (&lock["hold"], &lock["hold_compensated"]);
    let (wait, wait_c) = (&lock["wait"], &lock["wait_compensated"]);
    assert_eq!(u64_of(hold, "count"), u64_of(hold_c, "count"), "{lock}");
    let shim_in_hold = u64_of(hold, "max_ns") - u64_of(hold_c, "max_ns");
    assert!(
        shim_in_hold >= 10_000,
        "100 first-seen lines inside the hold cost the shim at least 10 µs: {shim_in_hold} ns"
    );
    assert!(
        u64_of(hold, "max_ns") >= 50 * MS,
        "the raw hold keeps the 50 ms sleep and the shim's time: {hold}"
    );
    assert_eq!(
        u64_of(wait, "total_ns") - u64_of(wait_c, "total_ns"),
        shim_in_hold,
        "B's wait loses exactly the shim time inside A's hold"
    );
}

/// True when the shim may read time from the TSC here: the CPU's TSC is
/// invariant (Linux shows both flags for CPUID 0x8000_0007 EDX bit 8) and
/// the kernel keeps time with it.
fn machine_has_trusted_tsc() -> bool {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .unwrap_or_default();
    invariant_tsc_flags(&cpuinfo) && source.trim() == "tsc"
}

fn invariant_tsc_flags(cpuinfo: &str) -> bool {
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// The same forced wait measured through the calibrated TSC (the default
/// where the machine allows it) and through `clock_gettime`
/// (`LOCKSUIT_CLOCK=monotonic`): the report names its clock, and both agree
/// within 2 % with the waiting thread's own measure.
#[test]
fn the_tsc_clock_and_the_monotonic_clock_agree() {
    let _serial = one_at_a_time();
    let bin = build_c("blocking");
    for (setting, expected_clock) in [
        (
            "auto",
            if machine_has_trusted_tsc() {
                "tsc"
            } else {
                "monotonic"
            },
        ),
        ("monotonic", "monotonic"),
    ] {
        let dir = fresh_dir(&format!("clock-{setting}"));
        let out = run_under_shim_env(&bin, &[] as &[&str], &dir, &[("LOCKSUIT_CLOCK", setting)]);
        assert_success(&out, "blocking under the shim");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let report = report_json(&[&only_trace(&dir)], None);
        let p = only_process(&report);
        assert_eq!(
            str_of(p, "clock"),
            expected_clock,
            "LOCKSUIT_CLOCK={setting}"
        );
        if expected_clock == "tsc" {
            let khz = u64_of(p, "tsc_khz");
            assert!(
                (100_000..20_000_000).contains(&khz),
                "a plausible TSC rate: {khz} kHz"
            );
        } else {
            assert!(p["tsc_khz"].is_null(), "no TSC rate: {}", p["tsc_khz"]);
        }
        let lock = lock_by_address(p, &stdout_value(&stderr, "lock"));
        let row = arr(p, "blocking")
            .iter()
            .find(|b| b["lock"] == id_of(lock))
            .expect("a blocking row");
        // Against B's own measure (clock_gettime around its lock call), not
        // the forced 200 ms: a loaded machine moves both alike.
        let own = stdout_value(&stderr, "b-wait-ns").parse::<u64>().unwrap();
        let measured = u64_of(row, "wait_ns");
        assert!(
            measured.abs_diff(own) <= own / 50,
            "B's wait, clock {setting}: {:.2} ms recorded, {:.2} ms by B's own clock (2 % allowed)",
            measured as f64 / MS as f64,
            own as f64 / MS as f64
        );
    }
}

/// `locksuit events`: the forced scenario's lock, fully traced, reads back
/// in causal order: each request names the holder, each release the thread
/// it handed the lock to, and the waits are the forced ones.
#[test]
fn the_event_stream_names_holders_and_successors() {
    let _serial = one_at_a_time();
    let bin = build_c("blocking");
    let dir = fresh_dir("blocking-stream");
    let out = run_under_shim_env(&bin, &[] as &[&str], &dir, &[("LOCKSUIT_EVENTS", "all")]);
    assert_success(&out, "blocking under the shim");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let tid = |k: &str| stdout_value(&stderr, k).parse::<u64>().unwrap();
    let (a, b, a2, b2) = (tid("tid-a"), tid("tid-b"), tid("tid-a2"), tid("tid-b2"));
    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let id = id_of(lock_by_address(
        only_process(&report),
        &stdout_value(&stderr, "lock"),
    ))
    .to_string();

    let json = run_locksuit(&[
        "events",
        trace.to_str().unwrap(),
        "--object",
        &id,
        "--format",
        "json",
    ]);
    assert_success(&json, "locksuit events");
    let v: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let streams = arr(only_process(&v), "streams");
    assert_eq!(streams.len(), 1, "only the asked-for lock: {streams:?}");
    assert_eq!(streams[0]["object"], id.as_str());
    let events = arr(&streams[0], "events");
    let got: Vec<(String, u64, Option<u64>, Option<u64>)> = events
        .iter()
        .map(|e| {
            (
                str_of(e, "kind").to_string(),
                u64_of(e, "tid"),
                e["owner_tid"].as_u64(),
                e["handed_to_tid"].as_u64(),
            )
        })
        .collect();
    let row =
        |k: &str, t: u64, owner: Option<u64>, next: Option<u64>| (k.to_string(), t, owner, next);
    assert_eq!(
        got,
        vec![
            row("entered", a, None, None),
            row("enter", b, Some(a), None),
            row("exit", a, None, Some(b)),
            row("entered", b, None, None),
            row("exit", b, None, Some(a2)),
            row("entered", a2, None, None),
            row("enter", b2, Some(a2), None),
            row("timed-out", b2, None, None),
            row("exit", a2, None, None),
        ]
    );
    let seqs: Vec<u64> = events.iter().map(|e| u64_of(e, "seq")).collect();
    assert_eq!(seqs, vec![0, 0, 1, 1, 2, 2, 2, 2, 3]);
    let (a_hold, b_wait, b2_wait) = own_measures(&stderr);
    within(
        u64_of(&events[3], "wait_ns"),
        200 * MS,
        b_wait,
        "B's wait in the stream",
    );
    within(
        u64_of(&events[7], "wait_ns"),
        50 * MS,
        b2_wait,
        "B2's timed-out wait",
    );
    within(u64_of(&events[2], "hold_ns"), 300 * MS, a_hold, "A's hold");
    assert!(
        events[6]["deadline_ns"].as_u64().is_some(),
        "the timed request has its deadline"
    );

    let text = run_locksuit(&["events", trace.to_str().unwrap(), "--object", &id]);
    assert_success(&text, "locksuit events (text)");
    let text = stdout_str(&text);
    assert!(text.contains(&format!("handed to {b}")), "{text}");
    assert!(text.contains(&format!("held by {a2}")), "{text}");
}

/// The fast path's cost inside a hold is compensated too: A holds L over
/// 500,000 uncontended pairs on another lock while B waits. The loop's CPU
/// time with the shim minus without it is what the shim really cost inside
/// the hold; compensation must take out about that much (see the bounds).
#[test]
fn compensation_takes_out_the_fast_paths_sampled_cost() {
    let _serial = one_at_a_time();
    let bin = build_c("fast_path_compensation");
    let args = ["500000"];
    let figure =
        |out: &Output, key: &str| -> u64 { stdout_value(&stdout_str(out), key).parse().unwrap() };
    let plain_cpu = (0..3)
        .map(|_| {
            let out = run_plain(&bin, &args);
            assert_success(&out, "fast_path_compensation without the shim");
            figure(&out, "loop_cpu_ns")
        })
        .min()
        .unwrap();
    // The shim's true cost inside the hold is the loop's extra CPU time;
    // what compensation takes out (raw - compensated) must be close to it
    // (bounds below). CPU time, not wall time: a preemption inside the hold
    // is in neither the shim's cost nor its estimate. Best of five runs
    // (the estimate is a sample of 1 in 1024 calls; on a busy machine one
    // run in a few misses by more).
    let mut failure = String::new();
    let mut report = Value::Null;
    for attempt in 0..5 {
        let dir = fresh_dir(&format!("fast-path-compensation-{attempt}"));
        // Time every hold, so A's uncontended hold of L is measured.
        let out = run_under_shim_env(&bin, &args, &dir, &[("LOCKSUIT_HOLD_SAMPLE", "1")]);
        assert_success(&out, "fast_path_compensation under the shim");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        report = report_json(&[&only_trace(&dir)], None);
        let p = only_process(&report);
        let lock = lock_by_address(p, &stdout_value(&stderr, "lock"));
        let raw = u64_of(&lock["hold"], "max_ns");
        let compensated = u64_of(&lock["hold_compensated"], "max_ns");
        let removed = raw.saturating_sub(compensated);
        let shim_cost = figure(&out, "loop_cpu_ns").saturating_sub(plain_cpu);
        let ms = |ns: u64| ns as f64 / MS as f64;
        // At most a quarter more than the cost; at least 60% of it: the
        // sampled calls time the shim's own instructions, while the loop's
        // extra CPU also holds what the shim's code and data cost the
        // program's in the caches, which grows on a busy machine (seen:
        // 12.8 ms taken out of 19.1 ms beside four CPU hogs).
        let within = removed <= shim_cost + shim_cost / 4 && removed >= shim_cost * 3 / 5;
        if shim_cost > plain_cpu && within {
            failure.clear();
            break;
        }
        failure = format!(
            "compensation took out {:.1} ms; the shim cost {:.1} ms of CPU in the hold \
             (loop: {:.1} ms plain, {:.1} ms with the shim; hold raw {:.1} ms, compensated {:.1} ms)",
            ms(removed),
            ms(shim_cost),
            ms(plain_cpu),
            ms(plain_cpu + shim_cost),
            ms(raw),
            ms(compensated)
        );
    }
    assert!(failure.is_empty(), "{failure}");
    let p = only_process(&report);
    // A made a million recorder calls; its sampled cost per call is known.
    let costs: Vec<f64> = arr(p, "threads")
        .iter()
        .filter_map(|t| t["shim_call_ns"].as_f64())
        .collect();
    assert!(
        costs.iter().any(|&c| c > 0.5 && c < 1000.0),
        "a plausible sampled cost per call: {costs:?}"
    );
}
