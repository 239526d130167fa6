//! The hot cache: the first thing an acquisition looks at. One entry takes a
//! (lock address, return address, mode) straight to the lock's slot and this
//! thread's counter for the call path, skipping the lock table, the learned
//! stack offsets and the counter index.
//!
//! A call path is the return address plus the context read off the stack
//! above it (see [`Caller::context`]). An entry keeps the return addresses
//! its context was made from and where they sit on the stack, so a hit
//! compares those few words where they are instead of finding the offsets
//! and hashing the context again; the words are read in the order and under
//! the conditions the context itself is read, so a hit reads nothing a miss
//! would not. Any difference is a miss, and the general path decides.
//!
//! A (lock, return address) reached by two paths (a wrapper called from two
//! places) keeps the second in the neighbouring place, looked at only when
//! the first holds the same call by another path: a plain miss costs one
//! look.
//!
//! A thread that misses often (more call paths on locks than 64 places
//! hold: arrays of locks taken at random) gets a second level, a table of
//! the same entries 1,024 times larger, mapped on its `WARM_AFTER`th miss
//! and looked at only on a miss of the first: it takes such a call to its
//! lock and counter without the lock table, the stack offsets and the
//! counter index. A hit there is not moved to the first level (on such a
//! program that would only churn it).

use crate::recorder::base::caller::{Caller, Seen, CONTEXT_DEPTH};
use crate::recorder::tables::objects::ObjectSlot;

/// Entries per lane (a power of two).
const HOT_SLOTS: usize = 64;

/// Laid out as a look reads it: what every hit compares, and where it
/// leads, first (64 bytes); the return addresses of a longer call path
/// after them. (Padded to 128 bytes, a place of the second level
/// is shifted instead of multiplied, four instructions fewer, but
/// memcached's item locks, found there, spent more of the server's time
/// in the shim: 24.7 % against 23.9 %, interleaved, 7 runs in 8.)
#[derive(Clone, Copy)]
#[repr(C)]
struct HotEntry {
    addr: u64,
    /// The return address, the mode folded in above bit 61 ([`key_ret`]).
    ret: u64,
    /// Module-map epoch the offsets were learned in.
    epoch: u32,
    /// How many of `offsets` and `above` the context was read from; the
    /// rest repeat level 0 (see `Caller::seen`).
    depth: u32,
    /// The lock's identity when cached: a lock destroyed and made again
    /// at the same address is another.
    lock_id: u32,
    offsets: [u32; CONTEXT_DEPTH],
    /// `generation << MODE_BITS | mode`, as in the lane's index: checked in
    /// the second level only, which is not emptied for a lane's next
    /// thread (the first level is; emptying six megabytes, or faulting
    /// them in again after giving them back, cost a thread that takes
    /// thousands of locks half as much again as its whole run).
    tag: u32,
    slot: *const ObjectSlot,
    counter: *mut u8,
    above: [u64; CONTEXT_DEPTH],
}

/// A lane's hot cache. All zero bits is empty (no lock lies at address 0,
/// and tag 0 is never a lane's). Its first level first (see `Lane`).
#[repr(C)]
pub struct HotCache {
    entries: [HotEntry; HOT_SLOTS],
    /// The second level (`WARM_SLOTS` entries), or null until mapped.
    warm_map: *mut HotEntry,
    /// The second level while it serves: `warm_map`, or null until mapped
    /// and once it hit too rarely to pay for itself (more locks than it
    /// holds). One test tells whether to look there.
    warm: *mut HotEntry,
    /// Misses of the first level so far (up to `WARM_AFTER`).
    misses: u32,
    /// Looks at the second level that missed in the current period, and
    /// those that hit (counted on the hit, one add; 64 bits, never
    /// wrapping into a small count).
    warm_misses: u32,
    warm_hits: u64,
    /// Entries written so far (either level): a look made outside the hook
    /// (lean mode's, at the second level) is void if a signal handler's
    /// call wrote one meanwhile.
    writes: u32,
}

/// Looks at the second level over which its hits are judged: if fewer
/// than one in eight hit, it stops serving this lane (a look and a store
/// on every miss of the first level would only add to a program that
/// sweeps more locks than the table holds). A period ends at its
/// `WARM_PERIOD * 7 / 8`th miss, so that a hit only adds to a count: it
/// stops serving if fewer than `WARM_PERIOD / 8` hits came with those
/// misses.
const WARM_PERIOD: u32 = 4096;

