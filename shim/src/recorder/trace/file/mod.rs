//! The trace file: created per process, mapped `MAP_SHARED` so that every
//! store lands in the page cache and survives any death of the process, and
//! carved into blocks handed out by an atomic bump counter.
//!
//! Each block is backed with real zeros by `pwrite` before it is touched, so
//! a full disk shows up as an error we can count instead of a SIGBUS in the
//! program. That needs a descriptor, which the program must never see or
//! collide with: it sits at a high number, close-on-exec, and is checked to
//! still be our file before every use (a program may close every
//! descriptor and open its own files at any number). If the program closed
//! it, the trace is reopened by its path; the shim never writes through a
//! descriptor that is not its own file.
//!
//! Creating, growing, repairing (a cut file) and closing the trace share
//! its mapping and descriptor state, kept private here; the header's fields
//! (read and updated in place) are `header.rs`, the blocks set aside for a
//! confined program `pool.rs`.

mod header;
mod pool;

pub use header::*;
pub use pool::fill_pool;
use pool::{forget_pool, from_pool};

use crate::config;
use crate::diag::{warn_once, Warning};
use crate::recorder::base::path::{self, PathBuf};
use crate::sys::{self, FileId};
use core::cell::UnsafeCell;
use core::mem::offset_of;
use core::ptr::addr_of_mut;
use core::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use locksuit_format::*;

static BASE: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
static MAPPED_LEN: AtomicUsize = AtomicUsize::new(0);
/// The header's `blocks_reserved` and `blocks_backed`, kept out of the
/// file too: a file cut under the program loses them (see [`repair_cut`]).
static RESERVED_MIRROR: AtomicU32 = AtomicU32::new(0);
static BACKED_MIRROR: AtomicU32 = AtomicU32::new(0);

/// The header as `create` wrote it, put back if the file is cut.
struct HeaderCopy(UnsafeCell<[u8; core::mem::size_of::<FileHeader>()]>);
// SAFETY: written only in `create` before BASE is published, read only
// after BASE was seen non-null (as `TraceFile::path`).
unsafe impl Sync for HeaderCopy {}
static HEADER_COPY: HeaderCopy =
    HeaderCopy(UnsafeCell::new([0; core::mem::size_of::<FileHeader>()]));
/// One block of zeros, written as many times as blocks are backed.
static ZEROS: [u8; BLOCK_SIZE] = [0; BLOCK_SIZE];

/// Most blocks [`alloc_blocks`] reserves and backs at once (one
/// `pwritev`, see [`sys::MOST_REPEATS`]).
pub const BATCH_BLOCKS: u32 = sys::MOST_REPEATS as u32;

/// Why this process cannot be recorded (already reported on stderr).
#[derive(Debug)]
pub struct NotRecording;

/// The trace's descriptor, the file it must refer to, and the path to
/// reopen it by.
struct TraceFile {
    fd: AtomicI32,
    dev: AtomicU64,
    ino: AtomicU64,
    /// Written by `create` before `BASE` is published (and only then), read after.
    path: UnsafeCell<PathBuf>,
}

// SAFETY: `path` is written only in `create`, while no other thread can
// reach the trace (BASE is null until the Release store that follows), and
// only read once BASE was seen non-null with Acquire.
unsafe impl Sync for TraceFile {}

static TRACE_FILE: TraceFile = TraceFile {
    fd: AtomicI32::new(-1),
    dev: AtomicU64::new(0),
    ino: AtomicU64::new(0),
    path: UnsafeCell::new(PathBuf::new()),
};

impl TraceFile {
    fn id(&self) -> FileId {
        FileId {
            dev: self.dev.load(Ordering::Relaxed),
            ino: self.ino.load(Ordering::Relaxed),
        }
    }

    fn is_ours(&self, fd: i32) -> bool {
        fd >= 0 && sys::fstat(fd).is_some_and(|st| st.id == self.id())
    }

