//! What the contention pass finds beyond what it fills into the model:
//! the longest holds that made threads wait, starved waits, and how long
//! holders ran while others waited.

use crate::model::*;

/// What the events say beyond what they fill into the [`Targets`].
#[derive(Default)]
pub struct Contention {
    pub blocking: Vec<Blocking>,
    pub blocking_functions: Vec<FunctionBlocking>,
    /// Events whose lock is unknown (a lost creation record).
    pub orphans: u64,
    /// Events read.
    pub events: u64,
    /// Event blocks whose records were damaged (the rest of each skipped).
    pub damaged_blocks: u64,
    /// Per lock, its longest single timed hold that ended with a thread
    /// waiting (or began contended), and where it was taken.
    pub longest_holds: Vec<LongHold>,
    /// Per lock, its wait that sat through the most other acquisitions.
    pub starved: Vec<Starved>,
    /// Locks used against their rules (see `misuse.rs`): never called
    /// unneeded.
    pub misused: Vec<LockId>,
    /// A lean trace (`LOCKSUIT_MODE=lean`): a mutex's release is counted
    /// in its sequence only when it found a thread waiting (how many times
    /// others took a lock during a wait is a lower bound), and no call that
    /// blocked under a mutex is seen.
    pub lean: bool,
    /// Recorded by `locksuit attach`: only the attached period, and of
    /// most locks only their waits: no verdict that needs every
    /// acquisition (see findings/mod.rs).
    pub attached: bool,
}

/// A lock's longest measured hold that made a thread wait.
#[derive(Clone, Copy, Debug)]
pub struct LongHold {
    pub lock: LockId,
    pub hold_ns: u64,
    pub tid: u32,
    /// The line that took the lock for that hold.
    pub site: Option<SiteId>,
    /// Not timed itself: a thread waited this long for it, for it alone.
    pub at_least: bool,
    /// What its holder did during a wait for it, when the waiter sampled
    /// it: how long the holder ran on a CPU, of how long the wait lasted.
    pub holder_ran: Option<HolderRan>,
}

/// How long a lock's holder ran during one hold, as a thread waiting for
/// it sampled (the rest of it was off a CPU: preempted, or blocked): from
/// when the wait began to the release. The waiter read the holder's clock
/// again only once it had the lock, so the holder may have run after the
/// release too: it ran at least `ran_ns` and at most `ran_max_ns` of the
/// `of_ns` the hold lasted while the waiter waited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HolderRan {
    pub ran_ns: u64,
    pub ran_max_ns: u64,
    pub of_ns: u64,
}

/// One wait for a lock during which other threads took it many times.
#[derive(Clone, Copy, Debug)]
pub struct Starved {
    pub lock: LockId,
    /// Acquisitions by others (releases of the lock) while it waited.
    pub passed_over: u32,
    pub wait_ns: u64,
    pub tid: u32,
    pub site: Option<SiteId>,
    /// It gave up (a timed call) instead of getting the lock.
    pub timed_out: bool,
}
