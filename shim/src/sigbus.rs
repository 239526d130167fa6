//! SIGBUS, for a trace file cut under the program. The shim writes its
//! trace through a shared mapping of the file; if someone truncates the
//! file while the program runs (`: > trace`, logrotate's copytruncate, a
//! cleanup job), the next store into a lost page raises SIGBUS, which
//! would kill a program that never touched the file.
//!
//! So the shim keeps a SIGBUS handler of its own installed. A fault in the
//! trace's mapping is repaired (see `recorder::trace::file::repair_cut`) and the
//! store retried. Anything else belongs to the program, whose own action
//! `sigaction` and `signal` set and report as if ours were not there: its
//! handler is called as the kernel would call it (its mask added, reset
//! first if it asked for `SA_RESETHAND`); with the default action the
//! default is put in place and the fault retried (or a sent signal sent
//! again), so the program dies of it as it would have; an ignored one is
//! ignored, unless it is a fault, which the kernel never lets a program
//! ignore.

use crate::real::real;
use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// The program's own SIGBUS action, in two slots: a writer fills the one
/// not in use and flips [`CURRENT`], so the handler always reads a whole
/// action without a lock (a lock could be held by the thread it
/// interrupted).
struct Actions(UnsafeCell<[libc::sigaction; 2]>);
// SAFETY: see the type's comment; writers are serialised by `WRITING`.
unsafe impl Sync for Actions {}

// SAFETY: all zero bits is a valid sigaction (SIG_DFL, no flags, no mask).
static PROGRAM: Actions = Actions(UnsafeCell::new(unsafe { core::mem::zeroed() }));
static CURRENT: AtomicU32 = AtomicU32::new(0);
static WRITING: AtomicBool = AtomicBool::new(false);
/// Our handler is installed and the program's action kept aside.
static WATCHING: AtomicBool = AtomicBool::new(false);

fn program_action() -> libc::sigaction {
    // SAFETY: the slot CURRENT names is not written (see `Actions`).
    unsafe { (*PROGRAM.0.get())[CURRENT.load(Ordering::Acquire) as usize & 1] }
}

fn set_program_action(action: &libc::sigaction) {
    while WRITING
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        core::hint::spin_loop();
    }
    let next = (CURRENT.load(Ordering::Relaxed) + 1) & 1;
    // SAFETY: the slot not in use; only the writer holding WRITING writes.
    unsafe { (*PROGRAM.0.get())[next as usize] = *action };
    CURRENT.store(next, Ordering::Release);
    WRITING.store(false, Ordering::Release);
}

fn real_sigaction(action: &libc::sigaction, old: *mut libc::sigaction) -> bool {
    let Some(f) = real().and_then(|fns| crate::real::Entry::function(fns.sigaction)) else {
        return false;
    };
    // SAFETY: valid pointers; SIGBUS accepts any action.
    unsafe { f(libc::SIGBUS, action, old) == 0 }
}

fn ours() -> libc::sigaction {
    // SAFETY: all zero bits is a valid sigaction; filled in below.
    let mut action: libc::sigaction = unsafe { core::mem::zeroed() };
    action.sa_sigaction = on_sigbus as extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void)
        as libc::sighandler_t;
    // On the program's alternate stack if it has one: a store in a thread
    // whose stack overflowed is not ours to die of either.
    action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
    action
}

/// Installs our handler, keeping the program's action (at start-up; after
/// a fork the child inherits both).
pub fn install() {
    // SAFETY: all zero bits is a valid sigaction.
    let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
    if real_sigaction(&ours(), &mut old) {
        set_program_action(&old);
        WATCHING.store(true, Ordering::Release);
    }
}

/// Whether the hook for `sigaction`/`signal` on SIGBUS answers for the
/// program (our handler is installed).
pub fn watching(sig: c_int) -> bool {
    sig == libc::SIGBUS && WATCHING.load(Ordering::Acquire)
}

/// `sigaction(SIGBUS, act, old)` as the program sees it: its own action is
/// reported and kept; ours stays installed. Always succeeds, as the real
/// call does for SIGBUS.
///
/// # Safety
/// `act` and `old` are null or valid, as for `sigaction`.
pub unsafe fn program_sigaction(act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    let before = program_action();
    if !act.is_null() {
        // SAFETY: the caller passes a valid action, as for the real call.
        set_program_action(unsafe { &*act });
    }
    if !old.is_null() {
        // SAFETY: the caller passes a valid place for the old action.
        unsafe { *old = before };
    }
    0
}

/// `signal(SIGBUS, handler)` as the program sees it: glibc's `signal`
/// installs with `SA_RESTART` (BSD semantics) and returns the handler
/// before.
pub fn program_signal(handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: all zero bits is a valid sigaction.
    let mut act: libc::sigaction = unsafe { core::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = libc::SA_RESTART;
    let mut old: libc::sigaction = program_action();
    // SAFETY: both point at locals.
    unsafe { program_sigaction(&act, &mut old) };
    old.sa_sigaction
}

/// Whether a SIGBUS with this code is a fault that happens again when the
/// faulting instruction is retried.
fn refaults(code: c_int) -> bool {
    const BUS_ADRALN: c_int = 1;
    const BUS_ADRERR: c_int = 2;
    const BUS_OBJERR: c_int = 3;
    const BUS_MCEERR_AR: c_int = 4;
    matches!(code, BUS_ADRALN | BUS_ADRERR | BUS_OBJERR | BUS_MCEERR_AR)
}

extern "C" fn on_sigbus(sig: c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let _errno = crate::diag::ErrnoGuard::save();
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    let fault = refaults(code);
    if fault && crate::recorder::trace::file::repair_cut(addr) {
        return; // the store is retried, into the file grown back
    }
    let action = program_action();
    match action.sa_sigaction {
        libc::SIG_IGN if !fault => {}
        libc::SIG_DFL | libc::SIG_IGN => {
            // The default in place: a fault retried, or a sent signal sent
            // again (delivered once this handler returns), ends the
            // program as it would have ended.
            // SAFETY: all zero bits is SIG_DFL with no flags and no mask.
            real_sigaction(&unsafe { core::mem::zeroed() }, core::ptr::null_mut());
            if !fault {
                let _ = crate::sys::requeue_to_self(sig, info);
            }
        }
        handler => call_program_handler(handler, &action, (sig, info, context)),
    }
}

/// Calls the program's handler as the kernel would have: with its mask
/// added to the blocked set (SIGBUS itself is already blocked, as it is
/// for any handler without `SA_NODEFER`), after resetting the action if it
/// asked for `SA_RESETHAND`.
fn call_program_handler(
    handler: libc::sighandler_t,
    action: &libc::sigaction,
    (sig, info, context): (c_int, *mut libc::siginfo_t, *mut libc::c_void),
) {
    if action.sa_flags & libc::SA_RESETHAND != 0 {
        // SAFETY: all zero bits is SIG_DFL with no flags and no mask.
        set_program_action(&unsafe { core::mem::zeroed() });
    }
    let before = crate::sys::block_signals(&action.sa_mask);
    if action.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the program installed this as an SA_SIGINFO handler.
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { core::mem::transmute(handler) };
        f(sig, info, context);
    } else {
        // SAFETY: the program installed this as a plain handler.
        let f: extern "C" fn(c_int) = unsafe { core::mem::transmute(handler) };
        f(sig);
    }
    if let Some(before) = before {
        crate::sys::set_signal_mask(&before);
    }
}
