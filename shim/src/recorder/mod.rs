//! The recorder core: what the hooks report, and the only code that writes
//! the trace. Its API is plain Rust so tests can drive it without LD_PRELOAD.
//!
//! Flow for an acquisition: [`prepare`] (look up the lock, the per-thread
//! counter and — the first time a line is seen — its call chain) happens
//! *before* the real lock call, so the unwinder never runs while we hold a
//! lock; then [`acquired`] or [`try_failed`]/[`timed_out`]. On the contended
//! path [`wait_begin`]/[`wait_end`] bracket the blocking call. [`released`]
//! runs just before the real unlock, while the lock is still ours.
//!
//! All functions must be called inside a hook guard: they are not reentrant.

pub mod access;
pub mod by_lock;
mod calls;
mod clock;
mod conds;
mod control;
mod events;
pub mod file;
mod filter;
mod heap;
pub mod held;
mod identity;
mod image;
mod interest;
pub mod lanes;
mod lock_order;
pub mod modules;
pub mod objects;
pub mod path;
mod procfs;
mod ratios;
pub mod selfcost;
pub mod sites;
mod snapshot;
pub mod switches;
mod symbols;
mod threads;
mod untimed;
mod usage;

use crate::config;
use crate::diag::{warn_once, Warning};
use crate::guard::HookGuard;
use core::sync::atomic::{AtomicPtr, Ordering};
use held::{HeldEntry, HELD_CONTENDED, HELD_HANDOVER, HELD_SHARED};
use lanes::Lane;
use locksuit_format::*;
use objects::ObjectSlot;

pub use calls::{call_blocked, CallFrom};
pub use clock::{clock_ns, now_ns, Stamp};
pub use conds::{cond_notified, cond_prepare, CondWait, CondWaitInFlight};
pub use events::Waiting;
use identity::object;
pub use identity::{object_destroyed, object_initialized, object_opened};
pub use sites::Caller;
pub use threads::{
    current_lane, exec_failed, exec_starting, join_begin, join_finished, next_create_serial,
    process_exit, thread_created, thread_ended, thread_named, JoinStarted,
};
use threads::{wait_ended, wait_started, PendingWait};

/// Counter mode of a condition wait record in the per-lane index.
const MODE_COND_WAIT: u32 = lanes::FIRST_COND_MODE;
/// Counter mode of a condition notify record in the per-lane index.
const MODE_COND_NOTIFY: u32 = lanes::FIRST_COND_MODE + 1;

/// Reserves `len` bytes of zero-filled private memory, touched lazily (the
/// shim's tables and grown indexes; never the heap). Leaves errno as it was.
pub fn map_anonymous<T>(len: usize) -> Option<*mut T> {
    let _errno = crate::diag::ErrnoGuard::save();
    // SAFETY: a fresh anonymous mapping; it aliases nothing.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p.cast())
}

/// The table published in `cell`, mapped (`len` bytes, zeroed, touched
/// lazily) on first use; when two threads race, one mapping wins and the
/// other is given back. `None` if the memory cannot be had.
pub fn mapped_once<T>(cell: &AtomicPtr<T>, len: usize) -> Option<*mut T> {
    let table = cell.load(Ordering::Acquire);
    if !table.is_null() {
        return Some(table);
    }
    let fresh: *mut T = map_anonymous(len)?;
    match cell.compare_exchange(
        core::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => Some(fresh),
        Err(theirs) => {
            // SAFETY: our own mapping of `len` bytes, never published.
            unsafe { libc::munmap(fresh.cast(), len) };
            Some(theirs)
        }
    }
}

