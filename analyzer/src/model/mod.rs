//! The report model: everything a report shows, built once from the traces.
//! Text and JSON both render from it; the JSON is this model serialised
//! (schema `locksuit.report/3`, see `docs/report-schema.md`).
//!
//! The findings (`findings.rs`), the per-object event streams
//! (`streams.rs`), frames, ids and names, waiting and modules are apart;
//! this file re-exports them so that `crate::model::X` names any part.

use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;
use smallvec::SmallVec;
use std::fmt;

pub const SCHEMA: &str = "locksuit.report/3";

// Why threads stopped and why waits ended: their parts of the model.
mod waiting;
pub use waiting::*;
// The modules loaded, for profiles read elsewhere.
pub mod critical_path;
pub use critical_path::{
    CriticalPath, Gains, PathClass, PathLock, PathSegment, PredictedGain, SegmentKind,
};
pub mod findings;
pub use findings::*;
pub mod frames;
mod modules;
pub use frames::Frame;
pub mod names;
pub use names::{FamilyId, LockId, SiteId};
pub mod stacks;
pub mod streams;
pub use modules::{from_trace as modules_from_trace, CodeSegment, Module};
pub use streams::{ObjectStream, StreamEvent};

/// Addresses print as lowercase hex strings, `"0x7ffd1234"`.
fn hex<S: Serializer>(address: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{address:#x}"))
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub threshold: f64,
    #[serde(serialize_with = "named_processes")]
    pub processes: Vec<Process>,
}

/// Each process is written with its own names current (see `names.rs`).
fn named_processes<S: Serializer>(processes: &[Process], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(processes.len()))?;
    for p in processes {
        crate::model::names::with(&p.names, || seq.serialize_element(p))?;
    }
    seq.end()
}

/// What a lean trace cannot give, said once in its report.
pub const LEAN_CANNOT_GIVE: &str = "recorded lean (LOCKSUIT_MODE=lean): no hold times of uncontended mutex holds, lock order, blocking under a mutex, unlocks of mutexes not held, owner changes or call paths above a line, so no potential-deadlock, blocking-under-lock, such misuse or long-hold from uncontended holds can come from it";

