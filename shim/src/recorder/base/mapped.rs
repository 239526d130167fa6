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

/// [`map_anonymous`] for state a fork child starts afresh anyway (the
/// lanes, the lock table, the shim's stacks): a child gets it zero-filled
/// (`MADV_WIPEONFORK`, Linux 4.14; before, it gets a copy, which its reset
/// handles). Not shared with the child, its pages cost a fork nothing: no
/// page table entries copied, and no copy-on-write fault when the parent
/// writes them next.
pub fn map_anonymous_zeroed_in_child<T>(len: usize) -> Option<*mut T> {
    let p: *mut T = map_anonymous(len)?;
    // SAFETY: advice on our own fresh private anonymous mapping; refused
    // (older kernels, confined), the child gets a copy.
    let _ = unsafe { crate::sys::madvise(p.cast(), len, libc::MADV_WIPEONFORK) };
    Some(p)
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

/// Zeroes the shim's own table of `len` bytes at `at` (a static in `.bss`,
/// or a mapping) without writing its whole pages: those are given back
/// and read as zeros again (`MADV_DONTNEED`; no page of a file is ever
/// whole inside a `.bss` table). Only the partial pages at either end are
/// written. A fork child resetting megabytes of tables otherwise writes
/// (and so copies or faults in) every page of them.
///
/// # Safety
/// Nothing else may use the table meanwhile (in a fork child, before it
/// records: it is the only thread).
pub unsafe fn zero(at: *mut u8, len: usize) {
    let _errno = crate::diag::ErrnoGuard::save();
    // SAFETY: sysconf only reads the page size the loader recorded.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let start = at as usize;
    let end = start + len;
    let first_whole = start.next_multiple_of(page);
    let last_whole = end / page * page;
    // SAFETY: every range written lies inside the caller's table, which
    // nothing else uses now (see the contract); the advice is on whole
    // pages inside it.
    unsafe {
        if first_whole >= last_whole {
            core::ptr::write_bytes(at, 0, len);
            return;
        }
        core::ptr::write_bytes(at, 0, first_whole - start);
        core::ptr::write_bytes(last_whole as *mut u8, 0, end - last_whole);
        let advised = crate::sys::madvise(
            first_whole as *mut u8,
            last_whole - first_whole,
            libc::MADV_DONTNEED,
        );
        if advised.is_err() {
            core::ptr::write_bytes(first_whole as *mut u8, 0, last_whole - first_whole);
        }
    }
}
