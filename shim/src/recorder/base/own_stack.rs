//! Stacks of the shim's own, for work too deep for the program's.
//!
//! A hook runs on whatever stack the program called it on: a thread made
//! with a 16 KiB stack, a signal handler on a small alternate stack. The
//! shim's budget there is [`HOOK_STACK_BUDGET`]. Its deep work (creating
//! the trace, unwinding a new call site, reading symbol tables, taking a
//! snapshot) runs on one of these instead: each lane has its own (so no
//! thread ever waits for another's), and one more serves the work done
//! before a thread has a lane (starting the process's recording, which
//! the lifecycle makes one thread do at a time).
//!
//! The switch is a few instructions, no system call. Its frame carries
//! call frame information that leads back to the program's stack, so an
//! unwinder (the shim's own, for a new site's chain; a debugger; a
//! profiler) walks from here into the program's frames as if there had
//! been no switch. A signal that arrives meanwhile runs its handler on
//! this stack, which is why it is large (its pages are touched only as
//! used). Only on x86-64; elsewhere the work runs where it is called.

use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// Most bytes of the program's stack a hook or a handler of the shim uses
/// for its own frames, whatever it records (the real function's frames
/// come on top, as they would without the shim). `tests/c/small_stacks.c`
/// measures it.
pub const HOOK_STACK_BUDGET: usize = 2048;

/// Size of each of these stacks (address space; pages are touched as
/// used). The deepest work measured on one uses about 35 KiB (starting the
/// process's recording; a lane's deep work about 5 KiB); the rest is for a
/// signal handler that may run meanwhile.
const STACK_SIZE: usize = 256 * 1024;
/// Inaccessible pages below each stack: an overflow faults, never
/// overwrites.
const GUARD_SIZE: usize = 64 * 1024;

/// One stack, mapped the first time it is needed.
pub struct OwnStack {
    /// One past its highest byte (16-byte aligned), or null until mapped.
    top: AtomicPtr<u8>,
    /// Claimed by a thread on it (see [`OwnStack::run_claimed`]).
    busy: AtomicBool,
}

impl Default for OwnStack {
    fn default() -> Self {
        Self::new()
    }
}

impl OwnStack {
    pub const fn new() -> OwnStack {
        OwnStack {
            top: AtomicPtr::new(core::ptr::null_mut()),
            busy: AtomicBool::new(false),
        }
    }

    /// [`run`](OwnStack::run) for a stack any thread may want: the first
    /// claims it; another thread (or work nested in the claimer's) runs
    /// `work` where it is meanwhile.
    #[inline]
    pub fn run_claimed<R>(&self, work: impl FnOnce() -> R) -> R {
        if self.busy.swap(true, Ordering::Acquire) {
            return in_place(work);
        }
        let result = self.run(work);
        self.busy.store(false, Ordering::Release);
        result
    }

    /// In a fork child: a thread of the parent that had claimed the stack
    /// is not in the child.
    pub fn forget_claim(&self) {
        // Read first: a write would copy the page the flag is on.
        if self.busy.load(Ordering::Relaxed) {
            self.busy.store(false, Ordering::Relaxed);
        }
    }

    /// Runs `work` on this stack. Its user must be the only thread on it
    /// (a lane's stack: the lane's thread). Already on it (deep work nested
    /// in deep work), or if it cannot be mapped, `work` runs where it is.
    #[inline]
    pub fn run<R>(&self, work: impl FnOnce() -> R) -> R {
        let top = self.top.load(Ordering::Acquire);
        if top.is_null() {
            return self.run_first(work);
        }
        if !cfg!(target_arch = "x86_64") || on_stack(top) {
            return in_place(work);
        }
        switch_to(top, work)
    }

    #[cold]
    #[inline(never)]
    fn run_first<R>(&self, work: impl FnOnce() -> R) -> R {
        if !cfg!(target_arch = "x86_64") {
            return in_place(work);
        }
        let Some(base) = crate::recorder::base::mapped::map_anonymous_zeroed_in_child::<u8>(
            GUARD_SIZE + STACK_SIZE,
        ) else {
            return in_place(work);
        };
        // SAFETY: the lowest pages of our own fresh mapping become the
        // guard. Without it (refused), an overflow runs into whatever
        // lies below instead of faulting: the stack is still used, as the
        // program's would be.
        let _ = unsafe { crate::sys::mprotect(base, GUARD_SIZE, libc::PROT_NONE) };
        // SAFETY: one past the end of the mapping.
        let top = unsafe { base.add(GUARD_SIZE + STACK_SIZE) };
        // Only this stack's one user maps it: no race to lose.
        self.top.store(top, Ordering::Release);
        switch_to(top, work)
    }
}

/// Runs `work` where it is: already on an own stack, or none to be had.
/// Never inlined, so that a static look at the shim's frames can tell the
/// deep work that runs here from the hooks' own.
#[inline(never)]
fn in_place<R>(work: impl FnOnce() -> R) -> R {
    work()
}

/// Whether the calling code already runs on the stack below `top`.
#[inline(always)]
fn on_stack(top: *mut u8) -> bool {
    let here = stack_pointer();
    let top = top as usize;
    here < top && here >= top - STACK_SIZE
}

