//! Lean mode's table of lines: one per thread, from (mutex address, return
//! address) straight to the lock's slot and the thread's counter for that
//! line, found in one probe as a rule (issue 37's per-thread line table,
//! for lean mode first). The hot cache serves the full mode, whose entries
//! also carry a call path; lean mode keys a call by its line alone, so an
//! entry is four words and the table can hold every line a thread uses,
//! not the last 64.
//!
//! Open addressing with linear probing, filled to half at most; entries are
//! only ever added, never moved or removed, so a look made outside the hook
//! (lean mode's quick path, which a signal handler's lock call may
//! interrupt) sees each entry either empty or whole: an entry is written
//! key last. The one change to a written entry is its counter and slot,
//! when the lock at its address was destroyed and made again (a new
//! identity, a new counter): each is one aligned store, and a look that
//! reads one old and one new finds the slot's identity and the counter's
//! apart, a miss. A `dlclose` needs no change: the key holds the module
//! epoch it was made in, so an entry of an earlier epoch is never found,
//! and the call is added afresh.
//!
//! A table full to half takes no more lines, and its thread's quick path
//! stops looking in it (a look that misses costs a probe run and a cache
//! line, paid again by every call of a thread with more lines than fit):
//! the hot cache serves that thread from then on, its second level looked
//! at outside the hook too (see `lean.rs`), as before the table existed. The table is mapped
//! at a thread's first lean engagement (512 KiB of address space, its
//! pages made resident as entries land on them) and kept with its lane; a
//! thread that takes over the lane clears it before its first use.

use crate::recorder::base::caller::epoch_key;
use crate::recorder::tables::objects::ObjectSlot;
use core::sync::atomic::{compiler_fence, AtomicU64, Ordering};
use locksuit_format::CounterRecord;

/// Entries per table (a power of two).
const LINES: usize = 1 << 14;
/// Entries a table takes before it refuses more (half: probe runs stay short).
const MOST_LINES: u32 = (LINES / 2) as u32;

/// One line: all zero is empty (no lock lives at address 0).
#[repr(C, align(32))]
pub struct LeanLine {
    addr: AtomicU64,
    /// The return address, with the module epoch it was seen in above bit
    /// 48 (see [`epoch_key`]).
    key: AtomicU64,
    slot: AtomicU64,
    counter: AtomicU64,
}

/// A line's first place: the top bits of a product (the hot cache's
/// multiplier, which spreads arrays of locks at every stride).
#[inline(always)]
fn home(addr: u64, ret: u64) -> usize {
    ((addr ^ ret).wrapping_mul(0xe22b_64a6_6d32_a901) >> (64 - LINES.trailing_zeros())) as usize
}

/// What a line leads to.
pub struct LineTarget {
    pub slot: &'static ObjectSlot,
    pub counter: *mut u8,
}

impl LeanLine {
    /// The mutex this line is of.
    #[inline(always)]
    pub fn addr(&self) -> u64 {
        self.addr.load(Ordering::Relaxed)
    }

    /// Where the line leads: read again after the look (a line's key never
    /// changes; its target only for a lock made again at its address).
    #[inline(always)]
    pub fn target(&self) -> LineTarget {
        let slot = self.slot.load(Ordering::Relaxed) as *const ObjectSlot;
        // SAFETY: a written line's slot is a lock table slot, which lives
        // as long as the process.
        LineTarget {
            slot: unsafe { &*slot },
            counter: self.counter.load(Ordering::Relaxed) as *mut u8,
        }
    }
}

/// Finds the line of a call in `lines` (a table of [`LINES`] entries), or
/// `None`: not there, or the lock at `addr` is another since the line was
/// written. Reads only; safe outside the hook (see the module's comment).
///
/// # Safety
/// `lines` must be a table this module made, mapped for this thread.
#[inline(always)]
pub unsafe fn find(lines: *const LeanLine, addr: u64, ret: u64) -> Option<&'static LeanLine> {
    let key = epoch_key(ret);
    let mut at = home(addr, ret);
    loop {
        // SAFETY: `at` is masked into the table, which the caller vouches
        // for; a table lives as long as its lane.
        let line: &'static LeanLine = unsafe { &*lines.add(at) };
        let found = line.addr.load(Ordering::Relaxed);
        if found == addr && line.key.load(Ordering::Relaxed) == key {
            // Written key last: what follows the key was there before it.
            compiler_fence(Ordering::Acquire);
            let target = line.target();
            // SAFETY: a written line's counter is this thread's
            // `CounterRecord` in its lane.
            let counter_lock = unsafe {
                *target
                    .counter
                    .add(core::mem::offset_of!(CounterRecord, lock_id))
                    .cast::<u32>()
            };
            return (target.slot.id() == counter_lock).then_some(line);
        }
        if found == 0 {
            return None;
        }
        at = (at + 1) & (LINES - 1);
    }
}

/// A lane's table of lines, as its lane keeps it.
pub struct LeanLines {
    /// The table, or null until this lane's first lean engagement.
    lines: *mut LeanLine,
    /// Entries written.
    used: u32,
    /// The lane was taken by another thread since the entries were
    /// written: they lead to the previous thread's counters.
    stale: bool,
    /// The table could not be mapped: not asked again (the general way
    /// serves this lane).
    unavailable: bool,
}

impl LeanLines {
    /// An empty one (a lane's is all zero bits, as its lane is made).
    #[cfg(test)]
    fn new() -> LeanLines {
        LeanLines {
            lines: core::ptr::null_mut(),
            used: 0,
            stale: false,
            unavailable: false,
        }
    }

