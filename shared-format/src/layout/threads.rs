//! Threads: the record that introduces each on its lane, what it
//! publishes while it waits, and its name.

use super::*;

/// `ThreadRecord::flags`: the thread has ended.
pub const THREAD_ENDED: u32 = 1 << 0;
/// The thread is the process's main thread.
pub const THREAD_MAIN: u32 = 1 << 1;
/// The thread was started through the shim's `pthread_create`.
pub const THREAD_CREATED_TRACED: u32 = 1 << 2;
/// `cpu_ns` holds the thread's CPU time.
pub const THREAD_USAGE: u32 = 1 << 3;
/// `runnable_ns` holds its time waiting for a CPU.
pub const THREAD_RUNNABLE_KNOWN: u32 = 1 << 4;
/// `voluntary_switches` and `involuntary_switches` hold its switches.
pub const THREAD_SWITCHES_KNOWN: u32 = 1 << 5;

/// Introduces a thread on its lane; the records that follow on the same lane
/// belong to it. Updated in place: `end_ns`, `dropped`, `flags`, `name`,
/// `join_*`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadRecord {
    pub hdr: RecordHeader,
    pub tid: u32,
    /// tid of the thread that called `pthread_create`, 0 if unknown.
    pub parent_tid: u32,
    /// The thread's `pthread_t`, to attribute `pthread_setname_np` calls.
    pub pthread: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// This thread's operations that were not recorded.
    pub dropped: u64,
    pub joins: u64,
    pub join_wait_ns: u64,
    pub flags: u32,
    /// Sampled mean cost of one shim fast-path call on this thread, in
    /// picoseconds (0 = no sample; padding, always 0, before it was used).
    pub shim_call_ps: u32,
    pub name: [u8; THREAD_NAME_MAX],
    /// The wait in progress (`WAIT_*`; 0 = not waiting), written just
    /// before the thread blocks and cleared when it stops, so a reader of a
    /// live, hung or killed process's trace sees what each thread is
    /// blocked on. Written last, cleared first.
    pub wait_kind: u32,
    /// The lock, semaphore, condition variable or barrier waited for (its
    /// id), 0 for a join.
    pub wait_object: u32,
    /// The site of the waiting call, 0 if unknown.
    pub wait_site: u32,
    /// The tid that held the lock when the wait began (0 = unknown or not a
    /// lock); for a condition wait, the id of its mutex.
    pub wait_holder: u32,
    pub wait_since_ns: u64,
    /// A join: the `pthread_t` waited for.
    pub wait_target: u64,
    /// A timed wait's deadline (ns on the clock the caller named; 0 =
    /// untimed): a timed wait ends by itself, so it is never a deadlock.
    pub wait_deadline: u64,
    /// While waiting: the locks this thread holds (ids, innermost first,
    /// 0 = none) and the sites that took them, so a deadlock can be told
    /// from the trace alone: who holds what, taken where.
    pub wait_held: [u32; WAIT_HELD],
    pub wait_held_sites: [u32; WAIT_HELD],
    /// Time on a CPU (`THREAD_USAGE`), time runnable but waiting for a CPU
    /// (`THREAD_RUNNABLE_KNOWN`), and context switches, voluntary (it
    /// blocked) and involuntary (preempted) (`THREAD_SWITCHES_KNOWN`): read
    /// when the thread ended, or when the process exited.
    pub cpu_ns: u64,
    pub runnable_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// This thread's creation number in the process (from 1, in the order
    /// `pthread_create` was called; 0: not created through a traced
    /// `pthread_create`), the token its [`EVENT_STARTED`] and
    /// [`EVENT_EXITED`] carry (since version 12).
    pub create_serial: u32,
    pub _pad2: u32,
}

/// How many held locks a waiting thread publishes.
pub const WAIT_HELD: usize = 4;

/// `ThreadRecord::wait_kind`: blocked acquiring a lock or semaphore.
pub const WAIT_LOCK: u32 = 1;
/// Blocked in a condition wait.
pub const WAIT_COND: u32 = 2;
/// Blocked at a barrier.
pub const WAIT_BARRIER: u32 = 3;
/// Blocked joining a thread.
pub const WAIT_JOIN: u32 = 4;

/// `pthread_setname_np` on some thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadNameRecord {
    pub hdr: RecordHeader,
    /// The named thread's tid when the shim knew it, else 0.
    pub tid: u32,
    pub _pad: u32,
    pub pthread: u64,
    pub name: [u8; THREAD_NAME_MAX],
}
