//! Memory of the shim's own: anonymous private mappings, never the heap
//! (the program's allocator may be what is being interposed, or may take
//! locks of its own).

use core::sync::atomic::{AtomicPtr, Ordering};

/// Reserves `len` bytes of zero-filled private memory, touched lazily (the
/// shim's tables and grown indexes; never the heap). Leaves errno as it was.
pub fn map_anonymous<T>(len: usize) -> Option<*mut T> {
    let _errno = crate::diag::ErrnoGuard::save();
    // A fresh anonymous mapping; it aliases nothing.
    crate::sys::mmap(
        core::ptr::null_mut(),
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
        -1,
        0,
    )
    .map(|p| p.cast())
}

/// [`map_anonymous`], made resident now: for a hashed table that will be
/// touched all over (a read of an untouched page maps the shared zero page,
/// and the write after it must flush that mapping from every CPU the
/// process runs on, an interrupt to each).
pub fn map_anonymous_resident<T>(len: usize) -> Option<*mut T> {
    let p: *mut T = map_anonymous(len)?;
    populate(p.cast(), len);
    Some(p)
}

/// Makes the pages holding `len` bytes at `at` resident and writable, as a
/// write would, without writing: a page already so is left as it is, and a
/// range that is not writable makes the call fail, with no signal. Best
/// effort: before Linux 5.14, or when memory cannot be had now, the pages
/// are faulted in later, as before. Leaves errno as it was.
#[cold]
#[inline(never)]
pub fn populate(at: *mut u8, len: usize) {
    let _errno = crate::diag::ErrnoGuard::save();
    // SAFETY: sysconf only reads the page size the loader recorded.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let start = at as usize & !(page - 1);
    let end = (at as usize).saturating_add(len.max(1));
    // SAFETY: populating faults pages in for writing and writes nothing; a
    // range that is not a writable mapping only makes it fail.
    let _ =
        unsafe { crate::sys::madvise(start as *mut u8, end - start, libc::MADV_POPULATE_WRITE) };
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
            unsafe { crate::sys::munmap(fresh.cast(), len) };
            Some(theirs)
        }
    }
}
