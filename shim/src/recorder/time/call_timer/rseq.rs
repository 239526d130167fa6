//! The kernel's side of call timing: glibc's rseq area, the empty
//! critical sections whose pointer the kernel clears when it switches a
//! thread out, and the once-per-process check that it does (see the
//! parent module).

use core::sync::atomic::{AtomicBool, AtomicIsize, AtomicU8, Ordering};

/// glibc's rseq signature on x86_64 (`RSEQ_SIG`).
pub(super) const RSEQ_SIGNATURE: u32 = 0x5305_3053;
const RSEQ_FLAG_UNREGISTER: libc::c_int = 1;
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
pub(super) struct EmptySection {
    pub(super) version: u32,
    pub(super) flags: u32,
    pub(super) start_ip: *const u32,
    pub(super) post_commit_offset: u64,
    pub(super) abort_ip: *const u32,
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

/// Descriptors a free thread sets in turn: a call that finds on return
/// another one than it set knows a signal handler's call set it meanwhile
/// (sixteen, so that it takes sixteen such settings to come back round).
pub(super) const FREE_SECTIONS: usize = 16;

/// The free descriptors, then the one a stamped call sets.
#[repr(C, align(64))]
struct Sections([EmptySection; FREE_SECTIONS + 1]);

static SECTIONS: Sections = Sections([const { empty_section() }; FREE_SECTIONS + 1]);

fn sections_base() -> u64 {
    &SECTIONS as *const Sections as u64
}

pub(super) fn free_section(which: u8) -> u64 {
    sections_base() + (which as usize % FREE_SECTIONS * 32) as u64
}

pub(super) fn stamped_section() -> u64 {
    sections_base() + (FREE_SECTIONS * 32) as u64
}

/// Whether `value` (the critical-section pointer) is a free thread's.
#[inline(always)]
pub(super) fn is_free(value: u64) -> bool {
    value.wrapping_sub(sections_base()) < (FREE_SECTIONS * 32) as u64
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
/// `init` looked for them: until then (calls made by other libraries'
/// constructors, before ours) the kernel is not tested.
static AREA_LOOKED_FOR: AtomicBool = AtomicBool::new(false);
/// The program made an rseq system call of its own: an area may now be
/// registered with a signature other than glibc's, and a descriptor of
/// ours in it would get the thread killed. No thread sets the pointer
/// again.
static TAKEN_OVER: AtomicBool = AtomicBool::new(false);

pub(super) fn take_over() {
    TAKEN_OVER.store(true, Ordering::SeqCst);
}

pub(super) fn taken_over() -> bool {
    TAKEN_OVER.load(Ordering::Relaxed)
}

/// Finds glibc's rseq area (glibc 2.35 and later export where it is) and
/// tests the kernel (once: a fork child keeps its parent's verdict), so
/// that every call of the process is judged the same way from the start.
pub fn init() {
    // A fork child has its parent's answers: no `dlsym` again.
    if AREA_LOOKED_FOR.load(Ordering::Acquire) {
        return;
    }
    find_area();
    AREA_LOOKED_FOR.store(true, Ordering::Release);
    kernel_usable();
}

/// Whether calls are judged by whether they were switched out (the kernel
/// was found usable).
pub fn switches_seen() -> bool {
    KERNEL.load(Ordering::Acquire) == USABLE
}

fn find_area() {
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
pub(super) fn slot() -> *mut u64 {
    (thread_pointer() + SLOT_OFFSET.load(Ordering::Relaxed)) as *mut u64
}

/// Whether the kernel was found usable (the slot is then the pointer).
#[inline(always)]
pub(super) fn slot_known() -> bool {
    SLOT_OFFSET.load(Ordering::Relaxed) != 0
}

/// The rseq area a slot is in.
pub(super) fn area_of(slot: *mut u64) -> isize {
    slot as isize - RSEQ_CS_FIELD
}

#[inline(always)]
pub(super) fn read_slot(slot: *mut u64) -> u64 {
    // SAFETY: the slot is in this thread's TCB or rseq area, which lives
    // as long as the thread; the kernel writes it only while this thread
    // is not running user code.
    unsafe { core::ptr::read_volatile(slot) }
}

pub(super) fn write_slot(slot: *mut u64, value: u64) {
    // SAFETY: as in `read_slot`; written only once the area was found
    // registered, with a descriptor the kernel accepts.
    unsafe { core::ptr::write_volatile(slot, value) }
}

/// Whether the kernel has the calling thread registered: the area's
/// `cpu_id` (next to the pointer) is negative otherwise. Only for a slot
/// in the rseq area (the kernel was found usable).
#[inline(always)]
pub(super) fn registered(slot: *mut u64) -> bool {
    // SAFETY: `cpu_id` lies in the same area as the slot.
    let cpu_id = unsafe {
        core::ptr::read_volatile((slot as isize - RSEQ_CS_FIELD + CPU_ID_FIELD) as *const i32)
    };
    cpu_id >= 0
}

/// Whether the kernel clears the pointer as this module needs; checked
/// once per process, by the first thread that gets here.
pub(super) fn kernel_usable() -> bool {
    match KERNEL.load(Ordering::Acquire) {
        USABLE => true,
        UNTESTED => test_kernel(),
        _ => false,
    }
}

/// In a fork child: a test another thread of the parent had under way is
/// gone with that thread; a later call tests again.
pub(super) fn forget_test_in_child() {
    // Read first: even a failed compare-exchange writes, which in a fork
    // child copies the page.
    if KERNEL.load(Ordering::Relaxed) == TESTING {
        let _ = KERNEL.compare_exchange(TESTING, UNTESTED, Ordering::AcqRel, Ordering::Relaxed);
    }
}

#[cold]
fn test_kernel() -> bool {
    // Confined, the test's system calls would be refused: no verdict.
    if !AREA_LOOKED_FOR.load(Ordering::Acquire) || crate::sys::confined::confined() {
        return false;
    }
    if KERNEL
        .compare_exchange(UNTESTED, TESTING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return false; // another thread is testing: stay stamped for now
    }
    let verdict = kernel_clears_the_pointer();
    KERNEL.store(verdict, Ordering::Release);
    verdict == USABLE
}

/// What the kernel says of an area and our signature.
pub(super) enum Signature {
    /// The calling task has it registered with our signature.
    Ours,
    /// Registered, with another signature (or the kernel refused to say).
    Other,
    /// The calling task had no area registered: the probe registered it,
    /// and undid that.
    NotRegistered,
}

/// Whether glibc registered the calling thread's area at `area` with our
/// signature: a second registration with the same area, length and
/// signature gets EBUSY, another signature EPERM, another area or length
/// EINVAL.
pub(super) fn signature(area: isize) -> Signature {
    let size = RSEQ_SIZE.load(Ordering::Relaxed).max(32) as u32;
    for len in [32, size] {
        match crate::sys::rseq(area as usize, len, 0, RSEQ_SIGNATURE) {
            Err(libc::EBUSY) => return Signature::Ours,
            Err(libc::EINVAL) => continue, // another length
            Ok(()) => {
                let _ = crate::sys::rseq(area as usize, len, RSEQ_FLAG_UNREGISTER, RSEQ_SIGNATURE);
                return Signature::NotRegistered;
            }
            Err(_) => return Signature::Other,
        }
    }
    Signature::Other
}

/// The check described in the module comment, on the calling thread:
/// `USABLE`, `UNUSABLE`, or `UNTESTED` to let a later call try again.
fn kernel_clears_the_pointer() -> u8 {
    if !cfg!(target_arch = "x86_64") {
        return UNUSABLE;
    }
    let offset = RSEQ_OFFSET.load(Ordering::Relaxed);
    if RSEQ_SIZE.load(Ordering::Relaxed) == 0 {
        return UNUSABLE; // glibc did not register (or has no rseq)
    }
    let area = thread_pointer() + offset;
    let slot = (area + RSEQ_CS_FIELD) as *mut u64;
    if !registered(slot) {
        return UNTESTED; // this thread is not registered; another may be
    }
    match signature(area) {
        Signature::Ours => {}
        Signature::Other => return UNUSABLE,
        Signature::NotRegistered => return UNTESTED,
    }
    // Sleeps of 10 µs with the timer slack at 1 ns meanwhile (its
    // default, 50 µs, would make each 60 µs). About 120 µs in all here.
    let Some(slack) = crate::sys::timer_slack_ns() else {
        return UNTESTED;
    };
    crate::sys::set_timer_slack_ns(1);
    if crate::sys::timer_slack_ns() != Some(1) {
        // Not allowed here (a seccomp filter, say): sleeps would take the
        // program's slack, which may be long; try again on a later call.
        crate::sys::set_timer_slack_ns(slack);
        return UNTESTED;
    }
    let verdict = switches_clear_the_pointer(slot);
    crate::sys::set_timer_slack_ns(slack);
    if verdict == USABLE {
        SLOT_OFFSET.store(offset + RSEQ_CS_FIELD, Ordering::Relaxed);
    }
    verdict
}

/// A call that does not block leaves the pointer set, and three sleeps
/// that switched the thread out (its switch count says so: a short sleep
/// whose timer expired before the thread got to sleep did not) each
/// clear it. A sleep that did not switch the thread out says nothing, and
/// the next is twice as long (on a loaded virtual machine programming the
/// timer can take longer than 10 µs).
fn switches_clear_the_pointer(slot: *mut u64) -> u8 {
    const SWITCHED: u32 = 3;
    const ROUNDS: u32 = 12;
    let set = free_section(0);
    let (mut kept, mut cleared, mut sleep_ns) = (false, 0, 10_000);
    // Each time the pointer is set first and the switch count read after:
    // a switch between the two clears the pointer and is counted before,
    // so it can only make a round inconclusive, never a false verdict.
    for _ in 0..ROUNDS {
        write_slot(slot, set);
        let before = crate::sys::thread_switches();
        crate::sys::getppid();
        let still = read_slot(slot) == set;
        kept |= still && crate::sys::thread_switches() == before;
        write_slot(slot, set);
        let before = crate::sys::thread_switches();
        let slept = crate::sys::sleep_ns(sleep_ns).is_ok();
        let now = read_slot(slot);
        write_slot(slot, 0);
        if slept && crate::sys::thread_switches() != before {
            if now != 0 {
                return UNUSABLE; // switched out, and the pointer stayed
            }
            cleared += 1;
        } else {
            sleep_ns = (sleep_ns * 2).min(1_000_000);
        }
        if kept && cleared >= SWITCHED {
            return USABLE;
        }
    }
    UNUSABLE
}
