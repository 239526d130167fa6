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
//! A thread whose locks do not fit (ids that share a set take more lines
//! than its ways hold, so lookups keep going on to the index) gets twice
//! the sets, up to `MAX_LOCK_SETS`: a fluid simulation's thread of 86,400
//! cell locks, each taken at three lines, missed here on nearly half its
//! operations with 65,536 sets. Whether to grow is judged from the share
//! of lookups that the index then answered (`refilled`; a lookup costs the
//! hit path one count); the ways are carried over into the new sets.
//!
//! The sets are made resident a page at a time, written before anything in
//! the page is read. A read of an untouched anonymous page maps the shared
//! zero page, and the first write after it must replace that mapping and
//! flush it from every CPU the process runs on: an interrupt to each, which
//! on a VM cost more than all the rest of a sweep's first sight of its locks.

use core::cell::Cell;

/// Sets at first: ids that differ by a multiple of this share a set (8 MiB
/// per thread, reserved when the thread's index first grows, touched as
/// used).
pub const LOCK_SETS: usize = 1 << 16;

/// The most sets a lane's cache grows to (32 MiB reserved, touched as used).
const MAX_LOCK_SETS: usize = 1 << 18;

/// Pages of the old sets given back at a time when the sets grow: the old
/// sets and the new are never resident in full together, and each release
/// (a TLB flush on every processor the process runs on; page by page, it
/// made a fluid kernel's short run 15 to 25 % slower) covers many.
const UNMAP_PAGES: usize = 64;

/// Lookups over which the index's share of the answers is judged.
const GROWTH_PERIOD: u64 = 1 << 16;

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
const PAGES: usize = MAX_LOCK_SETS / PAGE_SETS;

#[repr(C, align(64))]
pub struct LockSet {
    /// Most recently remembered first.
    ways: [Way; WAYS],
}

