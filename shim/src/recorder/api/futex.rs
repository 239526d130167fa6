//! Futex words as objects of the report. A lock library that makes no
//! pthread call (Rust's std and parking_lot, abseil, folly) takes its
//! contended path through `syscall(SYS_futex, …)`: the word a thread waits
//! on is an object of kind `futex`.
//!
//! A wait is recorded as a semaphore wait that blocked is: a contended
//! engagement that holds nothing (the word's holder, if it has one, is not
//! known to the shim). A wake that woke threads is recorded as a release
//! that found waiters, and the word's sequence ties the two: a wake bumps
//! it before the kernel wakes anyone, so the wait it ends reads the new
//! value and the analyzer names the waker as the thread that blocked it.
//! Acquisitions that did not wait make no call and are not seen; the
//! report says so.
//!
//! Everything here is on the futex slow path: the calls that wait or wake
//! are system calls already, and the call site is found by unwinding (the
//! `syscall` hook has no room for a trampoline).

use crate::recorder::api::locks::{
    acquired, blocked, timed_out, unusual_outcome, wait_abandoned, wait_begin, wait_end,
};
use crate::recorder::api::prepared::{prepare_unwound, Hold, How, Prepared};
use crate::recorder::api::thread_lane::current_lane;
use crate::recorder::base::caller::Caller;
use crate::recorder::features::events::{self, Waiting};
use crate::recorder::identities::sites;
use crate::recorder::tables::lanes::{on_own_stack, timed_slow_work, Lane};
use crate::recorder::tables::objects::{self, ObjectSlot};
use crate::recorder::tables::thread_state::InHook;
use crate::recorder::time::clock::now_ns;
use core::sync::atomic::Ordering;
use locksuit_format::*;

/// A futex wait in progress.
pub struct FutexWait {
    p: Prepared,
    waiting: Waiting,
}

/// Return addresses above the caller that tell a futex call's sites apart:
/// enough to reach the program's own frames through a lock library's
/// (abseil's `Mutex::Lock` waits seven frames below the line that called
/// it; Rust's std, two or three).
const FUTEX_CONTEXT_DEPTH: usize = 12;

/// The caller of the exported hook at `hook`, and its context, found by
/// unwinding on the lane's own stack (the program's may be small). The
/// hook itself when the unwinder cannot find it: the wait is still
/// counted, at a site with no line of the program's.
fn caller_of(lane: &mut Lane, hook: u64) -> (Caller, u64) {
    on_own_stack(lane, |_| {
        sites::caller_of_hook_through(hook, FUTEX_CONTEXT_DEPTH)
    })
    .unwrap_or((Caller { ret: hook, sp: 0 }, 0))
}

/// About to wait on the futex word at `addr` in a call to the hook at
/// `hook`: looks the word and the line up (made the first time) and
/// counts this thread as its waiter. `None`: not recorded (no lane, a
/// full table), and the call goes through as it is.
pub fn futex_wait_begin(g: &InHook, addr: u64, hook: u64) -> Option<FutexWait> {
    let lane = current_lane(g)?;
    let at = timed_slow_work(lane, |lane| caller_of(lane, hook));
    let p = prepare_unwound(g, addr, ObjectKind::Futex, MODE_EXCLUSIVE, at)?;
    let waiting = wait_begin(g, &p, 0);
    Some(FutexWait { p, waiting })
}

/// The wait ended, with the call's errno `err` (0 when it returned 0): woken,
/// or the word had changed already (`EAGAIN`), or interrupted: a
/// contended engagement, with its outcome if unusual; timed out: a
/// timeout.
pub fn futex_wait_end(g: &InHook, wait: FutexWait, err: i32) {
    let FutexWait { p, mut waiting } = wait;
    let (wait_ns, now) = wait_end(&p, &mut waiting);
    if err == libc::ETIMEDOUT {
        timed_out(&p, &waiting, now);
        return;
    }
    acquired(g, &p, How::Contended { wait_ns, now }, Hold::None);
    blocked(&p, &waiting, now);
    if err != 0 && err != libc::EAGAIN {
        unusual_outcome(&p, err);
    }
}

/// A wait begun on one of several words (`futex_waitv`) that another word
/// ended: it no longer waits on this one, and nothing is counted on it.
pub fn futex_wait_abandoned(wait: FutexWait) {
    wait_abandoned(&wait.p);
}

/// A wake about to be made on a futex word.
pub struct FutexWake {
    /// The word, when a recorded wait on it is in progress: its sequence
    /// was bumped to `seq_after` before the wake, at `at`.
    bumped: Option<(&'static ObjectSlot, u32)>,
    at: u64,
}

/// About to wake threads waiting on the word at `addr`. If a recorded wait
/// on it is in progress, the word's sequence moves first, so the wait this
/// wake ends reads the new value when it returns. One lookup that claims
/// nothing otherwise: a wake nobody waits for (a condition variable
/// notified with no waiter) costs no more.
pub fn futex_wake_begin(addr: u64) -> FutexWake {
    let bumped = objects::find(addr)
        .filter(|slot| slot.kind() == ObjectKind::Futex as u32 && slot.waiting() > 0)
        .map(|slot| {
            (
                slot,
                slot.seq.fetch_add(1, Ordering::Relaxed).wrapping_add(1),
            )
        });
    let at = if bumped.is_some() { now_ns() } else { 0 };
    FutexWake { bumped, at }
}

/// The wake at `addr`, in a call to the hook at `hook`, woke `woken`
/// threads (negative: it failed). Recorded when it ended a recorded wait
/// or woke anyone: counted as a post at the waker's line (so the line is
/// one of the word's), and written as a release that found `woken`
/// waiters.
pub fn futex_woke(g: &InHook, wake: FutexWake, addr: u64, hook: u64, woken: i64) {
    if wake.bumped.is_none() && woken <= 0 {
        return;
    }
    let Some(lane) = current_lane(g) else { return };
    let at = timed_slow_work(lane, |lane| caller_of(lane, hook));
    let Some(p) = prepare_unwound(g, addr, ObjectKind::Futex, MODE_POST, at) else {
        return;
    };
    let seq_after = match wake.bumped {
        Some((slot, seq_after)) if core::ptr::eq(slot, p.slot) => seq_after,
        _ => p.slot.seq.fetch_add(1, Ordering::Relaxed).wrapping_add(1),
    };
    let counter = p.counter();
    counter.engagements += 1;
    if woken > 0 {
        counter.task_switches += 1;
    }
    let site = counter.site_id;
    let at = if wake.at != 0 { wake.at } else { now_ns() };
    let woken = u32::try_from(woken.max(0)).unwrap_or(u32::MAX);
    events::released(p.lane(), p.lock_id(), site, (seq_after, woken), (at, 0), 0);
}