    /// Another thread takes the lane over: the entries are cleared before
    /// its first use of the table (not now: this may be a thread that never
    /// takes a lean mutex).
    pub fn new_thread(&mut self) {
        self.stale = self.used != 0;
        self.unavailable = false;
    }

    /// The table for the lane's current thread to look in, made or
    /// cleared first if need be; null if it cannot be had (no memory, or
    /// the process may make no system call: the general way serves).
    pub fn table(&mut self) -> *const LeanLine {
        if self.lines.is_null() {
            if self.unavailable {
                return core::ptr::null();
            }
            let bytes = LINES * core::mem::size_of::<LeanLine>();
            match crate::recorder::base::mapped::map_anonymous_zeroed_in_child(bytes) {
                Some(p) => self.lines = p,
                None => {
                    self.unavailable = true;
                    return core::ptr::null();
                }
            }
        } else if self.stale {
            // No look of this thread's can be under way in the table: the
            // thread has not been given it yet.
            // SAFETY: the table is ours; its entries were the previous
            // thread's, and are written over with zeros.
            unsafe { core::ptr::write_bytes(self.lines, 0, LINES) };
            self.used = 0;
            self.stale = false;
        }
        self.lines
    }

    /// Whether the table takes no more lines.
    pub fn full(&self) -> bool {
        self.used >= MOST_LINES && !self.stale
    }

    /// Adds the line of a call taken the general way, or points it at the
    /// lock's new identity. Called in the hook, by the lane's thread.
    pub fn remember(&mut self, (addr, ret): (u64, u64), slot: &ObjectSlot, counter: *mut u8) {
        // A full table is not looked through again for each call it
        // refuses (a lock made again at a line it holds is then found the
        // general way too).
        if self.full() {
            return;
        }
        let lines = self.table().cast_mut();
        if lines.is_null() {
            return;
        }
        let key = epoch_key(ret);
        let mut at = home(addr, ret);
        loop {
            // SAFETY: `at` is masked into the table, which is ours.
            let line = unsafe { &*lines.add(at) };
            let found = line.addr.load(Ordering::Relaxed);
            if found == addr && line.key.load(Ordering::Relaxed) == key {
                // The lock was made again: a look that reads one of these
                // new and the other old finds them apart (see above).
                line.counter.store(counter as u64, Ordering::Relaxed);
                line.slot.store(slot as *const _ as u64, Ordering::Relaxed);
                return;
            }
            if found == 0 {
                line.slot.store(slot as *const _ as u64, Ordering::Relaxed);
                line.counter.store(counter as u64, Ordering::Relaxed);
                compiler_fence(Ordering::Release);
                line.key.store(key, Ordering::Relaxed);
                compiler_fence(Ordering::Release);
                line.addr.store(addr, Ordering::Relaxed);
                self.used += 1;
                return;
            }
            at = (at + 1) & (LINES - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot() -> &'static ObjectSlot {
        // SAFETY: a slot of all zero bits is an unused one (atomics only).
        Box::leak(Box::new(unsafe { core::mem::zeroed::<ObjectSlot>() }))
    }

    fn look(table: *const LeanLine, addr: u64, ret: u64) -> Option<&'static LeanLine> {
        // SAFETY: tables of `LeanLines::table`, which these tests keep.
        unsafe { find(table, addr, ret) }
    }

    /// A counter record as the lane writes one, of lock `lock_id`.
    fn counter(lock_id: u32) -> *mut u8 {
        // SAFETY: a record of all zero bits is an empty one (integers only).
        let record: &mut CounterRecord = Box::leak(Box::new(unsafe { core::mem::zeroed() }));
        record.lock_id = lock_id;
        (record as *mut CounterRecord).cast()
    }

    #[test]
    fn a_line_is_found_until_its_lock_is_another() {
        let mut lines = LeanLines::new();
        let s = slot();
        s.ident.store(7, Ordering::Relaxed);
        let c = counter(7);
        lines.remember((0x1000, 0x4000), s, c);
        let table = lines.table();
        let hit = look(table, 0x1000, 0x4000).expect("found");
        assert_eq!(hit.target().counter, c);
        assert_eq!(hit.addr(), 0x1000);
        assert!(look(table, 0x1000, 0x4008).is_none());
        // Destroyed and made again: the old counter is not found.
        s.ident.store(8, Ordering::Relaxed);
        assert!(look(table, 0x1000, 0x4000).is_none());
        let c2 = counter(8);
        lines.remember((0x1000, 0x4000), s, c2);
        assert_eq!(look(table, 0x1000, 0x4000).unwrap().target().counter, c2);
    }

    #[test]
    fn thousands_of_lines_fit_and_a_full_table_refuses_more() {
        let mut lines = LeanLines::new();
        let s = slot();
        s.ident.store(3, Ordering::Relaxed);
        let c = counter(3);
        // An array of locks 40 bytes apart, taken at two lines.
        for i in 0..MOST_LINES as u64 {
            lines.remember((0x10_0000 + 40 * (i / 2), 0x4000 + 8 * (i % 2)), s, c);
        }
        let table = lines.table();
        for i in 0..MOST_LINES as u64 {
            let (addr, ret) = (0x10_0000 + 40 * (i / 2), 0x4000 + 8 * (i % 2));
            assert!(look(table, addr, ret).is_some(), "line {i}");
        }
        lines.remember((0x8, 0x4000), s, c);
        assert!(look(table, 0x8, 0x4000).is_none());
        // Another thread takes the lane: nothing of the last one's is found.
        lines.new_thread();
        let table = lines.table();
        assert!(look(table, 0x10_0000, 0x4000).is_none());
    }
}
