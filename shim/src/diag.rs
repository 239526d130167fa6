//! The shim's only output: one line on stderr per kind of degradation, ever.

use core::sync::atomic::{AtomicU32, Ordering};

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

fn write_stderr(parts: &[&[u8]]) {
    // Assemble into one buffer so the line is a single write and cannot
    // interleave with the program's own stderr output.
    let mut buf = [0u8; 512];
    let mut len = 0;
    for part in parts {
        let n = part.len().min(buf.len() - len);
        buf[len..len + n].copy_from_slice(&part[..n]);
        len += n;
    }
    // SAFETY: writing an initialised buffer to fd 2; errno is saved and
    // restored so the program never sees ours.
    unsafe {
        let saved = *libc::__errno_location();
        libc::write(2, buf.as_ptr().cast(), len);
        *libc::__errno_location() = saved;
    }
}

/// Restores the thread's errno when dropped. Used on the cold paths that
/// make system calls which may fail (initialisation, trace growth, /proc
/// reads): the program must never see an errno set by the shim.
pub struct ErrnoGuard(i32);

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
