//! Validating reader. Never panics on any input: a trace that cannot be read
//! at all is a [`TraceError`]; damage inside an otherwise valid trace becomes
//! a warning and the rest is still read.
//!
//! This file checks the header and walks the blocks; what each record
//! becomes is `records.rs`.

mod records;

use crate::access::*;
pub use crate::block_index::BlockIndex;
use crate::events::{Events, TraceBytes};
use crate::layout::*;
use crate::policy::*;
use core::mem::{offset_of, size_of};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

use records::{block_payload, read_records, Reading};

/// Why a trace cannot be read.
#[derive(Debug)]
pub struct TraceError {
    pub path: PathBuf,
    pub problem: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.problem)
    }
}

impl std::error::Error for TraceError {}

/// Header fields, decoded.
#[derive(Clone, Debug)]
pub struct HeaderInfo {
    pub version: u32,
    pub pid: u32,
    pub ppid: u32,
    pub flags: u32,
    pub exit_code: Option<i32>,
    pub hold_sample_period: u32,
    pub start_unix_ns: u64,
    pub start_mono_ns: u64,
    pub end_mono_ns: u64,
    pub dropped_records: u64,
    pub dropped_ops: u64,
    pub max_blocks: u32,
    pub blocks_reserved: u32,
    /// Calibrated TSC rate when `FLAG_CLOCK_TSC` is set, else 0.
    pub tsc_khz: u32,
    /// Blocking calls were recorded when they blocked this long (µs).
    pub block_min_us: u32,
    /// Context-switch records lost (`LOCKSUIT_SWITCHES=1`).
    pub switches_lost: u32,
    /// Processors the process could run on (0: unknown).
    pub cpus: u32,
    /// `LOCKSUIT_POLICY`'s `min_wait_us`, and the wait events it left out.
    pub policy_min_wait_us: u32,
    pub events_filtered: u32,
    /// What a reader last asked the running process (`CONTROL_*`, 0: nothing).
    pub control: u32,
    /// Data-level accesses were recorded for each line's first
    /// `data_sample_first` engagements, then one in `data_sample_every`
    /// (1: all).
    pub data_sample_every: u32,
    pub data_sample_first: u32,
    pub exe: String,
    /// When the program confined itself (`FLAG_CONFINED`) or lost its TSC
    /// (`FLAG_CLOCK_COARSE`), monotonic; 0 if never.
    pub confined_mono_ns: u64,
    /// The shim's own system calls not made because it was confined.
    pub own_calls_refused: u64,
    /// When the file was cut under the program (`FLAG_CUT`), monotonic.
    pub cut_mono_ns: u64,
    /// The shim's warnings for this process, one per line, as it said (or,
    /// with `LOCKSUIT_QUIET=1`, would have said) them on stderr.
    pub shim_notes: Vec<String>,
}

impl HeaderInfo {
    /// Whether the trace was finished: its process exited or exec'd, or
    /// it was written whole by `attach`.
    pub fn complete(&self) -> bool {
        self.flags & (FLAG_COMPLETE | FLAG_EXEC | FLAG_ATTACHED) != 0
    }

    /// Recorded by `locksuit attach` ([`FLAG_ATTACHED`]).
    pub fn attached(&self) -> bool {
        self.flags & FLAG_ATTACHED != 0
    }
}

/// One thread, as introduced by a [`ThreadRecord`] and updated by
/// [`ThreadNameRecord`]s.
#[derive(Clone, Debug)]
pub struct ThreadInfo {
    pub record: ThreadRecord,
    pub name: Option<String>,
}

#[derive(Clone, Debug)]
pub struct SiteInfo {
    pub id: u32,
    pub frames: Vec<u64>,
    pub module_epoch: u32,
}

/// A site's Python frames, innermost first (see [`PyFramesRecord`]).
#[derive(Clone, Debug)]
pub struct PySiteFrames {
    pub site_id: u32,
    pub frames: Vec<PyFrame>,
}

/// One Python frame: `function@file:line`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PyFrame {
    pub function: String,
    pub file: String,
    /// 0 when unknown.
    pub line: u32,
}

#[derive(Clone, Debug)]
pub struct ModuleInfo {
    pub bias: u64,
    pub start: u64,
    pub end: u64,
    pub epoch: u64,
    pub path: String,
    /// The file's size and mtime (ns) when recorded; 0 when unknown.
    pub file_size: u64,
    pub file_mtime_ns: u64,
    /// The loaded image's GNU build id; empty when it had none.
    pub build_id: Vec<u8>,
}

