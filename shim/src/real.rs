//! The table of real (next-in-line) functions, resolved in one step.
//!
//! Why not redhook: it resolves each symbol lazily through plain `dlsym` on
//! first call, which gives the GLIBC_2.2.5 compat `pthread_cond_*` on x86_64
//! (the old, incompatible condvar ABI) and spreads `dlsym` calls — which may
//! allocate — across hot hooks. Here every symbol is looked up once, on the
//! first hook call or in the constructor, whichever comes first, and the
//! condition-variable functions are pinned with `dlvsym` to GLIBC_2.3.2.
//!
//! Longer than our other files: one entry, typed, per interposed function,
//! all in this one table.

use core::cell::UnsafeCell;
use core::ffi::{c_char, c_int, c_long, c_uint, c_void, CStr};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};
use libc::{clockid_t, pthread_attr_t, pthread_cond_t, pthread_condattr_t, pthread_mutex_t};
use libc::{epoll_event, fd_set, id_t, idtype_t, iovec, msghdr, nfds_t, off_t, pid_t, pollfd};
use libc::{pthread_barrier_t, pthread_barrierattr_t, pthread_rwlock_t, pthread_rwlockattr_t};
use libc::{pthread_mutexattr_t, pthread_spinlock_t, pthread_t, sem_t, timespec};
use libc::{rusage, siginfo_t, sigset_t, size_t, sockaddr, socklen_t, ssize_t, timeval};

type RwFn = unsafe extern "C" fn(*mut pthread_rwlock_t) -> c_int;
type RwTimedFn = unsafe extern "C" fn(*mut pthread_rwlock_t, *const timespec) -> c_int;
type RwClockFn = unsafe extern "C" fn(*mut pthread_rwlock_t, clockid_t, *const timespec) -> c_int;
type SpinFn = unsafe extern "C" fn(*mut pthread_spinlock_t) -> c_int;
type SemFn = unsafe extern "C-unwind" fn(*mut sem_t) -> c_int;
type MutexFn = unsafe extern "C" fn(*mut pthread_mutex_t) -> c_int;

/// A table entry as a hook takes it: the function to call, if there is one.
/// The hottest entries (the mutex and semaphore calls almost every lock
/// operation makes) are plain function pointers, with a stand-in where the
/// C library lacks one, so their hooks test nothing; the rest are `Option`s.
pub trait Entry<F> {
    fn function(self) -> Option<F>;
}

impl<F> Entry<F> for Option<F> {
    #[inline(always)]
    fn function(self) -> Option<F> {
        self
    }
}

impl Entry<MutexFn> for MutexFn {
    #[inline(always)]
    fn function(self) -> Option<MutexFn> {
        Some(self)
    }
}

impl Entry<SemFn> for SemFn {
    #[inline(always)]
    fn function(self) -> Option<SemFn> {
        Some(self)
    }
}

/// Stand-ins for a missing mutex or semaphore function: what the hooks
/// return for any other missing function (a lock call fails with EINVAL,
/// an unlock is a no-op, a semaphore call returns -1).
unsafe extern "C" fn missing_mutex_call(_: *mut pthread_mutex_t) -> c_int {
    libc::EINVAL
}

unsafe extern "C" fn missing_mutex_unlock(_: *mut pthread_mutex_t) -> c_int {
    0
}

unsafe extern "C-unwind" fn missing_sem_call(_: *mut sem_t) -> c_int {
    -1
}

