//! On-disk structures. Every struct here is `#[repr(C)]`, made only of
//! integers, and padded explicitly, so the writer can place it in mapped
//! memory and the reader can copy it out of a byte slice.
//!
//! Past 600 lines: it is the whole format, every record next to its flags,
//! so that one file says what a trace holds (split by record family in the
//! layout work of issue 35).

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
pub const FORMAT_VERSION: u32 = 15;
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
            _ => return None,
        })
    }
}

/// `ThreadRecord::flags`: the thread has ended.
pub const THREAD_ENDED: u32 = 1 << 0;
/// The thread is the process's main thread.
pub const THREAD_MAIN: u32 = 1 << 1;
/// The thread was started through the shim's `pthread_create`.
pub const THREAD_CREATED_TRACED: u32 = 1 << 2;
/// `cpu_ns` holds the thread's CPU time.
pub const THREAD_USAGE: u32 = 1 << 3;
/// `runnable_ns` holds its time waiting for a CPU.
pub const THREAD_RUNNABLE_KNOWN: u32 = 1 << 4;
/// `voluntary_switches` and `involuntary_switches` hold its switches.
pub const THREAD_SWITCHES_KNOWN: u32 = 1 << 5;

/// Introduces a thread on its lane; the records that follow on the same lane
/// belong to it. Updated in place: `end_ns`, `dropped`, `flags`, `name`,
/// `join_*`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadRecord {
    pub hdr: RecordHeader,
    pub tid: u32,
    /// tid of the thread that called `pthread_create`, 0 if unknown.
    pub parent_tid: u32,
    /// The thread's `pthread_t`, to attribute `pthread_setname_np` calls.
    pub pthread: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// This thread's operations that were not recorded.
    pub dropped: u64,
    pub joins: u64,
    pub join_wait_ns: u64,
    pub flags: u32,
    /// Sampled mean cost of one shim fast-path call on this thread, in
    /// picoseconds (0 = no sample; padding, always 0, before it was used).
    pub shim_call_ps: u32,
    pub name: [u8; THREAD_NAME_MAX],
    /// The wait in progress (`WAIT_*`; 0 = not waiting), written just
    /// before the thread blocks and cleared when it stops, so a reader of a
    /// live, hung or killed process's trace sees what each thread is
    /// blocked on. Written last, cleared first.
    pub wait_kind: u32,
    /// The lock, semaphore, condition variable or barrier waited for (its
    /// id), 0 for a join.
    pub wait_object: u32,
    /// The site of the waiting call, 0 if unknown.
    pub wait_site: u32,
    /// The tid that held the lock when the wait began (0 = unknown or not a
    /// lock); for a condition wait, the id of its mutex.
    pub wait_holder: u32,
    pub wait_since_ns: u64,
    /// A join: the `pthread_t` waited for.
    pub wait_target: u64,
    /// A timed wait's deadline (ns on the clock the caller named; 0 =
    /// untimed): a timed wait ends by itself, so it is never a deadlock.
    pub wait_deadline: u64,
    /// While waiting: the locks this thread holds (ids, innermost first,
    /// 0 = none) and the sites that took them, so a deadlock can be told
    /// from the trace alone: who holds what, taken where.
    pub wait_held: [u32; WAIT_HELD],
    pub wait_held_sites: [u32; WAIT_HELD],
    /// Time on a CPU (`THREAD_USAGE`), time runnable but waiting for a CPU
    /// (`THREAD_RUNNABLE_KNOWN`), and context switches, voluntary (it
    /// blocked) and involuntary (preempted) (`THREAD_SWITCHES_KNOWN`): read
    /// when the thread ended, or when the process exited.
    pub cpu_ns: u64,
    pub runnable_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// This thread's creation number in the process (from 1, in the order
    /// `pthread_create` was called; 0: not created through a traced
    /// `pthread_create`), the token its [`EVENT_STARTED`] and
    /// [`EVENT_EXITED`] carry (since version 12).
    pub create_serial: u32,
    pub _pad2: u32,
}

/// How many held locks a waiting thread publishes.
pub const WAIT_HELD: usize = 4;

/// `ThreadRecord::wait_kind`: blocked acquiring a lock or semaphore.
pub const WAIT_LOCK: u32 = 1;
/// Blocked in a condition wait.
pub const WAIT_COND: u32 = 2;
/// Blocked at a barrier.
pub const WAIT_BARRIER: u32 = 3;
/// Blocked joining a thread.
pub const WAIT_JOIN: u32 = 4;

