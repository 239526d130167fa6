//! What a reader of a live trace learned about its blocks, kept from one
//! read to the next (`locksuit events --follow`, `locksuit top`), so that
//! reading the trace again touches only what may have changed: new blocks,
//! record blocks (their records are updated in place) and the last event
//! block of each lane. A block's kind, lane and sequence never change once
//! written, and an event block that is not its lane's last is full for
//! good, except under the flight recorder, which reuses a lane's oldest
//! event blocks once the trace is full: then nothing is kept.

use crate::layout::{BLOCK_EVENTS, BLOCK_LANE};

/// Blocks seen in earlier reads of one trace.
#[derive(Default, Clone)]
pub struct BlockIndex {
    /// The trace it describes: (pid, start_unix_ns, start_mono_ns).
    identity: Option<(u32, u64, u64)>,
    /// Per block: (kind, lane, seq) once written (kind 0: not yet).
    blocks: Vec<(u32, u32, u32)>,
    /// Per block: the committed bytes of an event block known to be
    /// finished (`u32::MAX`: not known).
    finished: Vec<u32>,
    /// The known event blocks as (lane, seq, index), sorted: a read sorts
    /// only the blocks it found new and merges them in.
    events: Vec<(u32, u32, usize)>,
}

impl BlockIndex {
    /// Makes the index describe the trace with `identity`: kept if it
    /// already did and `reusable`, else emptied.
    pub(crate) fn begin(&mut self, identity: (u32, u64, u64), reusable: bool) {
        if self.identity != Some(identity) || !reusable {
            *self = BlockIndex::default();
        }
        self.identity = reusable.then_some(identity);
    }

    /// Block `index`'s (kind, lane, seq), if an earlier read found it written.
    pub(crate) fn known(&self, index: usize) -> Option<(u32, u32, u32)> {
        self.blocks
            .get(index)
            .copied()
            .filter(|&(kind, _, _)| kind == BLOCK_LANE || kind == BLOCK_EVENTS)
    }

    /// Block `index` was read as (kind, lane, seq).
    pub(crate) fn learn(&mut self, index: usize, header: (u32, u32, u32)) {
        if self.identity.is_none() {
            return;
        }
        if self.blocks.len() <= index {
            self.blocks.resize(index + 1, (0, 0, 0));
        }
        self.blocks[index] = header;
    }

    /// The committed bytes of finished event block `index`, if known.
    pub(crate) fn finished_used(&self, index: usize) -> Option<usize> {
        match self.finished.get(index) {
            Some(&used) if used != u32::MAX => Some(used as usize),
            _ => None,
        }
    }

    /// Event block `index` is finished (a later block of its lane exists),
    /// with `used` bytes committed.
    pub(crate) fn learn_finished(&mut self, index: usize, used: usize) {
        if self.identity.is_none() {
            return;
        }
        if self.finished.len() <= index {
            self.finished.resize(index + 1, u32::MAX);
        }
        self.finished[index] = used as u32;
    }

    /// Every event block below `backed` as (lane, seq, index), sorted: the
    /// known ones and `fresh`, the ones this read found (in any order).
    /// Kept for the next read, which will know them all. (Fewer blocks than
    /// an earlier read had: the file was cut since.)
    pub(crate) fn sorted_events(
        &mut self,
        mut fresh: Vec<(u32, u32, usize)>,
        backed: usize,
    ) -> Vec<(u32, u32, usize)> {
        fresh.sort_unstable();
        if self.identity.is_none() {
            return fresh;
        }
        let mut known = std::mem::take(&mut self.events);
        known.retain(|&(_, _, index)| index < backed);
        let mut merged = Vec::with_capacity(known.len() + fresh.len());
        let (mut a, mut b) = (known.into_iter().peekable(), fresh.into_iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x <= y => a.next(),
                (Some(_), Some(_)) | (None, Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, None) => break,
            };
            merged.extend(next);
        }
        self.events.clone_from(&merged);
        merged
    }

    /// Blocks whose header is remembered (for tests and measurements).
    pub fn remembered(&self) -> usize {
        self.blocks.iter().filter(|b| b.0 != 0).count()
    }
}
