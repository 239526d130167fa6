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

use crate::recorder::base::caller::{Caller, Seen, CONTEXT_DEPTH};
use crate::recorder::tables::objects::ObjectSlot;

/// Entries per lane (a power of two).
const HOT_SLOTS: usize = 64;

#[derive(Clone, Copy)]
struct HotEntry {
    addr: u64,
    ret: u64,
    /// `generation << MODE_BITS | mode`, as in the lane's index: an entry of
    /// the lane's previous thread never matches.
    tag: u32,
    /// Module-map epoch the offsets were learned in.
    epoch: u32,
    /// How many of `offsets` and `above` the context was read from.
    depth: u32,
    /// The lock's identity when cached: a lock destroyed and made again
    /// at the same address is another.
    lock_id: u32,
    offsets: [u32; CONTEXT_DEPTH],
    above: [u64; CONTEXT_DEPTH],
    slot: *const ObjectSlot,
    counter: *mut u8,
}

/// A lane's hot cache. All zero bits is empty (tag 0 is never a lane's).
pub struct HotCache {
    entries: [HotEntry; HOT_SLOTS],
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

impl HotEntry {
    /// Same lock, return address, mode and thread.
    #[inline(always)]
    fn same_key(&self, addr: u64, ret: u64, tag: u32) -> bool {
        self.addr == addr && self.ret == ret && self.tag == tag
    }

    /// Whether this call came the way the entry's did.
    #[inline(always)]
    fn same_path(&self, caller: Caller, epoch: u32) -> bool {
        if self.epoch != epoch {
            return false;
        }
        for (&offset, &expected) in self
            .offsets
            .iter()
            .zip(&self.above)
            .take(self.depth as usize)
        {
            // SAFETY: the words are read as `Caller::context` reads them:
            // level 0 lies in the frame of the function `ret` returns into,
            // live while this call is; each deeper one is read only after
            // every level below it matched the path it was learned on, so
            // the frames in between are the same functions, live on this
            // stack.
            let seen =
                unsafe { core::ptr::read_volatile((caller.sp + u64::from(offset)) as *const u64) };
            if seen != expected {
                return false;
            }
        }
        true
    }
}

impl HotCache {
    /// The entry for this call, if cached and its lock still lives (not
    /// destroyed and re-initialised since).
    #[inline(always)]
    pub fn find(&self, addr: u64, caller: Caller, tag: u32) -> Option<HotTarget> {
        let home = home(addr, caller.ret);
        let e = &self.entries[home];
        if !e.same_key(addr, caller.ret, tag) {
            return None;
        }
        let epoch = crate::recorder::base::caller::epoch();
        let e = if e.same_path(caller, epoch) {
            e
        } else {
            // Another path of the same call: the second place holds it, if any.
            let other = &self.entries[home ^ 1];
            if !(other.same_key(addr, caller.ret, tag) && other.same_path(caller, epoch)) {
                return None;
            }
            other
        };
        // SAFETY: slots live in the object table for the life of the process.
        let slot = unsafe { &*e.slot };
        (slot.id() == e.lock_id).then_some(HotTarget {
            slot,
            counter: e.counter,
        })
    }

