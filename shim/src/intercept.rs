//! The acquisition protocol shared by every blocking lock hook:
//!
//! 1. prepare (lookups, first-sighting unwind) before touching the lock;
//! 2. try the real non-blocking variant: success is an uncontended
//!    engagement and costs no clock read;
//! 3. otherwise time the real blocking call: a contended engagement.
//!
//! Trying first never changes behaviour for plain mutexes, rwlocks and
//! spinlocks: glibc's own lock starts with the same atomic attempt, and every
//! outcome of their trylock other than "busy" (success, EAGAIN, EINVAL) is
//! exactly what the blocking call would return for a lock that is free or
//! broken; "busy" falls through to the blocking call, which then returns
//! EDEADLK, waits, or times out as it would have. Robust, priority-inheritance
//! and priority-protect mutexes are different: their trylock has effects
//! their lock does not (see [`Attempt::Direct`]), so they are never tried
//! first. Where glibc validates arguments *before* trying (a clock or
//! deadline of a timed call), the hook checks the same thing first and
//! passes an invalid call straight through.

pub use crate::glibc::Attempt;
use crate::guard::HookGuard;
use crate::recorder::{self, Hold, How, Prepared};
use core::ffi::c_int;

/// Outcomes that mean the caller now holds the lock.
#[inline]
pub fn holds(rc: c_int) -> bool {
    rc == 0 || rc == libc::EOWNERDEAD
}

/// Runs the try-first protocol for functions that return an error number
/// (or, for the mutexes whose trylock has side effects, see
/// [`Attempt::Direct`], calls the blocking function directly).
#[inline]
pub fn acquire(
    g: &HookGuard,
    p: &Prepared,
    (hold, deadline, attempt): (Hold, u64, Attempt),
    try_once: impl FnOnce() -> c_int,
    block: impl FnOnce() -> c_int,
) -> c_int {
    if let Attempt::Direct { free } = attempt {
        return acquire_directly(g, *p, (hold, deadline), free, block);
    }
    let rc = try_once();
    if rc == 0 {
        recorder::acquired(g, p, How::Uncontended, hold);
        return rc;
    }
    // By value: a reference would keep the handle on the stack on the
    // common path too, for the sake of this rare one.
    not_taken_at_once(g, *p, (hold, deadline), rc, block)
}

/// The first try did not simply succeed: busy (wait for it), or an
/// unusual result, which is the real call's too.
#[cold]
pub fn not_taken_at_once(
    g: &HookGuard,
    p: Prepared,
    (hold, deadline): (Hold, u64),
    rc: c_int,
    block: impl FnOnce() -> c_int,
) -> c_int {
    if rc == libc::EBUSY {
        return contended(g, &p, (hold, deadline), block);
    }
    if holds(rc) {
        recorder::acquired(g, &p, How::Uncontended, hold);
    }
    recorder::unusual_outcome(&p, rc);
    rc
}

/// No trylock first: a lock word seen free is an uncontended acquisition
/// (a thread that takes it in between makes this one wait unrecorded, a
/// rare miscount on these rare mutexes); otherwise the call is timed as a
/// wait. Every result is the real call's own.
#[cold]
fn acquire_directly(
    g: &HookGuard,
    p: Prepared,
    (hold, deadline): (Hold, u64),
    free: bool,
    block: impl FnOnce() -> c_int,
) -> c_int {
    if !free {
        return contended(g, &p, (hold, deadline), block);
    }
    let rc = g.blocking(block);
    if holds(rc) {
        recorder::acquired(g, &p, How::Uncontended, hold);
    }
    recorder::unusual_outcome(&p, rc);
    rc
}

/// Ends a wait that a cancellation unwinds out of (the real call was a
/// cancellation point): the lock's waiter count and the thread's pending
/// wait must not outlive it.
struct AbandonOnUnwind<'a>(Option<&'a Prepared>);

impl AbandonOnUnwind<'_> {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for AbandonOnUnwind<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            recorder::wait_abandoned(p);
        }
    }
}

