//! The model's parts about why threads stopped and why waits ended:
//! blocking classes and stacks, the timeline, idle processors, the policy
//! in force, and reason codes (see `stops.rs`, `idle.rs`, `reasons.rs`).

use super::frames::Frame;
use super::names::{LockId, SiteId};
use serde::{Serialize, Serializer};

/// A lock's reasons, boxed in [`Lock`] (one pointer), as most locks have
/// none.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct ReasonList(pub Vec<ReasonCount>);

/// A boxed list, written as a list (empty when absent).
pub(crate) fn boxed_list<S: Serializer>(
    list: &Option<Box<ReasonList>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match list {
        Some(items) => items.serialize(s),
        None => s.collect_seq(std::iter::empty::<&ReasonCount>()),
    }
}

/// How many waits ended for one reason (see `reasons.rs`).
#[derive(Debug, Clone, Serialize)]
pub struct ReasonCount {
    pub reason: String,
    pub count: u64,
}

/// A thread's time blocked in one class.
#[derive(Debug, Clone, Serialize)]
pub struct ClassTime {
    pub class: String,
    pub count: u64,
    pub total_ns: u64,
}

/// What a recording policy did to this process's trace.
#[derive(Debug, Serialize)]
pub struct PolicyInForce {
    /// The policy file as it was read (null in traces that did not keep it).
    pub text: Option<String>,
    /// Waits shorter than this wrote no events (0: no such rule).
    pub min_wait_us: u32,
    /// Events it left out; the counters are exact regardless.
    pub events_filtered: u32,
    /// The same by rule: `thread`, `object`, `site`, `short-wait`,
    /// `few-waiters`, `sampled` (rules that left nothing out are omitted).
    pub filtered_by_rule: Vec<RuleCount>,
    pub snapshots_taken: u32,
    /// Snapshots a trigger asked for that `snapshot_max`, the interval, or
    /// one already being taken refused.
    pub snapshots_refused: u32,
}

#[derive(Debug, Serialize)]
pub struct RuleCount {
    pub rule: &'static str,
    pub events: u64,
}

/// A policy's snapshot: every thread of the process at one moment.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    /// Counts from 1 in the process.
    pub number: u32,
    /// From the process's start.
    pub at_ns: u64,
    /// `waiters` (the waiters on one object reached a threshold) or
    /// `idle-processor` (a wait began while a processor was idle).
    pub trigger: &'static str,
    /// The lock whose wait set it off, and its waiters then.
    pub object: Option<LockId>,
    pub waiters: u32,
    pub by_tid: u32,
    pub by_site: Option<SiteId>,
    /// Processors idle then (the process's processors minus the system's
    /// runnable tasks); null if unknown.
    pub idle_processors: Option<u32>,
    pub threads: Vec<SnapshotThread>,
    /// Threads beyond the most a snapshot lists.
    pub threads_omitted: u32,
}