/// `LockRecord` kind (in `RecordHeader::aux` bits 0..8).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    Mutex = 1,
    Rwlock = 2,
    Spin = 3,
    Sem = 4,
    Barrier = 5,
    Cond = 6,
}

impl ObjectKind {
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::Mutex,
            2 => Self::Rwlock,
            3 => Self::Spin,
            4 => Self::Sem,
            5 => Self::Barrier,
            6 => Self::Cond,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Mutex => "mutex",
            Self::Rwlock => "rwlock",
            Self::Spin => "spin",
            Self::Sem => "sem",
            Self::Barrier => "barrier",
            Self::Cond => "cond",
        }
    }
}

/// `LockRecord::origin`: created by an explicit `*_init` call.
pub const ORIGIN_INIT: u32 = 1;
/// Created on first use (a statically initialised object, or one whose init
/// happened before the shim was loaded).
pub const ORIGIN_FIRST_USE: u32 = 2;
/// Opened by name (`sem_open`).
pub const ORIGIN_OPEN: u32 = 3;

/// `LockRecord` attribute bits (in `RecordHeader::aux`): the object is
/// `PTHREAD_PROCESS_SHARED`, so other processes may engage it too.
pub const ATTR_PROCESS_SHARED: u32 = 1 << 0;
/// A robust mutex.
pub const ATTR_ROBUST: u32 = 1 << 1;
/// A priority-inheritance mutex.
pub const ATTR_PRIO_INHERIT: u32 = 1 << 2;
/// A priority-protection (ceiling) mutex.
pub const ATTR_PRIO_PROTECT: u32 = 1 << 3;
/// An rwlock that prefers writers (`PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP`):
/// a queued writer holds back new readers, so a read can wait behind a read.
pub const ATTR_PREFER_WRITER: u32 = 1 << 4;

/// A synchronisation object came into being: a new identity, even when the
/// address was used before. `hdr.aux` holds `ATTR_*` bits.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LockRecord {
    pub hdr: RecordHeader,
    pub id: u32,
    /// `ObjectKind` as a number.
    pub kind: u32,
    pub origin: u32,
    /// Mutex type (`PTHREAD_MUTEX_NORMAL`/`RECURSIVE`/`ERRORCHECK`/
    /// `ADAPTIVE_NP`) for mutexes, else `u32::MAX`.
    pub mutex_type: u32,
    pub address: u64,
    pub created_ns: u64,
    /// The site that initialised the object (`*_init`), or that first used
    /// it (a statically initialised one); 0 if unknown. Objects made at one
    /// line form a family, and name each other across runs.
    pub origin_site: u32,
    pub _pad: u32,
}

/// A synchronisation object was destroyed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LockDestroyRecord {
    pub hdr: RecordHeader,
    pub id: u32,
    pub _pad: u32,
    pub time_ns: u64,
}

/// A line of code seen for the first time, with the call chain that led
/// there the first time. `hdr.aux` = number of frames that follow the fixed
/// part, innermost first; frame 0 is the return address into the caller of
/// the interposed function.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SiteRecord {
    pub hdr: RecordHeader,
    pub id: u32,
    /// The module map's epoch when the chain was captured: its addresses
    /// belong to the modules recorded in that epoch or before.
    pub module_epoch: u32,
}

/// `CounterRecord` mode (in `RecordHeader::aux`): exclusive engagement.
pub const MODE_EXCLUSIVE: u32 = 0;
/// Shared (read) engagement of an rwlock.
pub const MODE_SHARED: u32 = 1;
/// A release that is not paired with an acquisition by the same thread: a
/// semaphore post. `engagements` counts posts, `task_switches` the posts
/// that found a waiter.
pub const MODE_POST: u32 = 2;

/// Per thread, per (lock, site, mode): what that line did with that lock.
/// Appended once, then updated in place by the owning thread only.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CounterRecord {
    pub hdr: RecordHeader,
    pub lock_id: u32,
    pub site_id: u32,
    // The fields every uncontended engagement writes come first, together:
    // one cache line of the record, not two.
    /// Successful acquisitions (trylocks and cond-wait re-acquisitions included).
    pub engagements: u64,
    /// Exclusive engagements by a different thread than the lock's previous
    /// owner (mutrace's "changed").
    pub owner_changes: u64,
    /// Engagements that caused a task switch (waited, made others wait, or
    /// handed the lock over across a condition wait/signal).
    pub task_switches: u64,
    /// Acquisitions that had to wait for another thread.
    pub contended: u64,
    pub wait_ns: u64,
    /// Re-acquisitions at the end of a condition wait (also in `engagements`).
    pub cond_reacquires: u64,
    /// trylock calls that failed with EBUSY.
    pub try_failures: u64,
    /// Timed acquisitions that gave up (ETIMEDOUT).
    pub timeouts: u64,
    /// Sum of the measured hold times.
    pub hold_ns: u64,
    /// Number of engagements whose hold time was measured.
    pub hold_samples: u64,
}

