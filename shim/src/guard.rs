//! The re-entrancy guard every hook enters first: [`HookGuard`] is an
//! [`InHook`] (this thread is inside a hook, not re-entered) taken while
//! the process records.

use crate::lifecycle;
pub use crate::recorder::tables::thread_state::{
    calling_out, close_gates, close_load_gate, nested_in_bookkeeping, outside_hooks,
    thread_holds_a_lock, InHook, ThreadState,
};

/// Proof that this thread is inside a hook and the process records;
/// dropping it leaves the hook. The recorder's functions take the
/// [`InHook`] it derefs to.
pub struct HookGuard(InHook);

impl HookGuard {
    /// Enters the hook if this thread is not already inside one and the
    /// process is recording. Initialises the shim on first use.
    #[inline]
    pub fn enter() -> Option<HookGuard> {
        let Some(in_hook) = InHook::enter() else {
            if nested_in_bookkeeping() {
                // A signal handler interrupted our bookkeeping and called a
                // hook: pass it through, but never silently.
                lifecycle::nested_call_passed_through();
            }
            return None;
        };
        let guard = HookGuard(in_hook);
        if lifecycle::recording() {
            Some(guard)
        } else {
            None
        }
    }

    /// Enters for a blocking call beyond the lock API. Unlike [`enter`],
    /// a call nested in the shim's own bookkeeping (a signal handler's
    /// `write`) is not counted here: most such calls do not block, and the
    /// hook counts one as dropped only if it blocked long enough to have
    /// been recorded (see [`nested_in_bookkeeping`]).
    ///
    /// [`enter`]: HookGuard::enter
    #[inline]
    pub fn enter_quietly() -> Option<HookGuard> {
        let guard = HookGuard(InHook::enter()?);
        lifecycle::recording().then_some(guard)
    }

    /// The thread's state if a hook could enter now and recording has
    /// started, without entering (lean mode's quick engagement).
    #[inline(always)]
    pub fn could_enter() -> Option<&'static ThreadState> {
        let state = outside_hooks()?;
        lifecycle::recording_started().then_some(state)
    }

    /// Enters only when nothing needs doing first: not nested (a nested
    /// call is left to [`enter`], which reports it) and the shim already
    /// started. It calls nothing, so a hook can use it on a path with no
    /// frame; `None` sends the hook the general way.
    ///
    /// [`enter`]: HookGuard::enter
    #[inline(always)]
    pub fn enter_quickly() -> Option<HookGuard> {
        let guard = HookGuard(InHook::enter()?);
        lifecycle::recording_started().then_some(guard)
    }

    /// [`enter_quickly`](Self::enter_quickly) for a handler that runs only
    /// while the process records (the full mode's quick mutex handlers,
    /// which `lifecycle::on_recording_changed` swaps out when it stops):
    /// the recording is not asked about again. A call already past the
    /// trampoline when the recording stops finishes as it began.
    #[inline(always)]
    pub fn enter_recording() -> Option<HookGuard> {
        Some(HookGuard(InHook::enter()?))
    }
}

impl core::ops::Deref for HookGuard {
    type Target = InHook;

    #[inline(always)]
    fn deref(&self) -> &InHook {
        &self.0
    }
}
