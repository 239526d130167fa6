//! From a decoded trace to the report model: per-lock and per-site totals,
//! sharing ratios, suitability verdicts and findings.
//!
//! Definitions (also in the README):
//! - sharing ratio of a lock = share of its engagements made by threads
//!   other than the thread that engaged it most;
//! - site ratio = engagement-weighted sharing ratio of the locks it engaged;
//! - a site's status is the seed's three line states (see [`site_status`]);
//! - findings: `single-thread-lock` for a lock only one thread engaged
//!   (`unnecessary-lock` with more evidence, see `evidence.rs`),
//!   `unsuitable-site` for an apparently-unsuitable site whose ratio is
//!   below the threshold. Both are ranked by wait time, then engagements.
//!
//! Past 600 lines: `analyze` is one pass whose stages share the trace's
//! tables (raw ids to report ids, line names, the symbolizer); until those
//! tables are one context object the stages read, its parts stay together
//! here. What needs none of them is apart: `sites.rs`, `conds.rs`,
//! `process_state.rs`, `sharing.rs`.

use crate::analysis::conds::{build_conds, object_name};
use crate::analysis::findings::Limits;
use crate::analysis::line_names::{
    caller_line, line_caller, line_name, made_by_helpers, MADE_BY_HELPER,
};
use crate::analysis::process_state::{
    confinement_warnings, live_thread_names, still_running, unrecorded_threads,
};
use crate::analysis::sites::{new_site, site_key, SiteKey};
use crate::input::stream::StreamFilter;
use crate::input::symbolize::Symbolizer;
use crate::model::*;
use locksuit_format::reader::Trace;
use locksuit_format::*;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeSet, HashMap};

/// How much of a trace [`analyze`] reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Depth {
    /// The records and every event: the report.
    Full,
    /// The records only (counters, threads, waits in progress, names): for
    /// a live view read again every second, whose cost must not grow with
    /// the events already recorded. What only the events tell (who blocked
    /// whom, exact wait distributions, blocking periods) is left empty.
    Records,
}

