//! Each thread's lane: taken, and the thread's record written, the first
//! time the thread is recorded.

use super::clock::now_ns;
use super::file;
use super::lanes::{self, Lane};
use super::thread_state::{InHook, ThreadState};
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use locksuit_format::*;

/// Arms the thread-exit notice (the lifecycle's key destructor) for the
/// calling thread: given to [`set_thread_exit`] at start, and called when a
/// thread is registered.
static ARM_THREAD_EXIT: AtomicUsize = AtomicUsize::new(0);

pub fn set_thread_exit(arm: fn()) {
    ARM_THREAD_EXIT.store(arm as usize, Ordering::Relaxed);
}

fn arm_thread_exit() {
    let arm = ARM_THREAD_EXIT.load(Ordering::Relaxed);
    if arm != 0 {
        // SAFETY: only ever stored from an `fn()` in `set_thread_exit`.
        let arm = unsafe { core::mem::transmute::<usize, fn()>(arm) };
        arm();
    }
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
    let Some(lane) = lanes::acquire() else {
        file::count_dropped_op();
        return None;
    };
    let tid = gettid();
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
    super::control::poll();
    lane.access_bit = super::access::thread_bit();
    lane.stack_top = super::access::stack_top(tid == file::pid());
    super::filter::write_record(lane);
    super::switches::open(lane);
    s.set_lane(lane, super::thread_state::generation());
    arm_thread_exit();
    if record.create_serial != 0 {
        let (serial, at) = (record.create_serial, record.start_ns);
        super::events::thread_moment(lane, EVENT_STARTED, serial, parent_tid, at);
    }
    Some(lane)
}

pub fn gettid() -> u32 {
    // gettid takes no arguments and cannot fail.
    crate::sys::sys!(libc::SYS_gettid) as u32
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
    // SAFETY: PR_GET_NAME writes at most 16 bytes into the buffer.
    unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
}
