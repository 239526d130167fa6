//! Timing a blocking call (sleeps, polls, I/O) without reading the clock
//! when it did not block.
//!
//! A call is worth recording only if its thread was off its CPU for at
//! least `LOCKSUIT_BLOCK_MIN_US`, and a thread that blocks is switched
//! out. The kernel says so for free: glibc registers every thread for
//! restartable sequences (rseq), and whenever the kernel has switched a
//! registered thread out (or delivered it a signal) it looks, before the
//! thread runs user code again, at the area's critical-section pointer and
//! clears it when the thread is not inside that section. So the hook
//! points it at a descriptor of an empty section (no code is ever inside
//! it) before the call and looks after: still set, the call did not block.
//! That costs a store, two loads and a compare; two `rdtsc` reads cost
//! about 20 ns here, 10 % of a 200 ns pipe call.
//!
//! The time a call blocked is then worked out only for the calls that were
//! switched out. The thread keeps a reference pair (monotonic time, thread
//! CPU time) taken when the pointer was set, and the pointer stays set
//! across calls until the kernel clears it, so from the reference to the
//! switch the thread ran without a break: it was switched out at the
//! reference time plus the CPU time it used since, and blocked from then
//! to the end of the call. Both ends of that are read after the call
//! (a `rdtsc` and a `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` system call),
//! on the path that has just paid for a context switch.
//!
//! A thread starts, and goes back to, timing each call with two clock
//! reads ("stamped"): after a switch (a blocked call, a preemption) its
//! reference is gone, and a thread whose calls keep blocking (a pipe
//! ping-pong) would pay for a new reference on every call. After
//! [`CALM_CALLS`] stamped calls in a row that did not block, it takes a
//! reference and sets the pointer ("free").
//!
//! The kernel's behaviour is checked once per process before any thread
//! goes free: glibc must have registered the thread with the signature
//! the descriptor carries (asked of the kernel, which says EBUSY to a
//! second registration with the same area, length and signature, EPERM to
//! another signature; a descriptor with a wrong one would get the process
//! a SIGSEGV), a call that does not block must leave the pointer set, and
//! a sleep must clear it. Where any of that fails (no rseq, another libc,
//! another architecture, a kernel that stops clearing the pointer on the
//! way out of a system call), every call stays stamped, as before.
//!
//! Limits: the reference drifts from the monotonic clock by the two
//! clocks' rate difference (about 7 ppm here: 7 µs after a second of
//! uninterrupted running); a host that steals the CPU from the virtual
//! machine after the reference makes a blocked call look longer by the
//! time stolen; and a signal handler that makes [`CALM_CALLS`] calls of
//! its own while the interrupted call blocked takes a new reference, after
//! which only the rest of that call's block is seen.

use super::clock::Stamp;
use core::cell::Cell;
use core::sync::atomic::{AtomicIsize, AtomicU8, Ordering};

/// Stamped calls in a row that did not block before a thread goes free.
/// Going free and back costs two CPU-time system calls (about 400 ns
/// together), the price of about 24 stamped calls.
pub const CALM_CALLS: u32 = 64;

/// glibc's rseq signature on x86_64 (`RSEQ_SIG`).
const RSEQ_SIGNATURE: u32 = 0x5305_3053;
/// Offset of `rseq_cs` in `struct rseq`.
const RSEQ_CS_FIELD: isize = 8;
/// Offset of `cpu_id` in `struct rseq`: negative while not registered.
const CPU_ID_FIELD: isize = 4;

/// The signature word the kernel checks before an abort address, and the
/// address after it (which is never jumped to: the section is empty).
#[repr(C)]
struct Signed {
    signature: u32,
    after: u32,
}

static SIGNED: Signed = Signed {
    signature: RSEQ_SIGNATURE,
    after: 0,
};

/// `struct rseq_cs`: version 0, no flags, a section of no bytes at
/// `SIGNED.after`, aborting there.
#[repr(C, align(32))]
struct EmptySection {
    version: u32,
    flags: u32,
    start_ip: *const u32,
    post_commit_offset: u64,
    abort_ip: *const u32,
}

// SAFETY: immutable, and the pointers are only ever read as addresses.
unsafe impl Sync for EmptySection {}

