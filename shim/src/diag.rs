//! The shim's only output: one line on stderr per kind of degradation, ever,
//! and only while descriptor 2 is still the stderr the process started with
//! (a program that closed it may have opened its own data file there).

use crate::sys::{self, FileId};
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

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

/// Writes `locksuit: <msg>` to stderr unless this kind was already reported.
pub fn warn_once(kind: Warning, msg: &[u8]) {
    if WARNED.fetch_or(kind as u32, Ordering::Relaxed) & kind as u32 != 0 {
        return;
    }
    write_stderr(&[b"locksuit: ", msg, b"\n"]);
}

/// Lets a fork child warn again about its own trace.
pub fn reset_after_fork() {
    WARNED.store(0, Ordering::Relaxed);
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
