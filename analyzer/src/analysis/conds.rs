//! The report's condition variables: their names and what waited on them.

use crate::input::symbolize::Symbolizer;
use crate::model::*;
use locksuit_format::reader::Trace;

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A condition variable's (or any object's, of `size` bytes) name: its
/// place in a variable, as a lock's (`&q.cond`), else the line that made it.
pub fn object_name(
    symbolizer: &mut Symbolizer,
    (modules, exe): (&[locksuit_format::reader::ModuleInfo], &str),
    (address, size): (u64, u64),
    made_at: Option<&str>,
) -> String {
    match symbolizer.place(modules, exe, address, size) {
        Some(place) => place.name(),
        None => made_at.unwrap_or("cond").to_string(),
    }
}

pub fn build_conds(
    trace: &Trace,
    lock_of: &dyn Fn(u32) -> Option<LockId>,
    name_of: &mut dyn FnMut(Option<u32>, u64) -> String,
) -> Vec<Cond> {
    // Each condition variable's address and the line that made it: from
    // the last record with its id.
    let mut address: HashMap<u32, Option<u64>> =
        trace.conds.iter().map(|(_, c)| (c.cond_id, None)).collect();
    let mut made_at: HashMap<u32, u32> = HashMap::new();
    for r in &trace.locks {
        if let Some(a) = address.get_mut(&r.id) {
            *a = Some(r.address);
            if r.origin_site != 0 {
                made_at.insert(r.id, r.origin_site);
            }
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
                    reasons: Vec::new(),
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
    let mut unique = crate::model::names::Unique::default();
    by_cond
        .into_iter()
        .map(|(raw, (mut cond, mutexes, threads))| {
            let at = address.get(&raw).copied().flatten().unwrap_or(0);
            let name = name_of(made_at.get(&raw).copied(), at);
            // A second cond made at one line is `#2`.
            cond.id = unique.take(name);
            cond.threads = threads.len();
            cond.mutexes = mutexes.iter().filter_map(|&m| lock_of(m)).collect();
            cond
        })
        .collect()
}
