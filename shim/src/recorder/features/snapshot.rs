//! Snapshots, a policy's call-outs: when the waiters on one object reach
//! `snapshot_waiters` (and then each further `snapshot_step`), or a wait on
//! an object of interest begins while a processor is idle, the thread whose
//! wait set it off writes down every thread of the process: what the
//! kernel says it is doing, the wait it has in progress (published in its
//! thread record), the locks it holds (read from its held-lock stack) and
//! its run statistics so far (`usage`), with the sites, so every call
//! chain is in the trace; threads outside a recorded wait get their stack
//! copied (`snapshot_stack`). At most `snapshot_max`, at most one per
//! `snapshot_interval_ms`.
//!
//! Runs only on the contended path, and only under a policy with triggers.

use crate::policy::{self, Triggers};
use crate::recorder::base::procfs;
use crate::recorder::features::filter;
use crate::recorder::features::snapshot_stack::{self, Seen};
use crate::recorder::features::usage;
use crate::recorder::identities::interest;
use crate::recorder::tables::held::HeldStack;
use crate::recorder::tables::lanes::{self, Lane};
use crate::recorder::trace::file;
use crate::sys;
use crate::text;
use core::cell::UnsafeCell;
use core::ptr::{addr_of, read_volatile};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use locksuit_format::*;

// The published held locks fit a snapshot's.
const _: () = assert!(WAIT_HELD <= SNAPSHOT_HELD);

/// Per object with waiters: the waiter count at its last snapshot.
const LEVELS: usize = 1024;
static LEVEL_IDS: [AtomicU32; LEVELS] = [const { AtomicU32::new(0) }; LEVELS];
static LEVEL_AT: [AtomicU32; LEVELS] = [const { AtomicU32::new(0) }; LEVELS];

static TAKEN: AtomicU32 = AtomicU32::new(0);
static LAST_NS: AtomicU64 = AtomicU64::new(0);
static LAST_IDLE_CHECK_NS: AtomicU64 = AtomicU64::new(0);
/// One snapshot at a time: it fills the one buffer below.
static BUSY: AtomicBool = AtomicBool::new(false);

/// The threads of the snapshot being taken, and where each one was when
/// its stack is to be copied (`None` for those whose stack needs no copy).
struct Buffer(UnsafeCell<[SnapshotThread; SNAPSHOT_THREADS_MAX]>);
struct Calls(UnsafeCell<[Option<Seen>; SNAPSHOT_THREADS_MAX]>);
// SAFETY: used only by the thread that set BUSY.
unsafe impl Sync for Buffer {}
// SAFETY: as above.
unsafe impl Sync for Calls {}
static CALLS: Calls = Calls(UnsafeCell::new([None; SNAPSHOT_THREADS_MAX]));
static BUFFER: Buffer = Buffer(UnsafeCell::new(
    [SnapshotThread {
        tid: 0,
        state: 0,
        syscall: 0,
        wait_kind: 0,
        wait_object: 0,
        wait_site: 0,
        wait_holder: 0,
        held_count: 0,
        wait_since_ns: 0,
        pc: 0,
        held: [0; SNAPSHOT_HELD],
        held_sites: [0; SNAPSHOT_HELD],
        name: [0; THREAD_NAME_MAX],
        usage_flags: 0,
        _pad: 0,
        cpu_ns: 0,
        runnable_ns: 0,
        voluntary_switches: 0,
        involuntary_switches: 0,
    }; SNAPSHOT_THREADS_MAX],
));

/// In a fork child: its trace starts with no snapshots.
pub fn reset_after_fork() {
    TAKEN.store(0, Ordering::Relaxed);
    LAST_NS.store(0, Ordering::Relaxed);
    LAST_IDLE_CHECK_NS.store(0, Ordering::Relaxed);
    BUSY.store(false, Ordering::Relaxed);
    for (id, at) in LEVEL_IDS.iter().zip(&LEVEL_AT) {
        id.store(0, Ordering::Relaxed);
        at.store(0, Ordering::Relaxed);
    }
}

/// What set a snapshot off.
pub struct Cause {
    pub object: u32,
    pub site: u32,
    /// Threads waiting for the object now, the caller included.
    pub waiters: u32,
    pub now: u64,
}

