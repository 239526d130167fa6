//! Processes the program makes without glibc's `fork`, so with none of its
//! fork handlers (ours included): glibc's `clone`, `_Fork` and `vfork`, and
//! the `clone`, `clone3`, `fork` and `vfork` system calls made through
//! `syscall` (systemd, bubblewrap and Chromium start processes so). A child
//! with a copy of the memory starts its own trace, as after `fork`; one
//! that borrows the parent's memory and thread until it execs or exits
//! (vfork) records nothing. See `lifecycle::NewTask`.

use crate::lifecycle::{self, NewTask};
use crate::real::{real, CloneStart};
use core::ffi::{c_int, c_long, c_void};
use libc::pid_t;

/// The result of a call whose real function cannot be had: what a missing
/// function would mean.
fn enosys<R: From<i8>>() -> R {
    // SAFETY: errno is this thread's own.
    unsafe { *libc::__errno_location() = libc::ENOSYS };
    R::from(-1)
}

/// Runs `clone`, which makes `task` and returns 0 in the child and
/// anything else in the parent (or on failure), with the shim's part done
/// on each side.
pub(super) fn cloned<R: PartialEq + From<i8>>(task: NewTask, clone: impl FnOnce() -> R) -> R {
    if task == NewTask::Alongside || !lifecycle::cloning() {
        return clone();
    }
    let rc = clone();
    if rc != R::from(0) {
        lifecycle::cloned_in_parent();
    } else if task == NewTask::Copy {
        lifecycle::cloned_in_child();
    }
    // A borrowing child keeps this thread's mark: its hooks pass through
    // until the parent, which waits for it, goes on and clears it.
    rc
}

/// The task a `clone3` system call with arguments at `args` (`size` bytes)
/// makes, read without faulting: bad arguments are the kernel's to refuse.
pub(super) fn clone3_task(args: c_long, size: c_long) -> NewTask {
    let mut flags = [0u8; 8];
    if args == 0 || size < 8 || !crate::sys::read_own_memory(args as u64, &mut flags) {
        return NewTask::Alongside;
    }
    NewTask::of(u64::from_ne_bytes(flags))
}

/// What the child of a copying `clone` runs first, on its own stack.
struct ChildStart {
    start: CloneStart,
    arg: *mut c_void,
}

/// Variadic in C: the three words after `arg` are read only as `flags`
/// asks, and passed on as the caller left them.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn clone(
    start: CloneStart,
    stack: *mut c_void,
    flags: c_int,
    arg: *mut c_void,
    parent_tid: *mut pid_t,
    tls: *mut c_void,
    child_tid: *mut pid_t,
) -> c_int {
    let Some(real_clone) = real().and_then(|f| f.clone) else {
        return enosys();
    };
    let task = NewTask::of(u64::from(flags as u32));
    if task == NewTask::Alongside || !lifecycle::cloning() {
        // SAFETY: forwarding the caller's arguments unchanged.
        return unsafe { real_clone(start, stack, flags, arg, parent_tid, tls, child_tid) };
    }
    let first = ChildStart { start, arg };
    let (start, arg) = match task {
        // The child finds `first` in its copy of this frame.
        NewTask::Copy => (
            child_starts as CloneStart,
            (&raw const first).cast_mut().cast(),
        ),
        _ => (start, arg),
    };
    // SAFETY: the caller's arguments, the start routine and its argument
    // perhaps ours, which call the caller's.
    let rc = unsafe { real_clone(start, stack, flags, arg, parent_tid, tls, child_tid) };
    // Only the parent returns: the child runs `start` and exits.
    lifecycle::cloned_in_parent();
    rc
}

