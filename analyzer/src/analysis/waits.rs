//! Waits in progress and real deadlocks, read from the thread records of a
//! trace (a running, hung or killed process publishes in each thread's
//! record what it is blocked on and which locks it holds meanwhile).
//!
//! A deadlock here is a fact, not a risk: threads that wait for each other
//! in a cycle (through locks they hold, or joins), a thread waiting for a
//! lock it holds itself, a thread waiting for a lock whose holder has
//! exited, or every thread blocked with nobody left to wake them.

use locksuit_format::reader::Trace;
use locksuit_format::*;
use std::collections::{BTreeMap, BTreeSet};

/// One thread's wait in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wait {
    pub tid: u32,
    pub thread_name: Option<String>,
    /// `WAIT_*`.
    pub kind: u32,
    /// The object waited for (lock, semaphore, condition, barrier id; 0 for a join).
    pub object: u32,
    /// The raw site of the waiting call (0 if unknown).
    pub site: u32,
    /// For a lock: who held it when the wait began; for a condition wait:
    /// its mutex's id.
    pub holder: u32,
    pub since_ns: u64,
    /// For a join: the thread waited for (its tid, if known).
    pub joins: Option<u32>,
    /// Locks held meanwhile, innermost first, with the sites that took them.
    pub holds: Vec<(u32, u32)>,
    /// A timed wait's deadline (0 = untimed): it ends by itself.
    pub deadline: u64,
}

impl Wait {
    /// The site that took `lock`, if this thread holds it.
    pub fn site_holding(&self, lock: u32) -> Option<u32> {
        self.holds.iter().find(|(l, _)| *l == lock).map(|(_, s)| *s)
    }
}

/// Why threads can never run again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stuck {
    /// Each waits for the next (the last for the first): through a lock
    /// the next one holds, or a join of it.
    Cycle(Vec<Wait>),
    /// Waits for a non-recursive mutex it holds itself.
    SelfDeadlock(Wait),
    /// Waits for a lock whose holder has exited without releasing it.
    Abandoned { wait: Wait, holder: u32 },
    /// Every thread of the process is blocked (condition waits, joins,
    /// semaphores, barriers or locks) and none can wake another.
    NoRunnableThread(Vec<Wait>),
}

/// The waits in progress of the threads still alive in the trace.
pub fn pending(trace: &Trace) -> Vec<Wait> {
    let by_pthread: BTreeMap<u64, u32> = trace
        .threads
        .iter()
        .filter(|t| t.record.flags & THREAD_ENDED == 0)
        .map(|t| (t.record.pthread, t.record.tid))
        .collect();
    trace
        .threads
        .iter()
        .filter(|t| t.record.flags & THREAD_ENDED == 0 && t.record.wait_kind != 0)
        .map(|t| {
            let r = &t.record;
            Wait {
                tid: r.tid,
                thread_name: t.name.clone(),
                kind: r.wait_kind,
                object: r.wait_object,
                site: r.wait_site,
                holder: r.wait_holder,
                since_ns: r.wait_since_ns,
                joins: (r.wait_kind == WAIT_JOIN)
                    .then(|| by_pthread.get(&r.wait_target).copied())
                    .flatten(),
                holds: r
                    .wait_held
                    .iter()
                    .zip(r.wait_held_sites)
                    .filter(|(l, _)| **l != 0)
                    .map(|(l, s)| (*l, s))
                    .collect(),
                deadline: r.wait_deadline,
            }
        })
        .collect()
}

/// The threads that can never run again, from the waits in progress. A
/// timed wait ends by itself: it is no part of a deadlock (and a thread in
/// one is not stuck).
/// The threads the trace records as not ended.
pub fn live_threads(trace: &Trace) -> BTreeSet<u32> {
    trace
        .threads
        .iter()
        .filter(|t| t.record.flags & THREAD_ENDED == 0)
        .map(|t| t.record.tid)
        .collect()
}

pub fn stuck(trace: &Trace) -> Vec<Stuck> {
    let all = pending(trace);
    let timed = all.iter().any(|w| w.deadline != 0);
    let waits: Vec<Wait> = all.into_iter().filter(|w| w.deadline == 0).collect();
    let alive = live_threads(trace);
    let ended: BTreeSet<u32> = trace
        .threads
        .iter()
        .filter(|t| t.record.flags & THREAD_ENDED != 0)
        .map(|t| t.record.tid)
        .filter(|tid| !alive.contains(tid))
        .collect();
    let by_tid: BTreeMap<u32, &Wait> = waits.iter().map(|w| (w.tid, w)).collect();
    // Whom each waiting thread waits for: a lock's holder (if that thread
    // still holds it: it says so in its own record when it waits too), or
    // the thread it joins.
    let waits_for = |w: &Wait| -> Option<u32> {
        match w.kind {
            WAIT_LOCK if w.holder != 0 => Some(w.holder),
            WAIT_JOIN => w.joins,
            _ => None,
        }
    };
    let mut found = Vec::new();
    let mut in_cycle: BTreeSet<u32> = BTreeSet::new();
    for w in &waits {
        if w.kind == WAIT_LOCK && w.holder == w.tid {
            found.push(Stuck::SelfDeadlock(w.clone()));
            in_cycle.insert(w.tid);
        } else if w.kind == WAIT_LOCK && ended.contains(&w.holder) {
            found.push(Stuck::Abandoned {
                wait: w.clone(),
                holder: w.holder,
            });
            in_cycle.insert(w.tid);
        }
    }
    // Cycles: every waiting thread waits for at most one other, so follow
    // the chain from each thread until it ends or comes back.
    for start in &waits {
        if in_cycle.contains(&start.tid) {
            continue;
        }
        let mut path: Vec<u32> = vec![start.tid];
        let mut current = start;
        while let Some(next) = waits_for(current) {
            // A lock's holder must still hold it: a waiting holder lists
            // the locks it holds.
            if current.kind == WAIT_LOCK {
                if let Some(h) = by_tid.get(&next) {
                    let lists_all = h.holds.len() < WAIT_HELD;
                    if lists_all && h.site_holding(current.object).is_none() {
                        break; // it took and released it since: no cycle
                    }
                }
            }
            if let Some(at) = path.iter().position(|&t| t == next) {
                let cycle: Vec<u32> = path[at..].to_vec();
                if cycle.len() > 1 && cycle.iter().all(|t| !in_cycle.contains(t)) {
                    in_cycle.extend(cycle.iter().copied());
                    found.push(Stuck::Cycle(
                        cycle.iter().map(|t| by_tid[t].clone()).collect(),
                    ));
                }
                break;
            }
            let Some(w) = by_tid.get(&next) else { break };
            path.push(next);
            current = w;
        }
    }
    // Nobody left to wake anyone: every live thread waits, none of them
    // already explained above.
    if !waits.is_empty()
        && !timed
        && waits.len() == alive.len()
        && waits.iter().all(|w| !in_cycle.contains(&w.tid))
    {
        found.push(Stuck::NoRunnableThread(waits));
    }
    found
}
