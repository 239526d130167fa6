//! Deadlocks in the report: threads blocked as the trace ends, real
//! deadlocks among them (`waits.rs`), and potential ones from the
//! lock-order graph (`lock_order.rs`), as the model's blocked threads and
//! findings.

use crate::analysis::lock_order::{Cycle, CycleEdge, Inversion, LockOrder};
use crate::analysis::waits::{Stuck, Wait};
use crate::model::*;
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
    /// Whether a raw lock id is a futex word (whose holder is not seen).
    pub futex_word: &'a dyn Fn(u32) -> bool,
}

impl Ids<'_> {
    /// A thread in words: "thread 12 (worker)".
    pub fn thread(&self, tid: u32) -> String {
        crate::model::thread_words(tid, (self.thread_name)(tid).as_deref())
    }
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

/// What a waiting thread waits for, in words.
fn waits_for(w: &Wait, ids: &Ids) -> String {
    match w.kind {
        WAIT_JOIN => w
            .joins
            .map_or_else(|| "a thread".to_string(), |t| ids.thread(t)),
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
        wait_ns,
        locks,
        cycle: steps,
        ..Finding::default()
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
                            ids.thread(w.tid),
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
                    ids.thread(w.tid),
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
                    ids.thread(wait.tid),
                    (ids.line)(wait.site),
                    waits_for(wait, ids)
                ),
                waited(wait),
            ),
            Stuck::NoRunnableThread(waits) => finding(
                FINDING_DEADLOCK,
                waits
                    .iter()
                    .map(|w| step(w, w.holds.first().map(|&(lock, _)| lock), ids))
                    .collect(),
                format!(
                    "no runnable thread: every thread is blocked and none is left to wake another: {}.{}",
                    waits
                        .iter()
                        .map(|w| format!(
                            "{} waits for {}{} at {}",
                            ids.thread(w.tid),
                            waits_for(w, ids),
                            if w.kind == WAIT_LOCK && (ids.futex_word)(w.object) {
                                " (a futex word)"
                            } else {
                                ""
                            },
                            (ids.line)(w.site)
                        ))
                        .collect::<Vec<_>>()
                        .join("; "),
                    if waits
                        .iter()
                        .any(|w| w.kind == WAIT_LOCK && (ids.futex_word)(w.object))
                    {
                        " Who holds a futex word is not seen (taking it without waiting makes no call): each is held by one of these threads, or by one that ended holding it; two locks taken in opposite orders by two threads look like this."
                    } else {
                        ""
                    }
                ),
                waits.iter().map(waited).sum(),
            ),
        })
        .collect()
}

/// One finding of kind `potential-deadlock` per set of lock-order cycles
/// through the same lines (the same code taking locks in two orders, one
/// thing to fix), and one `family-order-inversion` per family inversion.
pub fn potential_findings(order: &LockOrder, ids: &Ids) -> Vec<Finding> {
    // (lines holding, lines taking) of each edge, sorted → the cycles.
    type Lines = Vec<(Option<SiteId>, Option<SiteId>)>;
    let mut by_lines: Vec<(Lines, Vec<&Cycle>)> = Vec::new();
    for cycle in &order.cycles {
        let mut lines: Vec<(Option<SiteId>, Option<SiteId>)> = cycle
            .edges
            .iter()
            .map(|e| ((ids.site)(e.holds_site), (ids.site)(e.waits_site)))
            .collect();
        lines.sort_unstable();
        match by_lines.iter_mut().find(|(l, _)| *l == lines) {
            Some((_, cycles)) => cycles.push(cycle),
            None => by_lines.push((lines, vec![cycle])),
        }
    }
    let mut out: Vec<Finding> = by_lines
        .into_iter()
        .map(|(_, cycles)| potential(&cycles, ids))
        .collect();
    out.extend(order.inversions.iter().map(|i| inversion(i, ids)));
    out
}

fn edge_step(e: &CycleEdge, ids: &Ids) -> CycleStep {
    CycleStep {
        tid: e.tid,
        thread_name: (ids.thread_name)(e.tid),
        holds: (ids.lock)(e.holds),
        holds_site: (ids.site)(e.holds_site),
        waits_for: (ids.lock)(e.waits_for).map(|l| l.to_string()),
        waits_site: (ids.site)(e.waits_site),
        count: Some(e.count),
    }
}

/// "thread 12 took L2 at g (a.c:9) while holding L1 (taken at f (a.c:3)), 4 times"
fn edge_words(e: &CycleEdge, s: &CycleStep, ids: &Ids) -> String {
    format!(
        "{} took {} at {} while holding {} (taken at {}){}",
        ids.thread(s.tid),
        s.waits_for.as_deref().unwrap_or("a lock"),
        (ids.line)(e.waits_site),
        s.holds
            .map_or_else(|| "a lock".to_string(), |l| l.to_string()),
        (ids.line)(e.holds_site),
        match s.count {
            Some(n) if n > 1 => format!(", {n} times"),
            _ => String::new(),
        }
    )
}

