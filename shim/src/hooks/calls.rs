//! Exported hooks for blocking calls beyond the lock API: sleeps, polls,
//! waits for signals and children, file and socket I/O. Each one times the
//! real call and, only if it blocked at least `LOCKSUIT_BLOCK_MIN_US`,
//! enters the guard and records it (see `recorder::call_blocked`);
//! otherwise it costs a look at whether the kernel switched the thread out
//! (`recorder::CallTimer`; two timestamps on threads whose calls keep
//! blocking). Return values, errno and `EINTR` are the real call's own.
//!
//! Calls with up to four arguments come through the caller-passing
//! trampoline of the lock hooks; the rest (select, pselect, epoll_pwait,
//! recvfrom, sendto) find their caller by unwinding, which they do only
//! when they record.
//!
//! The `_FORTIFY_SOURCE` variants (`__read_chk`, `__pread_chk`,
//! `__recv_chk`, `__recvfrom_chk`, `__poll_chk`, `__ppoll_chk`) are
//! recorded as the calls they check.
//!
//! Calls that glibc makes internally (`fread` reaching `read`, `sleep`
//! reaching `nanosleep`) do not go through the dynamic linker and are not
//! seen twice; the program's own calls through stdio are not seen at all.

use crate::config;
use crate::guard::{self, HookGuard, ThreadState};
use crate::intercept::FUTEX_WAITV_WORDS;
use crate::lifecycle::{self, NewTask};
use crate::real::{real, syscall_result};
use crate::recorder::{self, CallFrom, CallTimer, Caller};
use crate::sys::forward;
use core::ffi::{c_char, c_int, c_long, c_uint, c_void};
use libc::{clockid_t, epoll_event, fd_set, id_t, idtype_t, iovec, msghdr, nfds_t, off_t};
use libc::{pid_t, pollfd, rusage, siginfo_t, sigset_t, size_t, sockaddr, socklen_t, ssize_t};
use libc::{timespec, timeval};
use locksuit_format::BlockingCall;

/// Runs `real`, timed; records it if it blocked long enough. The call
/// that did not block (most of them) costs a look at the kernel's rseq
/// pointer before and after (two clock reads more on a thread whose calls
/// keep blocking): no guard, no record.
#[inline(always)]
fn timed<R>(call: BlockingCall, from: CallFrom, fd: Option<c_int>, real: impl FnOnce() -> R) -> R {
    if !config::calls_timed() {
        return real();
    }
    let timer = CallTimer::start(ThreadState::call_timer);
    let result = real();
    if let Some(period) = timer.blocked(ThreadState::call_timer) {
        blocked(call, from, fd, period);
    }
    result
}

/// A call that blocked long enough: recorded, unless the shim cannot
/// record on this thread now. A signal handler's call made while the shim
/// was busy on the same thread is counted as dropped (and said once).
#[cold]
#[inline(never)]
fn blocked(call: BlockingCall, from: CallFrom, fd: Option<c_int>, period: (u64, u64)) {
    let _errno = crate::diag::ErrnoGuard::save();
    match HookGuard::enter_quietly() {
        Some(guard) => {
            recorder::call_blocked(&guard, call, from, fd, period);
        }
        None if guard::nested_in_bookkeeping() => lifecycle::nested_call_passed_through(),
        None => {}
    }
}

/// The result of a call whose real function cannot be had (only while
/// this thread is resolving symbols): what a missing function would mean.
fn enosys<R: From<i8>>() -> R {
    // SAFETY: errno is this thread's own.
    unsafe { *libc::__errno_location() = libc::ENOSYS };
    R::from(-1)
}

