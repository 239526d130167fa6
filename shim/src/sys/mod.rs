//! The shim's own system calls, made raw.
//!
//! glibc's `open`, `read`, `write`, `pwrite` and `close` are cancellation
//! points: a thread with a cancel pending would be cancelled inside a hook
//! whose real function is not one (a lock, an init), or inside the shim's
//! bookkeeping, where its frames cannot be unwound. The shim also exports
//! `syscall` itself (to see futex waits made through it), so its own calls
//! do not go through libc at all: they are `syscall` instructions here.
//!
//! Nothing here touches errno: the program never sees an errno set by the
//! shim. Failures return the error number. Once the program is confined
//! (seccomp), every call here fails with EPERM without being made.
//!
//! Past 600 lines: one wrapper per system call the shim makes, each short;
//! the confinement gate (`confined.rs`) is apart.

pub mod confined;

use core::ffi::{c_int, c_long, c_uint, CStr};

/// A system call with up to six arguments; the kernel's raw result (a
/// negative error number on failure).
///
/// # Safety
/// The arguments must be what system call `n` expects (pointers valid for
/// what it reads and writes).
#[inline]
pub unsafe fn raw_syscall(n: c_long, a: [usize; 6]) -> c_long {
    let rc: c_long;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller vouches for the arguments; the kernel clobbers
    // rcx and r11 and nothing else.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") n => rc,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2],
            in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above; the kernel preserves every register but x0.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") n,
            inlateout("x0") a[0] => rc,
            in("x1") a[1], in("x2") a[2], in("x3") a[3], in("x4") a[4], in("x5") a[5],
            options(nostack),
        );
    }
    rc
}

/// One of the shim's own system calls: refused with `-EPERM`, without
/// reaching the kernel, while the program is confined (see `confined`).
///
/// # Safety
/// As for [`raw_syscall`].
#[inline]
pub unsafe fn own_syscall(n: c_long, a: [usize; 6]) -> c_long {
    let Some(_call) = confined::OwnCall::begin() else {
        return -(libc::EPERM as c_long);
    };
    // SAFETY: forwarded from the caller.
    unsafe { raw_syscall(n, a) }
}

/// A system call's arguments as the six machine words the kernel reads.
macro_rules! words {
    ($($arg:expr),* $(,)?) => {{
        let mut words = [0usize; 6];
        let args: &[usize] = &[$($arg as usize),*];
        words[..args.len()].copy_from_slice(args);
        words
    }};
}
pub(crate) use words;

/// The shim's own system call ([`own_syscall`]), its arguments cast to
/// machine words.
macro_rules! sys {
    ($n:expr $(, $arg:expr)* $(,)?) => {{
        let words = $crate::sys::words!($($arg),*);
        // SAFETY: forwarded from the caller of `sys!`.
        unsafe { $crate::sys::own_syscall($n as core::ffi::c_long, words) }
    }};
}
pub(crate) use sys;

/// A system call the program asked for, made for it ([`raw_syscall`]):
/// never refused.
macro_rules! forward {
    ($n:expr $(, $arg:expr)* $(,)?) => {{
        let words = $crate::sys::words!($($arg),*);
        // SAFETY: forwarded from the caller of `forward!`.
        unsafe { $crate::sys::raw_syscall($n as core::ffi::c_long, words) }
    }};
}
pub(crate) use forward;

/// A raw system call's result: `Err(errno)` on failure.
fn raw(call: impl FnOnce() -> c_long) -> Result<c_long, c_int> {
    let rc = call();
    if (-4095..0).contains(&rc) {
        Err(-rc as c_int)
    } else {
        Ok(rc)
    }
}

/// `openat(AT_FDCWD, path, flags, mode)`.
pub fn open(path: &CStr, flags: c_int, mode: c_uint) -> Result<c_int, c_int> {
    // SAFETY: a NUL-terminated path; the kernel checks the rest.
    raw(|| sys!(libc::SYS_openat, libc::AT_FDCWD, path.as_ptr(), flags, mode)).map(|fd| fd as c_int)
}

pub fn close(fd: c_int) {
    // SAFETY: closing a descriptor the caller owns.
    let _ = raw(|| sys!(libc::SYS_close, fd));
}