/// Creates this process's trace and the shared tables. `extra_flags` is
/// `FLAG_FORK_CHILD` in a fork child, which also discards inherited state.
pub fn start_process(extra_flags: u32) -> Result<(), file::NotRecording> {
    if !objects::init() || !lanes::init() {
        warn_once(
            Warning::NoTraceFile,
            b"cannot reserve memory for the shim's tables; this process is not recorded",
        );
        return Err(file::NotRecording);
    }
    if extra_flags & FLAG_FORK_CHILD != 0 {
        filter::reset_after_fork();
        snapshot::reset_after_fork();
        access::reset_after_fork();
        ratios::reset_after_fork();
        control::reset_after_fork();
        interest::reset_after_fork();
        objects::reset_after_fork();
        lanes::reset_after_fork();
        sites::reset_after_fork();
        modules::reset_after_fork();
        crate::diag::reset_after_fork();
    }
    modules::init();
    interest::init();
    clock::init(config::tsc_allowed());
    // Modules are recorded when the first site needs them.
    // Both clocks at one moment: absolute times (deadlines on either clock)
    // are shown relative to the start.
    let start = (now_ns(), clock_ns(libc::CLOCK_REALTIME));
    file::create(extra_flags, start)
}

/// Counts an operation that passed through unrecorded.
fn drop_op(lane: Option<&mut Lane>) {
    file::count_dropped_op();
    if let Some(lane) = lane {
        lane.count_dropped();
    }
    warn_once(
        Warning::TablesFull,
        b"some operations could not be recorded (too many threads, locks or nesting); they are counted as dropped",
    );
}

/// Everything an acquisition needs, looked up before the real call.
pub struct Prepared {
    addr: u64,
    slot: &'static ObjectSlot,
    lock_id: u32,
    counter: *mut CounterRecord,
    lane: *mut Lane,
}

/// What a successful acquisition holds until its release.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// One owner (mutex, spinlock, rwlock writer).
    Exclusive,
    /// One of possibly many readers.
    Shared,
    /// Nothing owned (a semaphore wait): counted, never released by us.
    None,
}

/// How an engagement came about.
#[derive(Clone, Copy)]
pub enum How {
    Uncontended,
    /// A successful trylock (uncontended, and it could not have blocked).
    Tried,
    Contended {
        wait_ns: u64,
        now: u64,
    },
    /// Re-acquired at the end of a condition wait.
    CondReacquire {
        now: u64,
    },
}

/// Looks up the lock at `addr` and this thread's counter for it at the call
/// site, recording the lock, site and chain if new.
#[inline(always)]
pub fn prepare(
    g: &HookGuard,
    addr: u64,
    kind: ObjectKind,
    mode: u32,
    caller: Caller,
) -> Option<Prepared> {
    let lane = current_lane(g)?;
    let started = g.thread().call_cost().begin();
    let mut known_context = None;
    if let Some(offsets) = lane.offsets_of(caller.ret) {
        let context = caller.context(&offsets);
        known_context = Some(context);
        if let Some(hit) = lane.cached(addr, caller.ret, context, mode) {
            // SAFETY: slots live in the object table for the life of the process.
            let slot = unsafe { &*hit.slot };
            // Still the same lock (not destroyed and re-initialised since)?
            if slot.id() == hit.lock_id {
                // A hot-cache hit: fast-path work, sampled (see selfcost.rs).
                g.thread().call_cost().end(started);
                return Some(Prepared {
                    addr,
                    slot,
                    lock_id: hit.lock_id,
                    counter: hit.counter.cast(),
                    lane,
                });
            }
        }
    }
    prepare_slow(
        g,
        lane,
        (addr, kind, mode),
        (caller, known_context),
        started,
    )
}

/// The call's context (see [`Caller::context`]), learning and caching the
/// stack offsets it is read at on the first sight of the return address.
fn context_of(lane: &mut Lane, caller: Caller, known: Option<u64>) -> u64 {
    if let Some(context) = known {
        return context;
    }
    let offsets = match lane.offsets_of(caller.ret) {
        Some(offsets) => offsets,
        None => timed_slow_work(lane, |lane| {
            let offsets = sites::context_offsets(caller);
            lane.remember_offsets(caller.ret, offsets);
            offsets
        }),
    };
    caller.context(&offsets)
}

