//! The lock API's recording: what an acquisition, a wait, a release, a
//! semaphore post and a barrier wait count and write. The flow: [`prepare`]
//! (in `prepared.rs`) before the real lock call, then [`acquired`] or
//! [`try_failed`]/[`timed_out`]; on the contended path
//! [`wait_begin`]/[`wait_end`] bracket the blocking call; [`released`] runs
//! just before the real unlock, while the lock is still ours.
//!
//! [`prepare`]: crate::recorder::api::prepared::prepare

use crate::config;
use crate::recorder::api::calls::{call_blocked, CallFrom};
use crate::recorder::api::prepared::{Hold, How, Prepared};
use crate::recorder::api::thread_lane::current_lane;
use crate::recorder::api::threads::{wait_ended, wait_started, PendingWait};
use crate::recorder::api::{lean, untimed};
use crate::recorder::features::events::{self, Waiting};
use crate::recorder::features::snapshot;
use crate::recorder::features::switches;
use crate::recorder::tables::held::{HELD_CONTENDED, HELD_HANDOVER, HELD_RELOCKED, HELD_SHARED};
use crate::recorder::tables::hot_cache::HotHit;
use crate::recorder::tables::lanes::Lane;
use crate::recorder::tables::thread_state::InHook;
use crate::recorder::time::clock::now_ns;
use crate::recorder::trace::control;
use core::sync::atomic::Ordering;
use locksuit_format::*;

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
pub fn acquired(g: &InHook, p: &Prepared, how: How, hold: Hold) {
    // `how` and `hold` are constants at each call site, so this test folds
    // to one flag load on the path almost every acquisition takes.
    let untimed = matches!(how, How::Uncontended | How::Tried) && config::untimed_uncontended();
    let cost = g.thread().call_cost();
    match hold {
        // Counted, never timed: a few stores, costed at the mean of the
        // prepares and releases that are sampled (see selfcost.rs).
        Hold::Exclusive if untimed => {
            cost.count();
            untimed::acquired_exclusive(g, p, matches!(how, How::Tried));
        }
        Hold::None if untimed => {
            cost.count();
            untimed::acquired_unheld(p);
        }
        // Lean mode: no sampled self-cost either.
        Hold::Lean if untimed => lean::acquired(p),
        _ => {
            let started = cost.begin();
            record_acquired(g, p, how, hold);
            cost.end(started);
        }
    }
}

/// A mutex the quick look found (`untimed::prepare_quickly`) was taken at
/// once under full tracing, where every engagement is timed: the look
/// counted, then recorded as the general way records it (its event, its
/// timed hold, lock-order edges if nested; `tried`: by a trylock).
#[inline(never)]
pub fn engaged_traced_quickly(g: &InHook, hit: HotHit, tried: bool) {
    let cost = g.thread().call_cost();
    cost.count();
    let p: Prepared = hit.target().into();
    let how = if tried { How::Tried } else { How::Uncontended };
    // As `acquired` records a timed engagement, in this one frame.
    let started = cost.begin();
    record_acquired_here(g, &p, how, Hold::Exclusive);
    cost.end(started);
}

/// The shim's own time on this thread so far: the slow paths as timed, the
/// fast path as estimated from samples (see `selfcost.rs`).
fn shim_time_ns(g: &InHook, lane: &Lane) -> u64 {
    lane.shim_ns + g.thread().call_cost().estimated_ns()
}

#[inline]
fn record_acquired(g: &InHook, p: &Prepared, how: How, hold: Hold) {
    record_acquired_here(g, p, how, hold);
}

/// [`record_acquired`] inlined into its caller.
#[inline(always)]
fn record_acquired_here(g: &InHook, p: &Prepared, how: How, hold: Hold) {
    let counter = p.counter();
    counter.engagements += 1;
    let (flags, since_ns) = match how {
        How::Uncontended | How::Tried if config::events_all() => {
            // Full tracing: every acquisition is an event, and every hold is timed.
            let now = now_ns();
            let seq = p.slot.seq.load(Ordering::Relaxed);
            events::acquired(p.lane(), p.lock_id(), counter.site_id, seq, now);
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
            p.take_ownership(g);
            flags
        }
        Hold::Shared => flags | HELD_SHARED,
        Hold::None => return,
        Hold::Lean => {
            if flags & HELD_CONTENDED != 0 {
                // Its task switch, at once: there is no held entry to count
                // it at the release.
                counter.task_switches += 1;
            }
            lean::owned(p);
            return;
        }
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
        events::outcome(p.lane(), (p.lock_id(), site), rc as u32, now_ns());
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
        (p.lock_id(), site),
        waited,
        seq,
        now,
    );
}

