//! The lock-order graph: an edge "acquired B while holding A" each time a
//! thread takes a lock while it already holds others, recorded once per
//! (A, its site, B, its site, kind) per thread and counted after that. The
//! analyzer finds cycles in it (potential deadlocks).
//!
//! Only nested acquisitions come here: an acquisition with nothing held
//! costs one test of the held-lock count it already has in hand.

use super::held::{EdgeMemo, HeldEntry, HELD_SHARED};
use super::lanes::{Lane, FIRST_COND_MODE};
use super::{now_ns, timed_slow_work, Prepared};
use crate::guard::HookGuard;
use locksuit_format::*;

/// Index mode of edge records in the lane's index (after the condition modes).
pub const MODE_EDGE: u32 = FIRST_COND_MODE + 2;

/// The lock `p` was just acquired (its held entry is the innermost) while
/// this thread held others. `tried`: by a trylock, which cannot block.
#[cold]
#[inline(never)]
pub fn nested(g: &HookGuard, p: &Prepared, tried: bool) {
    let held = g.thread().held();
    let depth = held.entries().len();
    let Some(new) = held.entries().last().copied() else {
        return;
    };
    // Re-acquiring a lock this thread already holds (a recursive mutex)
    // cannot block: no edge.
    if held.entries()[..depth - 1]
        .iter()
        .any(|e| e.addr == new.addr)
    {
        return;
    }
    let to_site = p.counter().site_id;
    let lane = p.lane();
    for at in (0..depth - 1).rev() {
        let from = held.entries()[at];
        if from.lock_id == 0 {
            continue;
        }
        let mut flags = if tried { EDGE_TRY } else { 0 };
        if from.flags & HELD_SHARED != 0 {
            flags |= EDGE_FROM_SHARED;
        }
        if new.flags & HELD_SHARED != 0 {
            flags |= EDGE_TO_SHARED;
        }
        let key = Key {
            from_lock: from.lock_id,
            from_site: site_of(&from),
            to_lock: new.lock_id,
            to_site,
            flags,
        };
        let below = &held.entries()[..depth - 1];
        let others = || {
            below
                .iter()
                .enumerate()
                .rev()
                .filter(move |&(i, e)| i != at && e.lock_id != 0 && e.addr != from.addr)
                .map(|(_, e)| e.lock_id)
        };
        let memo = held.edge_memo[at];
        let record = if memo.key == key.words() && !memo.record.is_null() {
            Some(memo.record)
        } else {
            lane.find(key.to_lock, key.ret(), key.context(), MODE_EDGE)
                .map(|r| r.cast::<EdgeRecord>())
        };
        let record = match record {
            Some(record) => {
                // SAFETY: an edge record this thread appended to its own
                // lane (the index keys edge records by MODE_EDGE).
                let edge = unsafe { &mut *record };
                edge.count += 1;
                // Gates: only the locks held every time.
                if edge.gates != [0; EDGE_GATES] {
                    for gate in edge.gates.iter_mut() {
                        if *gate != 0 && !others().any(|id| id == *gate) {
                            *gate = 0;
                        }
                    }
                }
                record
            }
            None => match timed_slow_work(lane, |lane| new_edge(lane, &key, others())) {
                Some(record) => record,
                None => continue,
            },
        };
        held.edge_memo[at] = EdgeMemo {
            key: key.words(),
            record,
        };
    }
}

fn site_of(entry: &HeldEntry) -> u32 {
    if entry.counter.is_null() {
        0
    } else {
        // SAFETY: a counter record of this thread's lane, in the live mapping.
        unsafe { (*entry.counter).site_id }
    }
}

struct Key {
    from_lock: u32,
    from_site: u32,
    to_lock: u32,
    to_site: u32,
    flags: u32,
}

impl Key {
    fn words(&self) -> [u32; 5] {
        [
            self.from_lock,
            self.from_site,
            self.to_lock,
            self.to_site,
            self.flags,
        ]
    }

    /// The index's "return address" and "context" fields, reused as the
    /// rest of the key (the lock id field holds `to_lock`).
    fn ret(&self) -> u64 {
        u64::from(self.from_lock) | u64::from(self.flags) << 32
    }

    fn context(&self) -> u64 {
        u64::from(self.from_site) << 32 | u64::from(self.to_site)
    }
}

fn new_edge(
    lane: &mut Lane,
    key: &Key,
    others: impl Iterator<Item = u32>,
) -> Option<*mut EdgeRecord> {
    let mut gates = [0u32; EDGE_GATES];
    for (slot, id) in gates.iter_mut().zip(others) {
        *slot = id;
    }
    let record = EdgeRecord {
        hdr: RecordHeader {
            kind: RecordKind::Edge as u16,
            size: core::mem::size_of::<EdgeRecord>() as u16,
            aux: key.flags,
        },
        from_lock: key.from_lock,
        to_lock: key.to_lock,
        from_site: key.from_site,
        to_site: key.to_site,
        count: 1,
        first_ns: now_ns(),
        gates,
    };
    // A full trace drops it (counted by `append`).
    let p = lane.append(&record, &[])?;
    lane.insert(key.to_lock, key.ret(), key.context(), MODE_EDGE, p.cast());
    Some(p)
}
