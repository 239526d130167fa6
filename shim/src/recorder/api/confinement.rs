//! The program confines itself: seccomp (strict mode or a filter), or its
//! TSC turned off (`PR_SET_TSC`). Before the real call the recorder gets
//! ready to go on without a system call of its own (see `sys::confined`):
//! the calling thread registered, blocks set aside for the trace, the
//! unwinder's first-use setup done, the clock moved off the TSC where it
//! would fault. Afterwards the trace says so.

use crate::recorder::api::thread_lane::current_lane;
use crate::recorder::tables::thread_state::InHook;
use crate::recorder::time::clock::{self, now_ns};
use crate::recorder::trace::file;
use crate::sys::confined;
use locksuit_format::*;

/// What a call about to be made would confine.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Confining {
    /// `SECCOMP_MODE_STRICT`: read, write, exit and sigreturn only, and no
    /// TSC, for the calling thread.
    Strict,
    /// A seccomp filter: any system call the program did not allow may
    /// kill it.
    Filter,
    /// `PR_SET_TSC` with `PR_TSC_SIGSEGV`: `rdtsc` faults on the thread.
    NoTsc,
}

const PR_SET_SECCOMP: i32 = 22;
const PR_SET_TSC: i32 = 26;
const PR_TSC_SIGSEGV: u64 = 2;
const SECCOMP_MODE_STRICT: u64 = 1;
const SECCOMP_MODE_FILTER: u64 = 2;
const SECCOMP_SET_MODE_STRICT: u64 = 0;
const SECCOMP_SET_MODE_FILTER: u64 = 1;

impl Confining {
    /// What `prctl(option, arg2, …)` would confine, if anything.
    pub fn of_prctl(option: i32, arg2: u64) -> Option<Confining> {
        match (option, arg2) {
            (PR_SET_SECCOMP, SECCOMP_MODE_STRICT) => Some(Confining::Strict),
            (PR_SET_SECCOMP, SECCOMP_MODE_FILTER) => Some(Confining::Filter),
            (PR_SET_TSC, PR_TSC_SIGSEGV) => Some(Confining::NoTsc),
            _ => None,
        }
    }

    /// What `syscall(n, a1, a2, …)` would confine, if anything.
    pub fn of_syscall(n: i64, a1: u64, a2: u64) -> Option<Confining> {
        if n == libc::SYS_prctl {
            return Confining::of_prctl(a1 as i32, a2);
        }
        if n != libc::SYS_seccomp {
            return None;
        }
        match a1 {
            SECCOMP_SET_MODE_STRICT => Some(Confining::Strict),
            SECCOMP_SET_MODE_FILTER => Some(Confining::Filter),
            _ => None, // SECCOMP_GET_ACTION_AVAIL, SECCOMP_GET_NOTIF_SIZES
        }
    }

    fn loses_tsc(self) -> bool {
        matches!(self, Confining::Strict | Confining::NoTsc)
    }
}

/// A confining call under way: what [`ended`] needs.
pub struct Begun {
    what: Confining,
    /// When, read before the clock could turn coarse.
    at_ns: u64,
    /// The clock as it was, if this call moved it to the coarse one.
    clock_before: Option<u8>,
    gate_closed: bool,
}

/// Before the real call. `g` is `None` when the calling thread may not
/// record now (nested in the shim, or the process is not recorded): then
/// only the gate is closed.
pub fn begins(g: Option<&InHook>, what: Confining) -> Begun {
    let at_ns = now_ns();
    let clock_before = what.loses_tsc().then(clock::use_coarse);
    if what == Confining::NoTsc {
        return Begun {
            what,
            at_ns,
            clock_before,
            gate_closed: false,
        };
    }
    if let Some(g) = g.filter(|_| confined::own_calls_allowed()) {
        // Registered now (a thread's first registration makes system calls).
        let _ = current_lane(g);
        file::fill_pool();
        crate::recorder::identities::sites::warm_unwinder();
    }
    confined::close_for_install();
    Begun {
        what,
        at_ns,
        clock_before,
        gate_closed: true,
    }
}

/// After the real call, which `took_effect` or failed.
pub fn ended(b: Begun, took_effect: bool) {
    if !took_effect {
        if let Some(before) = b.clock_before {
            clock::restore(before);
        }
    }
    if b.gate_closed {
        confined::install_ended(took_effect, b.what.loses_tsc());
    } else if took_effect {
        confined::tsc_disabled();
    }
    if took_effect {
        let coarse = if b.what.loses_tsc() {
            FLAG_CLOCK_COARSE
        } else {
            0
        };
        let confined = match (b.gate_closed, confined::no_new_privs()) {
            (false, _) => 0,
            (true, false) => FLAG_CONFINED,
            (true, true) => FLAG_CONFINED | FLAG_CONFINED_SANDBOX,
        };
        file::note_confined(b.at_ns, confined | coarse);
    }
}
