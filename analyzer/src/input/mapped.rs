//! Trace files mapped into memory, and what happens if one shrinks while
//! it is read.
//!
//! Events are read in place from the mapping long after the file was
//! opened. If another process cuts the file meanwhile, touching a page past
//! its new end raises SIGBUS, which would kill the analyzer without a word.
//! Every mapping is therefore registered with the file's name, and a SIGBUS
//! handler that finds the faulting address in a registered mapping says which
//! file shrank, in one line, and exits with status 2. A SIGBUS anywhere else
//! is handed back to whatever handled it before.
//!
//! A file with holes (blocks the shim reserved and could not write, on a
//! disk that filled) is read into memory instead: on tmpfs, touching a hole
//! through a mapping needs a fresh page, which a full filesystem refuses
//! with SIGBUS, while `read` returns zeros for it.

use memmap2::{Mmap, MmapOptions};
use std::fs::File;
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Once, OnceLock};

/// One mapping the SIGBUS handler knows about. Never freed (a few dozen
/// bytes per trace read), so the handler can walk the list at any moment
/// without locks; `live` is cleared when the mapping goes away.
pub struct Region {
    start: usize,
    len: usize,
    live: AtomicBool,
    /// The whole line the handler writes, newline included.
    message: Box<[u8]>,
    next: AtomicPtr<Region>,
}

/// Newest first, so an address reused by a later mapping finds that one.
static REGIONS: AtomicPtr<Region> = AtomicPtr::new(ptr::null_mut());
static INSTALL: Once = Once::new();
/// The SIGBUS action before ours (Rust's own handler, or the default).
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// A trace file's bytes: a read-only mapping of the whole file, watched for
/// SIGBUS, or (a file with holes) a copy read into memory.
pub enum WatchedMap {
    Mapped { map: Mmap, region: &'static Region },
    Read(Vec<u8>),
}

impl AsRef<[u8]> for WatchedMap {
    fn as_ref(&self) -> &[u8] {
        match self {
            WatchedMap::Mapped { map, .. } => map,
            WatchedMap::Read(bytes) => bytes,
        }
    }
}

impl WatchedMap {
    pub fn advise(&self, advice: memmap2::Advice) -> std::io::Result<()> {
        match self {
            WatchedMap::Mapped { map, .. } => map.advise(advice),
            WatchedMap::Read(_) => Ok(()),
        }
    }

    /// Lets go of the pages read so far (see `load::Pages::release`).
    pub fn release(&self) {
        let WatchedMap::Mapped { map, .. } = self else {
            return;
        };
        // SAFETY: the mapping is private and read-only, so no page of it was
        // ever written: MADV_DONTNEED only unmaps the pages, and any later
        // access maps them again from the file (the page cache) with the
        // same contents. Nothing holds on to the pages themselves, only to
        // addresses inside the mapping, which stays mapped.
        let _ = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
    }
}

impl Drop for WatchedMap {
    fn drop(&mut self) {
        if let WatchedMap::Mapped { region, .. } = self {
            region.live.store(false, Ordering::Release);
        }
    }
}

/// Whether `file` has a hole in its first `len` bytes (`SEEK_HOLE`; a
/// filesystem that cannot tell says none).
fn has_hole(file: &File, len: usize) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: lseek on a descriptor we own; it moves the offset, which
    // nothing here reads through (reads are positioned).
    let hole = unsafe { libc::lseek(file.as_raw_fd(), 0, libc::SEEK_HOLE) };
    hole >= 0 && (hole as u64) < len as u64
}

/// The first `len` bytes of `file`, read (holes read as zeros).
fn read_whole(file: &File, len: usize) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut bytes = vec![0u8; len];
    let mut at = 0;
    while at < len {
        match file.read_at(&mut bytes[at..], at as u64)? {
            0 => {
                bytes.truncate(at);
                break;
            }
            n => at += n,
        }
    }
    Ok(bytes)
}

/// Maps the first `len` bytes of `file` (the trace at `path`), or reads
/// them if the file has holes.
pub fn map(file: &File, len: usize, path: &Path) -> std::io::Result<WatchedMap> {
    if has_hole(file, len) {
        return read_whole(file, len).map(WatchedMap::Read);
    }
    install_handler();
    // SAFETY: a read-only mapping. The file may be cut while it is mapped
    // (the shim never does, but anyone else may); the SIGBUS that touching
    // the lost pages raises is caught by `on_sigbus`, which exits.
    let map = unsafe { MmapOptions::new().len(len).map(file) }?;
    let region: &'static Region = Box::leak(Box::new(Region {
        start: map.as_ptr() as usize,
        len: map.len(),
        live: AtomicBool::new(true),
        message: format!(
            "locksuit: {}: the file shrank while it was being read (cut by another process?); no report\n",
            path.display()
        )
        .into_bytes()
        .into_boxed_slice(),
        next: AtomicPtr::new(ptr::null_mut()),
    }));
    let node = region as *const Region as *mut Region;
    let mut head = REGIONS.load(Ordering::Acquire);
    loop {
        region.next.store(head, Ordering::Relaxed);
        match REGIONS.compare_exchange_weak(head, node, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break,
            Err(now) => head = now,
        }
    }
    Ok(WatchedMap::Mapped { map, region })
}

fn install_handler() {
    INSTALL.call_once(|| {
        // SAFETY: sigaction with a zeroed struct filled in here; the handler
        // only does async-signal-safe things (atomic loads, write, _exit,
        // sigaction).
        unsafe {
            let mut previous: libc::sigaction = std::mem::zeroed();
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus
                as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(libc::SIGBUS, &action, &mut previous) == 0 {
                let _ = PREVIOUS.set(previous);
            }
        }
    });
}

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler;
    // the regions are leaked (never freed) and fully built before they are
    // published; write, _exit and sigaction are async-signal-safe.
    unsafe {
        let addr = (*info).si_addr() as usize;
        let mut node = REGIONS.load(Ordering::Acquire);
        while let Some(region) = node.as_ref() {
            if region.live.load(Ordering::Acquire)
                && addr >= region.start
                && addr - region.start < region.len
            {
                let msg = &region.message;
                libc::write(2, msg.as_ptr().cast(), msg.len());
                libc::_exit(2);
            }
            node = region.next.load(Ordering::Acquire);
        }
        // Not a trace: put the previous action back and return; the faulting
        // access repeats and is handled as if we had never been here.
        match PREVIOUS.get() {
            Some(previous) => libc::sigaction(libc::SIGBUS, previous, ptr::null_mut()),
            None => {
                libc::signal(libc::SIGBUS, libc::SIG_DFL);
                0
            }
        };
    }
}
