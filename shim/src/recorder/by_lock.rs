//! A thread's counters by lock id: a four-way set-associative cache in front
//! of the lane's hashed index, for threads that cycle through more locks
//! than the hot cache holds.
//!
//! Lock ids are handed out in order of first use, so a sweep over an array
//! of locks asks for consecutive ids; here consecutive ids are consecutive
//! sets (two cache lines each, the most recent ways in the first), which
//! the hardware prefetcher follows, where the hashed index misses the cache
//! on every lookup. Four ways per set keep a lock taken at three lines (its
//! own twice and as a neighbour's, as a fluid simulation's cells are)
//! without thrashing: with two, every third operation of such a sweep went
//! to the index. Entries are only copies of index entries: a miss falls back to
//! the index, and an entry of a previous thread on this lane is told apart by
//! its tag, as in the index.
//!
//! The sets are made resident a chunk at a time, written before anything in
//! the chunk is read. A read of an untouched anonymous page maps the shared
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

/// Sets per chunk: 64 chunks of 128 KiB, one bit each in `ByLock::touched`.
const CHUNK_SETS: usize = LOCK_SETS / 64;

#[repr(C, align(64))]
pub struct LockSet {
    /// Most recently used first.
    ways: [Way; WAYS],
}

/// The cache of one lane: null until reserved.
pub struct ByLock {
    sets: *mut LockSet,
    /// Chunks made resident (bit `set / CHUNK_SETS`); an untouched chunk
    /// holds no way, so a lookup there reads nothing.
    touched: Cell<u64>,
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
            touched: Cell::new(0),
        }
    }

    /// Reserves the sets (zero-filled: no way is live, since tag 0 is never
    /// current). False if the mapping fails; the index still serves then.
    pub fn reserve(&mut self) -> bool {
        if self.sets.is_null() {
            match super::mapped::map_anonymous::<LockSet>(
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
        if self.touched.get() & 1 << (at / CHUNK_SETS) == 0 {
            return None;
        }
        // SAFETY: masked into the reserved sets, which this lane's thread
        // alone uses while it holds the lane.
        Some(unsafe { &mut *self.sets.add(at) })
    }

    /// Makes the chunk holding `lock_id`'s set resident, written first (see
    /// the module's comment). False if the sets are not reserved.
    #[cold]
    #[inline(never)]
    fn touch(&self, lock_id: u32) -> bool {
        if self.sets.is_null() {
            return false;
        }
        let chunk = (lock_id as usize & (LOCK_SETS - 1)) / CHUNK_SETS;
        // SAFETY: the chunk lies inside the reserved sets.
        let first = unsafe { self.sets.add(chunk * CHUNK_SETS) };
        super::mapped::populate(first.cast(), CHUNK_SETS * core::mem::size_of::<LockSet>());
        self.touched.set(self.touched.get() | 1 << chunk);
        true
    }

    #[inline]
    pub fn find(&self, lock_id: u32, ret: u64, context: u64, tag: u32) -> Option<*mut u8> {
        let set = self.set(lock_id)?;
        let hit =
            |w: &Way| w.lock_id == lock_id && w.ret == ret && w.context == context && w.tag == tag;
        if hit(&set.ways[0]) {
            return Some(set.ways[0].record);
        }
        let at = (1..WAYS).find(|&i| hit(&set.ways[i]))?;
        // Moved to the front, the ones before it down one.
        let found = set.ways[at];
        for i in (1..=at).rev() {
            set.ways[i] = set.ways[i - 1];
        }
        set.ways[0] = found;
        Some(found.record)
    }

    /// Puts an index entry in front; the least recently used way goes.
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
    fn four_lines_per_lock_stay_and_a_fifth_evicts_the_least_recent() {
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
        // Line 1 used again: line 2 is now the least recently used, and a
        // fifth line evicts it.
        assert_eq!(cache.find(7, 1, 0, 5), Some(record(1)));
        cache.remember(7, 5, 0, 5, record(5));
        assert_eq!(cache.find(7, 2, 0, 5), None);
        for line in [1, 3, 4, 5] {
            assert_eq!(cache.find(7, line, 0, 5), Some(record(line)), "line {line}");
        }
        // Ids LOCK_SETS apart share a set.
        assert_eq!(cache.find(7 + LOCK_SETS as u32, 5, 0, 5), None);
    }

    #[test]
    fn a_chunk_is_made_resident_by_its_first_write_and_not_by_a_lookup() {
        let mut cache = ByLock::new();
        assert!(cache.reserve());
        let id = (5 * CHUNK_SETS + 3) as u32;
        assert_eq!(cache.find(id, 1, 0, 5), None);
        assert_eq!(cache.touched.get(), 0, "a lookup touches nothing");
        cache.remember(id, 1, 0, 5, 0x10 as *mut u8);
        assert_eq!(cache.touched.get(), 1 << 5, "only the chunk written to");
        assert_eq!(cache.find(id, 1, 0, 5), Some(0x10 as *mut u8));
        // The rest of the chunk reads as empty.
        assert_eq!(cache.find(id + 1, 1, 0, 5), None);
    }
}
