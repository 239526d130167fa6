//! Counters updated in place: per (lock, site, mode), per lock-order edge,
//! per condition variable.

use super::*;

/// `CounterRecord` mode (in `RecordHeader::aux`): exclusive engagement.
pub const MODE_EXCLUSIVE: u32 = 0;
/// Shared (read) engagement of an rwlock.
pub const MODE_SHARED: u32 = 1;
/// A release that is not paired with an acquisition by the same thread: a
/// semaphore post. `engagements` counts posts, `task_switches` the posts
/// that found a waiter.
pub const MODE_POST: u32 = 2;

/// Per thread, per (lock, site, mode): what that line did with that lock.
/// Appended once, then updated in place by the owning thread only.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CounterRecord {
    pub hdr: RecordHeader,
    pub lock_id: u32,
    pub site_id: u32,
    // The fields every uncontended engagement writes come first, together:
    // one cache line of the record, not two.
    /// Successful acquisitions (trylocks and cond-wait re-acquisitions included).
    pub engagements: u64,
    /// Exclusive engagements by a different thread than the lock's previous
    /// owner (mutrace's "changed").
    pub owner_changes: u64,
    /// Engagements that caused a task switch (waited, made others wait, or
    /// handed the lock over across a condition wait/signal).
    pub task_switches: u64,
    /// Acquisitions that had to wait for another thread.
    pub contended: u64,
    pub wait_ns: u64,
    /// Re-acquisitions at the end of a condition wait (also in `engagements`).
    pub cond_reacquires: u64,
    /// trylock calls that failed with EBUSY.
    pub try_failures: u64,
    /// Timed acquisitions that gave up (ETIMEDOUT).
    pub timeouts: u64,
    /// Sum of the measured hold times.
    pub hold_ns: u64,
    /// Number of engagements whose hold time was measured.
    pub hold_samples: u64,
}

/// `EdgeRecord` flags (in `RecordHeader::aux`): the acquisition was a
/// trylock (it could not have blocked).
pub const EDGE_TRY: u32 = 1 << 0;
/// The lock already held was held shared (an rwlock read lock).
pub const EDGE_FROM_SHARED: u32 = 1 << 1;
/// The lock acquired was taken shared.
pub const EDGE_TO_SHARED: u32 = 1 << 2;
/// How many other held locks an edge remembers (see `EdgeRecord::gates`).
pub const EDGE_GATES: usize = 4;

/// Per thread, per (lock held, its site, lock acquired, its site, flags): a
/// lock-order edge, "acquired `to_lock` while holding `from_lock`". Made
/// the first time the thread takes it, then updated in place by that thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EdgeRecord {
    pub hdr: RecordHeader,
    pub from_lock: u32,
    pub to_lock: u32,
    /// The site that took `from_lock`, and the site taking `to_lock`.
    pub from_site: u32,
    pub to_site: u32,
    /// How often this thread took the edge.
    pub count: u64,
    pub first_ns: u64,
    /// Locks other than `from_lock` that this thread held every time it
    /// took the edge (0 = empty; at most [`EDGE_GATES`], innermost first at
    /// the first time): a cycle whose edges all share one such gate lock
    /// cannot deadlock.
    pub gates: [u32; EDGE_GATES],
}

/// Per thread, per (condition variable, site, mutex): waits and notifies.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CondRecord {
    pub hdr: RecordHeader,
    pub cond_id: u32,
    pub site_id: u32,
    /// Mutex passed to the wait, 0 for notify records.
    pub mutex_id: u32,
    pub _pad: u32,
    pub waits: u64,
    pub timeouts: u64,
    pub signals: u64,
    pub broadcasts: u64,
    /// Notifies that found at least one waiter.
    pub notifies_with_waiters: u64,
    pub wait_ns: u64,
}
