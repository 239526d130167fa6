//! Every exported hook. Each one: enters the guard, calls the real function,
//! records, and returns the real result unchanged. Hooks that need the line
//! that called them are exported as naked trampolines that pass the return
//! address as one extra argument to the handler (reading it costs one load;
//! unwinding would cost a microsecond).

use crate::guard::HookGuard;
use crate::intercept::{acquire, supported_clock, try_acquire};
use crate::real::{real, StartRoutine};
use crate::recorder;
use crate::{lifecycle, spawn};
use core::ffi::{c_char, c_int, c_void, CStr};
use libc::{clockid_t, pthread_attr_t, pthread_cond_t, pthread_condattr_t, pthread_mutex_t};
use libc::{pthread_mutexattr_t, pthread_t, timespec};
use locksuit_format::{ObjectKind, MODE_EXCLUSIVE};

/// Exports `$name` as a trampoline that tail-calls `$handler` with the
/// caller's return address appended in the next argument register.
macro_rules! export_with_caller {
    ($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $handler:ident, x86_64: $x86:literal, aarch64: $arm:literal) => {
        #[unsafe(no_mangle)]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(concat!("mov ", $x86, ", qword ptr [rsp]"), "jmp {h}", h = sym $handler);
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(concat!("mov ", $arm, ", x30"), "b {h}", h = sym $handler);
        }
    };
}

/// The real function, or return `$fallback` if it cannot be had. That happens
/// only while this very thread is resolving symbols (a `dlsym` that re-enters
/// through an interposed allocator, before the program can have started
/// threads), or with a C library that lacks the function.
macro_rules! real_or {
    ($field:ident, $fallback:expr) => {
        match real().and_then(|fns| fns.$field) {
            Some(f) => f,
            None => return $fallback,
        }
    };
}

/// Ends the process with `code` when the C library's exit function is
/// unavailable (never with glibc).
fn exit_group(code: c_int) -> ! {
    // SAFETY: exit_group never returns; abort is unreachable in practice.
    unsafe {
        libc::syscall(libc::SYS_exit_group, code);
        libc::abort()
    }
}

// ---------------------------------------------------------------- mutexes

