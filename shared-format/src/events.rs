//! A trace's events, read in place. A fully traced run writes hundreds of
//! millions of them, so they are never collected: the reader keeps only
//! where each lane's event blocks are, and readers walk them one at a time,
//! in each lane's emission order ([`Events::iter`]) or merged across lanes
//! by time ([`Events::for_each_merged`]). Nothing here grows with the number of
//! events.

use crate::layout::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::sync::Arc;

/// The bytes a trace was read from (a mapping or a buffer).
pub type TraceBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Where a trace's events are: each lane's committed event payloads, as
/// (start, end) byte ranges, in the lane's block order.
#[derive(Clone)]
pub struct Events {
    bytes: TraceBytes,
    lanes: Vec<Vec<(usize, usize)>>,
    /// Each lane's id in the trace (parallel to `lanes`; empty when built
    /// by hand).
    ids: Vec<u32>,
}

/// Where a reader of a live trace stopped in each lane (by lane id): the
/// start of the block it was in and the offset of the next event, so that
/// reading the trace again goes on from there.
pub type LanePositions = std::collections::HashMap<u32, (usize, usize)>;

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let blocks: usize = self.lanes.iter().map(Vec::len).sum();
        write!(f, "Events({} lanes, {blocks} blocks)", self.lanes.len())
    }
}

impl Default for Events {
    fn default() -> Self {
        Self {
            bytes: Arc::new(Vec::new()),
            lanes: Vec::new(),
            ids: Vec::new(),
        }
    }
}

/// The time a record was written: every kind is written at the later of
/// its two times (a release at `time`, a wait when it ended at `time2`).
#[inline]
pub fn emission_time(e: &EventRecord) -> u64 {
    e.time.max(e.time2)
}

impl Events {
    pub(crate) fn new(bytes: TraceBytes, lanes: Vec<Vec<(usize, usize)>>, ids: Vec<u32>) -> Self {
        Self { bytes, lanes, ids }
    }

    /// Events held in memory, one lane per thread in the order given (for
    /// tests and tools that build traces by hand).
    pub fn from_records(records: &[EventRecord]) -> Self {
        let mut lanes: Vec<(u32, Vec<u8>)> = Vec::new();
        for r in records {
            let at = match lanes.iter().position(|(tid, _)| *tid == r.tid) {
                Some(at) => at,
                None => {
                    lanes.push((r.tid, Vec::new()));
                    lanes.len() - 1
                }
            };
            let mut r = *r;
            r.hdr.kind = RecordKind::Event as u16;
            r.hdr.size = core::mem::size_of::<EventRecord>() as u16;
            lanes[at].1.extend_from_slice(crate::writer::pod_bytes(&r));
        }
        let mut bytes = Vec::new();
        let mut ranges = Vec::new();
        for (_, lane) in lanes {
            let start = bytes.len();
            bytes.extend_from_slice(&lane);
            ranges.push(vec![(start, bytes.len())]);
        }
        Self::new(Arc::new(bytes), ranges, Vec::new())
    }

    /// How many events the lanes hold, from their sizes alone (no event is
    /// read; a damaged block counts as if whole).
    pub fn stored(&self) -> u64 {
        let bytes: usize = self
            .lanes
            .iter()
            .flatten()
            .map(|(start, end)| end - start)
            .sum();
        (bytes / core::mem::size_of::<EventRecord>()) as u64
    }