/// A miss in the hot cache: the lock table, then this thread's counters.
/// Lookups are fast-path work, sampled like the rest (`started`); the work
/// done the first time a lock, line or counter is seen is timed where it
/// happens ([`timed_slow_work`]), and a call that did any is not sampled.
#[cold]
fn prepare_slow(
    g: &HookGuard,
    lane: &'static mut Lane,
    (addr, kind, mode): (u64, ObjectKind, u32),
    caller: (Caller, Option<u64>),
    started: u64,
) -> Option<Prepared> {
    let lane_ptr: *mut Lane = lane;
    let slow_before = lane.shim_ns;
    let prepared = prepare_uncached(lane, (addr, kind, mode), caller);
    // SAFETY: the lane is this thread's for its lifetime; `prepared` holds
    // only a raw pointer to it, so no reference is aliased here.
    if unsafe { (*lane_ptr).shim_ns } == slow_before {
        g.thread().call_cost().end(started);
    }
    prepared
}

/// Runs first-sight work (unwinding, new records) and adds its time to the
/// thread's slow-path total, which events carry for compensation.
fn timed_slow_work<R>(lane: &mut Lane, work: impl FnOnce(&mut Lane) -> R) -> R {
    let started = now_ns();
    let result = work(lane);
    lane.shim_ns += now_ns().saturating_sub(started).max(1);
    result
}

fn prepare_uncached(
    lane: &'static mut Lane,
    (addr, kind, mode): (u64, ObjectKind, u32),
    (caller, known_context): (Caller, Option<u64>),
) -> Option<Prepared> {
    let found = object(lane, addr, kind)?;
    let context = context_of(lane, caller, known_context);
    let counter: *mut CounterRecord = match lane.find_by_lock(found.id, caller.ret, context, mode) {
        Some(p) => p.cast(),
        None => {
            let counter = match lane.find(found.id, caller.ret, context, mode) {
                Some(p) => p.cast(),
                None => timed_slow_work(lane, |lane| {
                    new_counter(lane, found.id, caller, context, mode)
                })?,
            };
            lane.remember_by_lock(found.id, caller.ret, context, mode, counter.cast());
            counter
        }
    };
    if found.created {
        // SAFETY: the counter is in this thread's lane, in the live mapping.
        identity::note_first_use(&found, unsafe { (*counter).site_id });
    }
    lane.remember(
        addr,
        caller.ret,
        context,
        mode,
        found.slot,
        found.id,
        counter.cast(),
    );
    Some(Prepared {
        addr,
        slot: found.slot,
        lock_id: found.id,
        counter,
        lane,
    })
}

#[cold]
fn new_counter(
    lane: &mut Lane,
    lock_id: u32,
    caller: Caller,
    context: u64,
    mode: u32,
) -> Option<*mut CounterRecord> {
    let site_id = sites::site_id(lane, caller, context);
    let record = CounterRecord {
        hdr: RecordHeader {
            kind: RecordKind::Counter as u16,
            size: core::mem::size_of::<CounterRecord>() as u16,
            aux: mode,
        },
        lock_id,
        site_id,
        ..Default::default()
    };
    let p = lane.append(&record, &[])?;
    lane.insert(lock_id, caller.ret, context, mode, p.cast());
    Some(p)
}

impl Prepared {
    // The record is in the mapping, not in `self`; `Prepared` is a handle.
    #[allow(clippy::mut_from_ref)]
    fn counter(&self) -> &mut CounterRecord {
        // SAFETY: the counter lives in this thread's lane in the live
        // mapping, and only this thread updates it.
        unsafe { &mut *self.counter }
    }

    #[allow(clippy::mut_from_ref)]
    fn lane(&self) -> &mut Lane {
        // SAFETY: the lane belongs to this thread for the thread's lifetime.
        unsafe { &mut *self.lane }
    }

    /// An exclusive engagement: this thread holds the lock now, and a change
    /// of owner is counted.
    #[inline(always)]
    fn take_ownership(&self) {
        let tid = self.lane().tid;
        self.slot.holder.store(tid, Ordering::Relaxed);
        // Written only when it changes: the line stays shared otherwise.
        let last = self.slot.last_owner.load(Ordering::Relaxed);
        if last != tid {
            self.slot.last_owner.store(tid, Ordering::Relaxed);
            if last != 0 {
                self.counter().owner_changes += 1;
            }
        }
    }

