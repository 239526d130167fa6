//! Everything an engagement needs, looked up before the real call: the
//! lock's slot, this thread's counter for it at the call site, and — the
//! first time a line is seen — its call chain. A [`Prepared`] is the handle
//! the rest of the recorder counts through.

use crate::recorder::api::identity::{self, object};
use crate::recorder::api::thread_lane::current_lane;
use crate::recorder::base::caller::Caller;
use crate::recorder::features::lock_order;
use crate::recorder::identities::sites::{self, seen_of, PythonLines, PYTHON_CALL};
use crate::recorder::tables::held::{self, HeldEntry};
use crate::recorder::tables::hot_cache::HotTarget;
use crate::recorder::tables::lanes::{drop_op, timed_slow_work, Lane};
use crate::recorder::tables::objects::ObjectSlot;
use crate::recorder::tables::thread_state::{InHook, ThreadState};
use core::sync::atomic::Ordering;
use locksuit_format::*;

/// Everything an acquisition needs, looked up before the real call: the
/// lock's slot and this thread's counter for the call path. Two words, so
/// that it travels in registers, also out of the lookup's slow path; the
/// lock's address, its id and the thread's lane are read from them.
#[derive(Clone, Copy)]
pub struct Prepared {
    pub(in crate::recorder) slot: &'static ObjectSlot,
    pub(in crate::recorder) counter: *mut CounterRecord,
}

impl From<HotTarget> for Prepared {
    #[inline(always)]
    fn from(hit: HotTarget) -> Self {
        Prepared {
            slot: hit.slot,
            counter: hit.counter.cast(),
        }
    }
}

/// What a successful acquisition holds until its release.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// One owner (mutex, spinlock, rwlock writer).
    Exclusive,
    /// One of possibly many readers.
    Shared,
    /// Nothing owned (a semaphore wait): counted, never released by us.
    None,
    /// A plain mutex in lean mode (see `lean.rs`): one owner, no held entry.
    Lean,
}

/// How an engagement came about.
#[derive(Clone, Copy)]
pub enum How {
    Uncontended,
    /// A successful trylock (uncontended, and it could not have blocked).
    Tried,
    Contended {
        wait_ns: u64,
        now: u64,
    },
    /// Re-acquired at the end of a condition wait.
    CondReacquire {
        now: u64,
    },
}

/// Looks up the lock at `addr` and this thread's counter for it at the call
/// site, recording the lock, site and chain if new.
#[inline(always)]
pub fn prepare(
    g: &InHook,
    addr: u64,
    kind: ObjectKind,
    mode: u32,
    caller: Caller,
) -> Option<Prepared> {
    let lane = current_lane(g)?;
    let cost = g.thread().call_cost();
    if cost.next_is_timed() {
        return prepare_timed(g, lane, (addr, kind, mode), caller);
    }
    cost.count();
    if let Some(hit) = lane.hot(addr, caller, mode) {
        return Some(hit.into());
    }
    prepare_slow(g, lane, (addr, kind, mode), caller, 0)
}

/// [`prepare`] for the one call in [`SAMPLE_EVERY`](crate::recorder::time::selfcost) that
/// is timed: out of line, so the others carry no trace of the timing.
#[cold]
#[inline(never)]
fn prepare_timed(
    g: &InHook,
    lane: &'static mut Lane,
    (addr, kind, mode): (u64, ObjectKind, u32),
    caller: Caller,
) -> Option<Prepared> {
    let started = g.thread().call_cost().begin();
    if let Some(hit) = lane.hot(addr, caller, mode) {
        // A hot-cache hit: fast-path work, sampled (see selfcost.rs).
        g.thread().call_cost().end(started);
        return Some(hit.into());
    }
    prepare_slow(g, lane, (addr, kind, mode), caller, started)
}

/// [`prepare_slow`] for a call that is not sampled (lean mode's mutexes).
#[cold]
#[inline(never)]
pub(in crate::recorder) fn prepare_missed(
    g: &InHook,
    lane: &'static mut Lane,
    addr: u64,
    kind: ObjectKind,
    caller: Caller,
) -> Option<Prepared> {
    prepare_slow(g, lane, (addr, kind, MODE_EXCLUSIVE), caller, 0)
}

/// A miss in the hot cache: the lock table, then this thread's counters.
/// Lookups are fast-path work, sampled like the rest (`started`); the work
/// done the first time a lock, line or counter is seen is timed where it
/// happens ([`timed_slow_work`]), and a call that did any is not sampled.
#[cold]
fn prepare_slow(
    g: &InHook,
    lane: &'static mut Lane,
    (addr, kind, mode): (u64, ObjectKind, u32),
    caller: Caller,
    started: u64,
) -> Option<Prepared> {
    let lane = own_lane(g, lane)?;
    if let Some(hit) = lane.warm(addr, caller, mode) {
        // The second level of the hot cache: fast-path work, sampled.
        g.thread().call_cost().end(started);
        return Some(hit.into());
    }
    prepare_cold(g, lane, (addr, kind, mode), caller, started)
}

