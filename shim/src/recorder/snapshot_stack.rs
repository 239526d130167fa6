//! The stacks of a snapshot's threads that sit in a system call outside
//! any recorded wait (a sleep, a read, a call the shim does not hook):
//! their published wait cannot name a site, so the snapshot keeps their
//! registers as the kernel gives them and the top of their stack, and the
//! analyzer unwinds it with the modules' call frame information.
//!
//! The thread may return from its call while its stack is copied; the
//! kernel's registers are read again afterwards, and a copy taken while
//! they changed is not written.

use super::lanes::Lane;
use super::{caller, modules, procfs};
use crate::sys;
use crate::text;
use core::cell::UnsafeCell;
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

/// Copies the stack of `tid`, seen in `call`, into snapshot `number`.
/// Only the thread taking a snapshot calls this (snapshots are taken one
/// at a time).
pub fn write(lane: &mut Lane, number: u32, tid: u32, call: InCall) {
    // The analyzer walks x86-64 stacks only.
    if !cfg!(target_arch = "x86_64") || call.sp == 0 || call.pc == 0 {
        return;
    }
    // SAFETY: only the one thread taking a snapshot uses the copy.
    let copy = unsafe { &mut *STACK_COPY.0.get() };
    let copied = sys::read_own_memory_prefix(call.sp, copy);
    if copied == 0 || in_call(tid) != Ok(Some(call)) {
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
        hdr: RecordHeader {
            kind: RecordKind::SnapshotStack as u16,
            size: align_record(core::mem::size_of::<SnapshotStackRecord>() + copied) as u16,
            aux: copied as u32,
        },
        number,
        tid,
        pc: call.pc,
        sp: call.sp,
        module_epoch: caller::epoch(),
        _pad: 0,
    };
    lane.append(&record, &copy[..copied]);
}
