//! Data-level suitability: what critical sections touch (programs built
//! with `locksuit cc`, whose every load and store calls the shim). Each
//! 8-byte granule accessed while the thread held a lock gets a slot in a
//! process-wide table: the threads that touched it (a bit each, by
//! registration order), the lines whose critical sections did (the site
//! that took the innermost held lock) with their access counts, and
//! whether it was written. That lives in an `AccessRecord` in the trace,
//! written by the thread that first touched the granule and updated in
//! place by every thread (so it survives the process's death, like the
//! counters); the slot only finds it. The analyzer decides from them which
//! lines guard data other threads share and which guard data only one
//! thread ever touches.
//!
//! The table is lock-free open addressing over a lazily touched anonymous
//! mapping of bounded size; a granule that finds no room is counted as
//! dropped. Accesses by a thread holding no lock stop at one test.
//!
//! A heap block freed (liblocksuit_cov.so tells, see `block_freed`) retires
//! its granules: their records (marked freed) keep what they saw, and their
//! slots are freed, so a block allocated later at the same address (by
//! another thread, say) is a new resource and does not look shared.
//!
//! The granule table itself (where a granule's slot is, claiming it) is
//! `table.rs`; this file is what an access records.

mod table;

use table::{find, slot_of, table, Slot, CLAIMING_FOREIGN, PROBES, SLOTS, TABLE, TOMB};

use crate::config;
use crate::recorder::tables::held::HeldEntry;
use crate::recorder::tables::lanes::Lane;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use locksuit_format::*;

/// A thread's stack above the current frame is believed only this deep.
const MAX_STACK: u64 = 64 << 20;

/// An `AccessRecord` in the trace, as the threads that update it see it.
#[repr(C)]
struct LiveRecord {
    hdr: [u32; 2],
    address: AtomicU64,
    threads: AtomicU64,
    lock: AtomicU32,
    flags: AtomicU32,
    sites: [AtomicU32; ACCESS_SITES],
    accesses: [AtomicU32; ACCESS_SITES],
    /// Written before the record is published, never after.
    alloc_pc: u64,
    alloc_epoch: u32,
    _pad: u32,
}

const _: () = {
    assert!(core::mem::size_of::<LiveRecord>() == core::mem::size_of::<AccessRecord>());
    assert!(
        core::mem::offset_of!(LiveRecord, threads) == core::mem::offset_of!(AccessRecord, threads)
    );
    assert!(core::mem::offset_of!(LiveRecord, sites) == core::mem::offset_of!(AccessRecord, sites));
    assert!(
        core::mem::offset_of!(LiveRecord, accesses)
            == core::mem::offset_of!(AccessRecord, accesses)
    );
};

/// `Slot::record` when the trace had no room for the granule's record.
const NO_ROOM: *mut LiveRecord = core::ptr::dangling_mut::<LiveRecord>();
/// How long a thread waits for another (to publish a record it is writing,
/// or to finish claiming a slot): spins, then yields, then gives up.
const WAIT_SPINS: u32 = 1000;
const WAIT_YIELDS: u32 = 100;

/// One round of such a wait: false once it is time to give up.
fn wait_round(round: u32) -> bool {
    if round >= WAIT_SPINS + WAIT_YIELDS {
        return false;
    }
    if round < WAIT_SPINS {
        core::hint::spin_loop();
    } else {
        crate::sys::sched_yield();
    }
    true
}

/// The 4 KiB pages that hold a granule of the table, so that freeing a
/// block looks only at pages where something was recorded: open
/// addressing, `page + 1` per entry (512 KiB reserved).
const PAGE_SLOTS: usize = 1 << 16;
static PAGES: AtomicPtr<AtomicU64> = AtomicPtr::new(core::ptr::null_mut());
/// The page set was full once: a freed block is then searched granule by
/// granule, up to `SEARCHED_MAX` bytes of it.
static PAGES_FULL: AtomicBool = AtomicBool::new(false);
const SEARCHED_MAX: u64 = 64 << 10;
static ACCESSES: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Threads registered so far: each gets the next bit.
static THREADS: AtomicU32 = AtomicU32::new(0);

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
        let _ = unsafe {
            crate::sys::madvise(
                t.cast(),
                SLOTS * core::mem::size_of::<Slot>(),
                libc::MADV_DONTNEED,
            )
        };
    }
    let pages = PAGES.load(Ordering::Acquire);
    if !pages.is_null() {
        // SAFETY: as above.
        let _ = unsafe { crate::sys::madvise(pages.cast(), PAGE_SLOTS * 8, libc::MADV_DONTNEED) };
    }
    PAGES_FULL.store(false, Ordering::Relaxed);
    // A thread of the parent may have been claiming; it is not in the child.
    CLAIMING_FOREIGN.store(false, Ordering::Relaxed);
    ACCESSES.store(0, Ordering::Relaxed);
    DROPPED.store(0, Ordering::Relaxed);
    THREADS.store(0, Ordering::Relaxed);
}