#[derive(Debug, Serialize)]
pub struct Process {
    pub trace: String,
    pub pid: u32,
    pub ppid: u32,
    pub exe: String,
    /// False when the process died without a normal exit (crash, kill).
    pub complete: bool,
    /// How the trace ended: "exit", "exec" or "died"; "running" while the
    /// process is still alive.
    pub ended_by: &'static str,
    pub exit_code: Option<i32>,
    pub fork_child: bool,
    /// When the shim started in this process: wall clock (ns since 1970)
    /// and CLOCK_MONOTONIC, to show absolute times (timed calls' deadlines)
    /// relative to the start.
    pub start_unix_ns: u64,
    pub start_mono_ns: u64,
    pub duration_ns: Option<u64>,
    /// Its threads' CPU time, when the kernel gave every thread's, and that
    /// over `duration_ns`: how many threads were running on average.
    pub cpu_ns: Option<u64>,
    pub parallelism: Option<f64>,
    /// Operations and records the shim could not record.
    pub dropped_events: u64,
    /// Uncontended holds are timed once in this many engagements (0 = never).
    pub hold_sample_period: u32,
    /// Which operations were written as events: "contended" (the default),
    /// "all" (`LOCKSUIT_EVENTS=all`), or "switched" (`locksuit top` switched
    /// between the two while it ran: every operation for part of the run).
    pub events_mode: &'static str,
    /// "full", or "lean" (`LOCKSUIT_MODE=lean`): plain mutexes' engagements
    /// counted per lock and line with their contended waits, and nothing
    /// that needs every hold watched (see [`LEAN_CANNOT_GIVE`]).
    pub recording: &'static str,
    /// Events read from the trace.
    pub events: u64,
    /// Where timestamps came from: "tsc" (calibrated invariant TSC, after
    /// the first 10 ms) or "monotonic" (`clock_gettime`). Both are
    /// CLOCK_MONOTONIC nanoseconds.
    pub clock: &'static str,
    /// The calibrated TSC rate, when `clock` is "tsc".
    pub tsc_khz: Option<u32>,
    /// Flight-recorder mode filled the trace and overwrote the oldest
    /// events: event figures cover only the end of the run.
    pub events_overwritten: bool,
    pub threads: Vec<Thread>,
    pub locks: Vec<Lock>,
    /// Locks of one kind engaged at exactly the same lines, summed up (see
    /// `families.rs`); the text report shows them as one row.
    pub families: Vec<Family>,
    pub sites: Vec<Site>,
    pub conds: Vec<Cond>,
    pub findings: Vec<Finding>,
    /// Findings a suppression took out of `findings` (see `suppress/`), by
    /// entry and kind: not listed, not counted by `--fail-on-findings`.
    pub suppressed: Vec<SuppressedFindings>,
    /// Blocking calls beyond the lock API were recorded when they blocked
    /// at least this long (µs).
    pub block_min_us: u32,
    /// How such a call was judged blocked: "switched-out" (the kernel
    /// switched the thread out during it, told by glibc's rseq area) or
    /// "duration" (it took that long, whatever it did).
    pub block_detection: &'static str,
    /// Every distinct blocking call stack, most time first.
    pub blocking_stacks: Vec<BlockingStack>,
    /// The same merged into a tree from the outermost frame in (roots most
    /// time first).
    pub wait_tree: Vec<TreeNode>,
    /// The recording policy in force (`LOCKSUIT_POLICY`), or null.
    pub policy: Option<PolicyInForce>,
    /// The snapshots its triggers took, in order.
    pub snapshots: Vec<Snapshot>,
    /// Built with `locksuit cc`: accesses made under a lock, and those the
    /// shim had no room for; null when the verdicts rest on sharing ratios.
    pub data_level: Option<DataLevel>,
    /// The run's critical path through its waits, and what each lock's
    /// waits cost it; null when the trace was read without its events.
    pub critical_path: Option<CriticalPath>,
    /// Processors idle while threads waited; null without the processor
    /// count or threads.
    pub idle_while_waiting: Option<IdleWhileWaiting>,
    /// Every blocking period (HTML and Chrome trace only).
    #[serde(skip)]
    pub timeline: Timeline,
    /// Who blocked whom: one row per (lock, blocker, blocked thread); the
    /// blocker held the lock while the blocked thread waited for it.
    pub blocking: Vec<Blocking>,
    /// The same, by the functions the two threads were in.
    pub blocking_functions: Vec<FunctionBlocking>,
    /// Threads blocked when the trace ended (the process hung, was killed,
    /// or is still running): what each waits for, since when, and what it
    /// holds meanwhile.
    pub blocked: Vec<BlockedThread>,
    /// Problems found in the trace itself.
    pub warnings: Vec<String>,
    /// `locksuit events` only: each object's events in causal order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<ObjectStream>,
    /// The modules it had loaded (pprof mappings).
    #[serde(skip)]
    pub modules: Vec<Module>,
    /// `events --merged --follow` only: the report's names of raw ids.
    #[serde(skip)]
    pub raw_names: RawNames,
    /// The stable names its ids print as (see `names.rs`).
    #[serde(skip)]
    pub names: crate::model::names::Names,
}

/// Durations of one kind (waits or holds), from the recorded events. The
/// average is worked out when printed.
#[derive(Debug, Clone, Default)]
pub struct DurationStats {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
}

impl DurationStats {
    pub fn avg_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }
}

impl Serialize for DurationStats {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("DurationStats", 6)?;
        st.serialize_field("count", &self.count)?;
        st.serialize_field("total_ns", &self.total_ns)?;
        st.serialize_field("avg_ns", &self.avg_ns())?;
        st.serialize_field("max_ns", &self.max_ns)?;
        st.serialize_field("p50_ns", &self.p50_ns)?;
        st.serialize_field("p99_ns", &self.p99_ns)?;
        st.end()
    }
}

/// A lock's distributions from the events; boxed in [`Lock`], where most
/// locks have none.
pub type Durations = Option<Box<DurationStats>>;