/// `EdgeRecord` flags (in `RecordHeader::aux`): the acquisition was a
/// trylock (it could not have blocked).
pub const EDGE_TRY: u32 = 1 << 0;
/// The lock already held was held shared (an rwlock read lock).
pub const EDGE_FROM_SHARED: u32 = 1 << 1;
/// The lock acquired was taken shared.
pub const EDGE_TO_SHARED: u32 = 1 << 2;
/// How many other held locks an edge remembers (see `EdgeRecord::gates`).
pub const EDGE_GATES: usize = 4;

/// Per thread, per (lock held, its site, lock acquired, its site, flags): a
/// lock-order edge, "acquired `to_lock` while holding `from_lock`". Made
/// the first time the thread takes it, then updated in place by that thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EdgeRecord {
    pub hdr: RecordHeader,
    pub from_lock: u32,
    pub to_lock: u32,
    /// The site that took `from_lock`, and the site taking `to_lock`.
    pub from_site: u32,
    pub to_site: u32,
    /// How often this thread took the edge.
    pub count: u64,
    pub first_ns: u64,
    /// Locks other than `from_lock` that this thread held every time it
    /// took the edge (0 = empty; at most [`EDGE_GATES`], innermost first at
    /// the first time): a cycle whose edges all share one such gate lock
    /// cannot deadlock.
    pub gates: [u32; EDGE_GATES],
}

/// Per thread, per (condition variable, site, mutex): waits and notifies.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CondRecord {
    pub hdr: RecordHeader,
    pub cond_id: u32,
    pub site_id: u32,
    /// Mutex passed to the wait, 0 for notify records.
    pub mutex_id: u32,
    pub _pad: u32,
    pub waits: u64,
    pub timeouts: u64,
    pub signals: u64,
    pub broadcasts: u64,
    /// Notifies that found at least one waiter.
    pub notifies_with_waiters: u64,
    pub wait_ns: u64,
}

/// A loaded module, for offline symbolization. `hdr.aux` = path length; the
/// path bytes follow, padded to [`RECORD_ALIGN`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ModuleRecord {
    pub hdr: RecordHeader,
    /// Load bias: runtime address minus the address in the ELF file.
    pub bias: u64,
    /// Runtime range of the module's mapping.
    pub start: u64,
    pub end: u64,
    /// The module map's epoch, bumped by every `dlclose`: a library loaded
    /// later at the same addresses is recorded again in a newer epoch.
    pub epoch: u64,
    /// The file's size in bytes and modification time (ns since 1970) when
    /// the module was recorded; 0 when unknown. With the build id they tell
    /// the analyzer whether the file it would symbolize against is still the
    /// one that ran.
    pub file_size: u64,
    pub file_mtime_ns: u64,
    /// The GNU build id of the loaded image (its first `build_id_len`
    /// bytes; 0 = the image has none).
    pub build_id: [u8; BUILD_ID_MAX],
    pub build_id_len: u32,
    pub _pad: u32,
}

/// Longest build id kept (GNU build ids are 20 bytes; some linkers make 16 or 32).
pub const BUILD_ID_MAX: usize = 32;

/// `pthread_setname_np` on some thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadNameRecord {
    pub hdr: RecordHeader,
    /// The named thread's tid when the shim knew it, else 0.
    pub tid: u32,
    pub _pad: u32,
    pub pthread: u64,
    pub name: [u8; THREAD_NAME_MAX],
}