/// Entries of the second level (a power of two): 6 MiB of address space,
/// its pages made resident as entries land on them.
const WARM_SLOTS: usize = 1 << 16;
/// Misses of the first level after which a lane maps the second: a program
/// whose locks and lines fit the first never does.
const WARM_AFTER: u32 = 1024;

/// Places of the second level one page of locks shares (addresses 32
/// bytes apart take neighbouring places): locks side by side in memory,
/// swept in order, stay side by side in the table, so a sweep does not
/// miss the processor's caches and its TLB at every step.
const WARM_RUN_BITS: u32 = 7;

/// An entry's place in the second level, in bytes: the run of its lock's
/// page (and return address), then the lock's place in its page. Written
/// as `(run << 12 | addr & 0xfe0) * 3`, which is the place times the
/// entry's 96 bytes in three instructions instead of seven.
#[inline(always)]
fn warm_offset(addr: u64, ret: u64) -> usize {
    const { assert!(core::mem::size_of::<HotEntry>() == 3 << 5) };
    let run = ((addr >> 12) ^ ret.rotate_left(17)).wrapping_mul(0xe22b_64a6_6d32_a901)
        >> (64 - (WARM_SLOTS.trailing_zeros() - WARM_RUN_BITS));
    let within = addr as usize & (((1 << WARM_RUN_BITS) - 1) << 5);
    (((run as usize) << (WARM_RUN_BITS + 5)) | within) * 3
}

/// What an entry leads to.
pub struct HotTarget {
    pub slot: &'static ObjectSlot,
    pub counter: *mut u8,
}

/// An entry's place: the top bits of a product. The multiplier is not the
/// golden ratio's, which spreads consecutive integers best but puts arrays
/// of locks some multiples of 8 bytes apart into a quarter of the places;
/// this one, found by a search over odd constants, spreads arrays of locks
/// at every such stride from 8 to 4,096 bytes over at least 44 of 64
/// places (see the test below), and other sets as a random one would.
#[inline(always)]
fn home(addr: u64, ret: u64) -> usize {
    ((addr ^ ret.rotate_left(17)).wrapping_mul(0xe22b_64a6_6d32_a901) >> 58) as usize
}

/// An entry a look found, whose lock still lived then: one pointer, all a
/// hook keeps across the real call. The entry stays as it is while the
/// hook runs (only this thread's hooks write its lane's cache, and a
/// signal handler's call passes through while this thread is in one).
#[derive(Clone, Copy)]
pub struct HotHit(*const HotEntry);

impl HotHit {
    /// What the entry leads to.
    #[inline(always)]
    pub fn target(self) -> HotTarget {
        // SAFETY: the entry lies in a lane's cache or its second level,
        // mapped for the life of the process, and is unchanged since the
        // look that found it (see the type's comment).
        let e = unsafe { &*self.0 };
        HotTarget {
            // SAFETY: slots live in the object table for the life of the process.
            slot: unsafe { &*e.slot },
            counter: e.counter,
        }
    }
}

/// An entry's `ret`: the return address with the mode (exclusive, shared,
/// post) folded in above the bits a user-space address uses, so that the
/// first level needs no tag (one call instruction could reach a read and
/// a write lock through a function pointer). The common mode, exclusive,
/// is 0: a mutex hook's key is its return address as it is.
#[inline(always)]
fn key_ret(ret: u64, mode: u32) -> u64 {
    ret ^ (u64::from(mode) << 61)
}

impl HotEntry {
    /// The entry as a hit, if its lock is the one it was cached for (not
    /// destroyed and made again since).
    #[inline(always)]
    fn live(&self) -> Option<HotHit> {
        // SAFETY: slots live in the object table for the life of the process.
        let slot = unsafe { &*self.slot };
        (slot.id() == self.lock_id).then_some(HotHit(self))
    }

    /// Same lock, return address and mode ([`key_ret`]): in the first
    /// level, also the same thread (see [`HotCache::new_thread`]).
    #[inline(always)]
    fn same_key(&self, addr: u64, ret_key: u64) -> bool {
        self.addr == addr && self.ret == ret_key
    }

    /// [`same_key`](Self::same_key) and the same thread, for the second
    /// level.
    #[inline(always)]
    fn same_tagged_key(&self, addr: u64, ret_key: u64, tag: u32) -> bool {
        self.same_key(addr, ret_key) && self.tag == tag
    }