#[derive(Debug, Serialize)]
pub struct Blocking {
    pub lock: LockId,
    pub blocker_tid: u32,
    pub blocked_tid: u32,
    pub count: u64,
    pub wait_ns: u64,
}

#[derive(Debug, Serialize)]
pub struct FunctionBlocking {
    pub blocker_function: String,
    pub blocked_function: String,
    pub count: u64,
    pub wait_ns: u64,
}

#[derive(Debug, Serialize)]
pub struct NotifyPair {
    pub notifier_tid: u32,
    pub waiter_tid: u32,
    pub count: u64,
}

#[derive(Debug, Serialize)]
pub struct Thread {
    pub tid: u32,
    pub name: Option<String>,
    pub parent_tid: Option<u32>,
    pub main: bool,
    pub ended: bool,
    pub acquisitions: u64,
    pub joins: u64,
    pub join_wait_ns: u64,
    pub dropped_events: u64,
    /// Sampled mean cost of one of the shim's fast-path calls on this
    /// thread (1 in 1024 is timed), in ns; what compensation takes out per
    /// call. Null before the first sample.
    pub shim_call_ns: Option<f64>,
    /// Its lifetime (to its end, or the end of the trace) minus its
    /// recorded blocking periods: on a CPU, runnable, or blocked in calls
    /// shorter than `block_min_us`.
    pub running_ns: u64,
    /// Why it stopped: time and count per blocking class, most time first.
    pub blocking_classes: Vec<ClassTime>,
    /// From the kernel, read when the thread ended or the process exited
    /// (null where it did not say, or the process died first): time on a
    /// CPU, time runnable but waiting for one, and context switches,
    /// voluntary (it blocked) and involuntary (preempted).
    pub cpu_ns: Option<u64>,
    pub runnable_ns: Option<u64>,
    pub voluntary_switches: Option<u64>,
    pub involuntary_switches: Option<u64>,
    /// Why its waits ended, most first.
    pub reasons: Vec<ReasonCount>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct ThreadCount {
    pub tid: u32,
    /// Engagements by this thread.
    pub count: u64,
    /// The thread asked for the lock at all: engaged it, waited for it,
    /// timed out or failed a trylock on it (or is waiting for it now).
    pub asked: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LockKind {
    Mutex,
    Rwlock,
    Spin,
    Sem,
    Barrier,
    /// A futex word waited on through `syscall()` (Rust's std,
    /// parking_lot, abseil, folly): only its contended path is seen.
    Futex,
    Unknown,
}

impl LockKind {
    /// The size of one lock of each kind (glibc, 64-bit): a variable no
    /// bigger than its lock is the lock, and a path stops at a type the lock
    /// fills (`std::mutex`) rather than name its insides.
    pub fn size(self) -> u64 {
        match self {
            LockKind::Mutex => 40,
            LockKind::Rwlock => 56,
            LockKind::Spin => 4,
            LockKind::Sem | LockKind::Barrier => 32,
            LockKind::Futex => 4,
            LockKind::Unknown => 0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::Rwlock => "rwlock",
            LockKind::Spin => "spin",
            LockKind::Sem => "sem",
            LockKind::Barrier => "barrier",
            LockKind::Futex => "futex",
            LockKind::Unknown => "unknown",
        }
    }
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    Init,
    FirstUse,
    Open,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MutexType {
    Normal,
    Recursive,
    Errorcheck,
    Adaptive,
}

/// One lock. Kept small (no per-lock strings, threads and sites inline):
/// a report can hold a million of them.
#[derive(Debug, Clone, Serialize)]
pub struct Lock {
    pub id: LockId,
    pub kind: LockKind,
    #[serde(serialize_with = "hex")]
    pub address: u64,
    /// "init" (explicit `*_init`), "first-use" (static initialiser, or
    /// initialised before the shim loaded) or "open" (`sem_open`).
    pub origin: Origin,
    pub destroyed: bool,
    /// `PTHREAD_PROCESS_SHARED`: other processes may engage it too, each
    /// recorded in its own trace.
    pub process_shared: bool,
    /// Mutexes: "normal", "recursive", "errorcheck" or "adaptive".
    pub mutex_type: Option<MutexType>,
    pub robust: bool,
    /// Successful acquisitions, trylocks and condition-wait re-acquisitions included.
    pub acquisitions: u64,
    /// Acquisitions that had to wait for another thread.
    pub contended: u64,
    pub try_failures: u64,
    pub timeouts: u64,
    pub cond_reacquires: u64,
    pub task_switches: u64,
    /// Exclusive acquisitions by another thread than the previous owner.
    pub owner_changes: u64,
    /// Distinct threads that engaged it.
    pub threads: u32,
    /// Distinct threads that asked for it: engaged it, waited or timed out,
    /// failed a trylock, or are waiting for it as the trace ends. Each of
    /// them needed it, so a lock is unnecessary only if this is 1.
    pub askers: u32,
    /// Threads still waiting for it when the trace ended (see `blocked`).
    pub waiting_at_end: u32,
    /// How evenly its threads engaged it: the share of engagements made by
    /// threads other than the top one, over the most that share can be
    /// for that many threads (1 - 1/N). 1.0 for a lock its threads engage
    /// evenly, whatever their number; 0 for one thread.
    pub sharing_ratio: f64,
    pub wait_ns: u64,
    /// Sum of the hold times that were measured (see `hold_samples`).
    pub hold_ns: u64,
    /// Engagements whose hold time was measured: every contended one, plus
    /// one in `hold_sample_period` of the others.
    pub hold_samples: u64,
    /// By thread id.
    pub engagements_by_thread: SmallVec<[ThreadCount; 1]>,
    /// In report order.
    pub sites: SmallVec<[SiteId; 4]>,
    /// Contended waits (every one is recorded as an event), exact percentiles.
    pub wait: Durations,
    /// Timed holds that ended with threads waiting (or began contended).
    pub hold: Durations,
    /// `wait` (contended acquisitions only) and `hold` with the shim's own
    /// slow-path time (first-sight unwinding, trace growth) that fell inside
    /// them taken out: overhead compensation. The raw figures stay above.
    pub wait_compensated: Durations,
    pub hold_compensated: Durations,
    /// rwlocks only: read (shared) and write (exclusive) engagements apart.
    pub read: Option<Box<ModeStats>>,
    pub write: Option<Box<ModeStats>>,
    /// Semaphores only: `sem_post` calls (not acquisitions, but engagements
    /// of the posting thread for the sharing ratio).
    pub posts: u64,
    /// What few locks have, boxed (a million locks must stay small):
    /// robust outcomes, holds that were waited for but not timed. Written
    /// as fields of the lock.
    #[serde(flatten)]
    pub rare: Option<Box<RareFigures>>,
    /// Why waits for it ended, most first; `try-failed` counts the
    /// trylocks that found it taken (exact, from the counters). Boxed, as
    /// most locks have none: written as `[]` then.
    #[serde(serialize_with = "waiting::boxed_list")]
    pub reasons: Option<Box<ReasonList>>,
    /// The family it belongs to (see [`Family`]).
    pub family: FamilyId,
    /// The line that made it (initialised it, or first used it), as an
    /// index of the analysis's call chains; `u32::MAX` if unknown.
    #[serde(skip)]
    pub origin_chain: u32,
    /// It lives in a global or static variable (and is named by it).
    #[serde(skip)]
    pub in_variable: bool,
    /// Made by Python's library while an `import` ran (a module's own
    /// lock, `concurrent.futures.thread`'s `_global_shutdown_lock`): the
    /// library's, whatever line of the program imported it.
    #[serde(skip)]
    pub made_by_library_import: bool,
}

/// Locks of one kind engaged at exactly the same lines (see
/// `families::family_key`): a million cells of a grid, each with its own
/// mutex, are one family. Figures are summed over its locks.
#[derive(Debug, Clone, Serialize)]
pub struct Family {
    pub id: FamilyId,
    pub kind: LockKind,
    /// How many locks, and the first of them (lowest id).
    pub size: u64,
    pub first_lock: LockId,
    #[serde(serialize_with = "hex")]
    pub first_address: u64,
    pub sites: Vec<SiteId>,
    pub acquisitions: u64,
    pub contended: u64,
    pub owner_changes: u64,
    pub task_switches: u64,
    pub wait_ns: u64,
    pub hold_ns: u64,
    pub hold_samples: u64,
    pub waited_holds: Option<WaitedHolds>,
    /// Distinct threads that engaged any of its locks.
    pub threads: u32,
    /// Engagement-weighted sharing ratio of its locks.
    pub sharing_ratio: f64,
    /// Some of its locks are process-shared.
    pub process_shared: bool,
    /// Its locks' distributions pooled.
    pub wait: Option<DurationStats>,
    pub hold: Option<DurationStats>,
    pub wait_compensated: Option<DurationStats>,
    pub hold_compensated: Option<DurationStats>,
}

/// What few locks have (see [`Lock::rare`]).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RareFigures {
    /// Robust mutexes: acquisitions that returned EOWNERDEAD (taken, the
    /// previous owner died holding it) and ENOTRECOVERABLE (refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcomes: Option<Outcomes>,
    /// Holds that were not timed (they began uncontended) but that a thread
    /// waited for, for each alone: each lasted at least that wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited_holds: Option<WaitedHolds>,
    /// Futex words: what the library that waited on it uses it for.
    #[serde(flatten)]
    pub futex: Option<FutexUse>,
    /// Semaphores posted mostly by threads that had not taken them: used
    /// to signal (a queue's "not empty", a Python condition's waiter), not
    /// to guard data, so nobody held it while its waiters waited. Written
    /// as `"signals": true`; absent for a semaphore used as a lock.
    #[serde(rename = "signals", skip_serializing_if = "std::ops::Not::not")]
    pub signals: bool,
}

/// What a futex word is used for, told by the lock library's functions
/// its waits went through (see `analysis::futex`).
#[derive(Debug, Clone, Serialize)]
pub struct FutexUse {
    /// `lock` (a mutex's or read-write lock's word: its waiters wait for a
    /// holder, and the thread whose wake ended a wait held it), `signal` (a
    /// condition variable, a thread parker, a once: waiters wait for an
    /// event, which nobody holds), or `unknown` (no library function
    /// recognised).
    #[serde(rename = "futex_role")]
    pub role: FutexRole,
    /// The library's function the waits went through, if recognised.
    #[serde(rename = "futex_library")]
    pub library: Option<String>,
    /// The word is the waiting thread's own, not the lock's: the library
    /// parks each waiting thread on a word of its own (parking_lot,
    /// abseil's `absl::Mutex`) and the unlocker wakes that word.
    #[serde(rename = "futex_per_thread")]
    pub per_thread: bool,
    /// A word in a variable: its whole path, through the library's own
    /// fields (`app::RW.inner.writer_notify`), where the lock's name
    /// stops at the program's object (`&app::RW/writer_notify`); null for
    /// a word in no variable.
    #[serde(rename = "futex_path")]
    pub path: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FutexRole {
    Lock,
    Signal,
    Unknown,
}

impl Lock {
    /// Its rare figures, made on first need.
    pub fn rare_mut(&mut self) -> &mut RareFigures {
        self.rare.get_or_insert_with(Default::default)
    }

    /// A futex word's role (`Unknown` for one not classified yet).
    pub fn futex_role(&self) -> Option<FutexRole> {
        (self.kind == LockKind::Futex).then(|| {
            self.rare
                .as_ref()
                .and_then(|r| r.futex.as_ref())
                .map_or(FutexRole::Unknown, |f| f.role)
        })
    }

    /// A semaphore used to signal (see [`RareFigures::signals`]).
    pub fn signals(&self) -> bool {
        self.rare.as_ref().is_some_and(|r| r.signals)
    }

    /// Whether a thread held it while others waited for it: every lock but
    /// a semaphore used to signal and a futex word whose library uses it to
    /// signal (or is not known).
    pub fn holds_known(&self) -> bool {
        !self.signals() && self.futex_role().is_none_or(|role| role == FutexRole::Lock)
    }

    /// Its holds that were waited for but not timed, if any.
    pub fn waited_holds(&self) -> Option<WaitedHolds> {
        self.rare.as_ref().and_then(|r| r.waited_holds)
    }
}

/// Holds not timed that threads waited for (see [`RareFigures`]).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct WaitedHolds {
    /// How many.
    pub count: u64,
    /// The waits they caused: their holds lasted at least this long in all.
    pub wait_ns: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcomes {
    pub owner_died: u64,
    pub not_recoverable: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ModeStats {
    pub acquisitions: u64,
    pub contended: u64,
    pub try_failures: u64,
    pub timeouts: u64,
    pub wait_ns: u64,
    pub hold_ns: u64,
    pub hold_samples: u64,
}

#[derive(Debug, Serialize)]
pub struct Site {
    pub id: SiteId,
    /// Its stable name (what `id` prints as): `function@file:line`.
    #[serde(skip)]
    pub name: String,
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub path: Option<String>,
    pub locks: Vec<LockId>,
    pub engagements: u64,
    pub contended: u64,
    pub task_switches: u64,
    pub wait_ns: u64,
    pub hold_ns: u64,
    /// Contended waits at this line.
    pub wait: Option<DurationStats>,
    /// The figure its status rests on: with basis `sharing`, the
    /// engagement-weighted sharing ratio of the locks it engaged; with basis
    /// `data`, the share of its accesses that were suitable.
    pub ratio: f64,
    /// The engagement-weighted sharing ratio of the locks it engaged, on
    /// either basis.
    pub sharing_ratio: f64,
    pub status: &'static str,
    /// What `status` rests on: `data` (what its critical sections touched,
    /// in a program built with `locksuit cc`) or `sharing` (`ratio`).
    pub basis: &'static str,
    /// `data` basis: accesses its critical sections made to data other
    /// threads touched too, and to data only one thread touched.
    pub suitable_accesses: Option<u64>,
    pub unsuitable_accesses: Option<u64>,
    /// `data` basis: its engagements that touched data, by their share of
    /// suitable accesses (bucket `i`: from `i / 10` up to `(i + 1) / 10`,
    /// bucket 10: all suitable), split by whether another thread waited
    /// for the lock meanwhile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engagement_ratios: Option<EngagementRatios>,
    /// `data` basis: the engagements another thread waited for whose share
    /// of suitable accesses lay wholly below `--threshold` (by bucket).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsuitable_engagements: Option<u64>,
    /// Why the waits at this line ended, most first.
    pub reasons: Vec<ReasonCount>,
    /// How much sooner the run would have ended with every wait made at
    /// this line removed or halved (see `CriticalPath`); for the lines
    /// that waited longest only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_gain: Option<Gains>,
    pub call_chain: Vec<Frame>,
}

/// A site's engagements by their share of suitable accesses.
#[derive(Debug, Default, Clone, Serialize)]
pub struct EngagementRatios {
    pub waited_for: Vec<u64>,
    pub not_waited_for: Vec<u64>,
}

#[derive(Debug, Serialize)]
pub struct Cond {
    pub id: String,
    pub address: String,
    pub waits: u64,
    pub timeouts: u64,
    pub signals: u64,
    pub broadcasts: u64,
    /// Signals and broadcasts that found at least one waiter.
    pub notifies_with_waiters: u64,
    pub wait_ns: u64,
    pub threads: usize,
    /// Mutexes passed to its waits.
    pub mutexes: Vec<LockId>,
    /// Wait outcomes from the events: woken by a notify, woken with no
    /// notify since the wait began, cancelled.
    pub notified: u64,
    pub spurious: u64,
    pub cancelled: u64,
    /// From the notify a waiter woke to, to the waiter's return.
    pub notify_latency: Option<DurationStats>,
    /// Which threads' notifies woke which threads.
    pub notifiers: Vec<NotifyPair>,
    /// Why its waits ended, most first.
    pub reasons: Vec<ReasonCount>,
}
