//! The shim's lifecycle, an explicit atomic state machine:
//!
//! ```text
//! Uninitialized --first hook or constructor--> Initializing --> Enabled
//!                                                           \-> Disabled (secure exec, no trace file,
//!                                                                      a sandbox's inherited filter)
//! Enabled --fork or clone (in the child)--> Forked --first recorded call--> Initializing --> Enabled (new trace) | Disabled
//! Enabled --a child the shim did not see start, noticed--> Initializing --> Enabled (new trace) | Disabled
//! Enabled --exit/_exit/destructor--> Exiting (still records, trace marked complete)
//! ```
//!
//! Only `Enabled` and `Exiting` record. Every other state passes through.
//! A move that starts or stops the recording calls what
//! [`on_recording_changed`] set (the mutex hooks' handlers are swapped),
//! except a fork child's move to `Forked` (see [`fork_child`]).
//! A fork child's trace is made when it first records something, not in
//! the at-fork handler: a child that only execs or exits pays nothing, and
//! the handler stays shallow (it runs on the forking thread's stack, which
//! may be small).
//!
//! Stack: every hook and handler here uses at most
//! [`HOOK_STACK_BUDGET`](crate::recorder::HOOK_STACK_BUDGET) bytes of the
//! program's stack for its own frames; starting the recording, and the
//! recorder's other deep work, run on stacks of the shim's own (see
//! `recorder/base/own_stack.rs`).

use crate::callback::Callback;
use crate::recorder::tables::thread_state::{self, InHook, ThreadState};
use crate::{config, real, recorder};
use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};

/// Bit set in exactly the states that record, so that every hook's
/// question "recording?" is one bit test of one byte.
const RECORDING: u8 = 0x10;

#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Uninitialized = 0,
    Initializing = 1,
    Enabled = RECORDING | 2,
    Disabled = 3,
    Forked = 4,
    Exiting = RECORDING | 5,
}

impl State {
    fn from_u8(v: u8) -> State {
        match v {
            0 => State::Uninitialized,
            1 => State::Initializing,
            v if v == State::Enabled as u8 => State::Enabled,
            3 => State::Disabled,
            4 => State::Forked,
            _ => State::Exiting,
        }
    }
}

static STATE: AtomicU8 = AtomicU8::new(State::Uninitialized as u8);
/// What [`set_state`] calls when the process starts or stops recording:
/// the mutex hooks' quick handlers do not ask "recording?", and are
/// swapped for others instead.
static ON_RECORDING_CHANGED: Callback = Callback::new();

/// Sets what is called when the process starts or stops recording
/// (sequentially consistent with the state's swap: see [`Callback::set`]).
pub fn on_recording_changed(changed: fn()) {
    ON_RECORDING_CHANGED.set(changed);
}

/// Moves to `next`, and says so if that starts or stops the recording.
fn set_state(next: State) {
    let before = STATE.swap(next as u8, Ordering::SeqCst);
    recording_flipped(before, next as u8);
}

/// Calls what [`on_recording_changed`] set if the move from `before` to
/// `after` started or stopped the recording.
fn recording_flipped(before: u8, after: u8) {
    if (before ^ after) & RECORDING != 0 {
        ON_RECORDING_CHANGED.call();
    }
}
static THREAD_KEY: AtomicU32 = AtomicU32::new(u32::MAX);

pub fn state() -> State {
    State::from_u8(STATE.load(Ordering::Acquire))
}

/// Whether the process records now, without starting the shim if it has
/// not started yet (for paths that must not call out; see `recording`).
#[inline(always)]
pub fn recording_started() -> bool {
    // One bit of the raw byte: every hook asks (see `RECORDING`).
    STATE.load(Ordering::Acquire) & RECORDING != 0
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
    if crate::sys::confined::inherited_at_start() {
        // A sandbox's filter, inherited across exec: any call of ours the
        // program does not make itself may kill it, creating a trace
        // included. Nothing is recorded; the trace before the exec says
        // the process went on confined.
        crate::sys::confined::inherited();
        set_state(State::Disabled);
        return false;
    }
    let _ = real::real();
    crate::diag::note_stderr();
    if config::secure_execution() {
        // setuid/setgid or file capabilities: never write files for the user.
        set_state(State::Disabled);
        return false;
    }
    config::load();
    crate::policy::load();
    let mut exe = [0u8; 4096];
    let exe_len = crate::sys::readlink(c"/proc/self/exe", &mut exe).unwrap_or(0);
    if !crate::policy::process_selected(&exe[..exe_len]) {
        // Not a process the policy asks for: no trace, nothing said.
        set_state(State::Disabled);
        return false;
    }
    recorder::trace::copied::set_handler(adopt_unseen_child);
    if recorder::start_process(0, arm_thread_exit).is_err() {
        set_state(State::Disabled);
        return false;
    }
    register_process_handlers();
    crate::sigbus::install();
    set_state(State::Enabled);
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
    start_child_trace()
}

