//! The path almost every engagement takes: uncontended and not timed (no
//! full tracing, no hold sampling) — an exclusive hold and its release, or
//! a semaphore wait. The same counts as the general path in `locks.rs`,
//! without the branches for the cases it is not, so the common pair stays
//! short. Anything else goes the general way.

use crate::config;
use crate::recorder::api::prepared::Prepared;
use crate::recorder::base::caller::Caller;
use crate::recorder::tables::hot_cache::HotHit;
use crate::recorder::tables::lanes::Lane;
use crate::recorder::tables::thread_state::InHook;
use core::sync::atomic::Ordering;
use locksuit_format::MODE_EXCLUSIVE;

/// What the full mode's quick look at a mutex lock or trylock call found.
pub enum QuickLook {
    /// The hot cache's entry.
    Hit(HotHit),
    /// The hot cache's first level does not have the call: its second may
    /// ([`warm_quickly`]), else `prepare_missed_twice` looks it up without
    /// looking there again.
    Missed(FirstMiss),
    /// Not a call for the quick path (sampled for self-cost, or the
    /// thread's first): the general way.
    Declined,
}

/// The lane whose first level missed, for [`warm_quickly`] (kept in a
/// register rather than read again).
pub struct FirstMiss(*mut Lane);

/// The full mode's look for a mutex lock call (a mutex to be tried
/// first) or trylock call, made in the hook before the real call, if this
/// call is to take the common path whole (not sampled for self-cost, a
/// lane already registered; the hook runs only while the process records
/// and engagements are untimed or all traced, its handler chosen for
/// that). Nothing is counted yet: [`engaged_quickly`] counts the look and
/// the acquisition in one store, `locks::engaged_traced_quickly`,
/// [`not_taken_quickly`] and `prepare_missed_twice` the look.
#[inline(always)]
pub fn prepare_quickly(g: &InHook, addr: u64, caller: Caller) -> QuickLook {
    let lane = g.thread().lane();
    if lane.is_null() || g.thread().call_cost().next_is_timed() {
        return QuickLook::Declined;
    }
    // SAFETY: a lane registered to this thread is its own until it ends.
    match unsafe { &*lane }.hot_hit(addr, caller, MODE_EXCLUSIVE) {
        Some(hit) => QuickLook::Hit(hit),
        None => QuickLook::Missed(FirstMiss(lane)),
    }
}

/// [`prepare_quickly`] missed the hot cache's first level: its second, as
/// the general way looks there next. Made in the hook with no call, so
/// that it shares the hit's way on; a miss goes on to
/// `prepare_missed_twice`, which counts it. A child made by a clone none
/// of our hooks saw (a copy, which `prepare_missed_twice` moves to a trace
/// of its own) finds no second level: the lanes are wiped in a copy
/// (`MADV_WIPEONFORK`), and without that advice no copy is told apart.
#[inline(always)]
pub fn warm_quickly(_g: &InHook, miss: FirstMiss, addr: u64, caller: Caller) -> Option<HotHit> {
    // SAFETY: `prepare_quickly` found the lane registered to this thread,
    // which is its own until it ends.
    let lane = unsafe { &mut *miss.0 };
    if !lane.warm_serves() {
        return None;
    }
    // SAFETY: the second level serves, just tested.
    unsafe { lane.look_warm(addr, caller, MODE_EXCLUSIVE) }
}

/// A mutex [`prepare_quickly`] found was taken at once: the look and the
/// acquisition counted as the two untimed calls they are, then recorded
/// as [`acquired_exclusive`] is, but for a nested hold, which is left to
/// [`nested_quickly`]: the engagements held before this one (0 as a rule),
/// so that the hook needs no frame for that rare call.
#[inline(always)]
pub fn engaged_quickly(g: &InHook, hit: HotHit) -> usize {
    g.thread().call_cost().count_two();
    let p: Prepared = hit.target().into();
    p.counter().engagements += 1;
    p.take_ownership(g);
    let held = g.thread().held();
    if held.is_empty() {
        // Most locks are taken holding no other: the first place, at an
        // offset known in advance, and no lock-order work to follow.
        held.push_plain_first(p.addr(), p.lock_id(), p.slot, p.counter);
        return 0;
    }
    held.push_plain(p.addr(), p.lock_id(), p.slot, p.counter)
}

/// [`engaged_quickly`]'s engagement was taken while `held_before` others
/// were held: a re-acquisition or lock-order edges, as
/// [`acquired_exclusive`] records them
/// (`tried`: taken by a trylock, which cannot deadlock).
#[cold]
#[inline(never)]
pub fn nested_quickly(g: &InHook, hit: HotHit, held_before: usize, tried: bool) {
    let p: Prepared = hit.target().into();
    crate::recorder::api::prepared::nested(g, (p.addr(), p.lane()), held_before, tried);
}

/// A mutex [`prepare_quickly`] found was not taken at once: the look is
/// counted (an acquisition after a wait counts itself; a failed trylock
/// is no further call); its handle for the general way.
#[inline(always)]
pub fn not_taken_quickly(g: &InHook, hit: HotHit) -> Prepared {
    g.thread().call_cost().count();
    hit.target().into()
}

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
    config::untimed_uncontended() && released_untimed(g, addr)
}

/// [`released`] for a hook that runs only while engagements are untimed
/// (the full mode's mutex unlock handler, re-pointed when that changes).
#[inline(always)]
pub fn released_untimed(g: &InHook, addr: u64) -> bool {
    let held = g.thread().held();
    let Some(top) = held.innermost(addr) else {
        return false;
    };
    // Contended, handed over, shared, timed, taken again, or forgotten at
    // a fork (see `HeldEntry::flags`).
    if top.flags != 0 {
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
    held.pop_found();
    true
}
