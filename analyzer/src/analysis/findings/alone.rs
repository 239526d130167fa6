//! Locks one thread alone took: `single-thread-lock` from this run, and
//! `unnecessary-lock` from the data its critical sections touched (the
//! verdict from several runs is `evidence.rs`'s).

use super::*;

/// Every thread that asked for a lock (engaged it, waited or timed out,
/// failed a trylock, or still waits) needed it: one thread alone took a
/// lock only if exactly one ever asked. A process-shared lock's other users
/// are in other processes' traces.
pub(super) fn is_single_thread(lock: &Lock) -> bool {
    lock.acquisitions.saturating_add(lock.posts) > 0
        && lock.askers == 1
        && lock.threads == 1
        && lock.waiting_at_end == 0
        && !lock.process_shared
}

/// Per lock of one process, whether this run gives no evidence that one
/// thread alone needs it: several threads asked for it, or for another
/// lock made at its line (a hash table's buckets), or it was taken at a
/// line that took locks of one family some threads shared and some not.
/// Such a line hands out objects whose sharing is chance (coreutils sort's
/// merge-tree nodes, popped from one queue by every thread: under load
/// each leaf's mutex was one thread's in every run). A lock-taking helper
/// called with each caller's own locks (pigz's `possess`) stays evidence
/// while each family it takes is all shared or all one thread's there; if
/// one of them is mixed, all its lone locks are silenced: fewer findings,
/// none wrong.
pub fn shared_in_run(locks: &[Lock]) -> Vec<bool> {
    let taken = |l: &Lock| l.acquisitions.saturating_add(l.posts) > 0;
    let shared = |l: &Lock| l.askers > 1 || l.process_shared;
    let families: FxHashSet<FamilyId> = locks
        .iter()
        .filter(|l| shared(l))
        .map(|l| l.family)
        .collect();
    let sites = lines_where_sharing_was_chance(
        locks
            .iter()
            .filter(|l| taken(l))
            .flat_map(|l| l.sites.iter().map(move |&site| (site, l.family, shared(l)))),
    );
    locks
        .iter()
        .map(|l| {
            shared(l) || families.contains(&l.family) || l.sites.iter().any(|s| sites.contains(s))
        })
        .collect()
}

/// The lines where locks of one family were taken both shared and by one
/// thread alone, from each (line, family, shared) engagement: the rule of
/// [`shared_in_run`], for this run's model and for saved runs alike.
pub fn lines_where_sharing_was_chance<L: Ord + Copy, F: Ord + Copy>(
    taken: impl IntoIterator<Item = (L, F, bool)>,
) -> std::collections::BTreeSet<L> {
    let mut at_line: std::collections::BTreeMap<(L, F), (bool, bool)> = Default::default();
    for (line, family, shared) in taken {
        let seen = at_line.entry((line, family)).or_default();
        if shared {
            seen.0 = true;
        } else {
            seen.1 = true;
        }
    }
    at_line
        .into_iter()
        .filter(|(_, (shared, alone))| *shared && *alone)
        .map(|((line, _), _)| line)
        .collect()
}

/// Installed libraries' directories: code there is not the program's own
/// (an application's libraries live elsewhere, or are the executable).
const LIBRARY_DIRS: [&str; 4] = ["/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"];

/// Whether every line that took `lock` is inside an installed library
/// (libgnutls's own locks, say): advice to drop it is not the program's.
pub(super) fn only_in_libraries(lock: &Lock, sites: &[Site]) -> bool {
    !lock.sites.is_empty()
        && lock.sites.iter().all(|s| {
            sites.get(s.index()).is_some_and(|site| {
                let own = site.call_chain.get(first_own_frame(&site.call_chain));
                // Python's own library: no line of the program on the way.
                own.and_then(|f| f.path.as_deref())
                    .is_some_and(crate::model::frames::is_python_library)
                    || own
                        .and_then(|f| f.module.as_deref())
                        .is_some_and(|m| LIBRARY_DIRS.iter().any(|d| m.starts_with(d)))
            })
        })
}

/// The one thread that took `lock`, by name.
fn only_thread(lock: &Lock, threads: &HashMap<u32, &ThreadInfo>) -> String {
    let tid = lock
        .engagements_by_thread
        .iter()
        .find(|t| t.count > 0)
        .map_or(0, |t| t.tid);
    threads
        .get(&tid)
        .map_or_else(|| format!("thread {tid}"), |t| thread_label(t))
}

