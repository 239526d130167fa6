//! The full mode's `pthread_mutex_lock` and `pthread_mutex_trylock` while
//! the process records and engagements are untimed, or every one is
//! traced: the common engagement (a plain mutex, a hit in the hot cache,
//! taken at once, not sampled) recorded in the hook with no call but the
//! real one (traced: one more, which records it in full), so that only
//! the guard and the cache entry live across it; a call both levels miss
//! goes on from the look without a second one; anything else goes the
//! general way (`mutex_lock_general`, `mutex_trylock_general`). One body
//! serves both, `TRY` telling them apart: a trylock tries any mutex,
//! reports a busy one as a failed try and, nested, makes a lock-order edge
//! that cannot deadlock. A lock reads the mutex's kind at every call: a
//! robust, PI or PP mutex is never tried first, and its kind can change
//! with no init the shim sees (another process may make a shared mutex
//! robust), so what the cache holds for the line cannot say.

use super::{mutex_attempt, mutex_lock_general, mutex_trylock_general};
use crate::guard::HookGuard;
use crate::intercept::{acquire, not_taken_at_once, tried, try_acquire, Attempt};
use crate::real::real;
use crate::recorder::{self, Caller, Hold, HotHit, QuickLook};
use core::ffi::c_int;
use libc::pthread_mutex_t;

/// The full mode's `pthread_mutex_lock`.
pub(super) unsafe extern "C-unwind" fn mutex_lock(
    m: *mut pthread_mutex_t,
    caller: usize,
    sp: usize,
) -> c_int {
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { engage::<false, false>(m, caller, sp) }
}

/// The full mode's `pthread_mutex_trylock`.
pub(super) unsafe extern "C-unwind" fn mutex_trylock(
    m: *mut pthread_mutex_t,
    caller: usize,
    sp: usize,
) -> c_int {
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { engage::<true, false>(m, caller, sp) }
}

/// The full mode's `pthread_mutex_lock` under full tracing: the same look,
/// and a hit recorded as the general way records a timed engagement.
pub(super) unsafe extern "C-unwind" fn mutex_lock_traced(
    m: *mut pthread_mutex_t,
    caller: usize,
    sp: usize,
) -> c_int {
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { engage::<false, true>(m, caller, sp) }
}

/// The full mode's `pthread_mutex_trylock` under full tracing.
pub(super) unsafe extern "C-unwind" fn mutex_trylock_traced(
    m: *mut pthread_mutex_t,
    caller: usize,
    sp: usize,
) -> c_int {
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { engage::<true, true>(m, caller, sp) }
}

/// A miss, a busy mutex and a nested hold go on in a call made last that
/// takes the guard over, so that the common engagement needs no more
/// frame than what lives across the real call; the rest (a sampled call,
/// a thread's first, a lock call on a robust, PI or PP mutex) leaves the
/// hook and enters the general handler. `TRACED`: full tracing is on, and a hit is recorded
/// in full (its event and timed hold). Sampled holds (hold sampling
/// without full tracing) and calls made while the process does not record
/// never come here: the trampolines jump to the general handlers then
/// (`point_full_handlers`).
#[inline(always)]
unsafe fn engage<const TRY: bool, const TRACED: bool>(
    m: *mut pthread_mutex_t,
    caller: usize,
    sp: usize,
) -> c_int {
    if let Some(guard) = HookGuard::enter_recording() {
        // A trylock never blocks: any kind of mutex is tried first.
        if TRY || matches!(mutex_attempt(m), Attempt::TryFirst) {
            let at = Caller::new(caller, sp);
            let hit = match recorder::prepare_mutex_quickly(&guard, m as u64, at) {
                QuickLook::Hit(hit) => Some(hit),
                QuickLook::Missed(miss) => {
                    match recorder::warm_quickly(&guard, miss, m as u64, at) {
                        Some(hit) => Some(hit),
                        // SAFETY: forwarding the caller's arguments unchanged.
                        None => return unsafe { missed::<TRY>(m, caller, sp, guard) },
                    }
                }
                QuickLook::Declined => None,
            };
            if let Some(hit) = hit {
                // SAFETY: forwarding the caller's argument unchanged.
                return unsafe { found::<TRY, TRACED>(guard, m, hit) };
            }
        }
    }
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe {
        if TRY {
            mutex_trylock_general(m, caller, sp)
        } else {
            mutex_lock_general(m, caller, sp)
        }
    }
}

