//! Locks used against their rules: an unlock of a lock nobody held or
//! another thread held, a destroy of a held lock or of a condition threads
//! wait on, a condition wait with a mutex the thread does not hold. Each
//! is one event ([`EVENT_MISUSE`]) with the line that did it.
//!
//! Only slow paths come here: an unlock whose lock this thread's held list
//! does not have, a destroy, a condition wait's release of its mutex. The
//! verdict is read from the lock's own words (see `glibc::holder`), never
//! from what the shim tracked: a hold the shim lost (nested past its
//! depth, taken before it loaded, passed through in a signal handler) is
//! no misuse. The line is found by unwinding once per lock and kind of
//! misuse, so a program that does the same wrong thing in a loop pays for
//! the unwinding once.

use super::clock::now_ns;
use super::thread_lane::current_lane;
use super::thread_state::InHook;
use super::{events, objects, sites};
use crate::glibc::{self, Holder};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use locksuit_format::*;

/// Where the misuse happened: in an exported hook (its code's address; the
/// line that called it is found by unwinding), or at a known site.
#[derive(Clone, Copy)]
pub enum At {
    Hook(u64),
    Site(u32),
}

/// Lines already found, by (lock, misuse): a direct-mapped cache whose
/// races only cost an unwinding more.
const MEMO_SLOTS: usize = 64;
static MEMO_KEYS: [AtomicU64; MEMO_SLOTS] = [const { AtomicU64::new(0) }; MEMO_SLOTS];
static MEMO_SITES: [AtomicU32; MEMO_SLOTS] = [const { AtomicU32::new(0) }; MEMO_SLOTS];

/// Forgets the lines (a fork child's sites are its own).
pub fn reset_after_fork() {
    for key in &MEMO_KEYS {
        key.store(0, Ordering::Relaxed);
    }
}

fn site(lane: &mut super::lanes::Lane, lock_id: u32, what: u32, at: At) -> u32 {
    let hook = match at {
        At::Site(site) => return site,
        At::Hook(hook) => hook,
    };
    let key = u64::from(lock_id) << 8 | u64::from(what);
    let slot = (key as usize ^ ((key >> 8) as usize * 31)) % MEMO_SLOTS;
    if MEMO_KEYS[slot].load(Ordering::Relaxed) == key {
        return MEMO_SITES[slot].load(Ordering::Relaxed);
    }
    let site = sites::caller_of_hook(hook)
        .map_or(0, |(caller, context)| sites::site_id(lane, caller, context));
    MEMO_SITES[slot].store(site, Ordering::Relaxed);
    MEMO_KEYS[slot].store(key, Ordering::Relaxed);
    site
}

fn record(g: &InHook, addr: u64, what: u32, (other, seq): (u32, u32), at: At) {
    let Some(slot) = objects::find(addr) else {
        return; // never seen: nothing to name it by
    };
    let lock_id = slot.id();
    if lock_id == 0 {
        return;
    }
    let Some(lane) = current_lane(g) else { return };
    let site = site(lane, lock_id, what, at);
    events::misuse(lane, (lock_id, site), what, (other, seq), now_ns());
}

/// This thread unlocks the lock of `kind` at `addr`, which its held list
/// does not have: misuse if the lock says nobody, or another thread,
/// holds it.
pub fn unlock_not_held(g: &InHook, addr: u64, kind: ObjectKind, at: At) {
    let Some(me) = current_lane(g).map(|l| l.tid) else {
        return;
    };
    // SAFETY: the program passed `addr` to an unlock of this kind, which
    // reads the same words first.
    match unsafe { glibc::holder(addr, kind) } {
        Holder::Nobody => record(g, addr, MISUSE_UNLOCK_UNLOCKED, (0, 0), at),
        Holder::Thread(t) if t != me => record(g, addr, MISUSE_UNLOCK_NOT_OWNER, (t, 0), at),
        _ => {}
    }
}

/// A condition wait hands over a mutex this thread's held list does not
/// have: misuse if the mutex says this thread does not hold it.
pub fn wait_unheld(g: &InHook, mutex: u64, site: u32) {
    let Some(me) = current_lane(g).map(|l| l.tid) else {
        return;
    };
    // SAFETY: the program passed `mutex` to a condition wait, which
    // unlocks it.
    let other = match unsafe { glibc::holder(mutex, ObjectKind::Mutex) } {
        Holder::Nobody => 0,
        Holder::Thread(t) if t != me => t,
        _ => return,
    };
    record(g, mutex, MISUSE_WAIT_UNHELD, (other, 0), At::Site(site));
}

/// The object of `kind` at `addr` is about to be destroyed: misuse if a
/// lock is held, or threads wait on a condition variable.
pub fn destroying(g: &InHook, addr: u64, kind: ObjectKind, at: At) {
    if kind == ObjectKind::Cond {
        let Some(slot) = objects::find(addr) else {
            return;
        };
        let waiters = slot.waiters.load(Ordering::Relaxed);
        if waiters > 0 {
            // Woken waiters may still be on their way out, which is
            // allowed; the analyzer tells them apart by the notifies
            // before this moment (the notify sequence now).
            let seq = slot.seq.load(Ordering::Relaxed);
            record(g, addr, MISUSE_DESTROY_WAITED, (waiters, seq), at);
        }
        return;
    }
    // SAFETY: the program passed `addr` to a destroy of this kind, which
    // reads the same words first.
    match unsafe { glibc::holder(addr, kind) } {
        Holder::Nobody => {}
        Holder::Thread(t) => record(g, addr, MISUSE_DESTROY_HELD, (t, 0), at),
        Holder::Someone => record(g, addr, MISUSE_DESTROY_HELD, (0, 0), at),
    }
}