    /// Taken while `held_before` engagements were held (see `track_hold`).
    #[cold]
    #[inline(never)]
    fn nested(&self, g: &HookGuard, held_before: usize, tried: bool) {
        if held_before < held::MAX_HELD {
            lock_order::nested(g, self, tried);
        } else {
            // Nesting deeper than we track: the engagement is counted, its
            // hold, task switch and lock order are not.
            drop_op(Some(self.lane()));
        }
    }

    /// Puts the engagement on the held-lock stack for its release to find;
    /// taken while other locks were held, it is a lock-order edge from each.
    #[inline(always)]
    fn track_hold(&self, g: &HookGuard, flags: u32, (since_ns, shim_ns): (u64, u64), tried: bool) {
        let held_before = g.thread().held().push(HeldEntry {
            addr: self.addr,
            lock_id: self.lock_id,
            flags,
            slot: self.slot,
            counter: self.counter,
            since_ns,
            shim_ns,
        });
        if held_before != 0 {
            self.nested(g, held_before, tried);
        }
    }
}

/// Decides whether to time this uncontended hold (sampling; 0 = never).
#[inline]
fn sample_start(lane: &mut Lane) -> u64 {
    let period = config::hold_sample_period();
    if period == 0 {
        return 0;
    }
    lane.sample_tick = lane.sample_tick.wrapping_add(1);
    if lane.sample_tick.is_multiple_of(period) {
        now_ns()
    } else {
        0
    }
}

/// The lock was acquired.
#[inline(always)]
pub fn acquired(g: &HookGuard, p: &Prepared, how: How, hold: Hold) {
    let started = g.thread().call_cost().begin();
    // `how` and `hold` are constants at each call site, so this test folds
    // to one flag load on the path almost every acquisition takes.
    let untimed = matches!(how, How::Uncontended | How::Tried) && config::untimed_uncontended();
    match hold {
        Hold::Exclusive if untimed => untimed::acquired_exclusive(g, p, matches!(how, How::Tried)),
        Hold::None if untimed => untimed::acquired_unheld(p),
        _ => record_acquired(g, p, how, hold),
    }
    g.thread().call_cost().end(started);
}

/// The shim's own time on this thread so far: the slow paths as timed, the
/// fast path as estimated from samples (see `selfcost.rs`).
fn shim_time_ns(g: &HookGuard, lane: &Lane) -> u64 {
    lane.shim_ns + g.thread().call_cost().estimated_ns()
}

#[inline]
fn record_acquired(g: &HookGuard, p: &Prepared, how: How, hold: Hold) {
    let counter = p.counter();
    counter.engagements += 1;
    let (flags, since_ns) = match how {
        How::Uncontended | How::Tried if config::events_all() => {
            // Full tracing: every acquisition is an event, and every hold is timed.
            let now = now_ns();
            let seq = p.slot.seq.load(Ordering::Relaxed);
            events::acquired(p.lane(), p.lock_id, counter.site_id, seq, now);
            (0, now)
        }
        How::Uncontended | How::Tried => (0, sample_start(p.lane())),
        How::Contended { wait_ns, now } => {
            counter.contended += 1;
            counter.wait_ns += wait_ns;
            if hold == Hold::None {
                // A blocked semaphore wait: its task switch now, as there
                // is no release to count it at.
                counter.task_switches += 1;
            }
            (HELD_CONTENDED, now)
        }
        How::CondReacquire { now } => {
            counter.cond_reacquires += 1;
            (HELD_HANDOVER, now)
        }
    };
    let flags = match hold {
        Hold::Exclusive => {
            p.take_ownership();
            flags
        }
        Hold::Shared => flags | HELD_SHARED,
        Hold::None => return,
    };
    let shim_ns = if since_ns != 0 {
        shim_time_ns(g, p.lane())
    } else {
        0
    };
    p.track_hold(g, flags, (since_ns, shim_ns), matches!(how, How::Tried));
}

