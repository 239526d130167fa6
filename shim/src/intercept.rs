//! The acquisition protocol shared by every blocking lock hook:
//!
//! 1. prepare (lookups, first-sighting unwind) before touching the lock;
//! 2. try the real trylock: success is an uncontended engagement and costs
//!    no clock read;
//! 3. otherwise time the real blocking call: a contended engagement.
//!
//! Trying first never changes behaviour: glibc's own lock starts with the
//! same atomic attempt, and every outcome of trylock other than EBUSY
//! (success, EOWNERDEAD, EAGAIN, EINVAL, ENOTRECOVERABLE) is exactly what the
//! blocking call would return for a lock that is free or broken; EBUSY falls
//! through to the blocking call, which then returns EDEADLK, waits, or times
//! out as it would have.

use crate::guard::HookGuard;
use crate::recorder::{self, How, Prepared};
use core::ffi::c_int;

/// Outcomes that mean the caller now holds the lock.
#[inline]
pub fn holds(rc: c_int) -> bool {
    rc == 0 || rc == libc::EOWNERDEAD
}

/// Runs the trylock-first protocol. `exclusive` is false for shared holds.
#[inline]
pub fn acquire(
    g: &HookGuard,
    p: &Prepared,
    exclusive: bool,
    try_once: impl FnOnce() -> c_int,
    block: impl FnOnce() -> c_int,
) -> c_int {
    let rc = try_once();
    if holds(rc) {
        recorder::acquired(g, p, How::Uncontended, exclusive);
        return rc;
    }
    if rc != libc::EBUSY {
        return rc;
    }
    contended(g, p, exclusive, block)
}

#[cold]
fn contended(g: &HookGuard, p: &Prepared, exclusive: bool, block: impl FnOnce() -> c_int) -> c_int {
    let started = recorder::wait_begin(p);
    let rc = block();
    let (wait_ns, now) = recorder::wait_end(p, started);
    if holds(rc) {
        recorder::acquired(g, p, How::Contended { wait_ns, now }, exclusive);
    } else if rc == libc::ETIMEDOUT {
        recorder::timed_out(p, wait_ns);
    }
    rc
}

/// A non-blocking attempt: counts an engagement or a failure.
#[inline]
pub fn try_acquire(
    g: &HookGuard,
    p: &Prepared,
    exclusive: bool,
    try_once: impl FnOnce() -> c_int,
) -> c_int {
    let rc = try_once();
    if holds(rc) {
        recorder::acquired(g, p, How::Uncontended, exclusive);
    } else if rc == libc::EBUSY {
        recorder::try_failed(p);
    }
    rc
}

/// Clocks glibc accepts for `*_clocklock`/`*_clockwait`; with any other the
/// real call fails with EINVAL *before* trying the lock, so the hook must not
/// try first.
pub fn supported_clock(clock: libc::clockid_t) -> bool {
    clock == libc::CLOCK_REALTIME || clock == libc::CLOCK_MONOTONIC
}
