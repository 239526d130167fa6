//! From a decoded trace to the report model: per-lock and per-site totals,
//! sharing ratios, suitability verdicts and findings.
//!
//! Definitions (also in the README):
//! - sharing ratio of a lock = share of its engagements made by threads
//!   other than the thread that engaged it most;
//! - site ratio = engagement-weighted sharing ratio of the locks it engaged;
//! - a site is definitely-suitable once it had a task-switching engagement
//!   and its ratio is at or above the threshold, apparently-unsuitable otherwise;
//! - findings: `unnecessary-lock` for a lock only one thread engaged,
//!   `unsuitable-site` for an apparently-unsuitable site whose ratio is
//!   below the threshold. Both are ranked by wait time, then engagements.

use crate::findings::Limits;
use crate::model::*;
use crate::stream::StreamFilter;
use crate::symbolize::{first_own_frame, Symbolizer};
use locksuit_format::reader::Trace;
use locksuit_format::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Totals over counter records, for one lock or one site. Sums saturate: a
/// damaged trace can hold any value, and a report must still come out.
#[derive(Default, Clone, Copy)]
struct Totals {
    engagements: u64,
    contended: u64,
    task_switches: u64,
    cond_reacquires: u64,
    try_failures: u64,
    timeouts: u64,
    wait_ns: u64,
    hold_ns: u64,
    hold_samples: u64,
    owner_changes: u64,
}

impl Totals {
    fn mode_stats(&self) -> ModeStats {
        ModeStats {
            acquisitions: self.engagements,
            contended: self.contended,
            try_failures: self.try_failures,
            timeouts: self.timeouts,
            wait_ns: self.wait_ns,
            hold_ns: self.hold_ns,
            hold_samples: self.hold_samples,
        }
    }

    fn add(&mut self, c: &CounterRecord) {
        self.engagements = self.engagements.saturating_add(c.engagements);
        self.contended = self.contended.saturating_add(c.contended);
        self.task_switches = self.task_switches.saturating_add(c.task_switches);
        self.cond_reacquires = self.cond_reacquires.saturating_add(c.cond_reacquires);
        self.try_failures = self.try_failures.saturating_add(c.try_failures);
        self.timeouts = self.timeouts.saturating_add(c.timeouts);
        self.wait_ns = self.wait_ns.saturating_add(c.wait_ns);
        self.hold_ns = self.hold_ns.saturating_add(c.hold_ns);
        self.hold_samples = self.hold_samples.saturating_add(c.hold_samples);
        self.owner_changes = self.owner_changes.saturating_add(c.owner_changes);
    }
}

fn is_rwlock(rec: Option<&&LockRecord>) -> bool {
    rec.is_some_and(|r| r.kind == ObjectKind::Rwlock as u32)
}

/// What makes two recorded sites one site of the report: the first frame in
/// the program's own code — its line when known, else its code address.
#[derive(Hash, PartialEq, Eq)]
enum SiteKey {
    Line {
        function: Option<String>,
        path: String,
        line: u32,
    },
    Code {
        module: Option<String>,
        address: String,
    },
}

fn site_key(chain: &[Frame]) -> SiteKey {
    let Some(own) = chain.get(first_own_frame(chain)) else {
        return SiteKey::Code {
            module: None,
            address: String::new(),
        };
    };
    match (&own.path, own.line) {
        (Some(path), Some(line)) => SiteKey::Line {
            function: own.function.clone(),
            path: path.clone(),
            line,
        },
        _ => SiteKey::Code {
            module: own.module.clone(),
            address: own.offset.clone().unwrap_or_else(|| own.address.clone()),
        },
    }
}

/// Sharing ratio from per-thread engagement counts.
pub fn sharing_ratio(per_thread: impl IntoIterator<Item = u64>) -> f64 {
    let (mut total, mut top) = (0u64, 0u64);
    for n in per_thread {
        total = total.saturating_add(n);
        top = top.max(n);
    }
    if total == 0 {
        0.0
    } else {
        (total - top) as f64 / total as f64
    }
}

/// Verdict for a site.
pub fn site_status(task_switches: u64, ratio: f64, threshold: f64) -> &'static str {
    if task_switches > 0 && ratio >= threshold {
        STATUS_SUITABLE
    } else {
        STATUS_UNSUITABLE
    }
}

