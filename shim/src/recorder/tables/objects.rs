//! The process-wide table from a synchronisation object's address to its
//! identity and live state (holder, waiters, release sequence).
//!
//! Lock-free open addressing over an anonymous mapping. Slots are never
//! removed: destroying an object clears its id, and the next init or use at
//! that address gets a fresh id, so a lock destroyed and re-initialised at
//! the same address is a new lock.

use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// Table capacity (slots): 2 Mi slots of 32 bytes, a 64 MiB reservation
/// touched only where objects hash; a million live objects fill it halfway.
/// Objects beyond it pass through and are counted as dropped.
pub const OBJECT_SLOTS: usize = 1 << 21;
const PROBES: usize = 64;

#[repr(C, align(32))]
pub struct ObjectSlot {
    pub addr: AtomicU64,
    /// Current identity, `kind << 32 | id` (see [`ObjectSlot::id`]); id 0 =
    /// none (never used, or destroyed). One word, so a thread never sees an
    /// identity without its kind and makes a second one for the same object.
    pub ident: AtomicU64,
    /// Mutex: tid of the current exclusive holder, 0 if none.
    /// Cond: id of the mutex passed to the most recent wait.
    pub holder: AtomicU32,
    /// Threads currently blocked on this object. For locks, see
    /// [`ObjectSlot::begin_wait`]: the low 16 bits count them, the high 16
    /// mark the hold during which the latest wait began.
    pub waiters: AtomicU32,
    /// Bumped on every release (the per-lock enumerator).
    pub seq: AtomicU32,
    /// tid of the last exclusive owner, to count owner changes; in lean
    /// mode (which counts none), a mutex's holder's site (`lean.rs`).
    pub last_owner: AtomicU32,
}

static TABLE: AtomicPtr<ObjectSlot> = AtomicPtr::new(core::ptr::null_mut());

/// Slots in one 4 KiB page of the table.
const SLOTS_PER_PAGE: usize = 4096 / core::mem::size_of::<ObjectSlot>();
/// One bit per page of the table: made resident for writing. A claim first
/// makes its home page so, before reading it: a read of an untouched page
/// maps the shared zero page, and the claim's write after it must flush
/// that mapping from every CPU the process runs on, an interrupt to each.
/// That made the first sweep over 65,536 statically initialised locks
/// (the way C++'s `std::mutex` starts) three times slower.
static WRITTEN_PAGES: [AtomicU64; OBJECT_SLOTS / SLOTS_PER_PAGE / 64] =
    [const { AtomicU64::new(0) }; OBJECT_SLOTS / SLOTS_PER_PAGE / 64];
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

pub fn init() -> bool {
    if !TABLE.load(Ordering::Acquire).is_null() {
        return true;
    }
    let Some(p) = crate::recorder::base::mapped::map_anonymous_zeroed_in_child(
        OBJECT_SLOTS * core::mem::size_of::<ObjectSlot>(),
    ) else {
        return false;
    };
    TABLE.store(p, Ordering::Release);
    true
}

/// In a fork child: identities restart with the child's own trace.
pub fn reset_after_fork() {
    let table = TABLE.load(Ordering::Acquire);
    if !table.is_null() {
        // SAFETY: discarding our own private anonymous pages; they read back
        // as zeros. The child has a single thread.
        let _ = unsafe {
            crate::sys::madvise(
                table.cast(),
                OBJECT_SLOTS * core::mem::size_of::<ObjectSlot>(),
                libc::MADV_DONTNEED,
            )
        };
    }
    for word in &WRITTEN_PAGES {
        word.store(0, Ordering::Relaxed);
    }
    NEXT_ID.store(1, Ordering::Relaxed);
}

/// Home slot of `addr` (callers mask it). The objects of one 4 KiB page
/// map to one run of 512 consecutive slots, by their offset in the page in
/// 8-byte steps, at a place chosen by hashing the page number. A sweep over
/// an array of locks then walks the table in order, which the hardware
/// prefetcher follows, instead of missing the cache on every lock (measured
/// on a 65,536-lock kernel); pages still hash apart, so arrays that sit
/// 2^k bytes apart (per-thread arenas) do not pile up on each other.
fn hash(addr: u64) -> usize {
    let page = addr >> 12;
    let run =
        (page.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - OBJECT_SLOTS.trailing_zeros())) as usize;
    run + ((addr & 0xfff) >> 3) as usize
}