    /// The descriptor, checked to still be the trace; reopened by path if
    /// the program closed it. `None` if it cannot be had.
    fn checked_fd(&self) -> Option<i32> {
        let fd = self.fd.load(Ordering::Acquire);
        if self.is_ours(fd) {
            return Some(fd);
        }
        // SAFETY: see the `Sync` impl: BASE is published, so `path` is final.
        let path = unsafe { &mut *self.path.get() };
        let reopened = sys::open(
            path.c_str(),
            libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )
        .ok()?;
        if !self.is_ours(reopened) {
            // Another file now sits at that path: never write into it.
            sys::close(reopened);
            return None;
        }
        let reopened = sys::move_high(reopened);
        // Never close `fd`: that number now belongs to the program.
        match self
            .fd
            .compare_exchange(fd, reopened, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Some(reopened),
            Err(winner) => {
                // Another thread reopened it first; use theirs.
                sys::close(reopened);
                self.is_ours(winner).then_some(winner)
            }
        }
    }
}

/// How many whole blocks, up to `wanted`, the file-size limit lets the
/// trace grow by from `offset`. Writing past RLIMIT_FSIZE would raise
/// SIGXFSZ, whose default action kills the program, so the shim stops
/// growing the trace before that.
fn blocks_within_file_size_limit(offset: usize, wanted: u32) -> u32 {
    match sys::file_size_limit() {
        libc::RLIM_INFINITY => wanted,
        limit => {
            (limit.saturating_sub(offset as u64) / BLOCK_SIZE as u64).min(u64::from(wanted)) as u32
        }
    }
}

/// Blocks reserved and backed in one go, in file order: `first`, then
/// `first + 1`, ... (`count` of them), none initialised yet.
#[derive(Clone, Copy)]
pub struct Reserved {
    pub first: u32,
    pub count: u32,
}

/// Why [`alloc_blocks`] gave none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoBlock {
    /// The size cap is reached: blocks reserved ahead by other lanes may
    /// still be free (see [`cap_reached`]).
    Cap,
    /// The file cannot grow (flagged and warned about), or there is none.
    Refused,
}

