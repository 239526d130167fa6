//! Every exported hook. Each one: enters the guard, calls the real function,
//! records, and returns the real result unchanged. Hooks that need the line
//! that called them are exported as naked trampolines that pass the return
//! address as one extra argument to the handler (reading it costs one load;
//! unwinding would cost a microsecond). The lock hooks share a few shapes,
//! each written once as a macro below. All exported symbols live in this one
//! file on purpose, so what the shim interposes is read in one place; that
//! is why it is longer than our other files.

use crate::guard::HookGuard;
use crate::intercept::{
    acquire, deadline_ns, sem_acquire, sem_try, supported_clock, try_acquire, valid_deadline,
    Attempt,
};
use crate::real::{real, syscall_result, StartRoutine};
use crate::recorder::{self, Caller, Hold};
use crate::{lifecycle, spawn};
use core::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void, CStr};
use libc::{clockid_t, pthread_attr_t, pthread_barrier_t, pthread_barrierattr_t, pthread_cond_t};
use libc::{pthread_condattr_t, pthread_mutex_t, pthread_mutexattr_t, pthread_rwlock_t};
use libc::{pthread_rwlockattr_t, pthread_spinlock_t, pthread_t, sem_t, timespec};
use locksuit_format::{ObjectKind, MODE_EXCLUSIVE, MODE_POST, MODE_SHARED};

/// Exports `$name` as a trampoline that tail-calls `$handler` with two more
/// arguments in the next two registers: the caller's return address and the
/// stack pointer at entry (from which the shim reads the caller's own
/// return address, so a lock taken through a wrapper such as an out-of-line
/// `std::mutex::lock` is told apart by the line that called the wrapper).
macro_rules! export_with_caller {
    ($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $handler:ident,
     x86_64: ($x86:literal, $x86_sp:literal), aarch64: ($arm:literal, $arm_sp:literal)) => {
        #[unsafe(no_mangle)]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(
                concat!("mov ", $x86, ", qword ptr [rsp]"),
                concat!("mov ", $x86_sp, ", rsp"),
                "jmp {h}",
                h = sym $handler
            );
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(
                concat!("mov ", $arm, ", x30"),
                concat!("mov ", $arm_sp, ", sp"),
                "b {h}",
                h = sym $handler
            );
        }
    };
}

/// The real function, or return `$fallback` if it cannot be had. That happens
/// only while this very thread is resolving symbols (a `dlsym` that re-enters
/// through an interposed allocator, before the program can have started
/// threads), or with a C library that lacks the function.
macro_rules! real_or {
    // The hot entries: no test (see `real::hot_entries!`).
    (mutex_trylock, $fallback:expr) => {
        crate::real::MUTEX_TRYLOCK.get()
    };
    (mutex_unlock, $fallback:expr) => {
        crate::real::MUTEX_UNLOCK.get()
    };
    (sem_trywait, $fallback:expr) => {
        crate::real::SEM_TRYWAIT.get()
    };
    (sem_post, $fallback:expr) => {
        crate::real::SEM_POST.get()
    };
    (read, $fallback:expr) => {
        crate::real::READ.get()
    };
    (write, $fallback:expr) => {
        crate::real::WRITE.get()
    };
    (pread, $fallback:expr) => {
        crate::real::PREAD.get()
    };
    (pwrite, $fallback:expr) => {
        crate::real::PWRITE.get()
    };
    ($field:ident, $fallback:expr) => {
        match real().and_then(|fns| crate::real::Entry::function(fns.$field)) {
            Some(f) => f,
            None => return $fallback,
        }
    };
}

/// Two real functions from one look at the table (the lock hooks need the
/// blocking call and its non-blocking variant).
macro_rules! real_pair_or {
    (mutex_lock, mutex_trylock, $fallback:expr) => {
        (
            crate::real::MUTEX_LOCK.get(),
            crate::real::MUTEX_TRYLOCK.get(),
        )
    };
    (sem_wait, sem_trywait, $fallback:expr) => {
        (crate::real::SEM_WAIT.get(), crate::real::SEM_TRYWAIT.get())
    };
    ($first:ident, $second:ident, $fallback:expr) => {
        match real().map(|fns| {
            (
                crate::real::Entry::function(fns.$first),
                crate::real::Entry::function(fns.$second),
            )
        }) {
            Some((Some(first), Some(second))) => (first, second),
            _ => return $fallback,
        }
    };
}

/// `*_init`: a new identity for the object once the real call succeeded,
/// made at the calling line (its family). `$shared`: whether the caller asked
/// for a process-shared object, where the arguments say (`None`: read it
/// from the object).
macro_rules! init_hook {
    ($name:ident($obj:ident: $oty:ty $(, $arg:ident: $aty:ty)*) => $handler:ident, x86_64: $x86:tt, aarch64: $arm:tt,
     real: $real:ident, kind: $kind:expr, shared: $shared:expr $(, then: $then:expr)?) => {
        export_with_caller!($name($obj: $oty $(, $arg: $aty)*) -> c_int => $handler, x86_64: $x86, aarch64: $arm);
        unsafe extern "C-unwind" fn $handler($obj: $oty $(, $arg: $aty)*, caller: usize, sp: usize) -> c_int {
            let init = real_or!($real, libc::EINVAL);
            let guard = HookGuard::enter();
            // Calls the real function may make back into us (an interposed
            // allocator's locks) are its own business, not dropped events.
            // SAFETY: forwarding the caller's arguments unchanged.
            let rc = crate::guard::calling_out(|| unsafe { init($obj $(, $arg)*) });
            if let (Some(g), 0) = (&guard, rc) {
                let shared: Option<bool> = $shared;
                recorder::object_initialized(g, $obj as u64, $kind, Caller::new(caller, sp), shared);
                $( $then($obj as u64); )?
            }
            rc
        }
    };
}

/// Whether a mutex attribute object asks for a process-shared mutex (glibc
/// marks every robust mutex shared inside the object, so the attribute is
/// the only place that tells).
fn mutexattr_shared(attr: *const pthread_mutexattr_t) -> Option<bool> {
    if attr.is_null() {
        return Some(false);
    }
    let mut pshared = 0;
    // SAFETY: the caller passed `attr` to pthread_mutex_init, which read it
    // successfully; getpshared only reads it.
    let rc = unsafe { libc::pthread_mutexattr_getpshared(attr, &mut pshared) };
    (rc == 0).then_some(pshared == libc::PTHREAD_PROCESS_SHARED)
}

