//! Per-thread state, and [`InHook`], the proof that a thread is inside a
//! hook (the re-entrancy guard's core).
//!
//! The state is a thread-local with no destructor, so it is valid from the
//! thread's first instruction to its last — including while other
//! libraries' constructors run before ours, and after thread-local
//! destructors have run during `exit`.
//!
//! Where it lives: Rust's `thread_local!` in a shared library uses the general-dynamic TLS
//! model: every access calls `__tls_get_addr` (11 instructions and a call,
//! twice per lock/unlock pair). A preloaded library is loaded at start-up,
//! so its TLS can sit in the static block that every thread gets at
//! creation, and be reached with the initial-exec model: the thread pointer
//! plus a fixed offset the loader writes into the GOT. Stable Rust has no
//! attribute for that, so on x86_64 the state is a `.tbss` block declared
//! here and reached with the two-instruction initial-exec sequence. A
//! `.tbss` block starts as zero bits in every thread, which is exactly
//! [`ThreadState::initial`] (a test checks). Elsewhere `thread_local!` serves.
//!
//! The cost of this choice: the library can no longer be `dlopen`ed late
//! into a process whose static TLS block is full. It is meant for
//! `LD_PRELOAD` or linking, where it never is.

use crate::recorder::tables::held::HeldStack;
use crate::recorder::tables::lanes::Lane;
use crate::recorder::tables::lean_lines::LeanLine;
use crate::recorder::time::call_timer::TimerState;
use crate::recorder::time::selfcost::CallCost;
use core::cell::{Cell, UnsafeCell};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU32, Ordering};

/// `ThreadState::flags`: any of them set, a hook passes through. One word,
/// so that the check every hook makes first is one load and one branch.
const IN_HOOK: u8 = 1 << 0;
/// Set by the thread-exit destructor: the thread's lane is gone and later
/// hook calls on it pass through unrecorded.
const RETIRED: u8 = 1 << 1;
/// This thread is inside `fork` (between our prepare handler and our
/// parent or child handler): other libraries' fork handlers run then,
/// and in the child the trace state is still the parent's.
const FORKING: u8 = 1 << 2;

pub struct ThreadState {
    /// `IN_HOOK`, `RETIRED`, `FORKING`.
    flags: Cell<u8>,
    /// The shim itself is calling out (the unwinder, the loader), and may be
    /// called back: such nested calls are ours, not the program's.
    calling_out: Cell<bool>,
    resolving: Cell<bool>,
    /// The lane this thread writes to; null until registered.
    lane: Cell<*mut Lane>,
    /// [`generation`] when `lane` was taken; a fork bumps it, so
    /// a child never writes through a lane of its parent's trace.
    lane_generation: Cell<u32>,
    /// Lean mode's table of lines of `lane` (`lean_lines.rs`), once the
    /// lane has made it this thread's; null before, and whenever `lane`
    /// changes.
    lean_lines: Cell<*const LeanLine>,
    /// tid of the creating thread, handed over by the start wrapper.
    parent_tid: Cell<u32>,
    /// This thread's creation number (0: not created through our wrapper).
    create_serial: Cell<u32>,
    /// How many times the thread-exit destructor has run on this thread.
    exit_rounds: Cell<u32>,
    held: UnsafeCell<HeldStack>,
    /// The recorder's calls on this thread and their sampled cost.
    call_cost: CallCost,
    /// The access gate (see [`ThreadState::close_load_gate`]): a program
    /// built with `locksuit cc` calls its load callback only while this
    /// differs from the word the thread's recorder calls change
    /// (`CallCost::gate_word`), its store callback only while
    /// `skip_stores_at` differs from that word's complement (so zeroed, as
    /// every thread starts, it is open).
    skip_loads_at: Cell<u64>,
    skip_stores_at: Cell<u64>,
    /// How this thread times its blocking calls.
    call_timer: TimerState,
    /// When this thread last began a fork (monotonic, realtime): the start
    /// of the child's trace, should the child make one. Here, in a page the
    /// parent writes at every fork anyway, so that reading the clocks in
    /// the parent costs no page fault more, and the child none at all.
    forked_at: Cell<(u64, u64)>,
    /// Where the `vfork` hook returns to (its caller's return address,
    /// kept here: a vfork child overwrites the stack it was on).
    vfork_return: Cell<usize>,
}