/// Records an acquisition's result if it is not the usual one: a robust
/// mutex's (EOWNERDEAD: taken, its owner died; ENOTRECOVERABLE: refused),
/// an error-checking mutex's relock (EDEADLK), a semaphore wait a signal
/// interrupted (EINTR), any other error. Success, a trylock's EBUSY and a
/// timeout (which has its own event) are not.
#[inline]
pub fn unusual_outcome(p: &Prepared, rc: i32) {
    if rc != 0 && rc != libc::EBUSY && rc != libc::ETIMEDOUT {
        let site = p.counter().site_id;
        events::outcome(p.lane(), (p.lock_id, site), rc as u32, now_ns());
    }
}

/// A trylock found the lock taken.
pub fn try_failed(p: &Prepared) {
    p.counter().try_failures += 1;
}

/// A timed acquisition gave up at `now`.
pub fn timed_out(p: &Prepared, waited: &Waiting, now: u64) {
    let counter = p.counter();
    counter.timeouts += 1;
    counter.wait_ns += now.saturating_sub(waited.started);
    let seq = p.slot.seq.load(Ordering::Relaxed);
    let site = counter.site_id;
    events::waited(
        p.lane(),
        EVENT_TIMED_OUT,
        (p.lock_id, site),
        waited,
        seq,
        now,
    );
}

/// About to block on the lock: count ourselves as a waiter, note who holds
/// it and its release sequence, and start the clock.
pub fn wait_begin(g: &HookGuard, p: &Prepared, deadline: u64) -> Waiting {
    control::poll();
    let seq = p.slot.seq.load(Ordering::Relaxed);
    p.slot.begin_wait(seq);
    // The sequence again, now that a release sees this thread waiting: a
    // release counted after it surely wrote its event (the merged stream
    // waits for those between this and the acquisition, on a read-write
    // lock or a semaphore).
    let asked = p.slot.seq.load(Ordering::Relaxed);
    let waiting = Waiting {
        seq: asked,
        ended_seq: asked,
        owner: p.slot.holder.load(Ordering::Relaxed),
        started: now_ns(),
        deadline,
        waiters: p.slot.waiting(),
    };
    let pending = PendingWait {
        kind: WAIT_LOCK,
        object: p.lock_id,
        site: p.counter().site_id,
        holder: waiting.owner,
        since_ns: waiting.started,
        target: 0,
        deadline,
    };
    wait_started(p.lane(), pending, g.thread().held().entries());
    let cause = snapshot::Cause {
        object: p.lock_id,
        site: p.counter().site_id,
        waiters: waiting.waiters,
        now: waiting.started,
    };
    snapshot::on_wait_begin(p.lane, &cause);
    waiting
}

/// A load or store of `address` by a thread that holds a lock (a program
/// built with `locksuit cc`).
pub fn accessed(g: &HookGuard, address: u64, write: bool) {
    let Some(lane) = current_lane(g) else { return };
    if let Some(held) = g.thread().held().top() {
        access::touched(lane, held, address, write);
    }
}

/// A heap block of `size` bytes at `address` was allocated by the call
/// returning to `pc` (a program built with `locksuit cc`).
pub fn block_allocated(address: u64, size: u64, pc: u64) {
    heap::block_allocated(address, size, pc);
}

/// A heap block of `size` bytes at `address` was freed (a program built
/// with `locksuit cc`): what was recorded on it is finished.
pub fn block_freed(address: u64, size: u64) {
    access::block_freed(address, size);
}

/// A wait a cancellation unwound out of: it no longer waits.
pub fn wait_abandoned(p: &Prepared) {
    p.slot.end_wait();
    wait_ended(p.lane());
}

/// Done blocking; returns (wait, now).
pub fn wait_end(p: &Prepared, waited: &mut Waiting) -> (u64, u64) {
    // Read while this thread still counts as waiting: every release up to
    // it saw a waiter, and wrote its event.
    waited.ended_seq = p.slot.seq.load(Ordering::Relaxed);
    p.slot.end_wait();
    wait_ended(p.lane());
    let now = now_ns();
    (now.saturating_sub(waited.started), now)
}