const fn empty_section() -> EmptySection {
    EmptySection {
        version: 0,
        flags: 0,
        start_ip: &SIGNED.after,
        post_commit_offset: 0,
        abort_ip: &SIGNED.after,
    }
}

/// Two descriptors, used in turn: a call that finds on return another
/// one than it set knows a signal handler's call set it meanwhile.
#[repr(C, align(64))]
struct Sections([EmptySection; 2]);

static SECTIONS: Sections = Sections([empty_section(), empty_section()]);

fn section(which: u8) -> u64 {
    &SECTIONS.0[(which & 1) as usize] as *const EmptySection as u64
}

/// Whether `value` (the critical-section pointer) is one of ours.
#[inline(always)]
fn is_ours(value: u64) -> bool {
    value & !32 == &SECTIONS as *const Sections as u64
}

/// `__rseq_offset + 8`: where, from the thread pointer, the critical
/// section pointer is. 0 until the kernel's behaviour was checked, which
/// makes the check read the thread pointer's own first word (never ours).
static SLOT_OFFSET: AtomicIsize = AtomicIsize::new(0);

const UNTESTED: u8 = 0;
const TESTING: u8 = 1;
const USABLE: u8 = 2;
const UNUSABLE: u8 = 3;
static KERNEL: AtomicU8 = AtomicU8::new(UNTESTED);
/// `__rseq_offset` and `__rseq_size`, found at start ([`init`]).
static RSEQ_OFFSET: AtomicIsize = AtomicIsize::new(0);
static RSEQ_SIZE: AtomicIsize = AtomicIsize::new(0);

/// Finds glibc's rseq area (glibc 2.35 and later export where it is).
/// Called once at process start; the kernel is tested later, when a
/// thread first could go free.
pub fn init() {
    // SAFETY: dlsym with a NUL-terminated name; the symbols, where glibc
    // has them, are a ptrdiff_t and an unsigned int that never change.
    unsafe {
        let offset = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr());
        let size = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr());
        if offset.is_null() || size.is_null() {
            return;
        }
        RSEQ_OFFSET.store(*(offset as *const isize), Ordering::Relaxed);
        RSEQ_SIZE.store(*(size as *const u32) as isize, Ordering::Relaxed);
    }
}

/// The calling thread's thread pointer.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn thread_pointer() -> isize {
    let tp: isize;
    // SAFETY: fs:0 holds the thread pointer on x86_64 Linux.
    unsafe {
        core::arch::asm!(
            "mov {tp}, qword ptr fs:[0]",
            tp = out(reg) tp,
            options(pure, readonly, nostack, preserves_flags),
        );
    }
    tp
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn thread_pointer() -> isize {
    // Never used to write: the kernel is never found usable elsewhere.
    &SIGNED as *const Signed as isize
}

/// The calling thread's critical-section pointer (or, before the check,
/// a word that is never one of ours).
#[inline(always)]
fn slot() -> *mut u64 {
    (thread_pointer() + SLOT_OFFSET.load(Ordering::Relaxed)) as *mut u64
}

#[inline(always)]
fn read_slot(slot: *mut u64) -> u64 {
    // SAFETY: the slot is in this thread's TCB or rseq area, which lives
    // as long as the thread; the kernel writes it only while this thread
    // is not running user code.
    unsafe { core::ptr::read_volatile(slot) }
}

fn write_slot(slot: *mut u64, value: u64) {
    // SAFETY: as in `read_slot`; written only once the area was found
    // registered, with a descriptor the kernel accepts.
    unsafe { core::ptr::write_volatile(slot, value) }
}

/// Per-thread state, in [`super::thread_state::ThreadState`]: all zero
/// bits to start with.
pub struct TimerState {
    /// Stamped calls in a row that did not block.
    calm: Cell<u32>,
    /// Which descriptor was set last (0 or 1).
    which: Cell<u8>,
    /// The reference taken when the pointer was set.
    wall: Cell<Stamp>,
    cpu_ns: Cell<u64>,
}

impl TimerState {
    pub const fn initial() -> TimerState {
        TimerState {
            calm: Cell::new(0),
            which: Cell::new(0),
            wall: Cell::new(Stamp::ZERO),
            cpu_ns: Cell::new(0),
        }
    }

