//! Synchronisation events ([`EventRecord`]): by default written only where
//! the shim already has the clock in hand — a contended acquisition, a
//! release that found waiters, a condition wait, a notify that wakes
//! someone — so the uncontended path stays free of clock reads and of trace
//! writes. Full tracing (`LOCKSUIT_EVENTS=all`) adds every acquisition and
//! release.

use crate::recorder::features::filter;
use crate::recorder::tables::lanes::Lane;
use locksuit_format::*;

/// What is known when a thread starts waiting for a lock.
pub struct Waiting {
    pub started: u64,
    /// The lock's release sequence when the thread asked.
    pub seq: u32,
    /// The same when it stopped waiting (set by `wait_end`).
    pub ended_seq: u32,
    /// The owner when the thread asked (0 if none or unknown).
    pub owner: u32,
    /// A timed call's deadline, in nanoseconds of the clock it named (0: none).
    pub deadline: u64,
    /// Threads waiting for the lock as this one began, itself included.
    pub waiters: u32,
    /// The holder's CPU time when the wait began, if sampled (0: not).
    pub holder_cpu_ns: u64,
}

fn event(kind: u32, lock_id: u32, site_id: u32) -> EventRecord {
    EventRecord {
        hdr: RecordHeader {
            kind: RecordKind::Event as u16,
            size: core::mem::size_of::<EventRecord>() as u16,
            aux: kind,
        },
        lock_id,
        site_id,
        ..Default::default()
    }
}

#[inline(always)]
fn write(lane: &mut Lane, mut record: EventRecord) {
    // A policy's rules on threads, objects, sites and sampling.
    if !filter::event_kept(lane, &record) {
        return;
    }
    record.shim_ns = lane.shim_ns;
    record.tid = lane.tid;
    // Out of space is counted (or, in flight-recorder mode, the oldest
    // events give way); the counters still hold the totals.
    lane.append_event(&record);
}

/// An uncontended acquisition (full tracing only).
pub fn acquired(lane: &mut Lane, lock_id: u32, site_id: u32, seq_now: u32, now: u64) {
    let mut e = event(EVENT_ACQUIRED, lock_id, site_id);
    e.seq2 = seq_now;
    e.time = now;
    write(lane, e);
}

/// A contended acquisition that ended at `now`: it got the lock
/// ([`EVENT_BLOCKED`], and the lock being ours, `seq_now` is the number of
/// releases before it) or gave up ([`EVENT_TIMED_OUT`]).
pub fn waited(
    lane: &mut Lane,
    kind: u32,
    (lock_id, site_id): (u32, u32),
    waited: &Waiting,
    seq_now: u32,
    now: u64,
) {
    if !filter::wait_kept(waited.started, now, waited.waiters) {
        return;
    }
    let mut e = event(kind, lock_id, site_id);
    e.seq = waited.seq;
    e.seq2 = seq_now;
    e.other = waited.owner;
    e.time = waited.started;
    e.time2 = now;
    e.deadline = waited.deadline;
    write(lane, e);
}

/// A release that found `waiters` threads waiting (or ended a contended
/// hold). `seq_after` equals the `seq2` of the acquisition that follows.
pub fn released(
    lane: &mut Lane,
    lock_id: u32,
    site_id: u32,
    (seq_after, waiters): (u32, u32),
    (now, held_since): (u64, u64),
    shim_in_hold: u64,
) {
    let mut e = event(EVENT_RELEASED, lock_id, site_id);
    e.seq2 = seq_after;
    e.other = waiters;
    e.time = now;
    e.time2 = held_since;
    e.deadline = shim_in_hold;
    write(lane, e);
}

/// A condition wait from `started` to `now`.
#[allow(clippy::too_many_arguments)]
pub fn cond_wait(
    lane: &mut Lane,
    cond_id: u32,
    site_id: u32,
    mutex_id: u32,
    outcome: u32,
    (seq_start, seq_end): (u32, u32),
    (started, now): (u64, u64),
    deadline: u64,
) {
    if !filter::wait_kept(started, now, 0) {
        return;
    }
    let mut e = event(EVENT_COND_WAIT | outcome << 8, cond_id, site_id);
    e.other = mutex_id;
    e.seq = seq_start;
    e.seq2 = seq_end;
    e.time = started;
    e.time2 = now;
    e.deadline = deadline;
    write(lane, e);
}

/// A signal or broadcast that found `waiters` threads waiting.
pub fn notify(
    lane: &mut Lane,
    cond_id: u32,
    site_id: u32,
    seq_after: u32,
    waiters: u32,
    now: u64,
    broadcast: bool,
) {
    let flags = if broadcast { NOTIFY_BROADCAST } else { 0 };
    let mut e = event(EVENT_NOTIFY | flags, cond_id, site_id);
    e.seq2 = seq_after;
    e.other = waiters;
    e.time = now;
    write(lane, e);
}

