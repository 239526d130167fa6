//! A whole trace built in memory, for a recording made from outside the
//! process (`locksuit attach`): the same layout the shim writes in place,
//! block by block, as the process runs. Each lane's records go into its
//! own lane blocks and its events into its own event blocks, in order;
//! the header counts the blocks at the end.

use crate::layout::*;
use core::mem::{offset_of, size_of};

/// The bytes of a plain-integer record.
pub fn pod_bytes<T: Pod>(value: &T) -> &[u8] {
    // SAFETY: T is Pod (repr(C) integers, no implicit padding), so every
    // byte is initialised; the slice covers exactly the value borrowed.
    unsafe { core::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) }
}

/// A header of every zero but what identifies the format; the caller fills
/// in the process's fields.
pub fn blank_header() -> FileHeader {
    let mut h: FileHeader = read_pod(&vec![0u8; size_of::<FileHeader>()])
        .unwrap_or_else(|| unreachable!("a buffer of the header's size reads as a header"));
    h.version = FORMAT_VERSION;
    h.byte_order = BYTE_ORDER_MARK;
    h.header_size = size_of::<FileHeader>() as u32;
    h.block_size = BLOCK_SIZE as u32;
    h
}

/// Where a lane writes next: the block (index into `blocks`) and its
/// sequence number, for records and for events.
#[derive(Default)]
struct LaneAt {
    records: Option<(usize, u32)>,
    events: Option<(usize, u32)>,
}

/// A trace being built: records and events appended per lane, then
/// [`TraceWriter::finish`] for the file's bytes.
pub struct TraceWriter {
    header: FileHeader,
    /// Every block after the header's, each [`BLOCK_SIZE`] bytes.
    blocks: Vec<Vec<u8>>,
    lanes: Vec<LaneAt>,
}

/// A record too large for any block.
#[derive(Debug)]
pub struct TooLarge(pub usize);

impl TraceWriter {
    /// Starts a trace with `header` (see [`blank_header`]); its block
    /// counts and magic number are written by `finish`.
    pub fn new(header: FileHeader) -> Self {
        TraceWriter {
            header,
            blocks: Vec::new(),
            lanes: Vec::new(),
        }
    }

    /// Appends `record` followed by `tail` (a site's frames, a module's
    /// path) to `lane`'s records. The record's own header gives its kind
    /// and aux; its size is written here, rounded up to [`RECORD_ALIGN`].
    pub fn record<T: Pod>(&mut self, lane: u32, record: &T, tail: &[u8]) -> Result<(), TooLarge> {
        let mut bytes = pod_bytes(record).to_vec();
        bytes.extend_from_slice(tail);
        bytes.resize(align_record(bytes.len()), 0);
        if bytes.len() > BLOCK_PAYLOAD || bytes.len() > usize::from(u16::MAX) {
            return Err(TooLarge(bytes.len()));
        }
        let size = (bytes.len() as u16).to_le_bytes();
        let at = offset_of!(RecordHeader, size);
        bytes[at..at + 2].copy_from_slice(&size);
        self.append(lane, BLOCK_LANE, &bytes);
        Ok(())
    }

    /// Appends `event` to `lane`'s events.
    pub fn event(&mut self, lane: u32, event: &EventRecord) {
        let mut e = *event;
        e.hdr.kind = RecordKind::Event as u16;
        e.hdr.size = size_of::<EventRecord>() as u16;
        self.append(lane, BLOCK_EVENTS, pod_bytes(&e));
    }

    fn append(&mut self, lane: u32, kind: u32, bytes: &[u8]) {
        let index = lane as usize;
        if self.lanes.len() <= index {
            self.lanes.resize_with(index + 1, LaneAt::default);
        }
        let at = match kind {
            BLOCK_LANE => self.lanes[index].records,
            _ => self.lanes[index].events,
        };
        let fits = |block: &Vec<u8>| used(block) + bytes.len() <= BLOCK_PAYLOAD;
        let (block, seq) = match at {
            Some((block, seq)) if fits(&self.blocks[block]) => (block, seq),
            _ => {
                let seq = at.map_or(0, |(_, seq)| seq + 1);
                let mut new = vec![0u8; BLOCK_SIZE];
                let head = BlockHeader {
                    kind,
                    lane,
                    seq,
                    used: 0,
                };
                new[..BLOCK_HEADER_SIZE].copy_from_slice(pod_bytes(&head));
                self.blocks.push(new);
                (self.blocks.len() - 1, seq)
            }
        };
        let lane_at = &mut self.lanes[index];
        match kind {
            BLOCK_LANE => lane_at.records = Some((block, seq)),
            _ => lane_at.events = Some((block, seq)),
        }
        let buf = &mut self.blocks[block];
        let start = BLOCK_HEADER_SIZE + used(buf);
        buf[start..start + bytes.len()].copy_from_slice(bytes);
        let now_used = (start + bytes.len() - BLOCK_HEADER_SIZE) as u32;
        buf[USED..USED + 4].copy_from_slice(&now_used.to_le_bytes());
    }

