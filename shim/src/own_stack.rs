//! Running a piece of the shim's work on a stack of its own, for work that
//! needs more room than the program's stack may have left where it comes
//! up: a child made by glibc's `clone` runs on a stack of the program's
//! choosing, a few KiB in some (runc's is 4), and starting a trace takes
//! more than that.

use core::ffi::c_void;

/// Room for the work, and a guard page below it.
const STACK_LEN: usize = 128 * 1024;
const GUARD_LEN: usize = 4096;

/// Runs `work(arg)` on a fresh stack; false (and `work` not run) if no
/// memory could be had for one.
pub fn run(work: extern "C" fn(*mut c_void), arg: *mut c_void) -> bool {
    let len = STACK_LEN + GUARD_LEN;
    let Some(base) = crate::recorder::map_anonymous::<u8>(len) else {
        return false;
    };
    // SAFETY: the lowest page of our own fresh mapping: an overflow faults
    // there instead of running into whatever lies below.
    if unsafe { crate::sys::mprotect(base, GUARD_LEN, libc::PROT_NONE) }.is_err() {
        // SAFETY: the mapping made above, never used.
        unsafe { crate::sys::munmap(base, len) };
        return false;
    }
    // Page-aligned, so 16-aligned as a call needs.
    let top = base as usize + len;
    // SAFETY: `top` is the end of a fresh writable mapping that nothing
    // else uses; the old stack pointer is kept in a callee-saved register,
    // which `work` (a C-ABI function) preserves, and restored after it.
    // `work` cannot unwind (an `extern "C"` function aborts instead).
    unsafe {
        #[cfg(target_arch = "x86_64")]
        core::arch::asm!(
            "mov r12, rsp",
            "mov rsp, {top}",
            "call {work}",
            "mov rsp, r12",
            top = in(reg) top,
            work = in(reg) work,
            in("rdi") arg,
            out("r12") _,
            clobber_abi("C"),
        );
        #[cfg(target_arch = "aarch64")]
        core::arch::asm!(
            "mov x20, sp",
            "mov sp, {top}",
            "blr {work}",
            "mov sp, x20",
            top = in(reg) top,
            work = in(reg) work,
            in("x0") arg,
            out("x20") _,
            clobber_abi("C"),
        );
    }
    // SAFETY: the mapping made above, no longer in use.
    unsafe { crate::sys::munmap(base, len) };
    true
}
