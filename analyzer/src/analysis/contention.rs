//! Contention from the event stream: who blocks whom, on which lock, at
//! which lines, for how long; wait and hold distributions; condition-variable
//! wake-ups.
//!
//! Events are matched per lock by the lock's release sequence, never by
//! emission order or by timestamps across threads: the release that left
//! sequence `k` handed the lock to the contended acquisition that saw `k`,
//! whichever thread's stream each was written to and whatever their clocks
//! said.
//!
//! One pass, in bounded memory: the events arrive merged across threads by
//! time ([`Events::for_each_merged`]), so a release and the acquisition it let in
//! arrive close together. Whichever comes first waits in a window of
//! `JOIN_WINDOW` entries (`join_window.rs`) for the other; everything else is aggregated as
//! it arrives, into per-object [`Samples`]. Memory grows with the number
//! of locks, sites and threads, not with the number of events.
//!
//! What it finds beyond the model is in `contention_result.rs`; the window
//! partners wait in, in `join_window.rs`.
//!
//! Past 600 lines: the matching, the hold and wait samples and the holder
//! samples share one per-lock state in one pass; split, each would need
//! that state's insides.

use crate::analysis::contention_result::{Contention, HolderRan, LongHold, Starved};
use crate::analysis::join_window::Window;
use crate::analysis::samples::{ById, Samples};
use crate::model::*;
use locksuit_format::reader::Trace;
use locksuit_format::*;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// Events between two calls of the progress hook (4 MiB of events).
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// Names for what the events refer to, from the rest of the analysis.
pub struct Names<'a> {
    /// Raw lock id → the lock.
    pub lock: &'a dyn Fn(u32) -> Option<LockId>,
    /// Raw condition variable id → its index in the report's conds.
    pub cond: &'a dyn Fn(u32) -> Option<usize>,
    /// Raw site id → report site.
    pub site: &'a dyn Fn(u32) -> Option<SiteId>,
    /// Report site → function name.
    pub function: &'a dyn Fn(SiteId) -> Option<String>,
}

/// The parts of the model the events fill in: the locks', families',
/// sites' and condition variables' distributions and outcomes.
pub struct Targets<'a> {
    pub locks: &'a mut [Lock],
    pub families: &'a mut [Family],
    pub sites: &'a mut [Site],
    pub conds: &'a mut [Cond],
}

/// A waiter's sample of the holder's CPU time, as recorded (see
/// `EVENT_HOLDER`).
#[derive(Clone, Copy)]
struct Sample {
    ran_ns: u64,
    /// The wait: it began at `start` and got the lock at `end`.
    start: u64,
    end: u64,
    holder: u32,
    /// The wait sat through one hold only (one release): the one sampled.
    one_hold: bool,
}

impl Sample {
    /// What the sample says of the hold `tid` released at `released`.
    fn of_hold(&self, tid: u32, released: u64) -> Option<HolderRan> {
        if !self.one_hold || self.holder != tid || released <= self.start {
            return None;
        }
        let of_ns = released - self.start;
        let after = self.end.saturating_sub(released);
        Some(HolderRan {
            ran_ns: self.ran_ns.saturating_sub(after).min(of_ns),
            ran_max_ns: self.ran_ns.min(of_ns),
            of_ns,
        })
    }
}

/// (hold, tid, raw site, only a lower bound, the release sequence after
/// it, when it was released)
type HoldAt = (u64, u32, u32, bool, u32, u64);
/// (releases passed over, wait, tid, raw site, timed out)
type StarvedAt = (u32, u64, u32, u32, bool);

#[derive(Clone, Copy)]
struct Blocked {
    tid: u32,
    lock: u32,
    site: u32,
    owner: u32,
    wait: u64,
    /// Releases while it waited (1: it waited for one hold only).
    passed: u32,
    /// The release sequence it got the lock at.
    seq: u32,
}

/// A release that may have let a waiter in.
#[derive(Clone, Copy)]
struct Release {
    tid: u32,
    site: u32,
    /// The shim's time inside the hold.
    shim_ns: u64,
    /// The hold was timed.
    timed: bool,
    at: u64,
    /// Waiters it found, each of which it may have let in (a write release
    /// lets every waiting reader in; a futex wake wakes as many as it
    /// says): it settles that many waits that ended at its sequence.
    waiters: u32,
}

