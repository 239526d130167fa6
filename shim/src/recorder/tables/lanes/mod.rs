//! Lanes: per-thread append-only record streams in the trace, plus each
//! lane's private index from (lock, call site, mode) to the counter record
//! that thread updates in place. Threads never share a lane while alive, so
//! recording never contends; a lane is recycled when its thread exits.
//!
//! The lane itself and its block supply are here; its counter index
//! (lookup, insertion, growth) is `index.rs`, and the pool of lanes
//! (taking one for a thread, giving it back, walking the live ones) is
//! `pool.rs`.

mod index;
mod pool;

pub use pool::{acquire, for_each_active, init, live_threads_recorded, release, reset_after_fork};
use pool::{lane_at, LANES_USED};

use crate::config;
use crate::diag::{warn_once, Warning};
use crate::recorder::base::caller::{Caller, Offsets, Seen};
use crate::recorder::base::own_stack::OwnStack;
use crate::recorder::tables::by_lock::ByLock;
use crate::recorder::tables::hot_cache::{HotCache, HotHit, HotTarget};
use crate::recorder::tables::lean_lines::{LeanLine, LeanLines};
use crate::recorder::tables::objects::ObjectSlot;
use crate::recorder::tables::python_calls::{PythonCall, PythonCalls};
use crate::recorder::trace::file;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use locksuit_format::*;

/// Most threads recorded at once. Threads beyond this pass through and are
/// counted as dropped.
pub const MAX_LANES: usize = 4096;
/// Counter-index slots per lane to start with (inline in the lane). A thread
/// that engages more (lock, line) pairs than fit gets a larger index of its
/// own, mapped off the hot path, up to `MAX_INDEX_SLOTS`; beyond that a full
/// neighbourhood evicts an entry: the evicted counter stays in the trace and
/// a fresh one is started, which the analyzer sums.
const INDEX_SLOTS: usize = 1024;
/// 16 MiB of index for one thread at most: room for a fine-grained
/// kernel's band (86,400 grid cells engaged at three lines, 259,200
/// counters). Half of it evicted counters on every sweep of such a band,
/// and the trace grew by a fresh counter per evicted pair and sweep until
/// it reached its cap.
const MAX_INDEX_SLOTS: usize = 1 << 19;
/// Fourfold: a thread engaging 65,536 pairs ends with 8 MiB, not 16 (a
/// table twice the size misses the cache more on every lookup).
const INDEX_GROWTH: usize = 4;
/// The neighbourhood a key may sit in. Linear probing makes runs of live
/// slots: at half load, runs longer than 32 occur in a table this size,
/// and 8 made neighbourhoods fill (and evict) with the index a third
/// full. The index grows at half load (see `insert`); this bound matters
/// once it cannot grow any more.
const PROBES: usize = 128;
/// Index and cache tags: `generation << MODE_BITS | mode`.
const MODE_BITS: u32 = 3;
const MODE_MASK: u32 = (1 << MODE_BITS) - 1;
/// Index modes from here up key condition-variable records; below, counter
/// records (`MODE_EXCLUSIVE`, `MODE_SHARED`, `MODE_POST`).
pub const FIRST_COND_MODE: u32 = 4;
/// Index mode of a condition wait record.
pub const MODE_COND_WAIT: u32 = FIRST_COND_MODE;
/// Index mode of a condition notify record.
pub const MODE_COND_NOTIFY: u32 = FIRST_COND_MODE + 1;
/// Index mode of a lock-order edge record.
pub const MODE_EDGE: u32 = FIRST_COND_MODE + 2;

#[derive(Clone, Copy)]
struct IndexSlot {
    ret: u64,
    context: u64,
    lock_id: u32,
    /// `generation << MODE_BITS | mode`; stale when the generation differs.
    tag: u32,
    record: *mut u8,
}

/// Per-lane copy of the learned caller-slot offsets, by return address.
#[derive(Clone, Copy)]
struct OffsetEntry {
    ret: u64,
    offsets: Offsets,
    /// Module-map epoch it was learned in (code may change at `dlclose`).
    epoch: u32,
}

const OFFSET_CACHE_SLOTS: usize = 64;

/// Marks an offset cache entry of a call keyed by its `.py` line (module-map
/// epochs never reach it).
const PYTHON_EPOCH: u32 = 1 << 31;