    /// Each lane's events in emission order, one lane after another.
    pub fn iter(&self) -> impl Iterator<Item = EventRecord> + '_ {
        self.lanes
            .iter()
            .flat_map(move |lane| LaneCursor::new((*self.bytes).as_ref(), lane))
    }

    /// Calls `f` with every event, merged across lanes by [`emission_time`]
    /// (each lane is already in that order), so that events that belong
    /// together (a release and the acquisition it let in) arrive close
    /// together. One lane is drained for as long as it stays at or before
    /// every other lane's next event, so a heap operation is paid only when
    /// the lane changes. Returns the number of event blocks found damaged
    /// (the rest of each is skipped).
    pub fn for_each_merged(&self, f: impl FnMut(&EventRecord)) -> u64 {
        let bytes = (*self.bytes).as_ref();
        let cursors: Vec<LaneCursor<'_>> = self
            .lanes
            .iter()
            .map(|l| LaneCursor::new(bytes, l))
            .collect();
        merged(cursors, f).0
    }

    /// As [`for_each_merged`](Self::for_each_merged), but only the events
    /// after `positions` (a live trace read again), which are moved on past
    /// them. A lane whose block is gone (overwritten by the flight
    /// recorder) goes on from its end: what was overwritten is lost.
    pub fn for_each_merged_after(
        &self,
        positions: &mut LanePositions,
        f: impl FnMut(&EventRecord),
    ) -> u64 {
        let bytes = (*self.bytes).as_ref();
        let cursors: Vec<LaneCursor<'_>> = self
            .lanes
            .iter()
            .enumerate()
            .map(|(i, blocks)| {
                let id = self.ids.get(i).copied().unwrap_or(i as u32);
                match positions.get(&id) {
                    None => LaneCursor::new(bytes, blocks),
                    Some(&(start, offset)) => match blocks.iter().position(|b| b.0 == start) {
                        Some(block) => LaneCursor::at(bytes, blocks, block, offset),
                        None => LaneCursor::at(bytes, blocks, blocks.len(), 0),
                    },
                }
            })
            .collect();
        let (malformed, ends) = merged(cursors, f);
        for (i, end) in ends.into_iter().enumerate() {
            if let Some(end) = end {
                positions.insert(self.ids.get(i).copied().unwrap_or(i as u32), end);
            }
        }
        malformed
    }
}

/// Calls `f` with the cursors' events merged by emission time; returns the
/// damaged blocks found and where each cursor stopped (None: it read
/// nothing).
fn merged(
    mut cursors: Vec<LaneCursor<'_>>,
    mut f: impl FnMut(&EventRecord),
) -> (u64, Vec<Option<(usize, usize)>>) {
    {
        let mut heap = BinaryHeap::new();
        for (i, c) in cursors.iter().enumerate() {
            if let Some(t) = c.peek_time() {
                heap.push(Reverse((t, i)));
            }
        }
        while let Some(Reverse((_, lane))) = heap.pop() {
            let until = heap.peek().map_or(u64::MAX, |Reverse((t, _))| *t);
            let cursor = &mut cursors[lane];
            while let Some(head) = &cursor.head {
                f(head);
                if !cursor.advance() {
                    break;
                }
                if let Some(t) = cursor.peek_time().filter(|&t| t > until) {
                    heap.push(Reverse((t, lane)));
                    break;
                }
            }
        }
    }
    (
        cursors.iter().map(|c| c.malformed).sum(),
        cursors.iter().map(|c| c.read_to).collect(),
    )
}

/// One lane's events, decoded one by one. A record that is not a
/// well-formed event ends its block (counted in `malformed`).
struct LaneCursor<'a> {
    bytes: &'a [u8],
    blocks: &'a [(usize, usize)],
    block: usize,
    offset: usize,
    head: Option<EventRecord>,
    malformed: u64,
    /// After the last event read: its block's start and the offset past it.
    read_to: Option<(usize, usize)>,
    /// Where the event in `head` ends (its block's start, the offset).
    head_end: (usize, usize),
}

impl<'a> LaneCursor<'a> {
    fn new(bytes: &'a [u8], blocks: &'a [(usize, usize)]) -> Self {
        Self::at(bytes, blocks, 0, blocks.first().map_or(0, |b| b.0))
    }

    /// A cursor at `offset` in block `block` (`blocks.len()`: at the end).
    fn at(bytes: &'a [u8], blocks: &'a [(usize, usize)], block: usize, offset: usize) -> Self {
        let mut c = Self {
            bytes,
            blocks,
            block,
            offset,
            head: None,
            malformed: 0,
            read_to: None,
            head_end: (0, 0),
        };
        if block >= blocks.len() {
            // Nothing to read in this lane now: it goes on from its end.
            c.read_to = blocks.last().map(|&(start, end)| (start, end));
            return c;
        }
        c.advance();
        c
    }

    #[inline]
    fn peek_time(&self) -> Option<u64> {
        self.head.as_ref().map(emission_time)
    }