/// This thread's lane in its own process's trace: `lane`, unless this is
/// a child made by a clone none of our hooks saw, on the thread it was
/// made by (the lane is the parent's): then it starts its own trace if it
/// can, and this thread takes a lane in it.
#[inline(always)]
fn own_lane(g: &InHook, lane: &'static mut Lane) -> Option<&'static mut Lane> {
    if crate::recorder::trace::copied::is_copy() {
        if !crate::recorder::trace::copied::adopt(true) {
            return None;
        }
        return current_lane(g);
    }
    Some(lane)
}

/// [`prepare`] for a plain mutex's lock call that both levels of the hot
/// cache missed in the hook's quick look (`untimed::prepare_quickly`):
/// counted (the second level's miss too), then looked up without looking
/// at the cache again. Inlined into the hook's own cold path (one frame
/// fewer).
#[inline(always)]
pub fn prepare_missed_twice(g: &InHook, addr: u64, caller: Caller) -> Option<Prepared> {
    g.thread().call_cost().count();
    let lane = own_lane(g, current_lane(g)?)?;
    lane.warm_missed();
    prepare_cold(
        g,
        lane,
        (addr, ObjectKind::Mutex, MODE_EXCLUSIVE),
        caller,
        0,
    )
}

/// A call the hot cache does not hold: the lock table, the counter index,
/// and what is seen the first time (see [`prepare_slow`]). Inlined into
/// its two callers, both out of line themselves.
#[inline(always)]
fn prepare_cold(
    g: &InHook,
    lane: &'static mut Lane,
    (addr, kind, mode): (u64, ObjectKind, u32),
    caller: Caller,
    started: u64,
) -> Option<Prepared> {
    let lane_ptr: *mut Lane = lane;
    let slow_before = lane.shim_ns;
    let prepared = prepare_uncached(lane, (addr, kind, mode), caller);
    // SAFETY: the lane is this thread's for its lifetime; `prepared` holds
    // only a raw pointer to it, so no reference is aliased here.
    if unsafe { (*lane_ptr).shim_ns } == slow_before {
        g.thread().call_cost().end(started);
    }
    prepared
}

fn prepare_uncached(
    lane: &'static mut Lane,
    (addr, kind, mode): (u64, ObjectKind, u32),
    caller: Caller,
) -> Option<Prepared> {
    let python_lines = if kind == ObjectKind::Sem {
        PythonLines::Judged
    } else {
        PythonLines::No
    };
    let seen = seen_of(lane, caller, python_lines);
    if seen.epoch == PYTHON_CALL {
        return prepare_python(lane, (addr, kind, mode), caller, seen.context);
    }
    let found = object(lane, addr, kind)?;
    let counter = counter_of(lane, &found, (caller, seen.context, PythonLines::No), mode)?;
    lane.remember_hot(
        (addr, caller, mode),
        &seen,
        (found.slot, found.id, counter.cast()),
    );
    Some(Prepared {
        slot: found.slot,
        counter,
    })
}

/// A call from the CPython interpreter on one of its locks, keyed by its
/// `.py` path: found in the lane's cache of such calls, else looked up as
/// any call is and cached there; the thread's last such call either way
/// (see `python_calls.rs`).
#[cold]
#[inline(never)]
fn prepare_python(
    lane: &'static mut Lane,
    (addr, kind, mode): (u64, ObjectKind, u32),
    caller: Caller,
    context: u64,
) -> Option<Prepared> {
    if let Some((slot, counter)) = lane.python_call((addr, caller, mode), context) {
        lane.note_python_call((addr, mode), (slot, slot.id(), counter));
        return Some(Prepared {
            slot,
            counter: counter.cast(),
        });
    }
    let found = object(lane, addr, kind)?;
    let counter = counter_of(lane, &found, (caller, context, PythonLines::Judged), mode)?;
    lane.remember_python_call(
        (addr, caller, mode),
        context,
        (found.slot, found.id, counter.cast()),
    );
    Some(Prepared {
        slot: found.slot,
        counter,
    })
}

/// This thread's counter for the lock `found` at the call path
/// `(caller, context)`, made the first time. Inlined: on the lock-table
/// path of programs with many locks, a call here costs instructions.
#[inline(always)]
fn counter_of(
    lane: &mut Lane,
    found: &crate::recorder::tables::objects::Found,
    (caller, context, python_lines): (Caller, u64, PythonLines),
    mode: u32,
) -> Option<*mut CounterRecord> {
    let counter: *mut CounterRecord = match lane.find_by_lock(found.id, caller.ret, context, mode) {
        Some(p) => p.cast(),
        None => {
            let counter = match lane.find(found.id, caller.ret, context, mode) {
                Some(p) => {
                    lane.refilled_by_lock();
                    p.cast()
                }
                None => timed_slow_work(lane, |lane| {
                    new_counter(lane, found.id, (caller, context, python_lines), mode)
                })?,
            };
            lane.remember_by_lock(found.id, caller.ret, context, mode, counter.cast());
            counter
        }
    };
    if found.created {
        // SAFETY: the counter is in this thread's lane, in the live mapping.
        identity::note_first_use(found, unsafe { (*counter).site_id });
    }
    Some(counter)
}

/// [`prepare`] for a call whose caller and context were found by unwinding
/// (a hook with no room for a trampoline: `syscall`): no hot cache, whose
/// key is read off the stack at the caller's stack pointer.
pub fn prepare_unwound(
    g: &InHook,
    addr: u64,
    kind: ObjectKind,
    mode: u32,
    (caller, context): (Caller, u64),
) -> Option<Prepared> {
    let lane = current_lane(g)?;
    let found = object(lane, addr, kind)?;
    let counter = counter_of(lane, &found, (caller, context, PythonLines::No), mode)?;
    Some(Prepared {
        slot: found.slot,
        counter,
    })
}

#[cold]
fn new_counter(
    lane: &mut Lane,
    lock_id: u32,
    (caller, context, python_lines): (Caller, u64, PythonLines),
    mode: u32,
) -> Option<*mut CounterRecord> {
    let site_id = sites::site_id(lane, caller, context, python_lines);
    let record = CounterRecord {
        hdr: RecordHeader {
            kind: RecordKind::Counter as u16,
            size: core::mem::size_of::<CounterRecord>() as u16,
            aux: mode,
        },
        lock_id,
        site_id,
        ..Default::default()
    };
    let p = lane.append(&record, &[])?;
    lane.insert(lock_id, caller.ret, context, mode, p.cast());
    Some(p)
}

impl Prepared {
    // The record is in the mapping, not in `self`; `Prepared` is a handle.
    #[allow(clippy::mut_from_ref)]
    pub(in crate::recorder) fn counter(&self) -> &mut CounterRecord {
        // SAFETY: the counter lives in this thread's lane in the live
        // mapping, and only this thread updates it.
        unsafe { &mut *self.counter }
    }

    /// This thread's lane: the one `prepare` found (it belongs to the
    /// thread until the thread ends).
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub(in crate::recorder) fn lane(&self) -> &mut Lane {
        // SAFETY: a Prepared exists only after `current_lane` registered
        // this thread's lane, which stays its own for the thread's lifetime.
        ThreadState::with(|s| unsafe { &mut *s.lane() })
    }

    /// The lock's address (a slot belongs to one address for good).
    #[inline(always)]
    pub fn addr(&self) -> u64 {
        self.slot.addr.load(Ordering::Relaxed)
    }

    /// The lock's id, as its counter records it.
    #[inline(always)]
    pub(in crate::recorder) fn lock_id(&self) -> u32 {
        self.counter().lock_id
    }

    /// An exclusive engagement: this thread holds the lock now, and a change
    /// of owner is counted.
    #[inline(always)]
    pub(in crate::recorder) fn take_ownership(&self, g: &InHook) {
        // SAFETY: as in `lane`; read through the guard's thread state, which
        // the hook already has at hand.
        let tid = unsafe { (*g.thread().lane()).tid };
        self.slot.holder.store(tid, Ordering::Relaxed);
        // Written only when it changes: the line stays shared otherwise.
        let last = self.slot.last_owner.load(Ordering::Relaxed);
        if last != tid {
            self.slot.last_owner.store(tid, Ordering::Relaxed);
            if last != 0 {
                self.counter().owner_changes += 1;
            }
        }
    }

    /// Puts the engagement on the held-lock stack for its release to find;
    /// taken while other locks were held, it is a lock-order edge from each.
    #[inline(always)]
    pub(in crate::recorder) fn track_hold(
        &self,
        g: &InHook,
        flags: u32,
        (since_ns, shim_ns): (u64, u64),
        tried: bool,
    ) {
        let held_before = g.thread().held().push(HeldEntry {
            addr: self.addr(),
            lock_id: self.lock_id(),
            flags,
            slot: self.slot,
            counter: self.counter,
            since_ns,
            shim_ns,
            relocks: 0,
        });
        if held_before != 0 {
            nested(g, (self.addr(), self.lane()), held_before, tried);
        }
    }
}

/// Taken while `held_before` engagements were held (see `track_hold`):
/// a re-acquisition, or a lock-order edge from each lock held.
#[cold]
#[inline(never)]
pub(in crate::recorder) fn nested(
    g: &InHook,
    (addr, lane): (u64, &mut Lane),
    held_before: usize,
    tried: bool,
) {
    if g.thread().held().fold_relock(addr, held_before) {
        // A lock this thread already holds, taken again (a recursive
        // mutex): a count on that hold, however deep. It cannot block, so
        // it is no lock-order edge.
        return;
    }
    if held_before < held::MAX_HELD {
        lock_order::nested(g, lane, tried);
    } else {
        // Nesting deeper than we track: the engagement is counted, its
        // hold, task switch and lock order are not.
        drop_op(Some(lane));
    }
}
