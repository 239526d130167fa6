//! The shim's lifecycle, an explicit atomic state machine:
//!
//! ```text
//! Uninitialized --first hook or constructor--> Initializing --> Enabled
//!                                                           \-> Disabled (secure exec, no trace file)
//! Enabled --fork (in the child)--> Forked --first hook--> Initializing --> Enabled (new trace) | Disabled
//! Enabled --exit/_exit/destructor--> Exiting (still records, trace marked complete)
//! ```
//!
//! Only `Enabled` and `Exiting` record. Every other state passes through.
//! A fork child's trace is made when it first records something, not in
//! the at-fork handler: a child that only execs or exits pays nothing, and
//! the handler stays shallow (it runs on the forking thread's stack, which
//! may be small).
//!
//! Stack: every hook and handler here uses at most
//! [`HOOK_STACK_BUDGET`](crate::recorder::HOOK_STACK_BUDGET) bytes of the
//! program's stack for its own frames; starting the recording, and the
//! recorder's other deep work, run on stacks of the shim's own (see
//! `recorder/own_stack.rs`).

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

/// True if hooks should record now; initialises the shim on first call,
/// and a fork child's trace on its first recorded operation.
#[inline]
pub fn recording() -> bool {
    if recording_started() {
        return true;
    }
    match STATE.load(Ordering::Acquire) {
        raw if raw == State::Uninitialized as u8 => initialize(),
        raw if raw == State::Forked as u8 => start_fork_child(),
        _ => false,
    }
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
    // Deep work (paths, the program's name, the trace's header): on the
    // process's own stack, whatever stack the first hook was called on.
    recorder::on_process_stack(start_recording)
}

fn start_recording() -> bool {
    let _errno = crate::diag::ErrnoGuard::save();
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

/// A fork child's first recorded operation: its trace is made now.
#[cold]
#[inline(never)]
fn start_fork_child() -> bool {
    if STATE
        .compare_exchange(
            State::Forked as u8,
            State::Initializing as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
    {
        return matches!(state(), State::Enabled | State::Exiting);
    }
    let _errno = crate::diag::ErrnoGuard::save();
    // Lanes registered before the fork belong to the parent's trace.
    thread_state::next_generation();
    let next = if recorder::start_process(locksuit_format::FLAG_FORK_CHILD, arm_thread_exit).is_ok()
    {
        State::Enabled
    } else {
        State::Disabled
    };
    STATE.store(next as u8, Ordering::Release);
    next == State::Enabled
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
    // A fork child that has not recorded yet keeps the time of its own
    // fork (its trace's start, should it make one), which its own children
    // then share: a double fork before anything is recorded starts the
    // grandchild's trace at the first fork.
    if matches!(state(), State::Enabled | State::Exiting) {
        recorder::fork_starting();
    }
}

extern "C" fn fork_parent() {
    ThreadState::with(|s| s.set_forking(false));
}

/// Shallow (a few hundred bytes of stack: the forking thread's may be
/// small) and cheap: no system call, no clock, and as few pages written as
/// can be, since each page of code or data a fork child first touches is
/// a page fault, and each it writes a copy. The child's trace is made at
/// its first recorded operation (see [`recording`]); until then the state
/// (`Forked`) keeps every hook from recording, so nothing is written into
/// the parent's trace.
extern "C" fn fork_child() {
    real::reset_after_fork();
    // A child of a child that had not recorded anything yet is one too.
    let recorded = matches!(state(), State::Enabled | State::Exiting | State::Forked);
    // The child's one thread was not created in the child: its creation
    // (and so its start) are the parent's, not in the child's trace. It
    // keeps its held locks (they are still held) but forgets the parent's
    // counters, which live in the parent's trace.
    ThreadState::with(|s| {
        s.set_forking(false);
        s.set_create_serial(0);
        s.forget_call_timing();
        if recorded {
            s.held().forget_records();
            s.set_lane(core::ptr::null_mut(), 0);
        }
    });
    if recorded {
        STATE.store(State::Forked as u8, Ordering::Release);
    }
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
    // The state first: a fork child that recorded nothing has no trace,
    // and exits without a system call of ours.
    if !matches!(state(), State::Enabled | State::Exiting) {
        return;
    }
    // In a vfork child the memory, and so this state and the trace, are the
    // parent's: a child that exits (say after a failed exec) must not touch them.
    // SAFETY: getpid is always safe.
    if unsafe { libc::getpid() } as u32 != recorder::file::pid() {
        return;
    }
    STATE.store(State::Exiting as u8, Ordering::Release);
    recorder::process_exit(Some(code));
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