pub fn read(fd: c_int, buf: &mut [u8]) -> Result<usize, c_int> {
    // SAFETY: the kernel writes at most buf.len() bytes into buf.
    raw(|| sys!(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len())).map(|n| n as usize)
}

pub fn write(fd: c_int, buf: &[u8]) -> Result<usize, c_int> {
    // SAFETY: the kernel reads at most buf.len() bytes from buf.
    raw(|| sys!(libc::SYS_write, fd, buf.as_ptr(), buf.len())).map(|n| n as usize)
}

pub fn pwrite(fd: c_int, buf: &[u8], offset: u64) -> Result<usize, c_int> {
    // SAFETY: the kernel reads at most buf.len() bytes from buf.
    raw(|| {
        sys!(
            libc::SYS_pwrite64,
            fd,
            buf.as_ptr(),
            buf.len(),
            offset as libc::off_t,
        )
    })
    .map(|n| n as usize)
}

/// Most times [`pwrite_repeated`] writes its buffer in one call (its
/// vector is on the caller's stack, which may be small).
pub const MOST_REPEATS: usize = 8;

/// Writes `buf` `times` times in a row at `offset`, in one system call
/// (at most [`MOST_REPEATS`] times).
pub fn pwrite_repeated(fd: c_int, buf: &[u8], times: usize, offset: u64) -> Result<usize, c_int> {
    let one = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let iov = [one; MOST_REPEATS];
    let times = times.min(iov.len());
    // SAFETY: the kernel reads at most `times` iovecs, each `buf.len()`
    // bytes of `buf`; the offset's high word is 0 (a 64-bit offset fits the
    // low one).
    raw(|| {
        sys!(
            libc::SYS_pwritev,
            fd,
            iov.as_ptr(),
            times,
            offset as libc::off_t,
            0
        )
    })
    .map(|n| n as usize)
}

pub fn pread(fd: c_int, buf: &mut [u8], offset: u64) -> Result<usize, c_int> {
    // SAFETY: the kernel writes at most buf.len() bytes into buf.
    raw(|| {
        sys!(
            libc::SYS_pread64,
            fd,
            buf.as_mut_ptr(),
            buf.len(),
            offset as libc::off_t,
        )
    })
    .map(|n| n as usize)
}

/// `nanosleep` for `ns` nanoseconds: Ok once slept whole, Err(errno) if a
/// signal cut it short.
pub fn sleep_ns(ns: u64) -> Result<(), c_int> {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec; no remainder wanted.
    raw(|| sys!(libc::SYS_nanosleep, &ts as *const _, 0usize)).map(|_| ())
}

/// How many times the calling thread gave up its CPU (`ru_nvcsw` and
/// `ru_nivcsw` of `getrusage(RUSAGE_THREAD)`, added).
pub fn thread_switches() -> u64 {
    // SAFETY: all zero bits is a valid rusage.
    let mut usage: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: a valid out-pointer for one rusage.
    let rc = sys!(
        libc::SYS_getrusage,
        libc::RUSAGE_THREAD,
        &mut usage as *mut _
    );
    if rc != 0 {
        return 0;
    }
    (usage.ru_nvcsw + usage.ru_nivcsw) as u64
}