#[inline(always)]
fn stack_pointer() -> usize {
    let sp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads a register.
    unsafe {
        core::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    #[cfg(not(target_arch = "x86_64"))]
    {
        let here = 0u8;
        sp = core::ptr::addr_of!(here) as usize;
    }
    sp
}

/// Runs `work` with the stack pointer at `top`, and returns its result.
#[inline(never)]
fn switch_to<R, F: FnOnce() -> R>(top: *mut u8, work: F) -> R {
    struct Call<F, R> {
        work: Option<F>,
        result: Option<R>,
    }
    // `C-unwind`: a forced unwind (a cancellation acted on in a signal
    // handler) may cross the switch, as it crosses the hooks.
    unsafe extern "C-unwind" fn call<F: FnOnce() -> R, R>(data: *mut c_void) {
        // SAFETY: `data` is the `Call` below, alive until we return.
        let call = unsafe { &mut *data.cast::<Call<F, R>>() };
        if let Some(work) = call.work.take() {
            call.result = Some(work());
        }
    }
    let mut data = Call {
        work: Some(work),
        result: None,
    };
    let data_ptr: *mut Call<F, R> = &mut data;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `top` is the 16-byte aligned end of a mapped stack no other
    // code uses now; the trampoline restores the stack pointer and obeys
    // the C calling convention.
    unsafe {
        locksuit_on_own_stack(data_ptr.cast(), call::<F, R>, top)
    };
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: as above, without switching.
    unsafe {
        let _ = top;
        call::<F, R>(data_ptr.cast())
    };
    match data.result {
        Some(result) => result,
        // Unreachable: `call` ran `work` once.
        None => unreachable_result(),
    }
}

#[cold]
fn unreachable_result() -> ! {
    // SAFETY: `call` always stores the result before the trampoline returns.
    unsafe { core::hint::unreachable_unchecked() }
}

// The trampoline: saves the caller's stack pointer in rbp (callee-saved,
// so everything it calls preserves it), moves to the new stack, calls
// `work(data)` and comes back. Its call frame information says the
// caller's frame is at rbp, so unwinding crosses the switch.
#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".pushsection .text.locksuit_on_own_stack,\"ax\",@progbits",
    ".globl locksuit_on_own_stack",
    ".hidden locksuit_on_own_stack",
    ".type locksuit_on_own_stack,@function",
    ".p2align 4",
    "locksuit_on_own_stack:",
    ".cfi_startproc",
    "push %rbp",
    ".cfi_def_cfa_offset 16",
    ".cfi_offset %rbp, -16",
    "mov %rsp, %rbp",
    ".cfi_def_cfa_register %rbp",
    "mov %rdx, %rsp",
    "call *%rsi",
    "mov %rbp, %rsp",
    ".cfi_def_cfa_register %rsp",
    "pop %rbp",
    ".cfi_def_cfa_offset 8",
    "ret",
    ".cfi_endproc",
    ".size locksuit_on_own_stack, .-locksuit_on_own_stack",
    ".popsection",
    options(att_syntax)
);

#[cfg(target_arch = "x86_64")]
unsafe extern "C-unwind" {
    /// Calls `work(data)` with the stack pointer at `top`.
    fn locksuit_on_own_stack(
        data: *mut c_void,
        work: unsafe extern "C-unwind" fn(*mut c_void),
        top: *mut u8,
    );
}

/// The stack for work done before the calling thread has a lane, or for
/// the whole process: starting the recording (at the first hook, or in a
/// fork child at its first recorded operation), reading every thread's
/// figures at exit or exec. Claimed (see [`OwnStack::run_claimed`]).
pub static PROCESS: OwnStack = OwnStack::new();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_runs_on_the_own_stack_and_returns_its_result() {
        let stack = OwnStack::new();
        let outside = stack_pointer();
        let (inside, nested) = stack.run(|| (stack_pointer(), stack.run(stack_pointer)));
        let top = stack.top.load(Ordering::Acquire) as usize;
        if cfg!(target_arch = "x86_64") {
            assert!(inside < top && inside >= top - STACK_SIZE);
            assert!(!(outside < top && outside >= top - STACK_SIZE));
            // Nested work stays where it is, a little deeper.
            assert!(nested < inside && nested >= top - STACK_SIZE);
        }
        assert_eq!(stack.run(|| 41 + 1), 42);
    }

    #[test]
    fn an_unwinder_walks_from_the_own_stack_into_the_callers_frames() {
        #[inline(never)]
        fn marker_frame(stack: &OwnStack) -> Vec<usize> {
            let mut functions = Vec::new();
            stack.run(|| {
                // SAFETY: one walk at a time on this thread.
                unsafe {
                    backtrace::trace_unsynchronized(|frame| {
                        functions.push(frame.symbol_address() as usize);
                        true
                    })
                }
            });
            std::hint::black_box(functions)
        }
        let stack = OwnStack::new();
        let functions = marker_frame(&stack);
        if !cfg!(target_arch = "x86_64") {
            return;
        }
        let marker = marker_frame as *const () as usize;
        let at = functions.iter().position(|&f| f == marker);
        assert!(
            at.is_some(),
            "the walk crossed back to the caller: {} frames",
            functions.len()
        );
        // And it goes on to the test harness's frames beyond.
        assert!(functions.len() > at.unwrap_or(0) + 2, "{functions:x?}");
    }
}