/// A child process (state `Initializing`, one thread) starts its own
/// trace, from the time its thread noted (`recorder::fork_starting`);
/// returns whether it records.
fn start_child_trace() -> bool {
    // Lanes registered before the fork belong to the parent's trace.
    thread_state::next_generation();
    let next = if recorder::start_process(locksuit_format::FLAG_FORK_CHILD, arm_thread_exit).is_ok()
    {
        State::Enabled
    } else {
        State::Disabled
    };
    set_state(next);
    if next == State::Disabled {
        // From Initializing, which does not record either: the callback is
        // not called by the move, but a fork child's mutex trampolines
        // still point where its parent's did (see `fork_child`).
        recording_flipped(RECORDING, 0);
    }
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
/// the parent's trace. The mutex trampolines are not re-pointed here (that
/// would write one more page): the quick handlers they may still jump to
/// decline in a child before its trace starts, its thread having no lane
/// and its held entries forgotten, and go the general way, which starts
/// the trace (and re-points them when it does).
extern "C" fn fork_child() {
    // A child of a child that had not recorded anything yet is one too.
    let recorded = matches!(state(), State::Enabled | State::Exiting | State::Forked);
    forget_parent_thread(recorded);
    if recorded {
        STATE.store(State::Forked as u8, Ordering::SeqCst);
    }
}

/// In a child process, on its one thread: what the thread state holds of
/// the parent's that the child must not keep. The thread was not created
/// in the child: its creation (and so its start) are the parent's, not in
/// the child's trace. If the parent recorded, the thread keeps its held
/// locks (they are still held) but forgets the parent's counters, which
/// live in the parent's trace.
fn forget_parent_thread(recorded: bool) {
    real::reset_after_fork();
    crate::sys::confined::forget_calls_in_child();
    ThreadState::with(|s| {
        s.set_forking(false);
        s.set_create_serial(0);
        s.forget_call_timing();
        if recorded {
            s.held().forget_records();
            s.set_lane(core::ptr::null_mut(), 0);
        }
    });
}

/// What a task the program makes itself (a `clone`, `clone3`, `fork` or
/// `vfork` system call through `syscall`, glibc's `clone`, `_Fork`, `vfork`)
/// is to the shim. None of glibc's fork handlers, ours included, run for it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum NewTask {
    /// A thread of this process, a task that shares its memory and runs
    /// alongside it, or one with thread-local storage of its own making:
    /// nothing the shim does or can do.
    Alongside,
    /// A process with a copy of the memory: it must start a trace of its
    /// own, as after `fork`, before it records anything.
    Copy,
    /// A process that borrows the memory, and the calling thread's state,
    /// until it execs or exits, while the parent waits (`vfork`): it must
    /// record nothing.
    Borrowing,
}

impl NewTask {
    /// The task a clone with `flags` makes.
    pub fn of(flags: u64) -> NewTask {
        let has = |flag: libc::c_int| flags & flag as u64 != 0;
        if has(libc::CLONE_THREAD) || has(libc::CLONE_SETTLS) {
            NewTask::Alongside
        } else if !has(libc::CLONE_VM) {
            NewTask::Copy
        } else if has(libc::CLONE_VFORK) {
            NewTask::Borrowing
        } else {
            NewTask::Alongside
        }
    }
}

/// Before a clone that makes a `Copy` or `Borrowing` task: this thread's
/// hooks pass through until [`cloned_in_parent`] or [`cloned_in_child`]
/// (a borrowing child keeps this thread's state, and so passes through
/// for its whole life). False when the thread is already in the middle of
/// one (a fork handler's, or a vfork child's, clone): the caller then does
/// nothing more.
pub fn cloning() -> bool {
    let first = ThreadState::with(|s| {
        let first = !s.forking();
        s.set_forking(true);
        first
    });
    if first {
        // As `fork_prepare`: the child's trace, if it makes one, starts now.
        if matches!(state(), State::Enabled | State::Exiting) {
            recorder::fork_starting();
        }
    }
    first
}

/// After [`cloning`], in the parent (or if the clone failed).
pub fn cloned_in_parent() {
    fork_parent();
}

