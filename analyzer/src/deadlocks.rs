//! Deadlocks in the report: threads blocked as the trace ends, real
//! deadlocks among them (`waits.rs`), and potential ones from the
//! lock-order graph (`lock_order.rs`), as the model's blocked threads and
//! findings.

use crate::lock_order::{Cycle, LockOrder};
use crate::model::*;
use crate::waits::{Stuck, Wait};
use locksuit_format::*;

pub const FINDING_DEADLOCK: &str = "deadlock";
pub const FINDING_POTENTIAL_DEADLOCK: &str = "potential-deadlock";

/// Turns the trace's raw ids into the report's.
pub struct Ids<'a> {
    pub lock: &'a dyn Fn(u32) -> Option<LockId>,
    /// A condition variable's report id.
    pub cond: &'a dyn Fn(u32) -> Option<String>,
    pub site: &'a dyn Fn(u32) -> Option<SiteId>,
    /// A raw site's line, for messages (also lines that engage no lock,
    /// such as a join's): "f@a.c:3".
    pub line: &'a dyn Fn(u32) -> String,
    pub thread_name: &'a dyn Fn(u32) -> Option<String>,
}

pub fn kind_name(kind: u32) -> &'static str {
    match kind {
        WAIT_COND => "cond",
        WAIT_BARRIER => "barrier",
        WAIT_JOIN => "join",
        _ => "lock",
    }
}

fn object(w: &Wait, ids: &Ids) -> Option<String> {
    match w.kind {
        WAIT_JOIN => None,
        WAIT_COND => (ids.cond)(w.object),
        _ => (ids.lock)(w.object).map(|l| l.to_string()),
    }
}

/// The threads blocked as the trace ends. `end_ns`: when it ended (or now,
/// for a running process), monotonic; 0 if unknown.
pub fn blocked(waits: &[Wait], ids: &Ids, start_ns: u64, end_ns: u64) -> Vec<BlockedThread> {
    waits
        .iter()
        .map(|w| BlockedThread {
            tid: w.tid,
            thread_name: w.thread_name.clone(),
            waits_in: kind_name(w.kind),
            object: object(w, ids),
            site: (ids.site)(w.site),
            since_ns: w.since_ns.saturating_sub(start_ns),
            waited_ns: (end_ns > w.since_ns).then(|| end_ns - w.since_ns),
            holder_tid: (w.kind == WAIT_LOCK && w.holder != 0).then_some(w.holder),
            joins_tid: w.joins,
            holds: w
                .holds
                .iter()
                .map(|&(lock, site)| HeldLock {
                    lock: (ids.lock)(lock),
                    site: (ids.site)(site),
                })
                .collect(),
        })
        .collect()
}

fn thread(tid: u32, ids: &Ids) -> String {
    match (ids.thread_name)(tid) {
        Some(name) => format!("thread {tid} ({name})"),
        None => format!("thread {tid}"),
    }
}

/// What a waiting thread waits for, in words.
fn waits_for(w: &Wait, ids: &Ids) -> String {
    match w.kind {
        WAIT_JOIN => w
            .joins
            .map_or_else(|| "a thread".to_string(), |t| thread(t, ids)),
        WAIT_COND => format!(
            "a signal on {}",
            (ids.cond)(w.object).unwrap_or_else(|| "a condition variable".into())
        ),
        WAIT_BARRIER => "the rest of a barrier".to_string(),
        _ => (ids.lock)(w.object).map_or_else(|| "a lock".to_string(), |l| l.to_string()),
    }
}

fn step(w: &Wait, holds: Option<u32>, ids: &Ids) -> CycleStep {
    CycleStep {
        tid: w.tid,
        thread_name: w.thread_name.clone(),
        holds: holds.and_then(|l| (ids.lock)(l)),
        holds_site: holds
            .and_then(|l| w.site_holding(l))
            .and_then(|s| (ids.site)(s)),
        waits_for: Some(match w.kind {
            WAIT_JOIN => w
                .joins
                .map_or_else(|| "thread".into(), |t| format!("thread {t}")),
            _ => object(w, ids).unwrap_or_default(),
        }),
        waits_site: (ids.site)(w.site),
        count: None,
    }
}

fn finding(kind: &'static str, steps: Vec<CycleStep>, message: String, wait_ns: u64) -> Finding {
    let mut locks: Vec<LockId> = steps.iter().filter_map(|s| s.holds).collect();
    locks.sort_unstable();
    locks.dedup();
    let mut sites: Vec<SiteId> = steps
        .iter()
        .flat_map(|s| [s.waits_site, s.holds_site])
        .flatten()
        .collect();
    sites.sort_unstable();
    sites.dedup();
    Finding {
        kind,
        lock: locks.first().copied(),
        sites,
        message,
        engagements: 0,
        wait_ns,
        locks,
        family: None,
        family_size: None,
        cycle: steps,
    }
}