/// Builds the model of one process.
pub fn analyze(
    trace_path: &str,
    trace: &Trace,
    limits: &Limits,
    streams: &StreamFilter,
    symbolizer: &mut Symbolizer,
) -> Process {
    let header = &trace.header;

    // Sites: the shim records one per (return address, caller's return
    // address); a site of the report is a line of the program's own code, so
    // records whose first own frame is the same line are one site (the
    // callers of a shared wrapper are told apart, the callers of one line
    // are merged). The first record's chain is kept.
    let exe = header.exe.as_str();
    let mut site_by_line: HashMap<SiteKey, usize> = HashMap::new();
    let mut site_index_of_raw: HashMap<u32, usize> = HashMap::new();
    let mut chains: Vec<Vec<Frame>> = Vec::new();
    for s in &trace.sites {
        if s.frames.is_empty() {
            continue;
        }
        let chain: Vec<Frame> = s
            .frames
            .iter()
            .flat_map(|&a| symbolizer.frames(&trace.modules, exe, a, s.module_epoch))
            .collect();
        let key = site_key(&chain);
        let index = *site_by_line.entry(key).or_insert_with(|| {
            chains.push(chain);
            chains.len() - 1
        });
        site_index_of_raw.insert(s.id, index);
    }
    // Counters that name an unknown site (0, or a lost record) share one
    // "unknown" site so their engagements are not lost.
    let mut unknown_site = None;
    let mut site_of = |raw: u32, chains: &mut Vec<Vec<Frame>>| -> usize {
        if let Some(&i) = site_index_of_raw.get(&raw) {
            return i;
        }
        *unknown_site.get_or_insert_with(|| {
            chains.push(Vec::new());
            chains.len() - 1
        })
    };

    // Locks (not conds), numbered L1.. in creation order.
    let mut lock_ids: Vec<u32> = trace
        .locks
        .iter()
        .filter(|l| l.kind != ObjectKind::Cond as u32)
        .map(|l| l.id)
        .collect();
    lock_ids.sort_unstable();
    lock_ids.dedup();
    let lock_index: HashMap<u32, usize> = lock_ids
        .iter()
        .enumerate()
        .map(|(i, &id)| (id, i))
        .collect();
    let lock_record: HashMap<u32, &LockRecord> = trace.locks.iter().map(|l| (l.id, l)).collect();
    let destroyed: BTreeSet<u32> = trace.destroys.iter().map(|d| d.id).collect();

    let n_locks = lock_ids.len();
    let mut lock_totals = vec![Totals::default(); n_locks];
    // [shared, exclusive] for rwlocks; posts for semaphores.
    let mut lock_modes = vec![[Totals::default(); 2]; n_locks];
    let mut lock_posts = vec![0u64; n_locks];
    let mut lock_per_thread: Vec<BTreeMap<u32, u64>> = vec![BTreeMap::new(); n_locks];
    let mut lock_sites: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n_locks];
    // (site, lock) -> totals
    let mut site_lock: BTreeMap<(usize, usize), Totals> = BTreeMap::new();
    let mut thread_acquisitions: HashMap<usize, u64> = HashMap::new();
    let mut warnings = trace.warnings.clone();
    let mut orphans = 0u64;
    for (thread, c) in &trace.counters {
        let Some(&li) = lock_index.get(&c.lock_id) else {
            orphans = orphans.saturating_add(c.engagements);
            continue;
        };
        let si = site_of(c.site_id, &mut chains);
        let tid = trace.threads[*thread].record.tid;
        if c.hdr.aux == MODE_POST {
            lock_posts[li] = lock_posts[li].saturating_add(c.engagements);
        } else {
            lock_totals[li].add(c);
            lock_modes[li][usize::from(c.hdr.aux != MODE_SHARED)].add(c);
            // Posts engage a semaphore but are not acquisitions.
            let slot = thread_acquisitions.entry(*thread).or_default();
            *slot = slot.saturating_add(c.engagements);
        }
        let slot = lock_per_thread[li].entry(tid).or_default();
        *slot = slot.saturating_add(c.engagements);
        lock_sites[li].insert(si);
        site_lock.entry((si, li)).or_default().add(c);
    }
    if orphans > 0 {
        warnings.push(format!(
            "{orphans} engagements refer to locks whose creation record is missing; left out"
        ));
    }

    let ratios: Vec<f64> = lock_per_thread
        .iter()
        .map(|m| sharing_ratio(m.values().copied()))
        .collect();
    // Only lines that engaged a lock are sites of this report (a line that
    // only signals a condition variable is not); they are numbered S1.. in
    // the order they were first recorded.
    let engaged_sites: BTreeSet<usize> = site_lock.keys().map(|&(s, _)| s).collect();
    let site_number: HashMap<usize, usize> = engaged_sites
        .iter()
        .enumerate()
        .map(|(n, &s)| (s, n))
        .collect();
    let site_label = |i: usize| format!("S{}", site_number.get(&i).map_or(0, |n| n + 1));
    let lock_label = |i: usize| format!("L{}", i + 1);

    let mut locks: Vec<Lock> = (0..n_locks)
        .map(|i| {
            let raw = lock_ids[i];
            let rec = lock_record.get(&raw);
            let t = lock_totals[i];
            Lock {
                id: lock_label(i),
                kind: rec
                    .and_then(|r| ObjectKind::from_u8(r.kind as u8))
                    .map_or("unknown", |k| k.name()),
                address: rec.map_or_else(String::new, |r| format!("{:#x}", r.address)),
                origin: match rec.map(|r| r.origin) {
                    Some(ORIGIN_INIT) => "init",
                    Some(ORIGIN_OPEN) => "open",
                    _ => "first-use",
                },
                destroyed: destroyed.contains(&raw),
                process_shared: rec.is_some_and(|r| r.hdr.aux & ATTR_PROCESS_SHARED != 0),
                mutex_type: rec.and_then(|r| match r.mutex_type {
                    0 => Some("normal"),
                    1 => Some("recursive"),
                    2 => Some("errorcheck"),
                    3 => Some("adaptive"),
                    _ => None,
                }),
                robust: rec.is_some_and(|r| r.hdr.aux & ATTR_ROBUST != 0),
                acquisitions: t.engagements,
                contended: t.contended,
                try_failures: t.try_failures,
                timeouts: t.timeouts,
                cond_reacquires: t.cond_reacquires,
                task_switches: t.task_switches,
                owner_changes: t.owner_changes,
                threads: lock_per_thread[i].values().filter(|&&n| n > 0).count(),
                sharing_ratio: ratios[i],
                wait_ns: t.wait_ns,
                hold_ns: t.hold_ns,
                hold_samples: t.hold_samples,
                engagements_by_thread: lock_per_thread[i]
                    .iter()
                    .map(|(&tid, &count)| ThreadCount { tid, count })
                    .collect(),
                sites: lock_sites[i].iter().map(|&s| site_label(s)).collect(),
                read: is_rwlock(rec).then(|| lock_modes[i][0].mode_stats()),
                write: is_rwlock(rec).then(|| lock_modes[i][1].mode_stats()),
                posts: lock_posts[i],
                wait: None,
                hold: None,
                wait_compensated: None,
                hold_compensated: None,
            }
        })
        .collect();

    // Sites: totals, ratio, verdict, symbolized chain.
    let mut sites: Vec<Site> = Vec::with_capacity(engaged_sites.len());
    for &si in &engaged_sites {
        let call_chain = chains[si].clone();
        let mut totals = Totals::default();
        let mut weighted = 0.0;
        let mut site_locks = Vec::new();
        for (&(s, l), t) in site_lock.range((si, 0)..(si + 1, 0)) {
            debug_assert_eq!(s, si);
            totals.engagements = totals.engagements.saturating_add(t.engagements);
            totals.contended = totals.contended.saturating_add(t.contended);
            totals.task_switches = totals.task_switches.saturating_add(t.task_switches);
            totals.wait_ns = totals.wait_ns.saturating_add(t.wait_ns);
            totals.hold_ns = totals.hold_ns.saturating_add(t.hold_ns);
            weighted += t.engagements as f64 * ratios[l];
            site_locks.push(lock_label(l));
        }
        let ratio = if totals.engagements == 0 {
            0.0
        } else {
            weighted / totals.engagements as f64
        };
        let own = call_chain.get(first_own_frame(&call_chain));
        sites.push(Site {
            id: site_label(si),
            function: own.and_then(|f| f.function.clone()),
            file: own.and_then(|f| f.file.clone()),
            line: own.and_then(|f| f.line),
            path: own.and_then(|f| f.path.clone()),
            locks: site_locks,
            engagements: totals.engagements,
            contended: totals.contended,
            task_switches: totals.task_switches,
            wait_ns: totals.wait_ns,
            hold_ns: totals.hold_ns,
            wait: None,
            ratio,
            status: site_status(totals.task_switches, ratio, limits.threshold),
            call_chain,
        });
    }

    let mut conds = build_conds(trace, &lock_index, &lock_record, &lock_label);

    // The event stream: who blocked whom, and exact wait/hold distributions.
    let mut event_names: HashMap<u32, String> = lock_ids
        .iter()
        .enumerate()
        .map(|(i, &raw)| (raw, lock_label(i)))
        .collect();
    let cond_ids: BTreeSet<u32> = trace.conds.iter().map(|(_, c)| c.cond_id).collect();
    for (i, raw) in cond_ids.into_iter().enumerate() {
        event_names.insert(raw, format!("C{}", i + 1));
    }
    let report_site = |raw: u32| -> Option<String> {
        let chain = site_index_of_raw.get(&raw)?;
        site_number.get(chain).map(|n| format!("S{}", n + 1))
    };
    let function_of = |site: &str| -> Option<String> {
        sites
            .iter()
            .find(|s| s.id == site)
            .and_then(|s| s.function.clone())
    };
    let mut contention = crate::contention::analyze(
        trace,
        &crate::contention::Names {
            lock: &event_names,
            site: &report_site,
            function: &function_of,
        },
    );
    for lock in &mut locks {
        lock.wait = contention.lock_wait.get(&lock.id).cloned();
        lock.hold = contention.lock_hold.get(&lock.id).cloned();
        lock.wait_compensated = contention.lock_wait_compensated.get(&lock.id).cloned();
        lock.hold_compensated = contention.lock_hold_compensated.get(&lock.id).cloned();
    }
    for site in &mut sites {
        site.wait = contention.site_wait.get(&site.id).cloned();
    }
    for cond in &mut conds {
        if let Some(o) = contention.cond_outcomes.get(&cond.id) {
            cond.notified = o[OUTCOME_NOTIFIED as usize];
            cond.spurious = o[OUTCOME_SPURIOUS as usize];
            cond.cancelled = o[OUTCOME_CANCELLED as usize];
        }
        cond.notify_latency = contention.cond_latency.get(&cond.id).cloned();
        cond.notifiers = contention.notifiers.remove(&cond.id).unwrap_or_default();
    }
    let streams = crate::stream::build(
        trace,
        streams,
        &|raw| event_names.get(&raw).cloned(),
        &report_site,
        header.start_mono_ns,
    );
    if contention.damaged_blocks > 0 {
        warnings.push(format!(
            "event blocks with a damaged record: {}; the rest of each was skipped",
            contention.damaged_blocks
        ));
    }
    if contention.orphans > 0 {
        warnings.push(format!(
            "{} events refer to locks whose creation record is missing; left out",
            contention.orphans
        ));
    }
    let duration = (header.end_mono_ns > header.start_mono_ns)
        .then(|| header.end_mono_ns - header.start_mono_ns);
    let findings = crate::findings::build(
        trace,
        &locks,
        &sites,
        &lock_per_thread,
        &contention.blocking,
        limits,
        duration,
    );

    let threads = trace
        .threads
        .iter()
        .enumerate()
        .filter(|(_, t)| t.record.tid != 0)
        .map(|(i, t)| Thread {
            tid: t.record.tid,
            name: t.name.clone(),
            parent_tid: (t.record.parent_tid != 0).then_some(t.record.parent_tid),
            main: t.record.flags & THREAD_MAIN != 0,
            ended: t.record.flags & THREAD_ENDED != 0,
            acquisitions: thread_acquisitions.get(&i).copied().unwrap_or(0),
            joins: t.record.joins,
            join_wait_ns: t.record.join_wait_ns,
            shim_call_ns: (t.record.shim_call_ps != 0)
                .then(|| t.record.shim_call_ps as f64 / 1000.0),
            dropped_events: t.record.dropped,
        })
        .collect();

    let complete = header.complete();
    let dropped_events = header.dropped_records.saturating_add(header.dropped_ops);
    if !complete {
        warnings.push(
            "the process did not exit normally (crash or kill); the figures are as of its death"
                .into(),
        );
    }
    if dropped_events > 0 {
        warnings.push(format!(
            "the shim could not record {dropped_events} events (trace size cap, disk space, or table limits); figures are lower bounds"
        ));
    }
    warnings.extend(symbolizer.take_changed());
    if header.exe.ends_with(" (deleted)") {
        warnings.push(format!(
            "the program's file was deleted or replaced while it ran ({}); its own frames cannot be symbolized",
            header.exe
        ));
    }
    let events_overwritten = header.flags & FLAG_EVENTS_OVERWRITTEN != 0;
    if events_overwritten {
        warnings.push(
            "the trace filled and the oldest events were overwritten (LOCKSUIT_FLIGHT=1); wait, hold and who-blocks-whom figures cover only the most recent part of the run, counts cover all of it"
                .into(),
        );
    }
    Process {
        trace: trace_path.to_string(),
        pid: header.pid,
        ppid: header.ppid,
        exe: header.exe.clone(),
        complete,
        ended_by: if header.flags & FLAG_EXEC != 0 {
            "exec"
        } else if header.flags & FLAG_COMPLETE != 0 {
            "exit"
        } else {
            "died"
        },
        exit_code: header.exit_code,
        fork_child: header.flags & FLAG_FORK_CHILD != 0,
        duration_ns: duration,
        dropped_events,
        hold_sample_period: header.hold_sample_period,
        events_mode: if header.flags & FLAG_EVENTS_ALL != 0 {
            "all"
        } else {
            "contended"
        },
        events: contention.events,
        clock: if header.flags & FLAG_CLOCK_TSC != 0 {
            "tsc"
        } else {
            "monotonic"
        },
        tsc_khz: (header.flags & FLAG_CLOCK_TSC != 0).then_some(header.tsc_khz),
        events_overwritten,
        threads,
        locks,
        sites,
        conds,
        findings,
        blocking: contention.blocking,
        blocking_functions: contention.blocking_functions,
        warnings,
        streams,
    }
}

