//! Memory of the shim's own: anonymous private mappings, never the heap
//! (the program's allocator may be what is being interposed, or may take
//! locks of its own).

use core::sync::atomic::{AtomicPtr, Ordering};

/// Reserves `len` bytes of zero-filled private memory, touched lazily (the
/// shim's tables and grown indexes; never the heap). Leaves errno as it was.
pub fn map_anonymous<T>(len: usize) -> Option<*mut T> {
    let _errno = crate::diag::ErrnoGuard::save();
    // SAFETY: a fresh anonymous mapping; it aliases nothing.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p.cast())
}

/// The table published in `cell`, mapped (`len` bytes, zeroed, touched
/// lazily) on first use; when two threads race, one mapping wins and the
/// other is given back. `None` if the memory cannot be had.
pub fn mapped_once<T>(cell: &AtomicPtr<T>, len: usize) -> Option<*mut T> {
    let table = cell.load(Ordering::Acquire);
    if !table.is_null() {
        return Some(table);
    }
    let fresh: *mut T = map_anonymous(len)?;
    match cell.compare_exchange(
        core::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => Some(fresh),
        Err(theirs) => {
            // SAFETY: our own mapping of `len` bytes, never published.
            unsafe { libc::munmap(fresh.cast(), len) };
            Some(theirs)
        }
    }
}