/// What one thread alone taking `group` (locks of one family) looks like,
/// in words: "mutex L3 at 0x… was taken 10,000 times, all by thread 12, at
/// f (a.c:3)", or the same for several.
fn taken_alone(ev: &Evidence, threads: &HashMap<u32, &ThreadInfo>, group: &[LockId]) -> String {
    let first = ev.lock(group[0]);
    let acquisitions: u64 = group
        .iter()
        .fold(0u64, |a, &id| a.saturating_add(ev.lock(id).acquisitions));
    let rate = match ev.duration_ns.filter(|&ns| ns > 0) {
        Some(ns) => format!(", {:.0} a second", acquisitions as f64 * 1e9 / ns as f64),
        None => String::new(),
    };
    if group.len() == 1 {
        format!(
            "{} {} at {:#x} was taken {} by {} alone{rate}, at {}",
            first.kind,
            first.id,
            first.address,
            crate::base::words::count(first.acquisitions, "time", "times"),
            only_thread(first, threads),
            ev.at(first)
        )
    } else {
        format!(
            "{} {} of one family, {}, taken at {}, were each taken by one thread only ({} acquisitions in all{rate}, by {})",
            group.len(),
            kind_plural(first.kind),
            lock_list(group, NAMED_IN_MESSAGE),
            ev.at(first),
            acquisitions,
            crate::base::words::count(ev.threads(group) as u64, "thread", "threads")
        )
    }
}

/// `single-thread-lock`: what one run saw, worded as an observation.
pub(super) fn single_thread(
    ev: &Evidence,
    threads: &HashMap<u32, &ThreadInfo>,
    group: Vec<LockId>,
) -> Finding {
    let (it, can) = if group.len() == 1 {
        (
            "it",
            "it can go, or the data it guards can be made thread-local",
        )
    } else {
        (
            "them",
            "they can go, or the data they guard can be made thread-local",
        )
    };
    let py = Py::at(ev.first_site(ev.lock(group[0])));
    let can = py.map_or_else(|| can.to_string(), |py| py.single_thread(group.len() > 1));
    let observed = taken_alone(ev, threads, &group);
    let message = format!(
        "{observed} in this run. If no other code path shares {it} (another run, input or setting may), {can}. One run's thread count is an observation, not proof: report several runs of the program together (or --against-history), or build it with `locksuit cc`, for a verdict."
    );
    let mut finding = ev.finding(FINDING_SINGLE_THREAD, group, message);
    finding.observed = observed;
    finding.evidence = Some(crate::model::Evidence {
        basis: "run",
        runs: 1,
    });
    finding
}

/// `unnecessary-lock` from the data its critical sections touched: every
/// access under it, in every engagement (not sampled), was to data no other
/// thread touched. `None` unless that holds for every line that took it.
pub(super) fn unnecessary_by_data(
    ev: &Evidence,
    threads: &HashMap<u32, &ThreadInfo>,
    group: &[LockId],
    data: &crate::analysis::data::Facts,
) -> Option<Finding> {
    if data.sampled() || !data.complete {
        return None;
    }
    let mut touched: Vec<&str> = Vec::new();
    for &id in group {
        for site in &ev.lock(id).sites {
            let facts = data.sites.get(site)?;
            if facts.suitable > 0 || facts.unsuitable == 0 {
                return None;
            }
            touched.extend(facts.data.keys().map(String::as_str));
        }
    }
    touched.sort_unstable();
    touched.dedup();
    let shown = touched
        .iter()
        .take(4)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    let more = match touched.len() {
        0..=4 => String::new(),
        n => format!(" and {} more", n - 4),
    };
    let message = format!(
        "{}, and everything its critical sections touched ({shown}{more}) was touched by that thread alone, in every engagement (built with `locksuit cc`, every engagement recorded): in this run it protected nothing shared. Code not built with `locksuit cc` (libraries called under it) was not seen, and another run, input or setting may share the data: if neither does, remove it or make that data thread-local.",
        taken_alone(ev, threads, group)
    );
    let mut finding = ev.finding(FINDING_UNNECESSARY, group.to_vec(), message);
    finding.evidence = Some(crate::model::Evidence {
        basis: "data",
        runs: 1,
    });
    Some(finding)
}