/// Builds the model of one process. The trace is consumed: its counter
/// and lock records are let go of as soon as they are turned into the model
/// (see `locks.rs`). `progress` is called now and then while the events are
/// read (the caller lets go of trace pages already read).
pub fn analyze(
    trace_path: &str,
    mut trace: Trace,
    (limits, depth): (&Limits, Depth),
    streams: &StreamFilter,
    symbolizer: &mut Symbolizer,
    progress: &mut dyn FnMut(),
) -> Process {
    let header = trace.header.clone();
    // Threads named where the shim could not see it: the kernel's names,
    // read now if the process is alive, or earlier by whoever stopped it.
    if !header.complete() {
        let live = if still_running(&header) {
            live_thread_names(header.pid)
        } else {
            Default::default()
        };
        // A thread still alive then has the kernel's name, the last one
        // given by any means (the one recorded may be older); one that
        // ended took its name then, and its tid may be another's now.
        for t in trace
            .threads
            .iter_mut()
            .filter(|t| t.record.flags & THREAD_ENDED == 0)
        {
            let tid = t.record.tid;
            if let Some(name) = live
                .get(&tid)
                .or_else(|| limits.thread_names.get(&(header.pid, tid)))
            {
                t.name = Some(name.clone());
            }
        }
    }

    // Sites: the shim records one per (return address, caller's return
    // address); a site of the report is a line of the program's own code, so
    // records whose first own frame is the same line are one site (the
    // callers of a shared wrapper are told apart, the callers of one line
    // are merged). The first record's chain is kept.
    let exe = header.exe.as_str();
    // (site index, engagements of the raw site whose chain it shows).
    let mut site_by_line: HashMap<SiteKey, (usize, u64)> = HashMap::new();
    let mut engaged_through: FxHashMap<u32, u64> = FxHashMap::default();
    // Raw sites inside an import run by Python's library (see frames.rs).
    let mut made_by_import: FxHashSet<u32> = FxHashSet::default();
    for (_, c) in &trace.counters {
        *engaged_through.entry(c.site_id).or_default() += c.engagements;
    }
    let mut site_index_of_raw: FxHashMap<u32, usize> = FxHashMap::default();
    let mut chains: Vec<Vec<Frame>> = Vec::new();
    let mut caller_of_raw: FxHashMap<u32, String> = FxHashMap::default();
    let mut caller_line_of_raw: FxHashMap<u32, String> = FxHashMap::default();
    let python = crate::input::python::PythonFrames::take(&mut trace);
    for s in &trace.sites {
        if s.frames.is_empty() {
            continue;
        }
        let native: Vec<Frame> = s
            .frames
            .iter()
            .flat_map(|&a| symbolizer.frames(&trace.modules, exe, a, s.module_epoch))
            .collect();
        let chain = python.chain(s.id, native);
        // Merged lines keep one chain; the caller of each recorded path
        // is kept apart, for messages about a helper's callers.
        if let Some(caller) = line_caller(&chain) {
            caller_of_raw.insert(s.id, caller);
        }
        if let Some(line) = caller_line(&chain) {
            caller_line_of_raw.insert(s.id, line);
        }
        if crate::model::frames::made_by_library_import(&chain) {
            made_by_import.insert(s.id);
        }
        let key = site_key(&chain);
        let engaged = engaged_through.get(&s.id).copied().unwrap_or(0);
        let index = match site_by_line.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => {
                // A merged line shows the chain most of its engagements
                // came through, not whichever reached it first (a library
                // line's first caller is often the interpreter's start-up).
                let (index, most) = e.into_mut();
                if engaged > *most {
                    *most = engaged;
                    chains[*index] = chain;
                }
                *index
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                chains.push(chain);
                e.insert((chains.len() - 1, engaged)).0
            }
        };
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
    // Locks made by a helper that several lines call (yarn's new_lock in
    // pigz) are not one kind of lock: each caller's are a family of their
    // own, named by the caller's line.
    let helper_made = made_by_helpers(&trace.locks, &site_index_of_raw, &caller_line_of_raw);
    let origin_of = |raw: u32| -> (u32, bool) {
        let chain = match helper_made.get(&raw) {
            Some(&caller) => MADE_BY_HELPER + caller,
            None => site_index_of_raw.get(&raw).map_or(u32::MAX, |&c| c as u32),
        };
        (chain, made_by_import.contains(&raw))
    };
    // The lock-order graph needs the counter records (who write-locks an
    // rwlock), which building the locks consumes.
    let lock_order =
        crate::analysis::lock_order::analyze(&trace, &|raw| site_index_of_raw.get(&raw).copied());
    if trace.header.flags & FLAG_LEAN != 0 {
        count_lean_task_switches(&mut trace);
    }
    let mut built = crate::analysis::locks::build(&mut trace, &mut site_of, &origin_of);
    if built.orphans > 0 {
        warnings.push(format!(
            "{} engagements refer to locks whose creation record is missing; left out",
            built.orphans
        ));
    }
    let raw_ids = std::mem::take(&mut built.raw_ids);
    let lock_of = |raw: u32| raw_ids.binary_search(&raw).ok().map(|i| LockId(i as u32));
    // Every line's name (engaged or not: lines that only made locks too).
    let line_names: Vec<String> = chains.iter().map(|c| line_name(c)).collect();
    // A lock's family's line: where it was made, or a helper's caller.
    let made_at = |origin: u32| -> Option<&String> {
        if origin >= MADE_BY_HELPER && origin != u32::MAX {
            helper_made.callers.get((origin - MADE_BY_HELPER) as usize)
        } else {
            line_names.get(origin as usize)
        }
    };
    let mut conds = build_conds(&trace, &lock_of, &mut |raw, address| {
        object_name(
            symbolizer,
            (&trace.modules, exe),
            (address, crate::model::names::COND_SIZE),
            raw.map(|r| {
                site_index_of_raw
                    .get(&r)
                    .map_or("unknown", |&c| &line_names[c])
            }),
        )
    });
    // Lock records are not needed past this point.
    trace.locks = Vec::new();

    // Only lines that engaged a lock are sites of this report (a line that
    // only signals a condition variable is not); they are numbered S1.. in
    // the order they were first recorded.
    let site_number = std::cell::RefCell::new(crate::analysis::locks::number_sites(&mut built));
    let mut sites: Vec<Site> = Vec::new();
    for (chain, totals) in built.sites.iter_mut().enumerate() {
        let Some(Some(id)) = site_number.borrow().get(chain).copied() else {
            continue;
        };
        let call_chain = std::mem::take(&mut chains[chain]);
        sites.push(new_site(
            id,
            (line_names[chain].clone(), call_chain),
            totals,
            limits.threshold,
        ));
    }
    let mut locks = built.locks;
    crate::analysis::futex::classify(&mut locks, &sites);
    crate::analysis::futex::unjudged_sites(&mut sites, &locks);
    warnings.extend(crate::analysis::futex::note(&locks));
    // Waits in progress as the trace ends: a thread waiting for a lock asked
    // for it (so it is not unnecessary), and may be part of a deadlock.
    let waits = crate::analysis::waits::pending(&trace);
    let pending_conds: Vec<(u32, u64)> = waits
        .iter()
        .filter(|w| w.kind == WAIT_COND)
        .map(|w| (w.object, w.since_ns))
        .collect();

    for w in waits.iter().filter(|w| w.kind == WAIT_LOCK) {
        if let Some(lock) = lock_of(w.object).and_then(|id| locks.get_mut(id.index())) {
            lock.waiting_at_end += 1;
            let known = lock
                .engagements_by_thread
                .iter()
                .any(|t| t.tid == w.tid && (t.asked || t.count > 0));
            if !known {
                lock.askers += 1;
            }
        }
    }
    // Stable names: a lock in a variable by the variable, any other by the
    // line that made it (see names.rs).
    // A futex word by the program's own object, not the library's fields
    // it lies in, and a thread's parker word as a parker (see futex.rs).
    let mut bases: Vec<(String, bool)> = Vec::with_capacity(locks.len());
    for lock in &mut locks {
        let size = lock.kind.size();
        match symbolizer.place(&trace.modules, exe, lock.address, size) {
            Some(place) if lock.kind == LockKind::Futex => {
                lock.in_variable = true;
                bases.push((place.object_name(), false));
                let path = place.name();
                crate::analysis::futex::placed(lock, path.trim_start_matches('&').to_string());
            }
            Some(place) => {
                lock.in_variable = true;
                bases.push((place.name(), false));
            }
            None => {
                let line = made_at(lock.origin_chain)
                    .or_else(|| {
                        let first = lock.sites.first()?;
                        sites.get(first.index()).map(|s| &s.name)
                    })
                    .cloned()
                    .unwrap_or_else(|| "lock".to_string());
                bases.push((crate::analysis::futex::line_name(lock, line), true));
            }
        }
    }
    let mut families = crate::analysis::families::build(&mut locks);

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
        site_number.borrow().get(*chain).copied().flatten()
    };
    // Who-blocks-whom by function names sites while the events fill them in.
    let functions: Vec<Option<String>> = sites.iter().map(|s| s.function.clone()).collect();
    let function_of = |site: SiteId| functions.get(site.index()).cloned().flatten();
    let mut periods = crate::analysis::periods::Collector::default();
    let mut reasons = crate::analysis::reasons::Collector::default();
    let mut misuse = crate::analysis::misuse::Collector::default();
    let mut contention = if depth == Depth::Records {
        crate::analysis::contention_result::Contention {
            events: trace.events.stored(),
            ..Default::default()
        }
    } else {
        crate::analysis::contention::analyze(
            &trace,
            &crate::analysis::contention::Names {
                lock: &lock_of,
                cond: &cond_of,
                site: &report_site,
                function: &function_of,
            },
            crate::analysis::contention::Targets {
                locks: &mut locks,
                families: &mut families,
                sites: &mut sites,
                conds: &mut conds,
            },
            (&mut periods, &mut reasons, &mut misuse),
            progress,
        )
    };
    contention.lean = trace.header.flags & FLAG_LEAN != 0;
    contention.attached = trace.header.attached();
    // A semaphore or futex word used to signal is held by nobody: its
    // posts and wakes ended waits, but blocked no one (see futex.rs and
    // `AtLine` in locks.rs).
    contention.blocking.retain(|b| {
        locks
            .get(b.lock.index())
            .is_none_or(|l| !l.signals() && l.futex_role() != Some(crate::model::FutexRole::Signal))
    });
    let misused = misuse.finish(&pending_conds);
    contention.misused = crate::analysis::misuse::locks(&misused, &lock_of);
    // A line that misused a lock but engaged none is a site too, so its
    // finding points at it.
    for raw in misused.iter().flat_map(|m| [m.site, m.other_site]) {
        let Some(&chain) = site_index_of_raw.get(&raw) else {
            continue;
        };
        if raw == 0 || report_site(raw).is_some() {
            continue;
        }
        let id = SiteId(sites.len() as u32);
        let mut number = site_number.borrow_mut();
        if number.len() <= chain {
            number.resize(chain + 1, None);
        }
        number[chain] = Some(id);
        let call_chain = std::mem::take(&mut chains[chain]);
        let mut none = crate::analysis::locks::SiteTotals::default();
        let mut site = new_site(id, (line_names[chain].clone(), call_chain), &mut none, 0.0);
        site.status = STATUS_NOT_ENGAGED;
        sites.push(site);
    }
    let mut names = crate::model::names::Builder::new();
    names.sites(sites.iter().map(|s| s.name.clone()));
    let family_names: Vec<String> = families
        .iter()
        .map(|f| {
            let first = &locks[f.first_lock.index()];
            match made_at(first.origin_chain) {
                Some(line) if !first.in_variable => line.clone(),
                _ => bases[f.first_lock.index()].0.clone(),
            }
        })
        .collect();
    names.locks(bases);
    names.families(family_names);
    let names = names.finish();
    let mut thread_reasons = crate::analysis::reasons::attribute(
        reasons,
        (&mut locks, &mut sites, &mut conds),
        (&lock_of, &cond_of, &report_site),
    );
    let event_name = |raw: u32| -> Option<String> {
        lock_of(raw).map(|l| l.to_string()).or_else(|| {
            cond_of(raw)
                .and_then(|i| conds.get(i))
                .map(|c| c.id.clone())
        })
    };
    let raw_names = match streams {
        StreamFilter::Names => crate::model::names::with(&names, || crate::model::RawNames {
            // The lock records are gone by now: their raw ids are kept.
            objects: raw_ids
                .iter()
                .copied()
                .chain(cond_ids.iter().copied())
                .filter_map(|raw| Some((raw, event_name(raw)?)))
                .collect(),
            sites: trace
                .sites
                .iter()
                .filter_map(|s| Some((s.id, report_site(s.id)?.to_string())))
                .collect(),
            threads: trace
                .threads
                .iter()
                .filter_map(|t| Some((t.record.tid, t.name.clone()?)))
                .collect(),
        }),
        _ => crate::model::RawNames::default(),
    };
    let streams = crate::model::names::with(&names, || {
        crate::input::stream::build(
            &trace,
            streams,
            &event_name,
            &|raw| report_site(raw).map(|s| s.to_string()),
            header.start_mono_ns,
        )
    });
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
    let running = !header.complete() && still_running(&header);
    // Where waits are measured to: the end of the trace, or now.
    let end_ns = if header.end_mono_ns > header.start_mono_ns {
        header.end_mono_ns
    } else if running {
        crate::base::time::monotonic_now_ns()
    } else {
        0
    };
    // Built with `locksuit cc`: each line judged by the data it touched.
    let data = crate::analysis::data::facts(&trace, &report_site, &mut |granule| {
        if let Some((name, offset, _)) = symbolizer.variable(&trace.modules, exe, granule.address) {
            return Some((format!("&{name}"), Some(offset)));
        }
        // A heap block: by the line that allocated it.
        if granule.alloc_pc == 0 {
            return None;
        }
        let frames = symbolizer.frames(&trace.modules, exe, granule.alloc_pc, granule.alloc_epoch);
        let at = frames.first()?;
        // Allocated inside a system library (C++'s operator new, strdup):
        // its line would name every such block alike; the address is
        // more telling.
        if at
            .module
            .as_deref()
            .is_some_and(crate::model::frames::is_system_module)
        {
            return None;
        }
        let name = match (&at.function, &at.file, at.line) {
            (Some(f), Some(file), Some(line)) => format!("blocks from {f}@{file}:{line}"),
            (Some(f), _, _) => format!("blocks from {f}"),
            _ => format!(
                "blocks from {}",
                at.offset.as_deref().unwrap_or(&at.address)
            ),
        };
        Some((name, None))
    });
    crate::analysis::data::apply(data.as_ref(), &mut sites, limits.threshold);
    let mut read_only_unjudged = Vec::new();
    let line_of = |raw: u32| {
        let Some(&chain) = site_index_of_raw.get(&raw) else {
            return "an unknown line".to_string();
        };
        match (&line_names[chain], caller_of_raw.get(&raw)) {
            (line, Some(caller)) => format!("{line} (called from {caller})"),
            (line, None) => line.clone(),
        }
    };
    let (findings, blocked, mut stops, snapshots) = crate::model::names::with(&names, || {
        let mut findings = crate::analysis::findings::build(
            &trace.threads,
            (&locks, &families, &sites),
            &contention,
            (limits, data.as_ref()),
            duration,
        );
        let thread_names: HashMap<u32, String> = trace
            .threads
            .iter()
            .filter_map(|t| Some((t.record.tid, t.name.clone()?)))
            .collect();
        let ids = crate::analysis::deadlocks::Ids {
            lock: &lock_of,
            cond: &|raw| {
                cond_of(raw)
                    .and_then(|i| conds.get(i))
                    .map(|c| c.id.clone())
            },
            site: &report_site,
            line: &line_of,
            thread_name: &|tid| thread_names.get(&tid).cloned(),
            futex_word: &|raw| {
                lock_of(raw)
                    .and_then(|l| locks.get(l.index()))
                    .is_some_and(|l| l.kind == LockKind::Futex)
            },
        };
        let blocked =
            crate::analysis::deadlocks::blocked(&waits, &ids, header.start_mono_ns, end_ns);
        let mut stuck = crate::analysis::waits::stuck(&trace);
        if running && unrecorded_threads(&trace, header.pid) {
            // A thread the trace does not know (it never called a hooked
            // function yet) may be running and wake the others.
            stuck.retain(|s| !matches!(s, crate::analysis::waits::Stuck::NoRunnableThread(_)));
        }
        findings.extend(crate::analysis::deadlocks::deadlock_findings(
            &stuck, &ids, end_ns,
        ));
        findings.extend(crate::analysis::deadlocks::potential_findings(
            &lock_order,
            &ids,
        ));
        findings.extend(crate::analysis::misuse::findings(&misused, &ids, &|id| {
            locks.get(id.index()).map(|l| l.kind)
        }));
        // Why threads stopped, and who slept holding a lock others wanted.
        let raw_sites: FxHashMap<u32, usize> = trace
            .sites
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id, i))
            .collect();
        let symbolizer = std::cell::RefCell::new(&mut *symbolizer);
        let chain = |raw: u32| -> Vec<Frame> {
            let Some(s) = raw_sites.get(&raw).map(|&i| &trace.sites[i]) else {
                return Vec::new();
            };
            let mut symbolizer = symbolizer.borrow_mut();
            let native = s
                .frames
                .iter()
                .flat_map(|&a| symbolizer.frames(&trace.modules, exe, a, s.module_epoch))
                .collect();
            python.chain(raw, native)
        };
        let lock_kind = |raw: u32| lock_of(raw).map(|l| locks[l.index()].kind);
        let mut stops = crate::analysis::stops::build(
            std::mem::take(&mut periods.periods),
            &crate::analysis::stops::Inputs {
                ids: &ids,
                threads: &trace.threads,
                start_ns: header.start_mono_ns,
                end_ns,
                lock_kind: &lock_kind,
                chain: &chain,
                signatures: &limits.signatures,
            },
        );
        findings.append(&mut stops.findings);
        // A holder off the CPU in calls it made holding the lock blocked:
        // say so, rather than suspect preemption.
        let blocked_under: Vec<LockId> = findings
            .iter()
            .filter(|f| f.kind == crate::analysis::stops::FINDING_BLOCKING_UNDER_LOCK)
            .flat_map(|f| f.locks.iter().copied())
            .collect();
        for f in findings.iter_mut().filter(|f| {
            f.kind == crate::analysis::findings::FINDING_LONG_HOLD
                && f.locks.iter().any(|l| blocked_under.contains(l))
        }) {
            if let Some(state) = &f.holder {
                let python = f
                    .sites
                    .first()
                    .and_then(|s| sites.get(s.index()))
                    .is_some_and(crate::analysis::findings::is_python_site);
                f.message = crate::analysis::findings::long_hold_message(
                    &f.observed,
                    state,
                    f.locks.len(),
                    (true, python, false),
                );
            }
        }
        if let Some(data) = &data {
            let (found, unjudged) = crate::analysis::data::findings(data, &sites, &locks);
            findings.extend(found);
            read_only_unjudged = unjudged;
        }
        let mut walker = crate::input::unwind::StackWalker::new(&trace.modules, exe);
        let mut unwound = |r: &SnapshotStackRecord, bytes: &[u8]| {
            use crate::input::unwind::StoppedAt;
            let at = if r.flags & SNAPSHOT_STACK_RUNNING != 0 {
                StoppedAt::Running
            } else {
                StoppedAt::InCall
            };
            let walked = walker.walk((r.pc, r.sp, r.bp), at, bytes, r.module_epoch);
            let mut symbolizer = symbolizer.borrow_mut();
            // Addresses are named as return addresses (by the byte before
            // them); so is the first after a system call, but a running
            // thread's is the instruction itself.
            let frames = walked.addresses.iter().enumerate().flat_map(|(i, &a)| {
                let a = if i == 0 && running { a + 1 } else { a };
                symbolizer.frames(&trace.modules, exe, a, r.module_epoch)
            });
            SnapshotStack {
                frames: frames.collect(),
                complete: walked.complete,
            }
        };
        let snapshots = crate::analysis::snapshots::build(
            &trace,
            &ids,
            &chain,
            &mut unwound,
            header.start_mono_ns,
        );
        // Deadlocks first (they stop the program), then as ranked.
        findings.sort_by_key(|f| match f.kind {
            crate::analysis::deadlocks::FINDING_DEADLOCK => 0,
            crate::analysis::deadlocks::FINDING_POTENTIAL_DEADLOCK => 1,
            _ => 2,
        });
        (findings, blocked, stops, snapshots)
    });
    // The critical path, and each finding's predicted gain: findings are
    // ranked by it (deadlocks still first), wait time breaking ties.
    periods.finish_rounds();
    let mut findings = findings;
    let critical_path = (depth != Depth::Records).then(|| {
        let built = crate::analysis::path_report::build(&crate::analysis::path_report::Inputs {
            threads: &trace.threads,
            stops: &stops.stops,
            classes: &stops.classes,
            rounds: &periods.rounds,
            joins: &periods.joins,
            handoffs: &periods.handoffs,
            end_ns,
            lock_of: &lock_of,
            line_of: &line_of,
            origin_ns: header.start_mono_ns,
            all_events: header.flags & FLAG_EVENTS_ALL != 0,
            calls_from_us: Some(header.block_min_us),
            attached: header.attached(),
        });
        // In their order so far (wait time): the first ranked only.
        let ranked = crate::analysis::path_report::GAINS_FOR;
        // A starved thread's waits are its own share of the lock's: making
        // the lock fair moves waits between threads, it does not remove
        // the lock's, so no gain is predicted for it.
        let starvation = crate::analysis::findings::FINDING_STARVATION;
        for f in findings
            .iter_mut()
            .filter(|f| f.wait_ns > 0 && f.kind != starvation)
            .take(ranked)
        {
            let locks: Vec<LockId> = if f.locks.is_empty() {
                f.lock.into_iter().collect()
            } else {
                f.locks.clone()
            };
            f.predicted_gain = built.gains(&locks);
        }
        // And each line's, for the lines that waited longest: every raw
        // site the report merged into the line.
        let mut raw_of_line: FxHashMap<SiteId, Vec<u32>> = FxHashMap::default();
        for &raw in site_index_of_raw.keys() {
            if let Some(site) = report_site(raw) {
                raw_of_line.entry(site).or_default().push(raw);
            }
        }
        let mut longest: Vec<&mut Site> = sites.iter_mut().filter(|s| s.wait_ns > 0).collect();
        longest.sort_by_key(|s| std::cmp::Reverse(s.wait_ns));
        for site in longest.into_iter().take(ranked) {
            if let Some(raws) = raw_of_line.get(&site.id) {
                site.predicted_gain = built.line_gains(raws);
            }
        }
        findings.sort_by_key(|f| {
            let bucket = match f.kind {
                crate::analysis::deadlocks::FINDING_DEADLOCK => 0,
                crate::analysis::deadlocks::FINDING_POTENTIAL_DEADLOCK => 1,
                _ => 2,
            };
            let gain = f.predicted_gain.map_or((0, 0), |g| g.rank());
            (bucket, std::cmp::Reverse(gain))
        });
        built.path
    });
    if lock_order.gated > 0 {
        warnings.push(format!(
            "{} lock-order cycles were left out: every edge of each was taken while holding one common lock, so they cannot deadlock",
            lock_order.gated
        ));
    }
    if lock_order.readers_pass > 0 {
        warnings.push(format!(
            "{} lock-order cycles were left out: each closes only if a read of an rwlock waits while another thread holds it for reading, which glibc's rwlocks allow unless made to prefer writers (PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP)",
            lock_order.readers_pass
        ));
    }
    if lock_order.truncated {
        warnings.push(format!(
            "the lock-order graph may have more cycles than are listed (at most 32 per group of locks, of at most {} locks each, within a bounded search)",
            crate::analysis::lock_order::MAX_CYCLE_LEN
        ));
    }

    let threads: Vec<Thread> = trace
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
            running_ns: stops.by_thread.get(&t.record.tid).map_or(0, |c| c.0),
            cpu_ns: (t.record.flags & THREAD_USAGE != 0).then_some(t.record.cpu_ns),
            runnable_ns: (t.record.flags & THREAD_RUNNABLE_KNOWN != 0)
                .then_some(t.record.runnable_ns),
            voluntary_switches: (t.record.flags & THREAD_SWITCHES_KNOWN != 0)
                .then_some(t.record.voluntary_switches),
            involuntary_switches: (t.record.flags & THREAD_SWITCHES_KNOWN != 0)
                .then_some(t.record.involuntary_switches),
            reasons: thread_reasons.remove(&t.record.tid).unwrap_or_default(),
            blocking_classes: stops
                .by_thread
                .get_mut(&t.record.tid)
                .map(|c| std::mem::take(&mut c.1))
                .unwrap_or_default(),
        })
        .collect();

    let complete = header.complete();
    let dropped_events = header.dropped_records.saturating_add(header.dropped_ops);
    if running {
        warnings.push(
            "the process is still running; the figures are as of now, and its trace will grow"
                .into(),
        );
    } else if !complete {
        warnings.push(
            "the process did not exit normally (crash or kill); the figures are as of its death"
                .into(),
        );
    }
    if header.switches_lost > 0 || header.flags & FLAG_SWITCHES_FULL != 0 {
        let lost = match header.switches_lost {
            0 => "some".to_string(),
            n => n.to_string(),
        };
        warnings.push(format!(
            "LOCKSUIT_SWITCHES: {lost} context-switch records were lost (a thread's ring filled between two reads: it switched often and seldom reached the shim's slow paths); preempted, memory and switched-out totals are lower bounds"
        ));
    }
    if let Some(policy) = crate::analysis::snapshots::policy(&trace) {
        warnings.push(crate::analysis::snapshots::policy_warning(&policy));
    }
    warnings.extend(confinement_warnings(&header));
    // What the shim said as it ran (on stderr too, unless LOCKSUIT_QUIET=1);
    // of an attached recording, what attach recorded with and what not.
    let said_by = if header.attached() {
        "attached"
    } else {
        "the shim said"
    };
    warnings.extend(header.shim_notes.iter().map(|n| format!("{said_by}: {n}")));
    if dropped_events > 0 {
        warnings.push(format!(
            "the shim could not record {dropped_events} events (trace size cap, disk space, or table limits); figures are lower bounds"
        ));
    }
    warnings.extend(symbolizer.take_warnings());
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
    let cpu_ns = (!threads.is_empty())
        .then(|| {
            threads
                .iter()
                .try_fold(0u64, |sum, t: &Thread| Some(sum.saturating_add(t.cpu_ns?)))
        })
        .flatten();
    let parallelism = match (cpu_ns, duration) {
        (Some(cpu), Some(wall)) if wall > 0 => Some(cpu as f64 / wall as f64),
        _ => None,
    };
    Process {
        trace: trace_path.to_string(),
        pid: header.pid,
        ppid: header.ppid,
        exe: header.exe.clone(),
        complete,
        ended_by: if header.attached() {
            "detached"
        } else if header.flags & FLAG_EXEC != 0 {
            "exec"
        } else if header.flags & FLAG_COMPLETE != 0 {
            "exit"
        } else if running {
            "running"
        } else {
            "died"
        },
        exit_code: header.exit_code,
        fork_child: header.flags & FLAG_FORK_CHILD != 0,
        start_unix_ns: header.start_unix_ns,
        start_mono_ns: header.start_mono_ns,
        duration_ns: duration,
        cpu_ns,
        parallelism,
        dropped_events,
        hold_sample_period: header.hold_sample_period,
        events_mode: if header.flags & FLAG_EVENTS_SWITCHED != 0 {
            "switched"
        } else if header.flags & FLAG_EVENTS_ALL != 0 {
            "all"
        } else {
            "contended"
        },
        recording: if header.attached() {
            "attached"
        } else if header.flags & FLAG_LEAN != 0 {
            "lean"
        } else {
            "full"
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
        suppressed: Vec::new(),
        blocking: contention.blocking,
        blocking_functions: contention.blocking_functions,
        block_min_us: header.block_min_us,
        block_detection: if header.flags & FLAG_CALLS_BY_SWITCHES != 0 {
            "switched-out"
        } else {
            "duration"
        },
        wait_tree: crate::model::stacks::wait_tree(&stops.stacks),
        blocking_stacks: std::mem::take(&mut stops.stacks),
        policy: crate::analysis::snapshots::policy(&trace),
        modules: crate::model::modules_from_trace(
            &trace.modules,
            &header.exe,
            &crate::input::symbolize::code_segment,
        ),
        data_level: data.as_ref().map(|d| DataLevel {
            accesses: d.accesses,
            dropped: d.dropped,
            complete: d.complete,
            sample_every: d.sample_every,
            sample_first: d.sample_first,
            read_only_unjudged,
        }),
        snapshots,
        critical_path,
        idle_while_waiting: crate::analysis::idle::build(&stops.timeline, header.cpus),
        timeline: std::mem::take(&mut stops.timeline),
        blocked,
        warnings,
        streams,
        raw_names,
        names,
    }
}

/// A lean trace's holders count no task switch at their release (they keep
/// no held entry): each release that found threads waiting is one, at the
/// line its event names, added to that thread's counter there. Releases
/// whose events were dropped are missing from it, as they are from the
/// waits.
fn count_lean_task_switches(trace: &mut Trace) {
    use std::collections::HashMap;
    let index_of_tid: HashMap<u32, usize> = trace
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| (t.record.tid, i))
        .collect();
    let mut switches: HashMap<(usize, u32, u32), u64> = HashMap::new();
    for e in trace.events.iter() {
        if e.hdr.aux & 0xff == EVENT_RELEASED && e.other > 0 {
            if let Some(&thread) = index_of_tid.get(&e.tid) {
                *switches.entry((thread, e.lock_id, e.site_id)).or_default() += 1;
            }
        }
    }
    if switches.is_empty() {
        return;
    }
    for (thread, c) in &mut trace.counters {
        if c.hdr.aux != MODE_EXCLUSIVE {
            continue;
        }
        if let Some(n) = switches.remove(&(*thread, c.lock_id, c.site_id)) {
            c.task_switches = c.task_switches.saturating_add(n);
        }
    }
}
