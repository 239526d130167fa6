//! A thread's counters by lock id: a two-way set-associative cache in front
//! of the lane's hashed index, for threads that cycle through more locks
//! than the hot cache holds.
//!
//! Lock ids are handed out in order of first use, so a sweep over an array
//! of locks asks for consecutive ids; here consecutive ids are consecutive
//! sets (one cache line each), which the hardware prefetcher follows, where
//! the hashed index misses the cache on every lookup. Two ways per set keep
//! a lock taken at two lines (its own and a neighbour's, say) without
//! thrashing. Entries are only copies of index entries: a miss falls back to
//! the index, and an entry of a previous thread on this lane is told apart by
//! its tag, as in the index.

/// Sets: ids that differ by a multiple of this share a set (4 MiB per
/// thread, reserved when the thread's index first grows, touched as used).
pub const LOCK_SETS: usize = 1 << 16;

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

#[repr(C, align(64))]
pub struct LockSet {
    /// Most recently used first.
    ways: [Way; 2],
}

/// The cache of one lane: null until reserved.
pub struct ByLock {
    sets: *mut LockSet,
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
        if self.sets.is_null() {
            return None;
        }
        // SAFETY: masked into the reserved sets, which this lane's thread
        // alone uses while it holds the lane.
        Some(unsafe { &mut *self.sets.add(lock_id as usize & (LOCK_SETS - 1)) })
    }

    #[inline]
    pub fn find(&self, lock_id: u32, ret: u64, context: u64, tag: u32) -> Option<*mut u8> {
        let set = self.set(lock_id)?;
        let hit =
            |w: &Way| w.lock_id == lock_id && w.ret == ret && w.context == context && w.tag == tag;
        if hit(&set.ways[0]) {
            return Some(set.ways[0].record);
        }
        if hit(&set.ways[1]) {
            set.ways.swap(0, 1);
            return Some(set.ways[0].record);
        }
        None
    }

    /// Puts an index entry in front; the least recently used way goes.
    #[inline]
    pub fn remember(&self, lock_id: u32, ret: u64, context: u64, tag: u32, record: *mut u8) {
        if let Some(set) = self.set(lock_id) {
            set.ways[1] = set.ways[0];
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
    fn two_lines_per_lock_stay_and_a_third_evicts_the_least_recent() {
        let mut cache = ByLock::new();
        assert!(cache.find(7, 1, 0, 5).is_none(), "nothing before reserving");
        assert!(cache.reserve());
        let (a, b, c) = (0x10 as *mut u8, 0x20 as *mut u8, 0x30 as *mut u8);
        cache.remember(7, 100, 0, 5, a);
        cache.remember(7, 200, 0, 5, b);
        assert_eq!(cache.find(7, 100, 0, 5), Some(a));
        assert_eq!(cache.find(7, 200, 0, 5), Some(b));
        // Another thread on the lane (another tag) sees nothing.
        assert_eq!(cache.find(7, 100, 0, 6), None);
        // A third line evicts the least recently used (line 100).
        cache.remember(7, 300, 0, 5, c);
        assert_eq!(cache.find(7, 100, 0, 5), None);
        assert_eq!(cache.find(7, 200, 0, 5), Some(b));
        assert_eq!(cache.find(7, 300, 0, 5), Some(c));
        // Ids LOCK_SETS apart share a set.
        assert_eq!(cache.find(7 + LOCK_SETS as u32, 300, 0, 5), None);
    }
}