/// The child of a copying `clone`, on the caller's stack for it, which may
/// be small: it lets go of the parent's trace (its own is made when it
/// first records, on a stack of the shim's, see `lifecycle::recording`),
/// then runs the caller's start routine, whose return glibc ends the child
/// with (the exit system call, on its one thread: the process's end).
extern "C" fn child_starts(first: *mut c_void) -> c_int {
    // SAFETY: `first` is the parent's `ChildStart`, in this child's copy of
    // the parent's frame (see `clone`).
    let ChildStart { start, arg } = unsafe { core::ptr::read(first.cast::<ChildStart>()) };
    lifecycle::cloned_in_child();
    let status = start(arg);
    // Still on the caller's stack, which may be small.
    crate::recorder::on_process_stack(|| lifecycle::thread_exiting(status));
    status
}

/// `_Fork` (glibc 2.34): `fork` without the fork handlers, ours included.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn _Fork() -> pid_t {
    let Some(fork) = real().and_then(|f| f.fork_without_handlers) else {
        return enosys();
    };
    // SAFETY: no arguments; the real call.
    cloned(NewTask::Copy, || unsafe { fork() })
}

/// `vfork`: the child borrows this thread (its stack and its state) until
/// it execs or exits, while the parent waits, so no frame of ours may be
/// live across the real call: a trampoline keeps the caller's return
/// address in this thread's state ([`vfork_prepare`]), calls the real
/// `vfork` in the caller's place, and when it returns (first in the child,
/// then in the parent) goes back to the caller ([`vfork_returned`]). The
/// child's hooks pass through (see [`cloned`]). x86_64 only: elsewhere
/// `vfork` is not interposed, and a vfork child's locks are recorded as its
/// parent thread's.
#[cfg(target_arch = "x86_64")]
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn vfork() -> pid_t {
    core::arch::naked_asm!(
        // The caller's return address to vfork_prepare, rsp 16-aligned.
        "sub rsp, 8",
        "mov rdi, [rsp + 8]",
        "call {prepare}",
        "add rsp, 8",
        // rax: the real vfork; rdx: whether the return address is kept.
        "test rdx, rdx",
        "jz 2f",
        // Called in the caller's place: the real vfork keeps its return
        // address in a register across the system call, never on the
        // stack the child may overwrite.
        "add rsp, 8",
        "call rax",
        // Returns twice, into the caller's stack as after a return: the
        // child's result, then (once the child exec'd or exited) the
        // parent's.
        "push rax",
        "sub rsp, 8",
        "mov edi, eax",
        "call {returned}",
        "add rsp, 8",
        "mov rcx, rax",
        "pop rax",
        "jmp rcx",
        // Not kept: the real vfork returns to the caller itself.
        "2:",
        "jmp rax",
        prepare = sym vfork_prepare,
        returned = sym vfork_returned,
    );
}

/// The real `vfork` to call, and whether the trampoline keeps `ret`.
#[cfg(target_arch = "x86_64")]
#[repr(C)]
struct VforkPlan {
    real: usize,
    keep: usize,
}

#[cfg(target_arch = "x86_64")]
extern "C" fn vfork_prepare(ret: usize) -> VforkPlan {
    let real = match real().and_then(|f| f.vfork) {
        Some(f) => f as usize,
        None => missing_vfork as *const () as usize,
    };
    // A vfork inside another (a vfork child's): the outer one keeps its
    // return address, and the real call returns to its caller itself.
    let keep = lifecycle::cloning();
    if keep {
        crate::guard::ThreadState::with(|s| s.set_vfork_return(ret));
    }
    VforkPlan {
        real,
        keep: usize::from(keep),
    }
}

/// `vfork` returned `pid` (0: in the child); where to return to.
#[cfg(target_arch = "x86_64")]
extern "C" fn vfork_returned(pid: pid_t) -> usize {
    if pid != 0 {
        lifecycle::cloned_in_parent();
    }
    crate::guard::ThreadState::with(|s| s.vfork_return())
}

#[cfg(target_arch = "x86_64")]
extern "C" fn missing_vfork() -> pid_t {
    enosys()
}
