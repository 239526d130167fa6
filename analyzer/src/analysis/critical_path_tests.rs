use super::*;

fn life(tid: u32, parent: u32, start: u64, end: u64) -> Life {
    Life {
        tid,
        parent,
        start,
        end,
    }
}

fn wait(tid: u32, (start, end): (u64, u64), on: On, ender: Option<(u32, u64)>) -> Wait {
    Wait {
        tid,
        start,
        end,
        on,
        site: 0,
        ender,
    }
}

const L: On = On::Object(7);
const M: On = On::Object(8);

fn zero(on: &On) -> Shorten<'_> {
    Shorten {
        on: std::slice::from_ref(on),
        sites: None,
        kept: 0.0,
    }
}

fn halve(on: &On) -> Shorten<'_> {
    Shorten {
        kept: 0.5,
        ..zero(on)
    }
}

/// Main (1) makes 2 and 3 at 0; 2 holds L 0..40; 3 waits for it (0..41),
/// holds it till 81, ends at 90; main joins 2 (till 50) then 3 (till 91).
fn serial() -> Run {
    Run::new(
        &[life(1, 0, 0, 100), life(2, 1, 0, 50), life(3, 1, 0, 90)],
        &[
            wait(3, (0, 41), L, Some((2, 40))),
            wait(1, (0, 50), On::Join, Some((2, 50))),
            wait(1, (50, 91), On::Join, Some((3, 90))),
        ],
    )
}

#[test]
fn the_path_goes_back_through_the_joined_thread_and_the_releaser() {
    let path = serial().path();
    assert_eq!(path.length_ns, 100);
    let by: Vec<(u32, u64, u64, Spent)> = path
        .steps
        .iter()
        .map(|s| (s.tid, s.start, s.end, s.spent))
        .collect();
    assert_eq!(
        by,
        vec![
            (1, 91, 100, Spent::Running),
            (1, 90, 91, Spent::Waiting(On::Join)),
            (3, 41, 90, Spent::Running),
            (3, 40, 41, Spent::Waiting(L)),
            (2, 0, 40, Spent::Running),
        ]
    );
    assert_eq!(path.unknown_enders, 0);
    assert_eq!(path.shares().values().sum::<u64>(), 100);
}

#[test]
fn a_serialising_lock_gains_what_its_waits_cost_the_run() {
    let run = serial();
    assert_eq!(
        run.gain(&zero(&L)),
        Gain {
            low_ns: 40,
            high_ns: 40
        }
    );
    // Halved: 3 gets the lock at 20.5 instead of 41.
    let half = run.gain(&halve(&L));
    assert_eq!((half.low_ns, half.high_ns), (20, 20));
    // Joins shortened to nothing: main ends at 9, but 3 still works till
    // 90, and the run ends with its last thread.
    assert_eq!(run.gain(&zero(&On::Join)).high_ns, 10);
    // Nothing shortened: nothing gained.
    assert_eq!(run.gain(&zero(&M)), Gain::default());
}

#[test]
fn a_lock_whose_waits_overlap_longer_work_gains_nothing() {
    // 2 works till 200; 3 waits 50 ns for L, held by 4; main joins 2 last.
    let run = Run::new(
        &[
            life(1, 0, 0, 210),
            life(2, 1, 0, 200),
            life(3, 1, 0, 80),
            life(4, 1, 0, 70),
        ],
        &[
            wait(3, (10, 60), L, Some((4, 60))),
            wait(1, (0, 80), On::Join, Some((3, 80))),
            wait(1, (80, 201), On::Join, Some((2, 200))),
        ],
    );
    assert_eq!(run.gain(&zero(&L)), Gain::default());
    let path = run.path();
    assert!(!path.shares().contains_key(&Spent::Waiting(L)));
    assert_eq!(path.length_ns, 210);
}

#[test]
fn a_critical_section_entered_by_a_recorded_wait_is_the_locks_share() {
    // 3 waits for L (0..20, released by 2), holds it till 60 when 4,
    // waiting for it since 10, gets it; 4 ends last.
    let run = Run::new(
        &[life(2, 0, 0, 30), life(3, 0, 0, 70), life(4, 0, 0, 90)],
        &[
            wait(3, (0, 20), L, Some((2, 19))),
            wait(4, (10, 61), L, Some((3, 60))),
        ],
    );
    let shares = run.path().shares();
    assert_eq!(shares[&Spent::Holding(7)], 40);
    assert_eq!(shares[&Spent::Waiting(L)], 2);
    // Both waits gone: 4 runs from 10 to 39, but 3 now ends at 50.
    assert_eq!(run.gain(&zero(&L)).low_ns, 90 - 50);
}