/// A hook whose trampoline passes the caller: `$regs` names the two
/// registers after the arguments on each architecture.
macro_rules! call_hook {
    ($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $handler:ident,
     x86_64: $x86:tt, aarch64: $arm:tt, real: $real:ident, call: $call:ident,
     fd: $fd:expr, unresolved: $fallback:expr) => {
        export_with_caller!($name($($arg: $ty),*) -> $ret => $handler, x86_64: $x86, aarch64: $arm);
        unsafe extern "C-unwind" fn $handler($($arg: $ty,)* caller: usize, sp: usize) -> $ret {
            let f = real_or!($real, $fallback);
            let from = CallFrom::Caller(Caller::new(caller, sp));
            // SAFETY: forwarding the caller's arguments unchanged.
            timed(BlockingCall::$call, from, $fd, || unsafe { f($($arg),*) })
        }
    };
}

/// A hook with too many arguments for a trampoline: its caller is found
/// by unwinding past it when it records.
macro_rules! unwound_call_hook {
    ($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty, real: $real:ident, call: $call:ident,
     fd: $fd:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C-unwind" fn $name($($arg: $ty),*) -> $ret {
            let f = real_or!($real, enosys());
            let from = CallFrom::Hook($name as *const () as usize as u64);
            // SAFETY: forwarding the caller's arguments unchanged.
            timed(BlockingCall::$call, from, $fd, || unsafe { f($($arg),*) })
        }
    };
}

// ----------------------------------------------------------------- sleeps

call_hook!(nanosleep(req: *const timespec, rem: *mut timespec) -> c_int => nanosleep_handler,
    x86_64: ("rdx", "rcx"), aarch64: ("x2", "x3"), real: nanosleep, call: Nanosleep, fd: None,
    unresolved: enosys());
// Returns an error number, not -1 and errno.
call_hook!(clock_nanosleep(clock: clockid_t, flags: c_int, req: *const timespec, rem: *mut timespec) -> c_int
    => clock_nanosleep_handler, x86_64: ("r8", "r9"), aarch64: ("x4", "x5"),
    real: clock_nanosleep, call: ClockNanosleep, fd: None, unresolved: libc::ENOSYS);
call_hook!(usleep(usec: c_uint) -> c_int => usleep_handler,
    x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"), real: usleep, call: Usleep, fd: None,
    unresolved: enosys());
// Returns the seconds left unslept: all of them, if it could not sleep.
call_hook!(sleep(seconds: c_uint) -> c_uint => sleep_handler,
    x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"), real: sleep, call: Sleep, fd: None,
    unresolved: seconds);

// ------------------------------------------------------------------ polls

call_hook!(poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int => poll_handler,
    x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"), real: poll, call: Poll, fd: None,
    unresolved: enosys());
call_hook!(__poll_chk(fds: *mut pollfd, n: nfds_t, timeout: c_int, size: size_t) -> c_int => poll_chk_handler,
    x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: poll_chk, call: Poll, fd: None,
    unresolved: enosys());
unwound_call_hook!(__ppoll_chk(fds: *mut pollfd, n: nfds_t, timeout: *const timespec, mask: *const sigset_t, size: size_t) -> c_int,
    real: ppoll_chk, call: Ppoll, fd: None);
call_hook!(ppoll(fds: *mut pollfd, n: nfds_t, timeout: *const timespec, mask: *const sigset_t) -> c_int
    => ppoll_handler, x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: ppoll, call: Ppoll,
    fd: None, unresolved: enosys());
unwound_call_hook!(select(n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, timeout: *mut timeval) -> c_int,
    real: select, call: Select, fd: None);
unwound_call_hook!(pselect(n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, timeout: *const timespec, mask: *const sigset_t) -> c_int,
    real: pselect, call: Pselect, fd: None);
call_hook!(epoll_wait(epfd: c_int, events: *mut epoll_event, max: c_int, timeout: c_int) -> c_int
    => epoll_wait_handler, x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: epoll_wait,
    call: EpollWait, fd: None, unresolved: enosys());
unwound_call_hook!(epoll_pwait(epfd: c_int, events: *mut epoll_event, max: c_int, timeout: c_int, mask: *const sigset_t) -> c_int,
    real: epoll_pwait, call: EpollPwait, fd: None);