    /// Whether this call came the way the entry's did: nothing to compare
    /// for a context of no levels (a caller whose stack is not known has
    /// only such); else level 0, then, for a context of more, the rest of
    /// the [`CONTEXT_DEPTH`] places with no further test of how many the
    /// context has (`Caller::seen`).
    #[inline(always)]
    fn same_path(&self, caller: Caller, epoch: u32) -> bool {
        if self.epoch != epoch {
            return false;
        }
        if self.depth == 0 {
            return true;
        }
        if !self.word_matches(caller, 0) {
            return false;
        }
        self.depth == 1
            || (self.word_matches(caller, 1)
                && self.word_matches(caller, 2)
                && self.word_matches(caller, 3))
    }

    /// Whether the stack word at the entry's place `level` is the one
    /// learned there.
    #[inline(always)]
    fn word_matches(&self, caller: Caller, level: usize) -> bool {
        // SAFETY: the words are read as `Caller::context` reads them:
        // level 0 lies in the frame of the function `ret` returns into,
        // live while this call is; each deeper one is read only after
        // every level below it matched the path it was learned on, so the
        // frames in between are the same functions, live on this stack. A
        // place past the context's depth repeats level 0 (`Caller::seen`).
        let seen = unsafe {
            core::ptr::read_volatile((caller.sp + u64::from(self.offsets[level])) as *const u64)
        };
        seen == self.above[level]
    }
}

impl HotCache {
    /// The entry for this call (`mode`: exclusive, shared or post), if
    /// cached and its lock still lives (not destroyed and re-initialised
    /// since).
    #[inline(always)]
    pub fn find(&self, addr: u64, caller: Caller, mode: u32) -> Option<HotTarget> {
        let e = self.entry_for(addr, caller, mode)?;
        // SAFETY: slots live in the object table for the life of the process.
        let slot = unsafe { &*e.slot };
        (slot.id() == e.lock_id).then_some(HotTarget {
            slot,
            counter: e.counter,
        })
    }

    /// [`find`](Self::find)'s entry itself, for a hook that keeps it
    /// across the real call (one register instead of two).
    #[inline(always)]
    pub fn find_hit(&self, addr: u64, caller: Caller, mode: u32) -> Option<HotHit> {
        self.entry_for(addr, caller, mode)?.live()
    }

    /// The entry whose key and path are this call's, live or not.
    #[inline(always)]
    fn entry_for(&self, addr: u64, caller: Caller, mode: u32) -> Option<&HotEntry> {
        let home = home(addr, caller.ret);
        let ret_key = key_ret(caller.ret, mode);
        let e = &self.entries[home];
        if !e.same_key(addr, ret_key) {
            return None;
        }
        let epoch = crate::recorder::base::caller::epoch();
        if e.same_path(caller, epoch) {
            return Some(e);
        }
        // Another path of the same call: the second place holds it, if any.
        let other = &self.entries[home ^ 1];
        (other.same_key(addr, ret_key) && other.same_path(caller, epoch)).then_some(other)
    }

    /// How many entries were written so far, read as a signal handler
    /// would have left it (see `writes`).
    #[inline(always)]
    pub fn writes(&self) -> u32 {
        // SAFETY: a field of this live cache, read whole.
        unsafe { core::ptr::read_volatile(&self.writes) }
    }

    /// The entry for a call in lean mode, whose entries have no context
    /// (depth 0): the key, the module epoch and the lock's identity.
    #[inline(always)]
    pub fn find_line(&self, addr: u64, ret: u64, mode: u32) -> Option<HotTarget> {
        let e = &self.entries[home(addr, ret)];
        if !e.same_key(addr, key_ret(ret, mode))
            || e.epoch != crate::recorder::base::caller::epoch()
        {
            return None;
        }
        // SAFETY: slots live in the object table for the life of the process.
        let slot = unsafe { &*e.slot };
        (slot.id() == e.lock_id).then_some(HotTarget {
            slot,
            counter: e.counter,
        })
    }

    /// The second level's entry for this call (see the module's comment),
    /// if it has one and its lock still lives.
    #[inline]
    pub fn find_warm(
        &mut self,
        addr: u64,
        caller: Caller,
        (tag, mode): (u32, u32),
    ) -> Option<HotTarget> {
        self.find_warm_hit(addr, caller, (tag, mode))
            .map(HotHit::target)
    }

    /// Whether the second level serves: mapped, and not switched off.
    #[inline(always)]
    pub fn warm_serves(&self) -> bool {
        !self.warm.is_null()
    }

    /// [`find_warm`](Self::find_warm)'s entry itself (see [`HotHit`]).
    #[inline]
    pub fn find_warm_hit(
        &mut self,
        addr: u64,
        caller: Caller,
        (tag, mode): (u32, u32),
    ) -> Option<HotHit> {
        if !self.warm_serves() {
            return None;
        }
        // SAFETY: it serves, just tested.
        let hit = unsafe { self.look_warm(addr, caller, (tag, mode)) };
        if hit.is_none() {
            self.warm_missed();
        }
        hit
    }