/// The record of a granule whose slot was just claimed: written into the
/// claiming thread's lane, then published.
fn new_record(lane: &mut Lane, slot: &Slot, key: u64) -> *mut LiveRecord {
    let address = (key - 1) * GRANULE_BYTES;
    let alloc_pc = crate::recorder::tables::heap::allocated_by(address);
    if alloc_pc != 0 {
        // The allocating line's module, so the analyzer can name it.
        crate::recorder::identities::modules::ensure_covered(lane, &[alloc_pc]);
    }
    let record = AccessRecord {
        hdr: RecordHeader {
            kind: RecordKind::Access as u16,
            size: core::mem::size_of::<AccessRecord>() as u16,
            aux: 0,
        },
        address,
        alloc_pc,
        alloc_epoch: crate::recorder::base::caller::epoch(),
        ..Default::default()
    };
    let written = match lane.append(&record, &[]) {
        // Records are 8-byte aligned in their blocks; the atomics need it.
        Some(at) if (at as usize).is_multiple_of(8) => at.cast::<LiveRecord>(),
        _ => NO_ROOM,
    };
    slot.record.store(written, Ordering::Release);
    written
}

/// The record of a granule another thread claimed: published at once
/// unless that thread is between its claim and its write (which may grow
/// the trace: then this one yields the processor for a while).
fn published(slot: &Slot) -> *mut LiveRecord {
    let mut round = 0;
    loop {
        let record = slot.record.load(Ordering::Acquire);
        if !record.is_null() {
            return record;
        }
        if !wait_round(round) {
            return NO_ROOM;
        }
        round += 1;
    }
}

fn page_hash(page: u64) -> usize {
    (page.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 48) as usize
}

/// Granule `key` got a slot: its page joins the page set.
fn note_page(key: u64) {
    let page = ((key - 1) * GRANULE_BYTES) >> 12;
    let Some(pages) = crate::recorder::base::mapped::mapped_once(&PAGES, PAGE_SLOTS * 8) else {
        PAGES_FULL.store(true, Ordering::Relaxed);
        return;
    };
    let home = page_hash(page);
    for i in 0..PROBES {
        // SAFETY: the index is masked into the page set.
        let entry = unsafe { &*pages.add((home + i) & (PAGE_SLOTS - 1)) };
        match entry.compare_exchange(0, page + 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(now) if now == page + 1 => return,
            Err(_) => {}
        }
    }
    PAGES_FULL.store(true, Ordering::Relaxed);
}

/// Whether page `page` holds a granule of the table (or may: the set was
/// full once).
fn page_noted(page: u64) -> bool {
    let pages = PAGES.load(Ordering::Acquire);
    if pages.is_null() {
        return false;
    }
    let home = page_hash(page);
    for i in 0..PROBES {
        // SAFETY: the index is masked into the page set.
        let entry = unsafe { &*pages.add((home + i) & (PAGE_SLOTS - 1)) };
        match entry.load(Ordering::Acquire) {
            0 => return false,
            cur if cur == page + 1 => return true,
            _ => {}
        }
    }
    false
}

/// The heap block of `size` bytes at `address` was freed: its granules'
/// slots retire (see the module's comment), and it leaves the live blocks.
pub fn block_freed(address: u64, size: u64) {
    crate::recorder::tables::heap::block_gone(address);
    let table = TABLE.load(Ordering::Acquire);
    if table.is_null() || size == 0 {
        return;
    }
    let end = address.saturating_add(size);
    let searched = PAGES_FULL.load(Ordering::Relaxed) && size <= SEARCHED_MAX;
    for page in address >> 12..=(end - 1) >> 12 {
        if !searched && !page_noted(page) {
            continue;
        }
        let from = address.max(page << 12) / GRANULE_BYTES;
        let to = end.min((page + 1) << 12).div_ceil(GRANULE_BYTES);
        for granule in from..to {
            if let Some(slot) = find(table, granule + 1) {
                let record = slot.record.load(Ordering::Acquire);
                if !record.is_null() && record != NO_ROOM {
                    // SAFETY: a published record, as in `touched`.
                    unsafe { &*record }
                        .flags
                        .fetch_or(ACCESS_FREED, Ordering::Relaxed);
                }
                // The record keeps what was seen; the slot is free again
                // (emptied before it is marked, so a new claimer finds it
                // empty).
                slot.record.store(core::ptr::null_mut(), Ordering::Release);
                slot.key.store((granule + 1) | TOMB, Ordering::Release);
            }
        }
    }
}

/// Whether `address` is in the calling thread's own locals (between here
/// and its stack's top), which are not data: every thread has its own.
/// Only a believable range counts (not after a fork from another thread,
/// nor on a coroutine's stack).
#[inline(always)]
fn own_local(lane: &Lane, address: u64) -> bool {
    let here = core::ptr::addr_of!(lane) as u64;
    let believable = lane.stack_top > here && lane.stack_top - here <= MAX_STACK;
    believable && address >= here && address < lane.stack_top
}

