//! The shim's lifecycle, an explicit atomic state machine:
//!
//! ```text
//! Uninitialized --first hook or constructor--> Initializing --> Enabled
//!                                                           \-> Disabled (secure exec, no trace file,
//!                                                                      a sandbox's inherited filter)
//! Enabled --fork (in the child)--> Forked --> Enabled (new trace) | Disabled
//! Enabled --exit/_exit/destructor--> Exiting (still records, trace marked complete)
//! ```
//!
//! Only `Enabled` and `Exiting` record. Every other state passes through.

use crate::recorder::thread_state::{self, InHook, ThreadState};
use crate::{config, real, recorder};
use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};

#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Uninitialized = 0,
    Initializing = 1,
    Enabled = 2,
    Disabled = 3,
    Forked = 4,
    Exiting = 5,
}

impl State {
    fn from_u8(v: u8) -> State {
        match v {
            0 => State::Uninitialized,
            1 => State::Initializing,
            2 => State::Enabled,
            3 => State::Disabled,
            4 => State::Forked,
            _ => State::Exiting,
        }
    }
}

static STATE: AtomicU8 = AtomicU8::new(State::Uninitialized as u8);
static THREAD_KEY: AtomicU32 = AtomicU32::new(u32::MAX);

pub fn state() -> State {
    State::from_u8(STATE.load(Ordering::Acquire))
}

/// Whether the process records now, without starting the shim if it has
/// not started yet (for paths that must not call out; see `recording`).
#[inline(always)]
pub fn recording_started() -> bool {
    // Compared as raw bytes: every hook asks, and decoding the state first
    // costs a clamp and a second compare.
    let raw = STATE.load(Ordering::Acquire);
    raw == State::Enabled as u8 || raw == State::Exiting as u8
}

/// True if hooks should record now; initialises the shim on first call.
#[inline]
pub fn recording() -> bool {
    if recording_started() {
        return true;
    }
    STATE.load(Ordering::Acquire) == State::Uninitialized as u8 && initialize()
}

#[cold]
fn initialize() -> bool {
    if STATE
        .compare_exchange(
            State::Uninitialized as u8,
            State::Initializing as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
    {
        // Someone else is initialising; pass through until they are done.
        return matches!(state(), State::Enabled | State::Exiting);
    }
    let _errno = crate::diag::ErrnoGuard::save();
    if crate::sys::confined::inherited_at_start() {
        // A sandbox's filter, inherited across exec: any call of ours the
        // program does not make itself may kill it, creating a trace
        // included. Nothing is recorded; the trace before the exec says
        // the process went on confined.
        crate::sys::confined::inherited();
        STATE.store(State::Disabled as u8, Ordering::Release);
        return false;
    }
    let _ = real::real();
    crate::diag::note_stderr();
    if config::secure_execution() {
        // setuid/setgid or file capabilities: never write files for the user.
        STATE.store(State::Disabled as u8, Ordering::Release);
        return false;
    }
    config::load();
    crate::policy::load();
    let mut exe = [0u8; 4096];
    let exe_len = crate::sys::readlink(c"/proc/self/exe", &mut exe).unwrap_or(0);
    if !crate::policy::process_selected(&exe[..exe_len]) {
        // Not a process the policy asks for: no trace, nothing said.
        STATE.store(State::Disabled as u8, Ordering::Release);
        return false;
    }
    if recorder::start_process(0, arm_thread_exit).is_err() {
        STATE.store(State::Disabled as u8, Ordering::Release);
        return false;
    }
    register_process_handlers();
    STATE.store(State::Enabled as u8, Ordering::Release);
    true
}

fn register_process_handlers() {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: plain libc calls with valid function pointers and out-pointer.
    unsafe {
        if libc::pthread_key_create(&mut key, Some(thread_key_destructor)) == 0 {
            THREAD_KEY.store(key, Ordering::Release);
        }
        libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child));
    }
}

/// Arms the thread-exit destructor for the calling thread.
pub fn arm_thread_exit() {
    let key = THREAD_KEY.load(Ordering::Acquire);
    if key != u32::MAX {
        // SAFETY: the key was created by pthread_key_create; the value is a
        // non-null marker, never dereferenced.
        unsafe { libc::pthread_setspecific(key, core::ptr::dangling::<libc::c_void>()) };
    }
}

/// glibc runs key destructors in up to this many rounds while values remain.
const DESTRUCTOR_ROUNDS: u32 = 4; // PTHREAD_DESTRUCTOR_ITERATIONS

/// Thread exit. Our key is created early, so its destructor tends to run
/// before the program's own key destructors, which may still take locks. So
/// the key is re-armed until glibc's last round, and only then is the thread
/// closed; later hook calls on the thread pass through.
extern "C" fn thread_key_destructor(_marker: *mut libc::c_void) {
    if !matches!(state(), State::Enabled | State::Exiting) {
        return;
    }
    let round = ThreadState::with(|s| s.next_exit_round());
    if round < DESTRUCTOR_ROUNDS {
        arm_thread_exit();
        return;
    }
    let in_hook = InHook::enter_for_exit();
    recorder::thread_ended(&in_hook);
    in_hook.thread().set_retired(true);
}