/// The real functions almost every operation calls (the mutex and
/// semaphore calls, and the four commonest I/O calls), read by their hooks
/// with no test of the table's state: each starts as a stand-in that
/// resolves the table and then makes the call, and holds the real function
/// (or the table's stand-in for a missing one) once the table is resolved.
/// While this very thread resolves the table, or where the C library lacks
/// the function, the stand-in returns what the hook did before (`or`).
macro_rules! hot_entries {
    ($($static:ident: $ty:ident = $field:ident by $first:ident($($arg:ident: $aty:ty),*) -> $ret:ty,
       $abi:literal or $fallback:expr;)*) => {
        $(
            pub static $static: Hot<$ty> = Hot(AtomicPtr::new($first as *mut ()), core::marker::PhantomData);

            unsafe extern $abi fn $first($($arg: $aty),*) -> $ret {
                match real().and_then(|fns| Entry::function(fns.$field)) {
                    // SAFETY: forwarding the caller's arguments unchanged.
                    Some(f) => unsafe { f($($arg),*) },
                    None => $fallback,
                }
            }
        )*

        /// Publishes the resolved functions to the hot entries (those the C
        /// library has; the others keep their stand-ins).
        fn publish_hot(fns: &RealFns) {
            $(
                if let Some(f) = Entry::function(fns.$field) {
                    $static.0.store(f as *mut (), Ordering::Release);
                }
            )*
        }
    };
}

/// A hot entry: a function pointer of type `F` in an atomic word.
pub struct Hot<F>(AtomicPtr<()>, core::marker::PhantomData<F>);

// SAFETY: the word is atomic; `F` is only a function-pointer type tag.
unsafe impl<F> Sync for Hot<F> {}

impl<F: Copy> Hot<F> {
    #[inline(always)]
    pub fn get(&self) -> F {
        const { assert!(core::mem::size_of::<F>() == core::mem::size_of::<*mut ()>()) };
        let word = self.0.load(Ordering::Relaxed);
        // SAFETY: only ever stored from an `F`, a function pointer of the
        // same size (see `hot_entries!`).
        unsafe { core::mem::transmute_copy::<*mut (), F>(&word) }
    }
}

/// A raw system call's result as libc returns it: -1 and errno on failure.
/// For the calls an allocator may make while this very thread resolves
/// the real functions (reading `/proc` during its first `malloc`): they
/// are made as system calls instead.
pub fn syscall_result<R: TryFrom<c_long> + From<i8>>(rc: c_long) -> R {
    if (-4095..0).contains(&rc) {
        // SAFETY: errno is this thread's own.
        unsafe { *libc::__errno_location() = -rc as c_int };
        return R::from(-1);
    }
    R::try_from(rc).unwrap_or_else(|_| R::from(-1))
}

hot_entries! {
    MUTEX_LOCK: MutexFn = mutex_lock by first_mutex_lock(m: *mut pthread_mutex_t) -> c_int, "C" or libc::EINVAL;
    MUTEX_TRYLOCK: MutexFn = mutex_trylock by first_mutex_trylock(m: *mut pthread_mutex_t) -> c_int, "C" or libc::EINVAL;
    MUTEX_UNLOCK: MutexFn = mutex_unlock by first_mutex_unlock(m: *mut pthread_mutex_t) -> c_int, "C" or 0;
    SEM_WAIT: SemFn = sem_wait by first_sem_wait(s: *mut sem_t) -> c_int, "C-unwind" or -1;
    SEM_TRYWAIT: SemFn = sem_trywait by first_sem_trywait(s: *mut sem_t) -> c_int, "C-unwind" or -1;
    SEM_POST: SemFn = sem_post by first_sem_post(s: *mut sem_t) -> c_int, "C-unwind" or -1;
    READ: ReadFn = read by first_read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t,
        "C-unwind" or syscall_result(crate::sys::forward!(libc::SYS_read, fd, buf, n));
    WRITE: WriteFn = write by first_write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t,
        "C-unwind" or syscall_result(crate::sys::forward!(libc::SYS_write, fd, buf, n));
    PREAD: PreadFn = pread by first_pread(fd: c_int, buf: *mut c_void, n: size_t, offset: off_t) -> ssize_t,
        "C-unwind" or syscall_result(crate::sys::forward!(libc::SYS_pread64, fd, buf, n, offset));
    PWRITE: PwriteFn = pwrite by first_pwrite(fd: c_int, buf: *const c_void, n: size_t, offset: off_t) -> ssize_t,
        "C-unwind" or syscall_result(crate::sys::forward!(libc::SYS_pwrite64, fd, buf, n, offset));
}

