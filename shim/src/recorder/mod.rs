//! The recorder: what the hooks report, and the only code that writes the
//! trace. Its API is plain Rust so tests can drive it without LD_PRELOAD.
//! All of it must be called inside a hook (an [`InHook`]): it is not
//! reentrant.
//!
//! This file is the front: it declares the folders and re-exports the API
//! (nothing below imports from it). The folders, top first; each uses only
//! itself and the folders after it (`shim/tests/layering.rs` checks it):
//!
//! 1. `api/`: what the hooks call — locks, conditions, threads, blocking
//!    calls, object identities, misuse, confinement, and the engagement
//!    behind them (`prepared`, `untimed`, `thread_lane`).
//! 2. `features/`: what a thread writes beyond its counters — events and
//!    their filter, the lock-order graph, snapshots, task switches, data
//!    access and its ratios, run statistics.
//! 3. `identities/`: naming what the program runs — call sites, the
//!    module map and its images, symbols, and the policy's interest in them.
//! 4. `tables/`: the shim's state — the object table, each thread's lane
//!    (buffer, index, hot cache, by-lock cache), held locks, the heap
//!    blocks, and the thread-local state with [`InHook`].
//! 5. `trace/`: the trace file itself — blocks, header, the reader's
//!    control word, the copy check, the kernel's switch rings.
//! 6. `time/`: the time base — the clock, blocking-call timing, the
//!    shim's own cost (the clock and the cost sampler reach the trace file
//!    through hooks set at start, never by a call up).
//! 7. `base/`: plain helpers — anonymous mappings, the shim's own stacks,
//!    `/proc` reads, trace paths, the caller's return addresses.

pub mod api;
pub mod base;
pub mod features;
pub mod identities;
pub mod tables;
pub mod time;
pub mod trace;

use crate::config;
use crate::diag::{warn_once, Warning};
pub use api::thread_lane::{current_lane, gettid};
use locksuit_format::*;
use tables::thread_state::InHook;

pub use api::calls::{call_blocked, CallFrom};
pub use api::conds::{cond_notified, cond_prepare, CondWait, CondWaitInFlight};
pub use api::confinement::{
    begins as confinement_begins, ended as confinement_ended, Begun, Confining,
};
pub use api::futex::{
    futex_wait_abandoned, futex_wait_begin, futex_wait_end, futex_wake_begin, futex_woke, FutexWait,
};
pub use api::identity::{object_destroyed, object_initialized, object_opened};
pub use api::lean::{
    acquired as lean_acquired, engaged_quickly as lean_engaged_quickly,
    found_quickly as lean_found_quickly, found_warm as lean_found_warm, prepare as prepare_lean,
    released_with_waiters as lean_released_with_waiters, QuickLine as LeanLine,
};
pub use api::locks::{
    acquired, barrier_begin, barrier_end, blocked, engaged_traced_quickly, posted, released,
    released_quickly, released_traced, released_untimed_quickly, timed_out, try_failed,
    unusual_outcome, wait_abandoned, wait_begin, wait_end, BarrierArrival,
};
pub use api::misuse::{destroying, unlock_not_held, At as MisuseAt};
pub use api::prepared::{prepare, prepare_missed_twice, Hold, How, Prepared};
pub use api::threads::{
    exec_failed, exec_starting, join_begin, join_finished, next_create_serial, process_exit,
    thread_created, thread_ended, thread_named, JoinStarted,
};
pub use api::untimed::{
    engaged_quickly, nested_quickly, not_taken_quickly, prepare_quickly as prepare_mutex_quickly,
    warm_quickly, QuickLook,
};
pub use base::caller::Caller;
pub use base::mapped::map_anonymous;
pub use base::own_stack::HOOK_STACK_BUDGET;
pub use base::procfs::threads_in_process;
pub use features::events::Waiting;
pub use identities::sites::library_unloaded;
pub use tables::hot_cache::HotHit;
pub use tables::objects::{barrier_initialized, barrier_passed_through};
pub use time::call_timer::{rseq_taken_over, CallTimer};
pub use time::clock::{clock_ns, now_ns, Stamp};
pub use trace::file::cut_off_inherited_trace;

/// Creates this process's trace and the shared tables. `extra_flags` is
/// `FLAG_FORK_CHILD` in a fork child, which also discards inherited state.
/// `arm_thread_exit` is called on each thread as it is first recorded, so
/// that its end is noticed. Runs on the process's own stack (see
/// `own_stack.rs`).
pub fn start_process(
    extra_flags: u32,
    arm_thread_exit: fn(),
) -> Result<(), trace::file::NotRecording> {
    if extra_flags & FLAG_FORK_CHILD != 0 {
        // A thread of the parent that was on it is not in the child.
        base::own_stack::PROCESS.forget_claim();
    }
    on_process_stack(|| start_process_here(extra_flags, arm_thread_exit))
}

