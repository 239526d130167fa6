//! The kernel's context-switch and page-fault records for one thread
//! (`LOCKSUIT_SWITCHES=1`): opening the perf events, their rings, and
//! reading them into [`Switch`]es. What becomes of a switch is `switches.rs`'s
//! work. Also one sample of another thread's user registers and stack, for
//! a snapshot of a thread that is running ([`sample_user_stack`]).

use crate::config;
use crate::diag::{warn_once, Warning};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use locksuit_format::*;

/// The kernel's `struct perf_event_attr`, as far as `PERF_ATTR_SIZE_VER5`.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_PAGE_FAULTS_MAJ: u64 = 6;
const PERF_COUNT_SW_DUMMY: u64 = 9;
const SAMPLE_IP: u64 = 1 << 0;
const SAMPLE_TID: u64 = 1 << 1;
const SAMPLE_TIME: u64 = 1 << 2;
const SAMPLE_CALLCHAIN: u64 = 1 << 5;
// perf_event_attr flag bits.
const EXCLUDE_KERNEL: u64 = 1 << 5;
const EXCLUDE_HV: u64 = 1 << 6;
const SAMPLE_ID_ALL: u64 = 1 << 18;
const EXCLUDE_CALLCHAIN_KERNEL: u64 = 1 << 21;
const USE_CLOCKID: u64 = 1 << 25;
const CONTEXT_SWITCH: u64 = 1 << 26;
const PERF_FLAG_FD_CLOEXEC: usize = 1 << 3;
const RECORD_LOST: u32 = 2;
const RECORD_SAMPLE: u32 = 9;
const RECORD_SWITCH: u32 = 14;
const MISC_SWITCH_OUT: u16 = 0x2000;
const MISC_SWITCH_OUT_PREEMPT: u16 = 0x4000;
/// Marks where the user part of a call chain begins.
const CONTEXT_USER: u64 = (-512i64) as u64;

const PAGE: usize = 4096;
/// Data pages of the switch ring (a power of two): 128 KiB, about 2,700
/// switches between two drains.
const SWITCH_PAGES: usize = 32;
/// Data pages of the fault ring: a dozen samples with their chains.
const FAULT_PAGES: usize = 1;
/// A major fault's sample this soon after a switch-in ends the wait that
/// switch was (the sample is taken when the fault is done).
const FAULT_AFTER_SWITCH_NS: u64 = 200_000;
/// Fault samples kept from one drain to match against its switches.
const FAULTS_KEPT: usize = 8;

/// Set once the kernel refused: no thread tries again.
static REFUSED: AtomicBool = AtomicBool::new(false);

/// One mapped perf ring: a header page, then `pages` of records.
#[derive(Clone, Copy)]
struct Mapped {
    base: *mut u8,
    pages: usize,
}

impl Mapped {
    const NONE: Mapped = Mapped {
        base: core::ptr::null_mut(),
        pages: 0,
    };

    fn len(self) -> usize {
        PAGE * (1 + self.pages)
    }

    /// Calls `each(kind, misc, record)` for every record written since the
    /// last read, then marks them read. Returns whether the ring was full
    /// (the kernel may have dropped records it has not reported yet).
    fn read(self, mut each: impl FnMut(u32, u16, &[u8])) -> bool {
        if self.base.is_null() {
            return false;
        }
        // SAFETY: the header page of our own mapping; the kernel publishes
        // data_head (offset 1024) after the records, and reads data_tail (1032).
        let (head, tail) = unsafe {
            (
                &*self.base.add(1024).cast::<AtomicU64>(),
                &*self.base.add(1032).cast::<AtomicU64>(),
            )
        };
        let end = head.load(Ordering::Acquire);
        let mut at = tail.load(Ordering::Relaxed);
        let size = (PAGE * self.pages) as u64;
        // Full, give or take the largest record.
        let full = end.saturating_sub(at) + 512 > size;
        // SAFETY: the data pages follow the header page.
        let data = unsafe { self.base.add(PAGE) };
        let mut record = [0u8; 8 + 8 * (MAX_CHAIN_DEPTH + 8)];
        while at < end {
            let mut header = [0u8; 8];
            copy_out(data, size, at, &mut header);
            let kind = u32::from_ne_bytes([header[0], header[1], header[2], header[3]]);
            let misc = u16::from_ne_bytes([header[4], header[5]]);
            let len = u16::from_ne_bytes([header[6], header[7]]) as u64;
            if len < 8 {
                break; // never written short; stop rather than spin
            }
            let take = (len as usize).min(record.len());
            copy_out(data, size, at, &mut record[..take]);
            each(kind, misc, &record[..take]);
            at += len;
        }
        tail.store(end, Ordering::Release);
        full
    }