#[cold]
fn contended(
    g: &HookGuard,
    p: &Prepared,
    (hold, deadline): (Hold, u64),
    block: impl FnOnce() -> c_int,
) -> c_int {
    let mut waited = recorder::wait_begin(g, p, deadline);
    let unwind = AbandonOnUnwind(Some(p));
    let rc = g.blocking(block);
    unwind.disarm();
    let (wait_ns, now) = recorder::wait_end(p, &mut waited);
    if holds(rc) {
        recorder::acquired(g, p, How::Contended { wait_ns, now }, hold);
        recorder::blocked(p, &waited, now);
    } else if rc == libc::ETIMEDOUT {
        recorder::timed_out(p, &waited, now);
    }
    recorder::unusual_outcome(p, rc);
    rc
}

/// A non-blocking attempt that returns an error number.
#[inline]
pub fn try_acquire(
    g: &HookGuard,
    p: &Prepared,
    hold: Hold,
    try_once: impl FnOnce() -> c_int,
) -> c_int {
    let rc = try_once();
    tried(g, p, hold, rc);
    rc
}

/// Records a non-blocking attempt's result `rc`.
#[inline]
pub fn tried(g: &HookGuard, p: &Prepared, hold: Hold, rc: c_int) {
    if holds(rc) {
        recorder::acquired(g, p, How::Tried, hold);
    } else if rc == libc::EBUSY {
        recorder::try_failed(p);
    }
    if rc != 0 && rc != libc::EBUSY {
        recorder::unusual_outcome(p, rc);
    }
}

extern "C-unwind" {
    fn pthread_testcancel();
}

fn errno() -> c_int {
    // SAFETY: reading this thread's errno.
    unsafe { *libc::__errno_location() }
}

fn set_errno(v: c_int) {
    // SAFETY: writing this thread's errno.
    unsafe { *libc::__errno_location() = v };
}

/// The try-first protocol for semaphores, which return -1 and set errno.
/// errno is exactly what the real blocking call alone would have left: the
/// EAGAIN of a failed first try is undone before blocking.
pub fn sem_acquire(
    g: &HookGuard,
    p: &Prepared,
    deadline: u64,
    try_once: impl FnOnce() -> c_int,
    block: impl FnOnce() -> c_int,
) -> c_int {
    // sem_wait and its timed forms are cancellation points even when a
    // token is there: glibc tests for a pending cancel before its fast path,
    // and sem_trywait is not one, so test first as the real call would.
    // SAFETY: pthread_testcancel takes no arguments; if a cancel is pending
    // the thread unwinds from here, as it would have in the real call.
    unsafe { pthread_testcancel() };
    let before = errno();
    if try_once() == 0 {
        recorder::acquired(g, p, How::Uncontended, Hold::None);
        return 0;
    }
    if errno() != libc::EAGAIN {
        // Cannot happen for a valid semaphore; let the real call decide.
        set_errno(before);
        return block();
    }
    set_errno(before);
    let mut waited = recorder::wait_begin(g, p, deadline);
    let unwind = AbandonOnUnwind(Some(p));
    let rc = g.blocking(block);
    unwind.disarm();
    let after = errno();
    let (wait_ns, now) = recorder::wait_end(p, &mut waited);
    if rc == 0 {
        recorder::acquired(g, p, How::Contended { wait_ns, now }, Hold::None);
        recorder::blocked(p, &waited, now);
    } else if after == libc::ETIMEDOUT {
        recorder::timed_out(p, &waited, now);
    } else {
        recorder::unusual_outcome(p, after);
    }
    set_errno(after);
    rc
}

/// `sem_trywait`: counts a success or a failure; errno is the real one.
pub fn sem_try(g: &HookGuard, p: &Prepared, try_once: impl FnOnce() -> c_int) -> c_int {
    let rc = try_once();
    let after = errno();
    if rc == 0 {
        recorder::acquired(g, p, How::Uncontended, Hold::None);
    } else if after == libc::EAGAIN {
        recorder::try_failed(p);
    }
    set_errno(after);
    rc
}