/// Most event blocks a lane remembers for reuse by the flight recorder.
const EVENT_RING: usize = 256;

/// Slots of [`Lane::py_seen`].
pub const PY_SEEN_SLOTS: usize = 64;

/// Laid out in order (`repr(C)`) so that the hot cache's first level, which
/// every acquisition looks at, is at the lane's own address: an entry's
/// address is the lane's plus its place, one instruction.
#[repr(C)]
pub struct Lane {
    /// What the hot path looks at first (see `hot_cache.rs`).
    hot: HotCache,
    pub id: u32,
    /// This thread's generation of the lane, already shifted into place
    /// (`generation << MODE_BITS`): a tag is this `| mode`, one instruction.
    tag_base: u32,
    block: *mut u8,
    used: u32,
    next_seq: u32,
    pub thread: *mut ThreadRecord,
    pub tid: u32,
    pub sample_tick: u32,
    /// When this thread may next sample a lock holder's CPU time during a
    /// wait (see `locks::wait_begin`): at most once a millisecond.
    pub holder_sample_at: u64,
    /// Time this thread spent in the shim's slow paths (site capture, trace
    /// growth), for overhead compensation; carried by every event.
    pub shim_ns: u64,
    /// The lane's event chain: its current block, bytes used, next sequence,
    /// and the blocks it owns, oldest first (what the flight recorder reuses).
    ev_block: *mut u8,
    ev_used: u32,
    ev_next_seq: u32,
    ev_ring: [*mut u8; EVENT_RING],
    ev_ring_len: usize,
    ev_ring_oldest: usize,
    /// Blocks reserved and backed for this lane ahead of need (`first << 32
    /// | count`): taken by its owner, or by any lane once the trace is full.
    spare: AtomicU64,
    /// Blocks this lane's thread took: the more, the bigger its batches.
    blocks_taken: u32,
    pub active: AtomicBool,
    offsets: [OffsetEntry; OFFSET_CACHE_SLOTS],
    /// Lean mode's table of lines (see `lean_lines.rs`).
    lean: LeanLines,
    index: [IndexSlot; INDEX_SLOTS],
    /// The grown index (anonymous mapping), or null while `index` serves.
    big_index: *mut IndexSlot,
    /// Slots of the index in use, minus one (a power of two minus one).
    index_mask: usize,
    /// Entries this lane's thread put in the index: it grows before it is
    /// half full, where runs of live slots stay short.
    index_live: usize,
    /// In front of the grown index: counters by lock id (see `by_lock.rs`).
    by_lock: ByLock,
    /// `LOCKSUIT_SWITCHES=1`: this thread's context-switch ring.
    pub switches: crate::recorder::trace::switch_ring::Ring,
    /// A policy's decision on this thread's events, and when it was made
    /// (see `policy::keeps_thread`; (0, _): not yet).
    pub policy_thread: (u32, bool),
    /// A policy's sampling of this thread's events (see `filter.rs`).
    pub policy_sampling: Sampling,
    /// The thread's held-lock stack (its `HeldStack`, in its thread-local
    /// storage), which a snapshot reads with `process_vm_readv`.
    pub held_stack: *const crate::recorder::tables::held::HeldStack,
    /// Data-level accesses (`access.rs`): this thread's bit, and how many
    /// accesses under a lock it made since it last added them up.
    pub access_bit: u64,
    pub accesses: u64,
    /// The top of this thread's stack (its locals are never data a lock
    /// guards), 0 if unknown.
    pub stack_top: u64,
    /// The program's page this thread last made resident for a lock it saw
    /// first in use (see `identity::make_resident`), 0 if none.
    pub resident_page: u64,
    /// The engagements whose accesses this thread is counting, by depth in
    /// its held stack (`ratios.rs`).
    pub tallies: [Tally; TALLY_DEPTH],
    /// CPython locks' counters of this thread and their engagements when
    /// last looked at (see `identities/python_holds.rs`), by counter.
    pub py_seen: [(u64, u64); PY_SEEN_SLOTS],
    /// This thread's CPython thread state, once checked to be its own (see
    /// `identities/python.rs`); 0 until then.
    pub py_tstate: u64,
    /// Calls from the interpreter by `.py` path (see `python_calls.rs`).
    py_calls: PythonCalls,
    /// The Python frames this thread's sites recorded (see
    /// `python_frame_cache.rs`).
    pub py_frames: crate::recorder::tables::python_frame_cache::PythonFrameCache,
}