impl ThreadState {
    /// The initial state. All of it is zero bits, which is what lets it
    /// live in a `.tbss` block (see the module comment); a test checks that.
    pub const fn initial() -> ThreadState {
        ThreadState {
            flags: Cell::new(0),
            calling_out: Cell::new(false),
            resolving: Cell::new(false),
            lane: Cell::new(core::ptr::null_mut()),
            lane_generation: Cell::new(0),
            lean_lines: Cell::new(core::ptr::null()),
            parent_tid: Cell::new(0),
            create_serial: Cell::new(0),
            exit_rounds: Cell::new(0),
            held: UnsafeCell::new(HeldStack::new()),
            call_cost: CallCost::new(),
            skip_loads_at: Cell::new(0),
            skip_stores_at: Cell::new(0),
            call_timer: TimerState::initial(),
            forked_at: Cell::new((0, 0)),
            vfork_return: Cell::new(0),
        }
    }

    /// Field by field equality, for the test that the initial state is zero.
    #[cfg(test)]
    pub fn same_as(&self, other: &ThreadState) -> bool {
        self.flags.get() == other.flags.get()
            && self.calling_out.get() == other.calling_out.get()
            && self.resolving.get() == other.resolving.get()
            && self.lane.get() == other.lane.get()
            && self.lane_generation.get() == other.lane_generation.get()
            && self.lean_lines.get() == other.lean_lines.get()
            && self.parent_tid.get() == other.parent_tid.get()
            && self.create_serial.get() == other.create_serial.get()
            && self.exit_rounds.get() == other.exit_rounds.get()
            && self.held().same_as(other.held())
            && self.call_cost.same_as(&other.call_cost)
            && self.skip_loads_at.get() == other.skip_loads_at.get()
            && self.skip_stores_at.get() == other.skip_stores_at.get()
            && self.call_timer.same_as(&other.call_timer)
            && self.forked_at.get() == other.forked_at.get()
            && self.vfork_return.get() == other.vfork_return.get()
    }
}

impl ThreadState {
    #[inline]
    pub fn with<R>(f: impl FnOnce(&ThreadState) -> R) -> R {
        f(this_thread())
    }