/// About to block on the lock: count ourselves as a waiter, note who holds
/// it and its release sequence, and start the clock.
pub fn wait_begin(g: &InHook, p: &Prepared, deadline: u64) -> Waiting {
    control::poll();
    let seq = p.slot.seq.load(Ordering::Relaxed);
    p.slot.begin_wait(seq);
    // The sequence again, now that a release sees this thread waiting: a
    // release counted after it surely wrote its event (the merged stream
    // waits for those between this and the acquisition, on a read-write
    // lock or a semaphore).
    let asked = p.slot.seq.load(Ordering::Relaxed);
    // A lean-mode mutex's holder is in glibc's words, not the slot.
    let owner = if config::lean() && p.slot.kind() == ObjectKind::Mutex as u32 {
        lean::holder(p)
    } else {
        p.slot.holder.load(Ordering::Relaxed)
    };
    let started = now_ns();
    let waiting = Waiting {
        seq: asked,
        ended_seq: asked,
        owner,
        started,
        deadline,
        waiters: p.slot.waiting(),
        holder_cpu_ns: holder_cpu_at_start(p.lane(), owner, started),
    };
    let pending = PendingWait {
        kind: WAIT_LOCK,
        object: p.lock_id(),
        site: p.counter().site_id,
        holder: waiting.owner,
        since_ns: waiting.started,
        target: 0,
        deadline,
    };
    wait_started(p.lane(), pending, g.thread().held().entries());
    let cause = snapshot::Cause {
        object: p.lock_id(),
        site: p.counter().site_id,
        waiters: waiting.waiters,
        now: waiting.started,
    };
    snapshot::on_wait_begin(p.lane(), &cause);
    waiting
}

/// The holder's CPU time as a wait for its lock begins, so the wait's end
/// can tell whether it ran or was off a CPU meanwhile (a long hold by a
/// preempted holder is no long critical section). A system call, so
/// sampled: at most one wait a millisecond per thread; 0 when not.
fn holder_cpu_at_start(lane: &mut Lane, owner: u32, now: u64) -> u64 {
    if owner == 0 || owner == lane.tid || now < lane.holder_sample_at {
        return 0;
    }
    lane.holder_sample_at = now + 1_000_000;
    crate::sys::thread_cpu_ns(owner).unwrap_or(0)
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
    events::waited(
        p.lane(),
        EVENT_BLOCKED,
        (p.lock_id(), site),
        waited,
        seq,
        now,
    );
    if waited.holder_cpu_ns != 0 {
        // A holder that ended as soon as it let go (a thread's last unlock)
        // has no clock left; its record has its CPU time at its end.
        let ran = crate::sys::thread_cpu_ns(waited.owner)
            .map(|cpu| cpu.saturating_sub(waited.holder_cpu_ns))
            .ok_or(waited.holder_cpu_ns);
        events::holder_ran(p.lane(), (p.lock_id(), site), waited, ran, now);
    }
    // A slow path already: read the context switches the wait caused.
    switches::drain(p.lane(), false);
}

/// The common release (see `untimed::released`) with no call out of line,
/// so that the unlock hooks need no frame for it; false, with nothing
/// changed or counted, for any other, which `released` then records.
#[inline(always)]
pub fn released_quickly(g: &InHook, addr: u64) -> bool {
    config::untimed_uncontended() && released_untimed_quickly(g, addr)
}

/// [`released_quickly`] for a hook that runs only while engagements are
/// untimed (see `untimed::released_untimed`).
#[inline(always)]
pub fn released_untimed_quickly(g: &InHook, addr: u64) -> bool {
    let cost = g.thread().call_cost();
    if cost.next_is_timed() || !untimed::released_untimed(g, addr) {
        return false;
    }
    cost.count();
    true
}

/// The lock at `addr` is about to be released by this thread (called before
/// the real unlock, while it is still ours). `extra` adds held flags (a
/// condition wait hands the lock over). False when this thread's held list
/// does not have the lock (see `misuse.rs`).
#[inline(always)]
pub fn released(g: &InHook, addr: u64, extra: u32) -> bool {
    let started = g.thread().call_cost().begin();
    let held = extra == 0 && untimed::released(g, addr) || record_released(g, addr, extra);
    g.thread().call_cost().end(started);
    held
}

