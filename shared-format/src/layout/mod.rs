//! On-disk structures. Every struct here is `#[repr(C)]`, made only of
//! integers, and padded explicitly, so the writer can place it in mapped
//! memory and the reader can copy it out of a byte slice.
//!
//! This file holds the header, the blocks and what every record shares;
//! each record family is in its own file, every record next to its flags:
//! `threads`, `identities` (locks, sites, modules), `counters`, `events`.
//! The size guards stay here, at the end: one place says when a change is a
//! format change.

mod counters;
mod events;
mod identities;
mod python;
mod threads;

pub use counters::*;
pub use events::*;
pub use identities::*;
pub use python::*;
pub use threads::*;

/// First eight bytes of every trace.
pub const MAGIC: [u8; 8] = *b"LOCKSUIT";
/// Bumped on every incompatible change. The reader refuses other versions.
/// 2: module epochs, call-site contexts, events, owner changes.
/// 3: event blocks of their own, events name their thread, full tracing
///    and flight-recorder flags.
/// 4: counter fields reordered (those every engagement writes first).
/// 5: module records carry the file's identity (build id, size, mtime);
///    thread records carry the wait in progress; lock records the line
///    that initialised the lock; lock-order edges.
/// 6: blocking calls beyond the lock API (`EVENT_CALL`), context switches
///    (`EVENT_SWITCH`), the header's `block_min_us` and `switches_lost`.
/// 7: thread records carry CPU time, runnable time and context switches.
/// 8: the header's `cpus`.
/// 9: the header's policy fields.
/// 10: the policy's record (its text and what each rule left out) and
///     snapshots.
/// 11: data-level accesses (`AccessSummaryRecord`, `AccessRecord`).
/// 14: the header's `data_sample_every` and `data_sample_first`.
/// 16: futex words as objects (`ObjectKind::Futex`): their waits and wakes;
///     a site's Python frames (`PyFramesRecord`).
pub const FORMAT_VERSION: u32 = 16;
/// Written as a native `u32`; reads back as this value only on a
/// little-endian machine, which is the only layout the reader accepts.
pub const BYTE_ORDER_MARK: u32 = 0x0102_0304;
/// Size of every block, the header block included.
pub const BLOCK_SIZE: usize = 16 * 1024;
/// Longest executable path stored in the header.
pub const EXE_PATH_MAX: usize = 4096;
/// Longest thread name, as the kernel allows (15 bytes plus NUL).
pub const THREAD_NAME_MAX: usize = 16;
/// Most frames kept in one call chain.
pub const MAX_CHAIN_DEPTH: usize = 32;
/// Records are aligned to this many bytes inside a block.
pub const RECORD_ALIGN: usize = 8;

/// `FileHeader::flags`: the process exited normally (`exit`, return from
/// `main`, `_exit`, or the last thread's `pthread_exit`).
pub const FLAG_COMPLETE: u32 = 1 << 0;
/// The process image was replaced by `exec`; the trace ends there.
pub const FLAG_EXEC: u32 = 1 << 1;
/// The process was created by `fork` from a traced parent.
pub const FLAG_FORK_CHILD: u32 = 1 << 2;
/// The size cap was reached; later records were dropped and counted.
pub const FLAG_OUT_OF_SPACE: u32 = 1 << 3;
/// The disk refused space for a block; later records were dropped and counted.
pub const FLAG_DISK_FULL: u32 = 1 << 4;
/// `exit_code` holds the status passed to `exit`/`_exit`.
pub const FLAG_EXIT_CODE_VALID: u32 = 1 << 5;
/// Every acquisition and release was written as an event (`LOCKSUIT_EVENTS=all`).
pub const FLAG_EVENTS_ALL: u32 = 1 << 6;
/// Flight recorder: once the trace was full, threads overwrote their oldest
/// event blocks, so the events cover the most recent part of the run.
pub const FLAG_EVENTS_OVERWRITTEN: u32 = 1 << 7;
/// Timestamps after the first 10 ms were read from the invariant TSC,
/// calibrated against CLOCK_MONOTONIC (rate in `FileHeader::tsc_khz`); they
/// are still CLOCK_MONOTONIC nanoseconds.
pub const FLAG_CLOCK_TSC: u32 = 1 << 8;

/// `LOCKSUIT_SWITCHES=1`: a thread's context-switch ring was found full;
/// records may have been lost beyond `switches_lost`.
pub const FLAG_SWITCHES_FULL: u32 = 1 << 9;

