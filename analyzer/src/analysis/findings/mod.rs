//! Findings: what a person should look at, each with the evidence and one
//! sentence to act on. The limits are report-time settings (CLI options), so
//! one trace can be judged under any of them.
//!
//! The rules about single locks are applied to every lock; where one holds
//! for several locks of a family (see `families.rs`), they make one finding
//! that lists them, not one finding per lock: a grid of 300,000 cell locks
//! each taken by one thread is one thing to fix.

mod alone;
mod contended;
mod holds;
mod limits;
mod python;

use alone::{is_single_thread, only_in_libraries, single_thread, unnecessary_by_data};
pub use alone::{lines_where_sharing_was_chance, shared_in_run};
use contended::{high_contention, over_sync, starvation};
use holds::long_hold;
pub use holds::long_hold_message;
pub use limits::Limits;
pub use python::is_python_site;
use python::Py;

use crate::analysis::contention_result::{Contention, LongHold, Starved};
use crate::analysis::families::lock_list;
use crate::base::words::duration;
use crate::model::frames::first_own_frame;
use crate::model::*;
use locksuit_format::reader::ThreadInfo;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::HashMap;

pub const FINDING_LONG_HOLD: &str = "long-hold";
pub const FINDING_HIGH_CONTENTION: &str = "high-contention";
pub const FINDING_ASYMMETRIC: &str = "asymmetric-contention";
pub const FINDING_OVER_SYNC: &str = "over-synchronization";
pub const FINDING_STARVATION: &str = "starvation";

/// Minimum total waiting for `high-contention`.
const HIGH_CONTENTION_MIN_WAIT_NS: u64 = 1_000_000;
/// Contended share below which a lock "almost never contends".
const RARELY_CONTENDED: f64 = 0.001;
/// Acquisitions a lock needs before its contention share means anything.
const MIN_ACQUISITIONS: u64 = 100;
/// Lock ids a message names before "and N more" (JSON `locks` has them all).
const NAMED_IN_MESSAGE: usize = 5;

fn share(lock: &Lock) -> f64 {
    if lock.acquisitions == 0 {
        0.0
    } else {
        lock.contended as f64 / lock.acquisitions as f64
    }
}

fn kind_plural(kind: LockKind) -> &'static str {
    match kind {
        LockKind::Mutex => "mutexes",
        LockKind::Rwlock => "rwlocks",
        LockKind::Spin => "spinlocks",
        LockKind::Sem => "semaphores",
        LockKind::Barrier => "barriers",
        LockKind::Futex => "futex words",
        LockKind::Unknown => "locks",
    }
}

/// "L1, L2" or, past a few, "40 locks (L1, L2, L3, L4, L5 and 35 more)".
fn locks_phrase(locks: &[LockId]) -> String {
    if locks.len() <= NAMED_IN_MESSAGE {
        lock_list(locks, NAMED_IN_MESSAGE)
    } else {
        format!(
            "{} locks ({})",
            locks.len(),
            lock_list(locks, NAMED_IN_MESSAGE)
        )
    }
}

/// What the findings are drawn from.
struct Evidence<'a> {
    /// The threads' time waiting for a CPU (runnable, not running) and
    /// their time on one, summed, where the kernel said: waits behind
    /// others may be scheduling when the first is a large share of the
    /// second.
    cpu_queue: Option<(u64, u64)>,
    locks: &'a [Lock],
    families: &'a [Family],
    sites: &'a [Site],
    starved: &'a [Starved],
    /// See [`Contention::lean`].
    lean: bool,
    /// See [`Contention::attached`].
    attached: bool,
    /// Per lock, its longest measured hold that made a thread wait.
    long_holds: FxHashMap<LockId, LongHold>,
    limits: &'a Limits,
    duration_ns: Option<u64>,
}

