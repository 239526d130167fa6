//! The trace file: created per process, mapped `MAP_SHARED` so that every
//! store lands in the page cache and survives any death of the process, and
//! carved into blocks handed out by an atomic bump counter.
//!
//! Each block is backed with real zeros by `pwrite` before it is touched, so
//! a full disk shows up as an error we can count instead of a SIGBUS in the
//! program.

use crate::config;
use crate::diag::{warn_once, Warning};
use core::mem::offset_of;
use core::ptr::addr_of_mut;
use core::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use locksuit_format::*;

static BASE: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
static MAPPED_LEN: AtomicUsize = AtomicUsize::new(0);
static FD: AtomicI32 = AtomicI32::new(-1);
static ZEROS: [u8; BLOCK_SIZE] = [0; BLOCK_SIZE];

/// Why this process cannot be recorded (already reported on stderr).
#[derive(Debug)]
pub struct NotRecording;

impl Default for PathBuf {
    fn default() -> Self {
        Self::new()
    }
}

/// A small path builder over a stack buffer (the shim never allocates).
pub struct PathBuf {
    buf: [u8; 4096 + 256],
    len: usize,
}

impl PathBuf {
    pub const fn new() -> Self {
        PathBuf {
            buf: [0; 4096 + 256],
            len: 0,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) -> &mut Self {
        // Keep one byte for the terminating NUL.
        let n = bytes.len().min(self.buf.len() - 1 - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
        self
    }

    pub fn push_u32(&mut self, mut v: u32) -> &mut Self {
        let mut digits = [0u8; 10];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..])
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub fn truncate(&mut self, len: usize) {
        self.len = len.min(self.len);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// NUL-terminated pointer for libc.
    pub fn c_ptr(&mut self) -> *const libc::c_char {
        self.buf[self.len] = 0;
        self.buf.as_ptr().cast()
    }
}

/// Whether the file-size limit lets the trace grow to `end` bytes. Writing
/// past RLIMIT_FSIZE would raise SIGXFSZ, whose default action kills the
/// program, so the shim stops growing the trace before that.
fn within_file_size_limit(end: usize) -> bool {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) } == 0;
    !ok || limit.rlim_cur == libc::RLIM_INFINITY || end as u64 <= limit.rlim_cur
}

pub fn header() -> Option<*mut FileHeader> {
    let base = BASE.load(Ordering::Acquire);
    (!base.is_null()).then_some(base.cast())
}

fn header_u32(field: usize) -> Option<&'static AtomicU32> {
    let base = BASE.load(Ordering::Acquire);
    // SAFETY: `field` is an offset_of! a u32 field of FileHeader, which sits
    // at the start of the live mapping and is 4-aligned there.
    (!base.is_null()).then(|| unsafe { AtomicU32::from_ptr(base.add(field).cast()) })
}

fn header_u64(field: usize) -> Option<&'static AtomicU64> {
    let base = BASE.load(Ordering::Acquire);
    // SAFETY: as above, for an 8-aligned u64 field.
    (!base.is_null()).then(|| unsafe { AtomicU64::from_ptr(base.add(field).cast()) })
}

pub fn set_flags(bits: u32) {
    if let Some(f) = header_u32(offset_of!(FileHeader, flags)) {
        f.fetch_or(bits, Ordering::Release);
    }
}

pub fn clear_flags(bits: u32) {
    if let Some(f) = header_u32(offset_of!(FileHeader, flags)) {
        f.fetch_and(!bits, Ordering::Release);
    }
}

/// The clock switched to the calibrated TSC (see `clock.rs`).
pub fn note_tsc(khz: u32) {
    if let Some(f) = header_u32(offset_of!(FileHeader, tsc_khz)) {
        f.store(khz, Ordering::Relaxed);
        set_flags(FLAG_CLOCK_TSC);
    }
}

pub fn set_exit_code(code: i32) {
    if let Some(f) = header_u32(offset_of!(FileHeader, exit_code)) {
        f.store(code as u32, Ordering::Relaxed);
        set_flags(FLAG_EXIT_CODE_VALID);
    }
}

pub fn set_end_time(ns: u64) {
    if let Some(f) = header_u64(offset_of!(FileHeader, end_mono_ns)) {
        f.store(ns, Ordering::Relaxed);
    }
}

pub fn count_dropped_record() {
    if let Some(f) = header_u64(offset_of!(FileHeader, dropped_records)) {
        f.fetch_add(1, Ordering::Relaxed);
    }
}

pub fn count_dropped_op() {
    if let Some(f) = header_u64(offset_of!(FileHeader, dropped_ops)) {
        f.fetch_add(1, Ordering::Relaxed);
    }
}

pub fn pid() -> u32 {
    header_u32(offset_of!(FileHeader, pid)).map_or(0, |f| f.load(Ordering::Relaxed))
}

