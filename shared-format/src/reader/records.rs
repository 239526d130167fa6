//! What each record in a lane's block becomes in a [`Trace`]: the walk
//! over a block's records, and one decoder per record kind. A malformed
//! record is skipped with a warning; the rest of the block is still read.

use super::{c_string, ModuleInfo, PyFrame, PySiteFrames, SiteInfo, ThreadInfo, Trace};
use crate::access::*;
use crate::layout::*;
use crate::policy::*;
use core::mem::size_of;
use std::sync::atomic::{fence, Ordering};

/// The committed records of block `index`, or `None` (with a warning when
/// the header claims more than a block holds).
pub(super) fn block_payload<'a>(
    bytes: &'a [u8],
    index: usize,
    warnings: &mut Vec<String>,
) -> Option<&'a [u8]> {
    let block = &bytes[index * BLOCK_SIZE..(index + 1) * BLOCK_SIZE];
    let used = read_pod::<BlockHeader>(block)?.used as usize;
    // `used` is stored after the records it counts (release).
    fence(Ordering::Acquire);
    if used > BLOCK_PAYLOAD {
        warnings.push(format!(
            "block {index}: claims {used} bytes of records, more than a block holds; block skipped"
        ));
        return None;
    }
    Some(&block[BLOCK_HEADER_SIZE..BLOCK_HEADER_SIZE + used])
}

/// What reading the records carries from one record to the next.
#[derive(Default)]
pub(super) struct Reading {
    /// The thread whose lane is being read (its index in `threads`).
    pub(super) thread: Option<usize>,
    /// Thread names whose thread was not read yet.
    pub(super) names_for_later: Vec<ThreadNameRecord>,
}

pub(super) fn read_records(trace: &mut Trace, payload: &[u8], block: usize, reading: &mut Reading) {
    let mut off = 0usize;
    while off + size_of::<RecordHeader>() <= payload.len() {
        let rest = &payload[off..];
        let Some(rh) = read_pod::<RecordHeader>(rest) else {
            break;
        };
        let size = rh.size as usize;
        if size < size_of::<RecordHeader>()
            || !size.is_multiple_of(RECORD_ALIGN)
            || size > rest.len()
        {
            trace.warnings.push(format!(
                "block {block} offset {off}: corrupt record size {size}; rest of block skipped"
            ));
            return;
        }
        let rec = &rest[..size];
        let ok = decode_record(trace, rh, rec, reading);
        if !ok {
            trace.warnings.push(format!(
                "block {block} offset {off}: malformed record of kind {}; skipped",
                rh.kind
            ));
        }
        off += size;
    }
}