/// [`released`] under full tracing, where no release is the untimed one
/// (every hold is timed, or was taken before tracing was switched on and
/// is released in full as well): recorded in full in this one frame.
#[inline(never)]
pub fn released_traced(g: &InHook, addr: u64) -> bool {
    let cost = g.thread().call_cost();
    let started = cost.begin();
    let held = record_released_here(g, addr, 0);
    cost.end(started);
    held
}

/// Out of line: every unlock hook's general way calls it.
#[inline(never)]
fn record_released(g: &InHook, addr: u64, extra: u32) -> bool {
    record_released_here(g, addr, extra)
}

/// [`record_released`] inlined into its caller.
#[inline(always)]
fn record_released_here(g: &InHook, addr: u64, extra: u32) -> bool {
    let held = g.thread().held();
    let entry = match held.innermost(addr) {
        // The common release: the innermost hold, taken once.
        Some(&top) if top.flags & HELD_RELOCKED == 0 => {
            held.pop_found();
            top
        }
        _ => {
            // An inner unlock of a recursive mutex releases nothing: the
            // lock stays ours, so its holder, sequence and waiters' view do
            // not change.
            if held.unwind_relock(addr) {
                return true;
            }
            let Some(entry) = held.take(addr) else {
                return false;
            };
            entry
        }
    };
    let mut waiters = 0;
    let mut made_wait = false;
    let mut seq_after = 0;
    if !entry.slot.is_null() {
        // SAFETY: slots live in the object table for the life of the process.
        let slot = unsafe { &*entry.slot };
        waiters = slot.waiting();
        if entry.flags & HELD_SHARED != 0 {
            // Readers release concurrently: an atomic bump, holder untouched.
            let seq = slot.seq.fetch_add(1, Ordering::Relaxed);
            made_wait = slot.take_wait_mark(seq);
            seq_after = seq.wrapping_add(1);
        } else {
            slot.holder.store(0, Ordering::Relaxed);
            // Only the exclusive holder bumps the sequence, so a plain
            // load/store suffices (no locked read-modify-write on the hot path).
            let seq = slot.seq.load(Ordering::Relaxed);
            made_wait = slot.take_wait_mark(seq);
            seq_after = seq.wrapping_add(1);
            slot.seq.store(seq_after, Ordering::Relaxed);
        }
    }
    if entry.counter.is_null() {
        return true;
    }
    if made_wait {
        // Another thread began waiting for the lock during this engagement:
        // a task switch it caused (one already waiting when it began was
        // switched out by an earlier one).
        if let Some(lane) = current_lane(g) {
            crate::recorder::features::ratios::made_others_wait(lane, entry.counter);
        }
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
    let (since_ns, started_shim_ns) = entry.timed();
    if since_ns == 0 && !contended && !trace_all {
        return true; // the common case: nothing timed, no clock read
    }
    let now = now_ns();
    if since_ns != 0 {
        counter.hold_ns += now.saturating_sub(since_ns);
        counter.hold_samples += 1;
    }
    if contended || trace_all {
        let site = counter.site_id;
        if let Some(lane) = current_lane(g) {
            // The shim's own time inside a timed hold, for compensation.
            let shim_in_hold = if since_ns != 0 {
                shim_time_ns(g, lane).saturating_sub(started_shim_ns)
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
                (now, since_ns),
                shim_in_hold,
            );
        }
    }
    true
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
        let at = (p.lock_id(), counter.site_id);
        post_event(p.lane(), at, before.wrapping_add(1), waiters);
    }
}

#[cold]
#[inline(never)]
fn post_event(lane: &mut Lane, at: (u32, u32), count_after: u32, waiters: u32) {
    events::posted(lane, at, count_after, waiters, now_ns());
}

/// A barrier wait in progress: when it began, and its arrival's number
/// (from 1, counted since the barrier's initialisation).
pub struct BarrierArrival {
    since_ns: u64,
    arrival: u32,
}

/// About to wait at a barrier: counts the arrival (its event makes the
/// round's departures possible in the merged stream).
pub fn barrier_begin(g: &InHook, p: &Prepared) -> BarrierArrival {
    let since_ns = now_ns();
    let arrival = p.slot.seq.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    let at = (p.lock_id(), p.counter().site_id);
    events::barrier(
        p.lane(),
        EVENT_ARRIVED,
        at,
        (arrival, arrival),
        (since_ns, 0),
    );
    let pending = PendingWait {
        kind: WAIT_BARRIER,
        object: p.lock_id(),
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
pub fn barrier_end(g: &InHook, p: &Prepared, arrived: BarrierArrival, rc: i32) {
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
        let at = (p.lock_id(), p.counter().site_id);
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
