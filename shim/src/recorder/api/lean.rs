//! Lean mode (`LOCKSUIT_MODE=lean`), for profiling that stays on: a plain
//! mutex's engagement is counted per lock and line (no call-path context)
//! and leaves its line in the lock's slot (glibc's `__owner` says who holds
//! it); nothing else is kept for it. No held entry, so no hold times, lock
//! order, blocking under a lock or owner changes; no sampled self-cost. Its release records
//! nothing unless the C library's lock word says a thread may be waiting:
//! then it writes the release that names the holder's line for the waiters,
//! as the full mode does. Contended acquisitions are recorded as in the
//! full mode (waits, who held the lock, where).

use crate::recorder::api::prepared::Prepared;
use crate::recorder::api::thread_lane::current_lane;
use crate::recorder::base::caller::Caller;
use crate::recorder::features::events;
use crate::recorder::tables::lean_lines::LeanLine;
use crate::recorder::tables::objects;
use crate::recorder::tables::thread_state::{InHook, ThreadState};
use crate::recorder::time::clock::now_ns;
use core::sync::atomic::Ordering;
use locksuit_format::{ObjectKind, MODE_EXCLUSIVE};

/// [`prepare`](crate::recorder::api::prepared::prepare) for a mutex in lean
/// mode: the same lookups, without the self-cost sampler (`missed`: the
/// thread's table of lines was looked at already, and had no line). What
/// the general way finds is added to the table of lines, for the quick
/// path's next look.
#[inline(always)]
pub fn prepare(g: &InHook, addr: u64, caller: Caller, missed: bool) -> Option<Prepared> {
    let lane = current_lane(g)?;
    if !missed {
        if let Some(hit) = lane.hot_line(addr, caller.ret, MODE_EXCLUSIVE) {
            return Some(hit.into());
        }
    }
    let lane_ptr: *mut crate::recorder::tables::lanes::Lane = lane;
    let p =
        crate::recorder::api::prepared::prepare_missed(g, lane, addr, ObjectKind::Mutex, caller)?;
    // SAFETY: the lane is this thread's until it ends; `p` holds no
    // reference to it.
    let lane = unsafe { &mut *lane_ptr };
    lane.remember_lean((addr, caller.ret), p.slot, p.counter.cast());
    if lane.lean_full() {
        // The quick path stops looking in a full table (see lean_lines.rs).
        g.thread().set_lean_lines(core::ptr::null());
    } else if g.thread().lean_lines().is_null() {
        // This thread's first: the table is made (or cleared) for it now.
        g.thread().set_lean_lines(lane.lean_lines());
    }
    Some(p)
}

/// Lean mode's look for a mutex call, in a thread no hook is running in
/// (see [`engaged_quickly`]): its line in the thread's table of lines, or
/// `None` (the caller then goes the general way, which adds it). Lean
/// lines have no call-path context: the key is the lock and the line.
#[inline(always)]
pub fn found_quickly(state: &ThreadState, addr: u64, caller: Caller) -> Option<QuickLine> {
    let lines = state.lean_lines();
    if lines.is_null() {
        return None;
    }
    // SAFETY: the table was made this thread's by its lane; it is only
    // added to, so a signal handler's call meanwhile changes nothing this
    // look reads in a way it could tear (see `lean_lines.rs`).
    let line = unsafe { crate::recorder::tables::lean_lines::find(lines, addr, caller.ret) }?;
    Some(QuickLine(line))
}

/// Lean mode's second look for a mutex call its table of lines does not
/// hold (a thread with more lines than the table takes): the hot cache's
/// second level, outside the hook as [`found_quickly`]. A signal handler's
/// call may rewrite a cache entry between two of this look's reads: a look
/// during which the cache wrote an entry is void (the general way looks
/// again, in the hook).
#[inline(always)]
pub fn found_warm(state: &ThreadState, addr: u64, caller: Caller) -> Option<Prepared> {
    let lane = state.lane();
    if lane.is_null() {
        return None;
    }
    // SAFETY: a lane registered to this thread is its own until it ends.
    let lane = unsafe { &mut *lane };
    let writes = lane.hot_writes();
    let hit = lane.warm(addr, caller, MODE_EXCLUSIVE);
    core::sync::atomic::compiler_fence(Ordering::SeqCst);
    if lane.hot_writes() != writes {
        return None;
    }
    Some(hit?.into())
}