/// Clocks glibc accepts for `*_clock*` calls; with any other the real call
/// fails with EINVAL before trying the lock.
pub fn supported_clock(clock: libc::clockid_t) -> bool {
    clock == libc::CLOCK_REALTIME || clock == libc::CLOCK_MONOTONIC
}

/// A deadline glibc would accept. Some timed calls (rwlocks, semaphores)
/// reject a bad one before trying the lock, so the hook never tries first
/// with it.
pub fn valid_deadline(t: *const libc::timespec) -> bool {
    // SAFETY: non-null checked; the caller passed it for the real call to read.
    !t.is_null() && (0..1_000_000_000).contains(&unsafe { (*t).tv_nsec })
}

/// A timed call's deadline in nanoseconds of its own clock, as recorded in
/// its wait events; 0 when there is none (or it is malformed).
pub fn deadline_ns(t: *const libc::timespec) -> u64 {
    if !valid_deadline(t) {
        return 0;
    }
    // SAFETY: checked non-null and well-formed; the caller passed it for the
    // real call to read.
    let t = unsafe { &*t };
    (t.tv_sec.max(0) as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

/// A futex wait made through `syscall()` (a lock library's contended
/// path), in the hook that starts at `hook`: recorded as a wait on the
/// word at `addr`. errno and the result are the real call's.
pub fn futex_wait(hook: u64, addr: u64, wait: impl FnOnce() -> libc::c_long) -> libc::c_long {
    let Some(g) = HookGuard::enter() else {
        return wait();
    };
    let before = errno();
    let Some(waiting) = recorder::futex_wait_begin(&g, addr, hook) else {
        set_errno(before);
        return g.blocking(wait);
    };
    set_errno(before);
    let rc = g.blocking(wait);
    let after = errno();
    recorder::futex_wait_end(&g, waiting, if rc == -1 { after } else { 0 });
    set_errno(after);
    rc
}

/// The most words of one `futex_waitv` whose waits are recorded word by
/// word; a call on more is timed as a blocking call.
pub const FUTEX_WAITV_WORDS: usize = 8;

/// A `futex_waitv` on several `words` (at most [`FUTEX_WAITV_WORDS`]) in
/// the hook that starts at `hook`: the thread waits on each, and the word
/// whose index the call returns is the one that ended the wait (its waker
/// named as for FUTEX_WAIT); the others' waits are dropped uncounted. A
/// call that failed (timed out, a word had changed, interrupted) is
/// counted on its first word, as FUTEX_WAIT's would be: which word it was
/// about, the kernel does not say.
pub fn futex_wait_any(
    hook: u64,
    words: &[u64],
    wait: impl FnOnce() -> libc::c_long,
) -> libc::c_long {
    let Some(g) = HookGuard::enter() else {
        return wait();
    };
    let before = errno();
    let mut waits: [Option<recorder::FutexWait>; FUTEX_WAITV_WORDS] =
        core::array::from_fn(|_| None);
    for (w, &addr) in waits.iter_mut().zip(words) {
        *w = recorder::futex_wait_begin(&g, addr, hook);
    }
    set_errno(before);
    let rc = g.blocking(wait);
    let after = errno();
    let ended = if rc >= 0 { rc as usize } else { 0 };
    for (i, w) in waits.into_iter().enumerate() {
        let Some(w) = w else { continue };
        if i == ended {
            recorder::futex_wait_end(&g, w, if rc == -1 { after } else { 0 });
        } else {
            recorder::futex_wait_abandoned(w);
        }
    }
    set_errno(after);
    rc
}

/// A futex wake made through `syscall()` in the hook that starts at
/// `hook`: recorded if it ended a recorded wait or woke anyone (see
/// `recorder::futex_woke`).
pub fn futex_wake(hook: u64, addr: u64, wake: impl FnOnce() -> libc::c_long) -> libc::c_long {
    let Some(g) = HookGuard::enter() else {
        return wake();
    };
    let started = recorder::futex_wake_begin(addr);
    let rc = g.blocking(wake);
    let after = errno();
    recorder::futex_woke(&g, started, addr, hook, rc);
    set_errno(after);
    rc
}