/// Everything a trace holds. Record order within each lane is kept; threads
/// are referred to by their index in `threads`.
#[derive(Clone, Debug)]
pub struct Trace {
    pub header: HeaderInfo,
    pub threads: Vec<ThreadInfo>,
    pub locks: Vec<LockRecord>,
    pub destroys: Vec<LockDestroyRecord>,
    pub sites: Vec<SiteInfo>,
    /// The Python frames of sites whose caller is a CPython interpreter.
    pub py_frames: Vec<PySiteFrames>,
    /// (index into `threads`, counter)
    pub counters: Vec<(usize, CounterRecord)>,
    /// (index into `threads`, counter)
    pub conds: Vec<(usize, CondRecord)>,
    /// (index into `threads`, lock-order edge)
    pub edges: Vec<(usize, EdgeRecord)>,
    /// The events, read in place (see [`Events`]); each names its thread
    /// by tid.
    pub events: Events,
    pub modules: Vec<ModuleInfo>,
    /// The recording policy's record and text, if one was in force.
    pub policy: Option<(PolicyRecord, String)>,
    /// Snapshot parts in the order written (see [`SnapshotRecord::number`]).
    pub snapshots: Vec<(SnapshotRecord, Vec<SnapshotThread>)>,
    /// Raw stacks of snapshots' threads in unrecorded system calls.
    pub snapshot_stacks: Vec<(SnapshotStackRecord, Vec<u8>)>,
    /// Data-level accesses (a program built with `locksuit cc`): the
    /// summary, and every granule touched under a lock.
    pub access_summary: Option<AccessSummaryRecord>,
    pub accesses: Vec<AccessRecord>,
    /// Per site, its engagements' ratios of suitable accesses.
    pub site_ratios: Vec<SiteRatiosRecord>,
    /// Problems found inside an otherwise readable trace.
    pub warnings: Vec<String>,
}

/// Reads and validates the trace at `path`.
pub fn read_trace(path: &Path) -> Result<Trace, TraceError> {
    let bytes = std::fs::read(path).map_err(|e| TraceError {
        path: path.to_path_buf(),
        problem: match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            _ => format!("cannot read: {e}"),
        },
    })?;
    read_trace_shared(path, Arc::new(bytes))
}

fn u32_at(bytes: &[u8], off: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[off..off + 4]);
    u32::from_le_bytes(b)
}

/// The shim's warnings kept in the header, one per line (a line cut short
/// where the room ended is kept, marked so).
fn shim_notes(header: &FileHeader) -> Vec<String> {
    let claimed = header.shim_notes_len as usize;
    let kept = &header.shim_notes[..claimed.min(SHIM_NOTES_MAX)];
    let mut notes: Vec<String> = kept
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty() && !line.iter().all(|&b| b == 0))
        .map(|line| {
            String::from_utf8_lossy(line)
                .trim_end_matches('\0')
                .to_string()
        })
        .collect();
    if claimed > SHIM_NOTES_MAX {
        notes.push(format!(
            "(more warnings than the trace's header had room for: {} bytes left out)",
            claimed - SHIM_NOTES_MAX
        ));
    }
    notes
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Reads and validates a trace held in memory; `path` is only used in
/// messages. The bytes are copied (the events are read from them later);
/// [`read_trace_shared`] takes a mapping without copying.
pub fn read_trace_bytes(path: &Path, bytes: &[u8]) -> Result<Trace, TraceError> {
    read_trace_shared(path, Arc::new(bytes.to_vec()))
}

/// Reads and validates the trace in `source` (a file mapping, say), which
/// the returned trace keeps for reading its events.
pub fn read_trace_shared(path: &Path, source: TraceBytes) -> Result<Trace, TraceError> {
    read_trace_releasing(path, source, &mut || {})
}

/// Blocks read between two calls of the release hook (4 MiB).
pub const RELEASE_EVERY_BLOCKS: usize = 256;

/// [`read_trace_shared`], calling `release` every [`RELEASE_EVERY_BLOCKS`]
/// blocks read: a caller reading from a mapping lets go of the pages read
/// so far there, so the whole file never counts as its memory at once.
pub fn read_trace_releasing(
    path: &Path,
    source: TraceBytes,
    release: &mut dyn FnMut(),
) -> Result<Trace, TraceError> {
    read_trace_indexed(path, source, release, &mut BlockIndex::default())
}

