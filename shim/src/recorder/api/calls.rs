//! Blocking calls beyond the lock API (sleeps, polls, I/O, joins, barrier
//! waits): one event per call that blocked for at least
//! `LOCKSUIT_BLOCK_MIN_US`, with the line that made it, the kind of file it
//! used and the lock the thread held meanwhile. Calls that returned sooner
//! cost their hook a look at the kernel's rseq pointer (see `call_timer`)
//! and nothing here.

use crate::recorder::api::thread_lane::current_lane;
use crate::recorder::base::caller::Caller;
use crate::recorder::features::events::{self, CallBlocked};
use crate::recorder::identities::sites;
use crate::recorder::tables::lanes::Lane;
use crate::recorder::tables::thread_state::InHook;
use crate::sys;
use locksuit_format::*;

/// Where a blocking call came from.
#[derive(Clone, Copy)]
pub enum CallFrom {
    /// Passed by the hook's trampoline.
    Caller(Caller),
    /// Found by unwinding past the exported hook that starts at this
    /// address (hooks with too many arguments for a trampoline).
    Hook(u64),
    /// A site already looked up (joins, barrier waits).
    Site(u32),
}

/// A call that blocked from `started` to `ended` on file descriptor `fd`
/// (if it takes one).
pub fn call_blocked(
    g: &InHook,
    call: BlockingCall,
    from: CallFrom,
    fd: Option<i32>,
    (started, ended): (u64, u64),
) {
    // fstat and the unwinder may set errno; the program's stays as the call left it.
    let _errno = crate::diag::ErrnoGuard::save();
    let Some(lane) = current_lane(g) else { return };
    let site_id = crate::recorder::tables::lanes::timed_slow_work(lane, |lane| site_of(lane, from));
    let fd = match fd {
        Some(fd) if fd >= 0 => (fd as u32, fd_kind(fd)),
        _ => (u32::MAX, FD_NONE),
    };
    let held = g.thread().held().entries();
    let innermost = held.last().map_or((0, 0), |e| {
        let site = if e.counter.is_null() {
            0
        } else {
            // SAFETY: a counter record of this thread's lane.
            unsafe { (*e.counter).site_id }
        };
        (e.lock_id, site)
    });
    let record = CallBlocked {
        call,
        site_id,
        fd,
        held: (innermost.0, innermost.1, held.len() as u32),
        started,
        ended,
    };
    events::call_blocked(lane, &record);
    crate::recorder::features::switches::drain(lane, false);
}

fn site_of(lane: &mut Lane, from: CallFrom) -> u32 {
    match from {
        CallFrom::Caller(caller) => {
            let context = sites::context_of(lane, caller, sites::PythonLines::Judged);
            sites::site_id(lane, caller, context, sites::PythonLines::Judged)
        }
        CallFrom::Hook(hook) => sites::caller_of_hook(hook).map_or(0, |(caller, context)| {
            sites::site_id(lane, caller, context, sites::PythonLines::No)
        }),
        CallFrom::Site(site) => site,
    }
}

/// What `fd` is, for the call's class (a socket's I/O is network I/O).
fn fd_kind(fd: i32) -> u32 {
    let Some(st) = sys::fstat(fd) else {
        return FD_NONE;
    };
    match st.file_type {
        libc::S_IFREG | libc::S_IFBLK => FD_FILE,
        libc::S_IFIFO => FD_PIPE,
        libc::S_IFSOCK => FD_SOCKET,
        libc::S_IFCHR => FD_DEVICE,
        _ => FD_OTHER,
    }
}