/// Registered first, so it runs last before the fork: from here until our
/// parent or child handler, this thread's hooks pass through (in the child,
/// other libraries' child handlers run before ours, while the trace state
/// is still the parent's).
extern "C" fn fork_prepare() {
    ThreadState::with(|s| s.set_forking(true));
}

extern "C" fn fork_parent() {
    ThreadState::with(|s| s.set_forking(false));
}

extern "C" fn fork_child() {
    real::reset_after_fork();
    crate::sys::confined::forget_calls_in_child();
    // The child's one thread was not created in the child: its creation
    // (and so its start) are the parent's, not in the child's trace.
    ThreadState::with(|s| {
        s.set_forking(false);
        s.set_create_serial(0);
        s.forget_call_timing();
    });
    if !matches!(state(), State::Enabled | State::Exiting) {
        return;
    }
    let _errno = crate::diag::ErrnoGuard::save();
    STATE.store(State::Forked as u8, Ordering::Release);
    thread_state::next_generation();
    // The one thread of the child keeps its held locks (they are still held)
    // but forgets the parent's counters, which live in the parent's trace.
    ThreadState::with(|s| {
        s.held().forget_records();
        s.set_lane(core::ptr::null_mut(), 0);
    });
    let next = if recorder::start_process(locksuit_format::FLAG_FORK_CHILD, arm_thread_exit).is_ok()
    {
        State::Enabled
    } else {
        State::Disabled
    };
    STATE.store(next as u8, Ordering::Release);
}

/// A hook was called from a signal handler while this thread was in the
/// middle of the shim's own bookkeeping: it passed through unrecorded. Only
/// atomic counters and one write(2): safe in a signal handler.
#[cold]
#[inline(never)]
pub fn nested_call_passed_through() {
    if matches!(state(), State::Enabled | State::Exiting) {
        recorder::file::count_dropped_op();
        crate::diag::warn_once(
            crate::diag::Warning::NestedCalls,
            b"a signal handler took locks or blocked while the shim was busy on the same thread; those calls were passed through and are counted as dropped",
        );
    }
}

/// `exit`, `_exit`, `_Exit`: note the status and mark the trace complete.
pub fn process_exiting(code: i32) {
    process_ending(Some(code));
}

/// The process ends normally, with `code` if it is known.
fn process_ending(code: Option<i32>) {
    // In a vfork child the memory, and so this state and the trace, are the
    // parent's: a child that exits (say after a failed exec) must not touch them.
    if !recorder::file::is_trace_process() {
        return;
    }
    if matches!(state(), State::Enabled | State::Exiting) {
        STATE.store(State::Exiting as u8, Ordering::Release);
        recorder::process_exit(code);
    }
}

/// `syscall(SYS_exit, code)`: the calling thread ends at once, without
/// glibc's thread-exit work (our key destructor included), so its record
/// is closed here. The last thread's exit ends the process normally: with
/// `code` if it is the main thread (the process's status is the main
/// thread's), like `_exit(code)`.
pub fn thread_exiting(code: i32) {
    if !matches!(state(), State::Enabled | State::Exiting) || !recorder::file::is_trace_process() {
        return;
    }
    if recorder::threads_in_process() == Some(1) {
        let main = recorder::file::pid() == recorder::gettid();
        process_ending(main.then_some(code));
        return;
    }
    // Entered unless a hook of this thread is under way (a signal handler
    // that ends its thread): its bookkeeping is left as it is.
    if let Some(in_hook) = InHook::enter() {
        let _errno = crate::diag::ErrnoGuard::save();
        recorder::thread_ended(&in_hook);
        in_hook.thread().set_retired(true);
    }
}

/// Library constructor: resolve and initialise now, unless a hook already did.
#[cfg_attr(test, allow(dead_code))]
extern "C" fn on_load() {
    // Inside a hook while initialising, so that calls the loader and libc
    // make back into our hooks meanwhile pass through.
    if let Some(_in_hook) = InHook::enter() {
        recording();
    }
}

/// Library destructor: runs during `exit` (including return from `main`).
#[cfg_attr(test, allow(dead_code))]
extern "C" fn on_unload() {
    if matches!(state(), State::Enabled | State::Exiting) {
        STATE.store(State::Exiting as u8, Ordering::Release);
        recorder::process_exit(None);
    }
}

// Only in the real library: a unit-test binary starts the recorder itself,
// after choosing where its trace goes.
#[cfg(not(test))]
#[used]
#[unsafe(link_section = ".init_array")]
static CONSTRUCTOR: extern "C" fn() = on_load;

#[cfg(not(test))]
#[used]
#[unsafe(link_section = ".fini_array")]
static DESTRUCTOR: extern "C" fn() = on_unload;