// ------------------------------------------------- signals and children

// Returns an error number, not -1 and errno.
call_hook!(sigwait(set: *const sigset_t, sig: *mut c_int) -> c_int => sigwait_handler,
    x86_64: ("rdx", "rcx"), aarch64: ("x2", "x3"), real: sigwait, call: Sigwait, fd: None,
    unresolved: libc::ENOSYS);
call_hook!(sigwaitinfo(set: *const sigset_t, info: *mut siginfo_t) -> c_int => sigwaitinfo_handler,
    x86_64: ("rdx", "rcx"), aarch64: ("x2", "x3"), real: sigwaitinfo, call: Sigwaitinfo,
    fd: None, unresolved: enosys());
call_hook!(sigtimedwait(set: *const sigset_t, info: *mut siginfo_t, timeout: *const timespec) -> c_int
    => sigtimedwait_handler, x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"), real: sigtimedwait,
    call: Sigtimedwait, fd: None, unresolved: enosys());
call_hook!(waitpid(pid: pid_t, status: *mut c_int, options: c_int) -> pid_t => waitpid_handler,
    x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"), real: waitpid, call: Waitpid, fd: None,
    unresolved: enosys());
call_hook!(wait4(pid: pid_t, status: *mut c_int, options: c_int, usage: *mut rusage) -> pid_t
    => wait4_handler, x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: wait4, call: Wait4,
    fd: None, unresolved: enosys());
call_hook!(wait(status: *mut c_int) -> pid_t => wait_handler,
    x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"), real: wait, call: Wait, fd: None,
    unresolved: enosys());
call_hook!(waitid(idtype: idtype_t, id: id_t, info: *mut siginfo_t, options: c_int) -> c_int
    => waitid_handler, x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: waitid, call: Waitid,
    fd: None, unresolved: enosys());

// -------------------------------------------------------- file descriptors

// read, write, pread and pwrite take their real function from a hot word
// (`real::hot_entries!`) whose stand-in makes the same system call as
// `unresolved` says, while this thread resolves the table.
call_hook!(read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t => read_handler,
    x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"), real: read, call: Read, fd: Some(fd),
    unresolved: syscall_result(forward!(libc::SYS_read, fd, buf, n)));
// `_FORTIFY_SOURCE` turns reads into a known buffer into these (Debian
// builds its packages so); the checks are the real functions' own.
call_hook!(__read_chk(fd: c_int, buf: *mut c_void, n: size_t, size: size_t) -> ssize_t => read_chk_handler,
    x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: read_chk, call: Read, fd: Some(fd),
    unresolved: if n <= size { syscall_result(forward!(libc::SYS_read, fd, buf, n)) } else { enosys() });
unwound_call_hook!(__pread_chk(fd: c_int, buf: *mut c_void, n: size_t, offset: off_t, size: size_t) -> ssize_t,
    real: pread_chk, call: Pread, fd: Some(fd));
unwound_call_hook!(__pread64_chk(fd: c_int, buf: *mut c_void, n: size_t, offset: off_t, size: size_t) -> ssize_t,
    real: pread_chk, call: Pread, fd: Some(fd));
call_hook!(write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t => write_handler,
    x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"), real: write, call: Write, fd: Some(fd),
    unresolved: syscall_result(forward!(libc::SYS_write, fd, buf, n)));
call_hook!(pread(fd: c_int, buf: *mut c_void, n: size_t, offset: off_t) -> ssize_t => pread_handler,
    x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: pread, call: Pread, fd: Some(fd),
    unresolved: syscall_result(forward!(libc::SYS_pread64, fd, buf, n, offset)));
call_hook!(pread64(fd: c_int, buf: *mut c_void, n: size_t, offset: off_t) -> ssize_t => pread64_handler,
    x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: pread, call: Pread, fd: Some(fd),
    unresolved: syscall_result(forward!(libc::SYS_pread64, fd, buf, n, offset)));
