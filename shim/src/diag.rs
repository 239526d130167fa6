//! The shim's only output: one line per kind of degradation, ever. It goes
//! into the trace's header (the report says it) and on stderr, but only
//! while descriptor 2 is still the stderr the process started with (a
//! program that closed it may have opened its own data file there), and
//! not at all with `LOCKSUIT_QUIET=1`, as `locksuit run` and
//! `run-under-shim.sh` set it: a test that compares its stderr must not
//! see ours.

use crate::sys::{self, FileId};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};

#[repr(u32)]
#[derive(Clone, Copy)]
pub enum Warning {
    BadSetting = 1 << 0,
    NoTraceFile = 1 << 1,
    FallbackDir = 1 << 2,
    OutOfSpace = 1 << 3,
    DiskFull = 1 << 4,
    TablesFull = 1 << 5,
    NestedCalls = 1 << 6,
    Switches = 1 << 7,
    Policy = 1 << 8,
    PolicyLines = 1 << 9,
    UnseenChild = 1 << 10,
}

static WARNED: AtomicU32 = AtomicU32::new(0);
static QUIET: AtomicBool = AtomicBool::new(false);
/// Told each warning, to keep in the trace (an `fn(&[u8])`, or null):
/// set by the recorder once the trace exists, so this module need not
/// know where it goes.
static KEEPER: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

/// Warnings said before there was a trace to keep them in (a bad setting,
/// a fallback directory), each ending in a newline; the trace copies them
/// when it is made. Bytes are claimed with `EARLY_LEN` and written once,
/// each range by the one caller that claimed it.
struct Early(UnsafeCell<[u8; EARLY_MAX]>);
// SAFETY: callers write only the disjoint ranges they claimed.
unsafe impl Sync for Early {}
const EARLY_MAX: usize = 1024;
static EARLY: Early = Early(UnsafeCell::new([0; EARLY_MAX]));
static EARLY_LEN: AtomicU32 = AtomicU32::new(0);

/// Says `locksuit: <msg>` unless this kind was already said: into the
/// trace (or, before there is one, kept for it), and on stderr unless
/// quiet. Only atomics and one write(2): safe in a signal handler.
pub fn warn_once(kind: Warning, msg: &[u8]) {
    if WARNED.fetch_or(kind as u32, Ordering::Relaxed) & kind as u32 != 0 {
        return;
    }
    let keeper = KEEPER.load(Ordering::Acquire);
    if keeper.is_null() {
        keep_early(msg);
    } else {
        // SAFETY: only ever stored from an `fn(&[u8])` (see `keep_in`).
        let keep = unsafe { core::mem::transmute::<*mut (), fn(&[u8])>(keeper) };
        keep(msg);
    }
    if !QUIET.load(Ordering::Relaxed) {
        write_stderr(&[b"locksuit: ", msg, b"\n"]);
    }
}

fn keep_early(msg: &[u8]) {
    let len = msg.len() + 1;
    let at = EARLY_LEN.fetch_add(len as u32, Ordering::AcqRel) as usize;
    if at + len > EARLY_MAX {
        return;
    }
    // SAFETY: bytes `at..at + len` of EARLY were claimed above by this
    // call alone, and lie within it.
    unsafe {
        let to = EARLY.0.get().cast::<u8>().add(at);
        core::ptr::copy_nonoverlapping(msg.as_ptr(), to, msg.len());
        *to.add(msg.len()) = b'\n';
    }
}

/// The warnings said before the trace existed (see [`keep_in`]).
pub fn early_warnings() -> &'static [u8] {
    let len = (EARLY_LEN.load(Ordering::Acquire) as usize).min(EARLY_MAX);
    // SAFETY: the claimed prefix of EARLY; a range claimed but not yet
    // written reads as zeros, which the reader skips.
    unsafe { core::slice::from_raw_parts(EARLY.0.get().cast::<u8>(), len) }
}

/// From now on, each warning is given to `keep` (the trace's header).
pub fn keep_in(keep: fn(&[u8])) {
    KEEPER.store(keep as *mut (), Ordering::Release);
}

/// `LOCKSUIT_QUIET=1`: nothing on stderr (the trace keeps it all).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Lets a fork child warn again about its own trace, which keeps its own.
pub fn reset_after_fork() {
    WARNED.store(0, Ordering::Relaxed);
    KEEPER.store(core::ptr::null_mut(), Ordering::Release);
    EARLY_LEN.store(0, Ordering::Relaxed);
}

/// Whether descriptor 2 was open at start-up: not yet looked at, open (its
/// file in `STDERR_DEV`/`STDERR_INO`), or closed.
static STDERR_STATE: AtomicU8 = AtomicU8::new(STDERR_UNKNOWN);
static STDERR_DEV: AtomicU64 = AtomicU64::new(0);
static STDERR_INO: AtomicU64 = AtomicU64::new(0);
const STDERR_UNKNOWN: u8 = 0;
const STDERR_OPEN: u8 = 1;
const STDERR_CLOSED: u8 = 2;

/// Notes which file stderr is, at start-up (before any warning can be due).
pub fn note_stderr() {
    match sys::fstat(2) {
        Some(st) => {
            STDERR_DEV.store(st.id.dev, Ordering::Relaxed);
            STDERR_INO.store(st.id.ino, Ordering::Relaxed);
            STDERR_STATE.store(STDERR_OPEN, Ordering::Release);
        }
        None => STDERR_STATE.store(STDERR_CLOSED, Ordering::Release),
    }
}

/// Descriptor 2 is still the stderr noted at start-up.
fn stderr_is_original() -> bool {
    if STDERR_STATE.load(Ordering::Acquire) == STDERR_UNKNOWN {
        note_stderr();
    }
    STDERR_STATE.load(Ordering::Acquire) == STDERR_OPEN
        && sys::fstat(2).is_some_and(|st| {
            st.id
                == FileId {
                    dev: STDERR_DEV.load(Ordering::Relaxed),
                    ino: STDERR_INO.load(Ordering::Relaxed),
                }
        })
}

fn write_stderr(parts: &[&[u8]]) {
    if !stderr_is_original() {
        return;
    }
    // Assemble into one buffer so the line is a single write and cannot
    // interleave with the program's own stderr output.
    let mut buf = [0u8; 512];
    let mut len = 0;
    for part in parts {
        let n = part.len().min(buf.len() - len);
        buf[len..len + n].copy_from_slice(&part[..n]);
        len += n;
    }
    // A raw write: not a cancellation point, and errno stays the program's.
    let _ = sys::write(2, &buf[..len]);
}

/// Restores the thread's errno when dropped. Used on the cold paths that
/// make system calls which may fail (initialisation, trace growth, /proc
/// reads): the program must never see an errno set by the shim.
pub struct ErrnoGuard(i32);

/// This thread's errno.
pub fn errno() -> i32 {
    // SAFETY: reading this thread's errno.
    unsafe { *libc::__errno_location() }
}

impl ErrnoGuard {
    pub fn save() -> Self {
        // SAFETY: reading this thread's errno.
        ErrnoGuard(unsafe { *libc::__errno_location() })
    }
}

impl Drop for ErrnoGuard {
    fn drop(&mut self) {
        // SAFETY: writing this thread's errno.
        unsafe { *libc::__errno_location() = self.0 };
    }
}