/// Finds the slot for `addr`, or claims one (not when it is only looked
/// up: `claim` false).
#[inline(always)]
fn slot_for(addr: u64, claim: bool) -> Option<&'static ObjectSlot> {
    let table = TABLE.load(Ordering::Acquire);
    if table.is_null() || addr == 0 {
        return None;
    }
    let home = hash(addr) & (OBJECT_SLOTS - 1);
    if claim {
        ensure_written(table, home);
    }
    for i in 0..PROBES {
        let at = (home + i) & (OBJECT_SLOTS - 1);
        // SAFETY: index masked into the table.
        let slot = unsafe { &*table.add(at) };
        let cur = slot.addr.load(Ordering::Acquire);
        if cur == addr {
            return Some(slot);
        }
        if cur == 0 {
            if !claim {
                return None;
            }
            match slot
                .addr
                .compare_exchange(0, addr, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(slot),
                Err(now) if now == addr => return Some(slot),
                Err(_) => {}
            }
        }
        let next = (at + 1) & (OBJECT_SLOTS - 1);
        if claim && next.is_multiple_of(SLOTS_PER_PAGE) {
            // The probe runs on into the next page of the table.
            ensure_written(table, next);
        }
    }
    None
}

/// Makes the page of the table that holds slot `at` resident for writing,
/// unless it already is (see [`WRITTEN_PAGES`]).
#[inline(always)]
fn ensure_written(table: *mut ObjectSlot, at: usize) {
    let page = at / SLOTS_PER_PAGE;
    if WRITTEN_PAGES[page / 64].load(Ordering::Relaxed) & 1 << (page % 64) == 0 {
        write_page(table, page);
    }
}

/// Makes page `page` of the table resident for writing. Threads that race
/// here both populate; that is harmless, as populating changes no contents.
#[cold]
#[inline(never)]
fn write_page(table: *mut ObjectSlot, page: usize) {
    // SAFETY: the page lies inside the table's mapping.
    let first = unsafe { table.add(page * SLOTS_PER_PAGE) };
    crate::recorder::base::mapped::populate(first.cast(), 4096);
    WRITTEN_PAGES[page / 64].fetch_or(1 << (page % 64), Ordering::Relaxed);
}

/// Low half of a lock's `waiters`: how many threads are blocked on it.
const WAITER_COUNT: u32 = 0xffff;
/// High half: set with the low 15 bits of the release sequence at which
/// the latest wait began.
const WAIT_MARK_VALID: u32 = 0x8000;

/// The mark a wait that began at release sequence `seq` leaves.
#[inline(always)]
fn wait_mark(seq: u32) -> u32 {
    WAIT_MARK_VALID | (seq & 0x7fff)
}

impl ObjectSlot {
    /// The current identity's id (0 if none).
    #[inline]
    pub fn id(&self) -> u32 {
        self.ident.load(Ordering::Acquire) as u32
    }

    /// The current identity's kind (`ObjectKind` as a number; 0: none).
    pub fn kind(&self) -> u32 {
        (self.ident.load(Ordering::Acquire) >> 32) as u32
    }

    /// A thread starts blocking on this lock while its release sequence is
    /// `seq`, i.e. during the hold that sequence number belongs to. The
    /// mark lets that hold's release know its engagement made a thread
    /// wait: one task switch for that engagement, however many other
    /// holds the waiter then sits through.
    #[inline]
    pub fn begin_wait(&self, seq: u32) {
        let mut cur = self.waiters.load(Ordering::Relaxed);
        loop {
            let count = (cur & WAITER_COUNT).saturating_add(1).min(WAITER_COUNT);
            let new = wait_mark(seq) << 16 | count;
            match self
                .waiters
                .compare_exchange_weak(cur, new, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    /// The thread stopped blocking (it got the lock, timed out, or was cancelled).
    #[inline]
    pub fn end_wait(&self) {
        let _ = self
            .waiters
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                (w & WAITER_COUNT != 0).then(|| w - 1)
            });
    }

    /// Threads blocked on the lock now.
    #[inline]
    pub fn waiting(&self) -> u32 {
        self.waiters.load(Ordering::Relaxed) & WAITER_COUNT
    }

    /// Whether the release of the hold at sequence `seq` finds nothing to
    /// account for: nobody blocked now, and no wait began during it.
    #[inline(always)]
    pub fn quiet_release(&self, seq: u32) -> bool {
        let w = self.waiters.load(Ordering::Relaxed);
        w == 0 || (w & WAITER_COUNT == 0 && w >> 16 != wait_mark(seq))
    }

    /// Whether a wait began during the hold at sequence `seq`, taking the
    /// mark that says so (the waiters' count stays): left in place, it
    /// would be taken again by the release 32,768 holds later, whose
    /// sequence has the same low 15 bits, as a wait that hold caused.
    #[inline]
    pub fn take_wait_mark(&self, seq: u32) -> bool {
        let mark = wait_mark(seq);
        self.waiters
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                (w >> 16 == mark).then_some(w & WAITER_COUNT)
            })
            .is_ok()
    }
}