/// Whether a granule was touched under a lock yet: before, a store made
/// holding no lock has nothing to look up.
#[inline(always)]
pub fn recorded_any() -> bool {
    !TABLE.load(Ordering::Relaxed).is_null()
}

/// The calling thread stored to `address` holding no lock: if the granule
/// was touched under a lock, it is marked written without one (whichever
/// thread did it, and whenever: a read-only verdict must not stand on it).
pub fn stored_unlocked(lane: &Lane, address: u64) {
    let table = TABLE.load(Ordering::Acquire);
    if table.is_null() || own_local(lane, address) {
        return;
    }
    let Some(slot) = find(table, address / GRANULE_BYTES + 1) else {
        return;
    };
    let record = slot.record.load(Ordering::Acquire);
    if record.is_null() || record == NO_ROOM {
        return; // its first toucher is still writing it: a rare miss
    }
    // SAFETY: a published record, as in `touched`.
    let flags = unsafe { &(*record).flags };
    if flags.load(Ordering::Relaxed) & ACCESS_WRITTEN_UNLOCKED == 0 {
        flags.fetch_or(ACCESS_WRITTEN_UNLOCKED, Ordering::Relaxed);
    }
}

/// Whether this access to the engagement of `held`, `depth` deep in the
/// held stack (from 1), is recorded: in the first `DATA_SAMPLE_FIRST` of
/// its line's engagements of the lock on this thread, then one in
/// `LOCKSUIT_DATA_SAMPLE` (see `config`), and among the first
/// `DATA_SAMPLE_ACCESSES` of the engagement.
#[inline]
pub fn sampled(lane: &mut Lane, held: &HeldEntry, depth: usize) -> bool {
    let every = config::data_sample_every();
    if every <= 1 || held.counter.is_null() {
        return true;
    }
    // SAFETY: a counter record of this thread's lane, in the live mapping.
    let n = unsafe { (*held.counter).engagements };
    if n > u64::from(config::DATA_SAMPLE_FIRST) && n % u64::from(every) != 0 {
        return false;
    }
    // SAFETY: as above.
    let site = unsafe { (*held.counter).site_id };
    let tally = crate::recorder::features::ratios::tally_at(lane, depth, (held.counter, site));
    tally.sampled = tally.sampled.saturating_add(1);
    tally.sampled <= config::DATA_SAMPLE_ACCESSES
}

/// The calling thread (its lane) touched `address` while holding `held`
/// innermost, `depth` deep in its held stack; `write` for a store.
pub fn touched(lane: &mut Lane, (held, depth): (&HeldEntry, usize), address: u64, write: bool) {
    if own_local(lane, address) {
        return;
    }
    // Counted per thread: one shared counter would bounce between cores.
    lane.accesses += 1;
    let Some(table) = table() else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let key = address / GRANULE_BYTES + 1;
    let Some((slot, new)) = slot_of(table, key) else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let record = match slot.record.load(Ordering::Acquire) {
        r if !r.is_null() => r,
        _ if new => new_record(lane, slot, key),
        _ => published(slot),
    };
    if record == NO_ROOM {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // SAFETY: a published record in the live trace mapping, 8-byte aligned,
    // updated only through atomics.
    let slot = unsafe { &*record };
    // Loads before stores: a granule touched again and again by the same
    // thread and line is only read, and its cache line stays shared.
    let threads = slot.threads.load(Ordering::Relaxed);
    if threads & lane.access_bit == 0 {
        slot.threads.fetch_or(lane.access_bit, Ordering::Relaxed);
    }
    // Suitable now: another thread touched it under a lock before.
    let suitable = threads & !lane.access_bit != 0;
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
    crate::recorder::features::ratios::count(lane, depth, (held.counter, site), suitable);
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

/// A thread ends (or the process does): its count joins the total, and
/// its last engagement its site's ratios.
pub fn thread_done(lane: &mut Lane) {
    crate::recorder::features::ratios::finish(lane);
    ACCESSES.fetch_add(core::mem::take(&mut lane.accesses), Ordering::Relaxed);
}

/// At process exit: the totals (the granules' records are in the trace
/// since each was first touched).
pub fn write_all(lane: &mut Lane) {
    thread_done(lane);
    // Threads still running: their counts as they stand.
    let mut running = 0u64;
    let own = lane.id;
    crate::recorder::tables::lanes::for_each_active(|other| {
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
    // The records are in the trace already; count them.
    for i in 0..SLOTS {
        // SAFETY: index inside the table.
        let slot = unsafe { &*table.add(i) };
        let record = slot.record.load(Ordering::Acquire);
        if !record.is_null() && record != NO_ROOM {
            summary.granules += 1;
        }
    }
    // SAFETY: the summary this thread appended to its own lane above.
    unsafe { (*written).granules = summary.granules };
}

#[cfg(test)]
mod tests;
