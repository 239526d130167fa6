//! What a reader of a live trace learned about its blocks, kept from one
//! read to the next (`locksuit events --follow`, `locksuit top`), so that
//! reading the trace again touches only what may have changed: new blocks,
//! blocks reserved but not yet written, record blocks (their records are
//! updated in place) and the last event block of each lane. A block's kind,
//! lane and sequence never change once written, and an event block that is
//! not its lane's last is full for good, except under the flight recorder,
//! which reuses a lane's oldest event blocks once the trace is full: then
//! nothing is kept.
//!
//! A reader that has read a lane's events up to some block says so
//! ([`BlockIndex::forget_read`]); the blocks before it are then left out of
//! later reads, so a follower's read costs what was added since the last
//! one, and the index holds the lanes and what is not read yet, whatever
//! the trace's length.

use crate::events::LanePositions;
use crate::layout::BLOCK_SIZE;

/// An event block: (lane, seq, index), and its committed bytes once known
/// to be finished (`u32::MAX`: not known).
type EventBlock = ((u32, u32, usize), u32);

/// Blocks seen in earlier reads of one trace.
#[derive(Default, Clone)]
pub struct BlockIndex {
    /// The trace it describes: (pid, start_unix_ns, start_mono_ns); `None`
    /// while nothing may be kept (another trace, or the flight recorder).
    identity: Option<(u32, u64, u64)>,
    /// Every block below this had its header read once.
    walked: usize,
    /// Blocks below `walked` found reserved but not yet written, or of a
    /// kind this reader does not know: looked at again on every read.
    unsettled: Vec<usize>,
    /// The record blocks as (lane, seq, index): read again on every read.
    records: Vec<(u32, u32, usize)>,
    /// The event blocks not forgotten, sorted by (lane, seq).
    events: Vec<EventBlock>,
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

    /// The blocks below `backed` whose header this read must look at, in
    /// order: the unsettled ones and every block not walked yet. Forgets
    /// what lies past `backed` (the file was cut since an earlier read).
    pub(crate) fn headers_to_read(&mut self, backed: usize) -> Vec<usize> {
        self.walked = self.walked.clamp(1, backed.max(1));
        self.records.retain(|&(_, _, index)| index < backed);
        self.events.retain(|&((_, _, index), _)| index < backed);
        let mut walk = std::mem::take(&mut self.unsettled);
        walk.retain(|&index| index < self.walked);
        walk.extend(self.walked..backed);
        self.walked = backed.max(1);
        walk
    }

    /// Block `index` was read as `kind`, neither a record nor an event
    /// block (not written yet, or unknown): look again next time.
    pub(crate) fn unsettled(&mut self, index: usize) {
        self.unsettled.push(index);
    }

    /// A record block found by this read.
    pub(crate) fn record_block(&mut self, block: (u32, u32, usize)) {
        self.records.push(block);
    }

    /// The record blocks below the read's end, sorted by (lane, seq).
    pub(crate) fn record_blocks(&mut self) -> Vec<(u32, u32, usize)> {
        self.records.sort_unstable();
        self.records.clone()
    }

    /// The event blocks to read, as (lane, seq, index) and committed bytes
    /// if known finished, sorted: the known ones and `fresh`, the ones this
    /// read found (in any order), merged.
    pub(crate) fn sorted_events(&mut self, mut fresh: Vec<(u32, u32, usize)>) -> &[EventBlock] {
        if fresh.is_empty() {
            return &self.events;
        }
        fresh.sort_unstable();
        let known = std::mem::take(&mut self.events);
        let mut merged = Vec::with_capacity(known.len() + fresh.len());
        let mut a = known.into_iter().peekable();
        let mut b = fresh.into_iter().map(|block| (block, u32::MAX)).peekable();
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x.0 <= y.0 => a.next(),
                (Some(_), Some(_)) | (None, Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, None) => break,
            };
            merged.extend(next);
        }
        self.events = merged;
        &self.events
    }

    /// The `at`th event block (in `sorted_events` order) is finished, with
    /// `used` bytes committed.
    pub(crate) fn learn_finished(&mut self, at: usize, used: usize) {
        if let Some(block) = self.events.get_mut(at) {
            block.1 = used as u32;
        }
    }

    /// Ends a read: an index that may not be kept keeps nothing.
    pub(crate) fn end_read(&mut self) {
        if self.identity.is_none() {
            *self = BlockIndex::default();
        }
    }

    /// Whether the index describes the trace with `identity` (pid,
    /// start_unix_ns, start_mono_ns) and keeps what it learns of it.
    pub fn describes(&self, identity: (u32, u64, u64)) -> bool {
        self.identity == Some(identity)
    }

    /// A reader has read each lane of `positions` up to the block it names:
    /// the lane's blocks before that one are left out of later reads.
    pub fn forget_read(&mut self, positions: &LanePositions) {
        if self.identity.is_none() {
            return;
        }
        // Each lane's first block still to read: the one its position is in.
        let floors: std::collections::HashMap<u32, u32> = self
            .events
            .iter()
            .filter_map(|&((lane, seq, index), _)| {
                let &(start, _) = positions.get(&lane)?;
                (start / BLOCK_SIZE == index).then_some((lane, seq))
            })
            .collect();
        self.events
            .retain(|((lane, seq, _), _)| floors.get(lane).is_none_or(|floor| seq >= floor));
    }

    /// Blocks the index holds (for tests and measurements).
    pub fn remembered(&self) -> usize {
        self.records.len() + self.events.len()
    }
}
