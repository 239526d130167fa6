//! Passing the creating thread's id to a new thread without allocating: a
//! fixed pool of hand-off slots. When every slot is busy, `pthread_create`
//! passes through unwrapped and the thread is simply registered on its first
//! hook call, without a parent.

use crate::guard::{HookGuard, ThreadState};
use crate::real::StartRoutine;
use crate::recorder;
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

const SLOTS: usize = 1024;

struct Slot {
    busy: AtomicBool,
    start: AtomicUsize,
    arg: AtomicUsize,
    parent_tid: AtomicU32,
    serial: AtomicU32,
}

static POOL: [Slot; SLOTS] = [const {
    Slot {
        busy: AtomicBool::new(false),
        start: AtomicUsize::new(0),
        arg: AtomicUsize::new(0),
        parent_tid: AtomicU32::new(0),
        serial: AtomicU32::new(0),
    }
}; SLOTS];
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A claimed slot holding `start` and `arg` for the new thread.
pub struct StartHandoff {
    index: usize,
    serial: u32,
}

impl StartHandoff {
    pub fn claim(guard: &HookGuard, start: StartRoutine, arg: *mut c_void) -> Option<StartHandoff> {
        let first = NEXT.fetch_add(1, Ordering::Relaxed);
        for i in 0..SLOTS {
            let index = (first + i) % SLOTS;
            let slot = &POOL[index];
            if !slot.busy.swap(true, Ordering::Acquire) {
                slot.start.store(start as usize, Ordering::Relaxed);
                slot.arg.store(arg as usize, Ordering::Relaxed);
                let parent = recorder::current_lane(guard).map_or(0, |l| l.tid);
                slot.parent_tid.store(parent, Ordering::Relaxed);
                let serial = recorder::next_create_serial();
                slot.serial.store(serial, Ordering::Relaxed);
                return Some(StartHandoff { index, serial });
            }
        }
        None
    }

    /// The argument to pass to [`START_WRAPPER`].
    pub fn as_arg(&self) -> *mut c_void {
        // The slot index + 1 travels as the pointer value; 0 never occurs.
        (self.index + 1) as *mut c_void
    }

    /// The new thread's creation number.
    pub fn serial(&self) -> u32 {
        self.serial
    }

    /// The thread was not created; give the slot back.
    pub fn release(self) {
        POOL[self.index].busy.store(false, Ordering::Release);
    }
}

/// Start routine given to the real `pthread_create`: takes the hand-off,
/// registers the thread with its parent, then runs the program's routine.
/// `C-unwind` because `pthread_exit` and cancellation unwind through it; it
/// holds nothing that needs dropping across the call.
pub extern "C-unwind" fn start_wrapper_impl(token: *mut c_void) -> *mut c_void {
    let slot = &POOL[(token as usize - 1) % SLOTS];
    let start = slot.start.load(Ordering::Relaxed);
    let arg = slot.arg.load(Ordering::Relaxed) as *mut c_void;
    let parent = slot.parent_tid.load(Ordering::Relaxed);
    let serial = slot.serial.load(Ordering::Relaxed);
    slot.busy.store(false, Ordering::Release);
    ThreadState::with(|s| {
        s.set_parent_tid(parent);
        s.set_create_serial(serial);
    });
    if let Some(guard) = HookGuard::enter() {
        recorder::current_lane(&guard);
    }
    // SAFETY: `start` was stored from a valid StartRoutine in `claim`.
    // Typed as unwinding: pthread_exit and cancellation unwind through it.
    let start: extern "C-unwind" fn(*mut c_void) -> *mut c_void = unsafe {
        core::mem::transmute::<usize, extern "C-unwind" fn(*mut c_void) -> *mut c_void>(start)
    };
    start(arg)
}

/// `start_wrapper_impl` typed as the start routine `pthread_create` expects
/// (same calling convention; the unwind permission is ours to give).
pub const START_WRAPPER: StartRoutine = {
    let f: extern "C-unwind" fn(*mut c_void) -> *mut c_void = start_wrapper_impl;
    // SAFETY: "C" and "C-unwind" share the calling convention.
    unsafe {
        core::mem::transmute::<extern "C-unwind" fn(*mut c_void) -> *mut c_void, StartRoutine>(f)
    }
};
