//! The path almost every engagement takes: uncontended and not timed (no
//! full tracing, no hold sampling) — an exclusive hold and its release, or
//! a semaphore wait. The same counts as the general path in `locks.rs`,
//! without the branches for the cases it is not, so the common pair stays
//! short. Anything else goes the general way.

use crate::config;
use crate::recorder::api::prepared::Prepared;
use crate::recorder::tables::thread_state::InHook;
use core::sync::atomic::Ordering;

/// [`record_acquired`](crate::recorder::api::locks) for an uncontended exclusive engagement that is not
/// timed: the same counts and held entry, without the branches for the
/// cases it is not.
#[inline(always)]
pub fn acquired_exclusive(g: &InHook, p: &Prepared, tried: bool) {
    p.counter().engagements += 1;
    p.take_ownership(g);
    p.track_hold(g, 0, (0, 0), tried);
}

/// [`record_acquired`](crate::recorder::api::locks) for an uncontended engagement that holds
/// nothing (a semaphore wait): only the count.
#[inline(always)]
pub fn acquired_unheld(p: &Prepared) {
    p.counter().engagements += 1;
}

/// The common release, done in full or not at all: the innermost held
/// lock, exclusive, untimed, not handed over, nobody waiting for it, not
/// taken more than once (recursively). Anything else returns false
/// with nothing changed, for [`record_released`](crate::recorder::api::locks).
#[inline(always)]
pub fn released(g: &InHook, addr: u64) -> bool {
    if !config::untimed_uncontended() {
        return false;
    }
    let held = g.thread().held();
    let Some(top) = held.innermost(addr) else {
        return false;
    };
    if top.flags != 0 || top.since_ns != 0 || top.slot.is_null() || top.relocks != 0 {
        return false;
    }
    // SAFETY: slots live in the object table for the life of the process.
    let slot = unsafe { &*top.slot };
    let seq = slot.seq.load(Ordering::Relaxed);
    if !slot.quiet_release(seq) {
        return false; // a task switch, and an event: the full path
    }
    slot.holder.store(0, Ordering::Relaxed);
    // Only the exclusive holder bumps the sequence (see `record_released`).
    slot.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
    held.pop();
    true
}