/// Blocking calls beyond the lock API: all cancellation points, so a
/// cancellation may unwind out of them.
type ReadFn = unsafe extern "C-unwind" fn(c_int, *mut c_void, size_t) -> ssize_t;
/// `_FORTIFY_SOURCE`'s checked reads: the buffer's size comes last (after
/// the offset, the flags' place differs: see each).
type ReadChkFn = unsafe extern "C-unwind" fn(c_int, *mut c_void, size_t, size_t) -> ssize_t;
type PreadChkFn = unsafe extern "C-unwind" fn(c_int, *mut c_void, size_t, off_t, size_t) -> ssize_t;
type RecvChkFn = unsafe extern "C-unwind" fn(c_int, *mut c_void, size_t, size_t, c_int) -> ssize_t;
type RecvFromChkFn = unsafe extern "C-unwind" fn(
    c_int,
    *mut c_void,
    size_t,
    size_t,
    c_int,
    *mut sockaddr,
    *mut socklen_t,
) -> ssize_t;
type PollChkFn = unsafe extern "C-unwind" fn(*mut pollfd, nfds_t, c_int, size_t) -> c_int;
type PpollChkFn = unsafe extern "C-unwind" fn(
    *mut pollfd,
    nfds_t,
    *const timespec,
    *const sigset_t,
    size_t,
) -> c_int;
type WriteFn = unsafe extern "C-unwind" fn(c_int, *const c_void, size_t) -> ssize_t;
type PreadFn = unsafe extern "C-unwind" fn(c_int, *mut c_void, size_t, off_t) -> ssize_t;
type PwriteFn = unsafe extern "C-unwind" fn(c_int, *const c_void, size_t, off_t) -> ssize_t;
type VectorFn = unsafe extern "C-unwind" fn(c_int, *const iovec, c_int) -> ssize_t;
type FdFn = unsafe extern "C-unwind" fn(c_int) -> c_int;
type SelectFn = unsafe extern "C-unwind" fn(
    c_int,
    *mut fd_set,
    *mut fd_set,
    *mut fd_set,
    *mut timeval,
) -> c_int;
type PselectFn = unsafe extern "C-unwind" fn(
    c_int,
    *mut fd_set,
    *mut fd_set,
    *mut fd_set,
    *const timespec,
    *const sigset_t,
) -> c_int;
type EpollWaitFn = unsafe extern "C-unwind" fn(c_int, *mut epoll_event, c_int, c_int) -> c_int;
type EpollPwaitFn =
    unsafe extern "C-unwind" fn(c_int, *mut epoll_event, c_int, c_int, *const sigset_t) -> c_int;
type RecvFromFn = unsafe extern "C-unwind" fn(
    c_int,
    *mut c_void,
    size_t,
    c_int,
    *mut sockaddr,
    *mut socklen_t,
) -> ssize_t;
type SendToFn = unsafe extern "C-unwind" fn(
    c_int,
    *const c_void,
    size_t,
    c_int,
    *const sockaddr,
    socklen_t,
) -> ssize_t;

pub type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;

