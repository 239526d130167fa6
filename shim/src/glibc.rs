//! glibc's public object layouts that the shim reads (x86_64 and aarch64,
//! unchanged since glibc 2.25): attributes kept inside a lock, and whether a
//! mutex's own trylock is safe to try before its blocking lock.

use core::sync::atomic::{AtomicI32, AtomicU32, Ordering};

/// `__data.__kind` of a mutex: the type in bits 0-1, then these flags.
const MUTEX_KIND_OFFSET: u64 = 16;
pub const MUTEX_ROBUST: u32 = 16;
pub const MUTEX_PRIO_INHERIT: u32 = 32;
pub const MUTEX_PRIO_PROTECT: u32 = 64;
pub const MUTEX_PSHARED: u32 = 128;
pub const MUTEX_TYPE_MASK: u32 = 3;
/// A PP mutex keeps its priority ceiling in the top bits of `__lock`
/// (glibc's PTHREAD_MUTEX_PRIO_CEILING_MASK); the bits below say whether it
/// is locked.
const MUTEX_PRIO_CEILING_MASK: i32 = 0xfff8_0000_u32 as i32;

/// Reads a 32-bit word of a live object at `addr + offset`.
///
/// # Safety
/// `addr` must be a live object the program passed to an interposed call,
/// and `offset` must lie inside it (4-aligned).
pub unsafe fn word(addr: u64, offset: u64) -> u32 {
    // SAFETY: per the contract; glibc may update the word concurrently, so
    // it is read as an atomic.
    unsafe { AtomicU32::from_ptr((addr + offset) as *mut u32) }.load(Ordering::Relaxed)
}

/// The size of glibc's object of `kind` (as `sizeof` in C).
pub fn object_size(kind: locksuit_format::ObjectKind) -> u64 {
    use locksuit_format::ObjectKind;
    (match kind {
        ObjectKind::Mutex => core::mem::size_of::<libc::pthread_mutex_t>(),
        ObjectKind::Rwlock => core::mem::size_of::<libc::pthread_rwlock_t>(),
        ObjectKind::Spin => core::mem::size_of::<libc::pthread_spinlock_t>(),
        ObjectKind::Cond => core::mem::size_of::<libc::pthread_cond_t>(),
        ObjectKind::Sem => core::mem::size_of::<libc::sem_t>(),
        ObjectKind::Barrier => core::mem::size_of::<libc::pthread_barrier_t>(),
        ObjectKind::Futex => core::mem::size_of::<u32>(),
    }) as u64
}

/// A mutex's `__kind` word.
///
/// # Safety
/// As for [`word`], with `addr` a mutex.
pub unsafe fn mutex_kind(addr: u64) -> u32 {
    // SAFETY: forwarded contract; __kind lies inside pthread_mutex_t.
    unsafe { word(addr, MUTEX_KIND_OFFSET) }
}

/// Whether a thread may be waiting for the mutex at `addr`, which the
/// caller holds, by its lock word: a plain mutex's is 2 once a thread
/// found it taken and went to wait (it stays 2 until the next unlock, so a
/// true answer is only a "may"); a robust or PI mutex's holds the owner's
/// thread id, always above 1, so its releases always look.
///
/// # Safety
/// As for [`word`], with `addr` a mutex.
#[inline(always)]
pub unsafe fn mutex_may_have_waiters(addr: u64) -> bool {
    // SAFETY: forwarded contract; __lock is the mutex's first word.
    unsafe { word(addr, 0) > 1 }
}

/// How a blocking acquisition of a mutex may proceed.
#[derive(Clone, Copy)]
pub enum Attempt {
    /// Try the real non-blocking variant first (the cheap, common case).
    TryFirst,
    /// Call the blocking function directly: the mutex's trylock has side
    /// effects its lock does not (glibc's robust trylock leaves a mutex made
    /// not recoverable locked, so the next locker hangs; PI and PP trylocks
    /// go to the kernel). `free`: the lock word was 0 just before the call,
    /// so it is recorded as uncontended; otherwise as a wait.
    Direct { free: bool },
}

/// The attempt for the mutex at `addr`.
///
/// # Safety
/// As for [`word`], with `addr` a mutex.
#[inline(always)]
pub unsafe fn mutex_attempt(addr: u64) -> Attempt {
    // SAFETY: forwarded contract.
    let kind = unsafe { mutex_kind(addr) };
    if kind & (MUTEX_ROBUST | MUTEX_PRIO_INHERIT | MUTEX_PRIO_PROTECT) == 0 {
        return Attempt::TryFirst;
    }
    // SAFETY: __lock is the first word of pthread_mutex_t.
    let lock_word = unsafe { AtomicI32::from_ptr(addr as *mut i32) }.load(Ordering::Relaxed);
    let held_bits = if kind & MUTEX_PRIO_PROTECT != 0 {
        lock_word & !MUTEX_PRIO_CEILING_MASK
    } else {
        lock_word // an owner's tid, which may use any bit
    };
    Attempt::Direct {
        free: held_bits == 0,
    }
}