#[derive(Debug, Serialize)]
pub struct SnapshotThread {
    pub tid: u32,
    pub thread_name: Option<String>,
    /// The kernel's view: `running`, `sleeping`, `disk-wait`, `stopped`,
    /// `zombie`, … (`unknown` if it would not say).
    pub state: &'static str,
    /// The system call it is in (`futex`, `clock_nanosleep`, … or its
    /// number), null when running in user space or unknown.
    pub syscall: Option<String>,
    /// The user-space address that system call was made from (`0x…`).
    pub syscall_address: Option<String>,
    /// The wait in progress in a hooked call, if any.
    pub waiting: Option<SnapshotWait>,
    /// The locks it holds, innermost first, with where it took them; null
    /// if they could not be read.
    pub holds: Option<Vec<SnapshotHold>>,
    /// A thread in a system call outside any recorded wait (a sleep, a
    /// read, a call the shim does not hook), or running in user space: its
    /// stack then, unwound from the copy the snapshot took (for a running
    /// thread, sampled by a perf event). Null for a thread in a recorded
    /// wait (its `waiting.stack` says where), one that left its call while
    /// its stack was copied, or a running one the kernel would not sample.
    pub stack: Option<SnapshotStack>,
    /// Its run statistics so far (null where the kernel did not say): time
    /// on a processor, time runnable but waiting for one, and context
    /// switches.
    pub cpu_ns: Option<u64>,
    pub runnable_ns: Option<u64>,
    pub voluntary_switches: Option<u64>,
    pub involuntary_switches: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct SnapshotStack {
    /// Innermost first: the system call's own frame, then its callers.
    pub frames: Vec<Frame>,
    /// False when the walk stopped before the thread's first frame (the
    /// copy ended, or a frame had no unwind information).
    pub complete: bool,
}

#[derive(Debug, Serialize)]
pub struct SnapshotWait {
    /// `lock`, `cond`, `barrier` or `join`.
    pub waits_in: &'static str,
    /// What it waits for (lock, condition or barrier id); null for a join.
    pub object: Option<String>,
    /// A lock: who held it when the wait began.
    pub holder_tid: Option<u32>,
    /// How long it had waited when the snapshot was taken.
    pub waited_ns: u64,
    pub site: Option<SiteId>,
    /// The waiting call's stack, innermost first.
    pub stack: Vec<Frame>,
}

#[derive(Debug, Serialize)]
pub struct SnapshotHold {
    pub lock: Option<LockId>,
    pub site: Option<SiteId>,
    /// The stack that took it, innermost first.
    pub stack: Vec<Frame>,
}

/// Processors idle while threads waited on synchronisation (see
/// `idle.rs`): estimated from the timeline, this process alone.
#[derive(Debug, Serialize)]
pub struct IdleWhileWaiting {
    /// Processors the process could run on.
    pub cpus: u32,
    /// Time during which at least one thread waited on synchronisation.
    pub wait_ns: u64,
    /// Idle processors over that time, on average.
    pub idle_processors: f64,
    /// The same over each lock's waits, most waited-for first.
    pub by_lock: Vec<LockIdle>,
}

#[derive(Debug, Serialize)]
pub struct LockIdle {
    pub lock: LockId,
    /// Its waits added up over the threads (unlike the process's
    /// `wait_ns`, wall-clock time: several may wait at once).
    pub wait_ns: u64,
    pub idle_processors: f64,
}

/// Every blocking period, for the HTML timeline and the Chrome export. Not
/// in the JSON report: a run can have millions.
#[derive(Debug, Default)]
pub struct Timeline {
    /// Class names; periods refer to them by index.
    pub classes: Vec<String>,
    /// One per recorded thread: its life, since the process's start.
    pub lanes: Vec<Lane>,
    /// By thread (in `lanes` order), then by start.
    pub periods: Vec<TimelinePeriod>,
    /// Lines where the lock a period waited for had been taken by the
    /// thread that released it; periods refer to them by index.
    pub lines: Vec<String>,
}

#[derive(Debug, Clone, Copy)]
pub struct Lane {
    pub tid: u32,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// One blocking period. Times are since the process's start.
#[derive(Debug, Clone, Copy)]
pub struct TimelinePeriod {
    pub tid: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Index into [`Timeline::classes`].
    pub class: u16,
    /// Index into the process's `blocking_stacks`.
    pub stack: u32,
    /// Lock waits: the lock waited for.
    pub lock: Option<LockId>,
    /// Lock waits: the thread whose release let this one in (0: unknown)
    /// and the line where it had taken the lock (index into
    /// [`Timeline::lines`]).
    pub released_by: u32,
    pub released_at: Option<u32>,
    /// Lock waits: the thread that held the lock when the wait began (0:
    /// unknown), whom "who blocks whom" names as the blocker.
    pub held_by: u32,
    /// A timed lock wait that gave up.
    pub timed_out: bool,
}

/// One distinct blocking call stack: the call it blocked in, and how
/// often and how long it blocked there.
#[derive(Debug, Serialize)]
pub struct BlockingStack {
    /// The blocking function (`read`, `pthread_mutex_lock`, …).
    pub api: String,
    pub class: String,
    /// The line in the program's own code (`function@file:line`).
    pub line: String,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Threads that blocked here.
    pub threads: Vec<u32>,
    /// The call chain, innermost first.
    pub stack: Vec<Frame>,
}

/// A node of the waiting call tree: the waits whose stacks pass through
/// this frame (from the outermost frame in; leaves are the blocking calls).
#[derive(Debug, Serialize)]
pub struct TreeNode {
    pub frame: String,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub children: Vec<TreeNode>,
}

/// What data-level analysis had to go on (a program built with `locksuit cc`).
#[derive(Debug, Serialize)]
pub struct DataLevel {
    pub accesses: u64,
    pub dropped: u64,
    /// The process exited and wrote its totals; false when it was killed
    /// (or still runs): `accesses` then counts what its granules' records
    /// hold, and `dropped` is unknown (0).
    pub complete: bool,
    /// `LOCKSUIT_DATA_SAMPLE`: each line's engagements of a lock on a
    /// thread had their accesses recorded for the first `sample_first`,
    /// then one in `sample_every` (1: every engagement). Sampled, the
    /// counts are of the engagements recorded, and `read-only-sharing` is
    /// not judged (a write in an engagement left out would be missed).
    pub sample_every: u32,
    pub sample_first: u32,
    /// Sampled: the locks whose recorded accesses only read data other
    /// threads read too, which `LOCKSUIT_DATA_SAMPLE=all` would judge for
    /// `read-only-sharing` (empty when every engagement was recorded).
    pub read_only_unjudged: Vec<LockId>,
}

/// One event of a process's merged stream (`locksuit events --merged`).
#[derive(Debug, Serialize)]
pub struct MergedEvent {
    /// Delivery index, from 0.
    pub n: u64,
    /// `concurrent`: the step it was delivered in (events of one step are
    /// mutually concurrent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    pub tid: u32,
    pub thread: Option<String>,
    /// Its rule's name: `release`, `acquire-after-wait`, `acquire`,
    /// `timed-out`, `notify`, `cond-wait`, `post`, `sem-acquire-after-wait`,
    /// `sem-acquire`, `arrive`, `depart`,
    /// `create`, `start`, `exit`, `join`, `outcome`, `blocking-call`,
    /// `switch`.
    pub kind: &'static str,
    pub object: Option<String>,
    /// The object's sequence after it (a release, a notify, a post) or at
    /// it; for a thread's creation, start, exit or join, the created
    /// thread's creation number.
    pub object_seq: u32,
    /// The other thread of a `create` (the new one), a `start` (its
    /// creator) or a `join` (the joined one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_tid: Option<u32>,
    /// Its own timestamp, from the process's start.
    pub ts_ns: u64,
    /// The same on CLOCK_MONOTONIC (comparable with any other process's).
    pub mono_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adjusted_ts_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adjustment_ns: Option<u64>,
    pub site: Option<String>,
    /// Something it follows was never recorded: released so the stream goes on.
    pub released_early: bool,
}

/// `adjusted`: how much one thread's timestamps were moved.
#[derive(Debug, Default, Serialize)]
pub struct Perturbation {
    pub tid: u32,
    pub events: u64,
    pub adjusted: u64,
    pub total_ns: u64,
    pub largest_ns: u64,
}

/// The report's names of a trace's raw ids (objects, sites, thread names),
/// for a reader of a live trace that merges its events itself.
#[derive(Debug, Default)]
pub struct RawNames {
    pub objects: std::collections::HashMap<u32, String>,
    pub sites: std::collections::HashMap<u32, String>,
    pub threads: std::collections::HashMap<u32, String>,
}