    /// The calling thread's call timing state (no guard needed: only its
    /// own thread uses it, and the timing allows for signal handlers).
    #[inline(always)]
    pub fn call_timer() -> &'static TimerState {
        &this_thread().call_timer
    }

    /// In a fork child: the call timing's reference is the parent's.
    pub fn forget_call_timing(&self) {
        crate::recorder::time::call_timer::forget_in_child(&self.call_timer);
    }

    pub fn set_resolving(v: bool) {
        this_thread().resolving.set(v);
    }

    pub fn is_resolving() -> bool {
        this_thread().resolving.get()
    }

    #[inline]
    pub fn lane(&self) -> *mut Lane {
        self.lane.get()
    }

    pub fn lane_generation(&self) -> u32 {
        self.lane_generation.get()
    }

    pub fn set_lane(&self, lane: *mut Lane, generation: u32) {
        self.lane.set(lane);
        self.lane_generation.set(generation);
        self.lean_lines.set(core::ptr::null());
    }

    /// Lean mode's table of lines for a look outside the hook; null if none.
    #[inline(always)]
    pub fn lean_lines(&self) -> *const LeanLine {
        self.lean_lines.get()
    }

    /// The lane's table of lines is ready for this thread (made, cleared of
    /// any previous thread's lines).
    pub fn set_lean_lines(&self, lines: *const LeanLine) {
        self.lean_lines.set(lines);
    }

    pub fn retired(&self) -> bool {
        self.flags.get() & RETIRED != 0
    }

    fn set_flag(&self, flag: u8, on: bool) {
        let flags = self.flags.get();
        self.flags
            .set(if on { flags | flag } else { flags & !flag });
    }

    pub fn set_retired(&self, v: bool) {
        self.set_flag(RETIRED, v);
    }

    pub fn parent_tid(&self) -> u32 {
        self.parent_tid.get()
    }

    pub fn set_parent_tid(&self, tid: u32) {
        self.parent_tid.set(tid);
    }

    pub fn create_serial(&self) -> u32 {
        self.create_serial.get()
    }

    pub fn set_create_serial(&self, serial: u32) {
        self.create_serial.set(serial);
    }

    pub fn set_forking(&self, v: bool) {
        self.set_flag(FORKING, v);
    }

    /// See `forked_at`: set by the parent as it forks, read by the child.
    pub fn set_forked_at(&self, at: (u64, u64)) {
        self.forked_at.set(at);
    }

    pub fn forked_at(&self) -> (u64, u64) {
        self.forked_at.get()
    }

    pub fn forking(&self) -> bool {
        self.flags.get() & FORKING != 0
    }

    pub fn set_vfork_return(&self, ret: usize) {
        self.vfork_return.set(ret);
    }

    pub fn vfork_return(&self) -> usize {
        self.vfork_return.get()
    }

    /// Counts one more run of the thread-exit destructor; returns the count.
    pub fn next_exit_round(&self) -> u32 {
        let n = self.exit_rounds.get() + 1;
        self.exit_rounds.set(n);
        n
    }

    #[inline]
    pub fn call_cost(&self) -> &CallCost {
        &self.call_cost
    }

    /// The access gate, for programs built with `locksuit cc`, whose every
    /// load and store first compares two of this thread's words inline
    /// (exported as `__locksuit_gate_*`) and calls the callback only if
    /// they differ: the word every recorder call changes (never to a value
    /// it had before, see `CallCost::gate_word`), and its value when the
    /// callback last said it needs no more loads (or stores). A lock or
    /// unlock counts a call, so the gate opens at every change of the held
    /// locks. Here: a load made holding no lock matters to nothing, so the
    /// loads until the next lock operation need no call. Never from inside
    /// a hook (a signal handler's access): the hook may have counted its
    /// call and not yet changed the held locks.
    #[inline(always)]
    pub fn close_load_gate(&self) {
        if self.flags.get() == 0 {
            self.skip_loads_at.set(self.call_cost.gate_word());
        }
    }

    /// Shuts the gate for loads and stores until the thread's next lock
    /// operation: its current engagement is not sampled.
    #[inline]
    pub fn close_gates(&self) {
        if self.flags.get() == 0 {
            let calls = self.call_cost.gate_word();
            self.skip_loads_at.set(calls);
            self.skip_stores_at.set(!calls);
        }
    }

    /// Whether this thread holds a lock now: the one question a load or
    /// store callback asks before anything else, without a guard.
    #[inline(always)]
    pub fn holds_a_lock(&self) -> bool {
        // SAFETY: this thread's own stack, its depth read through a raw
        // pointer (no reference made): a signal handler's callback may run
        // while a hook of this thread is changing the stack, and then reads
        // the depth before or after the change, either of which is sound.
        unsafe { HeldStack::depth(self.held.get()) != 0 }
    }

    /// The held-lock stack. Only this thread touches it, and only inside a
    /// hook (under an [`InHook`]), so no two borrows overlap.
    #[allow(clippy::mut_from_ref)]
    pub fn held(&self) -> &mut HeldStack {
        // SAFETY: thread-local, and the guard makes hook bodies non-reentrant
        // (a signal handler's hook call sees `IN_HOOK` and passes through).
        unsafe { &mut *self.held.get() }
    }
}