/// `*_destroy`: the identity ends once the real call succeeded. A lock
/// (`kind`) is checked first: destroying one that is held, or a condition
/// threads wait on, is misuse.
macro_rules! destroy_hook {
    ($name:ident($obj:ident: $oty:ty) => $real:ident $(, kind: $kind:expr)?) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C-unwind" fn $name($obj: $oty) -> c_int {
            let destroy = real_or!($real, libc::EINVAL);
            let guard = HookGuard::enter();
            $(if let Some(g) = &guard {
                recorder::destroying(g, $obj as u64, $kind, recorder::MisuseAt::Hook($name as *const () as usize as u64));
            })?
            // SAFETY: forwarding the caller's argument unchanged.
            let rc = crate::guard::calling_out(|| unsafe { destroy($obj) });
            if let (Some(g), 0) = (&guard, rc) {
                recorder::object_destroyed(g, $obj as u64);
            }
            rc
        }
    };
}

/// A blocking acquisition: try the real `$try` first, then block in `$real`.
/// `$valid` guards calls whose arguments glibc checks before trying.
macro_rules! lock_hook {
    ($name:ident($obj:ident: $oty:ty $(, $arg:ident: $aty:ty)*) => $handler:ident, x86_64: $x86:tt, aarch64: $arm:tt,
     real: $real:ident, try: $try:ident, kind: $kind:expr, mode: $mode:expr, hold: $hold:expr, valid: $valid:expr,
     attempt: $attempt:expr $(, deadline: $deadline:expr)?) => {
        export_with_caller!($name($obj: $oty $(, $arg: $aty)*) -> c_int => $handler, x86_64: $x86, aarch64: $arm);
        lock_handler!($handler($obj: $oty $(, $arg: $aty)*), real: $real, try: $try, kind: $kind, mode: $mode, hold: $hold,
            valid: $valid, attempt: $attempt $(, deadline: $deadline)?);
    };
}

/// The handler a [`lock_hook!`] trampoline jumps to.
macro_rules! lock_handler {
    ($handler:ident($obj:ident: $oty:ty $(, $arg:ident: $aty:ty)*),
     real: $real:ident, try: $try:ident, kind: $kind:expr, mode: $mode:expr, hold: $hold:expr, valid: $valid:expr,
     attempt: $attempt:expr $(, deadline: $deadline:expr)?) => {
        // Never inlined: a quick path that falls back on it (the full
        // mode's mutex lock) would otherwise take on its frame.
        #[inline(never)]
        unsafe extern "C-unwind" fn $handler($obj: $oty $(, $arg: $aty)*, caller: usize, sp: usize) -> c_int {
            let (block, try_once) = real_pair_or!($real, $try, libc::EINVAL);
            // SAFETY (every call below): forwarding the caller's arguments unchanged.
            let Some(guard) = HookGuard::enter().filter(|_| $valid) else {
                return unsafe { block($obj $(, $arg)*) };
            };
            // Borrowed where `prepare` left it: moving it out costs a copy.
            let prepared = recorder::prepare(&guard, $obj as u64, $kind, $mode, Caller::new(caller, sp));
            let Some(p) = &prepared else {
                // SAFETY: forwarding the caller's arguments unchanged.
                return unsafe { block($obj $(, $arg)*) };
            };
            // Timed calls: their deadline goes into the wait's events.
            let deadline: u64 = 0 $(+ $deadline)?;
            // SAFETY: forwarding the caller's arguments unchanged.
            acquire(&guard, p, ($hold, deadline, $attempt), || unsafe { try_once($obj) }, || unsafe { block($obj $(, $arg)*) })
        }
    };
}

/// A non-blocking acquisition.
macro_rules! trylock_hook {
    ($name:ident($obj:ident: $oty:ty) => $handler:ident, x86_64: $x86:tt, aarch64: $arm:tt,
     real: $real:ident, kind: $kind:expr, mode: $mode:expr, hold: $hold:expr) => {
        export_with_caller!($name($obj: $oty) -> c_int => $handler, x86_64: $x86, aarch64: $arm);
        trylock_handler!($handler($obj: $oty), real: $real, kind: $kind, mode: $mode, hold: $hold);
    };
}

/// The handler a [`trylock_hook!`] trampoline jumps to.
macro_rules! trylock_handler {
    ($handler:ident($obj:ident: $oty:ty), real: $real:ident, kind: $kind:expr, mode: $mode:expr, hold: $hold:expr) => {
        // Never inlined, as `lock_handler!`'s.
        #[inline(never)]
        unsafe extern "C-unwind" fn $handler($obj: $oty, caller: usize, sp: usize) -> c_int {
            let try_once = real_or!($real, libc::EINVAL);
            // SAFETY (every call below): forwarding the caller's argument unchanged.
            let Some(guard) = HookGuard::enter() else {
                // SAFETY: forwarding the caller's argument unchanged.
                return unsafe { try_once($obj) };
            };
            let prepared =
                recorder::prepare(&guard, $obj as u64, $kind, $mode, Caller::new(caller, sp));
            let Some(p) = &prepared else {
                // SAFETY: forwarding the caller's argument unchanged.
                return unsafe { try_once($obj) };
            };
            // SAFETY: forwarding the caller's argument unchanged.
            try_acquire(&guard, p, $hold, || unsafe { try_once($obj) })
        }
    };
}

/// A release. Recorded first, while the lock is still ours: once released,
/// another thread may take it and overwrite its holder. The common release
/// is recorded with no call out of line, so the hook needs no frame for it.
macro_rules! unlock_hook {
    ($name:ident($obj:ident: $oty:ty) => $real:ident, kind: $kind:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C-unwind" fn $name($obj: $oty) -> c_int {
            unlock_body!($obj, $real, $kind, $name)
        }
    };
}