    #[cfg(test)]
    pub fn same_as(&self, other: &TimerState) -> bool {
        self.calm.get() == other.calm.get()
            && self.which.get() == other.which.get()
            && self.wall.get().ns() == other.wall.get().ns()
            && self.cpu_ns.get() == other.cpu_ns.get()
    }
}

/// One call being timed.
#[derive(Clone, Copy)]
pub enum CallTimer {
    /// The thread is free: `set` is the descriptor the pointer held at the
    /// start.
    Free { slot: *mut u64, set: u64 },
    /// Timed with a stamp on each side.
    Stamped(Stamp),
}

impl CallTimer {
    /// Before the call.
    #[inline(always)]
    pub fn start() -> CallTimer {
        let slot = slot();
        let set = read_slot(slot);
        if is_ours(set) {
            CallTimer::Free { slot, set }
        } else {
            CallTimer::Stamped(Stamp::now())
        }
    }

    /// After the call: its blocked period (start and end, monotonic ns)
    /// if the thread was off its CPU for at least `LOCKSUIT_BLOCK_MIN_US`
    /// during it. `state` gives the calling thread's state, asked for only
    /// if the call was switched out or is stamped.
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
            CallTimer::Stamped(started) => stamped(state, started, min_ns),
        }
    }
}

/// A free call that was switched out (or met a signal).
#[cold]
fn switched(state: &TimerState, min_ns: u64) -> Option<(u64, u64)> {
    let ended = Stamp::now().ns();
    // If a signal handler's call set the pointer again, the reference is
    // that call's: only the part of the block after it is seen.
    let since = state.wall.get().ns();
    // The thread cannot have been off its CPU longer than this.
    if ended.saturating_sub(since) < min_ns {
        return None;
    }
    let used = crate::sys::thread_cpu_ns().saturating_sub(state.cpu_ns.get());
    let switched_out = since.saturating_add(used).min(ended);
    (ended - switched_out >= min_ns).then_some((switched_out, ended))
}

/// A stamped call: counted towards going free if it did not block.
#[inline]
fn stamped(state: &TimerState, started: Stamp, min_ns: u64) -> Option<(u64, u64)> {
    let ended = Stamp::now();
    if started.at_least(ended, min_ns) {
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
    if !kernel_usable() {
        return;
    }
    let slot = slot();
    // SAFETY: the rseq area is in this thread's TCB, registered or not.
    let cpu_id = unsafe {
        core::ptr::read_volatile((slot as isize - RSEQ_CS_FIELD + CPU_ID_FIELD) as *const i32)
    };
    if cpu_id < 0 {
        return; // this thread is not registered
    }
    let which = state.which.get() ^ 1;
    let set = section(which);
    write_slot(slot, set);
    let wall = Stamp::now();
    let cpu_ns = crate::sys::thread_cpu_ns();
    if read_slot(slot) != set {
        return; // switched meanwhile: the reference may be late; stay stamped
    }
    state.which.set(which);
    state.wall.set(wall);
    state.cpu_ns.set(cpu_ns);
}

/// Whether the kernel clears the pointer as this module needs; checked
/// once per process, by the first thread that gets here.
fn kernel_usable() -> bool {
    match KERNEL.load(Ordering::Acquire) {
        USABLE => true,
        UNTESTED => test_kernel(),
        _ => false,
    }
}

#[cold]
fn test_kernel() -> bool {
    if KERNEL
        .compare_exchange(UNTESTED, TESTING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return false; // another thread is testing: stay stamped for now
    }
    let usable = kernel_clears_the_pointer();
    KERNEL.store(if usable { USABLE } else { UNUSABLE }, Ordering::Release);
    usable
}

/// The check described in the module comment, on the calling thread.
fn kernel_clears_the_pointer() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let offset = RSEQ_OFFSET.load(Ordering::Relaxed);
    let size = RSEQ_SIZE.load(Ordering::Relaxed);
    if size == 0 {
        return false; // glibc did not register (or has no rseq)
    }
    let area = thread_pointer() + offset;
    // SAFETY: glibc's rseq area of this thread, `__rseq_size` bytes long.
    let cpu_id = unsafe { core::ptr::read_volatile((area + CPU_ID_FIELD) as *const i32) };
    if cpu_id < 0 {
        return false;
    }
    // The length glibc registered: 32 bytes, or the area's size rounded
    // up to 32 (later glibc versions with a larger area).
    let rounded = ((size as u32) + 31) & !31;
    let signature_confirmed = [32, rounded]
        .iter()
        .any(|&len| crate::sys::rseq(area as usize, len, 0, RSEQ_SIGNATURE) == Err(libc::EBUSY));
    if !signature_confirmed {
        return false;
    }
    let slot = (area + RSEQ_CS_FIELD) as *mut u64;
    let set = section(0);
    let (mut kept, mut cleared, mut tries) = (false, true, 0);
    for _ in 0..4 {
        if kept && tries > 0 {
            break;
        }
        write_slot(slot, set);
        crate::sys::getppid();
        kept |= read_slot(slot) == set;
        write_slot(slot, set);
        if crate::sys::sleep_ns(1_000).is_ok() {
            tries += 1;
            cleared &= read_slot(slot) == 0;
        }
        write_slot(slot, 0);
    }
    let usable = kept && cleared && tries > 0;
    if usable {
        SLOT_OFFSET.store(offset + RSEQ_CS_FIELD, Ordering::Relaxed);
    }
    usable
}

