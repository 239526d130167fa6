//! The hot cache's tests: its first level's keys and paths, a lane's
//! next thread, and the second level.

use super::*;
use crate::recorder::base::caller::Offsets;
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

/// Two levels of context at offsets 8 and 24 of a fake stack, read as
/// `Caller::seen` reads them (the fake stack's words at offsets 8 and 24
/// are return addresses it never learned past).
fn seen(stack: &[u64; 4]) -> Seen {
    let caller = Caller {
        ret: stack[0],
        sp: stack.as_ptr() as u64,
    };
    let offsets = Offsets::from_levels(&[8, 24, 0xffff, 0xffff], [stack[1], 0, 0]);
    let seen = caller.seen(&offsets);
    assert_eq!(seen.depth, 2);
    seen
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
    let (addr, mode) = (0x1000, 1);
    let first = [0x400_000, 0xaaa, 0, 0xbbb];
    let other = [0x400_000, 0xaaa, 0, 0xccc];
    let at = |stack: &[u64; 4]| Caller {
        ret: 0x400_000,
        sp: stack.as_ptr() as u64,
    };
    let lock = slot(5);
    assert!(cache.find(addr, at(&first), mode).is_none(), "empty");

    cache.remember(
        (addr, at(&first), &seen(&first)),
        (9, mode),
        (lock, 5, 0x10 as *mut u8),
    );
    let hit = cache
        .find(addr, at(&first), mode)
        .expect("the path just cached");
    assert_eq!(hit.counter, 0x10 as *mut u8);
    assert!(
        cache.find(addr, at(&other), mode).is_none(),
        "another caller's caller"
    );
    assert!(
        cache.find(addr, at(&first), mode + 1).is_none(),
        "another mode"
    );
    assert!(
        cache.find(addr + 8, at(&first), mode).is_none(),
        "another lock"
    );

    // A second path of the same call keeps the first.
    cache.remember(
        (addr, at(&other), &seen(&other)),
        (9, mode),
        (lock, 5, 0x20 as *mut u8),
    );
    assert_eq!(
        cache.find(addr, at(&first), mode).map(|h| h.counter),
        Some(0x10 as *mut u8)
    );
    assert_eq!(
        cache.find(addr, at(&other), mode).map(|h| h.counter),
        Some(0x20 as *mut u8)
    );

    // The lock destroyed and made again: the old entry no longer leads
    // anywhere, and the new one replaces it in its place.
    lock.ident
        .store(1 << 32 | 6, core::sync::atomic::Ordering::Relaxed);
    assert!(
        cache.find(addr, at(&first), mode).is_none(),
        "a destroyed lock"
    );
    cache.remember(
        (addr, at(&first), &seen(&first)),
        (9, mode),
        (lock, 6, 0x30 as *mut u8),
    );
    assert_eq!(
        cache.find(addr, at(&first), mode).map(|h| h.counter),
        Some(0x30 as *mut u8)
    );
}

/// The first level has no thread tag: a lane's next thread starts with
/// it empty; the second keeps its entries, which the next thread's tag
/// never matches. Neither counts into the previous thread's counters.
#[test]
fn a_lanes_next_thread_finds_nothing_of_the_previous_ones() {
    // SAFETY: all zero bits is the empty cache (see `HotCache`).
    let mut cache: Box<HotCache> = Box::new(unsafe { core::mem::zeroed() });
    let stack = [0x400_000u64, 0xaaa, 0, 0xbbb];
    let at = Caller {
        ret: 0x400_000,
        sp: stack.as_ptr() as u64,
    };
    let lock = |i: u64| 0x10_0000 + 64 * i;
    // Enough misses to map the second level; the last ones land there too.
    for i in 0..u64::from(WARM_AFTER) + 8 {
        cache.remember(
            (lock(i), at, &seen(&stack)),
            (9, 0),
            (slot(5), 5, 0x10 as *mut u8),
        );
    }
    let last = lock(u64::from(WARM_AFTER) + 7);
    assert!(cache.find(last, at, 0).is_some());
    assert!(cache.find_warm(last, at, (9, 0)).is_some());
    cache.new_thread();
    assert!(
        cache.find(last, at, 0).is_none(),
        "the next thread's first level"
    );
    assert!(cache.warm_serves(), "the second level stays mapped");
    assert!(
        cache.find_warm(last, at, (10, 0)).is_none(),
        "the next thread's second level (its tag)"
    );
}