/// An [`unlock_hook!`]'s body as a handler an exported trampoline jumps to
/// (the handler's frame is the one whose caller a misuse names). With
/// `quick:`, the guard's entry and the common release it tries first (a
/// handler chosen only while recording and untimed asks neither).
macro_rules! unlock_handler {
    ($(#[$doc:meta])* $handler:ident($obj:ident: $oty:ty) => $real:ident, kind: $kind:expr
        $(, quick: $enter:path, $release:path)?) => {
        $(#[$doc])*
        unsafe extern "C-unwind" fn $handler($obj: $oty) -> c_int {
            unlock_body!($obj, $real, $kind, $handler $(, quick: $enter, $release)?)
        }
    };
}

macro_rules! unlock_body {
    ($obj:ident, $real:ident, $kind:expr, $hook:ident) => {
        unlock_body!(
            $obj,
            $real,
            $kind,
            $hook,
            quick: HookGuard::enter_quickly,
            recorder::released_quickly
        )
    };
    ($obj:ident, $real:ident, $kind:expr, $hook:ident, quick: $enter:path, $release:path) => {{
        let unlock = real_or!($real, 0);
        let quick = $enter().is_some_and(|g| $release(&g, $obj as u64));
        if !quick {
            released($obj as u64, ($kind, $hook as *const () as usize as u64));
        }
        // SAFETY: forwarding the caller's argument unchanged.
        unsafe { unlock($obj) }
    }};
}

/// Any release but the common one, recorded in full; an unlock of a lock
/// this thread is not known to hold is checked for misuse (`hook`: the
/// unlock hook's code, to find the line that called it).
#[cold]
#[inline(never)]
fn released(addr: u64, (kind, hook): (ObjectKind, u64)) {
    if let Some(g) = &HookGuard::enter() {
        if !recorder::released(g, addr, 0) {
            recorder::unlock_not_held(g, addr, kind, recorder::MisuseAt::Hook(hook));
        }
    }
}

// ---------------------------------------------------------------- mutexes

/// How the mutex at `m` may be acquired (read from the mutex itself).
#[inline(always)]
fn mutex_attempt(m: *mut pthread_mutex_t) -> Attempt {
    // SAFETY: the program passed `m` to a mutex lock call; reading its
    // kind and lock word is what that call does first too.
    unsafe { crate::glibc::mutex_attempt(m as u64) }
}

init_hook!(pthread_mutex_init(m: *mut pthread_mutex_t, attr: *const pthread_mutexattr_t) => mutex_init_handler, x86_64: ("rdx", "rcx"), aarch64: ("x2", "x3"),
    real: mutex_init, kind: ObjectKind::Mutex, shared: mutexattr_shared(attr));
destroy_hook!(pthread_mutex_destroy(m: *mut pthread_mutex_t) => mutex_destroy, kind: ObjectKind::Mutex);
/// What a mutex engagement holds: in lean mode no held entry (see
/// `recorder/api/lean.rs`). `pthread_mutex_lock` and `_unlock` have a
/// handler for each mode instead (below), so that neither tests this.
#[inline(always)]
fn mutex_hold() -> Hold {
    if crate::config::lean() {
        Hold::Lean
    } else {
        Hold::Exclusive
    }
}

lock_hook!(pthread_mutex_timedlock(m: *mut pthread_mutex_t, t: *const timespec) => mutex_timedlock, x86_64: ("rdx", "rcx"), aarch64: ("x2", "x3"),
    real: mutex_timedlock, try: mutex_trylock, kind: ObjectKind::Mutex, mode: MODE_EXCLUSIVE, hold: mutex_hold(),
    valid: valid_deadline(t), attempt: mutex_attempt(m), deadline: deadline_ns(t));
lock_hook!(pthread_mutex_clocklock(m: *mut pthread_mutex_t, c: clockid_t, t: *const timespec) => mutex_clocklock, x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"),
    real: mutex_clocklock, try: mutex_trylock, kind: ObjectKind::Mutex, mode: MODE_EXCLUSIVE, hold: mutex_hold(),
    valid: supported_clock(c) && valid_deadline(t), attempt: mutex_attempt(m), deadline: deadline_ns(t));

// ---------------------------------------------------------------- rwlocks

init_hook!(pthread_rwlock_init(l: *mut pthread_rwlock_t, attr: *const pthread_rwlockattr_t) => rwlock_init_handler, x86_64: ("rdx", "rcx"), aarch64: ("x2", "x3"),
    real: rwlock_init, kind: ObjectKind::Rwlock, shared: None);
destroy_hook!(pthread_rwlock_destroy(l: *mut pthread_rwlock_t) => rwlock_destroy, kind: ObjectKind::Rwlock);
lock_hook!(pthread_rwlock_rdlock(l: *mut pthread_rwlock_t) => rwlock_rdlock, x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"),
    real: rwlock_rdlock, try: rwlock_tryrdlock, kind: ObjectKind::Rwlock, mode: MODE_SHARED, hold: Hold::Shared, valid: true, attempt: Attempt::TryFirst);
lock_hook!(pthread_rwlock_wrlock(l: *mut pthread_rwlock_t) => rwlock_wrlock, x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"),
    real: rwlock_wrlock, try: rwlock_trywrlock, kind: ObjectKind::Rwlock, mode: MODE_EXCLUSIVE, hold: Hold::Exclusive, valid: true, attempt: Attempt::TryFirst);
trylock_hook!(pthread_rwlock_tryrdlock(l: *mut pthread_rwlock_t) => rwlock_tryrdlock, x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"),
    real: rwlock_tryrdlock, kind: ObjectKind::Rwlock, mode: MODE_SHARED, hold: Hold::Shared);
trylock_hook!(pthread_rwlock_trywrlock(l: *mut pthread_rwlock_t) => rwlock_trywrlock, x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"),
    real: rwlock_trywrlock, kind: ObjectKind::Rwlock, mode: MODE_EXCLUSIVE, hold: Hold::Exclusive);
lock_hook!(pthread_rwlock_timedrdlock(l: *mut pthread_rwlock_t, t: *const timespec) => rwlock_timedrdlock, x86_64: ("rdx", "rcx"), aarch64: ("x2", "x3"),
    real: rwlock_timedrdlock, try: rwlock_tryrdlock, kind: ObjectKind::Rwlock, mode: MODE_SHARED, hold: Hold::Shared,
    valid: valid_deadline(t), attempt: Attempt::TryFirst, deadline: deadline_ns(t));
lock_hook!(pthread_rwlock_timedwrlock(l: *mut pthread_rwlock_t, t: *const timespec) => rwlock_timedwrlock, x86_64: ("rdx", "rcx"), aarch64: ("x2", "x3"),
    real: rwlock_timedwrlock, try: rwlock_trywrlock, kind: ObjectKind::Rwlock, mode: MODE_EXCLUSIVE, hold: Hold::Exclusive,
    valid: valid_deadline(t), attempt: Attempt::TryFirst, deadline: deadline_ns(t));
lock_hook!(pthread_rwlock_clockrdlock(l: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec) => rwlock_clockrdlock, x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"),
    real: rwlock_clockrdlock, try: rwlock_tryrdlock, kind: ObjectKind::Rwlock, mode: MODE_SHARED, hold: Hold::Shared,
    valid: supported_clock(c) && valid_deadline(t), attempt: Attempt::TryFirst, deadline: deadline_ns(t));
lock_hook!(pthread_rwlock_clockwrlock(l: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec) => rwlock_clockwrlock, x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"),
    real: rwlock_clockwrlock, try: rwlock_trywrlock, kind: ObjectKind::Rwlock, mode: MODE_EXCLUSIVE, hold: Hold::Exclusive,
    valid: supported_clock(c) && valid_deadline(t), attempt: Attempt::TryFirst, deadline: deadline_ns(t));
unlock_hook!(pthread_rwlock_unlock(l: *mut pthread_rwlock_t) => rwlock_unlock, kind: ObjectKind::Rwlock);

// -------------------------------------------------------------- spinlocks

init_hook!(pthread_spin_init(s: *mut pthread_spinlock_t, pshared: c_int) => spin_init_handler, x86_64: ("rdx", "rcx"), aarch64: ("x2", "x3"),
    real: spin_init, kind: ObjectKind::Spin, shared: Some(pshared == libc::PTHREAD_PROCESS_SHARED));
destroy_hook!(pthread_spin_destroy(s: *mut pthread_spinlock_t) => spin_destroy, kind: ObjectKind::Spin);
lock_hook!(pthread_spin_lock(s: *mut pthread_spinlock_t) => spin_lock, x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"),
    real: spin_lock, try: spin_trylock, kind: ObjectKind::Spin, mode: MODE_EXCLUSIVE, hold: Hold::Exclusive, valid: true, attempt: Attempt::TryFirst);
trylock_hook!(pthread_spin_trylock(s: *mut pthread_spinlock_t) => spin_trylock, x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"),
    real: spin_trylock, kind: ObjectKind::Spin, mode: MODE_EXCLUSIVE, hold: Hold::Exclusive);
unlock_hook!(pthread_spin_unlock(s: *mut pthread_spinlock_t) => spin_unlock, kind: ObjectKind::Spin);

// ------------------------------------------------------------- semaphores

init_hook!(sem_init(s: *mut sem_t, pshared: c_int, value: c_uint) => sem_init_handler, x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"),
    real: sem_init, kind: ObjectKind::Sem, shared: Some(pshared != 0));
destroy_hook!(sem_destroy(s: *mut sem_t) => sem_destroy);
destroy_hook!(sem_close(s: *mut sem_t) => sem_close);

/// Named semaphores: C declares `sem_open(name, oflag, ...)`; the two
/// optional arguments arrive in registers whether or not the caller passed
/// them, and are forwarded as they came (read only with O_CREAT).
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn sem_open(
    name: *const c_char,
    oflag: c_int,
    mode: libc::mode_t,
    value: c_uint,
) -> *mut sem_t {
    let open = real_or!(sem_open, libc::SEM_FAILED);
    let guard = HookGuard::enter();
    // SAFETY: forwarding the caller's arguments unchanged.
    let sem = crate::guard::calling_out(|| unsafe { open(name, oflag, mode, value) });
    if let (Some(g), false) = (&guard, sem == libc::SEM_FAILED) {
        recorder::object_opened(g, sem as u64, ObjectKind::Sem);
    }
    sem
}

/// A semaphore wait counts as an acquisition.
macro_rules! sem_wait_hook {
    ($name:ident($s:ident: *mut sem_t $(, $arg:ident: $aty:ty)*) => $handler:ident, x86_64: $x86:tt, aarch64: $arm:tt,
     real: $real:ident, valid: $valid:expr $(, deadline: $deadline:expr)?) => {
        export_with_caller!($name($s: *mut sem_t $(, $arg: $aty)*) -> c_int => $handler, x86_64: $x86, aarch64: $arm);
        unsafe extern "C-unwind" fn $handler($s: *mut sem_t $(, $arg: $aty)*, caller: usize, sp: usize) -> c_int {
            let (block, try_once) = real_pair_or!($real, sem_trywait, -1);
            // SAFETY (every call below): forwarding the caller's arguments unchanged.
            let Some(guard) = HookGuard::enter().filter(|_| $valid) else {
                return unsafe { block($s $(, $arg)*) };
            };
            let prepared = recorder::prepare(&guard, $s as u64, ObjectKind::Sem, MODE_EXCLUSIVE, Caller::new(caller, sp));
            let Some(p) = &prepared else {
                // SAFETY: forwarding the caller's arguments unchanged.
                return unsafe { block($s $(, $arg)*) };
            };
            let deadline: u64 = 0 $(+ $deadline)?;
            // SAFETY: forwarding the caller's arguments unchanged.
            sem_acquire(&guard, p, deadline, || unsafe { try_once($s) }, || unsafe { block($s $(, $arg)*) })
        }
    };
}

sem_wait_hook!(sem_wait(s: *mut sem_t) => sem_wait_handler, x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"), real: sem_wait, valid: true);
sem_wait_hook!(sem_timedwait(s: *mut sem_t, t: *const timespec) => sem_timedwait_handler, x86_64: ("rdx", "rcx"), aarch64: ("x2", "x3"),
    real: sem_timedwait, valid: valid_deadline(t), deadline: deadline_ns(t));
sem_wait_hook!(sem_clockwait(s: *mut sem_t, c: clockid_t, t: *const timespec) => sem_clockwait_handler, x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"),
    real: sem_clockwait, valid: supported_clock(c) && valid_deadline(t), deadline: deadline_ns(t));

export_with_caller!(sem_trywait(s: *mut sem_t) -> c_int => sem_trywait_handler, x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"));
unsafe extern "C-unwind" fn sem_trywait_handler(s: *mut sem_t, caller: usize, sp: usize) -> c_int {
    let try_once = real_or!(sem_trywait, -1);
    // SAFETY (every call below): forwarding the caller's argument unchanged.
    let Some(guard) = HookGuard::enter() else {
        return unsafe { try_once(s) };
    };
    let prepared = recorder::prepare(
        &guard,
        s as u64,
        ObjectKind::Sem,
        MODE_EXCLUSIVE,
        Caller::new(caller, sp),
    );
    let Some(p) = &prepared else {
        // SAFETY: forwarding the caller's arguments unchanged.
        return unsafe { try_once(s) };
    };
    // SAFETY: forwarding the caller's arguments unchanged.
    sem_try(&guard, p, || unsafe { try_once(s) })
}

export_with_caller!(sem_post(s: *mut sem_t) -> c_int => sem_post_handler, x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"));
unsafe extern "C-unwind" fn sem_post_handler(s: *mut sem_t, caller: usize, sp: usize) -> c_int {
    let post = real_or!(sem_post, -1);
    // Recorded before the post, so the waiter count is the one it wakes.
    if let Some(guard) = HookGuard::enter() {
        if let Some(p) = &recorder::prepare(
            &guard,
            s as u64,
            ObjectKind::Sem,
            MODE_POST,
            Caller::new(caller, sp),
        ) {
            recorder::posted(p);
        }
    }
    // SAFETY: forwarding the caller's argument unchanged.
    unsafe { post(s) }
}

// --------------------------------------------------------------- barriers

init_hook!(pthread_barrier_init(b: *mut pthread_barrier_t, attr: *const pthread_barrierattr_t, count: c_uint) => barrier_init_handler, x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"),
    real: barrier_init, kind: ObjectKind::Barrier, shared: None,
    then: |addr| recorder::barrier_initialized(addr, count));
destroy_hook!(pthread_barrier_destroy(b: *mut pthread_barrier_t) => barrier_destroy);

export_with_caller!(pthread_barrier_wait(b: *mut pthread_barrier_t) -> c_int => barrier_wait, x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"));
unsafe extern "C-unwind" fn barrier_wait(
    b: *mut pthread_barrier_t,
    caller: usize,
    sp: usize,
) -> c_int {
    let wait = real_or!(barrier_wait, libc::EINVAL);
    // SAFETY (every call below): forwarding the caller's argument unchanged.
    let Some(guard) = HookGuard::enter() else {
        recorder::barrier_passed_through(b as u64);
        return unsafe { wait(b) };
    };
    let Some(p) = recorder::prepare(
        &guard,
        b as u64,
        ObjectKind::Barrier,
        MODE_EXCLUSIVE,
        Caller::new(caller, sp),
    ) else {
        recorder::barrier_passed_through(b as u64);
        // SAFETY: forwarding the caller's arguments unchanged.
        return unsafe { wait(b) };
    };
    let started = recorder::barrier_begin(&guard, &p);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = guard.blocking(|| unsafe { wait(b) });
    recorder::barrier_end(&guard, &p, started, rc);
    rc
}

// ---------------------------------------------------- condition variables

init_hook!(pthread_cond_init(c: *mut pthread_cond_t, attr: *const pthread_condattr_t) => cond_init_handler, x86_64: ("rdx", "rcx"), aarch64: ("x2", "x3"),
    real: cond_init, kind: ObjectKind::Cond, shared: None);
destroy_hook!(pthread_cond_destroy(c: *mut pthread_cond_t) => cond_destroy, kind: ObjectKind::Cond);

/// Shared body of the three waits: the mutex is handed over for the wait and
/// re-engaged when it returns.
fn cond_wait_recorded(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    caller: Caller,
    deadline: *const timespec,
    wait: impl FnOnce() -> c_int,
) -> c_int {
    let Some(guard) = HookGuard::enter() else {
        return wait();
    };
    let Some(w) = recorder::cond_prepare(&guard, c as u64, m as u64, caller) else {
        return wait();
    };
    let in_flight = recorder::CondWaitInFlight::begin(&guard, w, deadline_ns(deadline));
    let rc = guard.blocking(wait);
    in_flight.end(rc);
    rc
}

export_with_caller!(pthread_cond_wait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t) -> c_int => cond_wait, x86_64: ("rdx", "rcx"), aarch64: ("x2", "x3"));
unsafe extern "C-unwind" fn cond_wait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    caller: usize,
    sp: usize,
) -> c_int {
    let wait = real_or!(cond_wait, libc::EINVAL);
    // SAFETY: forwarding the caller's arguments.
    cond_wait_recorded(
        c,
        m,
        Caller::new(caller, sp),
        core::ptr::null(),
        || unsafe { wait(c, m) },
    )
}

export_with_caller!(pthread_cond_timedwait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, t: *const timespec) -> c_int => cond_timedwait, x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"));
unsafe extern "C-unwind" fn cond_timedwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    t: *const timespec,
    caller: usize,
    sp: usize,
) -> c_int {
    let wait = real_or!(cond_timedwait, libc::EINVAL);
    if !valid_deadline(t) {
        // SAFETY: forwarding; the real call rejects the deadline before it
        // releases the mutex, so there is nothing to record.
        return unsafe { wait(c, m, t) };
    }
    // SAFETY: forwarding the caller's arguments.
    cond_wait_recorded(c, m, Caller::new(caller, sp), t, || unsafe {
        wait(c, m, t)
    })
}

export_with_caller!(pthread_cond_clockwait(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, k: clockid_t, t: *const timespec) -> c_int => cond_clockwait, x86_64: ("r8", "r9"), aarch64: ("x4", "x5"));
unsafe extern "C-unwind" fn cond_clockwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    k: clockid_t,
    t: *const timespec,
    caller: usize,
    sp: usize,
) -> c_int {
    let wait = real_or!(cond_clockwait, libc::EINVAL);
    if !supported_clock(k) || !valid_deadline(t) {
        // SAFETY: forwarding; the real call rejects the clock without waiting.
        return unsafe { wait(c, m, k, t) };
    }
    // SAFETY: forwarding the caller's arguments.
    cond_wait_recorded(c, m, Caller::new(caller, sp), t, || unsafe {
        wait(c, m, k, t)
    })
}

export_with_caller!(pthread_cond_signal(c: *mut pthread_cond_t) -> c_int => cond_signal, x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"));
unsafe extern "C-unwind" fn cond_signal(c: *mut pthread_cond_t, caller: usize, sp: usize) -> c_int {
    let signal = real_or!(cond_signal, 0);
    // Recorded before the call, so the waiter count is the one the signal sees.
    if let Some(guard) = HookGuard::enter() {
        recorder::cond_notified(&guard, c as u64, Caller::new(caller, sp), false);
    }
    // SAFETY: forwarding the caller's argument.
    unsafe { signal(c) }
}

export_with_caller!(pthread_cond_broadcast(c: *mut pthread_cond_t) -> c_int => cond_broadcast, x86_64: ("rsi", "rdx"), aarch64: ("x1", "x2"));
unsafe extern "C-unwind" fn cond_broadcast(
    c: *mut pthread_cond_t,
    caller: usize,
    sp: usize,
) -> c_int {
    let broadcast = real_or!(cond_broadcast, 0);
    if let Some(guard) = HookGuard::enter() {
        recorder::cond_notified(&guard, c as u64, Caller::new(caller, sp), true);
    }
    // SAFETY: forwarding the caller's argument.
    unsafe { broadcast(c) }
}

// ---------------------------------------------------------------- threads

#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn pthread_create(
    thread: *mut pthread_t,
    attr: *const pthread_attr_t,
    start: StartRoutine,
    arg: *mut c_void,
) -> c_int {
    let create = real_or!(thread_create, libc::EAGAIN);
    // A child process the shim did not see start notices it here, while it
    // has one thread.
    lifecycle::thread_creating();
    let guard = HookGuard::enter();
    let handoff = guard
        .as_ref()
        .and_then(|g| spawn::StartHandoff::claim(g, start, arg));
    match handoff {
        // SAFETY: forwarding with our wrapper, which calls `start(arg)`.
        Some(h) => {
            let asked_ns = recorder::now_ns();
            let serial = h.serial();
            // Out of the hook while the real call runs, as a blocking call
            // is: a signal handler that locks meanwhile is the program's,
            // recorded (it was passed through uncounted).
            // SAFETY: forwarding with our wrapper, which calls `start(arg)`.
            let create_it = || unsafe { create(thread, attr, spawn::START_WRAPPER, h.as_arg()) };
            let rc = match &guard {
                Some(g) => g.blocking(create_it),
                None => create_it(),
            };
            if rc != 0 {
                h.release();
            } else if let Some(g) = &guard {
                recorder::thread_created(g, serial, asked_ns);
            }
            rc
        }
        // SAFETY: forwarding unchanged.
        None => unsafe { create(thread, attr, start, arg) },
    }
}

fn join_recorded(
    (target, deadline): (pthread_t, u64),
    caller: Caller,
    join: impl FnOnce() -> c_int,
) -> c_int {
    let guard = HookGuard::enter();
    let started = guard
        .as_ref()
        .map(|g| recorder::join_begin(g, target, caller, deadline));
    let rc = match &guard {
        Some(g) => g.blocking(join),
        None => join(),
    };
    if let (Some(g), Some(started)) = (&guard, started) {
        recorder::join_finished(g, started, rc);
    }
    rc
}

export_with_caller!(pthread_join(t: pthread_t, ret: *mut *mut c_void) -> c_int => join_handler, x86_64: ("rdx", "rcx"), aarch64: ("x2", "x3"));
unsafe extern "C-unwind" fn join_handler(
    t: pthread_t,
    ret: *mut *mut c_void,
    caller: usize,
    sp: usize,
) -> c_int {
    let join = real_or!(thread_join, libc::EINVAL);
    // SAFETY: forwarding the caller's arguments.
    join_recorded((t, 0), Caller::new(caller, sp), || unsafe { join(t, ret) })
}

export_with_caller!(pthread_tryjoin_np(t: pthread_t, ret: *mut *mut c_void) -> c_int => tryjoin_handler, x86_64: ("rdx", "rcx"), aarch64: ("x2", "x3"));
unsafe extern "C-unwind" fn tryjoin_handler(
    t: pthread_t,
    ret: *mut *mut c_void,
    caller: usize,
    sp: usize,
) -> c_int {
    let join = real_or!(thread_tryjoin_np, libc::EINVAL);
    // SAFETY: forwarding the caller's arguments.
    // Never blocks: a deadline of "now" keeps it out of any deadlock.
    join_recorded((t, 1), Caller::new(caller, sp), || unsafe { join(t, ret) })
}

export_with_caller!(pthread_timedjoin_np(t: pthread_t, ret: *mut *mut c_void, abstime: *const timespec) -> c_int => timedjoin_handler, x86_64: ("rcx", "r8"), aarch64: ("x3", "x4"));
unsafe extern "C-unwind" fn timedjoin_handler(
    t: pthread_t,
    ret: *mut *mut c_void,
    abstime: *const timespec,
    caller: usize,
    sp: usize,
) -> c_int {
    let join = real_or!(thread_timedjoin_np, libc::EINVAL);
    // SAFETY: forwarding the caller's arguments.
    join_recorded(
        (t, deadline_ns(abstime).max(1)),
        Caller::new(caller, sp),
        || unsafe { join(t, ret, abstime) },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn pthread_detach(t: pthread_t) -> c_int {
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
pub unsafe extern "C-unwind" fn pthread_setname_np(t: pthread_t, name: *const c_char) -> c_int {
    let setname = real_or!(thread_setname_np, libc::ENOSYS);
    let guard = HookGuard::enter();
    // SAFETY: forwarding the caller's arguments.
    let rc = crate::guard::calling_out(|| unsafe { setname(t, name) });
    if let (Some(g), 0, false) = (&guard, rc, name.is_null()) {
        // SAFETY: the real call accepted `name` as a NUL-terminated string.
        recorder::thread_named(g, t, unsafe { CStr::from_ptr(name) }.to_bytes());
    }
    rc
}

// ------------------------------------------------------------ confinement

/// `prctl(2)`: seen for the options that confine the process (a seccomp
/// mode, the TSC turned off); every other option goes straight through.
/// Variadic in C: the four words after the option are passed on as the
/// caller left them.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn prctl(
    option: c_int,
    a2: c_ulong,
    a3: c_ulong,
    a4: c_ulong,
    a5: c_ulong,
) -> c_int {
    let words = [
        option as usize,
        a2 as usize,
        a3 as usize,
        a4 as usize,
        a5 as usize,
        0,
    ];
    // SAFETY: the caller's own system call, as it asked for it.
    let f = real_or!(
        prctl,
        syscall_result::<c_int>(unsafe { crate::sys::raw_syscall(libc::SYS_prctl, words) })
    );
    let rc = match recorder::Confining::of_prctl(option, a2) {
        // SAFETY: forwarding the caller's arguments unchanged.
        None => unsafe { f(option, a2, a3, a4, a5) },
        // SAFETY: as above.
        Some(what) => confining(what, || unsafe { f(option, a2, a3, a4, a5) } as c_long) as c_int,
    };
    if rc == 0 {
        crate::sys::confined::prctl_done(option, a2);
    }
    rc
}

/// Makes a call that would confine the process, with the recorder made
/// ready before and told after (see `recorder::api::confinement`). The call's
/// result and errno are its own.
pub(crate) fn confining(what: recorder::Confining, call: impl FnOnce() -> c_long) -> c_long {
    let guard = HookGuard::enter();
    let begun = {
        let _errno = crate::diag::ErrnoGuard::save();
        recorder::confinement_begins(guard.as_deref(), what)
    };
    let rc = crate::guard::calling_out(call);
    let _errno = crate::diag::ErrnoGuard::save();
    recorder::confinement_ended(begun, rc == 0);
    rc
}

// ----------------------------------------------------------------- SIGBUS

/// `sigaction(2)`: SIGBUS is answered for the program while the shim keeps
/// its own handler (see `sigbus`); every other signal goes straight through.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let real_action = real_or!(sigaction, {
        // SAFETY: writing this thread's errno, as the real call would.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        -1
    });
    if crate::sigbus::watching(sig) {
        // SAFETY: the caller's pointers, as for the real call.
        return unsafe { crate::sigbus::program_sigaction(act, old) };
    }
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { real_action(sig, act, old) }
}

/// `signal(3)`: as `sigaction`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    let real_signal = real_or!(signal, libc::SIG_ERR);
    if crate::sigbus::watching(sig) {
        return crate::sigbus::program_signal(handler);
    }
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { real_signal(sig, handler) }
}

