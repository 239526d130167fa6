//! Timing a blocking call (sleeps, polls, I/O) without reading the clock
//! when it did not block.
//!
//! A call is recorded only if its thread was switched out during it and
//! it took at least `LOCKSUIT_BLOCK_MIN_US`: a call that ran long in the
//! kernel without ever leaving its CPU (a 16 MB read from the page cache)
//! did not block. The kernel says whether a thread was switched out, for
//! free: glibc registers every thread for restartable sequences (rseq),
//! and whenever the kernel has switched a registered thread out (or
//! delivered it a signal) it looks, before the thread runs user code
//! again, at the area's critical-section pointer and clears it when the
//! thread is not inside that section. So the hook points it at a
//! descriptor of an empty section (no code is ever inside it) before the
//! call and looks after: still set, the thread was not switched out. That
//! costs a store, a few loads and compares; two `rdtsc` reads cost about
//! 20 ns here, 10 % of a 200 ns pipe call.
//!
//! A thread starts, and goes back to, timing each call with two clock
//! reads ("stamped"; the pointer, where it can be used, still decides
//! whether the call was switched out). After [`CALM_CALLS`] stamped calls
//! in a row that were not recorded, it takes a reference pair (monotonic
//! time, thread CPU time) and sets the pointer, which then stays set
//! across its calls until the kernel clears it ("free"): free calls read
//! no clock. From the reference to the switch the thread ran without a
//! break, so it was switched out at the reference time plus the CPU time
//! it used since, and was off its CPU from then to the end of the call.
//! Both are read after the call (a `rdtsc` and a
//! `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` system call), on the path that
//! has just paid for a context switch. A switch sends the thread back to
//! stamped: a thread whose calls keep blocking (a pipe ping-pong) would
//! otherwise pay for a new reference on every call.
//!
//! The kernel's behaviour is checked once per process, when the shim
//! starts (about 120 µs; calls made before, by other libraries'
//! constructors, do not decide it): glibc must have registered the thread
//! with the signature the descriptor carries (the kernel says EBUSY to a
//! second registration with the same area, length and signature, EPERM to
//! another signature; a descriptor with a wrong one would get the process
//! a SIGSEGV), a call that does not block must leave the pointer set, and
//! three sleeps that switched the thread out (by its switch count) must
//! each clear it. Each thread's own registration and signature are checked
//! before it first sets the pointer. Where any of that fails (no rseq,
//! another libc, another architecture, a kernel that no longer clears the
//! pointer on the way out of a system call, as the rseq rework planned
//! after 6.18 does), calls are stamped and a call counts as blocked if it
//! took that long, switched out or not. The trace says which way calls
//! were judged (`FLAG_CALLS_BY_SWITCHES`; the report's `block_detection`).
//!
//! Limits:
//! - CPU time leaves out what the kernel accounts apart: interrupts and
//!   softirqs on kernels built with `CONFIG_IRQ_TIME_ACCOUNTING`, time the
//!   host stole from a virtual machine. A free call's block is therefore
//!   believed only beyond a margin of 1/64 of the reference's age, so
//!   after a long stretch without a switch a short block may go
//!   unrecorded (the threshold is 50 µs + 16 µs per ms since the thread
//!   last ran without a break), and a thread whose own sends run a
//!   loopback network stack inline, on such a kernel, can still have its
//!   blocks seen longer than they were.
//! - The CPU time the thread used after it woke up is counted before the
//!   block, so the block is seen that much later and shorter.
//! - A signal handler that makes [`CALM_CALLS`] calls of its own during a
//!   free call takes a new reference; only the rest of that call's block
//!   is then seen.
//! - A thread that unregisters from rseq (and a `vfork` child, which
//!   shares its parent's area but is not registered) is seen as never
//!   switched out; the first is checked for before every free call, the
//!   second cannot be.

mod rseq;
#[cfg(test)]
mod tests;

pub use rseq::{init, switches_seen};

use crate::recorder::time::clock::Stamp;
use core::cell::Cell;
use rseq::{
    free_section, is_free, kernel_usable, read_slot, registered, slot, slot_known, stamped_section,
    write_slot, FREE_SECTIONS,
};

