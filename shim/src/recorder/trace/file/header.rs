//! The trace header's fields, read and updated in place by any thread:
//! flags, counts of what was lost, the exit, the shim's warnings, the
//! reader's control word.

use super::*;

pub fn header() -> Option<*mut FileHeader> {
    let base = BASE.load(Ordering::Acquire);
    (!base.is_null()).then_some(base.cast())
}

pub(super) fn header_u32(field: usize) -> Option<&'static AtomicU32> {
    let base = BASE.load(Ordering::Acquire);
    // SAFETY: `field` is an offset_of! a u32 field of FileHeader, which sits
    // at the start of the live mapping and is 4-aligned there.
    (!base.is_null()).then(|| unsafe { AtomicU32::from_ptr(base.add(field).cast()) })
}

pub(super) fn header_u64(field: usize) -> Option<&'static AtomicU64> {
    let base = BASE.load(Ordering::Acquire);
    // SAFETY: as above, for an 8-aligned u64 field.
    (!base.is_null()).then(|| unsafe { AtomicU64::from_ptr(base.add(field).cast()) })
}

pub fn set_flags(bits: u32) {
    if let Some(f) = header_u32(offset_of!(FileHeader, flags)) {
        f.fetch_or(bits, Ordering::Release);
    }
}

pub fn clear_flags(bits: u32) {
    if let Some(f) = header_u32(offset_of!(FileHeader, flags)) {
        f.fetch_and(!bits, Ordering::Release);
    }
}

/// The clock switched to the calibrated TSC (see `clock.rs`).
pub fn note_tsc(khz: u32) {
    if let Some(f) = header_u32(offset_of!(FileHeader, tsc_khz)) {
        f.store(khz, Ordering::Relaxed);
        set_flags(FLAG_CLOCK_TSC);
    }
}

pub fn set_exit_code(code: i32) {
    if let Some(f) = header_u32(offset_of!(FileHeader, exit_code)) {
        f.store(code as u32, Ordering::Relaxed);
        set_flags(FLAG_EXIT_CODE_VALID);
    }
}

pub fn set_end_time(ns: u64) {
    if let Some(f) = header_u64(offset_of!(FileHeader, end_mono_ns)) {
        f.store(ns, Ordering::Relaxed);
    }
    if let Some(f) = header_u64(offset_of!(FileHeader, own_calls_refused)) {
        f.store(sys::confined::refused(), Ordering::Relaxed);
    }
}

/// Keeps one of the shim's warnings in the header, a line of its own;
/// what does not fit is counted, not kept. Only atomics: safe in a signal
/// handler.
pub fn keep_warning(msg: &[u8]) {
    let base = BASE.load(Ordering::Acquire);
    let Some(len_word) = header_u32(offset_of!(FileHeader, shim_notes_len)) else {
        return;
    };
    let len = msg.len() + 1;
    let at = len_word.fetch_add(len as u32, Ordering::AcqRel) as usize;
    let kept = len.min(SHIM_NOTES_MAX.saturating_sub(at));
    if kept == 0 {
        return;
    }
    // SAFETY: bytes `at..at + kept` of the header's notes were claimed
    // above by this call alone and lie within them (the header is mapped
    // while BASE is set).
    unsafe {
        let to = base.add(offset_of!(FileHeader, shim_notes) + at);
        core::ptr::copy_nonoverlapping(msg.as_ptr(), to, kept.min(msg.len()));
        if kept > msg.len() {
            *to.add(msg.len()) = b'\n';
        }
    }
}

/// The program confined itself at `ns` (`flags`: `FLAG_CONFINED`,
/// `FLAG_CLOCK_COARSE`); the first time is kept.
pub fn note_confined(ns: u64, flags: u32) {
    if let Some(f) = header_u64(offset_of!(FileHeader, confined_mono_ns)) {
        let _ = f.compare_exchange(0, ns.max(1), Ordering::Relaxed, Ordering::Relaxed);
    }
    set_flags(flags);
}

pub fn count_dropped_record() {
    if let Some(f) = header_u64(offset_of!(FileHeader, dropped_records)) {
        f.fetch_add(1, Ordering::Relaxed);
    }
}

pub fn count_dropped_op() {
    if let Some(f) = header_u64(offset_of!(FileHeader, dropped_ops)) {
        f.fetch_add(1, Ordering::Relaxed);
    }
}

/// A wait event the policy left out.
pub fn count_filtered() {
    if let Some(f) = header_u32(offset_of!(FileHeader, events_filtered)) {
        let _ = f.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(v.saturating_add(1))
        });
    }
}

/// Context-switch records a thread's ring had no room for.
pub fn count_lost_switches(n: u64) {
    if let Some(f) = header_u32(offset_of!(FileHeader, switches_lost)) {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        let _ = f.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(v.saturating_add(n))
        });
    }
}

/// What a reader asked of this process (`CONTROL_*`, 0: nothing).
pub fn control() -> u32 {
    header_u32(offset_of!(FileHeader, control)).map_or(0, |f| f.load(Ordering::Acquire))
}

/// Processors the process may run on (0: unknown).
pub fn cpus() -> u32 {
    header_u32(offset_of!(FileHeader, cpus)).map_or(0, |f| f.load(Ordering::Relaxed))
}

pub fn pid() -> u32 {
    header_u32(offset_of!(FileHeader, pid)).map_or(0, |f| f.load(Ordering::Relaxed))
}

/// Whether the calling process is the one this trace records: not a child
/// that shares or copied the parent's memory (after `vfork`, or a clone
/// made without glibc's fork handlers). One system call: slow paths only.
/// Confined, the pid cannot be asked: then it is taken to be ours (a
/// confined program's vfork child that exits or execs is rare; a confined
/// program's end or exec that goes unrecorded would not be).
pub fn is_trace_process() -> bool {
    sys::getpid().is_none_or(|pid| pid == self::pid())
}