/// A thread (whose lane is `lane`) began waiting: take a snapshot if a
/// trigger says so.
pub fn on_wait_begin(lane: *mut Lane, cause: &Cause) {
    let Some(t) = policy::triggers() else { return };
    let waiters_due =
        t.waiters != 0 && cause.waiters >= t.waiters && level_due(&t, cause).is_some();
    // Past the limits a snapshot that was due is refused (and counted);
    // the idle trigger does not even read /proc then.
    if !allowed(&t, cause.now) {
        if waiters_due {
            filter::count_snapshot(false);
        }
        return;
    }
    let idle_due =
        !waiters_due && t.on_idle && interest::object(cause.object) && idle_check_due(cause.now);
    if !waiters_due && !idle_due {
        return;
    }
    // One snapshot at a time: one that was due finds another being taken
    // is refused, and leaves the object's level for a later waiter.
    if BUSY.swap(true, Ordering::Acquire) {
        return filter::count_snapshot(false);
    }
    if let Some((trigger, idle)) = trigger(&t, cause, waiters_due) {
        let number = TAKEN.fetch_add(1, Ordering::Relaxed) + 1;
        LAST_NS.store(cause.now, Ordering::Relaxed);
        // Deep work (every thread's state, stacks copied): on the lane's
        // own stack.
        // SAFETY: the calling thread's own lane.
        let id = unsafe { (*lane).id };
        lanes::on_stack_of(id, || {
            let idle = if idle == u32::MAX { idle_cpus() } else { idle };
            take(lane, cause, (number, trigger, idle));
        });
        filter::count_snapshot(true);
    }
    BUSY.store(false, Ordering::Release);
}

/// The object's level, if its waiters are a snapshot's worth past it.
fn level_due(t: &Triggers, cause: &Cause) -> Option<&'static AtomicU32> {
    let level = level_of(cause.object)?;
    let last = level.load(Ordering::Relaxed);
    let due = if last == 0 {
        t.waiters
    } else {
        last.saturating_add(t.step)
    };
    (cause.waiters >= due).then_some(level)
}

/// `/proc/loadavg` is read at most once per 10 ms for the idle trigger.
fn idle_check_due(now: u64) -> bool {
    let last = LAST_IDLE_CHECK_NS.load(Ordering::Relaxed);
    now.saturating_sub(last) >= 10_000_000
        && LAST_IDLE_CHECK_NS
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

/// Which trigger fires for this wait (under BUSY), with the idle
/// processors if they were read.
fn trigger(t: &Triggers, cause: &Cause, waiters_due: bool) -> Option<(u32, u32)> {
    if waiters_due {
        // Checked again under BUSY: another snapshot may have moved it.
        let level = level_due(t, cause)?;
        level.store(cause.waiters, Ordering::Relaxed);
        return Some((SNAPSHOT_WAITERS, u32::MAX));
    }
    let idle = idle_cpus();
    (idle != 0 && idle != u32::MAX).then_some((SNAPSHOT_IDLE, idle))
}

fn allowed(t: &Triggers, now: u64) -> bool {
    let last = LAST_NS.load(Ordering::Relaxed);
    TAKEN.load(Ordering::Relaxed) < t.max
        && (last == 0 || t.interval_ns == 0 || now.saturating_sub(last) >= t.interval_ns)
}

/// The object's level (waiters at its last snapshot), claimed on first use.
fn level_of(object: u32) -> Option<&'static AtomicU32> {
    if object == 0 {
        return None;
    }
    let home = (object as usize).wrapping_mul(0x9e37_79b9) % LEVELS;
    for i in 0..16 {
        let at = (home + i) % LEVELS;
        let id = LEVEL_IDS[at].load(Ordering::Acquire);
        if id == object {
            return Some(&LEVEL_AT[at]);
        }
        if id == 0 {
            match LEVEL_IDS[at].compare_exchange(0, object, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(&LEVEL_AT[at]),
                Err(now) if now == object => return Some(&LEVEL_AT[at]),
                Err(_) => continue,
            }
        }
    }
    None
}

/// Processors idle now: those the process may use minus the system's
/// runnable tasks (`/proc/loadavg`, which counts this thread); `u32::MAX`
/// if unknown.
fn idle_cpus() -> u32 {
    let mut buf = [0u8; 128];
    let cpus = file::cpus();
    let Some(loadavg) = procfs::read(c"/proc/loadavg", &mut buf) else {
        return u32::MAX;
    };
    // "0.12 0.08 0.01 RUNNING/TOTAL LAST_PID"
    let field = loadavg.split(|&c| c == b' ').nth(3).unwrap_or(&[]);
    let running = field
        .split(|&c| c == b'/')
        .next()
        .and_then(|d| text::decimal(d, 9))
        .map(|v| v as u32);
    match running {
        Some(running) if cpus != 0 => cpus.saturating_sub(running),
        _ => u32::MAX,
    }
}