/// Reserves up to `wanted` consecutive blocks (at most [`BATCH_BLOCKS`])
/// and backs them with one system call: a lane that writes many blocks
/// (every event recorded) pays the calls of one block for several. Fewer
/// when the cap is near (`spread` lanes may each want a batch) or the file
/// may not grow that far; what it reserved and could not back goes back
/// if no one reserved after it.
pub fn alloc_blocks(wanted: u32, spread: u32) -> Result<Reserved, NoBlock> {
    let base = BASE.load(Ordering::Acquire);
    if base.is_null() {
        return Err(NoBlock::Refused);
    }
    if crate::recorder::trace::copied::is_copy() {
        // A child made by a clone none of our hooks saw, in the middle of
        // writing: never a block of the parent's trace.
        crate::recorder::trace::copied::adopt(false);
        return Err(NoBlock::Refused);
    }
    if !sys::confined::own_calls_allowed() {
        return from_pool(wanted);
    }
    let header_word = |field| header_u32(field).ok_or(NoBlock::Refused);
    let reserved = header_word(offset_of!(FileHeader, blocks_reserved))?;
    let max = header_word(offset_of!(FileHeader, max_blocks))?.load(Ordering::Relaxed);
    let flags = header_word(offset_of!(FileHeader, flags))?;
    if flags.load(Ordering::Relaxed) & FLAG_DISK_FULL != 0 {
        return Err(NoBlock::Refused);
    }
    let (index, count) = reserve(reserved, |index| {
        let left = max.saturating_sub(index);
        if left == 0 {
            0
        } else if left / spread.max(1) < BATCH_BLOCKS {
            // Near the cap, one at a time: batches there would sit unused
            // in some lanes while others find the trace full.
            1
        } else {
            wanted.clamp(1, BATCH_BLOCKS)
        }
    })
    .ok_or(NoBlock::Cap)?;
    let offset = index as usize * BLOCK_SIZE;
    let allowed = blocks_within_file_size_limit(offset, count);
    let written = if allowed > 0 {
        TRACE_FILE
            .checked_fd()
            .and_then(|fd| sys::pwrite_repeated(fd, &ZEROS, allowed as usize, offset as u64).ok())
    } else {
        None
    };
    // A short write backs its whole blocks.
    let backed = (written.unwrap_or(0) / BLOCK_SIZE) as u32;
    if backed < count {
        // Give the rest back, unless another lane reserved after them.
        let _ = reserved.compare_exchange(
            index + count,
            index + backed,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
    if backed < allowed.max(1) {
        set_flags(FLAG_DISK_FULL);
        warn_once(
            Warning::DiskFull,
            b"cannot grow the trace file (disk full, I/O error, file-size limit, or the program closed it and it could not be reopened); what is recorded so far is kept, new records are dropped and counted",
        );
    }
    if backed == 0 {
        return Err(NoBlock::Refused);
    }
    BACKED_MIRROR.fetch_max(index + backed, Ordering::AcqRel);
    header_word(offset_of!(FileHeader, blocks_backed))?.fetch_max(index + backed, Ordering::AcqRel);
    Ok(Reserved {
        first: index,
        count: backed,
    })
}

/// Reserves `count_at(first free block)` blocks (none if it says 0) from
/// the header's bump counter `reserved`; returns the first and how many.
fn reserve(reserved: &AtomicU32, count_at: impl Fn(u32) -> u32) -> Option<(u32, u32)> {
    let mut index = reserved.load(Ordering::Relaxed);
    let count = loop {
        let count = count_at(index);
        if count == 0 {
            return None;
        }
        match reserved.compare_exchange_weak(
            index,
            index + count,
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => break count,
            Err(now) => index = now,
        }
    };
    RESERVED_MIRROR.fetch_max(index + count, Ordering::AcqRel);
    Some((index, count))
}

/// A SIGBUS at `addr`: if it lies in the trace's mapping, the file was cut
/// under the program (truncated, as `logrotate`'s copytruncate or a
/// cleanup job does). The file is made as long as it was again (the lost
/// part reads as zeros), the header put back as `create` wrote it with
/// what the program reserved since, marked cut; the faulting store then
/// lands. If the file cannot be grown back (not ours any more, or the
/// program is confined), the mapping is replaced by private memory: the
/// program goes on, and nothing more reaches the file. Returns whether the
/// address was the trace's. Async-signal-safe: system calls and stores.
pub fn repair_cut(addr: usize) -> bool {
    let base = BASE.load(Ordering::Acquire);
    let len = MAPPED_LEN.load(Ordering::Relaxed);
    if base.is_null() || addr < base as usize || addr - base as usize >= len {
        return false;
    }
    let backed = BACKED_MIRROR.load(Ordering::Acquire).max(1);
    let fd = TRACE_FILE.fd.load(Ordering::Acquire);
    let regrown =
        TRACE_FILE.is_ours(fd) && sys::ftruncate(fd, backed as u64 * BLOCK_SIZE as u64).is_ok();
    if !regrown {
        // Writes go to memory from now on; nothing reaches the file.
        let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        // SAFETY: replacing our own mapping, in place, by zero memory.
        let _ = unsafe { sys::map_fixed(base, len, anon) };
        return true;
    }
    let h = base.cast::<FileHeader>();
    // SAFETY: the header block is mapped and, the file grown back, backed.
    unsafe {
        if (*h).magic != MAGIC {
            core::ptr::copy_nonoverlapping(
                (*HEADER_COPY.0.get()).as_ptr(),
                base,
                core::mem::size_of::<FileHeader>(),
            );
        }
        let cut = AtomicU64::from_ptr(addr_of_mut!((*h).cut_mono_ns));
        let now = crate::recorder::time::clock::now_ns().max(1);
        let _ = cut.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        AtomicU32::from_ptr(addr_of_mut!((*h).blocks_reserved))
            .fetch_max(RESERVED_MIRROR.load(Ordering::Acquire), Ordering::AcqRel);
        AtomicU32::from_ptr(addr_of_mut!((*h).blocks_backed)).fetch_max(backed, Ordering::AcqRel);
        AtomicU32::from_ptr(addr_of_mut!((*h).flags)).fetch_or(FLAG_CUT, Ordering::AcqRel);
    }
    true
}

/// No lane had a block to spare either: the trace is full.
pub fn cap_reached() {
    set_flags(FLAG_OUT_OF_SPACE);
    warn_once(
        Warning::OutOfSpace,
        b"trace reached its size cap (LOCKSUIT_MAX_MB); further new locks, sites and threads are counted as dropped",
    );
}

/// Initialises block `index`, reserved and backed by [`alloc_blocks`], for
/// `lane`, and returns it.
pub fn init_block(index: u32, lane: u32, seq: u32, kind: u32) -> Option<*mut u8> {
    let base = BASE.load(Ordering::Acquire);
    if base.is_null() {
        return None;
    }
    // SAFETY: the block lies inside the mapping (below max_blocks) and is
    // backed by the file, and this thread, which reserved it, is its only
    // user.
    unsafe {
        let block = base.add(index as usize * BLOCK_SIZE);
        let bh = block.cast::<BlockHeader>();
        addr_of_mut!((*bh).lane).write(lane);
        addr_of_mut!((*bh).seq).write(seq);
        AtomicU32::from_ptr(addr_of_mut!((*bh).kind)).store(kind, Ordering::Release);
        Some(block)
    }
}

/// Reuses an event block this lane owns as the newest of its chain (the
/// flight recorder): emptied first, so a reader never sees old events under
/// the new sequence number.
///
/// # Safety
/// `block` must be an event block from [`init_block`] owned by the calling
/// thread's lane.
pub unsafe fn recycle_block(block: *mut u8, seq: u32) {
    // SAFETY: per the contract, a block header in our mapping that only this
    // thread writes.
    unsafe {
        let bh = block.cast::<BlockHeader>();
        AtomicU32::from_ptr(addr_of_mut!((*bh).used)).store(0, Ordering::Release);
        AtomicU32::from_ptr(addr_of_mut!((*bh).seq)).store(seq, Ordering::Release);
    }
    set_flags(FLAG_EVENTS_OVERWRITTEN);
}

/// Publishes `used` bytes of records in the block at `block`.
///
/// # Safety
/// `block` must come from [`init_block`] of the current mapping.
pub unsafe fn commit(block: *mut u8, used: u32) {
    // SAFETY: per the contract, `block` starts with a BlockHeader in our mapping.
    unsafe {
        let bh = block.cast::<BlockHeader>();
        AtomicU32::from_ptr(addr_of_mut!((*bh).used)).store(used, Ordering::Release);
    }
}

/// Creates this process's trace, replacing any mapping inherited from a
/// parent (after fork); `(start_mono_ns, start_unix_ns)`: the start on both
/// clocks, read together. Errors have already been reported on stderr.
pub fn create(
    extra_flags: u32,
    (start_mono_ns, start_unix_ns): (u64, u64),
) -> Result<(), NotRecording> {
    forget_inherited();
    let mut exe = [0u8; EXE_PATH_MAX];
    let exe_len = sys::readlink(c"/proc/self/exe", &mut exe).unwrap_or(0);
    let Some((fd, mut path)) = path::open_trace_file(&exe[..exe_len]) else {
        let tried: &[u8] = if config::getenv(c"LOCKSUIT_DIR").is_some_and(|d| !d.is_empty()) {
            b"cannot create a trace file in LOCKSUIT_DIR or in TMPDIR (or /tmp); this process is not recorded"
        } else {
            b"cannot create a trace file in the current directory or in TMPDIR (or /tmp); this process is not recorded"
        };
        warn_once(Warning::NoTraceFile, tried);
        return Err(NotRecording);
    };
    // Out of the way of the program's own descriptors (see the module doc).
    let fd = sys::move_high(fd);
    let identity = sys::fstat(fd).map(|st| st.id);
    let max_blocks = ((config::max_mb() as usize * 1024 * 1024) / BLOCK_SIZE).max(2);
    let len = max_blocks * BLOCK_SIZE;
    let written = if blocks_within_file_size_limit(0, 1) == 1 {
        sys::pwrite(fd, &ZEROS, 0).ok()
    } else {
        None
    };
    // Mapping our own fd; the length is a multiple of the page size.
    let base = sys::mmap(
        core::ptr::null_mut(),
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED | libc::MAP_NORESERVE,
        fd,
        0,
    );
    let Some((identity, base)) = identity.filter(|_| written == Some(BLOCK_SIZE)).zip(base) else {
        if let Some(base) = base {
            // SAFETY: unmapping what was just mapped, used by nobody.
            unsafe { sys::munmap(base, len) };
        }
        sys::close(fd);
        // Leave no empty file behind for the analyzer to trip over.
        sys::unlink(path.c_str());
        warn_once(
            Warning::NoTraceFile,
            b"cannot size or map the trace file; this process is not recorded",
        );
        return Err(NotRecording);
    };
    let base = base.cast::<u8>();
    // SAFETY: the header block is mapped, backed, and not yet visible to anyone.
    unsafe {
        let h = base.cast::<FileHeader>();
        (*h).version = FORMAT_VERSION;
        (*h).byte_order = BYTE_ORDER_MARK;
        (*h).header_size = core::mem::size_of::<FileHeader>() as u32;
        (*h).block_size = BLOCK_SIZE as u32;
        (*h).max_blocks = max_blocks as u32;
        (*h).blocks_reserved = 1;
        (*h).blocks_backed = 1;
        (*h).pid = sys::getpid().unwrap_or(0);
        (*h).ppid = sys::getppid() as u32;
        (*h).flags = extra_flags
            | if config::events_all() {
                FLAG_EVENTS_ALL
            } else {
                0
            }
            | if config::lean() { FLAG_LEAN } else { 0 };
        let tsc_khz = crate::recorder::time::clock::tsc_khz();
        if tsc_khz != 0 {
            (*h).flags |= FLAG_CLOCK_TSC;
            (*h).tsc_khz = tsc_khz;
        }
        (*h).hold_sample_period = config::hold_sample_period();
        let every = config::data_sample_every();
        (*h).data_sample_every = every;
        (*h).data_sample_first = if every > 1 {
            config::DATA_SAMPLE_FIRST
        } else {
            0
        };
        (*h).block_min_us = config::block_min_us();
        (*h).cpus = cpus_allowed();
        let min_wait_us = crate::policy::min_wait_ns() / 1000;
        (*h).policy_min_wait_us = u32::try_from(min_wait_us).unwrap_or(u32::MAX);
        if crate::policy::in_force() {
            (*h).flags |= FLAG_POLICY;
        }
        (*h).start_unix_ns = start_unix_ns;
        (*h).start_mono_ns = start_mono_ns;
        (*h).exe_len = exe_len as u32;
        // Said before the trace existed (a fallback directory, a setting).
        let early = crate::diag::early_warnings();
        let early = &early[..early.len().min(SHIM_NOTES_MAX)];
        core::ptr::copy_nonoverlapping(
            early.as_ptr(),
            addr_of_mut!((*h).shim_notes).cast::<u8>(),
            early.len(),
        );
        (*h).shim_notes_len = early.len() as u32;
        core::ptr::copy_nonoverlapping(exe.as_ptr(), addr_of_mut!((*h).exe).cast::<u8>(), exe_len);
        // The magic goes last: a reader never sees a valid magic on a
        // half-written header.
        core::sync::atomic::fence(Ordering::Release);
        (*h).magic = MAGIC;
        // As it stands now, to put back if the file is cut.
        core::ptr::copy_nonoverlapping(
            base,
            (*HEADER_COPY.0.get()).as_mut_ptr(),
            core::mem::size_of::<FileHeader>(),
        );
    }
    RESERVED_MIRROR.store(1, Ordering::Relaxed);
    BACKED_MIRROR.store(1, Ordering::Relaxed);
    // SAFETY: BASE is still null here, so no other thread reads `path` (see
    // the `Sync` impl of TraceFile).
    unsafe { *TRACE_FILE.path.get() = path };
    TRACE_FILE.dev.store(identity.dev, Ordering::Relaxed);
    TRACE_FILE.ino.store(identity.ino, Ordering::Relaxed);
    TRACE_FILE.fd.store(fd, Ordering::Release);
    MAPPED_LEN.store(len, Ordering::Relaxed);
    BASE.store(base, Ordering::Release);
    crate::diag::keep_in(keep_warning);
    Ok(())
}

/// In a fork child, as it makes its own trace: drop the parent's mapping
/// and descriptor. Until then the lifecycle's state kept every hook from
/// recording (see `lifecycle::fork_child`), so nothing was written into
/// the parent's trace.
fn forget_inherited() {
    forget_pool();
    RESERVED_MIRROR.store(0, Ordering::Relaxed);
    BACKED_MIRROR.store(0, Ordering::Relaxed);
    let old = BASE.swap(core::ptr::null_mut(), Ordering::AcqRel);
    if !old.is_null() {
        // SAFETY: unmapping the exact region mapped in `create`; in the child
        // no other thread exists to use it.
        unsafe { sys::munmap(old.cast(), MAPPED_LEN.load(Ordering::Relaxed)) };
    }
    let fd = TRACE_FILE.fd.swap(-1, Ordering::AcqRel);
    // Only if it is still the trace: the parent may have closed it, and the
    // number may now be one of the program's own files.
    if TRACE_FILE.is_ours(fd) {
        sys::close(fd);
    }
}

/// In a child process that inherited the parent's trace and cannot start
/// its own (see `copied.rs`): the parent's trace, mapped shared, is
/// replaced by private zeros at the same addresses, so whatever this
/// process still writes through pointers into it (a thread in the middle
/// of recording) lands nowhere, and nothing is mapped afresh there; its
/// descriptor is closed.
pub fn cut_off_inherited_trace() {
    let old = BASE.swap(core::ptr::null_mut(), Ordering::AcqRel);
    if !old.is_null() {
        // SAFETY: replaces exactly the region mapped in `create` with fresh
        // private memory; pointers into it stay valid.
        let replaced = unsafe { sys::replace_with_zeros(old, MAPPED_LEN.load(Ordering::Relaxed)) };
        if replaced.is_err() {
            // Out of memory, or confined: unmapping would make those writes
            // fault, so the mapping stays; no new block is taken in it (BASE
            // is null).
            warn_once(
                Warning::UnseenChild,
                b"a child process made by a clone system call the shim did not see could not be cut off from its parent's trace",
            );
        }
    }
    let fd = TRACE_FILE.fd.swap(-1, Ordering::AcqRel);
    if TRACE_FILE.is_ours(fd) {
        sys::close(fd);
    }
}

/// Processors this process may run on (its affinity mask), 0 if unknown.
fn cpus_allowed() -> u32 {
    let mut mask = [0u64; 16]; // 1024 CPUs
    let rc = crate::sys::sys!(
        libc::SYS_sched_getaffinity,
        0,
        core::mem::size_of_val(&mask),
        mask.as_mut_ptr()
    );
    if rc <= 0 {
        return 0;
    }
    mask.iter().map(|w| w.count_ones()).sum()
}
