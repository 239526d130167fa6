//! What a recording policy (`LOCKSUIT_POLICY`) leaves in a trace: the
//! policy itself with what each of its rules left out ([`PolicyRecord`]),
//! and the snapshots its triggers took ([`SnapshotRecord`], with the raw
//! stacks of threads in unrecorded system calls, [`SnapshotStackRecord`]).

use crate::layout::{Pod, RecordHeader, THREAD_NAME_MAX};

/// `PolicyRecord::filtered` index: events of a thread not of interest.
pub const FILTER_THREAD: usize = 0;
/// Events on an object not of interest.
pub const FILTER_OBJECT: usize = 1;
/// Events at a site not of interest.
pub const FILTER_SITE: usize = 2;
/// Waits shorter than `min_wait_us`.
pub const FILTER_SHORT: usize = 3;
/// Waits that began with fewer than `min_waiters` threads waiting.
pub const FILTER_WAITERS: usize = 4;
/// Events thinned by `sample_every` or `sample_period_ms`.
pub const FILTER_SAMPLED: usize = 5;
/// Slots in `PolicyRecord::filtered` (two spare).
pub const FILTER_RULES: usize = 8;

/// Written once per process, when its first thread is registered, followed
/// by the policy file's text (`hdr.aux` bytes); the counts are updated in
/// place while the process runs, so a killed process's trace has them too.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PolicyRecord {
    pub hdr: RecordHeader,
    /// Events left out, by the rule that left them out (`FILTER_*`).
    pub filtered: [u64; FILTER_RULES],
    pub snapshots_taken: u32,
    /// Snapshots a trigger asked for that `snapshot_max` or
    /// `snapshot_interval_ms` (or one already being taken) refused.
    pub snapshots_refused: u32,
}

/// `SnapshotRecord::trigger`: the waiters on one object reached
/// `snapshot_waiters`, or a further `snapshot_step`.
pub const SNAPSHOT_WAITERS: u32 = 1;
/// A wait on an object of interest began while a processor was idle.
pub const SNAPSHOT_IDLE: u32 = 2;

/// Threads described by one [`SnapshotRecord`]; a snapshot of more threads
/// continues in further records with the same `number`.
pub const SNAPSHOT_THREADS_PER_RECORD: usize = 80;
/// Most threads one snapshot describes; the rest are counted as omitted.
pub const SNAPSHOT_THREADS_MAX: usize = 1000;
/// Held locks a snapshot lists per thread (innermost first).
pub const SNAPSHOT_HELD: usize = 8;

/// One snapshot (or one part of it), taken on the thread whose wait set
/// off the trigger; `hdr.aux` [`SnapshotThread`]s follow.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SnapshotRecord {
    pub hdr: RecordHeader,
    pub time: u64,
    /// Counts snapshots in the process from 1; the parts of one share it.
    pub number: u32,
    /// `SNAPSHOT_*`.
    pub trigger: u32,
    /// The object whose wait set it off, and its waiters then.
    pub object: u32,
    pub waiters: u32,
    /// The thread whose wait set it off, and the site of that wait.
    pub tid: u32,
    pub site: u32,
    /// Processors idle at that moment: those the process may use minus the
    /// system's runnable tasks (`u32::MAX`: unknown).
    pub idle_cpus: u32,
    /// Threads beyond `SNAPSHOT_THREADS_MAX` left out.
    pub threads_omitted: u32,
}

/// `SnapshotThread::syscall`: running in user space.
pub const SYSCALL_NONE: i32 = -1;
/// Not known (the kernel would not say).
pub const SYSCALL_UNKNOWN: i32 = -2;
/// `SnapshotThread::state` of the thread that took the snapshot: it is
/// about to block in the wait that set the snapshot off.
pub const SNAPSHOT_STATE_STARTING_WAIT: u32 = 1;
/// `SnapshotThread::held_count`: the thread's held locks could not be read.
pub const HELD_UNKNOWN: u32 = u32::MAX;