#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_init(
    m: *mut pthread_mutex_t,
    attr: *const pthread_mutexattr_t,
) -> c_int {
    let init = real_or!(mutex_init, 0);
    let guard = HookGuard::enter();
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { init(m, attr) };
    if let (Some(g), 0) = (&guard, rc) {
        recorder::object_initialized(g, m as u64, ObjectKind::Mutex);
    }
    rc
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_destroy(m: *mut pthread_mutex_t) -> c_int {
    let destroy = real_or!(mutex_destroy, 0);
    let guard = HookGuard::enter();
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { destroy(m) };
    if let (Some(g), 0) = (&guard, rc) {
        recorder::object_destroyed(g, m as u64);
    }
    rc
}

export_with_caller!(pthread_mutex_lock(m: *mut pthread_mutex_t) -> c_int => mutex_lock, x86_64: "rsi", aarch64: "x1");
unsafe extern "C-unwind" fn mutex_lock(m: *mut pthread_mutex_t, caller: usize) -> c_int {
    let lock = real_or!(mutex_lock, 0);
    let trylock = real_or!(mutex_trylock, 0);
    // SAFETY (every call below): forwarding the caller's argument unchanged.
    let Some(guard) = HookGuard::enter() else {
        return unsafe { lock(m) };
    };
    let Some(p) = recorder::prepare(
        &guard,
        m as u64,
        ObjectKind::Mutex,
        MODE_EXCLUSIVE,
        caller as u64,
    ) else {
        return unsafe { lock(m) };
    };
    acquire(
        &guard,
        &p,
        true,
        || unsafe { trylock(m) },
        || unsafe { lock(m) },
    )
}

export_with_caller!(pthread_mutex_trylock(m: *mut pthread_mutex_t) -> c_int => mutex_trylock, x86_64: "rsi", aarch64: "x1");
unsafe extern "C-unwind" fn mutex_trylock(m: *mut pthread_mutex_t, caller: usize) -> c_int {
    let trylock = real_or!(mutex_trylock, 0);
    // SAFETY (every call below): forwarding the caller's argument unchanged.
    let Some(guard) = HookGuard::enter() else {
        return unsafe { trylock(m) };
    };
    let Some(p) = recorder::prepare(
        &guard,
        m as u64,
        ObjectKind::Mutex,
        MODE_EXCLUSIVE,
        caller as u64,
    ) else {
        return unsafe { trylock(m) };
    };
    try_acquire(&guard, &p, true, || unsafe { trylock(m) })
}

export_with_caller!(pthread_mutex_timedlock(m: *mut pthread_mutex_t, t: *const timespec) -> c_int => mutex_timedlock, x86_64: "rdx", aarch64: "x2");
unsafe extern "C-unwind" fn mutex_timedlock(
    m: *mut pthread_mutex_t,
    t: *const timespec,
    caller: usize,
) -> c_int {
    let timedlock = real_or!(mutex_timedlock, libc::EINVAL);
    let trylock = real_or!(mutex_trylock, libc::EINVAL);
    // SAFETY (every call below): forwarding the caller's arguments unchanged.
    let Some(guard) = HookGuard::enter() else {
        return unsafe { timedlock(m, t) };
    };
    let Some(p) = recorder::prepare(
        &guard,
        m as u64,
        ObjectKind::Mutex,
        MODE_EXCLUSIVE,
        caller as u64,
    ) else {
        return unsafe { timedlock(m, t) };
    };
    acquire(
        &guard,
        &p,
        true,
        || unsafe { trylock(m) },
        || unsafe { timedlock(m, t) },
    )
}

export_with_caller!(pthread_mutex_clocklock(m: *mut pthread_mutex_t, c: clockid_t, t: *const timespec) -> c_int => mutex_clocklock, x86_64: "rcx", aarch64: "x3");
unsafe extern "C-unwind" fn mutex_clocklock(
    m: *mut pthread_mutex_t,
    c: clockid_t,
    t: *const timespec,
    caller: usize,
) -> c_int {
    let clocklock = real_or!(mutex_clocklock, libc::EINVAL);
    let trylock = real_or!(mutex_trylock, libc::EINVAL);
    // SAFETY (every call below): forwarding the caller's arguments unchanged.
    let Some(guard) = HookGuard::enter().filter(|_| supported_clock(c)) else {
        return unsafe { clocklock(m, c, t) };
    };
    let Some(p) = recorder::prepare(
        &guard,
        m as u64,
        ObjectKind::Mutex,
        MODE_EXCLUSIVE,
        caller as u64,
    ) else {
        return unsafe { clocklock(m, c, t) };
    };
    acquire(
        &guard,
        &p,
        true,
        || unsafe { trylock(m) },
        || unsafe { clocklock(m, c, t) },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_unlock(m: *mut pthread_mutex_t) -> c_int {
    let unlock = real_or!(mutex_unlock, 0);
    let guard = HookGuard::enter();
    // Recorded first, while the lock is still ours: once released, another
    // thread may take it and overwrite its holder.
    if let Some(g) = &guard {
        recorder::released(g, m as u64, 0);
    }
    // SAFETY: forwarding the caller's argument.
    unsafe { unlock(m) }
}

// ---------------------------------------------------- condition variables

#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_init(
    c: *mut pthread_cond_t,
    attr: *const pthread_condattr_t,
) -> c_int {
    let init = real_or!(cond_init, 0);
    let guard = HookGuard::enter();
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { init(c, attr) };
    if let (Some(g), 0) = (&guard, rc) {
        recorder::object_initialized(g, c as u64, ObjectKind::Cond);
    }
    rc
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_destroy(c: *mut pthread_cond_t) -> c_int {
    let destroy = real_or!(cond_destroy, 0);
    let guard = HookGuard::enter();
    // SAFETY: forwarding the caller's argument.
    let rc = unsafe { destroy(c) };
    if let (Some(g), 0) = (&guard, rc) {
        recorder::object_destroyed(g, c as u64);
    }
    rc
}

/// Shared body of the three waits: the mutex is handed over for the wait and
/// re-engaged when it returns.
fn cond_wait_recorded(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    caller: usize,
    wait: impl FnOnce() -> c_int,
) -> c_int {
    let Some(guard) = HookGuard::enter() else {
        return wait();
    };
    let Some(w) = recorder::cond_prepare(&guard, c as u64, m as u64, caller as u64) else {
        return wait();
    };
    let started = recorder::cond_wait_begin(&guard, &w);
    let rc = wait();
    recorder::cond_wait_end(&guard, &w, started, rc);
    rc
}

export_with_caller!(pthread_cond_wait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t) -> c_int => cond_wait, x86_64: "rdx", aarch64: "x2");
unsafe extern "C-unwind" fn cond_wait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    caller: usize,
) -> c_int {
    let wait = real_or!(cond_wait, libc::EINVAL);
    // SAFETY: forwarding the caller's arguments.
    cond_wait_recorded(c, m, caller, || unsafe { wait(c, m) })
}

export_with_caller!(pthread_cond_timedwait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, t: *const timespec) -> c_int => cond_timedwait, x86_64: "rcx", aarch64: "x3");
unsafe extern "C-unwind" fn cond_timedwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    t: *const timespec,
    caller: usize,
) -> c_int {
    let wait = real_or!(cond_timedwait, libc::EINVAL);
    // SAFETY: forwarding the caller's arguments.
    cond_wait_recorded(c, m, caller, || unsafe { wait(c, m, t) })
}

