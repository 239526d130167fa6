//! The stacks of a snapshot's threads that sit in a system call outside
//! any recorded wait (a sleep, a read, a call the shim does not hook), or
//! that run: no published wait names a site for them, so the snapshot
//! keeps their registers and the top of their stack, and the analyzer
//! unwinds it with the modules' call frame information.
//!
//! For a thread in a call, the kernel gives its registers in `/proc`; it
//! may return from its call while its stack is copied, so the registers
//! and its time on a processor are read again afterwards, and a copy taken
//! while either changed is not written. For a running thread, a perf event samples its registers and
//! stack while it runs in user space (a snapshot waits for such samples
//! 20 ms at most, all together).

use crate::recorder::base::caller;
use crate::recorder::base::procfs;
use crate::recorder::features::usage;
use crate::recorder::identities::modules;
use crate::recorder::tables::lanes::Lane;
use crate::recorder::trace::switch_ring;
use crate::sys;
use crate::text;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, Ordering};
use locksuit_format::*;

/// Where a thread was, by the kernel's `/proc/self/task/TID/syscall`.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct InCall {
    pub syscall: u64,
    pub sp: u64,
    pub pc: u64,
}

/// The thread's system call and its registers then; `Ok(None)` when it
/// runs in user space, `Err` when the kernel would not say.
pub fn in_call(tid: u32) -> Result<Option<InCall>, ()> {
    let mut buf = [0u8; 512];
    let call = procfs::read_task_file(tid, b"syscall", &mut buf).ok_or(())?;
    if call.starts_with(b"running") {
        return Ok(None);
    }
    // "NR ARG1 … ARG6 SP PC" (a thread in no call at all says "-1 SP PC").
    let mut fields = call
        .split(|&c| c == b' ' || c == b'\n')
        .filter(|f| !f.is_empty());
    let syscall = fields.next().and_then(|f| text::decimal(f, 9)).ok_or(())?;
    let mut address = || {
        fields
            .next()
            .and_then(|f| f.strip_prefix(b"0x"))
            .and_then(text::hex)
    };
    let mut args = 0;
    while args < 6 && address().is_some() {
        args += 1;
    }
    let (sp, pc) = (address().unwrap_or(0), address().unwrap_or(0));
    Ok(Some(InCall { syscall, sp, pc }))
}

struct StackCopy(UnsafeCell<[u8; SNAPSHOT_STACK_BYTES]>);
// SAFETY: used only by the thread taking a snapshot (one at a time).
unsafe impl Sync for StackCopy {}
static STACK_COPY: StackCopy = StackCopy(UnsafeCell::new([0; SNAPSHOT_STACK_BYTES]));
/// What is left of one snapshot's time for sampling running threads.
static SAMPLING_LEFT_NS: AtomicU64 = AtomicU64::new(0);
/// Time one snapshot may wait for running threads' samples, all together.
const SAMPLING_BUDGET_NS: u64 = 20_000_000;

/// A snapshot begins copying stacks.
pub fn begin() {
    SAMPLING_LEFT_NS.store(SAMPLING_BUDGET_NS, Ordering::Relaxed);
}

/// Where a snapshot's thread was: in a system call (with its time on a
/// processor read just before, if the kernel gave it), or running.
#[derive(Clone, Copy)]
pub enum Seen {
    InCall(InCall, Option<u64>),
    Running,
}

/// Copies the stack of `tid`, seen as `seen`, into snapshot `number`.
/// Only the thread taking a snapshot calls this (snapshots are taken one
/// at a time).
pub fn write(lane: &mut Lane, number: u32, tid: u32, seen: Seen) {
    // The analyzer walks x86-64 stacks only.
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    // SAFETY: only the one thread taking a snapshot uses the copy.
    let copy = unsafe { &mut *STACK_COPY.0.get() };
    let (call, flags, bp, copied) = match seen {
        Seen::InCall(call, cpu_ns) => {
            if call.sp == 0 || call.pc == 0 {
                return;
            }
            let copied = sys::read_own_memory_prefix(call.sp, copy);
            // Still in that call, and it never ran since it was seen in it:
            // a thread that loops may be back in the same call at the same
            // place, its stack rewritten in between.
            let stayed = in_call(tid) == Ok(Some(call))
                && cpu_ns.is_none_or(|before| usage::cpu_ns(tid) == Some(before));
            if !stayed {
                return;
            }
            (call, 0, 0, copied)
        }
        Seen::Running => {
            let mut left = SAMPLING_LEFT_NS.load(Ordering::Relaxed);
            let sample = switch_ring::sample_user_stack(tid, copy, &mut left);
            SAMPLING_LEFT_NS.store(left, Ordering::Relaxed);
            let Some(sample) = sample else {
                return;
            };
            let call = InCall {
                syscall: 0,
                sp: sample.sp,
                pc: sample.ip,
            };
            (call, SNAPSHOT_STACK_RUNNING, sample.bp, sample.copied)
        }
    };
    if copied == 0 {
        return;
    }
    // The walk needs every module its return addresses lie in; the map
    // has only those some site's chain reached. `_dl_find_object` takes no
    // lock, so each word of the copy is looked up (without it, the first
    // look-up records every module at once).
    modules::ensure_covered(lane, &[call.pc]);
    if modules::can_locate() {
        for word in copy[..copied].chunks_exact(8) {
            let word = u64::from_ne_bytes(word.try_into().unwrap_or([0; 8]));
            modules::ensure_covered(lane, &[word]);
        }
    }
    let record = SnapshotStackRecord {
        hdr: RecordHeader::with_body::<SnapshotStackRecord>(
            RecordKind::SnapshotStack,
            copied,
            copied as u32,
        ),
        number,
        tid,
        pc: call.pc,
        sp: call.sp,
        module_epoch: caller::epoch(),
        flags,
        bp,
    };
    lane.append(&record, &copy[..copied]);
}