// ------------------------------------------------------------ process exit

/// Ends the process with `code` when the C library's exit function is
/// unavailable (never with glibc).
fn exit_group(code: c_int) -> ! {
    // exit_group takes a status and never returns.
    let _ = crate::sys::forward!(libc::SYS_exit_group, code);
    // SAFETY: abort has no preconditions (unreachable in practice).
    unsafe { libc::abort() }
}

#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn exit(code: c_int) -> ! {
    lifecycle::process_exiting(code);
    match real().and_then(|f| f.exit) {
        // SAFETY: forwarding the caller's argument.
        Some(exit) => unsafe { exit(code) },
        None => exit_group(code),
    }
}

/// `quick_exit` ends the process normally too (after its at_quick_exit
/// handlers), through glibc's internal `_exit`, which no hook sees.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn quick_exit(code: c_int) -> ! {
    lifecycle::process_exiting(code);
    match real().and_then(|f| f.quick_exit) {
        // SAFETY: forwarding the caller's argument.
        Some(exit) => unsafe { exit(code) },
        None => exit_group(code),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn _exit(code: c_int) -> ! {
    lifecycle::process_exiting(code);
    match real().and_then(|f| f.exit_now) {
        // SAFETY: forwarding the caller's argument.
        Some(exit) => unsafe { exit(code) },
        None => exit_group(code),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn _Exit(code: c_int) -> ! {
    lifecycle::process_exiting(code);
    match real().and_then(|f| f.exit_now_c99) {
        // SAFETY: forwarding the caller's argument.
        Some(exit) => unsafe { exit(code) },
        None => exit_group(code),
    }
}

// ---------------------------------------------------------- module unload

/// A library may be unloaded and another loaded at its addresses: the module
/// map starts a new epoch. No guard: the library's destructors run inside
/// and their locks are recorded like any others.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn dlclose(handle: *mut c_void) -> c_int {
    let close = real_or!(dlclose, -1);
    // SAFETY: forwarding the caller's argument unchanged.
    let rc = unsafe { close(handle) };
    if rc == 0 {
        recorder::library_unloaded();
    }
    rc
}

// ------------------------------------------------------------------- exec

/// Marks the trace as ended by exec for the duration of the call; a failed
/// exec clears the mark again. The real errno is kept. The guard is left
/// before the real call: a successful exec never returns to drop it, and in
/// a vfork child the thread state it would leave set is the parent's. A
/// fork child that recorded nothing yet has no trace to mark, and an exec
/// does not make one (see `lifecycle::recording`).
fn exec_recorded(exec: impl FnOnce() -> c_int) -> c_int {
    let marked = HookGuard::enter_quickly().is_some_and(|_guard| recorder::exec_starting());
    let rc = exec();
    if marked {
        recorder::exec_failed();
    }
    rc
}

#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let exec = real_or!(execve, -1);
    // SAFETY: forwarding the caller's arguments.
    exec_recorded(|| unsafe { exec(path, argv, envp) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    let exec = real_or!(execv, -1);
    // SAFETY: forwarding the caller's arguments.
    exec_recorded(|| unsafe { exec(path, argv) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    let exec = real_or!(execvp, -1);
    // SAFETY: forwarding the caller's arguments.
    exec_recorded(|| unsafe { exec(file, argv) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let exec = real_or!(execvpe, -1);
    // SAFETY: forwarding the caller's arguments.
    exec_recorded(|| unsafe { exec(file, argv, envp) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let exec = real_or!(fexecve, -1);
    // SAFETY: forwarding the caller's arguments.
    exec_recorded(|| unsafe { exec(fd, argv, envp) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    flags: c_int,
) -> c_int {
    let exec = real_or!(execveat, -1);
    // SAFETY: forwarding the caller's arguments.
    exec_recorded(|| unsafe { exec(dirfd, path, argv, envp, flags) })
}

// `execl`, `execle` and `execlp` take their arguments as a variadic list,
// which glibc turns into an argv and passes to its *internal* execve, out
// of our hooks' sight. Rust cannot define a variadic function, so each is a
// naked trampoline that spills the argument registers next to the
// caller's stack arguments and hands both to `exec_list`, which builds the
// argv the same way and calls the hooked `execve` or `execvp`.
macro_rules! export_exec_list {
    ($name:ident, $form:expr) => {
        #[unsafe(no_mangle)]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name() -> c_int {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(
                // 6 argument registers, then the caller's stack arguments
                // at entry rsp + 8. rsp is 16-aligned after the sub, so the
                // call keeps the ABI's alignment.
                "sub rsp, 56",
                "mov [rsp], rdi",
                "mov [rsp + 8], rsi",
                "mov [rsp + 16], rdx",
                "mov [rsp + 24], rcx",
                "mov [rsp + 32], r8",
                "mov [rsp + 40], r9",
                "mov rdi, rsp",
                "lea rsi, [rsp + 64]",
                "mov edx, {form}",
                "call {handler}",
                "add rsp, 56",
                "ret",
                form = const $form,
                handler = sym exec_list,
            );
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(
                // 8 argument registers, then the caller's stack arguments
                // at entry sp.
                "stp x29, x30, [sp, #-80]!",
                "mov x29, sp",
                "stp x0, x1, [sp, #16]",
                "stp x2, x3, [sp, #32]",
                "stp x4, x5, [sp, #48]",
                "stp x6, x7, [sp, #64]",
                "add x0, sp, #16",
                "add x1, sp, #80",
                "mov w2, #{form}",
                "bl {handler}",
                "ldp x29, x30, [sp], #80",
                "ret",
                form = const $form,
                handler = sym exec_list,
            );
        }
    };
}

const EXEC_L: u32 = 0;
const EXEC_LE: u32 = 1;
const EXEC_LP: u32 = 2;

export_exec_list!(execl, EXEC_L);
export_exec_list!(execle, EXEC_LE);
export_exec_list!(execlp, EXEC_LP);

/// Argument registers spilled by the trampolines.
#[cfg(target_arch = "x86_64")]
const ARG_REGISTERS: usize = 6;
#[cfg(target_arch = "aarch64")]
const ARG_REGISTERS: usize = 8;

/// Most arguments passed on the stack frame of `exec_list` (within the
/// hooks' stack budget, `recorder::HOOK_STACK_BUDGET`); longer lists get a
/// buffer of their own.
const ARGV_ON_STACK: usize = 32;

/// `execl(path, arg0, ..., NULL)`, `execle(path, arg0, ..., NULL, envp)`,
/// `execlp(file, arg0, ..., NULL)`, with argument `i` in `registers[i]` or
/// `stack[i - ARG_REGISTERS]`.
unsafe extern "C-unwind" fn exec_list(
    registers: *const usize,
    stack: *const usize,
    form: u32,
) -> c_int {
    // SAFETY: the trampoline spilled ARG_REGISTERS registers at
    // `registers`, and the caller's further arguments are at `stack`; the
    // caller passed a NULL-terminated list (and for execle, envp after it).
    let arg = |i: usize| unsafe {
        if i < ARG_REGISTERS {
            *registers.add(i)
        } else {
            *stack.add(i - ARG_REGISTERS)
        }
    };
    let path = arg(0) as *const c_char;
    let mut count = 0;
    while arg(1 + count) != 0 {
        count += 1;
    }
    let envp = if form == EXEC_LE {
        arg(2 + count) as *const *const c_char
    } else {
        // SAFETY: reading the process's environment pointer, as glibc's execl does.
        unsafe { environ }
    };
    let run = |argv: &mut [*const c_char]| {
        for (i, slot) in argv.iter_mut().enumerate().take(count) {
            *slot = arg(1 + i) as *const c_char;
        }
        argv[count] = core::ptr::null();
        // SAFETY: a NULL-terminated argv built from the caller's list.
        unsafe {
            if form == EXEC_LP {
                execvp(path, argv.as_ptr())
            } else {
                execve(path, argv.as_ptr(), envp)
            }
        }
    };
    if count < ARGV_ON_STACK {
        let mut argv = [core::ptr::null::<c_char>(); ARGV_ON_STACK];
        return run(&mut argv);
    }
    // A longer list: anonymous memory, as no allocator may be used here (a
    // vfork child), kept if the exec fails only until we return.
    let len = (count + 1) * core::mem::size_of::<*const c_char>();
    let Some(buffer) = recorder::map_anonymous::<*const c_char>(len) else {
        // SAFETY: writing this thread's errno, as the real call would.
        unsafe { *libc::__errno_location() = libc::E2BIG };
        return -1;
    };
    // SAFETY: `len` bytes of fresh memory for count + 1 pointers.
    let argv = unsafe { core::slice::from_raw_parts_mut(buffer, count + 1) };
    let rc = run(argv);
    let _errno = crate::diag::ErrnoGuard::save();
    // SAFETY: unmapping the buffer mapped above, no longer used.
    unsafe { crate::sys::munmap(buffer.cast(), len) };
    rc
}

unsafe extern "C" {
    static environ: *const *const c_char;
}

// Blocking calls beyond the lock API, in a file of their own: they share
// the macros above. Processes made without glibc's fork, in another.
mod access;
mod calls;
mod children;
mod mutexes;
