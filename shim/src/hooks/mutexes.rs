//! The exported mutex lock, trylock and unlock: naked trampolines that
//! jump through a handler chosen for the recording mode once the settings
//! are read — the full mode's (its lock and trylock in `mutexes/quick.rs`,
//! falling back on the lock hooks' shapes in `hooks.rs`), or lean mode's
//! (`LOCKSUIT_MODE=lean`, see `recorder/api/lean.rs`), whose common
//! engagement is done whole without entering a hook. The other mutex
//! hooks (init, destroy, timed locks) are in `hooks.rs`.

mod quick;

use super::{mutex_attempt, released};
use crate::guard::{HookGuard, ThreadState};
use crate::intercept::{acquire, try_acquire, Attempt};
use crate::lifecycle;
use crate::real::real;
use crate::recorder::{self, Caller, Hold};
use core::ffi::c_int;
use core::sync::atomic::{AtomicPtr, Ordering};
use libc::pthread_mutex_t;
use locksuit_format::{ObjectKind, MODE_EXCLUSIVE};
use quick::{mutex_lock, mutex_lock_traced, mutex_trylock, mutex_trylock_traced};

/// The handlers `pthread_mutex_lock`, `_trylock` and `_unlock` jump to:
/// the full mode's, or lean mode's, chosen by the first lock or trylock once
/// the settings are read ([`chose_mutex_handlers`]). An indirect jump in the
/// trampoline costs what a direct one does, so the full mode pays nothing
/// for lean mode's being there. The full mode has three sets: while the
/// process records and engagements are untimed (no full tracing, no hold
/// sampling) the quick ones, which ask neither; while it records under
/// full tracing, a lock and trylock that look as the quick ones do and
/// record each engagement in full, and an unlock that records each
/// release in full at once; else the general ones. Full tracing switched on or
/// off while the process runs, and the recording's start and end, swap
/// them ([`point_full_handlers`]; a fork child is re-pointed when its
/// trace starts or cannot, not at the fork, see `lifecycle::fork_child`).
static MUTEX_LOCK_HANDLER: AtomicPtr<()> = AtomicPtr::new(mutex_lock_first as *mut ());
static MUTEX_TRYLOCK_HANDLER: AtomicPtr<()> = AtomicPtr::new(mutex_trylock_first as *mut ());
static MUTEX_UNLOCK_HANDLER: AtomicPtr<()> = AtomicPtr::new(mutex_unlock_full as *mut ());

type MutexHandler = unsafe extern "C-unwind" fn(*mut pthread_mutex_t, usize, usize) -> c_int;

/// Starts recording (which reads `LOCKSUIT_MODE`), then points the three
/// trampolines at the mode's handlers. False while the shim is still
/// starting (a lock taken inside its own start): the choice waits for a
/// later call, and this one goes the full mode's general way, which
/// passes such calls through.
fn chose_mutex_handlers() -> bool {
    // Entered as every hook enters (a call nested in the shim's own work
    // starts nothing), and left at once.
    drop(HookGuard::enter());
    if matches!(
        lifecycle::state(),
        lifecycle::State::Uninitialized | lifecycle::State::Initializing
    ) {
        return false;
    }
    if crate::config::lean() {
        point_handlers((mutex_lock_lean, mutex_trylock_lean, mutex_unlock_lean));
    } else {
        crate::config::on_timing_changed(point_full_handlers);
        lifecycle::on_recording_changed(point_full_handlers);
        point_full_handlers();
    }
    true
}

type UnlockHandler = unsafe extern "C-unwind" fn(*mut pthread_mutex_t) -> c_int;

fn point_handlers((lock, trylock, unlock): (MutexHandler, MutexHandler, UnlockHandler)) {
    MUTEX_UNLOCK_HANDLER.store(unlock as *mut (), Ordering::SeqCst);
    MUTEX_TRYLOCK_HANDLER.store(trylock as *mut (), Ordering::SeqCst);
    MUTEX_LOCK_HANDLER.store(lock as *mut (), Ordering::SeqCst);
}