/// Runs `work` on the process's own stack (see `own_stack.rs`), for the
/// deep work of starting the recording.
pub fn on_process_stack<R>(work: impl FnOnce() -> R) -> R {
    base::own_stack::PROCESS.run_claimed(work)
}

/// About to fork (the parent's at-fork handler): the child's trace, if it
/// makes one, starts now. Read here, in the parent, so the child reads no
/// clock (its first touch of each page of code or data is a page fault).
pub fn fork_starting() {
    let at = (now_ns(), clock_ns(libc::CLOCK_REALTIME));
    tables::thread_state::ThreadState::with(|s| s.set_forked_at(at));
}

fn start_process_here(
    extra_flags: u32,
    arm_thread_exit: fn(),
) -> Result<(), trace::file::NotRecording> {
    api::thread_lane::set_thread_exit(arm_thread_exit);
    if !tables::objects::init() || !tables::lanes::init() {
        warn_once(
            Warning::NoTraceFile,
            b"cannot reserve memory for the shim's tables; this process is not recorded",
        );
        return Err(trace::file::NotRecording);
    }
    let fork_child = extra_flags & FLAG_FORK_CHILD != 0;
    if fork_child {
        features::filter::reset_after_fork();
        features::snapshot::reset_after_fork();
        features::access::reset_after_fork();
        features::ratios::reset_after_fork();
        trace::control::reset_after_fork();
        identities::interest::reset_after_fork();
        api::misuse::reset_after_fork();
        tables::objects::reset_after_fork();
        tables::lanes::reset_after_fork();
        identities::sites::reset_after_fork();
        identities::modules::reset_after_fork();
        crate::diag::reset_after_fork();
    }
    identities::modules::init();
    identities::interest::init();
    time::clock::init(config::tsc_allowed(), trace::file::note_tsc);
    time::selfcost::init(trace::control::poll);
    time::call_timer::init();
    // Modules are recorded when the first site needs them.
    // Both clocks at one moment: absolute times (deadlines on either clock)
    // are shown relative to the start.
    let start = if fork_child {
        // The child's one thread is the one that forked.
        tables::thread_state::ThreadState::with(|s| s.forked_at())
    } else {
        (now_ns(), clock_ns(libc::CLOCK_REALTIME))
    };
    let by_switches = if config::calls_timed() && time::call_timer::switches_seen() {
        FLAG_CALLS_BY_SWITCHES
    } else {
        0
    };
    trace::file::create(extra_flags | by_switches, start)?;
    // From here, a copy of this memory made behind our back can be told.
    trace::copied::mark_ours();
    Ok(())
}

/// A load or store of `address` by a thread that holds a lock (a program
/// built with `locksuit cc`).
///
/// False when the access is left out by sampling (`LOCKSUIT_DATA_SAMPLE`):
/// the rest of its engagement's accesses need no call either.
pub fn accessed(g: &InHook, address: u64, write: bool) -> bool {
    let Some(lane) = current_lane(g) else {
        return true;
    };
    let held = g.thread().held();
    if let Some(top) = held.top() {
        let depth = held.entries().len();
        if !features::access::sampled(lane, top, depth) {
            return false;
        }
        features::access::touched(lane, (top, depth), address, write);
    }
    true
}

/// Whether any data was touched under a lock yet (only then can a store
/// made holding none be to data some lock guards).
#[inline(always)]
pub fn data_recorded() -> bool {
    features::access::recorded_any()
}

/// The calling thread stored to `address` holding no lock.
pub fn stored_unlocked(g: &InHook, address: u64) {
    if let Some(lane) = current_lane(g) {
        features::access::stored_unlocked(lane, address);
    }
}

/// A heap block of `size` bytes at `address` was allocated by the call
/// returning to `pc` (a program built with `locksuit cc`).
pub fn block_allocated(address: u64, size: u64, pc: u64) {
    tables::heap::block_allocated(address, size, pc);
}

/// A heap block of `size` bytes at `address` was freed (a program built
/// with `locksuit cc`): what was recorded on it is finished.
pub fn block_freed(address: u64, size: u64) {
    features::access::block_freed(address, size);
}

#[cfg(test)]
mod tests;
