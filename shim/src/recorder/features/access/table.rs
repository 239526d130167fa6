//! The granule table: lock-free open addressing from a granule to its
//! slot, granules of one run of memory side by side, a freed block's slots
//! left as tombstones that remember their granule.

use super::{note_page, wait_round, LiveRecord};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// Granules the table holds: 2 Mi slots of 16 bytes, 32 MiB reserved.
pub(super) const SLOTS: usize = 1 << 21;
pub(super) const PROBES: usize = 32;

#[repr(C)]
pub(super) struct Slot {
    /// `address / GRANULE_BYTES + 1`; 0 = empty.
    pub(super) key: AtomicU64,
    /// The granule's record in the trace; null while its first toucher
    /// writes it, `NO_ROOM` if the trace had no room for it.
    pub(super) record: AtomicPtr<LiveRecord>,
}

pub(super) static TABLE: AtomicPtr<Slot> = AtomicPtr::new(core::ptr::null_mut());
/// Marks the key of a slot whose block was freed (keys are granule
/// numbers + 1, far below it): the slot is free again, and remembers whose
/// it was.
pub(super) const TOMB: u64 = 1 << 63;

/// The table, mapped on the first access under a lock.
pub(super) fn table() -> Option<*mut Slot> {
    crate::recorder::base::mapped::mapped_once(&TABLE, SLOTS * core::mem::size_of::<Slot>())
}

/// Granules of one run of memory (512 bytes) sit side by side in the
/// table: a program touching a few pages densely then touches a few pages
/// of the table, not one page of it per granule (each a page fault).
pub(super) const RUN_GRANULES: usize = 64;

/// Where granule `key`'s probe sequence starts: its run's place (hashed),
/// then its place within the run.
#[inline]
pub(super) fn home_of(key: u64) -> usize {
    const RUN_SHIFT: u32 = 64 - (SLOTS.trailing_zeros() - RUN_GRANULES.trailing_zeros());
    let run = (key / RUN_GRANULES as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> RUN_SHIFT;
    run as usize * RUN_GRANULES + (key % RUN_GRANULES as u64) as usize
}

/// The `i`th slot of the probe sequence from `home`: the same place in the
/// following runs, so that another run whose place collides, touched as
/// densely, finds room (probing slot by slot, its granules would meet the
/// first run's and run out of probes with the table nearly empty).
#[inline]
pub(super) fn probe(home: usize, i: usize) -> usize {
    (home + i * RUN_GRANULES) & (SLOTS - 1)
}

/// The slot of granule `key`, claimed if new (then `true`: the caller
/// writes its record). A freed block's slots become tombstones that
/// remember their granule.
///
/// Two threads claiming one granule must meet at one slot, or it gets two
/// records. A granule therefore takes back its own tombstone (malloc hands
/// the same addresses out again), else the first empty slot of its chain:
/// neither can move while they look, so both claimers pick the same one.
/// Another granule's tombstone is taken only when the chain has no empty
/// slot left, and then by one claimer at a time (see [`claim_foreign`]):
/// a block freed meanwhile may make an earlier tombstone, so two claimers
/// could pick two.
pub(super) fn slot_of(table: *mut Slot, key: u64) -> Option<(&'static Slot, bool)> {
    let home = home_of(key);
    // A claim that loses to another granule looks again (a few times).
    for _ in 0..4 {
        let mut tomb_seen = false;
        let mut target = None;
        for i in 0..PROBES {
            // SAFETY: the index is masked into the table.
            let slot = unsafe { &*table.add(probe(home, i)) };
            match slot.key.load(Ordering::Acquire) {
                cur if cur == key => return Some((slot, false)),
                cur if cur == key | TOMB => {
                    target = Some((slot, cur));
                    break;
                }
                0 => {
                    target = Some((slot, 0));
                    break;
                }
                cur if cur & TOMB != 0 => tomb_seen = true,
                _ => {}
            }
        }
        #[cfg(test)]
        super::tests::after_scan();
        let Some((slot, expected)) = target else {
            if !tomb_seen {
                return None;
            }
            match claim_foreign(table, home, key) {
                Claim::Done(found) => return found,
                Claim::LookAgain => continue,
            }
        };
        match slot
            .key
            .compare_exchange(expected, key, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                note_page(key);
                return Some((slot, true));
            }
            Err(now) if now == key => return Some((slot, false)),
            Err(_) => {}
        }
    }
    None
}

/// Claims of another granule's tombstone, one at a time. A claimer waits
/// for another's (a scan of one chain) at most as long as for a record, then
/// gives up and the access is dropped: a signal handler that interrupted
/// the claim on its own thread must not wait for it.
pub(super) static CLAIMING_FOREIGN: AtomicBool = AtomicBool::new(false);

enum Claim {
    Done(Option<(&'static Slot, bool)>),
    /// The chain changed (an empty slot or the granule's own tombstone
    /// appeared): the ordinary claim applies.
    LookAgain,
}

/// Takes the first tombstone of `key`'s chain, which has no empty slot,
/// unless another claimer of `key` got a slot first: under the flag, the
/// chain is scanned again, so the second claimer finds the first's slot
/// instead of a tombstone that a free made since.
#[cold]
fn claim_foreign(table: *mut Slot, home: usize, key: u64) -> Claim {
    let mut round = 0;
    while CLAIMING_FOREIGN
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        if !wait_round(round) {
            return Claim::Done(None);
        }
        round += 1;
    }
    let claim = claim_first_tomb(table, home, key);
    CLAIMING_FOREIGN.store(false, Ordering::Release);
    claim
}

fn claim_first_tomb(table: *mut Slot, home: usize, key: u64) -> Claim {
    let mut first_tomb = None;
    for i in 0..PROBES {
        // SAFETY: the index is masked into the table.
        let slot = unsafe { &*table.add(probe(home, i)) };
        match slot.key.load(Ordering::Acquire) {
            cur if cur == key => return Claim::Done(Some((slot, false))),
            cur if cur == 0 || cur == key | TOMB => return Claim::LookAgain,
            cur if cur & TOMB != 0 => first_tomb = first_tomb.or(Some((slot, cur))),
            _ => {}
        }
    }
    let Some((slot, expected)) = first_tomb else {
        return Claim::Done(None);
    };
    match slot
        .key
        .compare_exchange(expected, key, Ordering::AcqRel, Ordering::Acquire)
    {
        Ok(_) => {
            note_page(key);
            Claim::Done(Some((slot, true)))
        }
        // Its granule took it back, or a free changed it: look again.
        Err(_) => Claim::LookAgain,
    }
}

/// The slot of granule `key`, if the table has one (no insertion).
pub(super) fn find(table: *mut Slot, key: u64) -> Option<&'static Slot> {
    let home = home_of(key);
    for i in 0..PROBES {
        // SAFETY: the index is masked into the table.
        let slot = unsafe { &*table.add(probe(home, i)) };
        match slot.key.load(Ordering::Acquire) {
            0 => return None,
            cur if cur == key => return Some(slot),
            _ => {}
        }
    }
    None
}
