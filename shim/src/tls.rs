//! Where each thread's [`ThreadState`] lives.
//!
//! Rust's `thread_local!` in a shared library uses the general-dynamic TLS
//! model: every access calls `__tls_get_addr` (11 instructions and a call,
//! twice per lock/unlock pair). A preloaded library is loaded at start-up,
//! so its TLS can sit in the static block that every thread gets at
//! creation, and be reached with the initial-exec model: the thread pointer
//! plus a fixed offset the loader writes into the GOT. Stable Rust has no
//! attribute for that, so on x86_64 the state is a `.tbss` block declared
//! here and reached with the two-instruction initial-exec sequence. A
//! `.tbss` block starts as zero bits in every thread, which is exactly
//! [`ThreadState::initial`] (a test checks). Elsewhere `thread_local!` serves.
//!
//! The cost of this choice: the library can no longer be `dlopen`ed late
//! into a process whose static TLS block is full. It is meant for
//! `LD_PRELOAD` or linking, where it never is.

use crate::guard::ThreadState;

#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 6",
    ".globl locksuit_thread_state",
    ".hidden locksuit_thread_state",
    ".type locksuit_thread_state, @object",
    ".size locksuit_thread_state, {size}",
    "locksuit_thread_state:",
    ".zero {size}",
    ".popsection",
    size = const core::mem::size_of::<ThreadState>(),
);

/// The calling thread's state.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn thread_state() -> &'static ThreadState {
    let state: usize;
    // SAFETY: fs:0 holds the thread pointer and the GOT slot the thread's
    // offset to our .tbss block, sized and aligned for a ThreadState whose
    // zero bits are its initial value. The block lives as long as the
    // thread, and the reference never leaves it (HookGuard is !Send).
    unsafe {
        core::arch::asm!(
            "mov {state}, qword ptr fs:[0]",
            "add {state}, qword ptr [rip + locksuit_thread_state@GOTTPOFF]",
            state = out(reg) state,
            options(pure, readonly, nostack),
        );
        &*(state as *const ThreadState)
    }
}

#[cfg(not(target_arch = "x86_64"))]
thread_local! {
    static STATE: ThreadState = const { ThreadState::initial() };
}

/// The calling thread's state.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub fn thread_state() -> &'static ThreadState {
    // SAFETY: the thread-local has no destructor, so it lives as long as the
    // thread; the reference never leaves the thread (HookGuard is !Send).
    STATE.with(|s| unsafe { &*(s as *const ThreadState) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_initial_state_is_all_zero_bits() {
        // SAFETY: every field is a Cell/UnsafeCell of integers, bools and
        // raw pointers, for which zero bits are valid values.
        let zeroed: ThreadState = unsafe { core::mem::MaybeUninit::zeroed().assume_init() };
        let initial = ThreadState::initial();
        assert!(zeroed.same_as(&initial));
        // And a fresh thread's state is that value.
        let fresh = std::thread::spawn(|| thread_state().same_as(&ThreadState::initial()))
            .join()
            .unwrap();
        assert!(fresh);
    }
}