call_hook!(pwrite(fd: c_int, buf: *const c_void, n: size_t, offset: off_t) -> ssize_t => pwrite_handler,
    x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: pwrite, call: Pwrite, fd: Some(fd),
    unresolved: syscall_result(forward!(libc::SYS_pwrite64, fd, buf, n, offset)));
call_hook!(pwrite64(fd: c_int, buf: *const c_void, n: size_t, offset: off_t) -> ssize_t => pwrite64_handler,
    x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: pwrite, call: Pwrite, fd: Some(fd),
    unresolved: syscall_result(forward!(libc::SYS_pwrite64, fd, buf, n, offset)));
call_hook!(readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t => readv_handler,
    x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"), real: readv, call: Readv, fd: Some(fd),
    unresolved: syscall_result(forward!(libc::SYS_readv, fd, iov, n)));
call_hook!(writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t => writev_handler,
    x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"), real: writev, call: Writev, fd: Some(fd),
    unresolved: syscall_result(forward!(libc::SYS_writev, fd, iov, n)));
call_hook!(fsync(fd: c_int) -> c_int => fsync_handler,
    x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"), real: fsync, call: Fsync, fd: Some(fd),
    unresolved: enosys());
call_hook!(fdatasync(fd: c_int) -> c_int => fdatasync_handler,
    x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"), real: fdatasync, call: Fdatasync,
    fd: Some(fd), unresolved: enosys());
// Variadic in C: `mode` is read (as the real call does) only with O_CREAT
// or O_TMPFILE; otherwise it is whatever the register held, passed on unread.
call_hook!(open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int => open_handler,
    x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"), real: open, call: Open, fd: None,
    unresolved: syscall_result(forward!(libc::SYS_openat, libc::AT_FDCWD, path, flags, mode)));
call_hook!(open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int => open64_handler,
    x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"), real: open, call: Open, fd: None,
    unresolved: syscall_result(forward!(libc::SYS_openat, libc::AT_FDCWD, path, flags, mode)));