/// Stamped calls in a row that were not recorded before a thread goes
/// free. Going free and back costs two CPU-time system calls (about
/// 400 ns together), the price of about 24 stamped calls.
pub const CALM_CALLS: u32 = 64;

/// A free call's block must exceed the threshold by the reference's age
/// over this (see the module comment).
const AGE_MARGIN: u64 = 64;

/// Per-thread state, in [`crate::recorder::tables::thread_state::ThreadState`]: all zero
/// bits to start with.
pub struct TimerState {
    /// Stamped calls in a row that were not recorded.
    calm: Cell<u32>,
    /// Which free descriptor was set last.
    which: Cell<u8>,
    /// Whether glibc registered this thread with our signature:
    /// `UNCHECKED`, `SIGNED_AS_OURS` or `NOT_OURS`.
    signature: Cell<u8>,
    /// The reference taken when the pointer was set.
    wall: Cell<Stamp>,
    cpu_ns: Cell<u64>,
}

const UNCHECKED: u8 = 0;
const SIGNED_AS_OURS: u8 = 1;
const NOT_OURS: u8 = 2;

impl TimerState {
    pub const fn initial() -> TimerState {
        TimerState {
            calm: Cell::new(0),
            which: Cell::new(0),
            signature: Cell::new(UNCHECKED),
            wall: Cell::new(Stamp::ZERO),
            cpu_ns: Cell::new(0),
        }
    }

    #[cfg(test)]
    pub fn same_as(&self, other: &TimerState) -> bool {
        self.calm.get() == other.calm.get()
            && self.which.get() == other.which.get()
            && self.signature.get() == other.signature.get()
            && self.wall.get().ns() == other.wall.get().ns()
            && self.cpu_ns.get() == other.cpu_ns.get()
    }

    /// Whether the pointer may be set on this thread: the kernel was
    /// found usable and glibc registered the thread with our signature.
    fn may_set(&self, slot: *mut u64) -> bool {
        if rseq::taken_over() || !kernel_usable() || !registered(slot) {
            return false;
        }
        match self.signature.get() {
            SIGNED_AS_OURS => true,
            NOT_OURS => false,
            _ => match rseq::signature(rseq::area_of(slot)) {
                rseq::Signature::Ours => {
                    self.signature.set(SIGNED_AS_OURS);
                    true
                }
                rseq::Signature::Other => {
                    self.signature.set(NOT_OURS);
                    false
                }
                // Not this task's area (a vfork child shares its parent's
                // memory): nothing learnt about the thread that owns it.
                rseq::Signature::NotRegistered => false,
            },
        }
    }
}

/// One call being timed.
#[derive(Clone, Copy)]
pub enum CallTimer {
    /// The thread is free: `set` is the descriptor the pointer held at the
    /// start.
    Free { slot: *mut u64, set: u64 },
    /// Timed with a stamp on each side; `slot` is null if the pointer
    /// could not be set (then the time alone decides).
    Stamped { started: Stamp, slot: *mut u64 },
}

impl CallTimer {
    /// Before the call. `state` gives the calling thread's state, asked
    /// for only if the thread is not free.
    #[inline(always)]
    pub fn start(state: impl FnOnce() -> &'static TimerState) -> CallTimer {
        let slot = slot();
        let set = read_slot(slot);
        if is_free(set) && registered(slot) {
            return CallTimer::Free { slot, set };
        }
        start_stamped(state(), slot)
    }

    /// After the call: its blocked period (start and end, monotonic ns)
    /// if it blocked for at least `LOCKSUIT_BLOCK_MIN_US`. `state` gives
    /// the calling thread's state, asked for only if the call was switched
    /// out or is stamped.
    #[inline(always)]
    pub fn blocked(self, state: impl FnOnce() -> &'static TimerState) -> Option<(u64, u64)> {
        if let CallTimer::Free { slot, set } = self {
            if read_slot(slot) == set {
                return None;
            }
        }
        self.blocked_slowly(state(), crate::config::block_min_ns())
    }

    #[inline(never)]
    fn blocked_slowly(self, state: &TimerState, min_ns: u64) -> Option<(u64, u64)> {
        match self {
            CallTimer::Free { .. } => switched(state, min_ns),
            CallTimer::Stamped { started, slot } => stamped(state, started, slot, min_ns),
        }
    }
}