/// A line [`found_quickly`]: one pointer, all the quick path keeps across
/// the real call (the mutex, its slot and the counter are read from it).
#[derive(Clone, Copy)]
pub struct QuickLine(&'static LeanLine);

impl QuickLine {
    /// The mutex of the line.
    #[inline(always)]
    pub fn addr(self) -> u64 {
        self.0.addr()
    }

    /// The line as the general way's handle.
    #[inline(always)]
    pub fn prepared(self) -> Prepared {
        let target = self.0.target();
        Prepared {
            slot: target.slot,
            counter: target.counter.cast(),
        }
    }
}

/// The mutex [`found_quickly`] found was taken at once: counted, and its
/// line left in the slot, with no hook entered. A signal handler's call
/// meanwhile may add lines to the table, but changes this one only if it
/// made the very mutex again (then the count goes to its new identity);
/// what changes here is the counter (one increment) and one word of the
/// slot (a plain store), which nothing in between tears.
#[inline(always)]
pub fn engaged_quickly(line: QuickLine) {
    acquired(&line.prepared());
}

/// An uncontended engagement: counted, and its line left in the slot (also
/// a quick one, [`found_quickly`]'s or [`found_warm`]'s, made with no hook
/// entered: one increment and one plain store).
#[inline(always)]
pub fn acquired(p: &Prepared) {
    p.counter().engagements += 1;
    owned(p);
}

/// This thread holds the lock now, taken at the counter's line, which the
/// release event names (the holder's thread is glibc's own `__owner`,
/// which the waiter reads: see [`holder`]).
#[inline(always)]
pub fn owned(p: &Prepared) {
    p.slot
        .last_owner
        .store(p.counter().site_id, Ordering::Relaxed);
}

/// Who holds the lean-mode mutex of `p` now, for a thread about to wait
/// for it: glibc's `__owner` (0 if the words say nobody, or not whom).
pub fn holder(p: &Prepared) -> u32 {
    // SAFETY: the program passed the mutex to a lock call, which reads
    // the same words.
    match unsafe { crate::glibc::holder(p.addr(), ObjectKind::Mutex) } {
        crate::glibc::Holder::Thread(tid) => tid,
        _ => 0,
    }
}

/// The mutex at `addr`, held by this thread, is about to be released and
/// its lock word says a thread may wait for it: if one does (by the slot's
/// count of waiters), the release is counted in the lock's sequence and
/// written, named by the line this thread took it at.
pub fn released_with_waiters(g: &InHook, addr: u64) {
    let Some(slot) = objects::find(addr).filter(|s| s.id() != 0) else {
        return;
    };
    let Some(lane) = current_lane(g) else { return };
    // SAFETY: the program passed the mutex to an unlock, which reads the
    // same words; it still holds it.
    let own = unsafe { crate::glibc::holder(addr, ObjectKind::Mutex) };
    if !matches!(own, crate::glibc::Holder::Thread(tid) if tid == lane.tid) {
        return; // not an engagement of this thread
    }
    let waiters = slot.waiting();
    if waiters == 0 {
        return;
    }
    let seq = slot.seq.load(Ordering::Relaxed);
    slot.take_wait_mark(seq);
    let seq_after = seq.wrapping_add(1);
    slot.seq.store(seq_after, Ordering::Relaxed);
    let site = slot.last_owner.load(Ordering::Relaxed);
    // The hold's start is not known (0): only its end.
    events::released(
        lane,
        slot.id(),
        site,
        (seq_after, waiters),
        (now_ns(), 0),
        0,
    );
}