/// Proof that this thread is inside a hook: the recorder's functions take
/// it, as they are not reentrant. Dropping it leaves the hook. At most one
/// exists per thread: entering again (from our own code, a signal handler,
/// or a library we call) fails and the nested call passes through. The
/// hooks hold it inside their `HookGuard`, which also asks whether the
/// process records.
///
/// It also carries the address of this thread's state, looked up once per
/// hook: in a shared library every thread-local access is a call to
/// `__tls_get_addr`, so the recorder reaches its state through it.
pub struct InHook {
    state: &'static ThreadState,
    _not_send: PhantomData<*const ()>,
}

impl InHook {
    /// Enters the hook if this thread is not already inside one (nor
    /// retired, nor forking).
    #[inline(always)]
    pub fn enter() -> Option<InHook> {
        let state = this_thread();
        if state.flags.get() != 0 {
            return None;
        }
        state.flags.set(IN_HOOK);
        Some(InHook {
            state,
            _not_send: PhantomData,
        })
    }

    /// Enters for the thread-exit destructor: by then the thread runs no
    /// hook of ours (a cancelled wait may have left `IN_HOOK` set, since
    /// forced unwinding skips our frames' drops), so no check is needed.
    pub fn enter_for_exit() -> InHook {
        let state = this_thread();
        state.set_flag(IN_HOOK, true);
        InHook {
            state,
            _not_send: PhantomData,
        }
    }

    /// This thread's state.
    #[inline]
    pub fn thread(&self) -> &'static ThreadState {
        self.state
    }

    /// Runs the real blocking call (a contended lock, a wait, a join) with
    /// the hook left: the shim's bookkeeping is at rest meanwhile, so a
    /// signal handler that takes locks while the thread is blocked is
    /// recorded like any other code.
    #[inline]
    pub fn blocking<R>(&self, call: impl FnOnce() -> R) -> R {
        /// Enters again however the call ends: also when a cancellation
        /// unwinds out of it, before the caller's own cleanup (which
        /// records) runs.
        struct Reenter<'a>(&'a ThreadState);
        impl Drop for Reenter<'_> {
            fn drop(&mut self) {
                self.0.set_flag(IN_HOOK, true);
            }
        }
        self.state.set_flag(IN_HOOK, false);
        let _reenter = Reenter(self.state);
        call()
    }
}

impl Drop for InHook {
    #[inline]
    fn drop(&mut self) {
        self.state.set_flag(IN_HOOK, false);
    }
}

/// Bumped in a fork child; per-thread state taken under an older generation
/// belongs to the parent's trace and is discarded.
static GENERATION: AtomicU32 = AtomicU32::new(1);

pub fn generation() -> u32 {
    GENERATION.load(Ordering::Acquire)
}

/// A fork child begins its own trace: lanes of the parent's are not used.
pub fn next_generation() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// Runs shim code that calls out into code that may call our hooks back
/// (the unwinder takes a pthread mutex): those calls pass through as the
/// shim's own, uncounted.
pub fn calling_out<R>(call: impl FnOnce() -> R) -> R {
    /// Restores the flag however the call ends (a cancellation may unwind
    /// out of it).
    struct Restore<'a>(&'a Cell<bool>, bool);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            self.0.set(self.1);
        }
    }
    let state = this_thread();
    let _restore = Restore(&state.calling_out, state.calling_out.replace(true));
    call()
}

/// This thread interrupted the shim's own bookkeeping (a signal handler
/// running while a hook recorded), as opposed to the shim calling out.
pub fn nested_in_bookkeeping() -> bool {
    let state = this_thread();
    state.flags.get() & IN_HOOK != 0 && !state.calling_out.get()
}

/// The calling thread's state, valid for as long as the thread runs.
#[inline(always)]
fn this_thread() -> &'static ThreadState {
    thread_state()
}