/// A policy (`LOCKSUIT_POLICY`) was in force.
pub const FLAG_POLICY: u32 = 1 << 10;
/// The recording mode was switched while the process ran (`control`):
/// every operation was an event for part of the run only.
pub const FLAG_EVENTS_SWITCHED: u32 = 1 << 11;
/// Blocking calls beyond the lock API were judged by whether the kernel
/// switched the thread out during them (told by glibc's rseq area); without
/// it, by how long they took alone.
pub const FLAG_CALLS_BY_SWITCHES: u32 = 1 << 12;
/// The program confined itself with seccomp (`FileHeader::confined_mono_ns`
/// says when): from then on the shim made no system call of its own, so
/// the trace could not grow past the blocks set aside before, and what
/// needs a system call (thread CPU times, context switches, new files for
/// fork children) is missing.
pub const FLAG_CONFINED: u32 = 1 << 13;
/// Confined, the blocks set aside ran out: later records were dropped
/// (counted).
pub const FLAG_CONFINED_FULL: u32 = 1 << 14;
/// Timestamps came from `CLOCK_MONOTONIC_COARSE` (a thread ran where the
/// TSC faults: seccomp strict mode, `PR_SET_TSC`): durations are at the
/// kernel tick's resolution from `confined_mono_ns` on.
pub const FLAG_CLOCK_COARSE: u32 = 1 << 15;
/// Confined with no-new-privs set (a sandbox's filter): a program the
/// process execs inherits the filter and is not recorded (the shim could
/// not make its trace without calls the filter may kill).
pub const FLAG_CONFINED_SANDBOX: u32 = 1 << 16;
/// The file was cut (truncated) while the program ran, at
/// `FileHeader::cut_mono_ns`: what it held then is lost (its blocks read
/// as zeros, the header was put back as it was at the start, with its
/// counters from then); what was recorded after is there.
pub const FLAG_CUT: u32 = 1 << 17;
/// Recorded in lean mode (`LOCKSUIT_MODE=lean`): plain mutexes' engagements
/// were counted per lock and line with their contended waits, and nothing
/// that needs every hold watched (hold times of uncontended holds, lock
/// order, blocking under a lock, owner changes, call paths above the line).
pub const FLAG_LEAN: u32 = 1 << 18;
/// Recorded from outside by `locksuit attach` (the kernel's futex calls,
/// scheduler switches and, with `--locks`, uprobes), not by the shim: the
/// trace covers the attached period only (`start_mono_ns` to
/// `end_mono_ns`), holds no lock order or uncontended engagements of
/// locks other than pthread mutexes, and is whole (it was written at
/// once, after detaching). `shim_notes` say what it was made with and
/// what it cannot have.
pub const FLAG_ATTACHED: u32 = 1 << 19;

/// `FileHeader::control`: write every acquisition and release as an
/// event from now on (as `LOCKSUIT_EVENTS=all`).
pub const CONTROL_EVENTS_ALL: u32 = 1;
/// Back to events for contended operations only.
pub const CONTROL_EVENTS_CONTENDED: u32 = 2;