/// Points the trampolines at the full mode's handlers for whether the
/// process records and engagements are timed now, until what was stored
/// matches what is read after: two threads that change either and choose
/// at once end on the last. The general handlers ask both themselves (a
/// fork child's first call through them starts its trace).
fn point_full_handlers() {
    // (recording?, untimed?, every hold timed?)
    let choice_now = || {
        // Ordered with the callbacks' registration and the flags' swaps
        // (see `config::on_timing_changed`), and between the stores above
        // and the reads of the check after them.
        core::sync::atomic::fence(Ordering::SeqCst);
        (
            lifecycle::recording_started(),
            crate::config::untimed_uncontended(),
            crate::config::events_all(),
        )
    };
    loop {
        let choice = choice_now();
        let handlers: (MutexHandler, MutexHandler, UnlockHandler) = match choice {
            (true, true, _) => (mutex_lock, mutex_trylock, mutex_unlock_untimed),
            (true, false, true) => (mutex_lock_traced, mutex_trylock_traced, mutex_unlock_traced),
            _ => (mutex_lock_general, mutex_trylock_general, mutex_unlock_full),
        };
        point_handlers(handlers);
        if choice_now() == choice {
            return;
        }
    }
}

/// The handler `slot` points to now.
fn handler_in(slot: &AtomicPtr<()>) -> MutexHandler {
    // SAFETY: the slots hold only `MutexHandler`s (stored above or at start).
    unsafe { core::mem::transmute::<*mut (), MutexHandler>(slot.load(Ordering::Relaxed)) }
}

/// The first `pthread_mutex_lock`s: the mode's handlers chosen, on in its
/// lock handler.
unsafe extern "C-unwind" fn mutex_lock_first(
    m: *mut pthread_mutex_t,
    caller: usize,
    sp: usize,
) -> c_int {
    let handler = if chose_mutex_handlers() {
        handler_in(&MUTEX_LOCK_HANDLER)
    } else {
        mutex_lock_general
    };
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { handler(m, caller, sp) }
}

/// The first `pthread_mutex_trylock`s, as [`mutex_lock_first`].
unsafe extern "C-unwind" fn mutex_trylock_first(
    m: *mut pthread_mutex_t,
    caller: usize,
    sp: usize,
) -> c_int {
    let handler = if chose_mutex_handlers() {
        handler_in(&MUTEX_TRYLOCK_HANDLER)
    } else {
        mutex_trylock_general
    };
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { handler(m, caller, sp) }
}

/// Exports `$name` as a trampoline like [`export_with_caller!`]'s that
/// jumps through the handler pointer `$slot` instead of to one handler.
macro_rules! export_through {
    ($name:ident => $slot:ident) => {
        #[unsafe(no_mangle)]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name(_m: *mut pthread_mutex_t) -> c_int {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(
                "mov rsi, qword ptr [rsp]",
                "mov rdx, rsp",
                "jmp qword ptr [rip + {h}]",
                h = sym $slot
            );
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(
                "mov x1, x30",
                "mov x2, sp",
                "adrp x16, {h}",
                "ldr x16, [x16, :lo12:{h}]",
                "br x16",
                h = sym $slot
            );
        }
    };
}

export_through!(pthread_mutex_lock => MUTEX_LOCK_HANDLER);

/// `pthread_mutex_unlock`, through [`MUTEX_UNLOCK_HANDLER`].
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn pthread_mutex_unlock(_m: *mut pthread_mutex_t) -> c_int {
    #[cfg(target_arch = "x86_64")]
    core::arch::naked_asm!("jmp qword ptr [rip + {h}]", h = sym MUTEX_UNLOCK_HANDLER);
    #[cfg(target_arch = "aarch64")]
    core::arch::naked_asm!(
        "adrp x16, {h}",
        "ldr x16, [x16, :lo12:{h}]",
        "br x16",
        h = sym MUTEX_UNLOCK_HANDLER
    );
}

lock_handler!(mutex_lock_general(m: *mut pthread_mutex_t),
    real: mutex_lock, try: mutex_trylock, kind: ObjectKind::Mutex, mode: MODE_EXCLUSIVE, hold: Hold::Exclusive, valid: true, attempt: mutex_attempt(m));