/// A contended acquisition completed (after [`acquired`]): the event that
/// says whom this thread waited for.
pub fn blocked(p: &Prepared, waited: &Waiting, now: u64) {
    // A lock held exclusively now has had no release since; a shared one
    // (read, semaphore) may have: the sequence while still waiting.
    let seq = waited.ended_seq;
    let site = p.counter().site_id;
    events::waited(p.lane(), EVENT_BLOCKED, (p.lock_id, site), waited, seq, now);
    // A slow path already: read the context switches the wait caused.
    switches::drain(p.lane(), false);
}

/// The lock at `addr` is about to be released by this thread (called before
/// the real unlock, while it is still ours). `extra` adds held flags (a
/// condition wait hands the lock over).
#[inline(always)]
pub fn released(g: &HookGuard, addr: u64, extra: u32) {
    let started = g.thread().call_cost().begin();
    if extra != 0 || !untimed::released(g, addr) {
        record_released(g, addr, extra);
    }
    g.thread().call_cost().end(started);
}

#[inline]
fn record_released(g: &HookGuard, addr: u64, extra: u32) {
    let Some(entry) = g.thread().held().take(addr) else {
        return;
    };
    let mut waiters = 0;
    let mut made_wait = false;
    let mut seq_after = 0;
    // An inner unlock of a recursive mutex releases nothing: the lock stays
    // ours, so its holder, sequence and waiters' view do not change.
    let still_ours = g.thread().held().holds(addr);
    if !entry.slot.is_null() && !still_ours {
        // SAFETY: slots live in the object table for the life of the process.
        let slot = unsafe { &*entry.slot };
        waiters = slot.waiting();
        if entry.flags & HELD_SHARED != 0 {
            // Readers release concurrently: an atomic bump, holder untouched.
            let seq = slot.seq.fetch_add(1, Ordering::Relaxed);
            made_wait = slot.waited_during(seq);
            seq_after = seq.wrapping_add(1);
        } else {
            slot.holder.store(0, Ordering::Relaxed);
            // Only the exclusive holder bumps the sequence, so a plain
            // load/store suffices (no locked read-modify-write on the hot path).
            let seq = slot.seq.load(Ordering::Relaxed);
            made_wait = slot.waited_during(seq);
            seq_after = seq.wrapping_add(1);
            slot.seq.store(seq_after, Ordering::Relaxed);
        }
    }
    if entry.counter.is_null() {
        return;
    }
    // SAFETY: counters stay mapped; this thread is their only writer.
    let counter = unsafe { &mut *entry.counter };
    // A task switch, at most one per engagement: it waited itself, a
    // thread began waiting for it during this hold, or it was handed over
    // across a condition wait or a signal that found a waiter.
    let waited = entry.flags & HELD_CONTENDED != 0;
    if waited || made_wait || (entry.flags | extra) & HELD_HANDOVER != 0 {
        counter.task_switches += 1;
    }
    let contended = waiters > 0 || waited || made_wait;
    let trace_all = config::events_all();
    if entry.since_ns == 0 && !contended && !trace_all {
        return; // the common case: nothing timed, no clock read
    }
    let now = now_ns();
    if entry.since_ns != 0 {
        counter.hold_ns += now.saturating_sub(entry.since_ns);
        counter.hold_samples += 1;
    }
    if contended || trace_all {
        let site = counter.site_id;
        if let Some(lane) = current_lane(g) {
            // The shim's own time inside a timed hold, for compensation.
            let shim_in_hold = if entry.since_ns != 0 {
                shim_time_ns(g, lane).saturating_sub(entry.shim_ns)
            } else {
                0
            };
            // The sampled cost, kept current where it is used.
            if !lane.thread.is_null() {
                // SAFETY: the thread record stays mapped; this thread is its writer.
                unsafe { (*lane.thread).shim_call_ps = g.thread().call_cost().mean_ps() as u32 };
            }
            events::released(
                lane,
                entry.lock_id,
                site,
                (seq_after, waiters),
                (now, entry.since_ns),
                shim_in_hold,
            );
        }
    }
}