call_hook!(openat(dir: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int => openat_handler,
    x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: openat, call: Openat, fd: None,
    unresolved: syscall_result(forward!(libc::SYS_openat, dir, path, flags, mode)));
call_hook!(openat64(dir: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int => openat64_handler,
    x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: openat, call: Openat, fd: None,
    unresolved: syscall_result(forward!(libc::SYS_openat, dir, path, flags, mode)));

// ------------------------------------------------------------------ sockets

call_hook!(recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t => recv_handler,
    x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: recv, call: Recv, fd: Some(fd),
    unresolved: enosys());
unwound_call_hook!(__recv_chk(fd: c_int, buf: *mut c_void, n: size_t, size: size_t, flags: c_int) -> ssize_t,
    real: recv_chk, call: Recv, fd: Some(fd));
unwound_call_hook!(__recvfrom_chk(fd: c_int, buf: *mut c_void, n: size_t, size: size_t, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> ssize_t,
    real: recvfrom_chk, call: Recvfrom, fd: Some(fd));
call_hook!(send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t => send_handler,
    x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: send, call: Send, fd: Some(fd),
    unresolved: enosys());
unwound_call_hook!(recvfrom(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> ssize_t,
    real: recvfrom, call: Recvfrom, fd: Some(fd));
unwound_call_hook!(sendto(fd: c_int, buf: *const c_void, n: size_t, flags: c_int, to: *const sockaddr, len: socklen_t) -> ssize_t,
    real: sendto, call: Sendto, fd: Some(fd));
call_hook!(recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t => recvmsg_handler,
    x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"), real: recvmsg, call: Recvmsg, fd: Some(fd),
    unresolved: enosys());
call_hook!(sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t => sendmsg_handler,
    x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"), real: sendmsg, call: Sendmsg, fd: Some(fd),
    unresolved: enosys());
call_hook!(accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int => accept_handler,
    x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"), real: accept, call: Accept, fd: Some(fd),
    unresolved: enosys());
call_hook!(accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int
    => accept4_handler, x86_64: ("r8", "r9"), aarch64: ("x4", "x5"), real: accept4,
    call: Accept4, fd: Some(fd), unresolved: enosys());
call_hook!(connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int => connect_handler,
    x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"), real: connect, call: Connect, fd: Some(fd),
    unresolved: enosys());

// ------------------------------------------------------------ raw futexes

/// The futex operations that wait (the private flag and the clock flag
/// masked off).
fn futex_waits(op: c_long) -> bool {
    const FUTEX_LOCK_PI2: c_int = 13;
    let cmd = op as c_int & libc::FUTEX_CMD_MASK;
    matches!(
        cmd,
        libc::FUTEX_WAIT
            | libc::FUTEX_WAIT_BITSET
            | libc::FUTEX_LOCK_PI
            | FUTEX_LOCK_PI2
            | libc::FUTEX_WAIT_REQUEUE_PI
    )
}

/// The futex operations that wake waiters of their first word (a
/// requeue's count includes the threads moved to the second word; a
/// `WAKE_OP`'s, those woken on the second).
fn futex_wakes(op: c_long) -> bool {
    let cmd = op as c_int & libc::FUTEX_CMD_MASK;
    matches!(
        cmd,
        libc::FUTEX_WAKE
            | libc::FUTEX_WAKE_BITSET
            | libc::FUTEX_WAKE_OP
            | libc::FUTEX_REQUEUE
            | libc::FUTEX_CMP_REQUEUE
            | libc::FUTEX_UNLOCK_PI
            | libc::FUTEX_CMP_REQUEUE_PI
    )
}

/// The word of `futex_waitv`'s `struct futex_waitv` number `i` at
/// `waiters` (`{u64 val; u64 uaddr; u32 flags; u32 reserved}`, 24 bytes),
/// read without faulting; `None` if it cannot be read.
fn futex_waitv_word(waiters: u64, i: usize) -> Option<u64> {
    let mut uaddr = [0u8; 8];
    let at = waiters.checked_add(24 * i as u64 + 8)?;
    crate::sys::read_own_memory(at, &mut uaddr).then(|| u64::from_ne_bytes(uaddr))
}

/// The words of `futex_waitv`'s `n` waiters at `waiters` (at most
/// [`FUTEX_WAITV_WORDS`]), or `None` if any cannot be read (the kernel's
/// EFAULT to come) or there are more.
fn futex_waitv_words(waiters: u64, n: c_long) -> Option<([u64; FUTEX_WAITV_WORDS], usize)> {
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n <= FUTEX_WAITV_WORDS)?;
    let mut words = [0u64; FUTEX_WAITV_WORDS];
    for (i, w) in words.iter_mut().enumerate().take(n) {
        *w = futex_waitv_word(waiters, i)?;
    }
    Some((words, n))
}

/// `syscall(2)`. A futex wait or wake made through it is a lock library's
/// contended path (Rust's std, parking_lot, abseil, folly; hand-written
/// futex code), out of the pthread hooks' sight: the word is recorded as an
/// object of kind `futex` (see `intercept::futex_wait`), as are the words
/// of a `futex_waitv` (`intercept::futex_wait_any`). `exit_group` and `exit` end the
/// process or the thread as `_exit` and a thread's end do; `clone`,
/// `clone3`, `fork` and `vfork` make a process as `children.rs` says. Every
/// other call goes straight through. Variadic in C: the six words after the
/// number are passed on as the caller left them (the kernel reads only
/// those its call takes).
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn syscall(
    n: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    a4: c_long,
    a5: c_long,
    a6: c_long,
) -> c_long {
    let words = [a1, a2, a3, a4, a5, a6].map(|a| a as usize);
    // SAFETY: the caller's own system call, as it asked for it.
    let f = real_or!(
        syscall,
        syscall_result(unsafe { crate::sys::raw_syscall(n, words) })
    );
    if let Some(what) = recorder::Confining::of_syscall(n, a1 as u64, a2 as u64) {
        // SAFETY: forwarding the caller's arguments unchanged.
        return super::confining(what, || unsafe { f(n, a1, a2, a3, a4, a5, a6) });
    }
    if n == libc::SYS_rseq {
        recorder::rseq_taken_over();
    }
    if n == libc::SYS_prctl {
        // SAFETY: forwarding the caller's arguments unchanged.
        let rc = unsafe { f(n, a1, a2, a3, a4, a5, a6) };
        if rc == 0 {
            crate::sys::confined::prctl_done(a1 as i32, a2 as u64);
        }
        return rc;
    }
    match n {
        libc::SYS_futex if futex_waits(a2) => {
            let hook = syscall as *const () as usize as u64;
            // SAFETY: forwarding the caller's arguments unchanged.
            return crate::intercept::futex_wait(hook, a1 as u64, || unsafe {
                f(n, a1, a2, a3, a4, a5, a6)
            });
        }
        libc::SYS_futex if futex_wakes(a2) => {
            let hook = syscall as *const () as usize as u64;
            // SAFETY: forwarding the caller's arguments unchanged.
            return crate::intercept::futex_wake(hook, a1 as u64, || unsafe {
                f(n, a1, a2, a3, a4, a5, a6)
            });
        }
        libc::SYS_futex_waitv => {
            let hook = syscall as *const () as usize as u64;
            // Its words are read as the kernel will (a bad pointer is the
            // kernel's EFAULT, never a fault here). One word: a wait on
            // it, as FUTEX_WAIT's; several: a wait on each, the one the
            // call returns ending it. Unreadable, or too many: timed.
            match futex_waitv_words(a1 as u64, a2) {
                Some((words, 1)) => {
                    // SAFETY: forwarding the caller's arguments unchanged.
                    return crate::intercept::futex_wait(hook, words[0], || unsafe {
                        f(n, a1, a2, a3, a4, a5, a6)
                    });
                }
                Some((words, count)) if count > 1 => {
                    // SAFETY: forwarding the caller's arguments unchanged.
                    return crate::intercept::futex_wait_any(hook, &words[..count], || unsafe {
                        f(n, a1, a2, a3, a4, a5, a6)
                    });
                }
                _ => {}
            }
            let from = CallFrom::Hook(hook);
            // SAFETY: forwarding the caller's arguments unchanged.
            return timed(BlockingCall::Futex, from, None, || unsafe {
                f(n, a1, a2, a3, a4, a5, a6)
            });
        }
        // The status is the int the caller passed.
        libc::SYS_exit_group => lifecycle::process_exiting(a1 as c_int),
        libc::SYS_exit => lifecycle::thread_exiting(a1 as c_int),
        // A new process made without glibc's fork: see `children.rs`.
        libc::SYS_clone | libc::SYS_clone3 => {
            let task = if n == libc::SYS_clone {
                NewTask::of(a1 as u64)
            } else {
                super::children::clone3_task(a1, a2)
            };
            // SAFETY: forwarding the caller's arguments unchanged.
            return super::children::cloned(task, || unsafe { f(n, a1, a2, a3, a4, a5, a6) });
        }
        #[cfg(target_arch = "x86_64")]
        libc::SYS_fork | libc::SYS_vfork => {
            let task = if n == libc::SYS_fork {
                NewTask::Copy
            } else {
                NewTask::Borrowing
            };
            // SAFETY: forwarding the caller's arguments unchanged.
            return super::children::cloned(task, || unsafe { f(n, a1, a2, a3, a4, a5, a6) });
        }
        _ => {}
    }
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { f(n, a1, a2, a3, a4, a5, a6) }
}