    /// Reads the next event into `head`; false (and `head` empty) at the end.
    #[inline]
    fn advance(&mut self) -> bool {
        if self.head.is_some() {
            self.read_to = Some(self.head_end);
        }
        while let Some(&(start, end)) = self.blocks.get(self.block) {
            let rest = self.bytes.get(self.offset..end).unwrap_or_default();
            prefetch(rest, PREFETCH_AHEAD);
            if let Some(e) = event_at(rest) {
                self.offset += e.hdr.size as usize;
                self.head = Some(e);
                self.head_end = (start, self.offset);
                return true;
            }
            if !rest.is_empty() {
                self.malformed += 1; // the rest of this block is skipped
            }
            self.block += 1;
            self.offset = self.blocks.get(self.block).map_or(0, |b| b.0);
        }
        self.head = None;
        false
    }
}

/// How far ahead of the record being read to ask for memory: reading is
/// bound by cache misses on the mapping (the hardware prefetcher stops at
/// each page), and this keeps about 16 records in flight.
const PREFETCH_AHEAD: usize = 1024;

#[inline]
fn prefetch(bytes: &[u8], ahead: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(b) = bytes.get(ahead) {
        // SAFETY: a prefetch is only a hint; the address is inside `bytes`.
        unsafe {
            core::arch::x86_64::_mm_prefetch(
                (b as *const u8).cast::<i8>(),
                core::arch::x86_64::_MM_HINT_T0,
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, ahead);
}

/// The well-formed event record at the start of `rest`, if there is one.
#[inline]
fn event_at(rest: &[u8]) -> Option<EventRecord> {
    let e = read_pod::<EventRecord>(rest)?;
    let size = e.hdr.size as usize;
    (e.hdr.kind == RecordKind::Event as u16
        && size >= core::mem::size_of::<EventRecord>()
        && size <= rest.len()
        && size.is_multiple_of(RECORD_ALIGN))
    .then_some(e)
}

impl Iterator for LaneCursor<'_> {
    type Item = EventRecord;

    fn next(&mut self) -> Option<EventRecord> {
        let e = self.head?;
        self.advance();
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(tid: u32, time: u64) -> EventRecord {
        EventRecord {
            tid,
            time,
            ..Default::default()
        }
    }

    #[test]
    fn merged_interleaves_lanes_by_time() {
        let events = Events::from_records(&[
            ev(1, 10),
            ev(1, 20),
            ev(1, 50),
            ev(2, 15),
            ev(2, 30),
            ev(2, 40),
            ev(3, 5),
        ]);
        let mut order: Vec<(u32, u64)> = Vec::new();
        events.for_each_merged(|e| order.push((e.tid, e.time)));
        assert_eq!(
            order,
            vec![(3, 5), (1, 10), (2, 15), (1, 20), (2, 30), (2, 40), (1, 50)]
        );
        // Lane by lane, each in its own order.
        let lanes: Vec<u32> = events.iter().map(|e| e.tid).collect();
        assert_eq!(lanes, vec![1, 1, 1, 2, 2, 2, 3]);
    }

    #[test]
    fn reading_again_goes_on_where_each_lane_stopped() {
        let events = Events::from_records(&[ev(1, 10), ev(2, 15), ev(2, 20)]);
        let mut positions = LanePositions::new();
        let mut seen = Vec::new();
        events.for_each_merged_after(&mut positions, |e| seen.push(e.time));
        assert_eq!(seen, vec![10, 15, 20]);
        // Written on since (the last lane, so the blocks stay where they
        // were, as in a trace file): only the new events come.
        let longer = Events::from_records(&[ev(1, 10), ev(2, 15), ev(2, 20), ev(2, 25), ev(2, 30)]);
        seen.clear();
        longer.for_each_merged_after(&mut positions, |e| seen.push(e.time));
        assert_eq!(seen, vec![25, 30]);
        seen.clear();
        longer.for_each_merged_after(&mut positions, |e| seen.push(e.time));
        assert!(seen.is_empty(), "{seen:?}");
    }

    #[test]
    fn a_damaged_record_ends_its_block_and_is_counted() {
        let events = Events::from_records(&[ev(1, 10), ev(1, 20)]);
        let mut bytes = (*events.bytes).as_ref().to_vec();
        bytes[core::mem::size_of::<EventRecord>() + 2] = 3; // second record's size
        let damaged = Events::new(Arc::new(bytes), events.lanes.clone(), Vec::new());
        let mut seen = 0;
        assert_eq!(
            damaged.for_each_merged(|_| seen += 1),
            1,
            "one damaged block"
        );
        assert_eq!(seen, 1);
    }
}
