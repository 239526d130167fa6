//! `LOCKSUIT_SWITCHES=1`: the kernel's own context-switch records for each
//! thread, for the blocking the hooks cannot see — preemption, page faults,
//! system calls made around libc. This is how the thread-execution seed
//! collects them.
//!
//! Each thread opens, for itself only, a `perf_event_open` dummy software
//! event with `context_switch` records (switch out, with a flag when it was
//! preempted, and switch in), and a major-page-fault event sampled with its
//! user call chain, both into one ring buffer mapped at registration. The
//! switch event's descriptor is closed at once (the mapping keeps it
//! alive); the fault event's is kept, high up and close-on-exec, until the
//! thread ends. User-space only, no privileges: allowed at
//! `perf_event_paranoid` 2. Where the kernel refuses, the shim says so
//! once and records without them.
//!
//! The shim has no thread of its own: a thread drains its own ring on its
//! slow paths (a recorded wait, a recorded blocking call) and when it
//! exits. Each switch-out and the switch-in after it become one event
//! ([`EVENT_SWITCH`]) if the thread was out at least
//! `LOCKSUIT_BLOCK_MIN_US`; the analyzer drops those inside a wait the
//! hooks recorded. Records the ring had no room for are counted as dropped.

use super::events;
use super::lanes::Lane;
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
/// `_IO('$', 5)`.
const PERF_EVENT_IOC_SET_OUTPUT: usize = 0x2405;
const RECORD_LOST: u32 = 2;
const RECORD_SAMPLE: u32 = 9;
const RECORD_SWITCH: u32 = 14;
const MISC_SWITCH_OUT: u16 = 0x2000;
const MISC_SWITCH_OUT_PREEMPT: u16 = 0x4000;
/// Marks where the user part of a call chain begins.
const CONTEXT_USER: u64 = (-512i64) as u64;

const PAGE: usize = 4096;
/// Data pages of each ring (a power of two): 64 KiB, about 1,300 switches
/// between two drains.
const DATA_PAGES: usize = 16;
/// A major fault's sample this soon after a switch-in ends the wait that
/// switch was (the sample is taken when the fault is done).
const FAULT_AFTER_SWITCH_NS: u64 = 200_000;

/// Set once the kernel refused: no thread tries again.
static REFUSED: AtomicBool = AtomicBool::new(false);
static LOST: AtomicU64 = AtomicU64::new(0);

/// One thread's ring and what it has read of it; a null `base` when unused
/// (a fresh lane is all zero, and `open` starts from `Ring::EMPTY`).
pub struct Ring {
    /// The mapping: a header page, then `DATA_PAGES` of records.
    base: *mut u8,
    /// The switch-out not yet matched by its switch-in (time, 0 if none),
    /// and whether it was a preemption.
    out_ns: u64,
    out_preempted: bool,
    /// The page-fault event's descriptor (-1: none) and its identity,
    /// closed at the end if it still is that file.
    fault_fd: i32,
    fault_file: Option<crate::sys::FileId>,
    /// A switch (out, in, preempted) written once the next record shows
    /// whether a page fault was what it waited for; (0, 0, false) if none.
    pending: (u64, u64, bool),
}

impl Ring {
    pub const EMPTY: Ring = Ring {
        base: core::ptr::null_mut(),
        out_ns: 0,
        out_preempted: false,
        fault_fd: -1,
        fault_file: None,
        pending: (0, 0, false),
    };
}

fn perf_event_open(attr: &PerfEventAttr, group_fd: i32) -> Result<i32, i32> {
    let rc = crate::sys::sys!(
        libc::SYS_perf_event_open,
        attr as *const PerfEventAttr,
        0,
        -1i32,
        group_fd,
        PERF_FLAG_FD_CLOEXEC
    );
    if rc < 0 {
        Err(-rc as i32)
    } else {
        Ok(rc as i32)
    }
}