/// An acquisition that returned `errno` (EOWNERDEAD, ENOTRECOVERABLE).
pub fn outcome(lane: &mut Lane, (lock_id, site_id): (u32, u32), errno: u32, now: u64) {
    let mut e = event(EVENT_OUTCOME, lock_id, site_id);
    e.other = errno;
    e.time = now;
    write(lane, e);
}

/// How long the holder of a lock ran during a wait for it (see
/// [`EVENT_HOLDER`]): it ran `ran` nanoseconds of the wait from `started`
/// to `now` (`Err(cpu at the start)`: it ended first).
pub fn holder_ran(
    lane: &mut Lane,
    (lock_id, site_id): (u32, u32),
    waited: &Waiting,
    ran: Result<u64, u64>,
    now: u64,
) {
    let (flags, ran_ns) = match ran {
        Ok(ns) => (0, ns),
        Err(at_start) => (HOLDER_ENDED, at_start),
    };
    let mut e = event(EVENT_HOLDER | flags, lock_id, site_id);
    e.other = waited.owner;
    e.seq = waited.seq;
    e.seq2 = waited.ended_seq;
    e.time = waited.started;
    e.time2 = now;
    e.deadline = ran_ns;
    write(lane, e);
}

/// A lock or condition variable used against its rules (`MISUSE_*`).
pub fn misuse(
    lane: &mut Lane,
    (lock_id, site_id): (u32, u32),
    what: u32,
    (other, seq): (u32, u32),
    now: u64,
) {
    let mut e = event(EVENT_MISUSE | what << 8, lock_id, site_id);
    e.other = other;
    e.seq = seq;
    e.time = now;
    write(lane, e);
}

/// A context switch (`LOCKSUIT_SWITCHES=1`): out at `out`, back in at `back`.
pub fn switched(lane: &mut Lane, site_id: u32, flags: u32, (out, back): (u64, u64)) {
    let mut e = event(EVENT_SWITCH, 0, site_id);
    e.other = flags;
    e.time = out;
    e.time2 = back;
    write(lane, e);
}

/// What is known about a blocking call once it returned.
pub struct CallBlocked {
    pub call: BlockingCall,
    pub site_id: u32,
    /// The descriptor and its `FD_*` kind (`u32::MAX`, `FD_NONE`: none).
    pub fd: (u32, u32),
    /// The innermost lock held meanwhile, the site that took it, and how
    /// many locks were held (0: none).
    pub held: (u32, u32, u32),
    pub started: u64,
    pub ended: u64,
}

/// A blocking call beyond the lock API that blocked long enough to keep.
pub fn call_blocked(lane: &mut Lane, c: &CallBlocked) {
    if !filter::wait_kept(c.started, c.ended, 0) {
        return;
    }
    let mut e = event(EVENT_CALL | c.fd.1 << 8, c.held.0, c.site_id);
    e.seq = c.call as u32;
    e.seq2 = c.held.1;
    e.other = c.fd.0;
    e.time = c.started;
    e.time2 = c.ended;
    e.deadline = u64::from(c.held.2);
    write(lane, e);
}

/// A semaphore post (see [`EVENT_POSTED`]): the count after it, and the
/// threads that were waiting.
pub fn posted(
    lane: &mut Lane,
    (sem_id, site_id): (u32, u32),
    count_after: u32,
    waiters: u32,
    now: u64,
) {
    let mut e = event(EVENT_POSTED, sem_id, site_id);
    e.seq2 = count_after;
    e.other = waiters;
    e.time = now;
    write(lane, e);
}

/// A thread's creation, start or exit (`EVENT_CREATED`, `EVENT_STARTED`,
/// `EVENT_EXITED`), carrying the created thread's number.
pub fn thread_moment(lane: &mut Lane, kind: u32, serial: u32, other: u32, at: u64) {
    let mut e = event(kind, 0, 0);
    e.seq2 = serial;
    e.other = other;
    e.time = at;
    write(lane, e);
}

/// A join of `target` from `site_id` that returned 0.
pub fn joined(lane: &mut Lane, site_id: u32, target: u64, (started, now): (u64, u64)) {
    let mut e = event(EVENT_JOINED, 0, site_id);
    e.time = started;
    e.time2 = now;
    e.deadline = target;
    write(lane, e);
}

/// A barrier arrival or departure (`EVENT_ARRIVED`, `EVENT_DEPARTED`):
/// `arrivals` is the arrival's own number twice, or the first and last
/// arrival of the round departed from.
pub fn barrier(
    lane: &mut Lane,
    kind: u32,
    (barrier_id, site_id): (u32, u32),
    arrivals: (u32, u32),
    (arrived, departed): (u64, u64),
) {
    let mut e = event(kind, barrier_id, site_id);
    e.seq = arrivals.0;
    e.seq2 = arrivals.1;
    e.time = arrived;
    e.time2 = departed;
    write(lane, e);
}