/// One thread in a snapshot: what the kernel says it is doing, the wait it
/// has in progress in a hooked call, the locks it holds, and its run
/// statistics so far.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SnapshotThread {
    pub tid: u32,
    /// The kernel's state letter (`R`, `S`, `D`, `T`, …; 0: unknown).
    pub state: u32,
    /// The system call it is in (`SYSCALL_NONE`, `SYSCALL_UNKNOWN`).
    pub syscall: i32,
    /// The wait in progress (`WAIT_*`, 0: none), as its thread published it.
    pub wait_kind: u32,
    pub wait_object: u32,
    pub wait_site: u32,
    pub wait_holder: u32,
    /// Entries of `held` in use, or `HELD_UNKNOWN`.
    pub held_count: u32,
    pub wait_since_ns: u64,
    /// The user-space instruction address the system call was made from (0: unknown).
    pub pc: u64,
    /// Lock ids held (innermost first) and the sites that took them.
    pub held: [u32; SNAPSHOT_HELD],
    pub held_sites: [u32; SNAPSHOT_HELD],
    pub name: [u8; THREAD_NAME_MAX],
    /// Which of the figures below the kernel gave: `THREAD_USAGE`,
    /// `THREAD_RUNNABLE_KNOWN`, `THREAD_SWITCHES_KNOWN` (as in `ThreadRecord`).
    pub usage_flags: u32,
    pub _pad: u32,
    /// Time on a processor, and runnable but waiting for one, so far (ns).
    pub cpu_ns: u64,
    pub runnable_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

/// Bytes of a thread's stack a snapshot copies, from its stack pointer up.
pub const SNAPSHOT_STACK_BYTES: usize = 8192;

/// The stack of a snapshot's thread that was in a system call outside any
/// recorded wait (a sleep, a read, a call the shim does not hook): its
/// registers as the kernel gives them (`/proc/self/task/TID/syscall`) and
/// `hdr.aux` bytes of its stack from `sp` up, unwound at report time with
/// the modules' call frame information. Or, with
/// [`SNAPSHOT_STACK_RUNNING`], of a thread running in user space, sampled
/// by a perf event.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SnapshotStackRecord {
    pub hdr: RecordHeader,
    /// The snapshot it belongs to (`SnapshotRecord::number`).
    pub number: u32,
    pub tid: u32,
    /// The instruction after the system call, and the stack pointer then.
    pub pc: u64,
    pub sp: u64,
    /// The module-map epoch the addresses belong to (see `SiteRecord`).
    pub module_epoch: u32,
    /// `SNAPSHOT_STACK_*`.
    pub flags: u32,
    /// The frame pointer, if `SNAPSHOT_STACK_RUNNING` (the kernel gives none
    /// for a thread in a system call).
    pub bp: u64,
}

/// `SnapshotStackRecord::flags`: sampled while running, so `pc` is the
/// instruction it was at (not one after a system call) and `bp` is known.
pub const SNAPSHOT_STACK_RUNNING: u32 = 1;

// SAFETY: plain integers with explicit padding; every bit pattern is valid.
unsafe impl Pod for PolicyRecord {}
// SAFETY: as above.
unsafe impl Pod for SnapshotStackRecord {}
// SAFETY: as above.
unsafe impl Pod for SnapshotRecord {}
// SAFETY: as above.
unsafe impl Pod for SnapshotThread {}

const _: () = {
    use core::mem::size_of;
    assert!(size_of::<PolicyRecord>() == 80);
    assert!(size_of::<SnapshotRecord>() == 48);
    assert!(size_of::<SnapshotThread>() == 168);
    assert!(size_of::<SnapshotStackRecord>() == 48);
    assert!(
        size_of::<SnapshotStackRecord>() + SNAPSHOT_STACK_BYTES <= crate::layout::BLOCK_PAYLOAD
    );
    assert!(
        size_of::<SnapshotRecord>() + SNAPSHOT_THREADS_PER_RECORD * size_of::<SnapshotThread>()
            <= crate::layout::BLOCK_PAYLOAD
    );
};