/// Block 0 of every trace.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FileHeader {
    /// [`MAGIC`]; written last by the shim so a half-made header is never valid.
    pub magic: [u8; 8],
    pub version: u32,
    pub byte_order: u32,
    pub header_size: u32,
    pub block_size: u32,
    /// Size cap, in blocks (header block included).
    pub max_blocks: u32,
    /// Blocks reserved so far (bump counter; header block included). A
    /// lane may hold a few reserved ahead and not yet written (all zeros).
    pub blocks_reserved: u32,
    /// One past the highest block that has disk space behind it. A
    /// finished trace shorter than this was truncated after the fact; a
    /// live one may simply have grown since its reader looked at its size.
    pub blocks_backed: u32,
    pub pid: u32,
    pub ppid: u32,
    /// `FLAG_*` bits.
    pub flags: u32,
    pub exit_code: i32,
    /// How often an uncontended engagement has its hold time measured (1 = always).
    pub hold_sample_period: u32,
    pub start_unix_ns: u64,
    pub start_mono_ns: u64,
    pub end_mono_ns: u64,
    /// Records that could not be written for lack of space.
    pub dropped_records: u64,
    /// Operations that were passed through unrecorded (tables full, nesting too deep).
    pub dropped_ops: u64,
    pub exe_len: u32,
    /// Calibrated TSC rate in kHz when `FLAG_CLOCK_TSC` is set, else 0.
    /// (Padding before version 3 had this field, always written as 0.)
    pub tsc_khz: u32,
    /// Blocking calls (`EVENT_CALL`) were recorded when they blocked at
    /// least this many microseconds (`LOCKSUIT_BLOCK_MIN_US`).
    pub block_min_us: u32,
    /// `LOCKSUIT_SWITCHES=1`: context-switch records the kernel had no room
    /// for in a thread's ring (saturating).
    pub switches_lost: u32,
    /// Processors the process could run on when the shim started (its CPU
    /// affinity), for the processors idle while threads waited.
    pub cpus: u32,
    /// `LOCKSUIT_POLICY`: its `min_wait_us` (0: none), and the wait events
    /// it left out (saturating).
    pub policy_min_wait_us: u32,
    pub events_filtered: u32,
    /// Written by a reader (`locksuit top`) to steer a running process
    /// (`CONTROL_*`; 0: nothing asked); the shim reads it on its slow paths
    /// and applies it (a reserved word, always 0, before version 11).
    pub control: u32,
    /// Programs built with `locksuit cc` (`LOCKSUIT_DATA_SAMPLE`): each
    /// line's engagements of a lock on a thread had their accesses
    /// recorded for the first `data_sample_first`, then one in
    /// `data_sample_every` (1: every engagement).
    pub data_sample_every: u32,
    pub data_sample_first: u32,
    pub exe: [u8; EXE_PATH_MAX],
    /// When the program confined itself (`FLAG_CONFINED`) or lost its TSC
    /// (`FLAG_CLOCK_COARSE`), monotonic; 0 if it never did.
    pub confined_mono_ns: u64,
    /// The shim's own system calls it did not make because the program
    /// was confined.
    pub own_calls_refused: u64,
    /// When the file was cut under the program (`FLAG_CUT`), monotonic.
    pub cut_mono_ns: u64,
    /// Bytes of `shim_notes` claimed (may exceed [`SHIM_NOTES_MAX`]: what
    /// did not fit was left out).
    pub shim_notes_len: u32,
    pub _reserved: u32,
    /// The shim's one-line warnings for this process, each ending in a
    /// newline, whether or not it also wrote them on stderr
    /// (`LOCKSUIT_QUIET=1`): the report says them.
    pub shim_notes: [u8; SHIM_NOTES_MAX],
}

/// Room for the shim's warnings in the header.
pub const SHIM_NOTES_MAX: usize = 2048;

/// `BlockHeader::kind` of a lane block: thread, lock, site, module and
/// counter records, never overwritten.
pub const BLOCK_LANE: u32 = 1;
/// `BlockHeader::kind` of an event block: [`EventRecord`]s only, in their own
/// per-lane chain (`seq` counts event blocks), which the flight recorder may
/// overwrite oldest first.
pub const BLOCK_EVENTS: u32 = 2;

/// Start of every block after the header block.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BlockHeader {
    /// `BLOCK_LANE`, or 0 for a block that was reserved but never written.
    pub kind: u32,
    pub lane: u32,
    /// Position of this block in its lane (0, 1, 2, …).
    pub seq: u32,
    /// Bytes of records committed after this header; stored with release
    /// ordering after the record bytes, so a reader never sees half a record.
    pub used: u32,
}

pub const BLOCK_HEADER_SIZE: usize = core::mem::size_of::<BlockHeader>();
/// Room for records in one block.
pub const BLOCK_PAYLOAD: usize = BLOCK_SIZE - BLOCK_HEADER_SIZE;

/// Every record starts with this.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RecordHeader {
    /// `RecordKind` as a number.
    pub kind: u16,
    /// Whole record size in bytes, a multiple of [`RECORD_ALIGN`].
    pub size: u16,
    /// Meaning depends on the kind (chain depth, path length, mode…).
    pub aux: u32,
}

impl RecordHeader {
    /// The header of a record of type `T` followed by `body` bytes of its
    /// own (a path, a copied stack, frames' text), its size rounded up to
    /// [`RECORD_ALIGN`].
    pub const fn with_body<T>(kind: RecordKind, body: usize, aux: u32) -> RecordHeader {
        RecordHeader {
            kind: kind as u16,
            size: align_record(core::mem::size_of::<T>() + body) as u16,
            aux,
        }
    }
}

#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    Thread = 1,
    Lock = 2,
    LockDestroy = 3,
    Site = 4,
    Counter = 5,
    Cond = 6,
    Module = 7,
    ThreadName = 8,
    Event = 9,
    Edge = 10,
    /// [`PolicyRecord`](crate::PolicyRecord) and the policy's text.
    Policy = 11,
    /// [`SnapshotRecord`](crate::SnapshotRecord) and its threads.
    Snapshot = 12,
    /// [`AccessSummaryRecord`](crate::AccessSummaryRecord).
    AccessSummary = 13,
    /// [`AccessRecord`](crate::AccessRecord).
    Access = 14,
    /// [`SiteRatiosRecord`](crate::SiteRatiosRecord).
    SiteRatios = 15,
    /// [`SnapshotStackRecord`](crate::SnapshotStackRecord) and its stack bytes.
    SnapshotStack = 16,
    /// [`PyFramesRecord`](crate::PyFramesRecord) and its frames.
    PyFrames = 17,
}