/// Nanoseconds another thread of this process (`tid`) has run on a CPU, by
/// its thread CPU clock (one system call; no descriptor); `None` if the
/// kernel would not say (the thread is gone).
pub fn thread_cpu_ns(tid: u32) -> Option<u64> {
    // The kernel's clock id for a thread's CPU time: the tid inverted,
    // shifted past the clock bits, with CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED.
    let clock = (!(tid as libc::clockid_t) << 3) | 6;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer for one timespec.
    raw(|| sys!(libc::SYS_clock_gettime, clock, &mut ts as *mut _))
        .ok()
        .map(|_| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Nanoseconds the calling thread has run on a CPU (`clock_gettime` of
/// its CPU clock, made raw: glibc's would make the call out of our sight).
pub fn own_cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer for one timespec.
    raw(|| {
        sys!(
            libc::SYS_clock_gettime,
            libc::CLOCK_THREAD_CPUTIME_ID,
            &mut ts as *mut _
        )
    })
    .ok()
    .map(|_| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// `ftruncate(fd, len)`.
pub fn ftruncate(fd: c_int, len: u64) -> Result<(), c_int> {
    // SAFETY: a plain system call on the caller's descriptor.
    raw(|| sys!(libc::SYS_ftruncate, fd, len)).map(|_| ())
}

/// `getppid`: a system call that never blocks (0 if refused).
pub fn getppid() -> c_int {
    // SAFETY: no arguments.
    raw(|| sys!(libc::SYS_getppid)).map_or(0, |pid| pid as c_int)
}

/// `getpid`; `None` if refused (confined).
pub fn getpid() -> Option<u32> {
    // SAFETY: no arguments.
    raw(|| sys!(libc::SYS_getpid)).ok().map(|pid| pid as u32)
}

/// `sched_yield`.
pub fn sched_yield() {
    // SAFETY: no arguments.
    let _ = raw(|| sys!(libc::SYS_sched_yield));
}

/// The calling thread's name (`PR_GET_NAME`), NUL-padded; left as it was
/// if refused.
pub fn own_thread_name(name: &mut [u8; 16]) {
    // SAFETY: PR_GET_NAME writes at most 16 bytes into the buffer.
    let _ = raw(|| sys!(libc::SYS_prctl, libc::PR_GET_NAME, name.as_mut_ptr()));
}

/// `mmap`; `None` on failure (or when refused).
pub fn mmap(
    addr: *mut libc::c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: u64,
) -> Option<*mut u8> {
    mmap_or_errno(addr, len, prot, flags, fd, offset).ok()
}

/// `mmap`; the error number on failure.
pub fn mmap_or_errno(
    addr: *mut libc::c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: u64,
) -> Result<*mut u8, c_int> {
    // SAFETY: never MAP_FIXED here: the kernel picks the place, and checks
    // the rest of the request.
    raw(|| {
        sys!(
            libc::SYS_mmap,
            addr,
            len,
            prot,
            flags & !libc::MAP_FIXED,
            fd,
            offset
        )
    })
    .map(|p| p as *mut u8)
}

/// `mmap` with `MAP_FIXED` over `len` bytes at `addr`, with no file.
///
/// # Safety
/// Whatever was mapped at `addr` is replaced: nothing may rely on it.
pub unsafe fn map_fixed(addr: *mut u8, len: usize, flags: c_int) -> Result<(), c_int> {
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    raw(|| {
        sys!(
            libc::SYS_mmap,
            addr,
            len,
            prot,
            flags | libc::MAP_FIXED,
            -1i32,
            0
        )
    })
    .map(|_| ())
}

/// Sends `sig` with `info` again to the calling thread
/// (`rt_tgsigqueueinfo`; a process may send itself any siginfo).
pub fn requeue_to_self(sig: c_int, info: *mut libc::siginfo_t) -> Result<(), c_int> {
    let tgid = getpid().ok_or(libc::EPERM)?;
    // SAFETY: no arguments.
    let tid = raw(|| sys!(libc::SYS_gettid))?;
    // SAFETY: `info` is a valid siginfo the kernel copies.
    raw(|| sys!(libc::SYS_rt_tgsigqueueinfo, tgid, tid, sig, info)).map(|_| ())
}

/// Adds `set` to the calling thread's blocked signals; the mask before,
/// or `None` if it could not be changed.
pub fn block_signals(set: &libc::sigset_t) -> Option<libc::sigset_t> {
    // SAFETY: all zero bits is an empty set.
    let mut before: libc::sigset_t = unsafe { core::mem::zeroed() };
    // SAFETY: valid sets; the kernel's sigset is 8 bytes.
    raw(|| {
        sys!(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            set as *const libc::sigset_t,
            &mut before as *mut libc::sigset_t,
            8
        )
    })
    .ok()
    .map(|_| before)
}

/// Sets the calling thread's blocked signals to `set`.
pub fn set_signal_mask(set: &libc::sigset_t) {
    // SAFETY: a valid set; the kernel's sigset is 8 bytes.
    let _ = raw(|| {
        sys!(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            set as *const libc::sigset_t,
            core::ptr::null_mut::<libc::sigset_t>(),
            8
        )
    });
}

/// `munmap`.
///
/// # Safety
/// Nothing may use the range afterwards.
pub unsafe fn munmap(addr: *mut u8, len: usize) {
    let _ = raw(|| sys!(libc::SYS_munmap, addr, len));
}

/// Replaces the `len` bytes of mappings at `addr` with private zeros, at
/// the same addresses (`MAP_FIXED`).
///
/// # Safety
/// The range must be the shim's own mapping, whose contents no longer
/// matter: whatever still points into it reads zeros after.
pub unsafe fn replace_with_zeros(addr: *mut u8, len: usize) -> Result<(), c_int> {
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED;
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    let no_file: c_int = -1;
    raw(|| sys!(libc::SYS_mmap, addr, len, prot, flags, no_file, 0)).map(|_| ())
}

/// `mprotect`.
///
/// # Safety
/// The range must be the shim's own mapping, and nothing may use it in a
/// way the new protection forbids.
pub unsafe fn mprotect(addr: *mut u8, len: usize, prot: c_int) -> Result<(), c_int> {
    raw(|| sys!(libc::SYS_mprotect, addr, len, prot)).map(|_| ())
}

/// `madvise`; advice only, so a refusal is no failure.
///
/// # Safety
/// The advice must not discard memory still in use (`MADV_DONTNEED` on
/// memory whose contents matter).
pub unsafe fn madvise(addr: *mut u8, len: usize, advice: c_int) -> Result<(), c_int> {
    raw(|| sys!(libc::SYS_madvise, addr, len, advice)).map(|_| ())
}

/// The calling thread's timer slack in nanoseconds (`PR_GET_TIMERSLACK`),
/// if the kernel says.
pub fn timer_slack_ns() -> Option<u64> {
    // SAFETY: PR_GET_TIMERSLACK takes no pointer.
    let rc = sys!(libc::SYS_prctl, libc::PR_GET_TIMERSLACK);
    (rc > 0).then_some(rc as u64)
}

/// Sets the calling thread's timer slack (`PR_SET_TIMERSLACK`; 0 restores
/// the thread's default).
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes a number, no pointer.
    sys!(libc::SYS_prctl, libc::PR_SET_TIMERSLACK, ns);
}

/// `rseq(area, len, flags, signature)`; the error number on failure.
pub fn rseq(area: usize, len: u32, flags: c_int, signature: u32) -> Result<(), c_int> {
    // SAFETY: the kernel checks the area and length before it reads or
    // writes anything.
    raw(|| sys!(libc::SYS_rseq, area, len, flags, signature)).map(|_| ())
}

/// Which file an open descriptor or a path refers to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

/// What `fstat` says of a descriptor: the file, its size and mtime.
#[derive(Clone, Copy, Debug)]
pub struct FileStat {
    pub id: FileId,
    pub size: u64,
    pub mtime_ns: u64,
    pub regular: bool,
    /// `st_mode & S_IFMT`.
    pub file_type: u32,
}

fn stat_of(st: &libc::stat) -> FileStat {
    FileStat {
        id: FileId {
            dev: st.st_dev,
            ino: st.st_ino,
        },
        size: st.st_size.max(0) as u64,
        mtime_ns: (st.st_mtime.max(0) as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(st.st_mtime_nsec.max(0) as u64),
        regular: st.st_mode & libc::S_IFMT == libc::S_IFREG,
        file_type: st.st_mode & libc::S_IFMT,
    }
}

/// `process_vm_readv` on ourselves, into `into` from the `from` ranges:
/// the bytes read. The kernel fails (EFAULT) instead of faulting on memory
/// that is not mapped, and stops at the first range it cannot read whole
/// (having copied part of it, or none).
fn read_own_ranges(into: &mut [u8], from: &[libc::iovec]) -> usize {
    let local = libc::iovec {
        iov_base: into.as_mut_ptr().cast(),
        iov_len: into.len(),
    };
    // SAFETY: getpid takes nothing and cannot fail.
    let pid = sys!(libc::SYS_getpid);
    // SAFETY: the local vector is our own buffer, the remote ones only
    // name addresses; the kernel writes only into `into`.
    let n = sys!(
        libc::SYS_process_vm_readv,
        pid,
        &local as *const libc::iovec,
        1,
        from.as_ptr(),
        from.len(),
        0
    );
    usize::try_from(n).unwrap_or(0)
}

fn range(at: u64, len: usize) -> libc::iovec {
    libc::iovec {
        iov_base: at as *mut libc::c_void,
        iov_len: len,
    }
}

/// Copies `buf.len()` bytes of this process's memory at `addr` into `buf`
/// (`process_vm_readv` on ourselves): memory another thread may unmap
/// meanwhile fails to read instead of faulting.
pub fn read_own_memory(addr: u64, buf: &mut [u8]) -> bool {
    let len = buf.len();
    read_own_ranges(buf, &[range(addr, len)]) == len
}

/// Copies `each` bytes of this process's memory at every address of
/// `addrs` (at most 64) into consecutive `each`-byte parts of `out`, in one
/// call; how many were read whole, from the first (the kernel stops at the
/// first that cannot be read).
pub fn read_own_memory_each(addrs: &[u64], each: usize, out: &mut [u8]) -> usize {
    const MOST: usize = 64;
    let n = addrs.len().min(MOST).min(out.len() / each.max(1));
    if n == 0 || each == 0 {
        return 0;
    }
    let mut from = [range(0, 0); MOST];
    for (r, &addr) in from.iter_mut().zip(&addrs[..n]) {
        *r = range(addr, each);
    }
    read_own_ranges(&mut out[..n * each], &from[..n]) / each
}

/// Copies as much of this process's memory from `addr` on as is mapped,
/// up to `buf.len()` (at most 28 KiB), into `buf`; the bytes copied. The
/// kernel never splits one vector element, so the range is split at 4 KiB
/// boundaries: a read that runs off the end of a mapping keeps what came
/// before it.
pub fn read_own_memory_prefix(addr: u64, buf: &mut [u8]) -> usize {
    const PAGE: u64 = 4096;
    const PARTS: usize = 8;
    let len = buf.len().min((PARTS - 1) * PAGE as usize);
    let mut from = [range(0, 0); PARTS];
    let (mut parts, mut at, end) = (0, addr, addr.saturating_add(len as u64));
    while at < end && parts < PARTS {
        let next = ((at / PAGE) + 1).saturating_mul(PAGE).min(end);
        from[parts] = range(at, (next - at) as usize);
        parts += 1;
        at = next;
    }
    read_own_ranges(&mut buf[..len], &from[..parts])
}

pub fn fstat(fd: c_int) -> Option<FileStat> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: the kernel fills `st`; a bad descriptor is an error, not UB.
    raw(|| sys!(libc::SYS_fstat, fd, &mut st as *mut libc::stat))
        .ok()
        .map(|_| stat_of(&st))
}

/// `stat` of a path (following symlinks, as the loader did).
pub fn stat(path: &CStr) -> Option<FileStat> {
    // SAFETY: as in `fstat`.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: a NUL-terminated path.
    raw(|| {
        sys!(
            libc::SYS_newfstatat,
            libc::AT_FDCWD,
            path.as_ptr(),
            &mut st as *mut libc::stat,
            0,
        )
    })
    .ok()
    .map(|_| stat_of(&st))
}

pub fn fchmod(fd: c_int, mode: libc::mode_t) -> Result<(), c_int> {
    // SAFETY: a plain system call on the caller's descriptor.
    raw(|| sys!(libc::SYS_fchmod, fd, mode)).map(|_| ())
}

pub fn chmod(path: &CStr, mode: libc::mode_t) -> Result<(), c_int> {
    // SAFETY: a NUL-terminated path.
    raw(|| sys!(libc::SYS_fchmodat, libc::AT_FDCWD, path.as_ptr(), mode)).map(|_| ())
}

pub fn mkdir(path: &CStr, mode: libc::mode_t) -> Result<(), c_int> {
    // SAFETY: a NUL-terminated path.
    raw(|| sys!(libc::SYS_mkdirat, libc::AT_FDCWD, path.as_ptr(), mode)).map(|_| ())
}

pub fn unlink(path: &CStr) {
    // SAFETY: a NUL-terminated path.
    let _ = raw(|| sys!(libc::SYS_unlinkat, libc::AT_FDCWD, path.as_ptr(), 0));
}

/// `readlink` into `buf`; the length read.
pub fn readlink(path: &CStr, buf: &mut [u8]) -> Result<usize, c_int> {
    // SAFETY: the kernel writes at most buf.len() bytes into buf.
    raw(|| {
        sys!(
            libc::SYS_readlinkat,
            libc::AT_FDCWD,
            path.as_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    })
    .map(|n| n as usize)
}

/// The current directory into `buf`; the length the kernel reports
/// (which counts the terminating NUL).
pub fn getcwd(buf: &mut [u8]) -> Result<usize, c_int> {
    // SAFETY: the kernel writes at most buf.len() bytes into buf.
    raw(|| sys!(libc::SYS_getcwd, buf.as_mut_ptr(), buf.len())).map(|n| n as usize)
}

/// `fcntl(fd, F_DUPFD_CLOEXEC, min)`: the lowest free descriptor >= `min`.
pub fn dup_at_least(fd: c_int, min: c_int) -> Result<c_int, c_int> {
    // SAFETY: a plain system call on the caller's descriptor.
    raw(|| sys!(libc::SYS_fcntl, fd, libc::F_DUPFD_CLOEXEC, min)).map(|fd| fd as c_int)
}

/// The soft limit on open descriptors.
pub fn open_files_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: the kernel fills `limit`.
    match raw(|| {
        sys!(
            libc::SYS_prlimit64,
            0,
            libc::RLIMIT_NOFILE,
            core::ptr::null::<libc::rlimit>(),
            &mut limit as *mut libc::rlimit,
        )
    }) {
        Ok(_) => limit.rlim_cur,
        Err(_) => 1024,
    }
}

/// The soft limit on file size (RLIM_INFINITY when unlimited).
pub fn file_size_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: the kernel fills `limit`.
    let _ = raw(|| {
        sys!(
            libc::SYS_prlimit64,
            0,
            libc::RLIMIT_FSIZE,
            core::ptr::null::<libc::rlimit>(),
            &mut limit as *mut libc::rlimit,
        )
    });
    limit.rlim_cur
}

/// Moves `fd` to a high descriptor number (close-on-exec), out of the way of
/// the program's own descriptors: a program that closes 3..1023, or starts
/// with 0, 1 or 2 closed, must never find the shim's file at a number it
/// uses. Closes `fd` when it moved; returns the descriptor to use.
pub fn move_high(fd: c_int) -> c_int {
    // High, but not so high that the kernel grows a huge descriptor table.
    let top = open_files_limit().clamp(16, 4096) as c_int - 1;
    for below in [0, 1, 3, 7, 15, 63, 255] {
        let min = top - below;
        if min <= fd {
            break;
        }
        if let Ok(high) = dup_at_least(fd, min) {
            close(fd);
            return high;
        }
    }
    fd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_come_back_and_errno_is_untouched() {
        // SAFETY: writing this thread's errno.
        unsafe { *libc::__errno_location() = 1234 };
        assert_eq!(
            open(c"/nonexistent/locksuit", libc::O_RDONLY, 0),
            Err(libc::ENOENT)
        );
        assert!(fstat(-1).is_none());
        // SAFETY: reading this thread's errno.
        assert_eq!(unsafe { *libc::__errno_location() }, 1234);
    }

    #[test]
    fn many_reads_in_one_call_stop_at_the_first_that_cannot_be_read() {
        let words: [u64; 3] = [11, 22, 33];
        let at = |i: usize| &words[i] as *const u64 as u64;
        let mut out = [0u8; 32];
        assert_eq!(read_own_memory_each(&[at(2), at(0), at(1)], 8, &mut out), 3);
        let got: Vec<u64> = out[..24]
            .chunks(8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(got, [33, 11, 22]);
        // Address 8 is never mapped: the read stops there.
        assert_eq!(read_own_memory_each(&[at(1), 8, at(0)], 8, &mut out), 1);
        assert_eq!(
            read_own_memory_each(&[at(1), at(0)], 8, &mut out[..12]),
            1,
            "room for one"
        );
    }

    #[test]
    fn a_moved_descriptor_is_high_and_the_low_one_is_closed() {
        let fd = open(c"/proc/self/exe", libc::O_RDONLY | libc::O_CLOEXEC, 0).unwrap();
        let id = fstat(fd).unwrap().id;
        let high = move_high(fd);
        assert!(high > fd, "{high} > {fd}");
        assert_eq!(fstat(high).unwrap().id, id);
        assert!(fstat(fd).is_none(), "the low descriptor is closed");
        close(high);
    }
}