/// `EventRecord` kinds (`RecordHeader::aux` bits 0..8).
///
/// A contended acquisition: asked at `time`, got the lock at `time2`.
/// `seq` / `seq2`: the lock's release sequence then; `other`: the owner when
/// it asked (0 if unknown); `deadline`: for a timed call, its absolute
/// deadline in ns of the clock it named (`CLOCK_REALTIME` for the
/// `timed*` calls), else 0.
pub const EVENT_BLOCKED: u32 = 1;
/// A release that found threads waiting. `time`: the release; `time2`: when
/// the hold began if it was timed (else 0); `seq2`: the sequence after this
/// release, equal to the `seq2` of the acquisition that followed it;
/// `other`: threads waiting; `deadline`: here, the shim's own slow-path time
/// that fell inside the (timed) hold, for overhead compensation.
pub const EVENT_RELEASED: u32 = 2;
/// A condition wait: from `time` to `time2`. `other`: the mutex's lock id;
/// `deadline`: absolute deadline in ns of the wait's clock (0 if untimed);
/// outcome in aux bits 8..16; `seq`/`seq2`: the condition's notify sequence
/// at the start and the end.
pub const EVENT_COND_WAIT: u32 = 3;
/// A signal or broadcast that found waiters. `other`: threads waiting;
/// `seq2`: the condition's notify sequence after it; aux bit 16: broadcast.
pub const EVENT_NOTIFY: u32 = 4;
/// A timed acquisition that gave up: asked at `time`, gave up at `time2`;
/// fields as for `EVENT_BLOCKED`.
pub const EVENT_TIMED_OUT: u32 = 5;
/// An uncontended acquisition at `time` (full tracing only); `seq2`: the
/// lock's release sequence then.
pub const EVENT_ACQUIRED: u32 = 6;
/// An acquisition with an unusual result, at `time`: `other` is the error
/// number (`EOWNERDEAD`: a robust mutex whose owner died was taken and must
/// be made consistent; `ENOTRECOVERABLE`: refused, the mutex is unusable;
/// `EDEADLK`: an error-checking mutex relocked by its owner; `EINTR`: a
/// semaphore wait a signal interrupted; any other error).
pub const EVENT_OUTCOME: u32 = 7;

/// A blocking call beyond the lock API ([`crate::calls::BlockingCall`]
/// in `seq`) that blocked from `time` to `time2` for at least the header's
/// `block_min_us`. `site_id`: the calling line; `other`: its file
/// descriptor (`u32::MAX` if it takes none); aux bits 8..16: the
/// descriptor's kind (`FD_*`); `lock_id` and `seq2`: the innermost lock the
/// thread held meanwhile and the site that took it (0: none); `deadline`:
/// how many locks it held.
pub const EVENT_CALL: u32 = 8;

/// `LOCKSUIT_SWITCHES=1`: the thread was switched out at `time` and back in
/// at `time2` (the kernel's context-switch records), for at least the
/// header's `block_min_us`. `other`: `SWITCH_*` flags; `site_id`: with
/// `SWITCH_FAULT`, the user call chain of the major page fault it waited
/// for (0 otherwise). Some fall inside waits the hooks recorded (the
/// analyzer drops those).
pub const EVENT_SWITCH: u32 = 9;
/// A `pthread_create` that succeeded, at `time` (taken before the call):
/// `seq2` is the new thread's creation number (`ThreadRecord::create_serial`).
pub const EVENT_CREATED: u32 = 10;
/// A created thread's first recorded moment, at `time`: `seq2` is its
/// creation number, `other` the creating thread's tid.
pub const EVENT_STARTED: u32 = 11;
/// A created thread's last recorded moment (its exit), at `time`: `seq2`
/// is its creation number.
pub const EVENT_EXITED: u32 = 12;
/// A `pthread_join` that returned 0: began at `time`, returned at `time2`;
/// `site_id`: the joining line; `deadline`: here, the `pthread_t` joined
/// (the analyzer finds its thread, and so its creation number, from the
/// thread records).
pub const EVENT_JOINED: u32 = 13;
/// A semaphore post that found threads waiting (even under full tracing,
/// a post that found none writes nothing), at `time`: `seq2` is the semaphore's post count after it,
/// `other` the threads waiting. A wait that blocked and saw the count move
/// past its `seq` follows post `seq + 1`.
pub const EVENT_POSTED: u32 = 14;

/// A thread arrived at a barrier, at `time`: `seq` and `seq2` are its
/// arrival's number (from 1, counted since the barrier's initialisation).
pub const EVENT_ARRIVED: u32 = 15;
/// A thread left a barrier: arrived at `time`, left at `time2`; `seq` and
/// `seq2` are the first and last arrival numbers of its round (the
/// barrier's count apart), all of which came before it; both its own
/// arrival's number when the count is unknown.
pub const EVENT_DEPARTED: u32 = 16;