    fn unmap(&mut self) {
        if !self.base.is_null() {
            // SAFETY: our own mapping, no longer read.
            unsafe { crate::sys::munmap(self.base.cast(), self.len()) };
        }
        *self = Mapped::NONE;
    }
}

/// One thread's rings and what it has read of them; null rings when
/// unused (a fresh lane is all zero, and `open` starts from `Ring::EMPTY`:
/// in a fork child, where the parent's rings are not mapped, every lane
/// is registered again before it is used).
pub struct Ring {
    switches: Mapped,
    faults: Mapped,
    /// The switch-out not yet matched by its switch-in (time, 0 if none),
    /// and whether it was a preemption.
    out_ns: u64,
    out_preempted: bool,
}

impl Ring {
    pub const EMPTY: Ring = Ring {
        switches: Mapped::NONE,
        faults: Mapped::NONE,
        out_ns: 0,
        out_preempted: false,
    };

    /// Whether the rings are open (switches are on for this thread).
    #[inline]
    pub fn is_open(&self) -> bool {
        !self.switches.base.is_null()
    }
}

/// Opens `attr` on thread `tid` (0: the calling thread).
fn perf_event_open(attr: &PerfEventAttr, tid: u32) -> Result<i32, i32> {
    let rc = crate::sys::sys!(
        libc::SYS_perf_event_open,
        attr as *const PerfEventAttr,
        tid,
        -1i32,
        -1i32,
        PERF_FLAG_FD_CLOEXEC
    );
    if rc < 0 {
        Err(-rc as i32)
    } else {
        Ok(rc as i32)
    }
}

/// Opens `attr` for thread `tid` (0: this one) and maps its ring; the
/// descriptor is closed either way. `Err((errno, while mapping))`.
fn open_mapped(attr: &PerfEventAttr, tid: u32, pages: usize) -> Result<Mapped, (i32, bool)> {
    let fd = perf_event_open(attr, tid).map_err(|errno| (errno, false))?;
    let ring = Mapped {
        base: core::ptr::null_mut(),
        pages,
    };
    // Mapping the event's ring, as perf_event_open(2) describes.
    let base = crate::sys::mmap_or_errno(
        core::ptr::null_mut(),
        ring.len(),
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED,
        fd,
        0,
    );
    // The mapping keeps the event; the program never sees the descriptor.
    crate::sys::close(fd);
    let base = base.map_err(|errno| (errno, true))?;
    Ok(Mapped {
        base: base.cast(),
        pages,
    })
}

impl Ring {
    /// Opens the calling thread's rings (at registration), if switches are on.
    pub fn open() -> Ring {
        let mut ring = Ring::EMPTY;
        if !config::switches() || REFUSED.load(Ordering::Relaxed) {
            return ring;
        }
        let common = EXCLUDE_KERNEL | EXCLUDE_HV | SAMPLE_ID_ALL | USE_CLOCKID;
        let switches = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: core::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_DUMMY,
            sample_type: SAMPLE_TID | SAMPLE_TIME,
            flags: common | CONTEXT_SWITCH,
            clockid: libc::CLOCK_MONOTONIC,
            ..Default::default()
        };
        match open_mapped(&switches, 0, SWITCH_PAGES) {
            Ok(mapped) => ring.switches = mapped,
            Err((errno, mapping)) => {
                refused(errno, mapping);
                return ring;
            }
        }
        let faults = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: core::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_PAGE_FAULTS_MAJ,
            sample_period: 1,
            sample_type: SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CALLCHAIN,
            flags: common | EXCLUDE_CALLCHAIN_KERNEL,
            clockid: libc::CLOCK_MONOTONIC,
            ..Default::default()
        };
        // Faults are a bonus: without them, switches still come.
        if let Ok(mapped) = open_mapped(&faults, 0, FAULT_PAGES) {
            ring.faults = mapped;
        }
        ring
    }
}

#[cold]
fn refused(errno: i32, mapping: bool) {
    let why: &[u8] = match errno {
        // Out of descriptors right now: this thread goes without; the
        // next may not.
        libc::EMFILE | libc::ENFILE => {
            b"LOCKSUIT_SWITCHES: no descriptor free to open a context-switch ring; some threads record without them"
        }
        // Past the locked-memory limit for perf rings of an unprivileged user.
        libc::EPERM | libc::ENOMEM if mapping => {
            REFUSED.store(true, Ordering::Relaxed);
            b"LOCKSUIT_SWITCHES: no room for more context-switch rings (perf_event_mlock_kb); threads from here on record without them"
        }
        libc::EACCES | libc::EPERM => {
            REFUSED.store(true, Ordering::Relaxed);
            b"LOCKSUIT_SWITCHES: the kernel refused context-switch records (perf_event_paranoid, or a seccomp or container policy); recording without them"
        }
        _ => {
            REFUSED.store(true, Ordering::Relaxed);
            b"LOCKSUIT_SWITCHES: this kernel gives no context-switch records; recording without them"
        }
    };
    warn_once(Warning::Switches, why);
}