/// A semaphore post, prepared with [`MODE_POST`]: counts the post, and a
/// task switch if a thread was waiting for it.
pub fn posted(p: &Prepared) {
    let counter = p.counter();
    counter.engagements += 1;
    let waiters = p.slot.waiting();
    let before = p.slot.seq.fetch_add(1, Ordering::Relaxed);
    // A post that wakes someone writes an event (the merged stream's edge
    // to the wait it ends); an uncontended one stays as cheap as it was,
    // even under full tracing. Plain values go to the cold path, so `p`
    // need not be kept in memory for it.
    if waiters > 0 {
        counter.task_switches += 1;
        let at = (p.lock_id, counter.site_id);
        post_event(p.lane(), at, before.wrapping_add(1), waiters);
    }
}

#[cold]
#[inline(never)]
fn post_event(lane: &mut Lane, at: (u32, u32), count_after: u32, waiters: u32) {
    events::posted(lane, at, count_after, waiters, now_ns());
}

pub use objects::barrier_initialized;

/// A barrier wait in progress: when it began, and its arrival's number
/// (from 1, counted since the barrier's initialisation).
pub struct BarrierArrival {
    since_ns: u64,
    arrival: u32,
}

/// About to wait at a barrier: counts the arrival (its event makes the
/// round's departures possible in the merged stream).
pub fn barrier_begin(g: &HookGuard, p: &Prepared) -> BarrierArrival {
    let since_ns = now_ns();
    let arrival = p.slot.seq.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    let at = (p.lock_id, p.counter().site_id);
    events::barrier(
        p.lane(),
        EVENT_ARRIVED,
        at,
        (arrival, arrival),
        (since_ns, 0),
    );
    let pending = PendingWait {
        kind: WAIT_BARRIER,
        object: p.lock_id,
        site: p.counter().site_id,
        holder: 0,
        since_ns,
        target: 0,
        deadline: 0,
    };
    wait_started(p.lane(), pending, g.thread().held().entries());
    BarrierArrival { since_ns, arrival }
}

/// A barrier wait begun as `arrived` returned `rc`.
pub fn barrier_end(g: &HookGuard, p: &Prepared, arrived: BarrierArrival, rc: i32) {
    let BarrierArrival { since_ns, arrival } = arrived;
    wait_ended(p.lane());
    let now = now_ns();
    let waited = now.saturating_sub(since_ns);
    if rc == 0 || rc == libc::PTHREAD_BARRIER_SERIAL_THREAD {
        barrier_waited(p, waited, rc == libc::PTHREAD_BARRIER_SERIAL_THREAD);
        // The round's arrivals, all before this departure (only its own if
        // the count is unknown: a barrier initialised before the shim).
        let count = p.slot.holder.load(Ordering::Relaxed);
        let round = match count {
            0 => (arrival, arrival),
            n => {
                let first = (arrival.wrapping_sub(1) / n * n).wrapping_add(1);
                (first, first.wrapping_add(n - 1))
            }
        };
        let at = (p.lock_id, p.counter().site_id);
        events::barrier(p.lane(), EVENT_DEPARTED, at, round, (since_ns, now));
    }
    if config::calls_timed() && waited >= config::block_min_ns() {
        let site = p.counter().site_id;
        call_blocked(
            g,
            BlockingCall::BarrierWait,
            CallFrom::Site(site),
            None,
            (since_ns, now),
        );
    }
}

/// A barrier wait returned after `wait_ns`; `serial` is the thread that
/// completed the round (it did not wait for the others).
fn barrier_waited(p: &Prepared, wait_ns: u64, serial: bool) {
    let counter = p.counter();
    counter.engagements += 1;
    counter.wait_ns += wait_ns;
    if !serial {
        counter.contended += 1;
        counter.task_switches += 1;
    }
}

#[cfg(test)]
mod tests;