#[test]
fn a_wait_with_no_known_ender_makes_the_gain_a_range() {
    // 2 waits for L (released by 3 at 30), then on a condition nobody is
    // known to have notified (30..50), and ends at 60.
    let run = Run::new(
        &[life(2, 0, 0, 60), life(3, 0, 0, 30)],
        &[
            wait(2, (0, 31), L, Some((3, 30))),
            wait(2, (31, 50), On::Cond(9), None),
        ],
    );
    // The condition's wait ended at 50 whatever came sooner (nothing
    // gained), or it was its own 19 ns: 2 ends at 29, 3 still at 30.
    assert_eq!(
        run.gain(&zero(&L)),
        Gain {
            low_ns: 0,
            high_ns: 30
        }
    );
    let path = run.path();
    assert_eq!(path.unknown_enders, 1);
    assert_eq!(path.length_ns, 60);
}

#[test]
fn a_barrier_round_waits_for_the_last_to_arrive() {
    // Two rounds: 2 arrives at 10 and 50, 3 at 40 and 60; each round ends
    // when the later arrives (3's own barrier waits are its own work).
    let b = On::Barrier(5);
    let run = Run::new(
        &[life(2, 0, 0, 70), life(3, 0, 0, 61)],
        &[
            wait(2, (10, 41), b, Some((3, 40))),
            wait(3, (40, 41), b, Some((3, 40))),
            wait(3, (41, 61), b, Some((2, 60))),
            wait(2, (60, 61), b, Some((2, 60))),
        ],
    );
    // Without the barrier 2 works 10 + 19 + 10 (ends at 39) and 3 works
    // 41 (ends at 41): the run ends at 41 instead of 70.
    assert_eq!(run.gain(&zero(&b)).low_ns, 70 - 41);
    // On the path: 2's last stretch (41..70), the wake-up from 3's arrival
    // (40..41), 3's first 40.
    let path = run.path();
    assert_eq!(path.shares()[&Spent::Waiting(b)], 1);
    // Nobody holds a barrier: the stretch after a round is running.
    assert!(!path.shares().keys().any(|s| matches!(s, Spent::Holding(_))));
    assert_eq!(path.length_ns, 70);
}

#[test]
fn shortening_one_line_leaves_the_locks_other_lines_alone() {
    let mut a = wait(3, (0, 41), L, Some((2, 40)));
    a.site = 11;
    let run = Run::new(&[life(2, 0, 0, 50), life(3, 0, 0, 90)], &[a]);
    let line = |site: &'static [u32]| Shorten {
        on: &[L],
        sites: Some(site),
        kept: 0.0,
    };
    // 3 ends at 49, 2 still at 50.
    assert_eq!(run.gain(&line(&[11])).low_ns, 40);
    assert_eq!(run.gain(&line(&[12])).low_ns, 0);
    assert_eq!(run.gain(&line(&[12, 11])).low_ns, 40);
}

#[test]
fn an_acquisition_that_did_not_wait_still_comes_after_the_release_before_it() {
    // 3 waits for L till 12 (4 released it), then takes M at once (2 had
    // released it at 10), and ends at 40. Without L's waits 3 reaches M at
    // 0 but must still wait for 2's release at 10.
    let run = Run::new(
        &[life(2, 0, 0, 20), life(3, 0, 0, 40), life(4, 0, 0, 12)],
        &[
            wait(3, (0, 12), L, Some((4, 12))),
            wait(3, (12, 12), M, Some((2, 10))),
        ],
    );
    assert_eq!(run.gain(&zero(&L)).low_ns, 2);
    // Without that ordering it would have gained all 12.
    let unordered = Run::new(
        &[life(2, 0, 0, 20), life(3, 0, 0, 40), life(4, 0, 0, 12)],
        &[wait(3, (0, 12), L, Some((4, 12)))],
    );
    assert_eq!(unordered.gain(&zero(&L)).low_ns, 12);
    // The path goes on in 3 past an acquisition that did not wait.
    assert_eq!(run.path().steps.last().map(|s| s.tid), Some(4));
}