/// Reserves, backs and initialises one block for `lane`. `None` when the cap
/// is reached or the disk refuses; both are flagged and warned about once.
pub fn alloc_block(lane: u32, seq: u32, kind: u32) -> Option<*mut u8> {
    let base = BASE.load(Ordering::Acquire);
    if base.is_null() {
        return None;
    }
    let reserved = header_u32(offset_of!(FileHeader, blocks_reserved))?;
    let max = header_u32(offset_of!(FileHeader, max_blocks))?.load(Ordering::Relaxed);
    let flags = header_u32(offset_of!(FileHeader, flags))?;
    if flags.load(Ordering::Relaxed) & FLAG_DISK_FULL != 0 {
        return None;
    }
    let mut index = reserved.load(Ordering::Relaxed);
    loop {
        if index >= max {
            set_flags(FLAG_OUT_OF_SPACE);
            warn_once(
                Warning::OutOfSpace,
                b"trace reached its size cap (LOCKSUIT_MAX_MB); further new locks, sites and threads are counted as dropped",
            );
            return None;
        }
        match reserved.compare_exchange_weak(index, index + 1, Ordering::AcqRel, Ordering::Relaxed)
        {
            Ok(_) => break,
            Err(now) => index = now,
        }
    }
    let offset = index as usize * BLOCK_SIZE;
    let fd = FD.load(Ordering::Relaxed);
    let _errno = crate::diag::ErrnoGuard::save();
    let written = if within_file_size_limit(offset + BLOCK_SIZE) {
        // SAFETY: writing a static buffer of BLOCK_SIZE zeros to our own fd.
        unsafe { libc::pwrite(fd, ZEROS.as_ptr().cast(), BLOCK_SIZE, offset as libc::off_t) }
    } else {
        -1
    };
    if written != BLOCK_SIZE as isize {
        set_flags(FLAG_DISK_FULL);
        warn_once(
            Warning::DiskFull,
            b"cannot grow the trace file (disk full, I/O error or file-size limit); what is recorded so far is kept, new records are dropped and counted",
        );
        return None;
    }
    header_u32(offset_of!(FileHeader, blocks_backed))?.fetch_max(index + 1, Ordering::AcqRel);
    // SAFETY: the block lies inside the mapping (index < max_blocks) and is
    // now backed by the file, and this thread is its only user.
    unsafe {
        let block = base.add(offset);
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
/// `block` must be an event block from [`alloc_block`] owned by the calling
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
/// `block` must come from [`alloc_block`] of the current mapping.
pub unsafe fn commit(block: *mut u8, used: u32) {
    // SAFETY: per the contract, `block` starts with a BlockHeader in our mapping.
    unsafe {
        let bh = block.cast::<BlockHeader>();
        AtomicU32::from_ptr(addr_of_mut!((*bh).used)).store(used, Ordering::Release);
    }
}

fn getpid() -> u32 {
    // SAFETY: getpid is always safe.
    unsafe { libc::getpid() as u32 }
}

/// Opens a fresh trace (never overwriting) in the first usable directory;
/// returns the descriptor and the path it was created at.
fn open_trace_file(exe: &[u8]) -> Option<(i32, PathBuf)> {
    // A program whose file was replaced after exec reads as "… (deleted)";
    // the trace is still named after the program.
    let exe = exe.strip_suffix(b" (deleted)").unwrap_or(exe);
    let base_name = match exe.iter().rposition(|&b| b == b'/') {
        Some(i) => &exe[i + 1..],
        None if exe.is_empty() => b"unknown",
        None => exe,
    };
    let mut dir = PathBuf::new();
    let mut explicit = false;
    if let Some(d) = config::getenv(c"LOCKSUIT_DIR").filter(|d| !d.is_empty()) {
        explicit = true;
        dir.push(d);
        // SAFETY: NUL-terminated path; EEXIST is fine.
        unsafe { libc::mkdir(dir.c_ptr(), 0o700) };
    } else {
        dir.push(b".");
    }
    if let Some(fd) = try_open_in(&mut dir, base_name) {
        return Some((fd, dir));
    }
    // Fall back to $TMPDIR or /tmp.
    let mut tmp = PathBuf::new();
    tmp.push(
        config::getenv(c"TMPDIR")
            .filter(|d| !d.is_empty())
            .unwrap_or(b"/tmp"),
    );
    let fd = try_open_in(&mut tmp, base_name)?;
    let mut msg = PathBuf::new();
    msg.push(if explicit {
        b"cannot write a trace in LOCKSUIT_DIR; writing it to ".as_slice()
    } else {
        b"cannot write a trace in the current directory; writing it to ".as_slice()
    })
    .push(tmp.as_bytes());
    warn_once(Warning::FallbackDir, msg.as_bytes());
    Some((fd, tmp))
}

fn try_open_in(dir: &mut PathBuf, base_name: &[u8]) -> Option<i32> {
    let pid = getpid();
    dir.push(b"/locksuit.")
        .push(base_name)
        .push(b".")
        .push_u32(pid);
    let stem = dir.len();
    for attempt in 0..100u32 {
        dir.truncate(stem);
        if attempt > 0 {
            dir.push(b".").push_u32(attempt);
        }
        dir.push(b".trace");
        let flags =
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: NUL-terminated path; mode is a plain integer.
        let fd = unsafe { libc::open(dir.c_ptr(), flags, 0o600 as libc::c_uint) };
        if fd >= 0 {
            return Some(fd);
        }
        // SAFETY: reading errno of this thread.
        let err = unsafe { *libc::__errno_location() };
        if err != libc::EEXIST {
            return None;
        }
    }
    None
}

/// Creates this process's trace, replacing any mapping inherited from a
/// parent (after fork). Errors have already been reported on stderr.
pub fn create(extra_flags: u32, start_mono_ns: u64) -> Result<(), NotRecording> {
    forget_inherited();
    let mut exe = [0u8; EXE_PATH_MAX];
    // SAFETY: readlink into a buffer of the given size.
    let n = unsafe {
        libc::readlink(
            c"/proc/self/exe".as_ptr(),
            exe.as_mut_ptr().cast(),
            exe.len(),
        )
    };
    let exe_len = if n > 0 { n as usize } else { 0 };
    let Some((fd, mut path)) = open_trace_file(&exe[..exe_len]) else {
        let tried: &[u8] = if config::getenv(c"LOCKSUIT_DIR").is_some_and(|d| !d.is_empty()) {
            b"cannot create a trace file in LOCKSUIT_DIR or in TMPDIR (or /tmp); this process is not recorded"
        } else {
            b"cannot create a trace file in the current directory or in TMPDIR (or /tmp); this process is not recorded"
        };
        warn_once(Warning::NoTraceFile, tried);
        return Err(NotRecording);
    };
    let max_blocks = ((config::max_mb() as usize * 1024 * 1024) / BLOCK_SIZE).max(2);
    let len = max_blocks * BLOCK_SIZE;
    let written = if within_file_size_limit(BLOCK_SIZE) {
        // SAFETY: backing the header block before mapping it.
        unsafe { libc::pwrite(fd, ZEROS.as_ptr().cast(), BLOCK_SIZE, 0) }
    } else {
        -1
    };
    // SAFETY: mapping our own fd; the length is a multiple of the page size.
    let base = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_NORESERVE,
            fd,
            0,
        )
    };
    if written != BLOCK_SIZE as isize || base == libc::MAP_FAILED {
        // SAFETY: closing the fd we opened and removing the file we created.
        unsafe {
            libc::close(fd);
            // Leave no empty file behind for the analyzer to trip over.
            libc::unlink(path.c_ptr());
        };
        warn_once(
            Warning::NoTraceFile,
            b"cannot size or map the trace file; this process is not recorded",
        );
        return Err(NotRecording);
    }
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
        (*h).pid = getpid();
        (*h).ppid = libc::getppid() as u32;
        (*h).flags = extra_flags
            | if config::events_all() {
                FLAG_EVENTS_ALL
            } else {
                0
            };
        let tsc_khz = super::clock::tsc_khz();
        if tsc_khz != 0 {
            (*h).flags |= FLAG_CLOCK_TSC;
            (*h).tsc_khz = tsc_khz;
        }
        (*h).hold_sample_period = config::hold_sample_period();
        (*h).start_unix_ns = super::clock_ns(libc::CLOCK_REALTIME);
        (*h).start_mono_ns = start_mono_ns;
        (*h).exe_len = exe_len as u32;
        core::ptr::copy_nonoverlapping(exe.as_ptr(), addr_of_mut!((*h).exe).cast::<u8>(), exe_len);
        // The magic goes last: a reader never sees a valid magic on a
        // half-written header.
        core::sync::atomic::fence(Ordering::Release);
        (*h).magic = MAGIC;
    }
    FD.store(fd, Ordering::Relaxed);
    MAPPED_LEN.store(len, Ordering::Relaxed);
    BASE.store(base, Ordering::Release);
    Ok(())
}

/// In a fork child: drop the parent's mapping and descriptor so nothing is
/// ever written into the parent's trace.
fn forget_inherited() {
    let old = BASE.swap(core::ptr::null_mut(), Ordering::AcqRel);
    if !old.is_null() {
        // SAFETY: unmapping the exact region mapped in `create`; in the child
        // no other thread exists to use it.
        unsafe { libc::munmap(old.cast(), MAPPED_LEN.load(Ordering::Relaxed)) };
    }
    let fd = FD.swap(-1, Ordering::AcqRel);
    if fd >= 0 {
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(fd) };
    }
}
