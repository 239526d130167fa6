//! The lock-order graph: an edge "acquired B while holding A" each time a
//! thread takes a lock while it already holds others, recorded once per
//! (A, its site, B, its site, kind) per thread and counted after that. The
//! analyzer finds cycles in it (potential deadlocks).
//!
//! Only nested acquisitions come here: an acquisition with nothing held
//! costs one test of the held-lock count it already has in hand.

use crate::recorder::tables::held::{EdgeMemo, HeldEntry, HELD_SHARED, MAX_HELD};
use crate::recorder::tables::lanes::timed_slow_work;
use crate::recorder::tables::lanes::{Lane, MODE_EDGE};
use crate::recorder::tables::thread_state::InHook;
use crate::recorder::time::clock::now_ns;
use locksuit_format::*;

/// A lock was just acquired (its held entry is the innermost) while this
/// thread held others, none of them the same lock (a re-acquisition is a
/// count on its hold, see `HeldStack::fold_relock`). `tried`: by a trylock,
/// which cannot block.
#[cold]
#[inline(never)]
pub fn nested(g: &InHook, lane: &mut Lane, tried: bool) {
    let (entries, memo) = g.thread().held().entries_and_memo();
    let Some((new, below)) = entries.split_last() else {
        return;
    };
    let mut to_flags = if tried { EDGE_TRY } else { 0 };
    if new.flags & HELD_SHARED != 0 {
        to_flags |= EDGE_TO_SHARED;
    }
    for (at, from) in below.iter().enumerate().rev() {
        if from.lock_id == 0 {
            continue;
        }
        let flags = if from.flags & HELD_SHARED != 0 {
            to_flags | EDGE_FROM_SHARED
        } else {
            to_flags
        };
        let remembered = memo[at];
        if remembered.from == from.counter
            && remembered.to == new.counter
            && remembered.flags == flags
            && !remembered.record.is_null()
        {
            // The same edge as last time from this held lock (a loop).
            // SAFETY: an edge record this thread appended to its own lane.
            taken_again(unsafe { &mut *remembered.record }, below, at);
        } else {
            look_up(lane, memo, below, at, new, flags);
        }
    }
}

/// An edge taken before is taken again: counted, and its gates narrowed to
/// the locks held this time too.
#[inline(always)]
fn taken_again(edge: &mut EdgeRecord, below: &[HeldEntry], at: usize) {
    edge.count += 1;
    if edge.gates != [0; EDGE_GATES] {
        narrow_gates(edge, below, at);
    }
}

#[cold]
#[inline(never)]
fn narrow_gates(edge: &mut EdgeRecord, below: &[HeldEntry], at: usize) {
    for gate in edge.gates.iter_mut() {
        if *gate != 0 && !others(below, at).any(|id| id == *gate) {
            *gate = 0;
        }
    }
}

/// The locks held besides `below[at]` (under the new one): the edge's gate
/// candidates, innermost first.
fn others(below: &[HeldEntry], at: usize) -> impl Iterator<Item = u32> + '_ {
    let from = below[at].addr;
    below
        .iter()
        .enumerate()
        .rev()
        .filter(move |&(i, e)| i != at && e.lock_id != 0 && e.addr != from)
        .map(|(_, e)| e.lock_id)
}

/// The edge from `below[at]` to `new` is not the one remembered there: its
/// record from the lane's index, or a new one; remembered for next time.
#[cold]
#[inline(never)]
fn look_up(
    lane: &mut Lane,
    memo: &mut [EdgeMemo; MAX_HELD],
    below: &[HeldEntry],
    at: usize,
    new: &HeldEntry,
    flags: u32,
) {
    let from = &below[at];
    let key = Key {
        from_lock: from.lock_id,
        from_site: site_of(from),
        to_lock: new.lock_id,
        to_site: site_of(new),
        flags,
    };
    let found = lane
        .find(key.to_lock, key.ret(), key.context(), MODE_EDGE)
        .map(|r| r.cast::<EdgeRecord>());
    let (record, is_new) = match found {
        Some(record) => (record, false),
        None => match timed_slow_work(lane, |lane| new_edge(lane, &key, others(below, at))) {
            Some(record) => (record, true),
            None => return,
        },
    };
    // Only with both counters known is the pair a key.
    if !from.counter.is_null() && !new.counter.is_null() {
        memo[at] = EdgeMemo {
            from: from.counter,
            to: new.counter,
            flags,
            record,
        };
    }
    if !is_new {
        // SAFETY: an edge record this thread appended to its own lane (the
        // index keys edge records by MODE_EDGE).
        taken_again(unsafe { &mut *record }, below, at);
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