/// Who holds a lock, as the lock's own words say.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Holder {
    Nobody,
    /// Held exclusively by this thread id.
    Thread(u32),
    /// Held, by whom the words do not say (readers, a spinlock, an owner
    /// not yet written, a robust mutex whose owner died).
    Someone,
}

/// glibc's `PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP` in an rwlock's
/// `__flags` (the only kind whose queued writers hold readers back).
const RWLOCK_PREFER_WRITER_NONRECURSIVE: u32 = 2;

/// An rwlock's (process-shared, prefers writers) from its words: x86_64
/// keeps `__shared` and `__flags` as ints at 28 and 48; the generic layout
/// (aarch64) as the bytes at 25 and 24.
///
/// # Safety
/// As for [`word`], with `addr` an rwlock the call at hand reads.
pub unsafe fn rwlock_attributes(addr: u64) -> (bool, bool) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded contract; both words lie inside pthread_rwlock_t.
    let (shared, flags) = unsafe { (word(addr, 28), word(addr, 48)) };
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: as above; the word at 24 holds __flags, __shared and padding.
    let (shared, flags) = {
        let w = unsafe { word(addr, 24) }.to_le_bytes();
        (u32::from(w[1]), u32::from(w[0]))
    };
    (shared != 0, flags == RWLOCK_PREFER_WRITER_NONRECURSIVE)
}

/// `__data.__owner` of a mutex: the holder's tid, written just after the
/// lock word by every kind of glibc mutex.
const MUTEX_OWNER_OFFSET: u64 = 8;
/// `__cur_writer` of an rwlock; `__readers` is its first word. x86_64's
/// layout has it right after the six counters; the generic one (aarch64)
/// puts `__flags` and `__shared` (four bytes) there first.
#[cfg(target_arch = "x86_64")]
const RWLOCK_WRITER_OFFSET: u64 = 24;
#[cfg(not(target_arch = "x86_64"))]
const RWLOCK_WRITER_OFFSET: u64 = 28;
/// `__readers` bits: a writer holds the lock; readers are counted above
/// the shift.
const RWLOCK_WRLOCKED: u32 = 2;
const RWLOCK_READER_SHIFT: u32 = 3;

/// A tid as glibc writes it (robust mutexes mark a dead owner with values
/// no thread has).
fn holder_tid(owner: u32) -> Holder {
    if owner != 0 && owner < 0x3fff_ffff {
        Holder::Thread(owner)
    } else {
        Holder::Someone
    }
}

/// Who holds the lock of `kind` whose 32-bit words `word(offset)` reads.
fn holder_by(kind: locksuit_format::ObjectKind, word: impl Fn(u64) -> u32) -> Holder {
    use locksuit_format::ObjectKind;
    match kind {
        ObjectKind::Mutex => {
            let (flags, lock) = (word(MUTEX_KIND_OFFSET), word(0) as i32);
            let held = if flags & MUTEX_PRIO_PROTECT != 0 {
                lock & !MUTEX_PRIO_CEILING_MASK != 0
            } else {
                lock != 0
            };
            if held {
                holder_tid(word(MUTEX_OWNER_OFFSET))
            } else {
                Holder::Nobody
            }
        }
        ObjectKind::Rwlock => {
            let readers = word(0);
            if readers & RWLOCK_WRLOCKED != 0 {
                holder_tid(word(RWLOCK_WRITER_OFFSET))
            } else if readers >> RWLOCK_READER_SHIFT != 0 {
                Holder::Someone
            } else {
                Holder::Nobody
            }
        }
        ObjectKind::Spin => {
            if word(0) == 0 {
                Holder::Nobody
            } else {
                Holder::Someone
            }
        }
        _ => Holder::Someone,
    }
}

/// Who holds the lock of `kind` at `addr`.
///
/// # Safety
/// As for [`word`], with `addr` an object of `kind` that the call at hand
/// reads itself (an unlock does; `pthread_rwlock_destroy` and
/// `pthread_spin_destroy` do not: use [`holder_copied`] there).
pub unsafe fn holder(addr: u64, kind: locksuit_format::ObjectKind) -> Holder {
    // SAFETY: forwarded contract; every offset read lies inside the object.
    holder_by(kind, |offset| unsafe { word(addr, offset) })
}

/// Who holds the lock of `kind` at `addr`, read through the kernel (a
/// system call): memory the program unmapped fails to read (`None`)
/// instead of faulting. For calls that do not read the object themselves.
pub fn holder_copied(addr: u64, kind: locksuit_format::ObjectKind) -> Option<Holder> {
    use locksuit_format::ObjectKind;
    // The words `holder_by` reads, and no further (a spinlock at the end of
    // a mapping has nothing after it).
    let len = match kind {
        ObjectKind::Mutex => MUTEX_KIND_OFFSET as usize + 4,
        ObjectKind::Rwlock => RWLOCK_WRITER_OFFSET as usize + 4,
        _ => 4,
    };
    let mut bytes = [0u8; 32];
    if !crate::sys::read_own_memory(addr, &mut bytes[..len]) {
        return None;
    }
    let word = |offset: u64| {
        let at = offset as usize;
        u32::from_ne_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
    };
    Some(holder_by(kind, word))
}
