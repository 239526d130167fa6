//! The findings of a report, what they rest on, and the names of their
//! kinds and of the line states.

use super::names::{FamilyId, LockId, SiteId};
use serde::Serialize;

/// A thread blocked as the trace ends.
#[derive(Debug, Clone, Serialize)]
pub struct BlockedThread {
    pub tid: u32,
    pub thread_name: Option<String>,
    /// "lock" (a lock or semaphore), "cond", "barrier" or "join".
    pub waits_in: &'static str,
    /// The lock, semaphore, condition variable or barrier waited for (its
    /// report id); null for a join.
    pub object: Option<String>,
    pub site: Option<SiteId>,
    /// When the wait began, from the process's start.
    pub since_ns: u64,
    /// How long it had waited when the trace ended (or now, for a running
    /// process), when known.
    pub waited_ns: Option<u64>,
    /// A lock: the thread holding it when the wait began.
    pub holder_tid: Option<u32>,
    /// A join: the thread joined.
    pub joins_tid: Option<u32>,
    /// The locks it holds meanwhile, and where it took them.
    pub holds: Vec<HeldLock>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HeldLock {
    pub lock: Option<LockId>,
    pub site: Option<SiteId>,
}

/// One thread's part in a deadlock, or one edge of a potential one: it
/// holds `holds` (taken at `holds_site`) and waits for, or went on to
/// take, `waits_for` (at `waits_site`).
#[derive(Debug, Clone, Serialize)]
pub struct CycleStep {
    pub tid: u32,
    pub thread_name: Option<String>,
    pub holds: Option<LockId>,
    pub holds_site: Option<SiteId>,
    /// A lock's id, or for a join the thread joined ("thread 123").
    pub waits_for: Option<String>,
    pub waits_site: Option<SiteId>,
    /// Potential deadlocks: how often this edge was taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

#[derive(Debug, Default, Serialize)]
pub struct Finding {
    pub kind: &'static str,
    /// The lock, or the first of `locks`; null for a finding about a site.
    pub lock: Option<LockId>,
    pub sites: Vec<SiteId>,
    pub message: String,
    /// What ranks it: engagements paid for, and time threads waited.
    pub engagements: u64,
    pub wait_ns: u64,
    /// Every lock it covers: the same finding for several locks of one
    /// family is one finding. Empty for a finding about a site.
    pub locks: Vec<LockId>,
    /// The family of those locks and how many locks it has (`locks` may be
    /// fewer: those the finding applies to).
    pub family: Option<FamilyId>,
    pub family_size: Option<u64>,
    /// `deadlock` and `potential-deadlock`: each thread's (or edge's) part,
    /// in cycle order. For a potential deadlock, the first of `cycles`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cycle: Vec<CycleStep>,
    /// `potential-deadlock`: every lock-order cycle through the same lines
    /// (one finding, as it is one thing to fix), each its concrete locks
    /// in cycle order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cycles: Vec<Vec<LockId>>,
    /// How much sooner the run would have ended with its locks' waits
    /// removed or halved (see the report's `critical_path`); null when
    /// it covers no lock with recorded waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_gain: Option<super::critical_path::Gains>,
    /// `single-thread-lock` and `unnecessary-lock`: what the verdict rests on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    /// `long-hold`: what the holder did during the longest hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<HolderState>,
    /// `blocking-under-lock`: the line of the slow call, by its stable
    /// name (it is no lock site, so not in `sites`); what tells two such
    /// findings on one lock apart in SARIF fingerprints.
    #[serde(skip)]
    pub blocking_call: Option<String>,
    /// `single-thread-lock` and `long-hold`: what this run saw, in words,
    /// for the message more evidence rewrites (other runs: `evidence.rs`;
    /// the holder's blocking calls: `analysis/process.rs`).
    #[serde(skip)]
    pub observed: String,
}

/// Findings of one kind that one suppression entry took out of a report.
#[derive(Debug, Clone, Serialize)]
pub struct SuppressedFindings {
    /// The entry's name, and where it was written (`file:line`, or
    /// `built-in:line` for the built-in set).
    pub suppression: String,
    pub source: String,
    pub kind: &'static str,
    pub findings: u64,
}

/// What a lock's holder did during a long hold, as a thread waiting for it
/// sampled it (the holder's CPU time at both ends of the wait).
#[derive(Debug, Clone, Serialize)]
pub struct HolderState {
    /// `running`: on a CPU for at least half the wait (the critical section
    /// is long); `off-cpu`: off a CPU for more than half of it (preempted,
    /// or blocked in a call or a page fault); `unknown`: not sampled.
    pub state: &'static str,
    /// How long the holder ran, at least and at most (it may have run on
    /// after letting go before the waiter looked again), of how long the
    /// hold lasted while the waiter waited.
    pub ran_ns: Option<u64>,
    pub ran_max_ns: Option<u64>,
    pub of_ns: Option<u64>,
}

/// What a finding that a lock protects nothing shared rests on.
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    /// `run`: one thread took it in this run, nothing more (an observation);
    /// `runs`: one thread took it in every recorded run of the program;
    /// `data`: what its critical sections touched never left the thread
    /// (a program built with `locksuit cc`, every engagement recorded).
    pub basis: &'static str,
    /// Runs of the program (processes of the same executable, reported
    /// together or saved in the history) in which its locks were taken,
    /// this one included.
    pub runs: u64,
}

pub const STATUS_SUITABLE: &str = "definitely-suitable";
pub const STATUS_APPARENTLY_SUITABLE: &str = "apparently-suitable";
pub const STATUS_UNSUITABLE: &str = "apparently-unsuitable";
/// A line that engaged no lock, a site only because a finding points at it
/// (a misuse: an unlock of a lock nobody held, say).
pub const STATUS_NOT_ENGAGED: &str = "not-engaged";
/// A line that engaged only futex words: its acquisitions that did not
/// wait are not seen, so its sharing is not judged.
pub const STATUS_UNJUDGED: &str = "unjudged";
pub const FINDING_UNNECESSARY: &str = "unnecessary-lock";
pub const FINDING_SINGLE_THREAD: &str = "single-thread-lock";
pub const FINDING_UNSUITABLE: &str = "unsuitable-site";
pub const FINDING_PRIVATE_DATA: &str = "private-data-under-lock";
pub const FINDING_DISJOINT_DATA: &str = "disjoint-data";
pub const FINDING_READ_ONLY: &str = "read-only-sharing";
pub const FINDING_FALSE_SHARING: &str = "false-sharing";
pub const FINDING_FAMILY_INVERSION: &str = "family-order-inversion";

/// A thread in words, as every finding names one: "thread 12 (worker)".
pub fn thread_words(tid: u32, name: Option<&str>) -> String {
    match name {
        Some(name) => format!("thread {tid} ({name})"),
        None => format!("thread {tid}"),
    }
}