/// The calling thread's state if it is in no hook (nor retired, nor
/// forking), without entering one: for lean mode's quick engagement (see
/// `lean.rs`).
#[inline(always)]
pub fn outside_hooks() -> Option<&'static ThreadState> {
    let state = this_thread();
    (state.flags.get() == 0).then_some(state)
}

/// Whether the calling thread holds a lock now (asked without a guard by
/// the load and store callbacks, before anything else).
#[inline(always)]
pub fn thread_holds_a_lock() -> bool {
    this_thread().holds_a_lock()
}

/// After a load made holding no lock: see [`ThreadState::close_load_gate`].
#[inline(always)]
pub fn close_load_gate() {
    this_thread().close_load_gate();
}

/// See [`ThreadState::close_gates`].
pub fn close_gates() {
    this_thread().close_gates();
}

#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 6",
    ".globl locksuit_thread_state",
    ".hidden locksuit_thread_state",
    ".type locksuit_thread_state, @object",
    ".size locksuit_thread_state, {size}",
    "locksuit_thread_state:",
    ".zero {size}",
    // The access gate's words, for the inline test `locksuit cc` compiles
    // into every load and store (see `close_load_gate`).
    ".globl __locksuit_gate_calls",
    ".type __locksuit_gate_calls, @tls_object",
    ".size __locksuit_gate_calls, 8",
    ".set __locksuit_gate_calls, locksuit_thread_state + {calls}",
    ".globl __locksuit_gate_skip_loads",
    ".type __locksuit_gate_skip_loads, @tls_object",
    ".size __locksuit_gate_skip_loads, 8",
    ".set __locksuit_gate_skip_loads, locksuit_thread_state + {loads}",
    ".globl __locksuit_gate_skip_stores",
    ".type __locksuit_gate_skip_stores, @tls_object",
    ".size __locksuit_gate_skip_stores, 8",
    ".set __locksuit_gate_skip_stores, locksuit_thread_state + {stores}",
    ".popsection",
    size = const core::mem::size_of::<ThreadState>(),
    calls = const core::mem::offset_of!(ThreadState, call_cost) + CallCost::CALLS_OFFSET,
    loads = const core::mem::offset_of!(ThreadState, skip_loads_at),
    stores = const core::mem::offset_of!(ThreadState, skip_stores_at),
);

/// The calling thread's state.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn thread_state() -> &'static ThreadState {
    let state: usize;
    // SAFETY: fs:0 holds the thread pointer and the GOT slot the thread's
    // offset to our .tbss block, sized and aligned for a ThreadState whose
    // zero bits are its initial value. The block lives as long as the
    // thread, and the reference never leaves it (InHook is !Send).
    unsafe {
        core::arch::asm!(
            "mov {state}, qword ptr fs:[0]",
            "add {state}, qword ptr [rip + locksuit_thread_state@GOTTPOFF]",
            state = out(reg) state,
            options(pure, readonly, nostack),
        );
        &*(state as *const ThreadState)
    }
}

#[cfg(not(target_arch = "x86_64"))]
thread_local! {
    static STATE: ThreadState = const { ThreadState::initial() };
}

/// The calling thread's state.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub fn thread_state() -> &'static ThreadState {
    // SAFETY: the thread-local has no destructor, so it lives as long as the
    // thread; the reference never leaves the thread (InHook is !Send).
    STATE.with(|s| unsafe { &*(s as *const ThreadState) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_initial_state_is_all_zero_bits() {
        // SAFETY: every field is a Cell/UnsafeCell of integers, bools and
        // raw pointers, for which zero bits are valid values.
        let zeroed: ThreadState = unsafe { core::mem::MaybeUninit::zeroed().assume_init() };
        let initial = ThreadState::initial();
        assert!(zeroed.same_as(&initial));
        // And a fresh thread's state is that value.
        let fresh = std::thread::spawn(|| thread_state().same_as(&ThreadState::initial()))
            .join()
            .unwrap();
        assert!(fresh);
    }
}