/// A lock or condition variable used against its rules, at `time`, at
/// `site_id` (0: the line could not be found); aux bits 8..16: what was
/// done (`MISUSE_*`). `other`: the thread that held the lock then (0: none,
/// or not known), or for a condition destroyed with waiters, how many
/// waited; `seq`: that condition's notify sequence then. Read from the
/// lock itself (glibc's fields), not from what the shim tracked, so a hold
/// the shim lost is no misuse.
pub const EVENT_MISUSE: u32 = 17;

/// How much of a contended wait the lock's holder spent on a CPU, sampled
/// by the waiter (at most one wait a millisecond per thread), written just
/// after the wait's `EVENT_BLOCKED`: the wait from `time` to `time2`;
/// `other`: the holder; `deadline`: nanoseconds the holder ran meanwhile
/// (its thread CPU clock at both ends); `seq`/`seq2`: as the wait's, so
/// the hold it waited for is the one whose release left `seq2`. With
/// [`HOLDER_ENDED`] in aux bits 8..16 the holder had ended by the wait's
/// end, and `deadline` is its CPU time when the wait began (its thread
/// record has its CPU time at its end).
pub const EVENT_HOLDER: u32 = 18;
/// aux flag of an [`EVENT_HOLDER`]: the holder ended before the waiter
/// could read its CPU clock again.
pub const HOLDER_ENDED: u32 = 1 << 8;

/// An unlock of a lock nobody held.
pub const MISUSE_UNLOCK_UNLOCKED: u32 = 1;
/// An unlock by a thread other than the one holding the lock (`other`).
pub const MISUSE_UNLOCK_NOT_OWNER: u32 = 2;
/// A destroy of a lock that was held (by `other`, when known).
pub const MISUSE_DESTROY_HELD: u32 = 3;
/// A destroy of a condition variable threads were waiting on (`other`).
pub const MISUSE_DESTROY_WAITED: u32 = 4;
/// A condition wait with a mutex the thread did not hold (`other`: the
/// thread that held it, 0 if nobody did).
pub const MISUSE_WAIT_UNHELD: u32 = 5;

/// Switched out while runnable (preempted).
pub const SWITCH_PREEMPTED: u32 = 1 << 0;
/// Switched out just after a major page fault: waiting for it.
pub const SWITCH_FAULT: u32 = 1 << 1;

/// Condition-wait outcomes (`RecordHeader::aux` bits 8..16 of a wait event).
pub const OUTCOME_NOTIFIED: u32 = 1;
pub const OUTCOME_TIMED_OUT: u32 = 2;
/// Returned 0 although no notify happened since the wait began.
pub const OUTCOME_SPURIOUS: u32 = 3;
pub const OUTCOME_OWNER_DIED: u32 = 4;
pub const OUTCOME_ERROR: u32 = 5;
/// The waiting thread was cancelled (the mutex is held again).
pub const OUTCOME_CANCELLED: u32 = 6;

/// aux bit of a notify event: a broadcast.
pub const NOTIFY_BROADCAST: u32 = 1 << 16;

/// One synchronisation event. By default written only where the shim
/// already reads the clock (contended paths, waits, notifies that wake
/// someone), so the uncontended path stays clock-free;
/// `LOCKSUIT_EVENTS=all` adds every acquisition and release. Threads write their own lanes; the
/// analyzer orders a lock's events by its release sequence (`seq`, `seq2`),
/// never by emission order or timestamps alone.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EventRecord {
    pub hdr: RecordHeader,
    /// The lock (or condition variable).
    pub lock_id: u32,
    /// The site of the operation.
    pub site_id: u32,
    pub seq: u32,
    pub seq2: u32,
    pub other: u32,
    /// The thread that wrote it (event blocks are shared by the threads
    /// that use a lane in turn).
    pub tid: u32,
    /// Monotonic nanoseconds.
    pub time: u64,
    pub time2: u64,
    pub deadline: u64,
    /// The thread's time spent in the shim's own slow paths (site capture,
    /// trace growth) so far, for overhead compensation.
    pub shim_ns: u64,
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
    assert!(size_of::<CounterRecord>() == 96);
    assert!(size_of::<CondRecord>() == 72);
    assert!(size_of::<ModuleRecord>() == 96);
    assert!(size_of::<ThreadNameRecord>() == 40);
    assert!(size_of::<EventRecord>() == 64);
    assert!(site_record_size(MAX_CHAIN_DEPTH) <= u16::MAX as usize);
    assert!(module_record_size(MODULE_PATH_MAX) <= BLOCK_PAYLOAD);
};