/// A stamped call's start: the pointer set, where it may be.
#[inline(never)]
fn start_stamped(state: &TimerState, slot: *mut u64) -> CallTimer {
    let slot = if slot_known() && state.may_set(slot) {
        write_slot(slot, stamped_section());
        slot
    } else {
        core::ptr::null_mut()
    };
    CallTimer::Stamped {
        started: Stamp::now(),
        slot,
    }
}

/// A free call that was switched out (or met a signal).
#[cold]
fn switched(state: &TimerState, min_ns: u64) -> Option<(u64, u64)> {
    let ended = Stamp::now().ns();
    // If a signal handler's call set the pointer again, the reference is
    // that call's: only the part of the block after it is seen.
    let since = state.wall.get().ns();
    let age = ended.saturating_sub(since);
    // The thread cannot have been off its CPU longer than this.
    if age < min_ns {
        return None;
    }
    // None: the CPU clock started again (a child of a raw fork), or the
    // program is confined and the clock cannot be read.
    let used = crate::sys::own_cpu_ns()?.checked_sub(state.cpu_ns.get())?;
    let switched_out = since.saturating_add(used).min(ended);
    let block = ended - switched_out;
    (block >= min_ns + age / AGE_MARGIN).then_some((switched_out, ended))
}

/// A stamped call: recorded if it was switched out and took long enough,
/// else counted towards going free.
fn stamped(state: &TimerState, started: Stamp, slot: *mut u64, min_ns: u64) -> Option<(u64, u64)> {
    let ended = Stamp::now();
    let switched_out = slot.is_null() || read_slot(slot) != stamped_section();
    if !switched_out {
        // Cleared, so that a call this one interrupts (from a signal
        // handler) does not find the value it set itself and take it for
        // "not switched out".
        write_slot(slot, 0);
    }
    if switched_out && started.at_least(ended, min_ns) {
        state.calm.set(0);
        return Some((started.ns(), ended.ns()));
    }
    let calm = state.calm.get() + 1;
    state.calm.set(calm);
    if calm >= CALM_CALLS {
        go_free(state);
    }
    None
}

/// Takes a reference and sets the pointer, if the kernel and this thread
/// allow it.
#[cold]
#[inline(never)]
fn go_free(state: &TimerState) {
    // Reset first: a signal handler's calls during a free call must make
    // CALM_CALLS calls of their own before they can set a new reference.
    state.calm.set(0);
    // The first time, this tests the kernel (and sets where the slot is).
    if !kernel_usable() {
        return;
    }
    let slot = slot();
    if !state.may_set(slot) {
        return;
    }
    let which = state.which.get().wrapping_add(1) % FREE_SECTIONS as u8;
    let set = free_section(which);
    write_slot(slot, set);
    let wall = Stamp::now();
    let Some(cpu_ns) = crate::sys::own_cpu_ns() else {
        write_slot(slot, 0);
        return; // confined: no reference to be had; stay stamped
    };
    if read_slot(slot) != set {
        return; // switched meanwhile: the reference may be late; stay stamped
    }
    state.which.set(which);
    state.wall.set(wall);
    state.cpu_ns.set(cpu_ns);
}

/// The program is about to make an rseq system call of its own (register
/// an area, maybe glibc's with another signature, or unregister one): the
/// pointer is never set again, and this thread's is cleared first if it
/// holds one of ours. Other threads' areas stay glibc's until they make
/// such a call themselves, which clears theirs.
pub fn rseq_taken_over() {
    rseq::take_over();
    if slot_known() {
        let slot = slot();
        let set = read_slot(slot);
        if is_free(set) || set == stamped_section() {
            write_slot(slot, 0);
        }
    }
}

/// In a fork child: the reference's CPU time is the parent thread's, so
/// the thread starts stamped again.
pub fn forget_in_child(state: &TimerState) {
    rseq::forget_test_in_child();
    let slot = slot();
    let set = read_slot(slot);
    if is_free(set) || set == stamped_section() {
        write_slot(slot, 0);
    }
    state.calm.set(0);
}
