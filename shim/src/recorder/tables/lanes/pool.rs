//! The pool of lanes: address space for all of them reserved once, a lane
//! taken by each thread as it is first recorded and given back when it
//! ends (a lock-free stack of free lanes), and the walk over live ones.
//! Off the hot path: a thread passes here once each way.

use super::{Lane, Sampling, Tally, INDEX_SLOTS, MAX_LANES, MODE_BITS, TALLY_DEPTH};
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

static LANES: AtomicPtr<Lane> = AtomicPtr::new(core::ptr::null_mut());
pub(super) static LANES_USED: AtomicU32 = AtomicU32::new(0);
/// Treiber stack of free lanes: `tag << 32 | (index + 1)`; 0 = empty.
static FREE_HEAD: AtomicU64 = AtomicU64::new(0);
static FREE_NEXT: [AtomicU32; MAX_LANES] = [const { AtomicU32::new(0) }; MAX_LANES];

/// Reserves address space for all lanes once; pages are touched lazily.
pub fn init() -> bool {
    if !LANES.load(Ordering::Acquire).is_null() {
        return true;
    }
    let Some(p) = crate::recorder::base::mapped::map_anonymous_zeroed_in_child(
        MAX_LANES * core::mem::size_of::<Lane>(),
    ) else {
        return false;
    };
    LANES.store(p, Ordering::Release);
    true
}

/// In a fork child: every lane belonged to the parent's trace.
pub fn reset_after_fork() {
    LANES_USED.store(0, Ordering::Relaxed);
    FREE_HEAD.store(0, Ordering::Relaxed);
}

pub(super) fn lane_at(index: u32) -> *mut Lane {
    // SAFETY: index < MAX_LANES, inside the reserved mapping.
    unsafe { LANES.load(Ordering::Acquire).add(index as usize) }
}

/// Takes a lane for the calling thread.
pub fn acquire() -> Option<&'static mut Lane> {
    if LANES.load(Ordering::Acquire).is_null() {
        return None;
    }
    let lane = match pop_free() {
        Some(index) => lane_at(index),
        None => {
            let index = LANES_USED.fetch_add(1, Ordering::AcqRel);
            if index as usize >= MAX_LANES {
                LANES_USED.store(MAX_LANES as u32, Ordering::Relaxed);
                return None;
            }
            let lane = lane_at(index);
            // SAFETY: a never-used (or pre-fork) lane; only we hold it.
            unsafe {
                (*lane).id = index;
                (*lane).block = core::ptr::null_mut();
                (*lane).used = 0;
                (*lane).next_seq = 0;
                (*lane).ev_block = core::ptr::null_mut();
                (*lane).ev_used = 0;
                (*lane).ev_next_seq = 0;
                (*lane).ev_ring_len = 0;
                (*lane).ev_ring_oldest = 0;
                // A pre-fork lane's spares are in the parent's file.
                (*lane).spare = AtomicU64::new(0);
                // A pre-fork lane's grown index is the child's copy: keep it.
                if (*lane).big_index.is_null() {
                    (*lane).index_mask = INDEX_SLOTS - 1;
                }
            }
            lane
        }
    };
    // SAFETY: the lane is exclusively ours until released.
    let lane = unsafe { &mut *lane };
    // Never 0: zero-filled index slots must not look live.
    let generation =
        ((lane.tag_base >> MODE_BITS).wrapping_add(1) & (u32::MAX >> MODE_BITS)).max(1);
    lane.tag_base = generation << MODE_BITS;
    lane.thread = core::ptr::null_mut();
    lane.policy_thread = (0, false);
    lane.policy_sampling = Sampling { last_ns: [0; 16] };
    lane.held_stack = core::ptr::null();
    lane.access_bit = 0;
    lane.accesses = 0;
    lane.stack_top = 0;
    lane.resident_page = 0;
    lane.tallies = [Tally::default(); TALLY_DEPTH];
    lane.py_seen = [(0, 0); super::PY_SEEN_SLOTS];
    lane.py_tstate = 0;
    lane.forget_previous_thread();
    lane.blocks_taken = 0;
    // The previous thread's entries are stale (another generation).
    lane.index_live = 0;
    lane.sample_tick = 0;
    lane.holder_sample_at = 0;
    lane.shim_ns = 0;
    lane.active.store(true, Ordering::Release);
    Some(lane)
}

pub fn release(lane: &mut Lane) {
    lane.active.store(false, Ordering::Release);
    let index = lane.id;
    let mut head = FREE_HEAD.load(Ordering::Acquire);
    loop {
        FREE_NEXT[index as usize].store(head as u32, Ordering::Relaxed);
        let tag = (head >> 32).wrapping_add(1);
        let new = tag << 32 | (index as u64 + 1);
        match FREE_HEAD.compare_exchange_weak(head, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(now) => head = now,
        }
    }
}

fn pop_free() -> Option<u32> {
    let mut head = FREE_HEAD.load(Ordering::Acquire);
    loop {
        let top = head as u32;
        if top == 0 {
            return None;
        }
        let next = FREE_NEXT[(top - 1) as usize].load(Ordering::Relaxed);
        let tag = (head >> 32).wrapping_add(1);
        match FREE_HEAD.compare_exchange_weak(
            head,
            tag << 32 | next as u64,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return Some(top - 1),
            Err(now) => head = now,
        }
    }
}

/// How many lanes have a live thread: the threads alive that recorded
/// something (a thread that never made a hooked call has none).
pub fn live_threads_recorded() -> u32 {
    let mut n = 0;
    for_each_active(|_| n += 1);
    n
}

/// Calls `f` on every lane that currently has a live thread.
pub fn for_each_active(mut f: impl FnMut(&Lane)) {
    if LANES.load(Ordering::Acquire).is_null() {
        return;
    }
    let used = LANES_USED.load(Ordering::Acquire).min(MAX_LANES as u32);
    for index in 0..used {
        // SAFETY: index < used <= MAX_LANES; only shared access.
        let lane = unsafe { &*lane_at(index) };
        if lane.active.load(Ordering::Acquire) {
            f(lane);
        }
    }
}