/// The real trylock of a mutex found in the hot cache: taken, the
/// engagement is recorded here; else the general way goes on.
#[inline(always)]
unsafe fn found<const TRY: bool, const TRACED: bool>(
    guard: HookGuard,
    m: *mut pthread_mutex_t,
    hit: HotHit,
) -> c_int {
    let try_once = real_or!(mutex_trylock, libc::EINVAL);
    // SAFETY: forwarding the caller's argument unchanged.
    let rc = unsafe { try_once(m) };
    if rc != 0 {
        // SAFETY: forwarding the caller's argument (the entry's mutex)
        // unchanged.
        return unsafe { not_taken::<TRY>(guard, hit, rc) };
    }
    if TRACED {
        recorder::engaged_traced_quickly(&guard, hit, TRY);
        return 0;
    }
    let held_before = recorder::engaged_quickly(&guard, hit);
    if held_before != 0 {
        nested(guard, hit, held_before, TRY);
    }
    0
}

/// The quick engagement was nested in other holds (`tried`: by a trylock).
#[inline(never)]
#[cold]
fn nested(guard: HookGuard, hit: HotHit, held_before: usize, tried: bool) {
    recorder::nested_quickly(&guard, hit, held_before, tried);
}

/// The quick try did not take the mutex (busy, or an unusual result):
/// for a trylock, recorded as the general way would and returned; for a
/// lock, the general way from there, with the lock's entry found.
#[inline(never)]
#[cold]
unsafe fn not_taken<const TRY: bool>(guard: HookGuard, hit: HotHit, rc: c_int) -> c_int {
    let p = recorder::not_taken_quickly(&guard, hit);
    if TRY {
        tried(&guard, &p, Hold::Exclusive, rc);
        return rc;
    }
    let m = p.addr() as *mut pthread_mutex_t;
    let block = real_or!(mutex_lock, libc::EINVAL);
    // SAFETY: forwarding the caller's argument unchanged.
    not_taken_at_once(&guard, p, (Hold::Exclusive, 0), rc, || unsafe { block(m) })
}

/// Neither level of the hot cache holds the call: looked up (the look and
/// the second level's miss counted), then tried as the general way tries
/// (arguments in the order the hook got them, the guard last, so that
/// they stay in their registers).
#[inline(never)]
#[cold]
unsafe fn missed<const TRY: bool>(
    m: *mut pthread_mutex_t,
    caller: usize,
    sp: usize,
    guard: HookGuard,
) -> c_int {
    let (block, try_once) = real_pair_or!(mutex_lock, mutex_trylock, libc::EINVAL);
    let Some(p) = recorder::prepare_missed_twice(&guard, m as u64, Caller::new(caller, sp)) else {
        // SAFETY: (both calls) forwarding the caller's argument unchanged.
        return unsafe {
            if TRY {
                try_once(m)
            } else {
                block(m)
            }
        };
    };
    if TRY {
        // SAFETY: forwarding the caller's argument unchanged.
        return try_acquire(&guard, &p, Hold::Exclusive, || unsafe { try_once(m) });
    }
    acquire(
        &guard,
        &p,
        (Hold::Exclusive, 0, Attempt::TryFirst),
        // SAFETY: forwarding the caller's argument unchanged.
        || unsafe { try_once(m) },
        // SAFETY: forwarding the caller's argument unchanged.
        || unsafe { block(m) },
    )
}