/// Cycles through the same lines, the first as the example.
fn potential(cycles: &[&Cycle], ids: &Ids) -> Finding {
    let example = cycles[0];
    let steps: Vec<CycleStep> = example.edges.iter().map(|e| edge_step(e, ids)).collect();
    let order: Vec<String> = steps
        .iter()
        .filter_map(|s| s.holds.map(|l| l.to_string()))
        .collect();
    let first = &example.edges[0];
    let same_lines = example
        .edges
        .iter()
        .all(|e| (e.holds_site, e.waits_site) == (first.holds_site, first.waits_site));
    let edges: Vec<String> = if same_lines && example.edges.len() > 2 {
        // One line pair took every step: say it once.
        let mut tids: Vec<u32> = example.edges.iter().map(|e| e.tid).collect();
        tids.sort_unstable();
        tids.dedup();
        let who: Vec<String> = tids.iter().map(|&t| ids.thread(t)).collect();
        vec![format!(
            "each was taken at {} while holding the one before it (taken at {}), by {}",
            (ids.line)(first.waits_site),
            (ids.line)(first.holds_site),
            who.join(", ")
        )]
    } else {
        example
            .edges
            .iter()
            .zip(&steps)
            .map(|(e, s)| edge_words(e, s, ids))
            .collect()
    };
    let lock_cycles: Vec<Vec<LockId>> = cycles
        .iter()
        .map(|c| c.edges.iter().filter_map(|e| (ids.lock)(e.holds)).collect())
        .collect();
    let more = match cycles.len() {
        1 => String::new(),
        n => {
            let shown: Vec<String> = lock_cycles[1..]
                .iter()
                .take(4)
                .map(|c| {
                    c.iter()
                        .map(|l| l.to_string())
                        .collect::<Vec<_>>()
                        .join(" and ")
                })
                .collect();
            format!(
                " The same lines closed {} more cycle{} over other locks ({}{}).",
                n - 1,
                if n == 2 { "" } else { "s" },
                shown.join("; "),
                if n > 5 { "; …" } else { "" }
            )
        }
    };
    let message = format!(
        "potential deadlock: {} locks were taken in a cycle ({} then back to {}): {}. Threads doing these at the same time can deadlock; take the locks in one order everywhere.{more}",
        steps.len(),
        order.join(" then "),
        order.first().cloned().unwrap_or_default(),
        edges.join("; "),
    );
    let mut f = finding(FINDING_POTENTIAL_DEADLOCK, steps, message, 0);
    let mut locks: Vec<LockId> = lock_cycles.iter().flatten().copied().collect();
    locks.sort_unstable();
    locks.dedup();
    f.lock = locks.first().copied();
    f.locks = locks;
    f.cycles = lock_cycles;
    f.engagements = cycles
        .iter()
        .flat_map(|c| c.edges.iter().map(|e| e.count))
        .sum();
    f
}

/// Locks of one family taken two at a time at the same lines in both
/// address orders, with no cycle: what was seen, and when it would matter.
fn inversion(i: &Inversion, ids: &Ids) -> Finding {
    let steps = vec![edge_step(&i.up, ids), edge_step(&i.down, ids)];
    let words: Vec<String> = [&i.up, &i.down]
        .iter()
        .zip(&steps)
        .map(|(e, s)| edge_words(e, s, ids))
        .collect();
    let locks: Vec<LockId> = i.locks.iter().filter_map(|&l| (ids.lock)(l)).collect();
    let message = match i.through.and_then(|x| (ids.lock)(x)) {
        Some(x) => format!(
            "locks made at one line were taken both before {x} and after it ({} pair{} before, {} after, by {}): {}. No lock of them was taken both ways, so no cycle was seen. If one object's lock can be taken on both paths (an object reachable both ways), two threads doing so at once deadlock; taking {x} first everywhere, or never holding such a lock when taking {x}, rules it out.",
            i.pairs_up,
            if i.pairs_up == 1 { "" } else { "s" },
            i.pairs_down,
            crate::base::words::count(i.threads as u64, "thread", "threads"),
            words.join("; "),
        ),
        None => format!(
            "locks made at one line were taken two at a time at the same lines in both address orders ({} pair{} in ascending order, {} in descending, by {}): {}. No two threads took the same two locks in opposite orders, so no cycle was seen. If a call can take one pair in both orders (transfer(a, b) and transfer(b, a)), two threads doing so at once deadlock; if something else orders them (a tree walked from its root), this is safe. Taking each pair in address order rules it out.",
            i.pairs_up,
            if i.pairs_up == 1 { "" } else { "s" },
            i.pairs_down,
            crate::base::words::count(i.threads as u64, "thread", "threads"),
            words.join("; "),
        ),
    };
    let mut f = finding(FINDING_FAMILY_INVERSION, steps, message, 0);
    f.lock = locks.first().copied();
    f.locks = locks;
    f.engagements = i.up.count + i.down.count;
    f
}
