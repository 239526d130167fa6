//! The critical path of a process's run and what each lock's waits cost it
//! (see `analysis/critical_path.rs`).

use super::names::LockId;
use serde::Serialize;

/// How much sooner the run would have ended: at least `low_ns`, at most
/// `high_ns` (equal when the trace tells every wait's ender), and those as
/// percentages of the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PredictedGain {
    pub low_ns: u64,
    pub high_ns: u64,
    pub low_pct: f64,
    pub high_pct: f64,
}

/// A lock's (or a finding's locks') waits removed, and halved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Gains {
    pub if_removed: PredictedGain,
    pub if_halved: PredictedGain,
}

impl Gains {
    /// What findings are ranked by: the gain if the waits were removed,
    /// at least, then at most.
    pub fn rank(&self) -> (u64, u64) {
        (self.if_removed.low_ns, self.if_removed.high_ns)
    }
}

/// A lock (or barrier) whose waits are in the trace.
#[derive(Debug, Clone, Serialize)]
pub struct PathLock {
    pub lock: LockId,
    /// Its waits on the path (from the release that ended each).
    pub wait_ns: u64,
    /// Its critical sections on the path (from a recorded acquisition to
    /// the release the path left the holder by).
    pub hold_ns: u64,
    /// All its recorded waits, on the path or not.
    pub total_wait_ns: u64,
    /// Null past the 32 most waited-for locks (each takes a re-play).
    pub gain: Option<Gains>,
}

/// Time the path spent blocked in one class of call (sleep, I/O, …).
#[derive(Debug, Clone, Serialize)]
pub struct PathClass {
    pub class: String,
    pub ns: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CriticalPath {
    /// From the start of the first recorded thread to the end of the last.
    pub run_ns: u64,
    /// The path's length (the run's, from where the path begins).
    pub length_ns: u64,
    /// On the path, running (or in blocking calls, see `classes`) outside
    /// any known critical section.
    pub running_ns: u64,
    /// On the path waiting for a joined thread to end, and in condition
    /// waits (whose notifier is not followed).
    pub join_ns: u64,
    pub cond_ns: u64,
    /// Every lock with recorded waits: those on the path first, most
    /// path time first.
    pub locks: Vec<PathLock>,
    /// Blocking calls on the path, by class, most time first.
    pub classes: Vec<PathClass>,
    /// Locks with waits none of which is on the path, most waited first:
    /// long waits maybe, but harmless to the run's length.
    pub off_path: Vec<LockId>,
    /// Waits on the path whose ender the trace does not tell: the path went
    /// on in the waiter, and predicted gains are ranges.
    pub unknown_enders: u64,
    /// What the path may miss, in words (empty: nothing known).
    pub limits: Vec<String>,
    /// The path itself, earliest first, for the HTML timeline. Not in the
    /// JSON report (a long run's path has as many stretches as waits).
    #[serde(skip)]
    pub segments: Vec<PathSegment>,
}

/// What the path did in one stretch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentKind {
    /// Running (or in blocking calls) outside any known critical section.
    Running,
    /// Inside a critical section of `lock`.
    Holding,
    /// Waiting for `lock` (a lock or barrier) until `ended_by` let it in.
    Waiting,
    /// Waiting for a joined thread (`ended_by`) to end.
    Join,
    /// In a condition wait (its notifier is not followed).
    Cond,
}

impl SegmentKind {
    pub fn name(self) -> &'static str {
        match self {
            SegmentKind::Running => "running",
            SegmentKind::Holding => "holding",
            SegmentKind::Waiting => "waiting",
            SegmentKind::Join => "join",
            SegmentKind::Cond => "cond",
        }
    }
}

/// One stretch of the path, in one thread. Times are since the process's
/// start (as the timeline's).
#[derive(Debug, Clone, PartialEq)]
pub struct PathSegment {
    pub tid: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub kind: SegmentKind,
    /// Holding and waiting: the lock (or barrier), if the report names it.
    pub lock: Option<LockId>,
    /// Waits: the line that waited.
    pub line: Option<String>,
    /// Waits: the thread that ended it (0: unknown; the path went on in
    /// the waiter) and, for a lock, the line where that thread had taken it.
    pub ended_by: u32,
    pub ender_line: Option<String>,
}