/// Engagements this deep in the held stack, or deeper, share the last tally.
pub const TALLY_DEPTH: usize = 8;

/// One engagement's accesses, counted until the next engagement with
/// accesses at its depth of the held stack (or the thread's end) adds them
/// to its site's ratios. By depth, so that the locks taken and released
/// inside an engagement do not cut it in two.
#[derive(Clone, Copy, Default)]
pub struct Tally {
    /// The engagement: its site's counter record on this thread, and that
    /// counter's engagements then (0, 0: none).
    pub counter: usize,
    pub engagement: u64,
    pub site: u32,
    pub suitable: u32,
    pub unsuitable: u32,
    /// `LOCKSUIT_DATA_SAMPLE`: its accesses the sampler let through.
    pub sampled: u32,
    /// Another thread began waiting for the lock meanwhile.
    pub waited_for: bool,
}

/// Per event kind: when this thread last wrote one.
#[derive(Clone, Copy)]
pub struct Sampling {
    pub last_ns: [u64; 16],
}

/// Each lane's stack for deep work (see `own_stack.rs`), kept from one
/// thread of the lane to the next.
static LANE_STACKS: [OwnStack; MAX_LANES] = [const { OwnStack::new() }; MAX_LANES];

/// `Lane::spare`'s word for `count` blocks from `first`.
fn spare_word(first: u32, count: u32) -> u64 {
    u64::from(first) << 32 | u64::from(count)
}

/// Takes one block of `spare` (see `Lane::spare`), if it has any.
fn take_spare(spare: &AtomicU64) -> Option<u32> {
    let mut now = spare.load(Ordering::Acquire);
    loop {
        let (first, count) = ((now >> 32) as u32, now as u32);
        if count == 0 {
            return None;
        }
        let rest = spare_word(first + 1, count - 1);
        match spare.compare_exchange_weak(now, rest, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(first),
            Err(seen) => now = seen,
        }
    }
}

/// The trace is full: a block another lane reserved ahead and has not
/// used, if any (its owner may be idle, or its thread gone).
#[cold]
fn steal_spare() -> Option<u32> {
    let used = (LANES_USED.load(Ordering::Acquire) as usize).min(MAX_LANES);
    (0..used as u32).find_map(|index| {
        // SAFETY: a lane below LANES_USED lies in the mapping; only its
        // atomic `spare` is touched (through a raw pointer, not the lane),
        // which any thread may take from.
        take_spare(unsafe { &*core::ptr::addr_of!((*lane_at(index)).spare) })
    })
}

impl Lane {
    /// Appends `record` followed by `tail` bytes; returns where it landed so
    /// the owner can update it in place. `None` when space ran out (counted).
    pub fn append<T: Pod>(&mut self, record: &T, tail: &[u8]) -> Option<*mut T> {
        let size = align_record(core::mem::size_of::<T>() + tail.len());
        if size > BLOCK_PAYLOAD || crate::recorder::trace::copied::is_copy() {
            // Too big, or (see `not_ours`) not this process's trace.
            self.not_ours();
            return None;
        }
        if self.block.is_null() || self.used as usize + size > BLOCK_PAYLOAD {
            match self.take_block(self.next_seq, BLOCK_LANE) {
                Some(block) => {
                    self.block = block;
                    self.used = 0;
                    self.next_seq += 1;
                }
                None => {
                    self.count_dropped();
                    file::count_dropped_record();
                    return None;
                }
            }
        }
        // SAFETY: `used + size <= BLOCK_PAYLOAD`, so the record lies inside
        // this lane's current block, which only this thread writes. The
        // block was zeroed on allocation, so padding bytes are already 0.
        unsafe {
            let dst = self.block.add(BLOCK_HEADER_SIZE + self.used as usize);
            core::ptr::copy_nonoverlapping(
                (record as *const T).cast::<u8>(),
                dst,
                core::mem::size_of::<T>(),
            );
            core::ptr::copy_nonoverlapping(
                tail.as_ptr(),
                dst.add(core::mem::size_of::<T>()),
                tail.len(),
            );
            self.used += size as u32;
            file::commit(self.block, self.used);
            Some(dst.cast())
        }
    }