/// Lean mode's `pthread_mutex_lock`: the common engagement whole, with no
/// hook entered (see `lean.rs`); anything else the general way. Kept
/// apart from the general way so that its frame is only what lives across
/// the trylock.
unsafe extern "C-unwind" fn mutex_lock_lean(
    m: *mut pthread_mutex_t,
    caller: usize,
    sp: usize,
) -> c_int {
    if let Some(state) = HookGuard::could_enter() {
        if let Attempt::TryFirst = mutex_attempt(m) {
            if let Some(line) =
                recorder::lean_found_quickly(state, m as u64, Caller::new(caller, sp))
            {
                let try_once = real_or!(mutex_trylock, libc::EINVAL);
                // SAFETY: forwarding the caller's argument unchanged.
                let rc = unsafe { try_once(m) };
                if rc == 0 {
                    recorder::lean_engaged_quickly(line);
                    return 0;
                }
                // SAFETY: forwarding the caller's argument (the line's
                // mutex) unchanged.
                return unsafe { mutex_lock_lean_not_taken(line, rc) };
            }
            // The table of lines has none for this call.
            // SAFETY: forwarding the caller's arguments unchanged.
            return unsafe { mutex_lock_lean_warm(m, caller, sp, state) };
        }
    }
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { mutex_lock_lean_general(m, caller, sp, false) }
}

/// Lean mode's `pthread_mutex_lock` for a call its table of lines does not
/// hold (the first of a line, or a thread with more lines than the table
/// takes): the hot cache's second level, looked at without entering the
/// hook; else the general way, which adds the line to the table.
#[inline(never)]
#[cold]
unsafe fn mutex_lock_lean_warm(
    m: *mut pthread_mutex_t,
    caller: usize,
    sp: usize,
    state: &ThreadState,
) -> c_int {
    if let Some(p) = recorder::lean_found_warm(state, m as u64, Caller::new(caller, sp)) {
        let try_once = real_or!(mutex_trylock, libc::EINVAL);
        // SAFETY: forwarding the caller's argument unchanged.
        let rc = unsafe { try_once(m) };
        if rc == 0 {
            recorder::lean_acquired(&p);
            return 0;
        }
        // SAFETY: forwarding the caller's argument unchanged.
        return unsafe { mutex_lock_lean_not_taken_at(m, p, rc) };
    }
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { mutex_lock_lean_general(m, caller, sp, true) }
}

/// Lean mode's quick try found the mutex busy (or got an unusual result):
/// the general way from there, with the lock's entry already found.
#[inline(never)]
#[cold]
unsafe fn mutex_lock_lean_not_taken(line: recorder::LeanLine, rc: c_int) -> c_int {
    let (m, p) = (line.addr() as *mut pthread_mutex_t, line.prepared());
    // SAFETY: forwarding the caller's argument (the line's mutex) unchanged.
    unsafe { mutex_lock_lean_not_taken_at(m, p, rc) }
}

/// [`mutex_lock_lean_not_taken`] for mutex `m`, found as `p`.
#[inline(never)]
#[cold]
unsafe fn mutex_lock_lean_not_taken_at(
    m: *mut pthread_mutex_t,
    p: recorder::Prepared,
    rc: c_int,
) -> c_int {
    let block = real_or!(mutex_lock, libc::EINVAL);
    let Some(guard) = HookGuard::enter() else {
        // Recording stopped since the look: the real call decides.
        // SAFETY: forwarding the caller's argument unchanged.
        return if rc == libc::EBUSY {
            unsafe { block(m) }
        } else {
            rc
        };
    };
    // SAFETY: forwarding the caller's argument unchanged.
    crate::intercept::not_taken_at_once(&guard, p, (Hold::Lean, 0), rc, || unsafe { block(m) })
}

/// Lean mode's `pthread_mutex_lock` when it is not the common engagement:
/// no sampled self-cost, no held entry, else as the full mode's. `missed`:
/// the table of lines was looked at already, and had no line.
#[inline(never)]
unsafe fn mutex_lock_lean_general(
    m: *mut pthread_mutex_t,
    caller: usize,
    sp: usize,
    missed: bool,
) -> c_int {
    let (block, try_once) = real_pair_or!(mutex_lock, mutex_trylock, libc::EINVAL);
    // SAFETY (every call below): forwarding the caller's argument unchanged.
    let Some(guard) = HookGuard::enter() else {
        return unsafe { block(m) };
    };
    let prepared = recorder::prepare_lean(&guard, m as u64, Caller::new(caller, sp), missed);
    let Some(p) = &prepared else {
        // SAFETY: forwarding the caller's argument unchanged.
        return unsafe { block(m) };
    };
    acquire(
        &guard,
        p,
        (Hold::Lean, 0, mutex_attempt(m)),
        // SAFETY: forwarding the caller's argument unchanged.
        || unsafe { try_once(m) },
        // SAFETY: forwarding the caller's argument unchanged.
        || unsafe { block(m) },
    )
}