impl<'a> Evidence<'a> {
    fn new(
        (locks, families, sites): (&'a [Lock], &'a [Family], &'a [Site]),
        contention: &'a Contention,
        limits: &'a Limits,
        duration_ns: Option<u64>,
    ) -> Self {
        Evidence {
            cpu_queue: None,
            locks,
            families,
            sites,
            starved: &contention.starved,
            lean: contention.lean,
            attached: contention.attached,
            long_holds: contention
                .longest_holds
                .iter()
                .map(|h| (h.lock, *h))
                .collect(),
            limits,
            duration_ns,
        }
    }

    fn lock(&self, id: LockId) -> &Lock {
        &self.locks[id.index()]
    }

    /// The first line that took `lock`: the one its findings name.
    fn first_site(&self, lock: &Lock) -> Option<&Site> {
        lock.sites.first().and_then(|s| self.sites.get(s.index()))
    }

    /// Where a lock is taken: its first line, and how many others.
    fn at(&self, lock: &Lock) -> String {
        let first = self
            .first_site(lock)
            .map_or_else(|| "an unknown line".to_string(), where_of);
        match lock.sites.len() {
            0 | 1 => first,
            2 => format!("{first} and one other line"),
            n => format!("{first} and {} other lines", n - 1),
        }
    }

    /// One finding about `group` (locks of one family, ascending), with the
    /// message for one lock or for several.
    fn finding(&self, kind: &'static str, group: Vec<LockId>, message: String) -> Finding {
        let first = self.lock(group[0]);
        let (engagements, wait_ns) = group.iter().fold((0u64, 0u64), |(e, w), &id| {
            let l = self.lock(id);
            (
                e.saturating_add(l.acquisitions),
                w.saturating_add(l.wait_ns),
            )
        });
        Finding {
            kind,
            lock: Some(first.id),
            sites: first.sites.to_vec(),
            message,
            engagements,
            wait_ns,
            locks: group,
            family: Some(first.family),
            family_size: self.families.get(first.family.index()).map(|f| f.size),
            ..Finding::default()
        }
    }

    /// Distinct threads that engaged the locks of `group`.
    fn threads(&self, group: &[LockId]) -> usize {
        let mut tids: Vec<u32> = group
            .iter()
            .flat_map(|&id| self.lock(id).engagements_by_thread.iter())
            .filter(|t| t.count > 0)
            .map(|t| t.tid)
            .collect();
        tids.sort_unstable();
        tids.dedup();
        tids.len()
    }

    /// The longest single hold measured that made a thread wait (a wait
    /// is no hold: under an unfair lock one wait spans many short holds).
    fn longest(&self, lock: &Lock) -> u64 {
        self.long_holds.get(&lock.id).map_or(0, |h| h.hold_ns)
    }

    /// "by thread 12 at f (a.c:3)": who held the longest hold, and where.
    fn holder(&self, lock: &Lock) -> String {
        let Some(h) = self.long_holds.get(&lock.id) else {
            return String::new();
        };
        let at = h
            .site
            .and_then(|s| self.sites.get(s.index()))
            .map_or_else(|| "an unknown line".to_string(), where_of);
        if lock.kind == LockKind::Futex {
            // Its taking made no call: the line seen is where it let go.
            return format!(" by thread {}, which let it go at {at}", h.tid);
        }
        format!(" by thread {} at {at}", h.tid)
    }

    fn per_sec(&self, lock: &Lock) -> Option<f64> {
        let ns = self.duration_ns.filter(|&ns| ns > 0)?;
        Some(lock.acquisitions as f64 * 1e9 / ns as f64)
    }

    /// A futex word nobody holds (a condition variable's, a parker's), or
    /// one whose library is unknown, has no holds to speak of: the thread
    /// that woke a waiter signalled it.
    fn is_long_hold(&self, lock: &Lock) -> bool {
        holds_known(lock) && self.longest(lock) >= self.limits.long_hold_ns
    }

    /// Waits worth acting on: at least 1 ms in all, and at least 1% of the
    /// run's wall-clock time (a lock that cost the run less is not worth
    /// splitting).
    fn waits_matter(&self, wait_ns: u64) -> bool {
        wait_ns >= HIGH_CONTENTION_MIN_WAIT_NS
            && self
                .duration_ns
                .is_none_or(|run| wait_ns.saturating_mul(100) >= run)
    }

    /// A futex word's acquisitions are its waits (the others are not
    /// seen): its waits alone decide.
    fn is_high_contention(&self, lock: &Lock) -> bool {
        if lock.kind == LockKind::Futex {
            return holds_known(lock)
                && lock.contended >= MIN_ACQUISITIONS
                && self.waits_matter(lock.wait_ns);
        }
        holds_known(lock)
            && lock.acquisitions >= MIN_ACQUISITIONS
            && share(lock) >= self.limits.contention_share
            && self.waits_matter(lock.wait_ns)
    }

    /// Taken very often, almost never contended, and its waits cost the
    /// run little (one long wait is no over-synchronization).
    fn is_over_sync(&self, lock: &Lock) -> bool {
        self.per_sec(lock).is_some_and(|rate| {
            !self.attached
                && lock.threads >= 2
                && !lock.signals()
                && share(lock) < RARELY_CONTENDED
                && rate >= self.limits.over_sync_per_sec
                && !self.waits_matter(lock.wait_ns)
        })
    }
}

/// Whether a thread held the lock while others waited for it.
fn holds_known(lock: &Lock) -> bool {
    lock.holds_known()
}

/// The locks `applies` holds for, grouped by family; each group ascending,
/// the groups in the order of their first lock.
fn by_family(locks: &[Lock], applies: impl Fn(&Lock) -> bool) -> Vec<Vec<LockId>> {
    let mut index: FxHashMap<FamilyId, usize> = FxHashMap::default();
    let mut groups: Vec<Vec<LockId>> = Vec::new();
    for lock in locks.iter().filter(|l| applies(l)) {
        let next = groups.len();
        let g = *index.entry(lock.family).or_insert(next);
        if g == next {
            groups.push(Vec::new());
        }
        groups[g].push(lock.id);
    }
    groups
}

/// The threads' runnable and running time, summed over those the kernel
/// gave both for.
fn cpu_queue(threads: &[ThreadInfo]) -> Option<(u64, u64)> {
    use locksuit_format::{THREAD_RUNNABLE_KNOWN, THREAD_USAGE};
    let known = threads.iter().filter(|t| {
        t.record.flags & THREAD_USAGE != 0 && t.record.flags & THREAD_RUNNABLE_KNOWN != 0
    });
    let (queued, ran) = known.fold((0u64, 0u64), |(q, r), t| {
        (
            q.saturating_add(t.record.runnable_ns),
            r.saturating_add(t.record.cpu_ns),
        )
    });
    (ran > 0).then_some((queued, ran))
}

fn contention_findings(findings: &mut Vec<Finding>, ev: &Evidence) {
    for group in by_family(ev.locks, |l| ev.is_long_hold(l)) {
        findings.push(long_hold(ev, group));
    }
    for group in by_family(ev.locks, |l| ev.is_high_contention(l)) {
        findings.push(high_contention(ev, group));
    }
    for group in by_family(ev.locks, |l| ev.is_over_sync(l)) {
        findings.push(over_sync(ev, group));
    }
    for s in ev.starved {
        if s.passed_over >= ev.limits.starvation && holds_known(ev.lock(s.lock)) {
            findings.push(starvation(ev, s));
        }
    }
    // asymmetric-contention: locks of one family engaged at one line with
    // very different contention: a hot stripe, a skewed hash. (Unrelated
    // locks a locking helper takes are not compared.)
    for site in ev.sites {
        let mut families: Vec<(FamilyId, Vec<&Lock>)> = Vec::new();
        for l in site
            .locks
            .iter()
            .filter_map(|id| ev.locks.get(id.index()))
            .filter(|l| {
                l.acquisitions >= MIN_ACQUISITIONS && l.kind != LockKind::Futex && !l.signals()
            })
        {
            match families.iter_mut().find(|(f, _)| *f == l.family) {
                Some((_, ls)) => ls.push(l),
                None => families.push((l.family, vec![l])),
            }
        }
        for (_, at_line) in families {
            asymmetric(findings, ev, site, &at_line);
        }
    }
}

/// `asymmetric-contention` among `at_line`, locks of one family taken at
/// `site`, if their contention differs by the limit.
fn asymmetric(findings: &mut Vec<Finding>, ev: &Evidence, site: &Site, at_line: &[&Lock]) {
    if at_line.len() < 2 {
        return;
    }
    let hot = at_line.iter().fold(
        at_line[0],
        |hi, &l| if share(l) > share(hi) { l } else { hi },
    );
    // Stripes are taken at the same lines; locks of one object made
    // together but taken at different lines (an executor's queue and its
    // shutdown lock, both taken inside one library call of the program's
    // line) are different things, not a hot stripe and a cold one.
    let stripes: Vec<&Lock> = at_line
        .iter()
        .copied()
        .filter(|l| l.sites == hot.sites)
        .collect();
    if stripes.len() < 2 {
        return;
    }
    let cold = stripes.iter().fold(
        stripes[0],
        |lo, &l| if share(l) < share(lo) { l } else { lo },
    );
    let hot_share = share(hot);
    if hot_share < ev.limits.contention_share / 2.0 || hot_share < ev.limits.asymmetry * share(cold)
    {
        return;
    }
    findings.push(Finding {
        kind: FINDING_ASYMMETRIC,
        lock: Some(hot.id),
        sites: vec![site.id],
        message: format!(
            "the {} locks of one family taken at {} contend unevenly: {} waited on {:.1}% of its acquisitions, {} on {:.1}%: rebalance what maps to which lock.",
            stripes.len(),
            where_of(site),
            hot.id,
            hot_share * 100.0,
            cold.id,
            share(cold) * 100.0
        ),
        engagements: hot.acquisitions,
        wait_ns: hot.wait_ns,
        locks: vec![hot.id],
        family: Some(hot.family),
        family_size: ev.families.get(hot.family.index()).map(|f| f.size),
        ..Finding::default()
    });
}

fn thread_label(t: &ThreadInfo) -> String {
    thread_words(t.record.tid, t.name.as_deref())
}

fn where_of(site: &Site) -> String {
    match (&site.function, &site.file, site.line) {
        (Some(f), Some(file), Some(line)) => format!("{f} ({file}:{line})"),
        (Some(f), _, _) => f.clone(),
        // No symbols (a stripped binary): name the module and offset.
        _ => site
            .call_chain
            .get(first_own_frame(&site.call_chain))
            .map_or_else(
                || "an unknown line".to_string(),
                |f| f.offset.clone().unwrap_or_else(|| f.address.clone()),
            ),
    }
}

/// Every finding for one process, ranked by wait time, then engagements.
pub fn build(
    threads: &[ThreadInfo],
    (locks, families, sites): (&[Lock], &[Family], &[Site]),
    contention: &Contention,
    (limits, data): (&Limits, Option<&crate::analysis::data::Facts>),
    duration_ns: Option<u64>,
) -> Vec<Finding> {
    let threshold = limits.threshold;
    let thread_by_tid: HashMap<u32, &ThreadInfo> =
        threads.iter().map(|t| (t.record.tid, t)).collect();
    let mut ev = Evidence::new((locks, families, sites), contention, limits, duration_ns);
    ev.cpu_queue = cpu_queue(threads);
    let mut findings = Vec::new();
    // Locks made at one line are one kind of lock: if threads share some
    // of them, the ones this run happened to use from one thread are no
    // evidence of anything; nor are any taken at a line where that was
    // seen happen (`shared_in_run`).
    let shared: FxHashSet<LockId> = locks
        .iter()
        .zip(shared_in_run(locks))
        .filter(|(_, shared)| *shared)
        .map(|(l, _)| l.id)
        .collect();
    // A lock used against its rules (misuse.rs) is broken, not unneeded;
    // one taken only inside a system library, or made by Python's library
    // as an import ran, is not the program's to drop.
    let misused: FxHashSet<LockId> = contention.misused.iter().copied().collect();
    // A futex word's acquisitions that did not wait are not seen: no
    // verdict that needs them all. Nor of an attached recording: it saw
    // a window of the run, and of most locks only their waits.
    let alone = |l: &Lock| {
        !contention.attached
            && l.kind != LockKind::Futex
            && is_single_thread(l)
            && !shared.contains(&l.id)
            && !misused.contains(&l.id)
            && !only_in_libraries(l, sites)
            && !l.made_by_library_import
    };
    for group in by_family(locks, alone) {
        // Locks taken a few times in all cost the run nothing worth a
        // finding (a family of many, each taken twice, may).
        let engaged = group.iter().fold(0u64, |n, &id| {
            let l = ev.lock(id);
            n.saturating_add(l.acquisitions.saturating_add(l.posts))
        });
        if engaged < limits.min_acquisitions {
            continue;
        }
        let by_data = data.and_then(|d| unnecessary_by_data(&ev, &thread_by_tid, &group, d));
        findings.push(by_data.unwrap_or_else(|| single_thread(&ev, &thread_by_tid, group)));
    }
    let alone: FxHashSet<LockId> = findings
        .iter()
        .flat_map(|f| f.locks.iter().copied())
        .collect();
    for site in sites {
        // A line judged by its data has its own finding (data.rs); one
        // engaged a few times costs nothing worth changing.
        if contention.attached
            || site.status != STATUS_UNSUITABLE
            || site.ratio >= threshold
            || site.engagements < limits.min_acquisitions.max(1)
            || site.basis == "data"
        {
            continue;
        }
        // A line that only takes locks one thread took is said once, there;
        // one whose locks were misused is broken, not over-locked.
        if site
            .locks
            .iter()
            .all(|l| alone.contains(l) || misused.contains(l))
        {
            continue;
        }
        // Threads are stuck waiting for one of its locks: it is shared.
        if site
            .locks
            .iter()
            .any(|l| locks.get(l.index()).is_some_and(|l| l.waiting_at_end > 0))
        {
            continue;
        }
        // A process-shared lock's sharing happens across traces; one
        // process's ratio says nothing about it.
        if site
            .locks
            .iter()
            .all(|l| locks.get(l.index()).is_some_and(|l| l.process_shared))
        {
            continue;
        }
        findings.push(Finding {
            kind: FINDING_UNSUITABLE,
            lock: None,
            sites: vec![site.id],
            // The ratio is the locks' (each taken mostly by one thread, over
            // all its lines), not how this line's own engagements spread.
            message: if site.task_switches == 0 {
                format!(
                    "{} took {} {} in this run and never made a thread wait, and the locks it takes were taken mostly by one thread each (sharing ratio {:.2}, below the threshold {:.2}): here the lock rarely guards anything another thread uses at the same time. If that sharing is rare by design (a lock per thread that another reads now and then), it costs only its uncontended acquisitions; otherwise {}.",
                    where_of(site),
                    locks_phrase(&site.locks),
                    crate::base::words::count(site.engagements, "time", "times"),
                    site.ratio,
                    threshold,
                    if is_python_site(site) {
                        "per-thread data (threading.local) avoids it"
                    } else {
                        "a finer-grained or thread-local design avoids it"
                    }
                )
            } else {
                // It made threads wait or waited: it does guard something
                // shared, just mostly used by one thread.
                format!(
                    "{} took {} {} in this run, {} of them switching threads, and the locks it takes were taken mostly by one thread each (sharing ratio {:.2}, below the threshold {:.2}): in this run the lock was paid for far more often than it was shared. How much a lock is shared depends on the workload (another input may spread its use over the threads); if it is this lopsided in general, splitting off what only one thread uses would save most of these acquisitions.",
                    where_of(site),
                    locks_phrase(&site.locks),
                    crate::base::words::count(site.engagements, "time", "times"),
                    site.task_switches,
                    site.ratio,
                    threshold
                )
            },
            engagements: site.engagements,
            wait_ns: site.wait_ns,
            locks: Vec::new(),
            family: None,
            family_size: None,
            ..Finding::default()
        });
    }
    contention_findings(&mut findings, &ev);
    findings.sort_by(|a, b| {
        b.wait_ns
            .cmp(&a.wait_ns)
            .then(b.engagements.cmp(&a.engagements))
            .then(a.kind.cmp(b.kind))
    });
    findings
}

#[cfg(test)]
mod tests;
