//! Each thread's lane: taken, and the thread's record written, the first
//! time the thread is recorded.

use crate::callback::Callback;
use crate::recorder::tables::lanes::{self, Lane};
use crate::recorder::tables::thread_state::{InHook, ThreadState};
use crate::recorder::time::clock::now_ns;
use crate::recorder::trace::file;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use locksuit_format::*;

/// Arms the thread-exit notice (the lifecycle's key destructor) for the
/// calling thread: given to [`set_thread_exit`] at start, and called when a
/// thread is registered.
static ARM_THREAD_EXIT: Callback = Callback::new();

pub fn set_thread_exit(arm: fn()) {
    ARM_THREAD_EXIT.set(arm);
}

fn arm_thread_exit() {
    ARM_THREAD_EXIT.call();
}

/// This thread's lane, registering the thread on first use (threads that
/// existed before the shim initialised included). `None` when no lane is
/// available; the caller passes through.
#[inline]
pub fn current_lane(g: &InHook) -> Option<&'static mut Lane> {
    let s = g.thread();
    let lane = s.lane();
    // No generation test here: the fork child handler that moves the
    // generation on (`lifecycle::fork_child`) also drops the lane of the
    // child's one thread, so the test could never fail.
    if !lane.is_null() {
        // SAFETY: a lane registered to this thread (in this process: see
        // above) is exclusively ours until the thread ends.
        return Some(unsafe { &mut *lane });
    }
    register(s)
}

#[cold]
fn register(s: &ThreadState) -> Option<&'static mut Lane> {
    let _errno = crate::diag::ErrnoGuard::save();
    // A child made by a clone none of our hooks saw: never a lane of the
    // parent's trace; its own trace, if it can start one now.
    if crate::recorder::trace::copied::is_copy() && !crate::recorder::trace::copied::adopt(true) {
        return None;
    }
    let Some(lane) = lanes::acquire() else {
        file::count_dropped_op();
        return None;
    };
    let tid = gettid();
    if tid == 0 {
        // Confined, with no way to tell who this thread is.
        lanes::release(lane);
        file::count_dropped_op();
        return None;
    }
    lane.tid = tid;
    let mut flags = 0;
    if tid == file::pid() {
        flags |= THREAD_MAIN;
    }
    let parent_tid = s.parent_tid();
    if parent_tid != 0 {
        flags |= THREAD_CREATED_TRACED;
    }
    let record = ThreadRecord {
        hdr: RecordHeader {
            kind: RecordKind::Thread as u16,
            size: core::mem::size_of::<ThreadRecord>() as u16,
            aux: 0,
        },
        tid,
        parent_tid,
        // SAFETY: pthread_self is always safe.
        pthread: unsafe { libc::pthread_self() } as u64,
        start_ns: now_ns(),
        flags,
        create_serial: s.create_serial(),
        ..Default::default()
    };
    lane.thread = lane.append(&record, &[]).unwrap_or(core::ptr::null_mut());
    take_name_given_early(lane.thread);
    lane.held_stack = s.held();
    crate::recorder::trace::control::poll();
    lane.access_bit = crate::recorder::features::access::thread_bit();
    lane.stack_top = crate::recorder::features::access::stack_top(tid == file::pid());
    crate::recorder::features::filter::write_record(lane);
    crate::recorder::features::switches::open(lane);
    s.set_lane(lane, crate::recorder::tables::thread_state::generation());
    arm_thread_exit();
    if record.create_serial != 0 {
        let (serial, at) = (record.create_serial, record.start_ns);
        crate::recorder::features::events::thread_moment(
            lane,
            EVENT_STARTED,
            serial,
            parent_tid,
            at,
        );
    }
    Some(lane)
}

/// The calling thread's id. Confined, where the system call is refused,
/// it is read from the thread's descriptor, where glibc keeps it (at an
/// offset learnt from earlier threads; 0 if it was not learnt).
pub fn gettid() -> u32 {
    // gettid takes no arguments and cannot fail, unless refused.
    match crate::sys::sys!(libc::SYS_gettid) {
        tid if tid > 0 => {
            learn_tid_offset(tid as u32);
            tid as u32
        }
        _ => tid_from_descriptor(),
    }
}

/// Where glibc's thread descriptor (`pthread_self()`) holds the thread's
/// id: 0 until learnt, [`TID_OFFSET_UNKNOWABLE`] if threads disagreed.
static TID_OFFSET: AtomicUsize = AtomicUsize::new(0);
const TID_OFFSET_UNKNOWABLE: usize = usize::MAX;
/// How far into the descriptor to look (glibc's `tid` is at 0x2d0 on
/// x86_64 today; the descriptor is larger than this).
const TID_SEARCHED: usize = 0x800;

fn descriptor_word(offset: usize) -> u32 {
    // SAFETY: pthread_self is glibc's descriptor of the calling thread,
    // mapped and larger than TID_SEARCHED bytes; a 4-aligned read in it.
    unsafe { core::ptr::read_volatile((libc::pthread_self() as usize + offset) as *const u32) }
}

/// Learns (the first thread) or checks (each later one) where the
/// descriptor holds `tid`.
#[cold]
fn learn_tid_offset(tid: u32) {
    match TID_OFFSET.load(Ordering::Relaxed) {
        TID_OFFSET_UNKNOWABLE => {}
        0 => {
            let found = (4..TID_SEARCHED)
                .step_by(4)
                .find(|&at| descriptor_word(at) == tid);
            let _ = TID_OFFSET.compare_exchange(
                0,
                found.unwrap_or(TID_OFFSET_UNKNOWABLE),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        at => {
            if descriptor_word(at) != tid {
                TID_OFFSET.store(TID_OFFSET_UNKNOWABLE, Ordering::Relaxed);
            }
        }
    }
}

fn tid_from_descriptor() -> u32 {
    match TID_OFFSET.load(Ordering::Relaxed) {
        0 | TID_OFFSET_UNKNOWABLE => 0,
        at => descriptor_word(at),
    }
}

/// Names given to threads the shim did not know yet (see `thread_named`):
/// while any was, a registering thread reads its own name from the kernel.
pub static NAMED_UNKNOWN: AtomicU32 = AtomicU32::new(0);

/// A thread just registered with record `t`: if another thread may have
/// named it before (its pthread_t matched no record), take the kernel's
/// name now, so the name goes to this thread and not to a later one that
/// reuses its pthread_t.
pub fn take_name_given_early(t: *mut ThreadRecord) {
    // Pairs with the fence in `thread_named`: either the namer saw this
    // record, or this thread sees the namer's count.
    core::sync::atomic::fence(Ordering::SeqCst);
    if t.is_null() || NAMED_UNKNOWN.load(Ordering::Relaxed) == 0 {
        return;
    }
    let mut name = [0u8; THREAD_NAME_MAX];
    read_own_name(&mut name);
    // SAFETY: this thread's own new record in the live mapping.
    unsafe { (*t).name = name };
}

pub fn read_own_name(name: &mut [u8; THREAD_NAME_MAX]) {
    crate::sys::own_thread_name(name);
}