fn ident(kind: u32, id: u32) -> u64 {
    (kind as u64) << 32 | id as u64
}

/// What a lookup found.
pub struct Found {
    pub slot: &'static ObjectSlot,
    pub id: u32,
    /// A new identity was made; the caller records it.
    pub created: bool,
    /// The new identity's record, once written (null otherwise).
    pub record: *mut locksuit_format::LockRecord,
}

/// The object at `addr` as used now; makes an identity on first use.
#[inline(always)]
pub fn for_use(addr: u64, kind: u32) -> Option<Found> {
    let slot = slot_for(addr, true)?;
    let current = slot.ident.load(Ordering::Acquire);
    if current as u32 != 0 && current == ident(kind, current as u32) {
        return Some(Found {
            slot,
            id: current as u32,
            created: false,
            record: core::ptr::null_mut(),
        });
    }
    let new = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    match slot.ident.compare_exchange(
        current,
        ident(kind, new),
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => Some(Found {
            slot,
            id: new,
            created: true,
            record: core::ptr::null_mut(),
        }),
        // Another thread made the identity first; use theirs.
        Err(theirs) => Some(Found {
            slot,
            id: theirs as u32,
            created: false,
            record: core::ptr::null_mut(),
        }),
    }
}

/// `*_init` at `addr`: always a new identity.
pub fn for_init(addr: u64, kind: u32) -> Option<Found> {
    let slot = slot_for(addr, true)?;
    let new = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    slot.holder.store(0, Ordering::Relaxed);
    slot.waiters.store(0, Ordering::Relaxed);
    slot.ident.store(ident(kind, new), Ordering::Release);
    Some(Found {
        slot,
        id: new,
        created: true,
        record: core::ptr::null_mut(),
    })
}

/// A barrier at `addr` initialised for `count` threads: its slot keeps the
/// count (in `holder`, unused for barriers) and counts arrivals from 0 (in
/// `seq`), so each arrival knows its round.
pub fn barrier_initialized(addr: u64, count: u32) {
    if let Some(slot) = slot_for(addr, true) {
        slot.holder.store(count, Ordering::Relaxed);
        slot.seq.store(0, Ordering::Relaxed);
    }
}

/// A wait at the barrier at `addr` passed through unrecorded (the thread
/// already closed, no lane, a nested call): its arrival still takes its
/// number, so the rounds of the arrivals that are recorded stay right (the
/// round it was in has one arrival without an event, and its departures
/// are released early and marked). One lookup that claims nothing and one
/// atomic: safe outside the guard, in a signal handler too.
pub fn barrier_passed_through(addr: u64) {
    if let Some(slot) = slot_for(addr, false) {
        // Only a live barrier whose count is known numbers its arrivals.
        if slot.id() != 0 && slot.holder.load(Ordering::Relaxed) != 0 {
            slot.seq.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The slot of the object at `addr`, if it has one; claims none.
pub fn find(addr: u64) -> Option<&'static ObjectSlot> {
    slot_for(addr, false)
}

/// `*_destroy` at `addr`: ends the identity; returns the id it had.
pub fn destroy(addr: u64) -> Option<u32> {
    let slot = slot_for(addr, true)?;
    let old = slot.ident.swap(0, Ordering::AcqRel) as u32;
    // The next identity at this address (first use, no init) starts unheld.
    slot.holder.store(0, Ordering::Relaxed);
    (old != 0).then_some(old)
}