export_with_caller!(pthread_cond_clockwait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, k: clockid_t, t: *const timespec) -> c_int => cond_clockwait, x86_64: "r8", aarch64: "x4");
unsafe extern "C-unwind" fn cond_clockwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    k: clockid_t,
    t: *const timespec,
    caller: usize,
) -> c_int {
    let wait = real_or!(cond_clockwait, libc::EINVAL);
    if !supported_clock(k) {
        // SAFETY: forwarding; the real call rejects the clock without waiting.
        return unsafe { wait(c, m, k, t) };
    }
    // SAFETY: forwarding the caller's arguments.
    cond_wait_recorded(c, m, caller, || unsafe { wait(c, m, k, t) })
}

export_with_caller!(pthread_cond_signal(c: *mut pthread_cond_t) -> c_int => cond_signal, x86_64: "rsi", aarch64: "x1");
unsafe extern "C-unwind" fn cond_signal(c: *mut pthread_cond_t, caller: usize) -> c_int {
    let signal = real_or!(cond_signal, 0);
    // Recorded before the call, so the waiter count is the one the signal sees.
    if let Some(guard) = HookGuard::enter() {
        recorder::cond_notified(&guard, c as u64, caller as u64, false);
    }
    // SAFETY: forwarding the caller's argument.
    unsafe { signal(c) }
}

export_with_caller!(pthread_cond_broadcast(c: *mut pthread_cond_t) -> c_int => cond_broadcast, x86_64: "rsi", aarch64: "x1");
unsafe extern "C-unwind" fn cond_broadcast(c: *mut pthread_cond_t, caller: usize) -> c_int {
    let broadcast = real_or!(cond_broadcast, 0);
    if let Some(guard) = HookGuard::enter() {
        recorder::cond_notified(&guard, c as u64, caller as u64, true);
    }
    // SAFETY: forwarding the caller's argument.
    unsafe { broadcast(c) }
}

// ---------------------------------------------------------------- threads

#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_create(
    thread: *mut pthread_t,
    attr: *const pthread_attr_t,
    start: StartRoutine,
    arg: *mut c_void,
) -> c_int {
    let create = real_or!(thread_create, libc::EAGAIN);
    let guard = HookGuard::enter();
    let handoff = guard
        .as_ref()
        .and_then(|g| spawn::StartHandoff::claim(g, start, arg));
    match handoff {
        // SAFETY: forwarding with our wrapper, which calls `start(arg)`.
        Some(h) => {
            let rc = unsafe { create(thread, attr, spawn::START_WRAPPER, h.as_arg()) };
            if rc != 0 {
                h.release();
            }
            rc
        }
        // SAFETY: forwarding unchanged.
        None => unsafe { create(thread, attr, start, arg) },
    }
}

fn join_recorded(join: impl FnOnce() -> c_int) -> c_int {
    let guard = HookGuard::enter();
    let started = guard.as_ref().map(|_| recorder::now_ns());
    let rc = join();
    if let (Some(g), Some(started), 0) = (&guard, started, rc) {
        recorder::join_finished(g, recorder::now_ns().saturating_sub(started));
    }
    rc
}