/// Every function the hooks forward to. `None` only if the C library lacks it
/// (then the hook reports ENOSYS, which is what a missing symbol would have
/// meant for a program that reached it).
pub struct RealFns {
    pub mutex_init:
        Option<unsafe extern "C" fn(*mut pthread_mutex_t, *const pthread_mutexattr_t) -> c_int>,
    pub mutex_destroy: Option<unsafe extern "C" fn(*mut pthread_mutex_t) -> c_int>,
    pub mutex_lock: MutexFn,
    pub mutex_trylock: MutexFn,
    pub mutex_timedlock:
        Option<unsafe extern "C" fn(*mut pthread_mutex_t, *const timespec) -> c_int>,
    pub mutex_clocklock:
        Option<unsafe extern "C" fn(*mut pthread_mutex_t, clockid_t, *const timespec) -> c_int>,
    pub mutex_unlock: MutexFn,
    pub cond_init:
        Option<unsafe extern "C" fn(*mut pthread_cond_t, *const pthread_condattr_t) -> c_int>,
    pub cond_destroy: Option<unsafe extern "C" fn(*mut pthread_cond_t) -> c_int>,
    pub cond_wait:
        Option<unsafe extern "C-unwind" fn(*mut pthread_cond_t, *mut pthread_mutex_t) -> c_int>,
    pub cond_timedwait: Option<
        unsafe extern "C-unwind" fn(
            *mut pthread_cond_t,
            *mut pthread_mutex_t,
            *const timespec,
        ) -> c_int,
    >,
    pub cond_clockwait: Option<
        unsafe extern "C-unwind" fn(
            *mut pthread_cond_t,
            *mut pthread_mutex_t,
            clockid_t,
            *const timespec,
        ) -> c_int,
    >,
    pub cond_signal: Option<unsafe extern "C" fn(*mut pthread_cond_t) -> c_int>,
    pub cond_broadcast: Option<unsafe extern "C" fn(*mut pthread_cond_t) -> c_int>,
    pub thread_create: Option<
        unsafe extern "C" fn(
            *mut pthread_t,
            *const pthread_attr_t,
            StartRoutine,
            *mut c_void,
        ) -> c_int,
    >,
    pub thread_join: Option<unsafe extern "C-unwind" fn(pthread_t, *mut *mut c_void) -> c_int>,
    pub thread_tryjoin_np: Option<unsafe extern "C" fn(pthread_t, *mut *mut c_void) -> c_int>,
    pub thread_timedjoin_np:
        Option<unsafe extern "C-unwind" fn(pthread_t, *mut *mut c_void, *const timespec) -> c_int>,
    pub thread_detach: Option<unsafe extern "C" fn(pthread_t) -> c_int>,
    pub thread_exit: Option<unsafe extern "C-unwind" fn(*mut c_void) -> !>,
    pub thread_setname_np: Option<unsafe extern "C" fn(pthread_t, *const c_char) -> c_int>,
    /// Unwinding: an atexit handler may reach a cancellation point.
    pub exit: Option<unsafe extern "C-unwind" fn(c_int) -> !>,
    /// Unwinding: an at_quick_exit handler may reach a cancellation point.
    pub quick_exit: Option<unsafe extern "C-unwind" fn(c_int) -> !>,
    pub exit_now: Option<unsafe extern "C" fn(c_int) -> !>,
    pub exit_now_c99: Option<unsafe extern "C" fn(c_int) -> !>,
    pub execve: Option<
        unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int,
    >,
    pub execv: Option<unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int>,
    pub execvp: Option<unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int>,
    pub execvpe: Option<
        unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int,
    >,
    pub fexecve:
        Option<unsafe extern "C" fn(c_int, *const *const c_char, *const *const c_char) -> c_int>,
    pub execveat: Option<
        unsafe extern "C" fn(
            c_int,
            *const c_char,
            *const *const c_char,
            *const *const c_char,
            c_int,
        ) -> c_int,
    >,
    pub rwlock_init:
        Option<unsafe extern "C" fn(*mut pthread_rwlock_t, *const pthread_rwlockattr_t) -> c_int>,
    pub rwlock_destroy: Option<RwFn>,
    pub rwlock_rdlock: Option<RwFn>,
    pub rwlock_wrlock: Option<RwFn>,
    pub rwlock_tryrdlock: Option<RwFn>,
    pub rwlock_trywrlock: Option<RwFn>,
    pub rwlock_timedrdlock: Option<RwTimedFn>,
    pub rwlock_timedwrlock: Option<RwTimedFn>,
    pub rwlock_clockrdlock: Option<RwClockFn>,
    pub rwlock_clockwrlock: Option<RwClockFn>,
    pub rwlock_unlock: Option<RwFn>,
    pub spin_init: Option<unsafe extern "C" fn(*mut pthread_spinlock_t, c_int) -> c_int>,
    pub spin_destroy: Option<SpinFn>,
    pub spin_lock: Option<SpinFn>,
    pub spin_trylock: Option<SpinFn>,
    pub spin_unlock: Option<SpinFn>,
    pub sem_init: Option<unsafe extern "C" fn(*mut sem_t, c_int, libc::c_uint) -> c_int>,
    pub sem_destroy: Option<SemFn>,
    pub sem_wait: SemFn,
    pub sem_trywait: SemFn,
    pub sem_timedwait: Option<unsafe extern "C-unwind" fn(*mut sem_t, *const timespec) -> c_int>,
    pub sem_clockwait:
        Option<unsafe extern "C-unwind" fn(*mut sem_t, clockid_t, *const timespec) -> c_int>,
    pub sem_post: SemFn,
    /// Variadic in C; called with all four arguments (the extra two are
    /// only read with O_CREAT, as in the caller's own call).
    pub sem_open: Option<unsafe extern "C" fn(*const c_char, c_int, ...) -> *mut sem_t>,
    pub sem_close: Option<SemFn>,
    pub barrier_init: Option<
        unsafe extern "C" fn(
            *mut pthread_barrier_t,
            *const pthread_barrierattr_t,
            libc::c_uint,
        ) -> c_int,
    >,
    pub barrier_destroy: Option<unsafe extern "C" fn(*mut pthread_barrier_t) -> c_int>,
    pub barrier_wait: Option<unsafe extern "C-unwind" fn(*mut pthread_barrier_t) -> c_int>,
    pub dlclose: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
    pub nanosleep: Option<unsafe extern "C-unwind" fn(*const timespec, *mut timespec) -> c_int>,
    pub clock_nanosleep: Option<
        unsafe extern "C-unwind" fn(clockid_t, c_int, *const timespec, *mut timespec) -> c_int,
    >,
    pub usleep: Option<unsafe extern "C-unwind" fn(c_uint) -> c_int>,
    pub sleep: Option<unsafe extern "C-unwind" fn(c_uint) -> c_uint>,
    pub poll: Option<unsafe extern "C-unwind" fn(*mut pollfd, nfds_t, c_int) -> c_int>,
    pub ppoll: Option<
        unsafe extern "C-unwind" fn(*mut pollfd, nfds_t, *const timespec, *const sigset_t) -> c_int,
    >,
    pub select: Option<SelectFn>,
    pub pselect: Option<PselectFn>,
    pub epoll_wait: Option<EpollWaitFn>,
    pub epoll_pwait: Option<EpollPwaitFn>,
    pub sigwait: Option<unsafe extern "C-unwind" fn(*const sigset_t, *mut c_int) -> c_int>,
    pub sigwaitinfo: Option<unsafe extern "C-unwind" fn(*const sigset_t, *mut siginfo_t) -> c_int>,
    pub sigtimedwait: Option<
        unsafe extern "C-unwind" fn(*const sigset_t, *mut siginfo_t, *const timespec) -> c_int,
    >,
    pub waitpid: Option<unsafe extern "C-unwind" fn(pid_t, *mut c_int, c_int) -> pid_t>,
    pub wait4: Option<unsafe extern "C-unwind" fn(pid_t, *mut c_int, c_int, *mut rusage) -> pid_t>,
    pub wait: Option<unsafe extern "C-unwind" fn(*mut c_int) -> pid_t>,
    pub waitid: Option<unsafe extern "C-unwind" fn(idtype_t, id_t, *mut siginfo_t, c_int) -> c_int>,
    pub read: Option<ReadFn>,
    pub read_chk: Option<ReadChkFn>,
    pub pread_chk: Option<PreadChkFn>,
    pub recv_chk: Option<RecvChkFn>,
    pub recvfrom_chk: Option<RecvFromChkFn>,
    pub poll_chk: Option<PollChkFn>,
    pub ppoll_chk: Option<PpollChkFn>,
    pub write: Option<WriteFn>,
    pub pread: Option<PreadFn>,
    pub pwrite: Option<PwriteFn>,
    pub readv: Option<VectorFn>,
    pub writev: Option<VectorFn>,
    pub fsync: Option<FdFn>,
    pub fdatasync: Option<FdFn>,
    /// Variadic in C; called with the mode the caller's registers held
    /// (read only with O_CREAT or O_TMPFILE, as in the caller's own call).
    pub open: Option<unsafe extern "C-unwind" fn(*const c_char, c_int, ...) -> c_int>,
    pub openat: Option<unsafe extern "C-unwind" fn(c_int, *const c_char, c_int, ...) -> c_int>,
    pub recv: Option<unsafe extern "C-unwind" fn(c_int, *mut c_void, size_t, c_int) -> ssize_t>,
    pub send: Option<unsafe extern "C-unwind" fn(c_int, *const c_void, size_t, c_int) -> ssize_t>,
    pub recvfrom: Option<RecvFromFn>,
    pub sendto: Option<SendToFn>,
    pub recvmsg: Option<unsafe extern "C-unwind" fn(c_int, *mut msghdr, c_int) -> ssize_t>,
    pub sendmsg: Option<unsafe extern "C-unwind" fn(c_int, *const msghdr, c_int) -> ssize_t>,
    pub accept: Option<unsafe extern "C-unwind" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int>,
    pub accept4:
        Option<unsafe extern "C-unwind" fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int>,
    pub connect: Option<unsafe extern "C-unwind" fn(c_int, *const sockaddr, socklen_t) -> c_int>,
    /// Variadic in C; called with the six words after the number, which
    /// is what the caller's registers (and stack slot) held.
    pub syscall: Option<unsafe extern "C-unwind" fn(c_long, ...) -> c_long>,
    /// Variadic in C; called with the four words after the option.
    pub prctl: Option<unsafe extern "C" fn(c_int, ...) -> c_int>,
    /// glibc's `clone`: variadic in C, called with the three words after
    /// `arg` as the caller left them.
    pub clone:
        Option<unsafe extern "C" fn(CloneStart, *mut c_void, c_int, *mut c_void, ...) -> c_int>,
    /// `_Fork`: `fork` without the fork handlers (glibc 2.34).
    pub fork_without_handlers: Option<unsafe extern "C" fn() -> pid_t>,
    pub vfork: Option<unsafe extern "C" fn() -> pid_t>,
    pub sigaction:
        Option<unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int>,
    pub signal: Option<unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t>,
}