/// Returns false if the record is malformed.
fn decode_record(trace: &mut Trace, rh: RecordHeader, rec: &[u8], reading: &mut Reading) -> bool {
    let current_thread = &mut reading.thread;
    let Some(kind) = RecordKind::from_u16(rh.kind) else {
        // A newer minor writer may add kinds; skip them.
        return true;
    };
    let thread_or_orphan = |trace: &mut Trace, current: &mut Option<usize>| -> usize {
        if let Some(t) = *current {
            return t;
        }
        // Records before any thread record: keep them under an unknown thread.
        trace.threads.push(ThreadInfo {
            record: ThreadRecord::default(),
            name: None,
        });
        trace
            .warnings
            .push("records found before their thread's introduction; attributed to tid 0".into());
        let t = trace.threads.len() - 1;
        *current = Some(t);
        t
    };
    match kind {
        RecordKind::Thread => {
            let Some(r) = read_pod::<ThreadRecord>(rec) else {
                return false;
            };
            let name = c_string(&r.name);
            trace.threads.push(ThreadInfo {
                record: r,
                name: (!name.is_empty()).then_some(name),
            });
            *current_thread = Some(trace.threads.len() - 1);
        }
        RecordKind::Lock => {
            let Some(r) = read_pod::<LockRecord>(rec) else {
                return false;
            };
            trace.locks.push(r);
        }
        RecordKind::LockDestroy => {
            let Some(r) = read_pod::<LockDestroyRecord>(rec) else {
                return false;
            };
            trace.destroys.push(r);
        }
        RecordKind::Site => {
            let Some(r) = read_pod::<SiteRecord>(rec) else {
                return false;
            };
            let depth = rh.aux as usize;
            if depth > MAX_CHAIN_DEPTH || site_record_size(depth) > rec.len() {
                return false;
            }
            let frames = rec[size_of::<SiteRecord>()..site_record_size(depth)]
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect();
            trace.sites.push(SiteInfo {
                id: r.id,
                frames,
                module_epoch: r.module_epoch,
            });
        }
        RecordKind::PyFrames => {
            let Some(r) = read_pod::<PyFramesRecord>(rec) else {
                return false;
            };
            let Some(frames) = py_frames(rh.aux as usize, rec, r.len as usize) else {
                return false;
            };
            trace.py_frames.push(PySiteFrames {
                site_id: r.site_id,
                frames,
            });
        }
        RecordKind::Counter => {
            let Some(r) = read_pod::<CounterRecord>(rec) else {
                return false;
            };
            let t = thread_or_orphan(trace, current_thread);
            trace.counters.push((t, r));
        }
        RecordKind::Cond => {
            let Some(r) = read_pod::<CondRecord>(rec) else {
                return false;
            };
            let t = thread_or_orphan(trace, current_thread);
            trace.conds.push((t, r));
        }
        RecordKind::Edge => {
            let Some(r) = read_pod::<EdgeRecord>(rec) else {
                return false;
            };
            let t = thread_or_orphan(trace, current_thread);
            trace.edges.push((t, r));
        }
        // Events live in event blocks of their own since version 3.
        RecordKind::Event => return false,
        RecordKind::Module => {
            let Some(r) = read_pod::<ModuleRecord>(rec) else {
                return false;
            };
            let len = rh.aux as usize;
            let start = size_of::<ModuleRecord>();
            if len > MODULE_PATH_MAX || start + len > rec.len() {
                return false;
            }
            trace.modules.push(ModuleInfo {
                bias: r.bias,
                start: r.start,
                end: r.end,
                epoch: r.epoch,
                path: String::from_utf8_lossy(&rec[start..start + len]).into_owned(),
                file_size: r.file_size,
                file_mtime_ns: r.file_mtime_ns,
                build_id: r.build_id[..(r.build_id_len as usize).min(BUILD_ID_MAX)].to_vec(),
            });
        }
        RecordKind::Policy => {
            let Some(r) = read_pod::<PolicyRecord>(rec) else {
                return false;
            };
            let start = size_of::<PolicyRecord>();
            let Some(text) = rec.get(start..start + rh.aux as usize) else {
                return false;
            };
            trace.policy = Some((r, String::from_utf8_lossy(text).into_owned()));
        }
        RecordKind::Snapshot => {
            let Some(r) = read_pod::<SnapshotRecord>(rec) else {
                return false;
            };
            let start = size_of::<SnapshotRecord>();
            let len = rh.aux as usize * size_of::<SnapshotThread>();
            if rh.aux as usize > SNAPSHOT_THREADS_PER_RECORD || start + len > rec.len() {
                return false;
            }
            let threads = rec[start..start + len]
                .chunks_exact(size_of::<SnapshotThread>())
                .filter_map(read_pod::<SnapshotThread>)
                .collect();
            trace.snapshots.push((r, threads));
        }
        RecordKind::SnapshotStack => {
            let Some(r) = read_pod::<SnapshotStackRecord>(rec) else {
                return false;
            };
            let start = size_of::<SnapshotStackRecord>();
            let len = rh.aux as usize;
            if len > SNAPSHOT_STACK_BYTES || start + len > rec.len() {
                return false;
            }
            trace
                .snapshot_stacks
                .push((r, rec[start..start + len].to_vec()));
        }
        RecordKind::AccessSummary => {
            let Some(r) = read_pod::<AccessSummaryRecord>(rec) else {
                return false;
            };
            trace.access_summary = Some(r);
        }
        RecordKind::Access => {
            let Some(r) = read_pod::<AccessRecord>(rec) else {
                return false;
            };
            trace.accesses.push(r);
        }
        RecordKind::SiteRatios => {
            let Some(r) = read_pod::<SiteRatiosRecord>(rec) else {
                return false;
            };
            trace.site_ratios.push(r);
        }
        RecordKind::ThreadName => {
            let Some(r) = read_pod::<ThreadNameRecord>(rec) else {
                return false;
            };
            let name = c_string(&r.name);
            // The most recent thread with that tid (or pthread_t) takes the name.
            let target = trace.threads.iter_mut().rev().find(|t| {
                (r.tid != 0 && t.record.tid == r.tid)
                    || (r.tid == 0 && t.record.pthread == r.pthread)
            });
            match target {
                Some(t) => t.name = Some(name),
                None if r.tid == 0 => reading.names_for_later.push(r),
                None => {}
            }
        }
    }
    true
}

/// The frames of a [`PyFramesRecord`]: `count` of them in the `len` bytes
/// after its head; `None` if they do not fit or their names are no UTF-8.
fn py_frames(count: usize, rec: &[u8], len: usize) -> Option<Vec<PyFrame>> {
    let body = rec.get(size_of::<PyFramesRecord>()..)?.get(..len)?;
    if count > MAX_PY_FRAMES {
        return None;
    }
    let mut frames = Vec::with_capacity(count);
    let mut at = 0usize;
    for _ in 0..count {
        let head = read_pod::<PyFrameHead>(body.get(at..)?)?;
        at += size_of::<PyFrameHead>();
        let (f, l) = (head.function_len as usize, head.file_len as usize);
        let function = std::str::from_utf8(body.get(at..at + f)?).ok()?.to_string();
        let file = std::str::from_utf8(body.get(at + f..at + f + l)?)
            .ok()?
            .to_string();
        at += f + l;
        frames.push(PyFrame {
            function,
            file,
            line: head.line,
        });
    }
    Some(frames)
}
