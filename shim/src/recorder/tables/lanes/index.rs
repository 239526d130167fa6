//! A lane's private index from (lock, call site, mode) to the record its
//! thread updates in place: open addressing with bounded neighbourhoods,
//! inline in the lane at first, grown into a mapping of its own off the
//! hot path, evicting the least used entry when a neighbourhood is full.

use super::*;

fn index_hash(ret: u64, context: u64, lock_id: u32, mode: u32) -> usize {
    let key = ret
        ^ context.rotate_left(29)
        ^ ((lock_id as u64) << 32 | mode as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // A full finaliser (murmur3's). One multiply, taking the product's high
    // half, left runs of live slots long enough to fill a 128-slot
    // neighbourhood of a half-empty index in some runs of a kernel that
    // takes a lock per grid cell at three lines (an eviction, and a counter
    // restarted every sweep). Callers mask to their index size.
    let mut h = key ^ (key >> 33);
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    (h ^ (h >> 33)) as usize
}

impl Lane {
    /// Whether an index slot belongs to this lane's current thread (any mode).
    #[inline]
    fn live(&self, slot: &IndexSlot) -> bool {
        slot.tag & !MODE_MASK == self.tag_base
    }

    /// The counter of (lock, line, mode) from the by-lock cache, if there.
    #[inline(always)]
    pub fn find_by_lock(&self, lock_id: u32, ret: u64, context: u64, mode: u32) -> Option<*mut u8> {
        self.by_lock.find(lock_id, ret, context, self.tag(mode))
    }

    #[inline]
    pub fn remember_by_lock(
        &self,
        lock_id: u32,
        ret: u64,
        context: u64,
        mode: u32,
        record: *mut u8,
    ) {
        self.by_lock
            .remember(lock_id, ret, context, self.tag(mode), record);
    }

    /// The index answered a lookup the by-lock cache missed: the cache
    /// grows if that has become common (see `by_lock.rs`).
    #[inline]
    pub fn refilled_by_lock(&mut self) {
        if self.by_lock.refilled() {
            let _grown = timed_slow_work(self, |lane| lane.by_lock.grow());
        }
    }

    #[inline]
    pub fn find(&self, lock_id: u32, ret: u64, context: u64, mode: u32) -> Option<*mut u8> {
        let tag = self.tag(mode);
        let home = index_hash(ret, context, lock_id, mode);
        for i in 0..PROBES {
            let slot = self.index_slot((home + i) & self.index_mask);
            if slot.ret == ret
                && slot.context == context
                && slot.lock_id == lock_id
                && slot.tag == tag
            {
                return Some(slot.record);
            }
            if !self.live(slot) {
                // Entries are never removed within a generation, so a free
                // slot ends the probe sequence.
                return None;
            }
        }
        None
    }

    /// Indexes a record. When the whole neighbourhood is live, the entry
    /// whose record has seen the least use is evicted (its record stays in
    /// the trace; the analyzer sums duplicates), so hot lines stay findable
    /// even after the trace is full and no new record can be written.
    pub fn insert(&mut self, lock_id: u32, ret: u64, context: u64, mode: u32, record: *mut u8) {
        let entry = IndexSlot {
            ret,
            context,
            lock_id,
            tag: self.tag(mode),
            record,
        };
        if (self.index_live + 1) * 2 > self.index_mask + 1 {
            // Half full: lookups would start to walk long runs of live
            // slots (each a cache line further).
            self.grow_index();
        }
        if self.try_insert(entry, false) || (self.grow_index() && self.try_insert(entry, false)) {
            self.index_live += 1;
            return;
        }
        self.try_insert(entry, true);
    }

    /// Puts `entry` in a free slot of its neighbourhood, or with `evict`,
    /// over the least-used one. Returns whether it was placed.
    fn try_insert(&mut self, entry: IndexSlot, evict: bool) -> bool {
        let home = index_hash(
            entry.ret,
            entry.context,
            entry.lock_id,
            entry.tag & MODE_MASK,
        );
        let mut coldest = (u64::MAX, home & self.index_mask);
        for i in 0..PROBES {
            let at = (home + i) & self.index_mask;
            let slot = self.index_slot(at);
            if !self.live(slot) {
                *self.index_slot_mut(at) = entry;
                return true;
            }
            let uses = record_uses(slot.tag & MODE_MASK, slot.record);
            if uses < coldest.0 {
                coldest = (uses, at);
            }
        }
        if evict {
            *self.index_slot_mut(coldest.1) = entry;
        }
        evict
    }

    /// The index in use: the inline one, or the grown mapping.
    fn index_base(&self) -> *const IndexSlot {
        if self.big_index.is_null() {
            self.index.as_ptr()
        } else {
            self.big_index
        }
    }

    #[inline]
    fn index_slot(&self, at: usize) -> &IndexSlot {
        // SAFETY: masked by `index_mask`, which is the size of the index in
        // use minus one (INDEX_SLOTS - 1 for the inline one).
        unsafe { &*self.index_base().add(at & self.index_mask) }
    }

    fn index_slot_mut(&mut self, at: usize) -> &mut IndexSlot {
        let at = at & self.index_mask;
        if self.big_index.is_null() {
            &mut self.index[at]
        } else {
            // SAFETY: as in index_slot; this lane's own mapping.
            unsafe { &mut *self.big_index.add(at) }
        }
    }

    /// Moves the index to a mapping `INDEX_GROWTH` times larger, so threads
    /// that engage many locks keep one counter per (lock, line) instead of
    /// evicting. Returns false at the size limit or if the mapping fails.
    fn grow_index(&mut self) -> bool {
        let slots = ((self.index_mask + 1) * INDEX_GROWTH).min(MAX_INDEX_SLOTS);
        if slots <= self.index_mask + 1 {
            return false;
        }
        // Zero-filled: every slot starts not live (generation 0 is never
        // current, see acquire). Resident at once: grown when half full, it
        // is an eighth full after, which hashed leaves no page untouched.
        let Some(p) = crate::recorder::base::mapped::map_anonymous_resident(
            slots * core::mem::size_of::<IndexSlot>(),
        ) else {
            return false;
        };
        // A thread that outgrew the inline index cycles through many locks:
        // give it the by-lock cache too (if that fails, the index serves).
        let _ = self.by_lock.reserve();
        let old = self.big_index;
        let old_slots = self.index_mask + 1;
        self.big_index = p;
        self.index_mask = slots - 1;
        for at in 0..old_slots {
            let entry = if old.is_null() {
                self.index[at]
            } else {
                // SAFETY: `at` < old_slots, inside the previous mapping,
                // which is unmapped only below.
                unsafe { *old.add(at) }
            };
            if self.live(&entry) {
                // A full new neighbourhood is unlikely; then the entry's
                // counter stays in the trace and a fresh one starts.
                self.try_insert(entry, true);
            }
        }
        if !old.is_null() {
            let _errno = crate::diag::ErrnoGuard::save();
            // SAFETY: the previous grown index, no longer referenced.
            unsafe {
                crate::sys::munmap(old.cast(), old_slots * core::mem::size_of::<IndexSlot>())
            };
        }
        true
    }
}

/// How much a record has been used, by the kind its index mode implies.
fn record_uses(mode: u32, record: *mut u8) -> u64 {
    // SAFETY: index entries point at records this lane wrote in the live
    // mapping; the mode says which kind (counter modes are below
    // FIRST_COND_MODE).
    unsafe {
        if mode < FIRST_COND_MODE {
            (*record.cast::<CounterRecord>()).engagements
        } else if mode == MODE_EDGE {
            (*record.cast::<EdgeRecord>()).count
        } else {
            let c = &*record.cast::<CondRecord>();
            c.waits
                .saturating_add(c.signals)
                .saturating_add(c.broadcasts)
        }
    }
}