/// Opens this thread's ring (at registration), if switches are on.
pub fn open(lane: &mut Lane) {
    lane.switches = Ring::EMPTY;
    if !config::switches() || REFUSED.load(Ordering::Relaxed) {
        return;
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
    let fd = match perf_event_open(&switches, -1) {
        Ok(fd) => fd,
        Err(errno) => return refused(errno, false),
    };
    let len = PAGE * (1 + DATA_PAGES);
    // SAFETY: mapping the event's ring, as perf_event_open(2) describes.
    let base = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        let errno = crate::diag::errno();
        crate::sys::close(fd);
        return refused(errno, true);
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
    // Faults are a bonus: without them, switches still come. Only the
    // mapped event is kept alive by the mapping: the fault event's
    // descriptor stays open, high up and close-on-exec like the trace's,
    // until the thread ends (a program that closes it loses only faults).
    let mut fault_fd = -1;
    if let Ok(opened) = perf_event_open(&faults, -1) {
        let _ = crate::sys::sys!(libc::SYS_ioctl, opened, PERF_EVENT_IOC_SET_OUTPUT, fd);
        fault_fd = crate::sys::move_high(opened);
        lane.switches.fault_file = crate::sys::fstat(fault_fd).map(|st| st.id);
    }
    // The mapping holds the switch event; its descriptor can go.
    crate::sys::close(fd);
    lane.switches.base = base.cast();
    lane.switches.fault_fd = fault_fd;
}

#[cold]
fn refused(errno: i32, mapping: bool) {
    REFUSED.store(true, Ordering::Relaxed);
    let why: &[u8] = match errno {
        // Past the locked-memory limit for perf rings of an unprivileged user.
        libc::EPERM | libc::ENOMEM if mapping => {
            b"LOCKSUIT_SWITCHES: no room for more context-switch rings (perf_event_mlock_kb); threads from here on record without them"
        }
        libc::EACCES | libc::EPERM => {
            b"LOCKSUIT_SWITCHES: the kernel refused context-switch records (perf_event_paranoid, or a seccomp or container policy); recording without them"
        }
        _ => b"LOCKSUIT_SWITCHES: this kernel gives no context-switch records; recording without them",
    };
    warn_once(Warning::Switches, why);
}

/// In a fork child: the parent's rings are not mapped here (perf buffers
/// are not inherited), but the descriptors of its page-fault events are.
/// Closes those that still are what the parent opened.
pub fn reset_after_fork() {
    super::lanes::for_each_active(|lane| {
        let (fd, ours) = (lane.switches.fault_fd, lane.switches.fault_file);
        if !lane.switches.base.is_null()
            && fd >= 0
            && ours.is_some()
            && crate::sys::fstat(fd).map(|st| st.id) == ours
        {
            crate::sys::close(fd);
        }
    });
}

/// Context-switch records lost for lack of room in a ring.
pub fn lost() -> u64 {
    LOST.load(Ordering::Relaxed)
}

/// Reads this thread's ring up to what the kernel has written, writing an
/// event per switch-out that lasted long enough; then closes the ring if
/// `closing` (the thread is ending).
pub fn drain(lane: &mut Lane, closing: bool) {
    let ring = lane.switches.base;
    if ring.is_null() {
        return;
    }
    // SAFETY: the header page of our own mapping; the kernel publishes
    // data_head (offset 1024) after the records, and reads data_tail (1032).
    let (head, tail) = unsafe {
        (
            &*ring.add(1024).cast::<AtomicU64>(),
            &*ring.add(1032).cast::<AtomicU64>(),
        )
    };
    let end = head.load(Ordering::Acquire);
    let mut at = tail.load(Ordering::Relaxed);
    let size = (PAGE * DATA_PAGES) as u64;
    // SAFETY: the data pages follow the header page.
    let data = unsafe { ring.add(PAGE) };
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
        handle(lane, kind, misc, &record[..take]);
        at += len;
    }
    tail.store(end, Ordering::Release);
    if closing {
        flush(lane);
        // SAFETY: our own mapping, no longer read.
        unsafe { libc::munmap(ring.cast(), PAGE * (1 + DATA_PAGES)) };
        // Only if it is still ours: a program that closed it may have
        // opened a file of its own at that number since.
        let fd = lane.switches.fault_fd;
        let ours = lane.switches.fault_file;
        if fd >= 0 && ours.is_some() && crate::sys::fstat(fd).map(|st| st.id) == ours {
            crate::sys::close(fd);
        }
        lane.switches = Ring::EMPTY;
    }
}

/// Copies `out.len()` bytes of the ring from position `at` (wrapping).
fn copy_out(data: *const u8, size: u64, at: u64, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        // SAFETY: the offset is reduced into the data pages.
        *b = unsafe { *data.add(((at + i as u64) % size) as usize) };
    }
}

/// Writes the switch held back, as a plain one.
fn flush(lane: &mut Lane) {
    let (out_ns, in_ns, preempted) = lane.switches.pending;
    if in_ns == 0 {
        return;
    }
    lane.switches.pending = (0, 0, false);
    let flags = if preempted { SWITCH_PREEMPTED } else { 0 };
    events::switched(lane, 0, flags, (out_ns, in_ns));
}

fn word(record: &[u8], index: usize) -> u64 {
    let at = 8 + index * 8;
    record
        .get(at..at + 8)
        .map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))
}

fn handle(lane: &mut Lane, kind: u32, misc: u16, record: &[u8]) {
    match kind {
        // sample_id: pid/tid, then time.
        RECORD_SWITCH if misc & MISC_SWITCH_OUT != 0 => {
            flush(lane);
            let ring = &mut lane.switches;
            ring.out_ns = word(record, 1);
            ring.out_preempted = misc & MISC_SWITCH_OUT_PREEMPT != 0;
        }
        RECORD_SWITCH => {
            flush(lane);
            let ring = &mut lane.switches;
            let (out_ns, in_ns) = (ring.out_ns, word(record, 1));
            ring.out_ns = 0;
            if out_ns != 0 && in_ns.saturating_sub(out_ns) >= config::block_min_ns() {
                // Held back: a page fault's sample comes when the fault is
                // done, just after the switch-in of the wait it caused.
                ring.pending = (out_ns, in_ns, ring.out_preempted);
            }
        }
        // ip, pid/tid, time, callchain (nr, then the addresses).
        RECORD_SAMPLE => {
            let time = word(record, 2);
            let (out_ns, in_ns, preempted) = lane.switches.pending;
            let ends_pending =
                in_ns != 0 && !preempted && time >= in_ns && time - in_ns < FAULT_AFTER_SWITCH_NS;
            if !ends_pending {
                return;
            }
            let mut frames = [0u64; MAX_CHAIN_DEPTH];
            let mut depth = 0;
            let nr = word(record, 3) as usize;
            for i in 0..nr.min(MAX_CHAIN_DEPTH + 1) {
                let ip = word(record, 4 + i);
                if ip >= CONTEXT_USER || ip == 0 {
                    continue; // a context marker
                }
                if depth < MAX_CHAIN_DEPTH {
                    frames[depth] = ip;
                    depth += 1;
                }
            }
            if depth == 0 {
                frames[0] = word(record, 0);
                depth = 1;
            }
            lane.switches.pending = (0, 0, false);
            let site = super::sites::site_of_frames(lane, &frames[..depth]);
            events::switched(lane, site, SWITCH_FAULT, (out_ns, in_ns));
        }
        RECORD_LOST => {
            let lost = word(record, 1);
            LOST.fetch_add(lost, Ordering::Relaxed);
            super::file::count_dropped_ops(lost);
        }
        _ => {}
    }
}
