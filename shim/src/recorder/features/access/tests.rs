//! Unit tests of the granule table (`slot_of`, `find`).

use super::table::{home_of, probe, RUN_GRANULES};
use super::*;

#[test]
fn two_dense_runs_in_one_place_both_find_room() {
    let table: *mut Slot =
        crate::recorder::base::mapped::map_anonymous(SLOTS * size_of::<Slot>()).expect("a table");
    // Two 512-byte runs of memory whose places in the table collide.
    let first = 1u64 << 20;
    let place = |run: u64| home_of(run * RUN_GRANULES as u64) / RUN_GRANULES;
    let second = (first + 1..)
        .find(|&run| place(run) == place(first))
        .expect("a colliding run");
    for run in [first, second] {
        for offset in 0..RUN_GRANULES as u64 {
            let key = run * RUN_GRANULES as u64 + offset + 1;
            let (_, new) = slot_of(table, key).expect("room for every granule");
            assert!(new);
        }
    }
    for run in [first, second] {
        for offset in 0..RUN_GRANULES as u64 {
            let key = run * RUN_GRANULES as u64 + offset + 1;
            let slot = find(table, key).expect("found again");
            assert_eq!(slot.key.load(Ordering::Relaxed), key);
        }
    }
    // SAFETY: the test's own mapping, no longer used.
    unsafe { libc::munmap(table.cast(), SLOTS * size_of::<Slot>()) };
}

/// A granule in a chain (the same home) with another granule's
/// tombstone before its own: it takes back its own, which every
/// claimer of it finds, not the first tombstone, which a block freed
/// while it looks could move.
#[test]
fn a_freed_granule_takes_back_its_own_slot() {
    let table: *mut Slot =
        crate::recorder::base::mapped::map_anonymous(SLOTS * size_of::<Slot>()).expect("a table");
    let first = 1u64 << 20;
    // Keys at the same offset in other runs, whose places collide.
    let mut same_home = (1..)
        .map(|run| first + run * RUN_GRANULES as u64)
        .filter(|&key| home_of(key) == home_of(first));
    let mut next = || same_home.next().expect("a colliding key");
    let (second, third, fourth) = (next(), next(), next());
    let free = |key: u64| {
        let slot = find(table, key).expect("claimed");
        slot.key.store(key | TOMB, Ordering::Release);
    };
    for key in [first, second, third] {
        assert!(slot_of(table, key).expect("room").1);
    }
    let first_slot = find(table, first).unwrap() as *const Slot;
    let second_slot = find(table, second).unwrap() as *const Slot;
    free(first);
    free(second);
    // The second takes back its own slot, past the first's tombstone.
    let (slot, new) = slot_of(table, second).expect("room");
    assert!(new);
    assert!(core::ptr::eq(slot, second_slot));
    // A granule never seen: the first empty slot, not a tombstone.
    let (slot, new) = slot_of(table, fourth).expect("room");
    assert!(new);
    assert_eq!(slot.key.load(Ordering::Relaxed), fourth);
    // SAFETY: a slot of the test's table.
    let first_key = unsafe { &*first_slot }.key.load(Ordering::Relaxed);
    assert_eq!(first_key, first | TOMB, "the first's tombstone stays");
    // SAFETY: the test's own mapping, no longer used.
    unsafe { libc::munmap(table.cast(), SLOTS * size_of::<Slot>()) };
}

std::thread_local! {
    /// Runs in `slot_of` between its scan and its claim, once.
    static AFTER_SCAN: core::cell::Cell<Option<fn()>> = const { core::cell::Cell::new(None) };
}

pub(super) fn after_scan() {
    if let Some(pause) = AFTER_SCAN.with(|c| c.take()) {
        pause();
    }
}

static PAUSED: AtomicBool = AtomicBool::new(false);
static RESUME: AtomicBool = AtomicBool::new(false);

fn pause_until_resumed() {
    PAUSED.store(true, Ordering::Release);
    while !RESUME.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
}

/// Two claimers of one granule in a chain with no empty slot: the first
/// has picked the chain's only tombstone when a free makes an earlier
/// one, which the second picks. They must still meet at one slot (the
/// rule before: each took the first tombstone it saw, and the granule
/// got two slots and two records).
#[test]
fn claimers_of_a_full_chain_meet_at_one_slot() {
    let table: *mut Slot =
        crate::recorder::base::mapped::map_anonymous(SLOTS * size_of::<Slot>()).expect("a table");
    let first = 1u64 << 20;
    let colliding: Vec<u64> = (1..)
        .map(|run| first + run * RUN_GRANULES as u64)
        .filter(|&key| home_of(key) == home_of(first))
        .take(PROBES + 1)
        .collect();
    let chain: Vec<&'static Slot> = (0..PROBES)
        // SAFETY: indexes masked into the test's table.
        .map(|i| unsafe { &*table.add(probe(home_of(first), i)) })
        .collect();
    for (slot, &key) in chain.iter().zip(&colliding) {
        slot.key.store(key, Ordering::Release);
    }
    let wanted = colliding[PROBES];
    let free = |at: usize| {
        let key = chain[at].key.load(Ordering::Acquire);
        chain[at].key.store(key | TOMB, Ordering::Release);
    };
    free(PROBES - 1);
    let table_addr = table as usize;
    let first_claimer = std::thread::spawn(move || {
        AFTER_SCAN.with(|c| c.set(Some(pause_until_resumed)));
        slot_of(table_addr as *mut Slot, wanted).map(|(s, _)| s as *const Slot as usize)
    });
    while !PAUSED.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    free(3);
    let second = slot_of(table, wanted).map(|(s, _)| s as *const Slot as usize);
    RESUME.store(true, Ordering::Release);
    let first_got = first_claimer.join().unwrap();
    let holding = chain
        .iter()
        .filter(|s| s.key.load(Ordering::Acquire) == wanted)
        .count();
    assert_eq!(holding, 1, "the granule holds one slot");
    assert!(
        second.is_some() && first_got == second,
        "both claimers use it"
    );
    // SAFETY: the test's own mapping, no longer used.
    unsafe { libc::munmap(table.cast(), SLOTS * size_of::<Slot>()) };
}