/// The aggregates, by raw ids until the end.
#[derive(Default)]
struct Pass {
    waits: ById<Samples>,
    waits_compensated: ById<Samples>,
    holds: ById<Samples>,
    holds_compensated: ById<Samples>,
    site_waits: ById<Samples>,
    /// (raw lock, blocker, blocked) → (count, wait)
    rows: FxHashMap<(u32, u32, u32), (u64, u64)>,
    /// (blocker's raw site, blocked's raw site) → (count, wait)
    site_pairs: FxHashMap<(u32, u32), (u64, u64)>,
    releases: Window<(u32, u32), Release>,
    waiting: Window<(u32, u32), Vec<Blocked>>,
    /// (cond, sequence after the notify) → (time, tid)
    notifies: Window<(u32, u32), (u64, u32)>,
    cond_outcomes: ById<[u64; 7]>,
    cond_latency: ById<Samples>,
    notify_pairs: FxHashMap<(u32, u32, u32), u64>,
    longest_hold: FxHashMap<u32, HoldAt>,
    /// (raw lock, release sequence) → how long the holder of the hold that
    /// ended there ran during a wait for it (sampled by the waiter).
    holder_ran: FxHashMap<(u32, u32), Sample>,
    /// Per raw lock: holds not timed that a thread waited for, for each
    /// alone, and those waits (each hold lasted at least its wait).
    hold_bounds: FxHashMap<u32, (u64, u64)>,
    /// Each ended thread's CPU time at its end, by tid (from its record).
    cpu_at_end: FxHashMap<u32, u64>,
    starved: FxHashMap<u32, StarvedAt>,
    /// [EOWNERDEAD, ENOTRECOVERABLE] results per lock.
    outcomes: FxHashMap<u32, [u64; 2]>,
}

