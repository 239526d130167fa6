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
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet, HashMap};

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

/// Builds the model of one process. The trace is consumed: its counter
/// and lock records are let go of as soon as they are turned into the model
/// (see `locks.rs`). `progress` is called now and then while the events are
/// read (the caller lets go of trace pages already read).
pub fn analyze(
    trace_path: &str,
    mut trace: Trace,
    limits: &Limits,
    streams: &StreamFilter,
    symbolizer: &mut Symbolizer,
    progress: &mut dyn FnMut(),
) -> Process {
    let header = trace.header.clone();

    // Sites: the shim records one per (return address, caller's return
    // address); a site of the report is a line of the program's own code, so
    // records whose first own frame is the same line are one site (the
    // callers of a shared wrapper are told apart, the callers of one line
    // are merged). The first record's chain is kept.
    let exe = header.exe.as_str();
    let mut site_by_line: HashMap<SiteKey, usize> = HashMap::new();
    let mut site_index_of_raw: FxHashMap<u32, usize> = FxHashMap::default();
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
    let mut warnings = std::mem::take(&mut trace.warnings);

    // Locks, numbered L1.. in creation order; counters that name an unknown
    // site (0, or a lost record) share one "unknown" site so their
    // engagements are not lost.
    let mut unknown_site = None;
    let mut site_of = |raw: u32| -> usize {
        if let Some(&i) = site_index_of_raw.get(&raw) {
            return i;
        }
        *unknown_site.get_or_insert_with(|| {
            chains.push(Vec::new());
            chains.len() - 1
        })
    };
    let mut built = crate::locks::build(&mut trace, &mut site_of);
    if built.orphans > 0 {
        warnings.push(format!(
            "{} engagements refer to locks whose creation record is missing; left out",
            built.orphans
        ));
    }
    let raw_ids = std::mem::take(&mut built.raw_ids);
    let lock_of = |raw: u32| raw_ids.binary_search(&raw).ok().map(|i| LockId(i as u32));
    let mut conds = build_conds(&trace, &lock_of);
    // Lock records are not needed past this point.
    trace.locks = Vec::new();

    // Only lines that engaged a lock are sites of this report (a line that
    // only signals a condition variable is not); they are numbered S1.. in
    // the order they were first recorded.
    let site_number = crate::locks::number_sites(&mut built);
    let mut sites: Vec<Site> = Vec::new();
    for (chain, totals) in built.sites.iter_mut().enumerate() {
        let Some(Some(id)) = site_number.get(chain) else {
            continue;
        };
        let call_chain = std::mem::take(&mut chains[chain]);
        let t = totals.totals;
        let ratio = if t.engagements == 0 {
            0.0
        } else {
            totals.weighted / t.engagements as f64
        };
        let own = call_chain.get(first_own_frame(&call_chain));
        sites.push(Site {
            id: *id,
            function: own.and_then(|f| f.function.clone()),
            file: own.and_then(|f| f.file.clone()),
            line: own.and_then(|f| f.line),
            path: own.and_then(|f| f.path.clone()),
            locks: std::mem::take(&mut totals.locks),
            engagements: t.engagements,
            contended: t.contended,
            task_switches: t.task_switches,
            wait_ns: t.wait_ns,
            hold_ns: t.hold_ns,
            wait: None,
            ratio,
            status: site_status(t.task_switches, ratio, limits.threshold),
            call_chain,
        });
    }
    let mut locks = built.locks;
    let mut families = crate::families::build(&mut locks);

    // The event stream: who blocked whom, and exact wait/hold distributions.
    let cond_ids: Vec<u32> = trace
        .conds
        .iter()
        .map(|(_, c)| c.cond_id)
        .collect::<BTreeSet<u32>>()
        .into_iter()
        .collect();
    let cond_of = |raw: u32| cond_ids.binary_search(&raw).ok();
    let report_site = |raw: u32| -> Option<SiteId> {
        let chain = site_index_of_raw.get(&raw)?;
        site_number.get(*chain).copied().flatten()
    };
    // Who-blocks-whom by function names sites while the events fill them in.
    let functions: Vec<Option<String>> = sites.iter().map(|s| s.function.clone()).collect();
    let function_of = |site: SiteId| functions.get(site.index()).cloned().flatten();
    let contention = crate::contention::analyze(
        &trace,
        &crate::contention::Names {
            lock: &lock_of,
            cond: &cond_of,
            site: &report_site,
            function: &function_of,
        },
        crate::contention::Targets {
            locks: &mut locks,
            families: &mut families,
            sites: &mut sites,
            conds: &mut conds,
        },
        progress,
    );
    let event_name = |raw: u32| -> Option<String> {
        lock_of(raw)
            .map(|l| l.to_string())
            .or_else(|| cond_of(raw).map(|i| format!("C{}", i + 1)))
    };
    let streams = crate::stream::build(
        &trace,
        streams,
        &event_name,
        &|raw| report_site(raw).map(|s| s.to_string()),
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
        &trace.threads,
        &locks,
        &families,
        &sites,
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
            acquisitions: built.thread_acquisitions.get(i).copied().unwrap_or(0),
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
        start_unix_ns: header.start_unix_ns,
        start_mono_ns: header.start_mono_ns,
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
        families,
        sites,
        conds,
        findings,
        blocking: contention.blocking,
        blocking_functions: contention.blocking_functions,
        warnings,
        streams,
    }
}

fn build_conds(trace: &Trace, lock_of: &dyn Fn(u32) -> Option<LockId>) -> Vec<Cond> {
    // Each condition variable's address: from the last record with its id.
    let mut address: HashMap<u32, Option<u64>> =
        trace.conds.iter().map(|(_, c)| (c.cond_id, None)).collect();
    for r in &trace.locks {
        if let Some(a) = address.get_mut(&r.id) {
            *a = Some(r.address);
        }
    }
    let mut by_cond: BTreeMap<u32, (Cond, BTreeSet<u32>, BTreeSet<usize>)> = BTreeMap::new();
    for (thread, c) in &trace.conds {
        let entry = by_cond.entry(c.cond_id).or_insert_with(|| {
            (
                Cond {
                    id: String::new(),
                    address: address
                        .get(&c.cond_id)
                        .copied()
                        .flatten()
                        .map_or_else(String::new, |a| format!("{a:#x}")),
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
            cond.mutexes = mutexes.iter().filter_map(|&m| lock_of(m)).collect();
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