/// A page fault's sample: when it was taken and its user call chain.
#[derive(Clone, Copy)]
struct Fault {
    at_ns: u64,
    frames: [u64; MAX_CHAIN_DEPTH],
    depth: usize,
}

const NO_FAULT: Fault = Fault {
    at_ns: 0,
    frames: [0; MAX_CHAIN_DEPTH],
    depth: 0,
};

impl Ring {
    /// Reads the rings up to what the kernel has written, telling `each`
    /// of every switch-out that lasted at least `LOCKSUIT_BLOCK_MIN_US`
    /// (with the page fault it waited for, if a fault's sample says so);
    /// then closes the rings if `closing`. The thread runs this itself, so
    /// any fault it waited for is done and sampled by now.
    pub fn drain(&mut self, closing: bool, mut each: impl FnMut(Switch<'_>)) {
        if self.switches.base.is_null() {
            return;
        }
        let mut faults = [NO_FAULT; FAULTS_KEPT];
        let mut kept = 0usize;
        let faults_full = self.faults.read(|kind, _, record| {
            if kind == RECORD_SAMPLE {
                faults[kept % FAULTS_KEPT] = fault_of(record);
                kept += 1;
            } else if kind == RECORD_LOST {
                crate::recorder::trace::file::count_lost_switches(word(record, 1));
            }
        });
        let faults = &faults[..kept.min(FAULTS_KEPT)];
        let switches = self.switches;
        let switches_full = switches.read(|kind, misc, record| match kind {
            RECORD_SWITCH => {
                if let Some(switch) = self.switched(misc, word(record, 1), faults) {
                    each(switch);
                }
            }
            RECORD_LOST => crate::recorder::trace::file::count_lost_switches(word(record, 1)),
            _ => {}
        });
        if faults_full || switches_full {
            crate::recorder::trace::file::set_flags(FLAG_SWITCHES_FULL);
        }
        if closing {
            self.switches.unmap();
            self.faults.unmap();
            *self = Ring::EMPTY;
        }
    }

    /// A switch record: a switch-out is kept until its switch-in, which
    /// makes a [`Switch`] if the thread was out long enough.
    fn switched<'f>(&mut self, misc: u16, at_ns: u64, faults: &'f [Fault]) -> Option<Switch<'f>> {
        if misc & MISC_SWITCH_OUT != 0 {
            self.out_ns = at_ns;
            self.out_preempted = misc & MISC_SWITCH_OUT_PREEMPT != 0;
            return None;
        }
        let (out_ns, in_ns, preempted) = (self.out_ns, at_ns, self.out_preempted);
        self.out_ns = 0;
        if out_ns == 0 || in_ns.saturating_sub(out_ns) < config::block_min_ns() {
            return None;
        }
        let fault = faults
            .iter()
            .find(|f| !preempted && f.at_ns >= in_ns && f.at_ns - in_ns < FAULT_AFTER_SWITCH_NS)
            .map(|f| &f.frames[..f.depth]);
        Some(Switch {
            out_ns,
            in_ns,
            preempted,
            fault,
        })
    }
}

/// A thread was switched out from `out_ns` to `in_ns`: preempted, waiting
/// for the page fault whose user call chain is `fault`, or neither.
pub struct Switch<'f> {
    pub out_ns: u64,
    pub in_ns: u64,
    pub preempted: bool,
    pub fault: Option<&'f [u64]>,
}

/// Copies `out.len()` bytes of the ring from position `at` (wrapping).
fn copy_out(data: *const u8, size: u64, at: u64, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        // SAFETY: the offset is reduced into the data pages.
        *b = unsafe { *data.add(((at + i as u64) % size) as usize) };
    }
}

fn word(record: &[u8], index: usize) -> u64 {
    let at = 8 + index * 8;
    record
        .get(at..at + 8)
        .map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))
}

/// A sample: ip, pid/tid, time, then the call chain (nr, addresses).
fn fault_of(record: &[u8]) -> Fault {
    let mut f = Fault {
        at_ns: word(record, 2),
        ..NO_FAULT
    };
    let nr = word(record, 3) as usize;
    for i in 0..nr.min(MAX_CHAIN_DEPTH + 1) {
        let ip = word(record, 4 + i);
        if ip >= CONTEXT_USER || ip == 0 {
            continue; // a context marker
        }
        if f.depth < MAX_CHAIN_DEPTH {
            f.frames[f.depth] = ip;
            f.depth += 1;
        }
    }
    if f.depth == 0 {
        f.frames[0] = word(record, 0);
        f.depth = 1;
    }
    f
}