    /// [`find_warm_hit`](Self::find_warm_hit) for a caller that found the
    /// second level serves, and that tells [`warm_missed`](Self::warm_missed)
    /// of a miss on its own slow path (so that the look makes no call).
    ///
    /// # Safety
    /// [`warm_serves`](Self::warm_serves) said so (the second level is
    /// mapped), and nothing changed the cache since.
    #[inline(always)]
    pub unsafe fn look_warm(
        &mut self,
        addr: u64,
        caller: Caller,
        (tag, mode): (u32, u32),
    ) -> Option<HotHit> {
        // SAFETY: `warm` maps WARM_SLOTS entries (the caller's contract),
        // and the place is masked to them by construction of `warm_offset`.
        let e = unsafe { &*self.warm.byte_add(warm_offset(addr, caller.ret)) };
        let hit = if e.same_tagged_key(addr, key_ret(caller.ret, mode), tag)
            && e.same_path(caller, crate::recorder::base::caller::epoch())
        {
            e.live()
        } else {
            None
        };
        if hit.is_some() {
            self.warm_hits += 1;
        }
        hit
    }

    /// A look at the second level missed: counted, and the period judged
    /// at its last miss (see [`WARM_PERIOD`]). Nothing if it does not
    /// serve.
    #[cold]
    #[inline(never)]
    pub fn warm_missed(&mut self) {
        if self.warm.is_null() {
            return;
        }
        self.warm_misses += 1;
        if self.warm_misses == WARM_PERIOD / 8 * 7 {
            if self.warm_hits < u64::from(WARM_PERIOD / 8) {
                self.warm = core::ptr::null_mut();
            }
            (self.warm_misses, self.warm_hits) = (0, 0);
        }
    }

    /// A new thread's lane: the first level is emptied (its keys have no
    /// thread tag, so that a hit compares two words, not three), and
    /// whether the second level serves is judged afresh (the mapping
    /// stays; the previous thread's entries never match its tags).
    pub fn new_thread(&mut self) {
        for e in &mut self.entries {
            // No lock lies at address 0: the entry matches no call.
            e.addr = 0;
        }
        (self.warm_misses, self.warm_hits, self.warm) = (0, 0, self.warm_map);
    }

    /// Counts a miss of the first level; maps the second at the
    /// `WARM_AFTER`th (if the mapping fails, the first serves alone).
    fn missed(&mut self) {
        if !self.warm_map.is_null() {
            return;
        }
        self.misses += 1;
        if self.misses == WARM_AFTER {
            // Zero-filled: no entry is live (tag 0 is never a lane's).
            if let Some(p) = crate::recorder::base::mapped::map_anonymous(
                WARM_SLOTS * core::mem::size_of::<HotEntry>(),
            ) {
                (self.warm_map, self.warm) = (p, p);
            }
        }
    }

    /// Caches a call path seen on the general path. It takes its first
    /// place, unless that holds another path of the same lock and return
    /// address (a wrapper reached from two places): then the second.
    pub fn remember(
        &mut self,
        (addr, caller, seen): (u64, Caller, &Seen),
        (tag, mode): (u32, u32),
        (slot, lock_id, counter): (&ObjectSlot, u32, *mut u8),
    ) {
        let mut at = home(addr, caller.ret);
        let ret = key_ret(caller.ret, mode);
        let first = &self.entries[at];
        // The first place is kept only for another live path of this call;
        // the same path (its lock destroyed and made again) or one learned
        // before a `dlclose` is replaced.
        if first.same_key(addr, ret)
            && first.epoch == seen.epoch
            && (first.depth, first.offsets, first.above) != (seen.depth, seen.offsets, seen.above)
        {
            at ^= 1;
        }
        let entry = HotEntry {
            addr,
            ret,
            epoch: seen.epoch,
            depth: seen.depth,
            lock_id,
            offsets: seen.offsets,
            tag,
            above: seen.above,
            slot,
            counter,
        };
        self.entries[at] = entry;
        self.writes = self.writes.wrapping_add(1);
        self.missed();
        if !self.warm.is_null() {
            // SAFETY: as in `find_warm`. One path per place: a wrapper
            // reached from two places alternates there.
            unsafe { *self.warm.byte_add(warm_offset(addr, caller.ret)) = entry };
        }
    }
}

#[cfg(test)]
mod tests;