/// After [`cloning`], in a `Copy` child: as after `fork`, its trace is
/// made when it first records something. Shallow, as `fork_child`: the
/// child may run on a stack of the program's choosing (glibc's `clone`),
/// a few KiB in some (runc's is 4).
pub fn cloned_in_child() {
    fork_child();
}

/// This process's memory turned out to be a copy of the recording
/// process's, made by a clone none of our hooks saw (see
/// `recorder::trace::copied`). The child starts its own trace when it safely can:
/// it has one thread (the caller), so no other can be using the parent's
/// tables. Otherwise it is cut off from the parent's trace, and not
/// recorded. Called on slow paths, before they write anything
/// (`may_restart` false: the caller is in the middle of writing, and
/// cannot have the trace change under it). Returns whether the process
/// records now, in its own trace.
fn adopt_unseen_child(may_restart: bool) -> bool {
    let current = STATE.load(Ordering::Acquire);
    let recording = current & RECORDING != 0;
    // Initializing meanwhile: a hook nested in this work (a signal
    // handler's) passes through.
    if !recording
        || STATE
            .compare_exchange(
                current,
                State::Initializing as u8,
                Ordering::SeqCst,
                Ordering::Acquire,
            )
            .is_err()
    {
        // Not recording, or another thread of the child is at it.
        return false;
    }
    // Stopped recording for now: the quick mutex handlers are swapped out
    // until the trace starts (or for good, if it cannot).
    recording_flipped(current, State::Initializing as u8);
    let _errno = crate::diag::ErrnoGuard::save();
    if may_restart && recorder::threads_in_process() == Some(1) {
        forget_parent_thread(true);
        // Its trace starts now (the clone was not seen).
        recorder::fork_starting();
        return start_child_trace();
    }
    recorder::cut_off_inherited_trace();
    set_state(State::Disabled);
    crate::diag::warn_once(
        crate::diag::Warning::UnseenChild,
        b"a child process made by a clone system call the shim did not see was noticed too late to start a trace of its own (it had more threads, or was writing); it is not recorded",
    );
    false
}

/// Before a thread is created: a child made by a clone the shim did not
/// see (inline assembly) is noticed here while it has one thread, and
/// starts its own trace.
pub fn thread_creating() {
    // Not from inside a hook of this thread (a signal handler's call): that
    // hook may hold pointers into the trace a restart replaces.
    if recorder::trace::copied::is_copy() {
        if let Some(_in_hook) = InHook::enter() {
            adopt_unseen_child(true);
        }
    }
}

/// A hook was called from a signal handler while this thread was in the
/// middle of the shim's own bookkeeping: it passed through unrecorded. Only
/// atomic counters and one write(2): safe in a signal handler.
#[cold]
#[inline(never)]
pub fn nested_call_passed_through() {
    if matches!(state(), State::Enabled | State::Exiting) {
        recorder::trace::file::count_dropped_op();
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
    // The state first: a fork child that recorded nothing has no trace,
    // and exits without a system call of ours.
    if !matches!(state(), State::Enabled | State::Exiting) {
        return;
    }
    // In a vfork child the memory, and so this state and the trace, are the
    // parent's: a child that exits (say after a failed exec) must not touch them.
    if !recorder::trace::file::is_trace_process() {
        return;
    }
    set_state(State::Exiting);
    recorder::process_exit(code);
}

/// `syscall(SYS_exit, code)`: the calling thread ends at once, without
/// glibc's thread-exit work (our key destructor included), so its record
/// is closed here. The last thread's exit ends the process normally: with
/// `code` if it is the main thread (the process's status is the main
/// thread's), like `_exit(code)`.
pub fn thread_exiting(code: i32) {
    if !matches!(state(), State::Enabled | State::Exiting)
        || !recorder::trace::file::is_trace_process()
    {
        return;
    }
    // Confined, /proc cannot be read: the threads the shim knows of are
    // all it can go by (under seccomp strict mode, the only way out is
    // this call).
    let last = match recorder::threads_in_process() {
        Some(n) => n == 1,
        None => recorder::tables::lanes::live_threads_recorded() <= 1,
    };
    if last {
        let main = recorder::trace::file::pid() == recorder::gettid();
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
    // A child that has not started its own trace (a copy the shim has not
    // adopted yet, or a vfork child calling `exit`): the trace is the
    // parent's. The state first: a fork child that recorded nothing exits
    // without a system call of ours.
    if !matches!(state(), State::Enabled | State::Exiting)
        || recorder::trace::copied::is_copy()
        || !recorder::trace::file::is_trace_process()
    {
        return;
    }
    set_state(State::Exiting);
    recorder::process_exit(None);
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