/// What glibc's `clone` runs in the child.
pub type CloneStart = extern "C" fn(*mut c_void) -> c_int;

const UNRESOLVED: u8 = 0;
const RESOLVING: u8 = 1;
const RESOLVED: u8 = 2;

struct Table {
    state: AtomicU8,
    /// Written once, before `state` becomes RESOLVED; read only after. Not
    /// an `Option`: every hook reads it, and RESOLVED already says it is
    /// there (one test fewer per hook).
    fns: UnsafeCell<MaybeUninit<RealFns>>,
}

// SAFETY: `fns` is written once by the thread that wins the UNRESOLVED ->
// RESOLVING transition and only read after RESOLVED is published with
// Release ordering (readers load it with Acquire).
unsafe impl Sync for Table {}

static TABLE: Table = Table {
    state: AtomicU8::new(UNRESOLVED),
    fns: UnsafeCell::new(MaybeUninit::uninit()),
};

/// The glibc version node of the current condition-variable ABI on x86_64.
const COND_VERSION: &CStr = c"GLIBC_2.3.2";

/// Looks up `name` in the objects after this one.
///
/// # Safety
/// `T` must be the function-pointer type of the named C symbol.
unsafe fn next<T>(name: &CStr) -> Option<T> {
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name is always safe to call.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    // SAFETY: the caller guarantees T is the right function-pointer type;
    // fn pointers and data pointers have the same size on our targets.
    (!p.is_null()).then(|| unsafe { core::mem::transmute_copy::<*mut c_void, T>(&p) })
}