    /// Appends an event to the lane's event chain. When the trace is full:
    /// with the flight recorder on, the oldest event block of this lane is
    /// reused (the most recent events are kept); otherwise the event is
    /// dropped and counted.
    #[inline(always)]
    pub fn append_event(&mut self, event: &EventRecord) {
        if crate::recorder::trace::copied::is_copy() {
            self.not_ours();
            return;
        }
        let size = core::mem::size_of::<EventRecord>();
        let full = self.ev_block.is_null() || self.ev_used as usize + size > BLOCK_PAYLOAD;
        if full && !self.event_block_or_drop() {
            return;
        }
        // SAFETY: the event fits in this lane's current event block, which
        // only this thread writes.
        unsafe {
            let dst = self.ev_block.add(BLOCK_HEADER_SIZE + self.ev_used as usize);
            core::ptr::copy_nonoverlapping((event as *const EventRecord).cast::<u8>(), dst, size);
            self.ev_used += size as u32;
            file::commit(self.ev_block, self.ev_used);
        }
    }

    /// The event block is full (or none yet): the next one, or the event
    /// is dropped and counted (false).
    #[cold]
    #[inline(never)]
    fn event_block_or_drop(&mut self) -> bool {
        if self.next_event_block() {
            return true;
        }
        self.count_dropped();
        file::count_dropped_record();
        false
    }

    fn next_event_block(&mut self) -> bool {
        let seq = self.ev_next_seq;
        if let Some(block) = self.take_block(seq, BLOCK_EVENTS) {
            if self.ev_ring_len < EVENT_RING {
                self.ev_ring[self.ev_ring_len] = block;
                self.ev_ring_len += 1;
            }
            self.ev_block = block;
        } else if config::flight_recorder() && self.ev_ring_len > 0 {
            let block = self.ev_ring[self.ev_ring_oldest];
            self.ev_ring_oldest = (self.ev_ring_oldest + 1) % self.ev_ring_len;
            // SAFETY: one of this lane's own event blocks.
            unsafe { file::recycle_block(block, seq) };
            self.ev_block = block;
        } else {
            return false;
        }
        self.ev_used = 0;
        self.ev_next_seq += 1;
        true
    }

    /// A new block for this lane, numbered `seq` in its chain of `kind`:
    /// one it reserved ahead if it has one. A thread's first four blocks
    /// are reserved one at a time (most threads need no more); then each
    /// batch is half as many blocks as it took so far, up to
    /// [`file::BATCH_BLOCKS`], so what it may leave unused is at most half
    /// of what it wrote. When the trace is full (or the disk), another
    /// lane's spare block is taken.
    fn take_block(&mut self, seq: u32, kind: u32) -> Option<*mut u8> {
        let index = match take_spare(&self.spare) {
            Some(index) => index,
            // System calls, and maybe a warning: deep work.
            None => on_stack_of(self.id, || self.reserve_blocks())?,
        };
        self.blocks_taken = self.blocks_taken.saturating_add(1);
        file::init_block(index, self.id, seq, kind)
    }

    /// A batch of new blocks for this lane: the first to use now, the rest
    /// kept as its spares.
    #[inline(never)]
    fn reserve_blocks(&mut self) -> Option<u32> {
        let wanted = (self.blocks_taken / 2).max(1);
        let spread = LANES_USED.load(Ordering::Relaxed);
        match file::alloc_blocks(wanted, spread) {
            Ok(got) => {
                if got.count > 1 {
                    // Empty until now, and no other lane takes from an
                    // empty spare: a plain store.
                    self.spare
                        .store(spare_word(got.first + 1, got.count - 1), Ordering::Release);
                }
                Some(got.first)
            }
            // Blocks other lanes reserved ahead are backed: usable whether
            // the cap stopped this one or the disk did.
            Err(why) => match steal_spare() {
                Some(index) => Some(index),
                None => {
                    if why == file::NoBlock::Cap {
                        file::cap_reached();
                    }
                    None
                }
            },
        }
    }

    /// In a child made by a clone none of our hooks saw, in the middle of
    /// writing with a lane of the parent's: it is cut off from the
    /// parent's trace (see `copied.rs`), and writes nothing.
    #[cold]
    fn not_ours(&self) {
        if crate::recorder::trace::copied::is_copy() {
            crate::recorder::trace::copied::adopt(false);
        }
    }

