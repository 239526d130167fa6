//! Steering from outside: a reader of the live trace (`locksuit top`)
//! writes a request into the header's `control` word, and the shim applies
//! it the next time a thread passes one of its slow paths (a contended
//! wait, a thread's start, the sampled timing of one fast-path call in
//! 1024). The uncontended path reads nothing new: it keeps reading the
//! flags it always reads, which this changes.

use crate::config;
use crate::recorder::trace::file;
use core::sync::atomic::{AtomicU32, Ordering};
use locksuit_format::*;

/// The request last applied (0: none yet).
static APPLIED: AtomicU32 = AtomicU32::new(0);

/// Applies a new request, if there is one.
#[inline]
pub fn poll() {
    let asked = file::control();
    if asked == APPLIED.load(Ordering::Relaxed) {
        return;
    }
    apply(asked);
}

#[cold]
fn apply(asked: u32) {
    if APPLIED.swap(asked, Ordering::Relaxed) == asked {
        return;
    }
    match asked {
        CONTROL_EVENTS_ALL => config::set_events_all(true),
        CONTROL_EVENTS_CONTENDED => config::set_events_all(false),
        _ => return,
    }
    file::set_flags(FLAG_EVENTS_SWITCHED);
}

/// In a fork child: its own trace, asked nothing yet.
pub fn reset_after_fork() {
    APPLIED.store(0, Ordering::Relaxed);
}
