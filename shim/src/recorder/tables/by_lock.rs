//! A thread's counters by lock id: a four-way set-associative cache in front
//! of the lane's hashed index, for threads that cycle through more locks
//! than the hot cache holds.
//!
//! Lock ids are handed out in order of first use, so a sweep over an array
//! of locks asks for consecutive ids; here consecutive ids are consecutive
//! sets (two cache lines each, the newest ways in the first), which
//! the hardware prefetcher follows, where the hashed index misses the cache
//! on every lookup. Four ways per set keep a lock taken at three lines (its
//! own twice and as a neighbour's, as a fluid simulation's cells are)
//! without thrashing: with two, every third operation of such a sweep went
//! to the index. Entries are only copies of index entries: a miss falls back to
//! the index, and an entry of a previous thread on this lane is told apart by
//! its tag, as in the index.
//!
//! The sets are made resident a page at a time, written before anything in
//! the page is read. A read of an untouched anonymous page maps the shared
//! zero page, and the first write after it must replace that mapping and
//! flush it from every CPU the process runs on: an interrupt to each, which
//! on a VM cost more than all the rest of a sweep's first sight of its locks.

use core::cell::Cell;

/// Sets: ids that differ by a multiple of this share a set (8 MiB per
/// thread, reserved when the thread's index first grows, touched as used).
pub const LOCK_SETS: usize = 1 << 16;

const WAYS: usize = 4;

#[derive(Clone, Copy)]
#[repr(C)]
struct Way {
    ret: u64,
    context: u64,
    lock_id: u32,
    /// As in the index: `generation << MODE_BITS | mode`.
    tag: u32,
    record: *mut u8,
}

/// Sets per 4 KiB page, one bit each page in `ByLock::touched`: a lane
/// that uses a few sets makes only their pages resident, as when the sets
/// were simply touched as used (chunks of 128 KiB made 32 threads of 3,000
/// locks each take 193 MiB instead of 139).
const PAGE_SETS: usize = 4096 / core::mem::size_of::<LockSet>();
const PAGES: usize = LOCK_SETS / PAGE_SETS;

#[repr(C, align(64))]
pub struct LockSet {
    /// Most recently remembered first.
    ways: [Way; WAYS],
}

/// The cache of one lane: null until reserved.
pub struct ByLock {
    sets: *mut LockSet,
    /// Pages made resident (bit `set / PAGE_SETS`); an untouched page holds
    /// no way, so a lookup there reads nothing.
    touched: [Cell<u64>; PAGES / 64],
}

impl Default for ByLock {
    fn default() -> Self {
        Self::new()
    }
}

impl ByLock {
    pub const fn new() -> Self {
        Self {
            sets: core::ptr::null_mut(),
            touched: [const { Cell::new(0) }; PAGES / 64],
        }
    }

    /// Reserves the sets (zero-filled: no way is live, since tag 0 is never
    /// current). False if the mapping fails; the index still serves then.
    pub fn reserve(&mut self) -> bool {
        if self.sets.is_null() {
            match crate::recorder::base::mapped::map_anonymous::<LockSet>(
                LOCK_SETS * core::mem::size_of::<LockSet>(),
            ) {
                Some(p) => self.sets = p,
                None => return false,
            }
        }
        true
    }