fn take(lane: *mut Lane, cause: &Cause, (number, trigger, idle): (u32, u32, u32)) {
    // SAFETY: only the thread that set BUSY uses the buffers.
    let threads = unsafe { &mut *BUFFER.0.get() };
    // SAFETY: as above.
    let calls = unsafe { &mut *CALLS.0.get() };
    let mut count = 0;
    let mut omitted = 0u32;
    // SAFETY: reading our own lane's tid (not borrowed mutably here).
    let own_tid = unsafe { (*lane).tid };
    snapshot_stack::begin();
    lanes::for_each_active(|other| {
        if count == threads.len() {
            omitted = omitted.saturating_add(1);
            return;
        }
        (threads[count], calls[count]) = describe(other, other.tid == own_tid);
        // A thread in a call is copied at once: one that sleeps briefly
        // (a 1 ms poll) would have left its call by the time every other
        // thread was described, and its copy would be dropped. Running
        // threads are sampled after, within one budget for all.
        if let Some(seen @ Seen::InCall(..)) = calls[count] {
            if other.tid != own_tid {
                // SAFETY: the calling thread's own lane; `other` is another
                // thread's, the only lane borrowed here.
                snapshot_stack::write(unsafe { &mut *lane }, number, other.tid, seen);
                calls[count] = None;
            }
        }
        count += 1;
    });
    let record = SnapshotRecord {
        hdr: RecordHeader {
            kind: RecordKind::Snapshot as u16,
            size: 0,
            aux: 0,
        },
        time: cause.now,
        number,
        trigger,
        object: cause.object,
        waiters: cause.waiters,
        tid: 0,
        site: cause.site,
        idle_cpus: idle,
        threads_omitted: omitted,
    };
    // SAFETY: the calling thread's own lane, no longer borrowed elsewhere.
    let lane = unsafe { &mut *lane };
    let mut parts = threads[..count]
        .chunks(SNAPSHOT_THREADS_PER_RECORD)
        .peekable();
    if parts.peek().is_none() {
        write_part(lane, record, &[]);
    }
    for part in parts {
        write_part(lane, record, part);
    }
    for (thread, seen) in threads[..count].iter().zip(&calls[..count]) {
        if let Some(seen) = *seen {
            snapshot_stack::write(lane, number, thread.tid, seen);
        }
    }
}

fn write_part(lane: &mut Lane, mut record: SnapshotRecord, threads: &[SnapshotThread]) {
    record.tid = lane.tid;
    record.hdr = RecordHeader::with_body::<SnapshotRecord>(
        RecordKind::Snapshot,
        core::mem::size_of_val(threads),
        threads.len() as u32,
    );
    // SAFETY: plain integers; viewed as the bytes they are.
    let bytes = unsafe {
        core::slice::from_raw_parts(
            threads.as_ptr().cast::<u8>(),
            core::mem::size_of_val(threads),
        )
    };
    lane.append(&record, bytes);
}

