//! Locks used against their rules: an unlock of a lock nobody held or
//! another thread held, a destroy of a held lock or of a condition threads
//! wait on, a condition wait with a mutex the thread does not hold. Each
//! is one event ([`EVENT_MISUSE`]) with the line that did it.
//!
//! Only slow paths come here: an unlock whose lock this thread's held list
//! does not have, a destroy, a condition wait's release of its mutex. The
//! verdict on a lock is read from its own words (see `glibc::holder`),
//! never from what the shim tracked: a hold the shim lost (nested past its
//! depth, taken before it loaded, passed through in a signal handler) is
//! no misuse. A condition's waiters are the shim's count (glibc's are not
//! public). The line is found by unwinding, a few times per lock and kind
//! of misuse (see [`MEMO`]).

use crate::glibc::{self, Holder};
use crate::recorder::api::identity;
use crate::recorder::api::thread_lane::current_lane;
use crate::recorder::features::events;
use crate::recorder::identities::sites;
use crate::recorder::tables::objects;
use crate::recorder::tables::thread_state::InHook;
use crate::recorder::time::clock::now_ns;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use locksuit_format::*;

/// Where the misuse happened: in an exported hook (its code's address; the
/// line that called it is found by unwinding), or at a known site.
#[derive(Clone, Copy)]
pub enum At {
    Hook(u64),
    Site(u32),
}

/// Lines found by unwinding, by (lock, misuse), packed in one word each so
/// a reader never pairs one key with another's line: lock id (32 bits),
/// misuse (3), site (29). Each key is unwound afresh its first
/// [`UNWOUND_FIRST`] times, so the lines a few misuses come from are told
/// apart; after that a misuse in a loop pays for no more unwinding.
const MEMO_SLOTS: usize = 64;
const UNWOUND_FIRST: u32 = 16;
const SITE_BITS: u32 = 29;
static MEMO: [AtomicU64; MEMO_SLOTS] = [const { AtomicU64::new(0) }; MEMO_SLOTS];
static MEMO_UNWOUND: [AtomicU32; MEMO_SLOTS] = [const { AtomicU32::new(0) }; MEMO_SLOTS];

/// Forgets the lines (a fork child's sites are its own).
pub fn reset_after_fork() {
    for (memo, count) in MEMO.iter().zip(&MEMO_UNWOUND) {
        memo.store(0, Ordering::Relaxed);
        count.store(0, Ordering::Relaxed);
    }
}

fn site(lane: &mut crate::recorder::tables::lanes::Lane, lock_id: u32, what: u32, at: At) -> u32 {
    let hook = match at {
        At::Site(site) => return site,
        At::Hook(hook) => hook,
    };
    let key = u64::from(lock_id) << 32 | u64::from(what & 7) << SITE_BITS;
    let slot = ((lock_id as usize).wrapping_mul(31) ^ what as usize) % MEMO_SLOTS;
    let seen = MEMO[slot].load(Ordering::Relaxed);
    if seen & !((1 << SITE_BITS) - 1) == key
        && MEMO_UNWOUND[slot].load(Ordering::Relaxed) >= UNWOUND_FIRST
    {
        return (seen & ((1 << SITE_BITS) - 1)) as u32;
    }
    let site = sites::caller_of_hook(hook).map_or(0, |(caller, context)| {
        sites::site_id(lane, caller, context, sites::PythonLines::No)
    });
    if site < 1 << SITE_BITS {
        if seen & !((1 << SITE_BITS) - 1) != key {
            MEMO_UNWOUND[slot].store(0, Ordering::Relaxed);
        }
        MEMO_UNWOUND[slot].fetch_add(1, Ordering::Relaxed);
        MEMO[slot].store(key | u64::from(site), Ordering::Relaxed);
    }
    site
}

/// Writes the misuse of the object of `kind` at `addr` (an identity is
/// made for one never used before: a static mutex unlocked first).
fn record(
    g: &InHook,
    (addr, kind): (u64, ObjectKind),
    what: u32,
    (other, seq): (u32, u32),
    at: At,
) {
    let Some(lane) = current_lane(g) else { return };
    let lock_id = match objects::find(addr).map(|slot| slot.id()) {
        Some(id) if id != 0 => id,
        _ => match identity::object(lane, addr, kind) {
            Some(found) => found.id,
            None => return,
        },
    };
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
    // reads (a spinlock's: writes) the same words.
    match unsafe { glibc::holder(addr, kind) } {
        Holder::Nobody => record(g, (addr, kind), MISUSE_UNLOCK_UNLOCKED, (0, 0), at),
        Holder::Thread(t) if t != me => {
            record(g, (addr, kind), MISUSE_UNLOCK_NOT_OWNER, (t, 0), at)
        }
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
    let what = MISUSE_WAIT_UNHELD;
    record(
        g,
        (mutex, ObjectKind::Mutex),
        what,
        (other, 0),
        At::Site(site),
    );
}

/// The object of `kind` at `addr` is about to be destroyed: misuse if a
/// lock is held, or threads wait on a condition variable. Only objects the
/// shim has seen in use are looked at.
pub fn destroying(g: &InHook, addr: u64, kind: ObjectKind, at: At) {
    let Some(slot) = objects::find(addr).filter(|s| s.id() != 0) else {
        return;
    };
    if kind == ObjectKind::Cond {
        let waiters = slot.waiters.load(Ordering::Relaxed);
        if waiters > 0 {
            // Woken waiters may still be on their way out, which is
            // allowed; the analyzer tells them apart by the notifies
            // before this moment (the notify sequence now).
            let seq = slot.seq.load(Ordering::Relaxed);
            record(g, (addr, kind), MISUSE_DESTROY_WAITED, (waiters, seq), at);
        }
        return;
    }
    let holder = match kind {
        // SAFETY: glibc's mutex destroy reads the same words first.
        ObjectKind::Mutex => unsafe { glibc::holder(addr, kind) },
        // An rwlock's or spinlock's destroy reads nothing: the program may
        // have unmapped it; read through the kernel.
        _ => match glibc::holder_copied(addr, kind) {
            Some(holder) => holder,
            None => return,
        },
    };
    match holder {
        Holder::Nobody => {}
        Holder::Thread(t) => record(g, (addr, kind), MISUSE_DESTROY_HELD, (t, 0), at),
        Holder::Someone => record(g, (addr, kind), MISUSE_DESTROY_HELD, (0, 0), at),
    }
}