    pub fn count_dropped(&mut self) {
        if !self.thread.is_null() {
            // SAFETY: the thread record is in this lane's mapped blocks and
            // only its owner updates it.
            unsafe { (*self.thread).dropped += 1 };
        }
    }

    /// The context offsets for return address `ret`, if this lane has them
    /// (the generation tag is not needed: offsets are per code address).
    #[inline]
    pub fn offsets_of(&self, ret: u64) -> Option<Offsets> {
        let e = &self.offsets[(ret.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize];
        (e.ret == ret && e.epoch == crate::recorder::base::caller::epoch()).then_some(e.offsets)
    }

    /// The context offsets of `ret`, a call from the CPython interpreter
    /// keyed by its `.py` line, if this lane has them: kept in the same
    /// cache with their epoch marked, so that [`Lane::offsets_of`] never
    /// finds them and such calls take the Python arm (`sites.rs`).
    pub fn python_offsets_of(&self, ret: u64) -> Option<Offsets> {
        let e = &self.offsets[(ret.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize];
        (e.ret == ret && e.epoch == crate::recorder::base::caller::epoch() | PYTHON_EPOCH)
            .then_some(e.offsets)
    }

    pub fn remember_python_offsets(&mut self, ret: u64, offsets: Offsets) {
        self.offsets[(ret.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize] = OffsetEntry {
            ret,
            offsets,
            epoch: crate::recorder::base::caller::epoch() | PYTHON_EPOCH,
        };
    }

    pub fn remember_offsets(&mut self, ret: u64, offsets: Offsets) {
        self.offsets[(ret.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize] = OffsetEntry {
            ret,
            offsets,
            epoch: crate::recorder::base::caller::epoch(),
        };
    }

    /// The thread's last call from the CPython interpreter on a lock not
    /// yet judged (see `python_calls.rs`), forgotten, and its mode.
    pub fn take_python_call(&mut self) -> Option<(PythonCall, u32)> {
        let call = self.py_calls.take_last()?;
        (call.tag & !MODE_MASK == self.tag_base).then(|| {
            let mode = call.tag & MODE_MASK;
            (call, mode)
        })
    }

    /// The lock slot and counter cached for this call from the interpreter
    /// by its `.py` path (`context`), if any.
    #[inline]
    pub fn python_call(
        &self,
        (addr, caller, mode): (u64, Caller, u32),
        context: u64,
    ) -> Option<(&'static ObjectSlot, *mut u8)> {
        self.py_calls
            .find(addr, (caller.ret, context), self.tag(mode))
    }

    /// Caches a call from the interpreter by its `.py` path, and notes it
    /// as the thread's last, to be judged by its next.
    pub fn remember_python_call(
        &mut self,
        (addr, caller, mode): (u64, Caller, u32),
        context: u64,
        target: (&ObjectSlot, u32, *mut u8),
    ) {
        let tag = self.tag(mode);
        self.py_calls
            .remember((addr, caller.ret, context), tag, target);
        self.py_calls.set_last(addr, tag, target);
    }

    /// A new thread's lane: the previous thread's last call is not judged,
    /// the hot cache's first level is emptied and its second judged afresh
    /// (see `HotCache::new_thread`).
    pub fn forget_previous_thread(&mut self) {
        self.py_calls.forget_last();
        self.hot.new_thread();
        self.lean.new_thread();
    }

    /// Notes a call from the interpreter found cached as the thread's last.
    pub fn note_python_call(
        &mut self,
        (addr, mode): (u64, u32),
        target: (&ObjectSlot, u32, *mut u8),
    ) {
        let tag = self.tag(mode);
        self.py_calls.set_last(addr, tag, target);
    }

    /// Lean mode's table of lines, ready for this thread; null if it
    /// cannot be had (see `LeanLines::table`).
    pub fn lean_lines(&mut self) -> *const LeanLine {
        self.lean.table()
    }

    /// Lean mode's table of lines is full (see `LeanLines::full`).
    pub fn lean_full(&self) -> bool {
        self.lean.full()
    }

    /// Adds a mutex call taken the general way in lean mode to the table of
    /// lines (see `lean_lines.rs`).
    pub fn remember_lean(&mut self, (addr, ret): (u64, u64), slot: &ObjectSlot, counter: *mut u8) {
        self.lean.remember((addr, ret), slot, counter);
    }

    /// Entries the hot cache has written so far (see `HotCache::writes`).
    #[inline(always)]
    pub fn hot_writes(&self) -> u32 {
        self.hot.writes()
    }

    /// The hot cache's entry for this call (see `hot_cache.rs`).
    #[inline(always)]
    pub fn hot(&self, addr: u64, caller: Caller, mode: u32) -> Option<HotTarget> {
        self.hot.find(addr, caller, mode)
    }

    /// [`hot`](Self::hot)'s entry itself (see `HotHit`).
    #[inline(always)]
    pub fn hot_hit(&self, addr: u64, caller: Caller, mode: u32) -> Option<HotHit> {
        self.hot.find_hit(addr, caller, mode)
    }

    /// Lean mode's hot-cache entry for a call keyed by its line alone.
    #[inline(always)]
    pub fn hot_line(&self, addr: u64, ret: u64, mode: u32) -> Option<HotTarget> {
        self.hot.find_line(addr, ret, mode)
    }

    /// The hot cache's second level's entry for this call (see
    /// `hot_cache.rs`): looked at on a miss of the first.
    #[inline]
    pub fn warm(&mut self, addr: u64, caller: Caller, mode: u32) -> Option<HotTarget> {
        let tag = self.tag(mode);
        self.hot.find_warm(addr, caller, (tag, mode))
    }

    /// Whether the hot cache's second level serves this thread (mapped,
    /// and not switched off for missing too often): else a look there
    /// would find nothing.
    #[inline(always)]
    pub fn warm_serves(&self) -> bool {
        self.hot.warm_serves()
    }

    /// [`warm`](Self::warm)'s entry itself (see `HotHit`), once
    /// [`warm_serves`](Self::warm_serves) said yes.
    ///
    /// # Safety
    /// As [`HotCache::look_warm`]'s: the second level serves.
    #[inline]
    pub unsafe fn look_warm(&mut self, addr: u64, caller: Caller, mode: u32) -> Option<HotHit> {
        let tag = self.tag(mode);
        // SAFETY: forwarded from the caller.
        unsafe { self.hot.look_warm(addr, caller, (tag, mode)) }
    }

    /// A [`look_warm`](Self::look_warm) missed (see `HotCache::warm_missed`).
    pub fn warm_missed(&mut self) {
        self.hot.warm_missed();
    }

    /// Caches a call path the general path looked up.
    pub fn remember_hot(
        &mut self,
        (addr, caller, mode): (u64, Caller, u32),
        seen: &Seen,
        target: (&ObjectSlot, u32, *mut u8),
    ) {
        let tag = self.tag(mode);
        self.hot.remember((addr, caller, seen), (tag, mode), target);
    }

    #[inline]
    fn tag(&self, mode: u32) -> u32 {
        self.tag_base | mode
    }
}

/// Counts an operation that passed through unrecorded.
pub fn drop_op(lane: Option<&mut Lane>) {
    file::count_dropped_op();
    if let Some(lane) = lane {
        lane.count_dropped();
    }
    warn_once(
        Warning::TablesFull,
        b"some operations could not be recorded (too many threads, locks or nesting); they are counted as dropped",
    );
}

/// Runs first-sight work (unwinding, new records) on the lane's own stack
/// and adds its time to the thread's slow-path total, which events carry
/// for compensation.
pub fn timed_slow_work<R>(lane: &mut Lane, work: impl FnOnce(&mut Lane) -> R) -> R {
    let started = crate::recorder::time::clock::now_ns();
    let result = on_own_stack(lane, work);
    lane.shim_ns += crate::recorder::time::clock::now_ns()
        .saturating_sub(started)
        .max(1);
    result
}

/// Runs `work`, deep work of the lane's thread, on the lane's own stack
/// (see `own_stack.rs`): the program's stack may be small.
#[inline]
pub fn on_own_stack<R>(lane: &mut Lane, work: impl FnOnce(&mut Lane) -> R) -> R {
    on_stack_of(lane.id, || work(lane))
}

/// Runs `work` on the own stack of lane `id`, which must be the calling
/// thread's (for callers that hold their lane by a raw pointer).
#[inline]
pub fn on_stack_of<R>(id: u32, work: impl FnOnce() -> R) -> R {
    LANE_STACKS[id as usize % MAX_LANES].run(work)
}