/// One thread, as seen from another (`own`: the thread taking the
/// snapshot, which is about to block; the kernel would only see it read
/// the files below), and where it was if its stack is worth copying: it
/// runs, or is in a call, but not in a wait whose site says where.
fn describe(lane: &Lane, own: bool) -> (SnapshotThread, Option<Seen>) {
    let mut s = SnapshotThread {
        tid: lane.tid,
        syscall: SYSCALL_UNKNOWN,
        ..Default::default()
    };
    let t = lane.thread;
    if !t.is_null() {
        // SAFETY: a live thread record in the mapping; its thread publishes
        // the wait fields before the kind (Release) and clears the kind
        // first, so a kind read with Acquire vouches for the fields.
        unsafe {
            s.name = read_volatile(addr_of!((*t).name));
            s.wait_kind =
                AtomicU32::from_ptr(addr_of!((*t).wait_kind).cast_mut()).load(Ordering::Acquire);
            if s.wait_kind != 0 {
                s.wait_object = read_volatile(addr_of!((*t).wait_object));
                s.wait_site = read_volatile(addr_of!((*t).wait_site));
                s.wait_holder = read_volatile(addr_of!((*t).wait_holder));
                s.wait_since_ns = read_volatile(addr_of!((*t).wait_since_ns));
                let held = read_volatile(addr_of!((*t).wait_held));
                let sites = read_volatile(addr_of!((*t).wait_held_sites));
                let n = held.iter().take_while(|&&l| l != 0).count();
                s.held[..n].copy_from_slice(&held[..n]);
                s.held_sites[..n].copy_from_slice(&sites[..n]);
                s.held_count = n as u32;
                // The thread may have ended that wait and begun another
                // meanwhile: a mix of two is no wait at all.
                let kind = AtomicU32::from_ptr(addr_of!((*t).wait_kind).cast_mut())
                    .load(Ordering::Acquire);
                if kind != s.wait_kind
                    || read_volatile(addr_of!((*t).wait_since_ns)) != s.wait_since_ns
                {
                    s.wait_kind = 0;
                    s.held_count = 0;
                }
            }
        }
    }
    held_of(lane.held_stack, &mut s);
    if own {
        s.state = SNAPSHOT_STATE_STARTING_WAIT;
        s.syscall = SYSCALL_NONE;
        usage_of(usage::own(lane.tid), &mut s);
        return (s, None);
    }
    // Read before the kernel's view: a stack copy is kept only if the
    // thread did not run since.
    usage_of(usage::of_task(lane.tid), &mut s);
    let seen = kernel_view(lane.tid, &mut s);
    (s, seen.filter(|_| s.wait_kind == 0))
}

/// The thread's run statistics so far.
fn usage_of(usage: usage::Usage, s: &mut SnapshotThread) {
    if let Some(cpu) = usage.cpu_ns {
        s.cpu_ns = cpu;
        s.usage_flags |= THREAD_USAGE;
    }
    if let Some(waiting) = usage.runnable_ns {
        s.runnable_ns = waiting;
        s.usage_flags |= THREAD_RUNNABLE_KNOWN;
    }
    if let Some((voluntary, involuntary)) = usage.switches {
        s.voluntary_switches = voluntary;
        s.involuntary_switches = involuntary;
        s.usage_flags |= THREAD_SWITCHES_KNOWN;
    }
}

/// The locks the thread holds, read from its held-lock stack (which may
/// vanish if it exits meanwhile: read with `process_vm_readv`).
fn held_of(stack: *const HeldStack, s: &mut SnapshotThread) {
    let mut found = [(0u32, core::ptr::null_mut()); SNAPSHOT_HELD];
    let Some(n) = HeldStack::peek(stack, sys::read_own_memory, &mut found) else {
        if s.wait_kind == 0 {
            s.held_count = HELD_UNKNOWN;
        }
        return;
    };
    for (i, &(lock, counter)) in found[..n].iter().enumerate() {
        s.held[i] = lock;
        let mut site = [0u8; 4];
        let at = counter as u64 + core::mem::offset_of!(CounterRecord, site_id) as u64;
        s.held_sites[i] = if !counter.is_null() && sys::read_own_memory(at, &mut site) {
            u32::from_ne_bytes(site)
        } else {
            0
        };
    }
    s.held[n..].fill(0);
    s.held_sites[n..].fill(0);
    s.held_count = n as u32;
}

/// The kernel's state letter, and the system call it is in with the
/// address it was made from (`/proc/self/task/TID/{stat,syscall}`); where
/// it was, with its CPU time as `s` holds it (read just before).
fn kernel_view(tid: u32, s: &mut SnapshotThread) -> Option<Seen> {
    let mut buf = [0u8; 512];
    if let Some(stat) = procfs::read_task_file(tid, b"stat", &mut buf) {
        // "TID (comm) S …": the state follows the last ')'.
        if let Some(close) = stat.iter().rposition(|&c| c == b')') {
            s.state = stat.get(close + 2).copied().map_or(0, u32::from);
        }
    }
    match snapshot_stack::in_call(tid) {
        Ok(None) => {
            s.syscall = SYSCALL_NONE;
            return Some(Seen::Running);
        }
        Ok(Some(call)) => {
            s.syscall = call.syscall as i32;
            s.pc = call.pc;
            let cpu_ns = (s.usage_flags & THREAD_USAGE != 0).then_some(s.cpu_ns);
            return Some(Seen::InCall(call, cpu_ns));
        }
        Err(()) => {}
    }
    None
}
