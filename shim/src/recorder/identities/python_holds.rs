//! CPython 3.11 and 3.12 locks (`threading.Lock`, and the locks under
//! `RLock`, `Condition`, `Semaphore`, `Event`, `queue.Queue`) are POSIX
//! semaphores, which the shim counts but never holds: a semaphore has no
//! owner. A CPython lock does, in practice: the thread whose acquire
//! succeeded, until it releases it. So that a blocking call made under one
//! (`time.sleep` inside `with lock:`) is seen as made under it, the
//! acquisition is put on the thread's held stack and the release takes it
//! off — all decided on the path only calls from the interpreter take
//! (`sites.rs`, the Python arm of a call's context), so the semaphore
//! paths of other programs do not change.
//!
//! The hook's outcome is not known there (the call has not been made yet):
//! an acquisition is left *pending* and judged at the thread's next call
//! from the interpreter (or its next recorded blocking call, which takes
//! the same path, or the lock's destruction): it succeeded if its counter
//! counted one more engagement. A lock released by another thread (a
//! `Condition`'s waiter) stays on the holder's stack until it is destroyed.

use crate::recorder::tables::held::HeldEntry;
use crate::recorder::tables::lanes::{Lane, PyPending};
use crate::recorder::tables::objects;
use crate::recorder::tables::thread_state::ThreadState;
use core::sync::atomic::Ordering;
use locksuit_format::*;

/// A call from the interpreter on lock `addr` of `kind`, in `mode`, at
/// (`ret`, `context`): judges the pending acquisition, then makes this one
/// pending (an acquisition) or takes the lock off the held stack (a post).
pub fn python_call(lane: &mut Lane, (addr, kind, mode): (u64, ObjectKind, u32), at: (u64, u64)) {
    settle(lane);
    if kind != ObjectKind::Sem || !super::python::locks_are_semaphores() {
        return;
    }
    let Some(slot) = objects::find(addr) else {
        return;
    };
    let lock_id = slot.id();
    if mode == MODE_POST {
        ThreadState::with(|s| {
            let held = s.held();
            if held.holds(addr) {
                held.take(addr);
                if slot.holder.load(Ordering::Relaxed) == lane.tid {
                    slot.holder.store(0, Ordering::Relaxed);
                }
            }
        });
        return;
    }
    if mode != MODE_EXCLUSIVE {
        return;
    }
    let baseline = lane
        .find(lock_id, at.0, at.1, MODE_EXCLUSIVE)
        .map_or(0, |c| engagements(c.cast()));
    lane.py_pending = PyPending {
        addr,
        ret: at.0,
        context: at.1,
        lock_id,
        baseline,
    };
}

fn engagements(counter: *const CounterRecord) -> u64 {
    // SAFETY: a counter record of this thread's lane, in the live mapping.
    unsafe { (*counter).engagements }
}

/// Judges the pending acquisition, if any: held if its counter counted it.
pub fn settle(lane: &mut Lane) {
    let p = lane.py_pending;
    if p.addr == 0 {
        return;
    }
    lane.py_pending.addr = 0;
    let Some(counter) = lane.find(p.lock_id, p.ret, p.context, MODE_EXCLUSIVE) else {
        return;
    };
    let counter: *mut CounterRecord = counter.cast();
    if engagements(counter) <= p.baseline {
        return; // it failed (a try, a timeout)
    }
    let Some(slot) = objects::find(p.addr).filter(|s| s.id() == p.lock_id) else {
        return;
    };
    ThreadState::with(|s| {
        let held = s.held();
        if held.holds(p.addr) {
            return; // a Condition's waiter taken again: still one hold
        }
        held.push(HeldEntry {
            addr: p.addr,
            lock_id: p.lock_id,
            flags: 0,
            slot,
            counter,
            since_ns: 0,
            shim_ns: 0,
            relocks: 0,
        });
    });
    slot.holder.store(lane.tid, Ordering::Relaxed);
}

/// Lock `addr` is being destroyed: off this thread's held stack.
pub fn destroyed(lane: &mut Lane, addr: u64) {
    if !super::python::locks_are_semaphores() {
        return;
    }
    settle(lane);
    ThreadState::with(|s| {
        let held = s.held();
        if held.holds(addr) {
            held.take(addr);
        }
    });
}
