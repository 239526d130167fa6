//! Why each wait ended — its reason code — per lock, condition variable,
//! site and thread: acquired after waiting, timed out, owner died, not
//! recoverable, deadlock refused (an error-checking mutex's relock),
//! interrupted (a signal), notified by a signal or by a broadcast, a
//! spurious wake-up, cancelled, or another error (named). Read from the
//! events in the same pass as contention; trylock failures come from the
//! exact counters instead (see `locks.rs`).

use crate::model::{Cond, Lock, LockId, ReasonCount, ReasonList, Site, SiteId};
use locksuit_format::*;
use rustc_hash::FxHashMap;
use std::collections::HashMap;

/// The reasons, in the order reports list them.
pub const REASONS: [&str; 11] = [
    "acquired-after-wait",
    "timed-out",
    "owner-died",
    "not-recoverable",
    "deadlock-refused",
    "interrupted",
    "notified-by-signal",
    "notified-by-broadcast",
    "spurious",
    "cancelled",
    "error",
];

/// A reason: an index into [`REASONS`], and for "error" the errno.
pub type Reason = (u8, u32);

fn reason_of_errno(errno: u32) -> Reason {
    match errno as i32 {
        libc::EOWNERDEAD => (2, 0),
        libc::ENOTRECOVERABLE => (3, 0),
        libc::EDEADLK => (4, 0),
        libc::EINTR => (5, 0),
        _ => (10, errno),
    }
}

/// The name of a reason, e.g. `error:EINVAL`.
pub fn name(reason: Reason) -> String {
    match reason {
        (10, 0) => "error".to_string(),
        (10, errno) => format!("error:{}", errno_name(errno as i32)),
        (i, _) => REASONS[i as usize].to_string(),
    }
}

fn errno_name(errno: i32) -> String {
    let known = [
        (libc::EINVAL, "EINVAL"),
        (libc::EAGAIN, "EAGAIN"),
        (libc::EPERM, "EPERM"),
        (libc::ENOMEM, "ENOMEM"),
        (libc::EOVERFLOW, "EOVERFLOW"),
        (libc::ENOSYS, "ENOSYS"),
    ];
    known
        .iter()
        .find(|(e, _)| *e == errno)
        .map_or_else(|| format!("errno {errno}"), |(_, n)| n.to_string())
}

/// Counts of each reason, named, most first (ties by name).
pub fn sorted(counts: FxHashMap<Reason, u64>) -> Vec<ReasonCount> {
    let mut list: Vec<ReasonCount> = counts
        .into_iter()
        .map(|(reason, count)| ReasonCount {
            reason: name(reason),
            count,
        })
        .collect();
    list.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(&b.reason)));
    list
}

/// A wait's object: a lock (or semaphore, barrier) or a condition variable.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Object {
    Lock(u32),
    Cond(u32),
}

/// Counts by (object, site, thread, reason), raw ids.
#[derive(Default)]
pub struct Collector {
    pub counts: FxHashMap<(Object, u32, u32, Reason), u64>,
    /// Notifies that found waiters, by (condition variable, sequence after
    /// them): whether each was a broadcast.
    notifies: FxHashMap<(u32, u32), bool>,
}

/// Most notifies kept waiting for the wake-ups they caused.
const NOTIFIES_KEPT: usize = 1 << 16;