const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const SAMPLE_REGS_USER: u64 = 1 << 12;
const SAMPLE_STACK_USER: u64 = 1 << 13;
/// x86-64 `perf_regs` bits: the frame, stack and instruction pointers (a
/// sample lists them in this order).
const USER_REGS: u64 = (1 << 6) | (1 << 7) | (1 << 8);
/// A sample after this much of the thread's own running time.
const SAMPLE_AFTER_NS: u64 = 100_000;
/// Data pages for one sample of an 8 KiB stack.
const SAMPLE_PAGES: usize = 4;
const SAMPLE_POLL_NS: i64 = 100_000;

/// Registers of a running thread, sampled by the kernel while it ran in
/// user space.
pub struct UserSample {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// Bytes of its stack from `sp` up, copied into the caller's buffer.
    pub copied: usize,
}

/// Samples thread `tid`'s user registers and the top of its stack (up to
/// `stack.len()` bytes, at most 64 KiB) once it has run `SAMPLE_AFTER_NS`
/// more, waiting at most `*budget_ns` (the thread may wait for a processor,
/// or block before its running time comes), which it reduces by what it
/// waited. `None` if the kernel refuses (`perf_event_paranoid`, seccomp)
/// or the thread did not run meanwhile. x86-64 only.
pub fn sample_user_stack(tid: u32, stack: &mut [u8], budget_ns: &mut u64) -> Option<UserSample> {
    if !cfg!(target_arch = "x86_64") || tid == 0 {
        return None;
    }
    let attr = PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: core::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_TASK_CLOCK,
        sample_period: SAMPLE_AFTER_NS,
        sample_type: SAMPLE_IP | SAMPLE_TID | SAMPLE_REGS_USER | SAMPLE_STACK_USER,
        flags: EXCLUDE_KERNEL | EXCLUDE_HV,
        sample_regs_user: USER_REGS,
        sample_stack_user: (stack.len().min(65_528) & !7) as u32,
        ..Default::default()
    };
    let mut ring = open_mapped(&attr, tid, SAMPLE_PAGES).ok()?;
    let mut waited = 0;
    let sample = loop {
        if let Some(sample) = first_sample(ring, stack) {
            break Some(sample);
        }
        if waited >= *budget_ns {
            break None;
        }
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: SAMPLE_POLL_NS,
        };
        // SAFETY: a valid request; no remainder wanted.
        crate::sys::sys!(libc::SYS_nanosleep, &pause as *const libc::timespec, 0);
        waited += SAMPLE_POLL_NS as u64;
    };
    ring.unmap();
    *budget_ns = budget_ns.saturating_sub(waited);
    sample
}

/// The first sample in `ring`, if one was written: ip, pid/tid, the
/// registers' ABI and values, then the stack's size, bytes and used size.
fn first_sample(ring: Mapped, stack: &mut [u8]) -> Option<UserSample> {
    // SAFETY: the header page of our own mapping; the kernel publishes
    // data_head (offset 1024) after the records.
    let head = unsafe { &*ring.base.add(1024).cast::<AtomicU64>() };
    let end = head.load(Ordering::Acquire);
    let size = (PAGE * ring.pages) as u64;
    // SAFETY: the data pages follow the header page.
    let data = unsafe { ring.base.add(PAGE) };
    let read_u64 = |at: u64| {
        let mut word = [0u8; 8];
        copy_out(data, size, at, &mut word);
        u64::from_ne_bytes(word)
    };
    let mut at = 0;
    while at + 8 <= end {
        let header = read_u64(at);
        let (kind, len) = (header as u32, header >> 48);
        if len < 8 {
            return None;
        }
        if kind == RECORD_SAMPLE {
            // 8: header, 8: ip, 8: pid/tid.
            let abi = read_u64(at + 24);
            if abi == 0 {
                return None; // a kernel thread's: no user registers
            }
            let (bp, sp, ip) = (read_u64(at + 32), read_u64(at + 40), read_u64(at + 48));
            let stack_size = read_u64(at + 56);
            let used = match stack_size {
                0 => 0,
                _ => read_u64(at + 64 + stack_size),
            };
            let copied = used.min(stack_size).min(stack.len() as u64) as usize;
            copy_out(data, size, at + 64, &mut stack[..copied]);
            return Some(UserSample { ip, sp, bp, copied });
        }
        at += len;
    }
    None
}