#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn pthread_join(t: pthread_t, ret: *mut *mut c_void) -> c_int {
    let join = real_or!(thread_join, libc::EINVAL);
    // SAFETY: forwarding the caller's arguments.
    join_recorded(|| unsafe { join(t, ret) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_tryjoin_np(t: pthread_t, ret: *mut *mut c_void) -> c_int {
    let join = real_or!(thread_tryjoin_np, libc::EINVAL);
    // SAFETY: forwarding the caller's arguments.
    join_recorded(|| unsafe { join(t, ret) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn pthread_timedjoin_np(
    t: pthread_t,
    ret: *mut *mut c_void,
    abstime: *const timespec,
) -> c_int {
    let join = real_or!(thread_timedjoin_np, libc::EINVAL);
    // SAFETY: forwarding the caller's arguments.
    join_recorded(|| unsafe { join(t, ret, abstime) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_detach(t: pthread_t) -> c_int {
    let detach = real_or!(thread_detach, libc::EINVAL);
    // Nothing to record: a detached thread still ends through the thread-exit
    // destructor like any other.
    // SAFETY: forwarding the caller's argument.
    unsafe { detach(t) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn pthread_exit(value: *mut c_void) -> ! {
    let exit = real().and_then(|f| f.thread_exit);
    // The thread's record is closed by the thread-exit destructor that
    // pthread_exit runs; nothing else to do here.
    match exit {
        // SAFETY: forwarding the caller's argument.
        Some(exit) => unsafe { exit(value) },
        // SAFETY: no pthread_exit in the C library is impossible with glibc;
        // aborting is the only safe answer.
        None => unsafe { libc::abort() },
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_setname_np(t: pthread_t, name: *const c_char) -> c_int {
    let setname = real_or!(thread_setname_np, libc::ENOSYS);
    let guard = HookGuard::enter();
    // SAFETY: forwarding the caller's arguments.
    let rc = unsafe { setname(t, name) };
    if let (Some(g), 0, false) = (&guard, rc, name.is_null()) {
        // SAFETY: the real call accepted `name` as a NUL-terminated string.
        recorder::thread_named(g, t, unsafe { CStr::from_ptr(name) }.to_bytes());
    }
    rc
}

// ------------------------------------------------------------ process exit

#[unsafe(no_mangle)]
pub unsafe extern "C" fn exit(code: c_int) -> ! {
    lifecycle::process_exiting(code);
    match real().and_then(|f| f.exit) {
        // SAFETY: forwarding the caller's argument.
        Some(exit) => unsafe { exit(code) },
        None => exit_group(code),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn _exit(code: c_int) -> ! {
    lifecycle::process_exiting(code);
    match real().and_then(|f| f.exit_now) {
        // SAFETY: forwarding the caller's argument.
        Some(exit) => unsafe { exit(code) },
        None => exit_group(code),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn _Exit(code: c_int) -> ! {
    lifecycle::process_exiting(code);
    match real().and_then(|f| f.exit_now_c99) {
        // SAFETY: forwarding the caller's argument.
        Some(exit) => unsafe { exit(code) },
        None => exit_group(code),
    }
}

// ------------------------------------------------------------------- exec

/// Marks the trace as ended by exec for the duration of the call; a failed
/// exec clears the mark again. The real errno is kept.
fn exec_recorded(exec: impl FnOnce() -> c_int) -> c_int {
    let guard = HookGuard::enter();
    let marked = guard.is_some() && recorder::exec_starting();
    let rc = exec();
    if marked {
        recorder::exec_failed();
    }
    rc
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let exec = real_or!(execve, -1);
    // SAFETY: forwarding the caller's arguments.
    exec_recorded(|| unsafe { exec(path, argv, envp) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    let exec = real_or!(execv, -1);
    // SAFETY: forwarding the caller's arguments.
    exec_recorded(|| unsafe { exec(path, argv) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    let exec = real_or!(execvp, -1);
    // SAFETY: forwarding the caller's arguments.
    exec_recorded(|| unsafe { exec(file, argv) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let exec = real_or!(execvpe, -1);
    // SAFETY: forwarding the caller's arguments.
    exec_recorded(|| unsafe { exec(file, argv, envp) })
}
