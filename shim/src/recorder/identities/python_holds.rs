//! CPython 3.11 to 3.13 locks (`threading.Lock`, and the locks under
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
//! The hook's outcome is not known there (the call has not been made
//! yet): a call is judged at the thread's next call from the interpreter
//! (or its next recorded blocking call, which takes the same path, or a
//! lock's destruction), which the lane keeps (`python_calls.rs`). An
//! acquisition succeeded if its
//! counter counted one more engagement than when it was last looked at. A
//! lock released by another thread (a `Condition`'s waiter) stays on the
//! holder's stack until it is destroyed.

use crate::recorder::tables::held::HeldEntry;
use crate::recorder::tables::lanes::{Lane, PY_SEEN_SLOTS};
use crate::recorder::tables::objects::ObjectSlot;
use crate::recorder::tables::thread_state::ThreadState;
use core::sync::atomic::Ordering;
use locksuit_format::*;

/// Judges the thread's last call from the interpreter on a lock, if any:
/// a successful acquisition of a CPython lock goes on the held stack, a
/// post takes it off.
pub fn settle(lane: &mut Lane) {
    let Some((call, mode)) = lane.take_python_call() else {
        return;
    };
    if !super::python::locks_are_semaphores() || call.slot.is_null() || call.counter.is_null() {
        return;
    }
    // SAFETY: slots live in the object table for the life of the process.
    let slot: &ObjectSlot = unsafe { &*call.slot };
    let ident = slot.ident.load(Ordering::Acquire);
    if ident as u32 != call.lock_id || (ident >> 32) as u32 != ObjectKind::Sem as u32 {
        return; // not a semaphore, or another object's now
    }
    let counter: *mut CounterRecord = call.counter.cast();
    match mode {
        MODE_POST => ThreadState::with(|s| {
            let held = s.held();
            if held.take(call.addr).is_some() && slot.holder.load(Ordering::Relaxed) == lane.tid {
                slot.holder.store(0, Ordering::Relaxed);
            }
        }),
        MODE_EXCLUSIVE => {
            if !acquired(lane, counter) {
                return;
            }
            ThreadState::with(|s| {
                let held = s.held();
                if held.holds(call.addr) {
                    return; // a Condition's waiter taken again: still one hold
                }
                held.push(HeldEntry {
                    addr: call.addr,
                    lock_id: call.lock_id,
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
        _ => {}
    }
}

/// Whether the last call counted into `counter` was a successful
/// acquisition: one more engagement than when it was last looked at. A
/// counter not looked at before (or forgotten) succeeded if none of its
/// calls failed.
fn acquired(lane: &mut Lane, counter: *mut CounterRecord) -> bool {
    // SAFETY: a counter record of this thread's lane, in the live mapping.
    let (engagements, failed) = unsafe {
        let c = &*counter;
        (c.engagements, c.try_failures + c.timeouts)
    };
    let key = counter as u64;
    let at = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % PY_SEEN_SLOTS;
    let seen = &mut lane.py_seen[at];
    let before = if seen.0 == key { Some(seen.1) } else { None };
    *seen = (key, engagements);
    match before {
        Some(before) => engagements > before,
        None => engagements > 0 && failed == 0,
    }
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