/// Looks up the GLIBC_2.3.2 version of `name`, falling back to the default
/// version where that node does not exist (e.g. aarch64, whose first glibc
/// already had the new ABI).
///
/// # Safety
/// As for [`next`].
unsafe fn next_cond<T>(name: &CStr) -> Option<T> {
    // SAFETY: dlvsym with RTLD_NEXT and NUL-terminated strings is safe to call.
    let p = unsafe { libc::dlvsym(libc::RTLD_NEXT, name.as_ptr(), COND_VERSION.as_ptr()) };
    if p.is_null() {
        // SAFETY: forwarded contract.
        return unsafe { next(name) };
    }
    // SAFETY: as in `next`.
    Some(unsafe { core::mem::transmute_copy::<*mut c_void, T>(&p) })
}

fn resolve_all() -> RealFns {
    // SAFETY: each type below matches the C prototype of the named symbol.
    unsafe {
        RealFns {
            mutex_init: next(c"pthread_mutex_init"),
            mutex_destroy: next(c"pthread_mutex_destroy"),
            mutex_lock: next(c"pthread_mutex_lock").unwrap_or(missing_mutex_call as MutexFn),
            mutex_trylock: next(c"pthread_mutex_trylock").unwrap_or(missing_mutex_call as MutexFn),
            mutex_timedlock: next(c"pthread_mutex_timedlock"),
            mutex_clocklock: next(c"pthread_mutex_clocklock"),
            mutex_unlock: next(c"pthread_mutex_unlock").unwrap_or(missing_mutex_unlock as MutexFn),
            cond_init: next_cond(c"pthread_cond_init"),
            cond_destroy: next_cond(c"pthread_cond_destroy"),
            cond_wait: next_cond(c"pthread_cond_wait"),
            cond_timedwait: next_cond(c"pthread_cond_timedwait"),
            cond_clockwait: next(c"pthread_cond_clockwait"),
            cond_signal: next_cond(c"pthread_cond_signal"),
            cond_broadcast: next_cond(c"pthread_cond_broadcast"),
            thread_create: next(c"pthread_create"),
            thread_join: next(c"pthread_join"),
            thread_tryjoin_np: next(c"pthread_tryjoin_np"),
            thread_timedjoin_np: next(c"pthread_timedjoin_np"),
            thread_detach: next(c"pthread_detach"),
            thread_exit: next(c"pthread_exit"),
            thread_setname_np: next(c"pthread_setname_np"),
            exit: next(c"exit"),
            quick_exit: next(c"quick_exit"),
            exit_now: next(c"_exit"),
            exit_now_c99: next(c"_Exit"),
            execve: next(c"execve"),
            execv: next(c"execv"),
            execvp: next(c"execvp"),
            execvpe: next(c"execvpe"),
            fexecve: next(c"fexecve"),
            execveat: next(c"execveat"),
            rwlock_init: next(c"pthread_rwlock_init"),
            rwlock_destroy: next(c"pthread_rwlock_destroy"),
            rwlock_rdlock: next(c"pthread_rwlock_rdlock"),
            rwlock_wrlock: next(c"pthread_rwlock_wrlock"),
            rwlock_tryrdlock: next(c"pthread_rwlock_tryrdlock"),
            rwlock_trywrlock: next(c"pthread_rwlock_trywrlock"),
            rwlock_timedrdlock: next(c"pthread_rwlock_timedrdlock"),
            rwlock_timedwrlock: next(c"pthread_rwlock_timedwrlock"),
            rwlock_clockrdlock: next(c"pthread_rwlock_clockrdlock"),
            rwlock_clockwrlock: next(c"pthread_rwlock_clockwrlock"),
            rwlock_unlock: next(c"pthread_rwlock_unlock"),
            spin_init: next(c"pthread_spin_init"),
            spin_destroy: next(c"pthread_spin_destroy"),
            spin_lock: next(c"pthread_spin_lock"),
            spin_trylock: next(c"pthread_spin_trylock"),
            spin_unlock: next(c"pthread_spin_unlock"),
            sem_init: next(c"sem_init"),
            sem_destroy: next(c"sem_destroy"),
            sem_wait: next(c"sem_wait").unwrap_or(missing_sem_call as SemFn),
            sem_trywait: next(c"sem_trywait").unwrap_or(missing_sem_call as SemFn),
            sem_timedwait: next(c"sem_timedwait"),
            sem_clockwait: next(c"sem_clockwait"),
            sem_post: next(c"sem_post").unwrap_or(missing_sem_call as SemFn),
            sem_open: next(c"sem_open"),
            sem_close: next(c"sem_close"),
            barrier_init: next(c"pthread_barrier_init"),
            barrier_destroy: next(c"pthread_barrier_destroy"),
            barrier_wait: next(c"pthread_barrier_wait"),
            dlclose: next(c"dlclose"),
            nanosleep: next(c"nanosleep"),
            clock_nanosleep: next(c"clock_nanosleep"),
            usleep: next(c"usleep"),
            sleep: next(c"sleep"),
            poll: next(c"poll"),
            ppoll: next(c"ppoll"),
            select: next(c"select"),
            pselect: next(c"pselect"),
            epoll_wait: next(c"epoll_wait"),
            epoll_pwait: next(c"epoll_pwait"),
            sigwait: next(c"sigwait"),
            sigwaitinfo: next(c"sigwaitinfo"),
            sigtimedwait: next(c"sigtimedwait"),
            waitpid: next(c"waitpid"),
            wait4: next(c"wait4"),
            wait: next(c"wait"),
            waitid: next(c"waitid"),
            read: next(c"read"),
            read_chk: next(c"__read_chk"),
            pread_chk: next(c"__pread64_chk"),
            recv_chk: next(c"__recv_chk"),
            recvfrom_chk: next(c"__recvfrom_chk"),
            poll_chk: next(c"__poll_chk"),
            ppoll_chk: next(c"__ppoll_chk"),
            write: next(c"write"),
            pread: next(c"pread64"),
            pwrite: next(c"pwrite64"),
            readv: next(c"readv"),
            writev: next(c"writev"),
            fsync: next(c"fsync"),
            fdatasync: next(c"fdatasync"),
            open: next(c"open64"),
            openat: next(c"openat64"),
            recv: next(c"recv"),
            send: next(c"send"),
            recvfrom: next(c"recvfrom"),
            sendto: next(c"sendto"),
            recvmsg: next(c"recvmsg"),
            sendmsg: next(c"sendmsg"),
            accept: next(c"accept"),
            accept4: next(c"accept4"),
            connect: next(c"connect"),
            syscall: next(c"syscall"),
            prctl: next(c"prctl"),
            clone: next(c"clone"),
            fork_without_handlers: next(c"_Fork"),
            vfork: next(c"vfork"),
            sigaction: next(c"sigaction"),
            signal: next(c"signal"),
        }
    }
}

