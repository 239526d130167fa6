//! Whether this process's memory is a copy of the recording process's,
//! made by a clone none of our hooks saw (a `clone` or `fork` system call
//! made in inline assembly). No fork handler of ours ran in such a child:
//! it has the parent's state, and the parent's trace mapped shared, so
//! whatever it recorded would land in the parent's trace.
//!
//! One page of our own is set to be wiped in any child that gets a copy of
//! our memory (`MADV_WIPEONFORK`, Linux 4.14): the mark the recording
//! process keeps in it reads as zero there. A child that shares our memory
//! (vfork) still reads the mark: it is no copy. So telling takes one load
//! and no system call; the slow paths that would write the trace ask (a
//! thread's registration, a new block of the trace, a thread's creation),
//! and hand a copy to the lifecycle (see [`adopt`]).
//!
//! A child's writes on the fast path, through what its one thread had at
//! hand (counters of known lines), are not checked: they may land in the
//! parent's trace until the child reaches one of these paths.

use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

static MARK: AtomicPtr<AtomicU32> = AtomicPtr::new(core::ptr::null_mut());
const MARK_LEN: usize = 4096;

/// The lifecycle's answer to a copy (see [`adopt`]).
static ADOPT: AtomicUsize = AtomicUsize::new(0);

/// Sets what [`adopt`] calls: it takes whether the child may start a trace
/// of its own now, and returns whether it records.
pub fn set_handler(adopt: fn(bool) -> bool) {
    ADOPT.store(adopt as usize, Ordering::Relaxed);
}

/// Marks this memory as the recording process's: at start, and in a child
/// that starts its own trace (its page was wiped). Without the kernel's
/// help, copies cannot be told and [`is_copy`] always says no.
pub fn mark_ours() {
    let mut page = MARK.load(Ordering::Acquire);
    if page.is_null() {
        let Some(fresh) = crate::recorder::base::mapped::map_anonymous::<AtomicU32>(MARK_LEN)
        else {
            return;
        };
        // SAFETY: our own fresh private anonymous mapping of MARK_LEN bytes,
        // whose contents matter in this process only.
        let wiped = unsafe { crate::sys::madvise(fresh.cast(), MARK_LEN, libc::MADV_WIPEONFORK) };
        if wiped.is_err() {
            // SAFETY: the mapping made above, never published.
            unsafe { crate::sys::munmap(fresh.cast(), MARK_LEN) };
            return;
        }
        MARK.store(fresh, Ordering::Release);
        page = fresh;
    }
    // SAFETY: the mark's page, mapped for the life of the process.
    unsafe { (*page).store(1, Ordering::Release) };
}

/// Whether this memory is a copy of the recording process's that has not
/// started a trace of its own.
#[inline]
pub fn is_copy() -> bool {
    let page = MARK.load(Ordering::Acquire);
    // SAFETY: as in `mark_ours`.
    !page.is_null() && unsafe { (*page).load(Ordering::Acquire) } == 0
}

/// This process is a copy ([`is_copy`]): the lifecycle starts its own trace
/// if `may_restart` and it safely can, or cuts it off from the parent's.
/// Returns whether it records now, in a trace of its own.
#[cold]
#[inline(never)]
pub fn adopt(may_restart: bool) -> bool {
    let adopt = ADOPT.load(Ordering::Relaxed);
    if adopt == 0 {
        return false;
    }
    // SAFETY: only ever stored from an `fn(bool) -> bool` in `set_handler`.
    let adopt = unsafe { core::mem::transmute::<usize, fn(bool) -> bool>(adopt) };
    adopt(may_restart)
}