    /// Caches a call path seen on the general path. It takes its first
    /// place, unless that holds another path of the same lock and return
    /// address (a wrapper reached from two places): then the second.
    pub fn remember(
        &mut self,
        (addr, caller, seen): (u64, Caller, &Seen),
        tag: u32,
        (slot, lock_id, counter): (&ObjectSlot, u32, *mut u8),
    ) {
        let mut at = home(addr, caller.ret);
        let first = &self.entries[at];
        // The first place is kept only for another live path of this call;
        // the same path (its lock destroyed and made again) or one learned
        // before a `dlclose` is replaced.
        if first.same_key(addr, caller.ret, tag)
            && first.epoch == seen.epoch
            && (first.depth, first.offsets, first.above) != (seen.depth, seen.offsets, seen.above)
        {
            at ^= 1;
        }
        self.entries[at] = HotEntry {
            addr,
            ret: caller.ret,
            tag,
            epoch: seen.epoch,
            depth: seen.depth,
            lock_id,
            offsets: seen.offsets,
            above: seen.above,
            slot,
            counter,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::{AtomicU32, AtomicU64};

    fn slot(id: u32) -> &'static ObjectSlot {
        Box::leak(Box::new(ObjectSlot {
            addr: AtomicU64::new(0x1000),
            ident: AtomicU64::new(1 << 32 | u64::from(id)),
            holder: AtomicU32::new(0),
            waiters: AtomicU32::new(0),
            seq: AtomicU32::new(0),
            last_owner: AtomicU32::new(0),
        }))
    }

    /// Two levels of context at offsets 8 and 24 of a fake stack.
    fn seen(stack: &[u64; 4]) -> Seen {
        Seen {
            context: 0,
            depth: 2,
            epoch: crate::recorder::base::caller::epoch(),
            offsets: [8, 24, 0, 0],
            above: [stack[1], stack[3], 0, 0],
        }
    }

    /// An array of locks taken at one line is the most common shape of
    /// fine-grained locking: a mutex, or a struct holding one, so any
    /// multiple of 8 bytes apart. 64 of them find nearly 64 places, however
    /// far apart and wherever the array and the line are. (With the golden
    /// ratio's multiplier, 40 or 80 bytes apart found 60, but 48 bytes
    /// apart 15, and 8, 16, 24, 72 or 96 bytes apart 14 to 27.)
    #[test]
    fn an_array_of_locks_taken_at_one_line_spreads_over_the_cache() {
        let mut state = 1u64;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            state >> 33
        };
        let cases: Vec<(u64, u64)> = (0..16)
            .map(|_| {
                (
                    0x5555_5555_0000 + next() % (1 << 20) * 8,
                    0x5555_5554_0000 + next() % (1 << 16),
                )
            })
            .collect();
        let strides = (8..=128).step_by(8).chain([192, 256, 512, 1024, 4096]);
        for stride in strides {
            let mut total = 0;
            for &(base, ret) in &cases {
                let mut places = [false; HOT_SLOTS];
                for i in 0..64 {
                    places[home(base + stride * i, ret)] = true;
                }
                let found = places.iter().filter(|&&p| p).count();
                assert!(
                    found >= 44,
                    "{found} places for 64 locks {stride} bytes apart at {base:#x}"
                );
                total += found;
            }
            assert!(
                total >= 56 * cases.len(),
                "{stride} bytes apart: {total} places in all"
            );
        }
    }

    #[test]
    fn a_call_path_is_found_by_its_words_on_the_stack() {
        // SAFETY: all zero bits is the empty cache (see `HotCache`).
        let mut cache: Box<HotCache> = Box::new(unsafe { core::mem::zeroed() });
        let (addr, tag) = (0x1000, 9);
        let first = [0x400_000, 0xaaa, 0, 0xbbb];
        let other = [0x400_000, 0xaaa, 0, 0xccc];
        let at = |stack: &[u64; 4]| Caller {
            ret: 0x400_000,
            sp: stack.as_ptr() as u64,
        };
        let lock = slot(5);
        assert!(cache.find(addr, at(&first), tag).is_none(), "empty");

        cache.remember(
            (addr, at(&first), &seen(&first)),
            tag,
            (lock, 5, 0x10 as *mut u8),
        );
        let hit = cache
            .find(addr, at(&first), tag)
            .expect("the path just cached");
        assert_eq!(hit.counter, 0x10 as *mut u8);
        assert!(
            cache.find(addr, at(&other), tag).is_none(),
            "another caller's caller"
        );
        assert!(
            cache.find(addr, at(&first), tag + 1).is_none(),
            "another mode or thread"
        );
        assert!(
            cache.find(addr + 8, at(&first), tag).is_none(),
            "another lock"
        );

        // A second path of the same call keeps the first.
        cache.remember(
            (addr, at(&other), &seen(&other)),
            tag,
            (lock, 5, 0x20 as *mut u8),
        );
        assert_eq!(
            cache.find(addr, at(&first), tag).map(|h| h.counter),
            Some(0x10 as *mut u8)
        );
        assert_eq!(
            cache.find(addr, at(&other), tag).map(|h| h.counter),
            Some(0x20 as *mut u8)
        );

        // The lock destroyed and made again: the old entry no longer leads
        // anywhere, and the new one replaces it in its place.
        lock.ident
            .store(1 << 32 | 6, core::sync::atomic::Ordering::Relaxed);
        assert!(
            cache.find(addr, at(&first), tag).is_none(),
            "a destroyed lock"
        );
        cache.remember(
            (addr, at(&first), &seen(&first)),
            tag,
            (lock, 6, 0x30 as *mut u8),
        );
        assert_eq!(
            cache.find(addr, at(&first), tag).map(|h| h.counter),
            Some(0x30 as *mut u8)
        );
    }
}