/// In a fork child: a resolution another thread had under way is gone with
/// that thread; start it again rather than wait for it forever.
pub fn reset_after_fork() {
    // Read first: even a failed compare-exchange writes, which in a fork
    // child copies the page.
    if TABLE.state.load(Ordering::Acquire) == RESOLVING {
        let _ = TABLE.state.compare_exchange(
            RESOLVING,
            UNRESOLVED,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }
}

/// The real functions, resolving all of them on the first call.
///
/// Returns `None` only while this same thread is inside the resolution (a
/// `dlsym` that re-enters a hook, e.g. through an interposed allocator); the
/// caller then has no real function to call and must act as documented there.
#[inline]
pub fn real() -> Option<&'static RealFns> {
    if TABLE.state.load(Ordering::Acquire) == RESOLVED {
        return Some(resolved());
    }
    resolve_slow()
}

/// The table, once `state` was seen RESOLVED (with Acquire).
#[inline(always)]
fn resolved() -> &'static RealFns {
    // SAFETY: RESOLVED is published (Release) only after `fns` was written,
    // and the caller saw it (Acquire); it is never written again.
    unsafe { (*TABLE.fns.get()).assume_init_ref() }
}

#[cold]
fn resolve_slow() -> Option<&'static RealFns> {
    use crate::recorder::tables::thread_state::ThreadState;
    loop {
        match TABLE.state.compare_exchange(
            UNRESOLVED,
            RESOLVING,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                ThreadState::set_resolving(true);
                let fns = resolve_all();
                // SAFETY: we won the transition, so no one else writes or reads `fns`.
                let fns = unsafe { (*TABLE.fns.get()).write(fns) };
                publish_hot(fns);
                TABLE.state.store(RESOLVED, Ordering::Release);
                ThreadState::set_resolving(false);
                return Some(resolved());
            }
            Err(RESOLVED) => return Some(resolved()),
            Err(_) => {
                if ThreadState::is_resolving() {
                    return None;
                }
                // Another thread is resolving; it takes microseconds.
                core::hint::spin_loop();
            }
        }
    }
}