impl Collector {
    pub fn event(&mut self, e: &EventRecord) {
        let kind = e.hdr.aux & 0xff;
        let object = if kind == EVENT_COND_WAIT {
            Object::Cond(e.lock_id)
        } else {
            Object::Lock(e.lock_id)
        };
        let reason = match kind {
            EVENT_BLOCKED => (0, 0),
            EVENT_TIMED_OUT => (1, 0),
            EVENT_OUTCOME => reason_of_errno(e.other),
            EVENT_NOTIFY => {
                if self.notifies.len() >= NOTIFIES_KEPT {
                    self.notifies.clear();
                }
                let broadcast = e.hdr.aux & NOTIFY_BROADCAST != 0;
                self.notifies.insert((e.lock_id, e.seq2), broadcast);
                return;
            }
            EVENT_COND_WAIT => match (e.hdr.aux >> 8) & 0xff {
                OUTCOME_NOTIFIED => {
                    // Woken by the newest notify before it returned.
                    let broadcast = (e.seq.wrapping_add(1)..=e.seq2)
                        .rev()
                        .take(64)
                        .find_map(|s| self.notifies.get(&(e.lock_id, s)).copied());
                    if broadcast == Some(true) {
                        (7, 0)
                    } else {
                        (6, 0)
                    }
                }
                OUTCOME_TIMED_OUT => (1, 0),
                OUTCOME_SPURIOUS => (8, 0),
                OUTCOME_OWNER_DIED => (2, 0),
                OUTCOME_CANCELLED => (9, 0),
                _ => (10, 0),
            },
            _ => return,
        };
        *self
            .counts
            .entry((object, e.site_id, e.tid, reason))
            .or_default() += 1;
    }
}

/// Why waits ended (see `reasons.rs`), attributed to the locks,
/// condition variables and sites of the report; returned by thread. A
/// lock's trylock failures come from its exact counters.
#[allow(clippy::type_complexity)]
pub fn attribute(
    collected: Collector,
    (locks, sites, conds): (&mut [Lock], &mut [Site], &mut [Cond]),
    (lock_of, cond_of, site_of): (
        &dyn Fn(u32) -> Option<LockId>,
        &dyn Fn(u32) -> Option<usize>,
        &dyn Fn(u32) -> Option<SiteId>,
    ),
) -> HashMap<u32, Vec<ReasonCount>> {
    type Tally = FxHashMap<Reason, u64>;
    let mut by_lock: FxHashMap<LockId, Tally> = FxHashMap::default();
    let mut by_cond: FxHashMap<usize, Tally> = FxHashMap::default();
    let mut by_site: FxHashMap<SiteId, Tally> = FxHashMap::default();
    let mut by_thread: FxHashMap<u32, Tally> = FxHashMap::default();
    for ((object, site, tid, reason), n) in collected.counts {
        let add = |tally: &mut Tally| *tally.entry(reason).or_default() += n;
        match object {
            Object::Lock(raw) => lock_of(raw).map(|l| add(by_lock.entry(l).or_default())),
            Object::Cond(raw) => cond_of(raw).map(|c| add(by_cond.entry(c).or_default())),
        };
        if let Some(s) = site_of(site) {
            add(by_site.entry(s).or_default());
        }
        add(by_thread.entry(tid).or_default());
    }
    for lock in locks.iter_mut() {
        let mut tally = by_lock.remove(&lock.id).unwrap_or_default();
        let mut reasons = sorted(std::mem::take(&mut tally));
        if lock.try_failures > 0 {
            reasons.push(ReasonCount {
                reason: "try-failed".to_string(),
                count: lock.try_failures,
            });
            reasons.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(&b.reason)));
        }
        lock.reasons = (!reasons.is_empty()).then(|| Box::new(ReasonList(reasons)));
    }
    for (index, tally) in by_cond {
        if let Some(cond) = conds.get_mut(index) {
            cond.reasons = sorted(tally);
        }
    }
    for (id, tally) in by_site {
        if let Some(site) = sites.get_mut(id.index()) {
            site.reasons = sorted(tally);
        }
    }
    by_thread
        .into_iter()
        .map(|(tid, tally)| (tid, sorted(tally)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_reasons_are_named() {
        assert_eq!(
            name(reason_of_errno(libc::EDEADLK as u32)),
            "deadlock-refused"
        );
        assert_eq!(name(reason_of_errno(libc::EINTR as u32)), "interrupted");
        assert_eq!(name(reason_of_errno(libc::EINVAL as u32)), "error:EINVAL");
        assert_eq!(name(reason_of_errno(9999)), "error:errno 9999");
    }
}