/// [`read_trace_releasing`] of a trace read again and again while its
/// process writes it: `blocks` keeps what the earlier reads learned about
/// its blocks, so this read touches only what may have changed (see
/// `block_index.rs`). Given another trace, the index starts afresh.
pub fn read_trace_indexed(
    path: &Path,
    source: TraceBytes,
    release: &mut dyn FnMut(),
    blocks: &mut BlockIndex,
) -> Result<Trace, TraceError> {
    let mut read = 0usize;
    let mut tick = move || {
        read += 1;
        if read.is_multiple_of(RELEASE_EVERY_BLOCKS) {
            release();
        }
    };
    let bytes: &[u8] = (*source).as_ref();
    let fail = |problem: String| TraceError {
        path: path.to_path_buf(),
        problem,
    };
    if bytes.len() < 16 {
        return Err(fail(format!(
            "not a locksuit trace: only {} bytes, too short for a header",
            bytes.len()
        )));
    }
    if bytes[..8] != MAGIC {
        return Err(fail(
            "not a locksuit trace: bad magic number (or the process died before the header was written)"
                .into(),
        ));
    }
    let version = u32_at(bytes, offset_of!(FileHeader, version));
    if u32_at(bytes, offset_of!(FileHeader, byte_order)) != BYTE_ORDER_MARK {
        return Err(fail(
            "trace was written on a machine with a different byte order".into(),
        ));
    }
    if version > FORMAT_VERSION {
        return Err(fail(format!(
            "trace format version {version} is newer than this locksuit understands (version {FORMAT_VERSION}); upgrade locksuit"
        )));
    }
    if version < FORMAT_VERSION {
        return Err(fail(format!(
            "trace format version {version} is older than this locksuit reads (version {FORMAT_VERSION})"
        )));
    }
    if bytes.len() < size_of::<FileHeader>() {
        return Err(fail(format!(
            "truncated: {} bytes, shorter than the {}-byte header",
            bytes.len(),
            size_of::<FileHeader>()
        )));
    }
    // A live trace's header changes while we read it. `blocks_backed` is
    // taken first: the writer reserves a block before it backs it, so every
    // count read after this one (`blocks_reserved`) is at least as large,
    // and the fence keeps the reads of the blocks after it.
    let backed_when_read = u32_at(bytes, offset_of!(FileHeader, blocks_backed));
    fence(Ordering::Acquire);
    let mut header: FileHeader = read_pod(bytes).ok_or_else(|| fail("truncated header".into()))?;
    header.blocks_backed = backed_when_read;
    if header.block_size as usize != BLOCK_SIZE
        || header.header_size as usize != size_of::<FileHeader>()
    {
        return Err(fail(format!(
            "corrupt header: block size {} / header size {} do not match format version {version}",
            header.block_size, header.header_size
        )));
    }
    if header.exe_len as usize > EXE_PATH_MAX {
        return Err(fail(format!(
            "corrupt header: executable path length {}",
            header.exe_len
        )));
    }
    let mut backed = header.blocks_backed as usize;
    if header.blocks_backed > header.max_blocks
        || header.blocks_backed > header.blocks_reserved.max(1)
    {
        return Err(fail(format!(
            "corrupt header: {} blocks backed but {} reserved, cap {}",
            header.blocks_backed, header.blocks_reserved, header.max_blocks
        )));
    }
    let expected_len = backed.saturating_mul(BLOCK_SIZE);
    let mut warnings = Vec::new();
    if bytes.len() < expected_len {
        let complete = header.flags & (FLAG_COMPLETE | FLAG_EXEC | FLAG_ATTACHED) != 0;
        if complete {
            return Err(fail(format!(
                "truncated: the header says {} bytes of blocks were written but the file has {}",
                expected_len,
                bytes.len()
            )));
        }
        // Not finished: the process is still writing it (it backed more
        // blocks after the file was mapped), or it died and the file was cut
        // since. Either way the whole blocks in hand are consistent.
        let held = bytes.len() / BLOCK_SIZE;
        warnings.push(format!(
            "read while the process was still writing it (or after the file was cut): the header counts {backed} blocks, {held} were in the file when read; figures are as of then"
        ));
        backed = held;
    }
    let info = HeaderInfo {
        version,
        pid: header.pid,
        ppid: header.ppid,
        flags: header.flags,
        exit_code: (header.flags & FLAG_EXIT_CODE_VALID != 0).then_some(header.exit_code),
        hold_sample_period: header.hold_sample_period,
        start_unix_ns: header.start_unix_ns,
        start_mono_ns: header.start_mono_ns,
        end_mono_ns: header.end_mono_ns,
        dropped_records: header.dropped_records,
        dropped_ops: header.dropped_ops,
        max_blocks: header.max_blocks,
        blocks_reserved: header.blocks_reserved,
        tsc_khz: if header.flags & FLAG_CLOCK_TSC != 0 {
            header.tsc_khz
        } else {
            0
        },
        block_min_us: header.block_min_us,
        switches_lost: header.switches_lost,
        cpus: header.cpus,
        policy_min_wait_us: header.policy_min_wait_us,
        events_filtered: header.events_filtered,
        control: header.control,
        data_sample_every: header.data_sample_every.max(1),
        data_sample_first: header.data_sample_first,
        exe: String::from_utf8_lossy(&header.exe[..header.exe_len as usize]).into_owned(),
        confined_mono_ns: header.confined_mono_ns,
        own_calls_refused: header.own_calls_refused,
        cut_mono_ns: header.cut_mono_ns,
        shim_notes: shim_notes(&header),
    };
    let mut trace = Trace {
        header: info,
        threads: Vec::new(),
        locks: Vec::new(),
        destroys: Vec::new(),
        sites: Vec::new(),
        py_frames: Vec::new(),
        counters: Vec::new(),
        conds: Vec::new(),
        edges: Vec::new(),
        events: Events::default(),
        modules: Vec::new(),
        policy: None,
        snapshots: Vec::new(),
        snapshot_stacks: Vec::new(),
        access_summary: None,
        accesses: Vec::new(),
        site_ratios: Vec::new(),
        warnings,
    };

    // What earlier reads learned holds unless the flight recorder may be
    // reusing blocks (it begins once no block can be had: the trace full,
    // or the disk).
    let reusable = header.flags & (FLAG_EVENTS_OVERWRITTEN | FLAG_OUT_OF_SPACE | FLAG_DISK_FULL)
        == 0
        && header.blocks_reserved < header.max_blocks;
    blocks.begin(
        (header.pid, header.start_unix_ns, header.start_mono_ns),
        reusable,
    );

    // Look at the headers this read has not seen (see block_index.rs): the
    // record blocks join those the index keeps, read again every time; the
    // event blocks found now, as (lane, seq, block index), are merged into
    // the ones it knows.
    let mut fresh_events: Vec<(u32, u32, usize)> = Vec::new();
    for index in blocks.headers_to_read(backed) {
        tick();
        let block = &bytes[index * BLOCK_SIZE..(index + 1) * BLOCK_SIZE];
        // The writer stores `kind` last (release): read it first, then
        // the lane and sequence it publishes.
        let kind = u32_at(block, offset_of!(BlockHeader, kind));
        fence(Ordering::Acquire);
        let Some(bh) = read_pod::<BlockHeader>(block) else {
            blocks.unsettled(index);
            continue;
        };
        match kind {
            BLOCK_LANE => blocks.record_block((bh.lane, bh.seq, index)),
            BLOCK_EVENTS => fresh_events.push((bh.lane, bh.seq, index)),
            // Reserved, never written yet (or the disk refused it): looked
            // at again next time.
            0 => blocks.unsettled(index),
            other => {
                blocks.unsettled(index);
                trace.warnings.push(format!(
                    "block {index}: unknown block kind {other}, skipped"
                ));
            }
        }
    }
    let lane_blocks = blocks.record_blocks();
    let mut current_lane = None;
    let mut reading = Reading::default();
    for &(lane, _seq, index) in &lane_blocks {
        tick();
        if current_lane != Some(lane) {
            current_lane = Some(lane);
            reading.thread = None;
        }
        let Some(payload) = block_payload(bytes, index, &mut trace.warnings) else {
            continue;
        };
        read_records(&mut trace, payload, index, &mut reading);
    }
    // Names given to threads before the shim knew them (another thread
    // named one it had just created): their record may come before the
    // named thread's, in another lane. The latest thread of that pthread_t
    // with no name yet takes it.
    for r in reading.names_for_later {
        if let Some(t) = trace
            .threads
            .iter_mut()
            .rev()
            .find(|t| t.record.pthread == r.pthread && t.name.is_none())
        {
            t.name = Some(c_string(&r.name));
        }
    }
    // Event blocks: each lane's chain in order (after a flight-recorder
    // wrap only the most recent remain). Only where they are is kept here.
    let event_blocks = blocks.sorted_events(fresh_events);
    let mut lanes: Vec<Vec<(usize, usize)>> = Vec::new();
    let mut lane_ids: Vec<u32> = Vec::new();
    let mut last_lane = None;
    let mut finished = Vec::new();
    for (at, &((lane, _seq, index), used)) in event_blocks.iter().enumerate() {
        let used = if used != u32::MAX {
            used as usize
        } else {
            tick();
            let Some(payload) = block_payload(bytes, index, &mut trace.warnings) else {
                continue;
            };
            // Not its lane's last block: full for good.
            if event_blocks
                .get(at + 1)
                .is_some_and(|next| next.0 .0 == lane)
            {
                finished.push((at, payload.len()));
            }
            payload.len()
        };
        if last_lane != Some(lane) {
            last_lane = Some(lane);
            lanes.push(Vec::new());
            lane_ids.push(lane);
        }
        let start = index * BLOCK_SIZE + BLOCK_HEADER_SIZE;
        if let Some(blocks) = lanes.last_mut() {
            blocks.push((start, start + used));
        }
    }
    for (at, used) in finished {
        blocks.learn_finished(at, used);
    }
    blocks.end_read();
    trace.events = Events::new(source.clone(), lanes, lane_ids);
    Ok(trace)
}