/// One finding of kind `deadlock` per way threads are stuck for good.
pub fn deadlock_findings(stuck: &[Stuck], ids: &Ids, end_ns: u64) -> Vec<Finding> {
    let waited = |w: &Wait| end_ns.saturating_sub(w.since_ns);
    stuck
        .iter()
        .map(|s| match s {
            Stuck::Cycle(waits) => {
                let n = waits.len();
                // Each holds what the one before it waits for.
                let held: Vec<Option<u32>> = (0..n)
                    .map(|i| {
                        let before = &waits[(i + n - 1) % n];
                        (before.kind == WAIT_LOCK).then_some(before.object)
                    })
                    .collect();
                let steps: Vec<CycleStep> = waits
                    .iter()
                    .zip(&held)
                    .map(|(w, &lock)| step(w, lock, ids))
                    .collect();
                let parts: Vec<String> = waits
                    .iter()
                    .zip(&held)
                    .zip(&steps)
                    .map(|((w, &lock), st)| {
                        let holds = match (st.holds, lock) {
                            (Some(l), Some(lock)) => {
                                let taken = w.site_holding(lock).unwrap_or(0);
                                format!("holds {l} (taken at {}) and ", (ids.line)(taken))
                            }
                            _ => String::new(),
                        };
                        format!(
                            "{} {holds}waits for {} at {}",
                            thread(w.tid, ids),
                            waits_for(w, ids),
                            (ids.line)(w.site)
                        )
                    })
                    .collect();
                finding(
                    FINDING_DEADLOCK,
                    steps,
                    format!(
                        "deadlock: {} threads wait for each other and none can go on: {}. {}",
                        n,
                        parts.join("; "),
                        if waits.iter().all(|w| w.kind == WAIT_LOCK) {
                            "Take the locks in one order everywhere."
                        } else {
                            "Unlock before joining a thread that needs the lock."
                        }
                    ),
                    waits.iter().map(waited).sum(),
                )
            }
            Stuck::SelfDeadlock(w) => finding(
                FINDING_DEADLOCK,
                vec![step(w, Some(w.object), ids)],
                format!(
                    "deadlock: {} waits at {} for {}, which it holds itself (taken at {}): a non-recursive mutex locked twice by one thread never returns.",
                    thread(w.tid, ids),
                    (ids.line)(w.site),
                    waits_for(w, ids),
                    (ids.line)(w.site_holding(w.object).unwrap_or(0))
                ),
                waited(w),
            ),
            Stuck::Abandoned { wait, holder } => finding(
                FINDING_DEADLOCK,
                vec![step(wait, None, ids)],
                format!(
                    "deadlock: {} waits at {} for {}, held by thread {holder}, which has exited without unlocking it (an abandoned lock).",
                    thread(wait.tid, ids),
                    (ids.line)(wait.site),
                    waits_for(wait, ids)
                ),
                waited(wait),
            ),
            Stuck::NoRunnableThread(waits) => finding(
                FINDING_DEADLOCK,
                waits.iter().map(|w| step(w, None, ids)).collect(),
                format!(
                    "no runnable thread: every thread is blocked and none is left to wake another: {}.",
                    waits
                        .iter()
                        .map(|w| format!(
                            "{} waits for {} at {}",
                            thread(w.tid, ids),
                            waits_for(w, ids),
                            (ids.line)(w.site)
                        ))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                waits.iter().map(waited).sum(),
            ),
        })
        .collect()
}

/// One finding of kind `potential-deadlock` per lock-order cycle.
pub fn potential_findings(order: &LockOrder, ids: &Ids) -> Vec<Finding> {
    order.cycles.iter().map(|c| potential(c, ids)).collect()
}

fn potential(cycle: &Cycle, ids: &Ids) -> Finding {
    let lines: Vec<(String, String)> = cycle
        .edges
        .iter()
        .map(|e| ((ids.line)(e.waits_site), (ids.line)(e.holds_site)))
        .collect();
    let steps: Vec<CycleStep> = cycle
        .edges
        .iter()
        .map(|e| CycleStep {
            tid: e.tid,
            thread_name: (ids.thread_name)(e.tid),
            holds: (ids.lock)(e.holds),
            holds_site: (ids.site)(e.holds_site),
            waits_for: (ids.lock)(e.waits_for).map(|l| l.to_string()),
            waits_site: (ids.site)(e.waits_site),
            count: Some(e.count),
        })
        .collect();
    let edge = |(s, (waits_at, holds_at)): (&CycleStep, &(String, String))| {
        format!(
            "{} took {} at {waits_at} while holding {} (taken at {holds_at}){}",
            thread(s.tid, ids),
            s.waits_for.as_deref().unwrap_or("a lock"),
            s.holds
                .map_or_else(|| "a lock".to_string(), |l| l.to_string()),
            match s.count {
                Some(n) if n > 1 => format!(", {n} times"),
                _ => String::new(),
            }
        )
    };
    let message = if cycle.family_inversion {
        format!(
            "potential deadlock: locks made at one line were taken in both address orders: {}. Two threads doing both at once can deadlock; always take them in one order (e.g. by address).",
            steps.iter().zip(&lines).map(edge).collect::<Vec<_>>().join("; ")
        )
    } else {
        let order: Vec<String> = steps
            .iter()
            .filter_map(|s| s.holds.map(|l| l.to_string()))
            .collect();
        format!(
            "potential deadlock: {} locks are taken in a cycle ({} then back to {}): {}. If these run at the same time they can deadlock; take the locks in one order everywhere.",
            steps.len(),
            order.join(" then "),
            order.first().cloned().unwrap_or_default(),
            steps.iter().zip(&lines).map(edge).collect::<Vec<_>>().join("; ")
        )
    };
    let mut f = finding(FINDING_POTENTIAL_DEADLOCK, steps, message, 0);
    f.engagements = cycle.edges.iter().map(|e| e.count).sum();
    f
}
