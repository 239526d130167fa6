//! A function a lower stage calls to tell a higher one that something
//! happened, set by the higher one at start (the stages only call
//! downwards; see `tests/layering.rs`).

use core::sync::atomic::{AtomicUsize, Ordering};

/// A slot for a `fn()`, empty until set.
pub struct Callback(AtomicUsize);

impl Callback {
    pub const fn new() -> Self {
        Callback(AtomicUsize::new(0))
    }

    /// Sets the function. Sequentially consistent, as [`call`](Self::call)
    /// is: of a setter that then reads some state and a changer of that
    /// state that then calls, one sees the other's write.
    pub fn set(&self, f: fn()) {
        self.0.store(f as usize, Ordering::SeqCst);
    }

    /// Calls the function, if one was set.
    pub fn call(&self) {
        let f = self.0.load(Ordering::SeqCst);
        if f != 0 {
            // SAFETY: only `set` stores here, and it stores a `fn()`.
            unsafe { core::mem::transmute::<usize, fn()>(f)() };
        }
    }
}

impl Default for Callback {
    fn default() -> Self {
        Self::new()
    }
}
