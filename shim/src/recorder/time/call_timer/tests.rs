//! Call timing on this machine's kernel, driven without LD_PRELOAD.

use super::rseq::{EmptySection, RSEQ_SIGNATURE};
use super::*;
use crate::recorder::time::clock::now_ns;

fn pipe() -> [libc::c_int; 2] {
    let mut fds = [0; 2];
    // SAFETY: a valid out-array of two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    fds
}

fn leaked_state() -> &'static TimerState {
    Box::leak(Box::new(TimerState::initial()))
}

/// A write and a read of a pipe that never block, timed: whether the
/// thread was free for it.
fn calm_call(state: &'static TimerState, fds: [libc::c_int; 2]) -> bool {
    let timer = CallTimer::start(|| state);
    crate::sys::write(fds[1], b"x").unwrap();
    crate::sys::read(fds[0], &mut [0u8; 1]).unwrap();
    // Not asserted: on a loaded machine a preemption of 50 µs in the
    // middle is a block.
    let _ = timer.blocked(|| state);
    matches!(timer, CallTimer::Free { .. })
}

#[test]
fn a_thread_goes_free_and_still_sees_how_long_a_call_blocked() {
    init();
    std::thread::spawn(|| {
        let state = leaked_state();
        let fds = pipe();
        let mut went_free = false;
        for _ in 0..CALM_CALLS * 8 {
            if calm_call(state, fds) {
                went_free = true;
                break;
            }
        }
        if !kernel_usable() {
            eprintln!("this kernel does not clear the rseq pointer: calls stay stamped");
            assert!(!went_free);
            return;
        }
        assert!(
            went_free,
            "after {CALM_CALLS} calm calls the thread times calls for free"
        );
        // A sleep the test measures itself, timed as a free call (a
        // preemption since the last calm call sends the thread back to
        // stamped: then calm calls again, a few times at most).
        let mut tries = 0;
        let (before, timer) = loop {
            let before = now_ns();
            let timer = CallTimer::start(|| state);
            if matches!(timer, CallTimer::Free { .. }) {
                break (before, timer);
            }
            let _ = timer.blocked(|| state);
            tries += 1;
            assert!(tries < 10, "the thread never stayed free");
            while !calm_call(state, fds) {}
        };
        crate::sys::sleep_ns(20_000_000).unwrap();
        let after = now_ns();
        let (from, to) = timer.blocked(|| state).expect("a 20 ms sleep blocked");
        let measured = after - before;
        let seen = to - from;
        assert!(
            seen.abs_diff(measured) * 10 <= measured,
            "blocked {seen} ns, the test measured {measured} ns"
        );
        // The switch is found from CPU time, so within a few µs.
        assert!(
            from + 10_000 >= before && to >= after,
            "{from}..{to} against {before}..{after}"
        );
        // After a switch the next call is stamped.
        assert!(matches!(
            CallTimer::start(|| state),
            CallTimer::Stamped { .. }
        ));
    })
    .join()
    .unwrap();
}

#[test]
fn an_old_reference_needs_a_longer_block() {
    // Off its CPU for 100 µs since a reference taken 1 ms ago: a block
    // (the margin is 1 ms / 64). Since one taken 20 ms ago: not
    // believed (the margin is 312 µs), as CPU time may leave out
    // interrupts and stolen time.
    let state = leaked_state();
    // The thread's CPU time must reach back that far.
    let spun = crate::recorder::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    while crate::recorder::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) - spun < 25_000_000 {}
    let seen = |age: u64, block: u64| {
        state.wall.set(Stamp::from_ns(now_ns() - age));
        state
            .cpu_ns
            .set(crate::recorder::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) - (age - block));
        switched(state, 50_000)
    };
    let (from, to) = seen(1_000_000, 100_000).expect("a block after a young reference");
    // A preemption of the test meanwhile only makes it longer; the two
    // clocks, read a few instructions apart and at their own granularity,
    // may make it a little shorter (76 ns short in one CI run).
    assert!(to - from >= 95_000 && from < to, "{from}..{to}");
    // A preemption of over 200 µs here would make it believed: one of
    // five tries is enough.
    let old: Vec<_> = (0..5).map(|_| seen(20_000_000, 100_000)).collect();
    assert!(old.iter().any(Option::is_none), "{old:?}");
}

#[test]
fn the_descriptors_are_what_the_kernel_checks() {
    let all: Vec<u64> = (0..FREE_SECTIONS as u8)
        .map(free_section)
        .chain([stamped_section()])
        .collect();
    for (i, &at) in all.iter().enumerate() {
        assert_eq!(at % 32, 0);
        assert_eq!(is_free(at), i < FREE_SECTIONS);
        // SAFETY: the descriptor is a static of that layout.
        let d = unsafe { &*(at as *const EmptySection) };
        assert_eq!((d.version, d.flags, d.post_commit_offset), (0, 0, 0));
        assert_eq!(d.start_ip, d.abort_ip);
        // SAFETY: the abort address is SIGNED.after; the word before
        // it is the signature.
        assert_eq!(unsafe { *d.abort_ip.sub(1) }, RSEQ_SIGNATURE);
    }
    assert!(!is_free(0));
    assert_eq!(free_section(FREE_SECTIONS as u8), free_section(0));
}
