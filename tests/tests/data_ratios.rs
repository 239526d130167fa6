//! Data-level suitability, the engagements' ratios (programs built with
//! `locksuit cc`). tests/c/data_waited.c: two threads count in slots of
//! their own under one lock, and now and then sleep holding it after
//! their access, so the other thread waits.

use locksuit_tests::*;

/// An engagement during which another thread began waiting for the lock
/// (a task switch it caused) is on the waited-for side of its line's
/// ratios, also when the wait began after the engagement's last access;
/// one during which a thread only went on waiting is not. Each of the
/// other thread's waits began in at most one engagement.
#[test]
fn an_engagement_another_thread_waited_for_is_counted_as_such() {
    let Some(bin) = instrumented("data_waited") else {
        return;
    };
    let run = record_plain_and_shim_env(&bin, "data-waited", &[EVERY_ENGAGEMENT]);
    assert_same_output(&run.plain, &run.shim);
    assert_eq!(stdout_str(&run.shim), "slot_sum 4000\n");
    let p = only_process(&run.report);
    let line = site_in(p, "worker");
    let side = |split: &str| -> u64 {
        arr(&line["engagement_ratios"], split)
            .iter()
            .map(|n| n.as_u64().unwrap())
            .sum()
    };
    let (waited, not_waited) = (side("waited_for"), side("not_waited_for"));
    assert_eq!(waited + not_waited, 4000, "every engagement made an access");
    // Forty sleeps holding the lock, each after the access: the other
    // thread, looping on the lock, begins a wait in some of them (and goes
    // on waiting while the sleeper takes the lock again and again).
    let contended = u64_of(line, "contended");
    assert!(
        waited > 0 && waited <= contended,
        "{waited} engagements waited for, {contended} contended acquisitions: {line}"
    );
}