impl Pass {
    fn event(&mut self, e: &EventRecord) {
        match e.hdr.aux & 0xff {
            kind @ (EVENT_BLOCKED | EVENT_TIMED_OUT) => {
                let wait = e.time2.saturating_sub(e.time);
                self.waits.entry(e.lock_id).push(wait);
                self.site_waits.entry(e.site_id).push(wait);
                // Releases while it waited: each let another thread in.
                let passed = e.seq2.wrapping_sub(e.seq);
                if passed < u32::MAX / 2 {
                    let timed_out = kind == EVENT_TIMED_OUT;
                    let worst = self.starved.entry(e.lock_id).or_default();
                    if passed > worst.0 {
                        *worst = (passed, wait, e.tid, e.site_id, timed_out);
                    }
                }
                if kind == EVENT_BLOCKED {
                    let b = Blocked {
                        tid: e.tid,
                        lock: e.lock_id,
                        site: e.site_id,
                        owner: e.other,
                        wait,
                        passed,
                        seq: e.seq2,
                    };
                    let key = (e.lock_id, e.seq2);
                    match self.releases.take(&key) {
                        Some(release) => {
                            if release.waiters > 1 {
                                let rest = Release {
                                    waiters: release.waiters - 1,
                                    ..release
                                };
                                let _ = self.releases.insert(key, rest);
                            }
                            self.settle(&b, Some(release))
                        }
                        None => {
                            let mut list = self.waiting.take(&key).unwrap_or_default();
                            list.push(b);
                            if let Some(evicted) = self.waiting.insert(key, list) {
                                self.settle_all(evicted, None);
                            }
                        }
                    }
                }
            }
            EVENT_RELEASED => {
                if e.time2 != 0 {
                    let hold = e.time.saturating_sub(e.time2);
                    self.holds.entry(e.lock_id).push(hold);
                    // A hold that made a thread wait: threads were waiting
                    // at its release.
                    if e.other > 0 {
                        let how = (false, e.seq2, e.time);
                        self.long_hold(e.lock_id, (hold, e.tid, e.site_id), how);
                    }
                    // `deadline` carries the shim's time inside the hold.
                    self.holds_compensated
                        .entry(e.lock_id)
                        .push(hold.saturating_sub(e.deadline));
                }
                // A release that found no waiter let none in (full tracing
                // writes every release; only these can be matched).
                if e.other > 0 {
                    let key = (e.lock_id, e.seq2);
                    let release = Release {
                        tid: e.tid,
                        site: e.site_id,
                        shim_ns: e.deadline,
                        timed: e.time2 != 0,
                        at: e.time,
                        waiters: e.other,
                    };
                    match self.waiting.take(&key) {
                        Some(list) => self.settle_all(list, Some(release)),
                        None => {
                            // A newer release of the same sequence replaces it
                            // (shared holders); the displaced one has no waiter.
                            let _ = self.releases.insert(key, release);
                        }
                    }
                }
            }
            EVENT_COND_WAIT => self.cond_wait(e),
            EVENT_HOLDER => {
                let ran_ns = if e.hdr.aux & HOLDER_ENDED != 0 {
                    // The holder's CPU time at its end, less that at the start.
                    match self.cpu_at_end.get(&e.other) {
                        Some(&end) => end.saturating_sub(e.deadline),
                        None => return,
                    }
                } else {
                    e.deadline
                };
                let sample = Sample {
                    ran_ns,
                    start: e.time,
                    end: e.time2,
                    holder: e.other,
                    one_hold: e.seq2.wrapping_sub(e.seq) == 1,
                };
                self.holder_ran.insert((e.lock_id, e.seq2), sample);
            }
            EVENT_NOTIFY => {
                let _ = self.notifies.insert((e.lock_id, e.seq2), (e.time, e.tid));
            }
            EVENT_OUTCOME => {
                let counts = self.outcomes.entry(e.lock_id).or_default();
                match e.other as i32 {
                    libc::EOWNERDEAD => counts[0] += 1,
                    libc::ENOTRECOVERABLE => counts[1] += 1,
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// A hold of `lock` that made a thread wait: measured, or (`at_least`)
    /// bounded below by a wait that ended at the first release after it
    /// began, which waited for that one hold only.
    fn long_hold(
        &mut self,
        lock: u32,
        (hold, tid, site): (u64, u32, u32),
        (at_least, seq, released): (bool, u32, u64),
    ) {
        let longest = self.longest_hold.entry(lock).or_default();
        if hold > longest.0 {
            *longest = (hold, tid, site, at_least, seq, released);
        }
    }

    fn settle_all(&mut self, list: Vec<Blocked>, release: Option<Release>) {
        for b in &list {
            self.settle(b, release);
        }
    }

    /// Who blocked whom: the owner seen on asking, else the thread whose
    /// release (by sequence) handed the lock over.
    fn settle(&mut self, b: &Blocked, release: Option<Release>) {
        // The wait lasted as long as the hold that caused it; the shim's
        // own time inside that hold came out of the wait too.
        let shim = release.map_or(0, |r| r.shim_ns);
        self.waits_compensated
            .entry(b.lock)
            .push(b.wait.saturating_sub(shim));
        let blocker = match (b.owner, release) {
            (0, Some(r)) => r.tid,
            (owner, _) => owner,
        };
        if let Some(r) = release.filter(|_| b.passed == 1) {
            self.long_hold(b.lock, (b.wait, r.tid, r.site), (true, b.seq, r.at));
            // An untimed hold a thread waited for, for it alone, lasted at
            // least that wait.
            if !r.timed {
                let bound = self.hold_bounds.entry(b.lock).or_default();
                bound.0 += 1;
                bound.1 = bound.1.saturating_add(b.wait);
            }
        }
        if blocker == 0 || blocker == b.tid {
            return; // unknown, or a semaphore the thread itself will post
        }
        let row = self.rows.entry((b.lock, blocker, b.tid)).or_default();
        row.0 += 1;
        row.1 = row.1.saturating_add(b.wait);
        if let Some(r) = release.filter(|r| r.tid == blocker) {
            let pair = self.site_pairs.entry((r.site, b.site)).or_default();
            pair.0 += 1;
            pair.1 = pair.1.saturating_add(b.wait);
        }
    }

    /// Condition variables: outcomes, and the latency from the notify a
    /// waiter woke to (the newest one before it returned) to its return.
    fn cond_wait(&mut self, e: &EventRecord) {
        let outcome = ((e.hdr.aux >> 8) & 0xff) as usize;
        self.cond_outcomes.entry(e.lock_id)[outcome.min(6)] += 1;
        if outcome as u32 != OUTCOME_NOTIFIED {
            return;
        }
        let woke_by = (e.seq.wrapping_add(1)..=e.seq2)
            .rev()
            .take(4096)
            .filter_map(|s| self.notifies.get(&(e.lock_id, s)))
            .find(|&&(time, _)| time <= e.time2)
            .copied();
        if let Some((time, notifier)) = woke_by {
            self.cond_latency
                .entry(e.lock_id)
                .push(e.time2.saturating_sub(time));
            *self
                .notify_pairs
                .entry((e.lock_id, notifier, e.tid))
                .or_default() += 1;
        }
    }
}

/// Reads every event once (merged across threads by time) and fills the
/// targets. `progress` is called every [`PROGRESS_EVERY`] events (the
/// caller lets go of trace pages already read).
pub fn analyze(
    trace: &Trace,
    names: &Names,
    targets: Targets,
    (periods, reasons, misuse): (
        &mut crate::analysis::periods::Collector,
        &mut crate::analysis::reasons::Collector,
        &mut crate::analysis::misuse::Collector,
    ),
    progress: &mut dyn FnMut(),
) -> Contention {
    let mut pass = Pass {
        cpu_at_end: trace
            .threads
            .iter()
            .filter(|t| t.record.flags & THREAD_USAGE != 0)
            .map(|t| (t.record.tid, t.record.cpu_ns))
            .collect(),
        ..Pass::default()
    };
    let mut count = 0u64;
    let damaged_blocks = trace.events.for_each_merged(|e| {
        count += 1;
        if count.is_multiple_of(PROGRESS_EVERY) {
            progress();
        }
        pass.event(e);
        periods.event(e);
        reasons.event(e);
        misuse.event(e);
    });
    let mut out = Contention {
        events: count,
        damaged_blocks,
        ..Contention::default()
    };
    // Acquisitions whose release never came (lost, or outside the trace).
    let unmatched: Vec<Vec<Blocked>> = pass.waiting.drain().collect();
    for list in unmatched {
        pass.settle_all(list, None);
    }
    finish(pass, names, targets, &mut out);
    out
}

/// Which of a lock's four distributions.
#[derive(Clone, Copy)]
enum Slot {
    Wait,
    Hold,
    WaitCompensated,
    HoldCompensated,
}

fn lock_slot(lock: &mut Lock, slot: Slot) -> &mut Durations {
    match slot {
        Slot::Wait => &mut lock.wait,
        Slot::Hold => &mut lock.hold,
        Slot::WaitCompensated => &mut lock.wait_compensated,
        Slot::HoldCompensated => &mut lock.hold_compensated,
    }
}

fn family_slot(family: &mut Family, slot: Slot) -> &mut Option<DurationStats> {
    match slot {
        Slot::Wait => &mut family.wait,
        Slot::Hold => &mut family.hold,
        Slot::WaitCompensated => &mut family.wait_compensated,
        Slot::HoldCompensated => &mut family.hold_compensated,
    }
}

/// Each lock's samples into its distribution, and pooled into its
/// family's when the family has more than one lock (a family of one has
/// its lock's).
fn durations(map: ById<Samples>, slot: Slot, names: &Names, targets: &mut Targets) {
    let mut pooled: FxHashMap<u32, Samples> = FxHashMap::default();
    for (raw, mut samples) in map.into_entries() {
        let Some(id) = (names.lock)(raw) else {
            continue;
        };
        let Some(lock) = targets.locks.get_mut(id.index()) else {
            continue;
        };
        let family = lock.family;
        let stats = samples.stats();
        match targets.families.get_mut(family.index()) {
            Some(f) if f.size > 1 => pooled.entry(family.0).or_default().merge(&samples),
            Some(f) => *family_slot(f, slot) = stats.clone(),
            None => {}
        }
        *lock_slot(lock, slot) = stats.map(Box::new);
    }
    for (family, mut samples) in pooled {
        if let Some(f) = targets.families.get_mut(family as usize) {
            *family_slot(f, slot) = samples.stats();
        }
    }
}

/// Names the aggregates, fills the targets and sorts the rows.
fn finish(pass: Pass, names: &Names, mut targets: Targets, out: &mut Contention) {
    let mut rows: BTreeMap<(LockId, u32, u32), (u64, u64)> = BTreeMap::new();
    for ((lock, blocker, blocked), (count, wait)) in pass.rows {
        match (names.lock)(lock) {
            Some(id) => {
                let row = rows.entry((id, blocker, blocked)).or_default();
                row.0 += count;
                row.1 = row.1.saturating_add(wait);
            }
            None => out.orphans += count,
        }
    }
    out.blocking = rows
        .into_iter()
        .map(
            |((lock, blocker_tid, blocked_tid), (count, wait_ns))| Blocking {
                lock,
                blocker_tid,
                blocked_tid,
                count,
                wait_ns,
            },
        )
        .collect();
    out.blocking
        .sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(b.count.cmp(&a.count)));

    let function_of = |raw: u32| (names.site)(raw).and_then(names.function);
    let mut by_function: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for ((blocker_site, blocked_site), (count, wait)) in pass.site_pairs {
        if let (Some(blocker), Some(blocked)) =
            (function_of(blocker_site), function_of(blocked_site))
        {
            let f = by_function.entry((blocker, blocked)).or_default();
            f.0 += count;
            f.1 = f.1.saturating_add(wait);
        }
    }
    out.blocking_functions = by_function
        .into_iter()
        .map(
            |((blocker_function, blocked_function), (count, wait_ns))| FunctionBlocking {
                blocker_function,
                blocked_function,
                count,
                wait_ns,
            },
        )
        .collect();
    out.blocking_functions
        .sort_by_key(|f| std::cmp::Reverse(f.wait_ns));

    for (raw, (hold_ns, tid, site, at_least, seq, released)) in pass.longest_hold {
        if let Some(lock) = (names.lock)(raw) {
            out.longest_holds.push(LongHold {
                lock,
                hold_ns,
                tid,
                site: (names.site)(site),
                at_least,
                holder_ran: pass
                    .holder_ran
                    .get(&(raw, seq))
                    .and_then(|s| s.of_hold(tid, released)),
            });
        }
    }
    out.longest_holds.sort_by_key(|h| h.lock);
    for (raw, (passed_over, wait_ns, tid, site, timed_out)) in pass.starved {
        if let Some(lock) = (names.lock)(raw) {
            out.starved.push(Starved {
                lock,
                passed_over,
                wait_ns,
                tid,
                site: (names.site)(site),
                timed_out,
            });
        }
    }
    out.starved.sort_by_key(|s| s.lock);
    for (raw, (count, ns)) in pass.hold_bounds {
        if let Some(id) = (names.lock)(raw) {
            if let Some(lock) = targets.locks.get_mut(id.index()) {
                let add = |w: &mut WaitedHolds| {
                    w.count = w.count.saturating_add(count);
                    w.wait_ns = w.wait_ns.saturating_add(ns);
                };
                add(lock
                    .rare_mut()
                    .waited_holds
                    .get_or_insert_with(Default::default));
                if let Some(f) = targets.families.get_mut(lock.family.index()) {
                    add(f.waited_holds.get_or_insert_with(Default::default));
                }
            }
        }
    }
    for (raw, [owner_died, not_recoverable]) in pass.outcomes {
        if let Some(lock) = (names.lock)(raw).and_then(|id| targets.locks.get_mut(id.index())) {
            lock.rare_mut().outcomes = Some(Outcomes {
                owner_died,
                not_recoverable,
            });
        }
    }

    // One map at a time, each dropped before the next is turned into
    // distributions.
    durations(pass.waits, Slot::Wait, names, &mut targets);
    durations(pass.holds, Slot::Hold, names, &mut targets);
    durations(
        pass.waits_compensated,
        Slot::WaitCompensated,
        names,
        &mut targets,
    );
    durations(
        pass.holds_compensated,
        Slot::HoldCompensated,
        names,
        &mut targets,
    );

    // Several recorded sites may be one line of the report: pool them first.
    let mut by_line: BTreeMap<SiteId, Samples> = BTreeMap::new();
    for (site, samples) in pass.site_waits.into_entries() {
        if let Some(id) = (names.site)(site) {
            by_line.entry(id).or_default().merge(&samples);
        }
    }
    for (id, mut samples) in by_line {
        if let Some(site) = targets.sites.get_mut(id.index()) {
            site.wait = samples.stats();
        }
    }
    for (raw, mut samples) in pass.cond_latency.into_entries() {
        if let Some(cond) = (names.cond)(raw).and_then(|i| targets.conds.get_mut(i)) {
            cond.notify_latency = samples.stats();
        }
    }
    for (raw, outcomes) in pass.cond_outcomes.into_entries() {
        if let Some(cond) = (names.cond)(raw).and_then(|i| targets.conds.get_mut(i)) {
            cond.notified = outcomes[OUTCOME_NOTIFIED as usize];
            cond.spurious = outcomes[OUTCOME_SPURIOUS as usize];
            cond.cancelled = outcomes[OUTCOME_CANCELLED as usize];
        }
    }
    let mut pairs: Vec<((u32, u32, u32), u64)> = pass.notify_pairs.into_iter().collect();
    pairs.sort_unstable();
    for ((raw, notifier_tid, waiter_tid), count) in pairs {
        if let Some(cond) = (names.cond)(raw).and_then(|i| targets.conds.get_mut(i)) {
            cond.notifiers.push(NotifyPair {
                notifier_tid,
                waiter_tid,
                count,
            });
        }
    }
}

#[cfg(test)]
#[path = "contention_tests.rs"]
pub(crate) mod tests;