/// Lean mode's `pthread_mutex_unlock`: nothing is recorded unless the lock
/// word says a thread may wait for the mutex (see `lean.rs`).
unsafe extern "C-unwind" fn mutex_unlock_lean(m: *mut pthread_mutex_t) -> c_int {
    let unlock = real_or!(mutex_unlock, 0);
    // SAFETY: the program passed `m` to unlock, which reads its lock word too.
    if unsafe { crate::glibc::mutex_may_have_waiters(m as u64) } {
        lean_release_with_waiters(m as u64);
    }
    // SAFETY: forwarding the caller's argument unchanged.
    unsafe { unlock(m) }
}

#[cold]
#[inline(never)]
fn lean_release_with_waiters(addr: u64) {
    if let Some(g) = &HookGuard::enter() {
        recorder::lean_released_with_waiters(g, addr);
    }
}

export_through!(pthread_mutex_trylock => MUTEX_TRYLOCK_HANDLER);

trylock_handler!(mutex_trylock_general(m: *mut pthread_mutex_t), real: mutex_trylock, kind: ObjectKind::Mutex, mode: MODE_EXCLUSIVE, hold: Hold::Exclusive);

/// Lean mode's `pthread_mutex_trylock`: the common engagement whole, with
/// no hook entered, as [`mutex_lock_lean`]'s.
unsafe extern "C-unwind" fn mutex_trylock_lean(
    m: *mut pthread_mutex_t,
    caller: usize,
    sp: usize,
) -> c_int {
    let try_once = real_or!(mutex_trylock, libc::EINVAL);
    if let Some(state) = HookGuard::could_enter() {
        if let Some(line) = recorder::lean_found_quickly(state, m as u64, Caller::new(caller, sp)) {
            // SAFETY: forwarding the caller's argument unchanged.
            let rc = unsafe { try_once(m) };
            if rc == 0 {
                recorder::lean_engaged_quickly(line);
            } else {
                mutex_trylock_lean_not_taken(line.prepared(), rc);
            }
            return rc;
        }
        if let Some(p) = recorder::lean_found_warm(state, m as u64, Caller::new(caller, sp)) {
            // SAFETY: forwarding the caller's argument unchanged.
            let rc = unsafe { try_once(m) };
            if rc == 0 {
                recorder::lean_acquired(&p);
            } else {
                mutex_trylock_lean_not_taken(p, rc);
            }
            return rc;
        }
    }
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { mutex_trylock_lean_general(m, caller, sp) }
}

/// Lean mode's quick trylock did not take the mutex: recorded as the
/// general way would.
#[cold]
fn mutex_trylock_lean_not_taken(p: recorder::Prepared, rc: c_int) {
    if let Some(guard) = HookGuard::enter() {
        crate::intercept::tried(&guard, &p, Hold::Lean, rc);
    }
}

trylock_handler!(mutex_trylock_lean_general(m: *mut pthread_mutex_t), real: mutex_trylock, kind: ObjectKind::Mutex, mode: MODE_EXCLUSIVE, hold: Hold::Lean);
unlock_handler!(mutex_unlock_full(m: *mut pthread_mutex_t) => mutex_unlock, kind: ObjectKind::Mutex);

/// The full mode's `pthread_mutex_unlock` while the process records under
/// full tracing (`LOCKSUIT_EVENTS=all`), where every hold is timed and so
/// no release is the quick one: recorded in full at once, in the hook (a
/// hold taken before tracing was switched on gets its release event too,
/// with no hold time). A call the guard turns away, and an unlock of a
/// mutex this thread does not hold, go the general way's out of line.
unsafe extern "C-unwind" fn mutex_unlock_traced(m: *mut pthread_mutex_t) -> c_int {
    let unlock = real_or!(mutex_unlock, 0);
    let recorded =
        HookGuard::enter_recording().is_some_and(|g| recorder::released_traced(&g, m as u64));
    if !recorded {
        released(
            m as u64,
            (
                ObjectKind::Mutex,
                mutex_unlock_traced as *const () as usize as u64,
            ),
        );
    }
    // SAFETY: forwarding the caller's argument unchanged.
    unsafe { unlock(m) }
}
unlock_handler!(
    /// The full mode's `pthread_mutex_unlock` while the process records and
    /// engagements are untimed ([`point_full_handlers`]): the common release
    /// tested for with no test of either.
    mutex_unlock_untimed(m: *mut pthread_mutex_t) => mutex_unlock, kind: ObjectKind::Mutex,
    quick: HookGuard::enter_recording, recorder::released_untimed_quickly);