/// In a fork child: the reference's CPU time is the parent thread's, so
/// the thread starts stamped again.
pub fn forget_in_child(state: &TimerState) {
    let slot = slot();
    if is_ours(read_slot(slot)) {
        write_slot(slot, 0);
    }
    state.calm.set(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe() -> [libc::c_int; 2] {
        let mut fds = [0; 2];
        // SAFETY: a valid out-array of two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        fds
    }

    /// A write and a read of a pipe that never block, timed.
    fn calm_call(state: &'static TimerState, fds: [libc::c_int; 2]) -> (bool, Option<(u64, u64)>) {
        let timer = CallTimer::start();
        let free = matches!(timer, CallTimer::Free { .. });
        crate::sys::write(fds[1], b"x").unwrap();
        crate::sys::read(fds[0], &mut [0u8; 1]).unwrap();
        (free, timer.blocked(|| state))
    }

    #[test]
    fn a_thread_goes_free_and_still_sees_how_long_a_call_blocked() {
        init();
        std::thread::spawn(|| {
            let state: &'static TimerState = Box::leak(Box::new(TimerState::initial()));
            let fds = pipe();
            let mut went_free = false;
            for _ in 0..CALM_CALLS * 4 {
                let (free, blocked) = calm_call(state, fds);
                assert!(blocked.is_none(), "a call that did not block was recorded");
                went_free |= free;
                if went_free && free {
                    break;
                }
            }
            if !kernel_usable() {
                eprintln!("this kernel does not clear the rseq pointer: calls stay stamped");
                assert!(!went_free);
                return;
            }
            assert!(
                went_free,
                "after {CALM_CALLS} calm calls the thread times calls for free"
            );
            // A sleep the test measures itself, timed as a free call.
            let timer = CallTimer::start();
            assert!(matches!(timer, CallTimer::Free { .. }));
            let before = super::super::clock::now_ns();
            crate::sys::sleep_ns(20_000_000).unwrap();
            let after = super::super::clock::now_ns();
            let (from, to) = timer.blocked(|| state).expect("a 20 ms sleep blocked");
            let measured = after - before;
            let seen = to - from;
            assert!(
                seen.abs_diff(measured) * 10 <= measured,
                "blocked {seen} ns, the test measured {measured} ns"
            );
            // The switch is found from CPU time, so within a few µs.
            assert!(
                from + 10_000 >= before && to >= after,
                "{from}..{to} against {before}..{after}"
            );
            // And the next call is stamped again.
            assert!(matches!(CallTimer::start(), CallTimer::Stamped(_)));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_descriptors_are_what_the_kernel_checks() {
        for which in 0..2 {
            let at = section(which);
            assert_eq!(at % 32, 0);
            assert!(is_ours(at));
            // SAFETY: the descriptor is a static of that layout.
            let d = unsafe { &*(at as *const EmptySection) };
            assert_eq!((d.version, d.flags, d.post_commit_offset), (0, 0, 0));
            // SAFETY: the abort address is SIGNED.after; the word before
            // it is the signature.
            assert_eq!(unsafe { *d.abort_ip.sub(1) }, RSEQ_SIGNATURE);
        }
        assert!(!is_ours(0));
        assert!(!is_ours(section(0) + 64));
    }
}