/// 4,096 locks taken at random at one line: more than the first level
/// holds, so once the lane has missed often, the second level answers
/// (and forgets a lock made again), and a lane whose second level
/// rarely hits stops using it.
#[test]
fn a_lane_that_misses_often_finds_its_calls_in_the_second_level() {
    // SAFETY: all zero bits is the empty cache (see `HotCache`).
    let mut cache: Box<HotCache> = Box::new(unsafe { core::mem::zeroed() });
    let stack = [0x400_000u64, 0xaaa, 0, 0xbbb];
    let at = Caller {
        ret: 0x400_000,
        sp: stack.as_ptr() as u64,
    };
    let tag = 9;
    let lock = |i: u64| 0x10_0000 + 40 * i;
    let slots: Vec<&ObjectSlot> = (0..4096).map(|i| slot(i as u32 + 1)).collect();
    let counter = |i: u64| (0x1000 + 8 * i) as *mut u8;
    let remember = |cache: &mut HotCache, i: u64| {
        cache.remember(
            (lock(i), at, &seen(&stack)),
            (tag, 0),
            (slots[i as usize], i as u32 + 1, counter(i)),
        );
    };
    for i in 0..u64::from(WARM_AFTER) {
        assert!(
            cache.find_warm(lock(i), at, (tag, 0)).is_none(),
            "not mapped yet"
        );
        remember(&mut cache, i);
    }
    assert!(
        !cache.warm_map.is_null(),
        "mapped at the {WARM_AFTER}th miss"
    );
    for i in u64::from(WARM_AFTER)..4096 {
        remember(&mut cache, i);
    }
    let found = (0..4096)
        .filter(|&i| cache.find_warm(lock(i), at, (tag, 0)).map(|h| h.counter) == Some(counter(i)))
        .count();
    // Remembered since it was mapped, and not displaced (40 bytes apart:
    // one place each in their page's run; pages' runs may collide).
    assert!(found >= 2800, "{found} of 4096 found in the second level");
    assert!(
        cache.find_warm(lock(5000), at, (tag, 0)).is_none(),
        "never seen"
    );

    // A lock destroyed and made again is not found.
    let i = 4000;
    assert!(cache.find_warm(lock(i), at, (tag, 0)).is_some());
    slots[i as usize]
        .ident
        .store(1 << 32 | 99_999, core::sync::atomic::Ordering::Relaxed);
    assert!(
        cache.find_warm(lock(i), at, (tag, 0)).is_none(),
        "made again"
    );

    // Looks that never hit: within a period it stops serving.
    let other = Caller {
        ret: 0x500_000,
        ..at
    };
    for _ in 0..2 * WARM_PERIOD {
        let _ = cache.find_warm(lock(1), other, (tag, 0));
    }
    assert!(
        !cache.warm_serves(),
        "a second level that never hits is left"
    );
    assert!(cache.find_warm(lock(4001), at, (tag, 0)).is_none(), "off");
}

/// The second level is judged over periods of looks: one that hits one
/// look in four keeps serving through many periods; one that hits one in
/// ten stops within two.
#[test]
fn the_second_level_serves_while_one_look_in_eight_hits() {
    let judged = |hit_every: u32| {
        // SAFETY: all zero bits is the empty cache (see `HotCache`).
        let mut cache: Box<HotCache> = Box::new(unsafe { core::mem::zeroed() });
        let stack = [0x400_000u64, 0xaaa, 0, 0xbbb];
        let at = Caller {
            ret: 0x400_000,
            sp: stack.as_ptr() as u64,
        };
        let (tag, found) = (9, 0x10_0000);
        for i in 0..u64::from(WARM_AFTER) {
            cache.remember(
                (found + 64 * i, at, &seen(&stack)),
                (tag, 0),
                (slot(7), 7, 0x10 as *mut u8),
            );
        }
        assert!(cache.warm_serves(), "mapped at the {WARM_AFTER}th miss");
        // Remembered since the second level was mapped: there too.
        cache.remember(
            (found, at, &seen(&stack)),
            (tag, 0),
            (slot(7), 7, 0x10 as *mut u8),
        );
        let never = Caller {
            ret: 0x500_000,
            ..at
        };
        for look in 0..6 * WARM_PERIOD {
            let (addr, caller) = if look % hit_every == 0 {
                (found, at)
            } else {
                (found, never)
            };
            let hit = cache.find_warm(addr, caller, (tag, 0)).is_some();
            assert!(
                !hit || look % hit_every == 0,
                "only the remembered call hits"
            );
            if !cache.warm_serves() {
                return Some(look);
            }
        }
        None
    };
    assert_eq!(judged(4), None, "one hit in four serves");
    let stopped = judged(10).expect("one hit in ten stops");
    assert!(
        stopped < 2 * WARM_PERIOD,
        "stopped at look {stopped}, within two periods"
    );
}