    // The sets are behind a raw pointer this lane's thread alone uses, like
    // the grown index; `&self` keeps the lane's lookups shared-borrow.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    fn set(&self, lock_id: u32) -> Option<&mut LockSet> {
        let at = lock_id as usize & (LOCK_SETS - 1);
        // Also false before the sets are reserved (nothing is touched then).
        let page = at / PAGE_SETS;
        if self.touched[page / 64].get() & 1 << (page % 64) == 0 {
            return None;
        }
        // SAFETY: masked into the reserved sets, which this lane's thread
        // alone uses while it holds the lane.
        Some(unsafe { &mut *self.sets.add(at) })
    }

    /// Makes the page holding `lock_id`'s set resident, written first (see
    /// the module's comment). False if the sets are not reserved.
    #[cold]
    #[inline(never)]
    fn touch(&self, lock_id: u32) -> bool {
        if self.sets.is_null() {
            return false;
        }
        let page = (lock_id as usize & (LOCK_SETS - 1)) / PAGE_SETS;
        // SAFETY: the page lies inside the reserved sets.
        let first = unsafe { self.sets.add(page * PAGE_SETS) };
        crate::recorder::base::mapped::populate(
            first.cast(),
            PAGE_SETS * core::mem::size_of::<LockSet>(),
        );
        let word = &self.touched[page / 64];
        word.set(word.get() | 1 << (page % 64));
        true
    }

    #[inline]
    pub fn find(&self, lock_id: u32, ret: u64, context: u64, tag: u32) -> Option<*mut u8> {
        let set = self.set(lock_id)?;
        let hit =
            |w: &Way| w.lock_id == lock_id && w.ret == ret && w.context == context && w.tag == tag;
        // A hit moves nothing: a lock taken at two lines in turn would move
        // a way on every call. So the oldest remembered goes first.
        set.ways.iter().find(|w| hit(w)).map(|w| w.record)
    }

    /// Puts an index entry in front; the oldest remembered way goes.
    #[inline]
    pub fn remember(&self, lock_id: u32, ret: u64, context: u64, tag: u32, record: *mut u8) {
        let set = match self.set(lock_id) {
            Some(set) => Some(set),
            None if self.touch(lock_id) => self.set(lock_id),
            None => None,
        };
        if let Some(set) = set {
            for i in (1..WAYS).rev() {
                set.ways[i] = set.ways[i - 1];
            }
            set.ways[0] = Way {
                ret,
                context,
                lock_id,
                tag,
                record,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_lines_per_lock_stay_and_a_fifth_evicts_the_oldest() {
        let mut cache = ByLock::new();
        assert!(cache.find(7, 1, 0, 5).is_none(), "nothing before reserving");
        assert!(cache.reserve());
        let record = |line: u64| (line * 0x10) as *mut u8;
        for line in 1..=4 {
            cache.remember(7, line, 0, 5, record(line));
        }
        for line in 1..=4 {
            assert_eq!(cache.find(7, line, 0, 5), Some(record(line)), "line {line}");
        }
        // Another thread on the lane (another tag) sees nothing.
        assert_eq!(cache.find(7, 1, 0, 6), None);
        // A fifth line evicts the first remembered.
        cache.remember(7, 5, 0, 5, record(5));
        assert_eq!(cache.find(7, 1, 0, 5), None);
        for line in 2..=5 {
            assert_eq!(cache.find(7, line, 0, 5), Some(record(line)), "line {line}");
        }
        // Ids LOCK_SETS apart share a set.
        assert_eq!(cache.find(7 + LOCK_SETS as u32, 5, 0, 5), None);
    }

    #[test]
    fn a_page_is_made_resident_by_its_first_write_and_not_by_a_lookup() {
        let mut cache = ByLock::new();
        assert!(cache.reserve());
        let touched = |cache: &ByLock| cache.touched.iter().map(Cell::get).collect::<Vec<_>>();
        let id = (70 * PAGE_SETS + 3) as u32;
        assert_eq!(cache.find(id, 1, 0, 5), None);
        assert!(
            touched(&cache).iter().all(|&w| w == 0),
            "a lookup touches nothing"
        );
        cache.remember(id, 1, 0, 5, 0x10 as *mut u8);
        let mut expected = vec![0; PAGES / 64];
        expected[1] = 1 << 6;
        assert_eq!(touched(&cache), expected, "only the page written to");
        assert_eq!(cache.find(id, 1, 0, 5), Some(0x10 as *mut u8));
        // The rest of the page reads as empty.
        assert_eq!(cache.find(id + 1, 1, 0, 5), None);
    }
}
