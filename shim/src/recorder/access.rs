//! Data-level suitability: what critical sections touch (programs built
//! with `locksuit cc`, whose every load and store calls the shim). Each
//! 8-byte granule accessed while the thread held a lock gets a slot in a
//! process-wide table: the threads that touched it (a bit each, by
//! registration order), the lines whose critical sections did (the site
//! that took the innermost held lock) with their access counts, and
//! whether it was written. At process exit every slot becomes an
//! `AccessRecord`; the analyzer decides from them which lines guard data
//! other threads share and which guard data only one thread ever touches.
//!
//! The table is lock-free open addressing over a lazily touched anonymous
//! mapping of bounded size; a granule that finds no room is counted as
//! dropped. Accesses by a thread holding no lock stop at one test.

use super::held::HeldEntry;
use super::lanes::Lane;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use locksuit_format::*;

/// Granules the table holds: 2 Mi slots of 64 bytes, 128 MiB reserved.
const SLOTS: usize = 1 << 21;
const PROBES: usize = 32;
/// A thread's stack above the current frame is believed only this deep.
const MAX_STACK: u64 = 64 << 20;

#[repr(C, align(64))]
struct Slot {
    /// `address / GRANULE_BYTES + 1`; 0 = empty.
    key: AtomicU64,
    threads: AtomicU64,
    lock: AtomicU32,
    flags: AtomicU32,
    sites: [AtomicU32; ACCESS_SITES],
    accesses: [AtomicU32; ACCESS_SITES],
}

static TABLE: AtomicPtr<Slot> = AtomicPtr::new(core::ptr::null_mut());
static ACCESSES: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Threads registered so far: each gets the next bit.
static THREADS: AtomicU32 = AtomicU32::new(0);

/// The table, mapped on the first access under a lock.
fn table() -> Option<*mut Slot> {
    let t = TABLE.load(Ordering::Acquire);
    if !t.is_null() {
        return Some(t);
    }
    let fresh: *mut Slot = super::map_anonymous(SLOTS * core::mem::size_of::<Slot>())?;
    match TABLE.compare_exchange(
        core::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => Some(fresh),
        Err(theirs) => {
            // SAFETY: our own mapping, never published.
            unsafe { libc::munmap(fresh.cast(), SLOTS * core::mem::size_of::<Slot>()) };
            Some(theirs)
        }
    }
}

extern "C" {
    /// glibc: the top of the main thread's stack when the program started.
    static __libc_stack_end: *const core::ffi::c_void;
}

/// The top of the calling thread's stack: for the main thread where glibc
/// says it ended at start-up; for another, its thread descriptor, which
/// glibc places at the top of the thread's stack mapping.
pub fn stack_top(main: bool) -> u64 {
    if main {
        // SAFETY: a glibc variable set before any user code runs.
        unsafe { __libc_stack_end as u64 }
    } else {
        // SAFETY: pthread_self is always safe.
        unsafe { libc::pthread_self() as u64 }
    }
}

/// The bit a newly registered thread sets in the granules it touches.
pub fn thread_bit() -> u64 {
    let n = THREADS.fetch_add(1, Ordering::Relaxed);
    if n < 63 {
        1 << n
    } else {
        ACCESS_MANY_THREADS
    }
}

/// In a fork child: the parent's accesses are not the child's.
pub fn reset_after_fork() {
    let t = TABLE.load(Ordering::Acquire);
    if !t.is_null() {
        // SAFETY: our own private anonymous pages; they read back as zeros.
        unsafe {
            libc::madvise(
                t.cast(),
                SLOTS * core::mem::size_of::<Slot>(),
                libc::MADV_DONTNEED,
            )
        };
    }
    ACCESSES.store(0, Ordering::Relaxed);
    DROPPED.store(0, Ordering::Relaxed);
    THREADS.store(0, Ordering::Relaxed);
}

fn slot_of(table: *mut Slot, key: u64) -> Option<&'static Slot> {
    let home = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 43) as usize;
    for i in 0..PROBES {
        // SAFETY: the index is masked into the table.
        let slot = unsafe { &*table.add((home + i) & (SLOTS - 1)) };
        let cur = slot.key.load(Ordering::Acquire);
        if cur == key {
            return Some(slot);
        }
        if cur == 0 {
            match slot
                .key
                .compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(slot),
                Err(now) if now == key => return Some(slot),
                Err(_) => continue,
            }
        }
    }
    None
}