impl RecordKind {
    pub fn from_u16(v: u16) -> Option<Self> {
        Some(match v {
            1 => Self::Thread,
            2 => Self::Lock,
            3 => Self::LockDestroy,
            4 => Self::Site,
            5 => Self::Counter,
            6 => Self::Cond,
            7 => Self::Module,
            8 => Self::ThreadName,
            9 => Self::Event,
            10 => Self::Edge,
            11 => Self::Policy,
            12 => Self::Snapshot,
            13 => Self::AccessSummary,
            14 => Self::Access,
            15 => Self::SiteRatios,
            16 => Self::SnapshotStack,
            17 => Self::PyFrames,
            _ => return None,
        })
    }
}

/// Marker for plain-integer structs that may be copied from any bytes.
///
/// # Safety
/// Implementors must be `#[repr(C)]`, contain only integers and arrays of
/// integers, and have no implicit padding.
pub unsafe trait Pod: Copy + 'static {}

// SAFETY: all of these are repr(C) structs of integers with explicit padding
// (checked by the size assertions below).
unsafe impl Pod for FileHeader {}
// SAFETY: see above.
unsafe impl Pod for BlockHeader {}
// SAFETY: see above.
unsafe impl Pod for RecordHeader {}
// SAFETY: see above.
unsafe impl Pod for ThreadRecord {}
// SAFETY: see above.
unsafe impl Pod for LockRecord {}
// SAFETY: see above.
unsafe impl Pod for EdgeRecord {}
// SAFETY: see above.
unsafe impl Pod for LockDestroyRecord {}
// SAFETY: see above.
unsafe impl Pod for SiteRecord {}
// SAFETY: see above.
unsafe impl Pod for PyFramesRecord {}
// SAFETY: see above.
unsafe impl Pod for PyFrameHead {}
// SAFETY: see above.
unsafe impl Pod for CounterRecord {}
// SAFETY: see above.
unsafe impl Pod for CondRecord {}
// SAFETY: see above.
unsafe impl Pod for ModuleRecord {}
// SAFETY: see above.
unsafe impl Pod for ThreadNameRecord {}
// SAFETY: see above.
unsafe impl Pod for EventRecord {}

/// Copies a `T` out of the front of `bytes`, or `None` if there are too few.
pub fn read_pod<T: Pod>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < core::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: length checked above; T is Pod, so every bit pattern is a valid
    // T, and read_unaligned has no alignment requirement.
    Some(unsafe { core::ptr::read_unaligned(bytes.as_ptr() as *const T) })
}

/// Rounds a record size up to [`RECORD_ALIGN`].
pub const fn align_record(size: usize) -> usize {
    (size + RECORD_ALIGN - 1) & !(RECORD_ALIGN - 1)
}

/// Size of a site record with `depth` frames.
pub const fn site_record_size(depth: usize) -> usize {
    core::mem::size_of::<SiteRecord>() + depth * 8
}

/// Size of a module record whose path is `path_len` bytes.
pub const fn module_record_size(path_len: usize) -> usize {
    align_record(core::mem::size_of::<ModuleRecord>() + path_len)
}

/// Longest module path that fits in a record.
pub const MODULE_PATH_MAX: usize = 1024;

// Layout guards: a change here is a format change and needs a version bump.
const _: () = {
    use core::mem::size_of;
    assert!(size_of::<FileHeader>() == 168 + EXE_PATH_MAX + SHIM_NOTES_MAX);
    assert!(size_of::<FileHeader>() <= BLOCK_SIZE);
    assert!(size_of::<BlockHeader>() == 16);
    assert!(size_of::<RecordHeader>() == 8);
    assert!(size_of::<ThreadRecord>() == 200);
    assert!(size_of::<LockRecord>() == 48);
    assert!(size_of::<EdgeRecord>() == 56);
    assert!(size_of::<LockDestroyRecord>() == 24);
    assert!(size_of::<SiteRecord>() == 16);
    assert!(size_of::<PyFramesRecord>() == 16);
    assert!(size_of::<PyFrameHead>() == 8);
    assert!(size_of::<CounterRecord>() == 96);
    assert!(size_of::<CondRecord>() == 72);
    assert!(size_of::<ModuleRecord>() == 96);
    assert!(size_of::<ThreadNameRecord>() == 40);
    assert!(size_of::<EventRecord>() == 64);
    assert!(site_record_size(MAX_CHAIN_DEPTH) <= u16::MAX as usize);
    assert!(module_record_size(MODULE_PATH_MAX) <= BLOCK_PAYLOAD);
};