    /// The trace file's bytes.
    pub fn finish(mut self) -> Vec<u8> {
        let blocks = (self.blocks.len() + 1) as u32;
        self.header.magic = MAGIC;
        self.header.max_blocks = blocks;
        self.header.blocks_reserved = blocks;
        self.header.blocks_backed = blocks;
        let mut out = vec![0u8; BLOCK_SIZE];
        out[..size_of::<FileHeader>()].copy_from_slice(pod_bytes(&self.header));
        for block in self.blocks {
            out.extend_from_slice(&block);
        }
        out
    }
}

/// Where a block's `used` count is.
const USED: usize = offset_of!(BlockHeader, used);

/// Bytes of records in a block (its header's `used`).
fn used(block: &[u8]) -> usize {
    let mut b = [0u8; 4];
    b.copy_from_slice(&block[USED..USED + 4]);
    u32::from_le_bytes(b) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::read_trace_bytes;
    use std::path::Path;

    fn header_of(kind: RecordKind, aux: u32) -> RecordHeader {
        RecordHeader {
            kind: kind as u16,
            size: 0,
            aux,
        }
    }

    #[test]
    fn what_is_written_reads_back() {
        let mut h = blank_header();
        h.pid = 77;
        h.flags = FLAG_COMPLETE;
        let mut w = TraceWriter::new(h);
        for lane in 0..2u32 {
            let thread = ThreadRecord {
                hdr: header_of(RecordKind::Thread, 0),
                tid: 100 + lane,
                ..Default::default()
            };
            w.record(lane, &thread, &[]).unwrap();
        }
        let site = SiteRecord {
            hdr: header_of(RecordKind::Site, 2),
            id: 5,
            module_epoch: 0,
        };
        let frames: Vec<u8> = [0x1000u64, 0x2000]
            .iter()
            .flat_map(|a| a.to_le_bytes())
            .collect();
        w.record(1, &site, &frames).unwrap();
        // Enough counters to fill more than one block of lane 1.
        let many = 2 * BLOCK_PAYLOAD / size_of::<CounterRecord>();
        for n in 0..many {
            let c = CounterRecord {
                hdr: header_of(RecordKind::Counter, MODE_EXCLUSIVE),
                lock_id: 1,
                site_id: 5,
                engagements: n as u64,
                ..Default::default()
            };
            w.record(1, &c, &[]).unwrap();
        }
        for t in 0..3u64 {
            let e = EventRecord {
                hdr: header_of(RecordKind::Event, EVENT_BLOCKED),
                lock_id: 1,
                tid: 101,
                time: 10 * t,
                time2: 10 * t + 5,
                ..Default::default()
            };
            w.event(1, &e);
        }
        let bytes = w.finish();
        assert_eq!(bytes.len() % BLOCK_SIZE, 0);
        let trace = read_trace_bytes(Path::new("t"), &bytes).unwrap();
        assert!(trace.warnings.is_empty(), "{:?}", trace.warnings);
        assert_eq!(trace.header.pid, 77);
        let tids: Vec<u32> = trace.threads.iter().map(|t| t.record.tid).collect();
        assert_eq!(tids, [100, 101]);
        assert_eq!(trace.sites.len(), 1);
        assert_eq!(trace.sites[0].frames, [0x1000, 0x2000]);
        assert_eq!(trace.counters.len(), many);
        assert!(trace.counters.iter().all(|(t, _)| *t == 1));
        let sum: u64 = trace.counters.iter().map(|(_, c)| c.engagements).sum();
        assert_eq!(sum, (many * (many - 1) / 2) as u64);
        let times: Vec<(u32, u64, u64)> = trace
            .events
            .iter()
            .map(|e| (e.tid, e.time, e.time2))
            .collect();
        assert_eq!(times, [(101, 0, 5), (101, 10, 15), (101, 20, 25)]);
    }

    #[test]
    fn a_record_larger_than_a_block_is_refused() {
        let mut w = TraceWriter::new(blank_header());
        let thread = ThreadRecord::default();
        assert!(w.record(0, &thread, &vec![0; BLOCK_SIZE]).is_err());
    }
}