/// The cache of one lane: null until reserved.
pub struct ByLock {
    sets: *mut LockSet,
    /// The number of sets less one; 0 until reserved (a lane starts as
    /// zero bits, see `pool.rs`).
    mask: usize,
    /// Pages made resident (bit `set / PAGE_SETS`); an untouched page holds
    /// no way, so a lookup there reads nothing.
    touched: [Cell<u64>; PAGES / 64],
    /// Lookups in the current period, and misses the index then answered.
    looks: Cell<u64>,
    refills: Cell<u64>,
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
            mask: 0,
            touched: [const { Cell::new(0) }; PAGES / 64],
            looks: Cell::new(0),
            refills: Cell::new(0),
        }
    }

    /// Reserves the sets (zero-filled: no way is live, since tag 0 is never
    /// current). False if the mapping fails; the index still serves then.
    pub fn reserve(&mut self) -> bool {
        if self.sets.is_null() {
            match crate::recorder::base::mapped::map_anonymous::<LockSet>(
                LOCK_SETS * core::mem::size_of::<LockSet>(),
            ) {
                Some(p) => {
                    self.sets = p;
                    self.mask = LOCK_SETS - 1;
                    // Until now every lookup missed: no period judged yet.
                    self.looks.set(0);
                    self.refills.set(0);
                }
                None => return false,
            }
        }
        true
    }

    /// A lookup here missed and the index had the counter: true when, over
    /// the period just ended, the index answered more than one lookup in
    /// eight and the sets may still grow (then call [`grow`](Self::grow)).
    pub fn refilled(&self) -> bool {
        let refills = self.refills.get() + 1;
        self.refills.set(refills);
        let looks = self.looks.get();
        if looks < GROWTH_PERIOD {
            return false;
        }
        self.looks.set(0);
        self.refills.set(0);
        refills * 8 > looks && self.mask + 1 < MAX_LOCK_SETS && !self.sets.is_null()
    }

    /// Replaces the sets with twice as many, the ways carried over in
    /// their order (were they dropped, the lookups that filled them again
    /// would read as a cache too small, and grow it once more). False, the
    /// old sets kept, if the sets are not reserved or the mapping fails.
    #[cold]
    #[inline(never)]
    pub fn grow(&mut self) -> bool {
        if self.sets.is_null() {
            return false;
        }
        let (old, old_mask) = (self.sets, self.mask);
        let sets = ((old_mask + 1) * 2).min(MAX_LOCK_SETS);
        let Some(p) = crate::recorder::base::mapped::map_anonymous::<LockSet>(
            sets * core::mem::size_of::<LockSet>(),
        ) else {
            return false;
        };
        let old_touched =
            core::array::from_fn::<u64, { PAGES / 64 }, _>(|i| self.touched[i].take());
        self.sets = p;
        self.mask = sets - 1;
        let _errno = crate::diag::ErrnoGuard::save();
        let pages = (old_mask + 1) / PAGE_SETS;
        for chunk in (0..pages).step_by(UNMAP_PAGES) {
            let mut copied = false;
            for page in chunk..(chunk + UNMAP_PAGES).min(pages) {
                if old_touched[page / 64] & 1 << (page % 64) == 0 {
                    continue;
                }
                copied = true;
                for set in page * PAGE_SETS..(page + 1) * PAGE_SETS {
                    // SAFETY: a set of the previous mapping, on a page
                    // written before and not yet given back.
                    let ways = unsafe { (*old.add(set)).ways };
                    for way in ways.iter().rev().filter(|w| !w.record.is_null()) {
                        self.remember(way.lock_id, way.ret, way.context, way.tag, way.record);
                    }
                }
            }
            if copied {
                // Given back, not unmapped: a hole in the old sets could be
                // handed to another thread's mapping before the one unmap
                // below, which would then take it away from that thread.
                // SAFETY: pages of the previous sets, copied and no longer
                // referenced (lookups hand out record pointers, never ways);
                // refused, they stay resident until the unmap.
                let _ = unsafe {
                    crate::sys::madvise(
                        old.add(chunk * PAGE_SETS).cast(),
                        UNMAP_PAGES.min(pages - chunk) * 4096,
                        libc::MADV_DONTNEED,
                    )
                };
            }
        }
        // SAFETY: the previous sets, all copied, still reserved as a whole.
        unsafe { crate::sys::munmap(old.cast(), (old_mask + 1) * core::mem::size_of::<LockSet>()) };
        true
    }

    // The sets are behind a raw pointer this lane's thread alone uses, like
    // the grown index; `&self` keeps the lane's lookups shared-borrow.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    fn set(&self, lock_id: u32) -> Option<&mut LockSet> {
        let at = lock_id as usize & self.mask;
        // Also false before the sets are reserved (nothing is touched then).
        let page = at / PAGE_SETS;
        // Masked: `at` is within the sets, so the word is too (and the
        // compiler need not check).
        if self.touched[(page / 64) & (PAGES / 64 - 1)].get() & 1 << (page % 64) == 0 {
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
        let page = (lock_id as usize & self.mask) / PAGE_SETS;
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

    #[inline(always)]
    pub fn find(&self, lock_id: u32, ret: u64, context: u64, tag: u32) -> Option<*mut u8> {
        self.looks.set(self.looks.get() + 1);
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

    impl ByLock {
        /// A fresh period of `looks` lookups, `refills` of which the
        /// index answered, then one more answered: whether any says to
        /// grow.
        fn refilled_after(&self, looks: u64, refills: u64) -> bool {
            self.looks.set(0);
            self.refills.set(0);
            let every = looks / refills.max(1);
            let mut grow = false;
            for i in 0..looks {
                let _ = self.find(1, 1, 0, 1);
                if refills > 0 && i % every == every - 1 {
                    grow |= self.refilled();
                }
            }
            grow | self.refilled()
        }
    }

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
    fn growing_doubles_the_sets_and_keeps_every_way() {
        let mut cache = ByLock::new();
        assert!(!cache.grow(), "nothing to grow before reserving");
        assert!(cache.reserve());
        let (a, b) = (7, 7 + LOCK_SETS as u32);
        let far = (90 * PAGE_SETS + 1) as u32;
        let record = |id: u32, line: u64| ((u64::from(id) << 8) + line * 0x10) as *mut u8;
        // Two locks that share a set, two lines each: the set is full.
        for line in 1..=2 {
            cache.remember(a, line, 0, 5, record(a, line));
            cache.remember(b, line, 0, 5, record(b, line));
        }
        cache.remember(far, 1, 0, 5, record(far, 1));
        assert!(cache.grow());
        assert_eq!(cache.mask + 1, 2 * LOCK_SETS);
        for (id, line) in [(a, 1), (a, 2), (b, 1), (b, 2), (far, 1)] {
            assert_eq!(
                cache.find(id, line, 0, 5),
                Some(record(id, line)),
                "{id} at {line}"
            );
        }
        // Now apart: two more lines each, and all eight are there.
        for line in 3..=4 {
            cache.remember(a, line, 0, 5, record(a, line));
            cache.remember(b, line, 0, 5, record(b, line));
        }
        for id in [a, b] {
            for line in 1..=4 {
                assert_eq!(
                    cache.find(id, line, 0, 5),
                    Some(record(id, line)),
                    "{id} at {line}"
                );
            }
        }
        // Up to the most sets, then no further.
        assert!(cache.grow());
        assert_eq!(cache.mask + 1, MAX_LOCK_SETS);
        assert!(!cache.refilled_after(GROWTH_PERIOD, GROWTH_PERIOD));
        assert_eq!(cache.find(a, 4, 0, 5), Some(record(a, 4)));
    }

    /// Threads growing their caches at once, each while the others map
    /// memory of their own: no thread's growth gives back memory that
    /// another was given meanwhile (the old sets stay reserved until all
    /// of them go at once), so every way is still there, readable.
    #[test]
    fn caches_growing_at_once_in_several_threads_keep_their_memory() {
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                std::thread::spawn(move || {
                    for round in 0..12u32 {
                        let mut cache = ByLock::new();
                        assert!(cache.reserve());
                        let record = |id: u32| (u64::from(id) << 4 | 8) as *mut u8;
                        // Every page of the first sets written.
                        for id in (0..LOCK_SETS as u32).step_by(PAGE_SETS / 2) {
                            cache.remember(id, 1, 0, t + 1, record(id));
                        }
                        assert!(cache.grow());
                        assert!(cache.grow());
                        for id in (0..LOCK_SETS as u32).step_by(PAGE_SETS / 2) {
                            assert_eq!(
                                cache.find(id, 1, 0, t + 1),
                                Some(record(id)),
                                "thread {t}, round {round}, lock {id}"
                            );
                        }
                        // SAFETY: the test's own cache, dropped here.
                        unsafe {
                            libc::munmap(
                                cache.sets.cast(),
                                (cache.mask + 1) * core::mem::size_of::<LockSet>(),
                            )
                        };
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn the_sets_grow_when_the_index_answers_more_than_one_lookup_in_eight() {
        let mut cache = ByLock::new();
        assert!(
            !cache.refilled_after(GROWTH_PERIOD, GROWTH_PERIOD),
            "not reserved"
        );
        assert!(cache.reserve());
        assert!(!cache.refilled_after(GROWTH_PERIOD, GROWTH_PERIOD / 16));
        assert!(
            !cache.refilled_after(GROWTH_PERIOD / 2, GROWTH_PERIOD / 2),
            "judged over a whole period only"
        );
        assert!(cache.refilled_after(GROWTH_PERIOD, GROWTH_PERIOD / 4));
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