/// The calling thread (its lane) touched `address` while holding `held`
/// innermost; `write` for a store.
pub fn touched(lane: &mut Lane, held: &HeldEntry, address: u64, write: bool) {
    // The thread's own locals (between here and its stack's top) are not
    // data: every thread has its own. Only a believable range counts (not
    // after a fork from another thread, nor on a coroutine's stack).
    let here = core::ptr::addr_of!(lane) as u64;
    let believable = lane.stack_top > here && lane.stack_top - here <= MAX_STACK;
    if believable && address >= here && address < lane.stack_top {
        return;
    }
    // Counted per thread: one shared counter would bounce between cores.
    lane.accesses += 1;
    let Some(table) = table() else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let key = address / GRANULE_BYTES + 1;
    let Some(slot) = slot_of(table, key) else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    };
    // Loads before stores: a granule touched again and again by the same
    // thread and line is only read, and its cache line stays shared.
    if slot.threads.load(Ordering::Relaxed) & lane.access_bit == 0 {
        slot.threads.fetch_or(lane.access_bit, Ordering::Relaxed);
    }
    if slot.lock.load(Ordering::Relaxed) == 0 {
        let _ = slot
            .lock
            .compare_exchange(0, held.lock_id, Ordering::Relaxed, Ordering::Relaxed);
    }
    if write && slot.flags.load(Ordering::Relaxed) & ACCESS_WRITTEN == 0 {
        slot.flags.fetch_or(ACCESS_WRITTEN, Ordering::Relaxed);
    }
    let site = if held.counter.is_null() {
        0
    } else {
        // SAFETY: a counter record of this thread's lane, in the live mapping.
        unsafe { (*held.counter).site_id }
    };
    if site == 0 {
        return; // an unknown line: 0 marks an empty place below
    }
    for (i, s) in slot.sites.iter().enumerate() {
        let mut cur = s.load(Ordering::Relaxed);
        if cur == 0 {
            cur = match s.compare_exchange(0, site, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => site,
                Err(now) => now,
            };
        }
        if cur == site {
            slot.accesses[i].fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
    if slot.flags.load(Ordering::Relaxed) & ACCESS_MORE_SITES == 0 {
        slot.flags.fetch_or(ACCESS_MORE_SITES, Ordering::Relaxed);
    }
}

/// A thread ends (or the process does): its count joins the total.
pub fn thread_done(lane: &mut Lane) {
    ACCESSES.fetch_add(core::mem::take(&mut lane.accesses), Ordering::Relaxed);
}

/// At process exit: every granule touched under a lock, into the trace.
pub fn write_all(lane: &mut Lane) {
    thread_done(lane);
    // Threads still running: their counts as they stand.
    let mut running = 0u64;
    let own = lane.id;
    super::lanes::for_each_active(|other| {
        if other.id != own {
            running += other.accesses;
        }
    });
    ACCESSES.fetch_add(running, Ordering::Relaxed);
    let table = TABLE.load(Ordering::Acquire);
    if table.is_null() {
        return;
    }
    let mut summary = AccessSummaryRecord {
        hdr: RecordHeader {
            kind: RecordKind::AccessSummary as u16,
            size: core::mem::size_of::<AccessSummaryRecord>() as u16,
            aux: 0,
        },
        accesses: ACCESSES.load(Ordering::Relaxed),
        dropped: DROPPED.load(Ordering::Relaxed),
        granules: 0,
    };
    let Some(written) = lane.append(&summary, &[]) else {
        return;
    };
    for i in 0..SLOTS {
        // SAFETY: index inside the table.
        let slot = unsafe { &*table.add(i) };
        let key = slot.key.load(Ordering::Acquire);
        if key == 0 {
            continue;
        }
        let record = AccessRecord {
            hdr: RecordHeader {
                kind: RecordKind::Access as u16,
                size: core::mem::size_of::<AccessRecord>() as u16,
                aux: 0,
            },
            address: (key - 1) * GRANULE_BYTES,
            threads: slot.threads.load(Ordering::Relaxed),
            lock: slot.lock.load(Ordering::Relaxed),
            flags: slot.flags.load(Ordering::Relaxed),
            sites: core::array::from_fn(|k| slot.sites[k].load(Ordering::Relaxed)),
            accesses: core::array::from_fn(|k| slot.accesses[k].load(Ordering::Relaxed)),
        };
        if lane.append(&record, &[]).is_none() {
            break;
        }
        summary.granules += 1;
    }
    // SAFETY: the summary this thread appended to its own lane above.
    unsafe { (*written).granules = summary.granules };
}