fn build_conds(
    trace: &Trace,
    lock_index: &HashMap<u32, usize>,
    lock_record: &HashMap<u32, &LockRecord>,
    lock_label: &dyn Fn(usize) -> String,
) -> Vec<Cond> {
    let mut by_cond: BTreeMap<u32, (Cond, BTreeSet<u32>, BTreeSet<usize>)> = BTreeMap::new();
    for (thread, c) in &trace.conds {
        let entry = by_cond.entry(c.cond_id).or_insert_with(|| {
            (
                Cond {
                    id: String::new(),
                    address: lock_record
                        .get(&c.cond_id)
                        .map_or_else(String::new, |r| format!("{:#x}", r.address)),
                    waits: 0,
                    timeouts: 0,
                    signals: 0,
                    broadcasts: 0,
                    notifies_with_waiters: 0,
                    wait_ns: 0,
                    threads: 0,
                    mutexes: Vec::new(),
                    notified: 0,
                    spurious: 0,
                    cancelled: 0,
                    notify_latency: None,
                    notifiers: Vec::new(),
                },
                BTreeSet::new(),
                BTreeSet::new(),
            )
        });
        let cond = &mut entry.0;
        cond.waits = cond.waits.saturating_add(c.waits);
        cond.timeouts = cond.timeouts.saturating_add(c.timeouts);
        cond.signals = cond.signals.saturating_add(c.signals);
        cond.broadcasts = cond.broadcasts.saturating_add(c.broadcasts);
        cond.notifies_with_waiters = cond
            .notifies_with_waiters
            .saturating_add(c.notifies_with_waiters);
        cond.wait_ns = cond.wait_ns.saturating_add(c.wait_ns);
        if c.mutex_id != 0 {
            entry.1.insert(c.mutex_id);
        }
        entry.2.insert(*thread);
    }
    by_cond
        .into_values()
        .enumerate()
        .map(|(i, (mut cond, mutexes, threads))| {
            cond.id = format!("C{}", i + 1);
            cond.threads = threads.len();
            cond.mutexes = mutexes
                .iter()
                .filter_map(|m| lock_index.get(m).map(|&li| lock_label(li)))
                .collect();
            cond
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharing_ratio_matches_the_definition() {
        assert_eq!(sharing_ratio([100]), 0.0);
        assert_eq!(sharing_ratio([25, 25, 25, 25]), 0.75);
        assert_eq!(sharing_ratio([90, 10]), 0.1);
        assert_eq!(sharing_ratio([]), 0.0);
    }

    #[test]
    fn status_needs_a_task_switch_and_the_threshold() {
        assert_eq!(site_status(0, 0.9, 0.3), STATUS_UNSUITABLE);
        assert_eq!(site_status(1, 0.2, 0.3), STATUS_UNSUITABLE);
        assert_eq!(site_status(1, 0.3, 0.3), STATUS_SUITABLE);
    }
}
