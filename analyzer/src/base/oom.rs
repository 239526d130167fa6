//! Running out of memory ends the analyzer with exit status 2 and one line
//! on stderr, like any other input it cannot handle, never with the
//! standard library's abort (SIGABRT, "memory allocation of N bytes
//! failed"). A trace far larger than the machine, or a memory limit set by
//! the user (`ulimit -v`, a container), are the usual causes.
//!
//! The analyzer never asks for memory it could do without (no fallible
//! allocation: every `Vec` grows or the process ends), so a failed
//! allocation ends it here, before Rust's allocation-error handler runs.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::Mutex;

/// The trace being read and analysed, for the message (its path's bytes,
/// cut at the buffer's length); empty between traces.
static CURRENT_TRACE: Mutex<([u8; 256], usize)> = Mutex::new(([0; 256], 0));

/// Names the trace the next allocations are for (`None`: no trace).
pub fn working_on(trace: Option<&Path>) {
    use std::os::unix::ffi::OsStrExt;
    let bytes = trace.map_or(&[][..], |p| p.as_os_str().as_bytes());
    if let Ok(mut current) = CURRENT_TRACE.lock() {
        let len = bytes.len().min(current.0.len());
        current.0[..len].copy_from_slice(&bytes[..len]);
        current.1 = len;
    }
}

/// The system allocator, which exits with status 2 instead of returning null.
pub struct ExitOnOom;

/// Allocations of this size or more get their own mapping.
const MMAP_THRESHOLD: i32 = 256 * 1024;

/// Makes glibc give every large allocation its own mapping, always. By
/// default the threshold rises to the size of the largest mapped block
/// freed (up to 32 MiB): after the trace's records are let go of, vectors
/// of up to 32 MiB would then grow inside the heap, each doubling copying
/// and leaving its old block resident but free; with a mapping each, a
/// growing vector is moved by mremap(2) and a freed one goes back to the
/// system at once.
pub fn map_large_allocations() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes a malloc tunable; called before any
    // thread is started.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

/// For a reader that reads the same live trace again and again (`--follow`,
/// `top`): each read allocates much the same large vectors as the last, and
/// a mapping each (or the heap trimmed after them) would make every read
/// fault in and zero those pages afresh (half the follower's time on a busy
/// trace). Large blocks come from the heap again, and it keeps up to
/// 64 MiB of free room.
pub fn reuse_memory_between_reads() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes malloc tunables, under malloc's own lock.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}

#[cold]
fn out_of_memory(size: usize) -> ! {
    // Nothing here allocates: the message is formatted into a buffer on the
    // stack and written with one write(2).
    let mut line = [0u8; 512];
    let mut len = 0;
    let mut put = |bytes: &[u8]| {
        for &b in bytes {
            if len < line.len() {
                line[len] = b;
                len += 1;
            }
        }
    };
    put(b"locksuit: ");
    // try_lock: the failed allocation may have come from inside the lock.
    if let Ok(current) = CURRENT_TRACE.try_lock() {
        if current.1 > 0 {
            put(&current.0[..current.1]);
            put(b": ");
        }
    }
    put(b"out of memory: could not allocate ");
    let mut digits = [0u8; 20];
    let mut n = size;
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    put(&digits[at..]);
    put(b" bytes more; the report needs more memory than this process may use\n");
    // SAFETY: write(2) and _exit(2) are async-signal-safe and need no
    // memory; `line[..len]` is initialised.
    unsafe {
        libc::write(2, line.as_ptr().cast(), len);
        libc::_exit(crate::base::exit::EXIT_USAGE);
    }
}

// SAFETY: every method forwards to `System` with the same arguments and
// returns what it returned, except that a null (failure) never returns.
unsafe impl GlobalAlloc for ExitOnOom {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's guarantees for `layout` are passed on.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; the caller's guarantees are passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            out_of_memory(new_size);
        }
        p
    }
}
