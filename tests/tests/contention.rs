//! Contention: two threads and one lock with a forced, known order. Thread B
//! blocks on the lock in every round while thread A holds it for ~20 ms.

use locksuit_tests::*;

const SRC: &str = "contention.c";
const MS: u64 = 1_000_000;

#[test]
fn forced_contention() {
    let bin = build_c("contention");
    let dir = fresh_dir("contention");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "contention under the shim");
    let stdout = stdout_str(&out);
    let rounds: u64 = stdout_value(&stdout, "rounds").parse().unwrap();
    let hold_ms: u64 = stdout_value(&stdout, "hold-ms").parse().unwrap();
    assert_eq!((rounds, hold_ms), (10, 20), "test constants");

    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    let lock = lock_by_address(p, &stdout_value(&stdout, "lock"));
    let id = id_of(lock);

    assert_eq!(
        u64_of(lock, "acquisitions"),
        2 * rounds,
        "A and B each lock once per round"
    );
    assert_eq!(
        u64_of(lock, "contended"),
        rounds,
        "B waits every round, A never"
    );
    assert_eq!(u64_of(lock, "threads"), 2);
    // A and B take turns every round: the owner changes at every
    // acquisition but the first.
    assert_eq!(
        u64_of(lock, "owner_changes"),
        2 * rounds - 1,
        "{}",
        short(lock)
    );
    let wait = u64_of(lock, "wait_ns");
    assert!(
        wait >= rounds * 10 * MS,
        "B waits at least {hold_ms} ms per round: wait_ns {wait} < {}",
        rounds * 10 * MS
    );
    // By default only contended holds are timed (no clock read on an
    // uncontended acquisition): B's, one per round.
    assert_eq!(
        u64_of(lock, "hold_samples"),
        rounds,
        "only B's contended holds are timed by default"
    );

    // Both sites took part in a task switch every round (B waited, A made B
    // wait), so both are definitely suitable at the default threshold.
    let a_line = line_of(SRC, "/* @a-lock */");
    let b_line = line_of(SRC, "/* @b-lock */");
    let sites = sites_of_lock(p, id);
    assert_eq!(
        sites.len(),
        2,
        "the lock is engaged at two sites: {:?}",
        sites.iter().map(|s| site_where(s)).collect::<Vec<_>>()
    );
    for (function, line) in [("thread_a_round", a_line), ("thread_b_round", b_line)] {
        let site = sites
            .iter()
            .find(|s| site_is_at(s, function, SRC, line))
            .unwrap_or_else(|| {
                panic!(
                    "no site at {function} {SRC}:{line}; sites: {:?}",
                    sites.iter().map(|s| site_where(s)).collect::<Vec<_>>()
                )
            });
        assert_eq!(
            u64_of(site, "engagements"),
            rounds,
            "{function} engagements"
        );
        assert!(
            u64_of(site, "task_switches") >= 1,
            "{function} had task switches: {}",
            short(site)
        );
        // The seed's line states: every engagement switched tasks with a
        // ratio above the threshold, so nothing ever marked the line
        // apparently unsuitable: apparently suitable; had some engagement
        // not switched, the ones that did would make it definitely so.
        let expected = if u64_of(site, "task_switches") == rounds {
            "apparently-suitable"
        } else {
            "definitely-suitable"
        };
        assert_eq!(
            str_of(site, "status"),
            expected,
            "{function}: {}",
            short(site)
        );
        assert!(
            findings_for_site(p, id_of(site))
                .iter()
                .all(|f| f["kind"] != "unsuitable-site"),
            "{function} must not be an unsuitable site"
        );
    }
    assert!(
        findings_taken_alone(p, id).is_empty(),
        "a lock two threads use is not unnecessary"
    );
}

/// With `LOCKSUIT_HOLD_SAMPLE=1` every hold is timed, A's uncontended ones too.
#[test]
fn every_hold_timed_when_asked() {
    let bin = build_c("contention");
    let dir = fresh_dir("contention-holds");
    let out = run_under_shim_env(&bin, &[] as &[&str], &dir, &[("LOCKSUIT_HOLD_SAMPLE", "1")]);
    assert_success(&out, "contention under the shim, all holds timed");
    let stdout = stdout_str(&out);
    let rounds: u64 = stdout_value(&stdout, "rounds").parse().unwrap();
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    assert_eq!(p["hold_sample_period"].as_u64(), Some(1));
    let lock = lock_by_address(p, &stdout_value(&stdout, "lock"));
    assert_eq!(
        u64_of(lock, "hold_samples"),
        2 * rounds,
        "every engagement timed"
    );
    let hold = u64_of(lock, "hold_ns");
    assert!(
        hold >= rounds * 10 * MS,
        "A holds the lock at least 20 ms per round: hold_ns {hold} < {}",
        rounds * 10 * MS
    );
}

/// tests/c/stale_wait_mark.c: one wait, then 100,000 holds nobody waited
/// for, enough for the lock's release sequence to come round three times
/// to the low 15 bits at which the wait began: only the hold the wait
/// began in made a task switch.
#[test]
fn a_wait_is_a_task_switch_of_the_hold_it_began_in_only() {
    let bin = build_c("stale_wait_mark");
    let plain = run_plain(&bin, &["100000"]);
    for attempt in 0..3 {
        let dir = fresh_dir(&format!("stale-wait-mark-{attempt}"));
        let out = run_under_shim(&bin, &["100000"], &dir);
        assert_success(&out, "stale_wait_mark");
        // The same lines (the wait the program measured varies).
        assert_same_output_keys(&plain, &out);
        let stdout = stdout_str(&out);
        let waited_ms: u64 = stdout_value(&stdout, "waiter_waited_ms").parse().unwrap();
        let report = report_json(&[&only_trace(&dir)], None);
        let p = only_process(&report);
        let alone = site_in(p, "hold_alone");
        assert_eq!(u64_of(alone, "engagements"), 100_000, "{alone}");
        assert_eq!(u64_of(alone, "task_switches"), 0, "{alone}");
        if waited_ms < 10 {
            // The waiter had not begun to wait in 50 ms (a busy machine):
            // nothing was tested.
            continue;
        }
        let first = site_in(p, "hold_while_it_waits");
        assert_eq!(u64_of(first, "task_switches"), 1, "{first}");
        return;
    }
    panic!("the waiter did not wait in any of three runs");
}
