//! The locks a thread holds right now, innermost last. An unlock finds its
//! engagement here, so the release path needs no table lookup and the hold
//! time and task switch are credited to the line that acquired the lock.
//!
//! A lock is on the stack once however often the thread took it: taking a
//! lock it already holds (a recursive mutex, a read lock taken twice) is a
//! count on the hold it is inside, so recursion of any depth costs no
//! entries. Such a re-acquisition is counted at its line; its hold is the
//! outer one's (it releases nothing when it ends).

use crate::recorder::tables::objects::ObjectSlot;
use locksuit_format::CounterRecord;

/// Deepest nesting tracked; deeper engagements are counted but their holds
/// are not timed.
pub const MAX_HELD: usize = 32;

/// The engagement had to wait for the lock.
pub const HELD_CONTENDED: u32 = 1 << 0;
/// The lock was handed over across a condition wait or signal.
pub const HELD_HANDOVER: u32 = 1 << 1;
/// A shared (reader) hold: other readers may hold the lock at the same time.
pub const HELD_SHARED: u32 = 1 << 2;
/// The hold is timed (`since_ns` is set; see [`HeldStack::push`]).
pub const HELD_TIMED: u32 = 1 << 3;
/// The lock was taken again while held (`relocks` is not 0).
pub const HELD_RELOCKED: u32 = 1 << 4;
/// After fork: the slot and counter were the parent's and are forgotten.
pub const HELD_FORGOTTEN: u32 = 1 << 5;

#[derive(Clone, Copy)]
pub struct HeldEntry {
    pub addr: u64,
    pub lock_id: u32,
    /// `HELD_*` bits. Every way in which a release is not the common one
    /// sets one, so that the common release is found with one test.
    pub flags: u32,
    pub slot: *const ObjectSlot,
    /// Null when the counter is gone (after fork) or could not be recorded.
    pub counter: *mut CounterRecord,
    /// When the hold started, if it is being timed; 0 otherwise. Left as
    /// it was by a plain push ([`HeldStack::push_plain`]): read it through
    /// [`HeldEntry::timed`], or only with `HELD_TIMED` set.
    pub since_ns: u64,
    /// The thread's slow-path shim time when a timed hold started (as
    /// `since_ns`).
    pub shim_ns: u64,
    /// Times the thread took the lock again while holding it: unlocks
    /// that release nothing before the one that lets it go. Meant only with
    /// `HELD_RELOCKED` set (as `since_ns`).
    pub relocks: u32,
}

impl HeldEntry {
    /// Makes this place a plain hold's (see [`HeldStack::push_plain`]):
    /// only the fields such a hold means are written.
    #[inline(always)]
    fn set_plain(
        &mut self,
        addr: u64,
        lock_id: u32,
        slot: *const ObjectSlot,
        counter: *mut CounterRecord,
    ) {
        self.addr = addr;
        self.lock_id = lock_id;
        self.flags = 0;
        self.slot = slot;
        self.counter = counter;
    }

    /// `(since_ns, shim_ns)` of a timed hold; (0, 0) for any other, whose
    /// fields a plain push left as they were.
    #[inline(always)]
    pub fn timed(&self) -> (u64, u64) {
        if self.flags & HELD_TIMED != 0 {
            (self.since_ns, self.shim_ns)
        } else {
            (0, 0)
        }
    }
}

const EMPTY: HeldEntry = HeldEntry {
    addr: 0,
    lock_id: 0,
    flags: 0,
    slot: core::ptr::null(),
    counter: core::ptr::null_mut(),
    since_ns: 0,
    shim_ns: 0,
    relocks: 0,
};

impl Default for HeldStack {
    fn default() -> Self {
        Self::new()
    }
}

pub struct HeldStack {
    /// One more than tracked: a push onto a full stack lands in the spare
    /// entry and is not counted, so a push has no branch of its own.
    entries: [HeldEntry; MAX_HELD + 1],
    len: usize,
    /// Per position, the last lock-order edge taken from the lock held
    /// there (see `lock_order.rs`): a loop taking the same inner lock under
    /// the same outer one finds its edge record without a lookup. Written
    /// only on nested acquisitions, never by a push; a stale entry (its
    /// key no longer matches) is just a miss.
    pub edge_memo: [EdgeMemo; MAX_HELD],
}

/// A remembered edge and its record. The two counter records stand for
/// (lock, site) at each end: a thread has one per lock, line and mode.
#[derive(Clone, Copy)]
pub struct EdgeMemo {
    pub from: *mut CounterRecord,
    pub to: *mut CounterRecord,
    pub flags: u32,
    pub record: *mut locksuit_format::EdgeRecord,
}

const NO_EDGE: EdgeMemo = EdgeMemo {
    from: core::ptr::null_mut(),
    to: core::ptr::null_mut(),
    flags: 0,
    record: core::ptr::null_mut(),
};

impl HeldStack {
    pub const fn new() -> Self {
        HeldStack {
            entries: [EMPTY; MAX_HELD + 1],
            len: 0,
            edge_memo: [NO_EDGE; MAX_HELD],
        }
    }

    #[cfg(test)]
    pub fn same_as(&self, other: &HeldStack) -> bool {
        let key = |e: &HeldEntry| {
            (
                e.addr, e.lock_id, e.flags, e.slot, e.counter, e.since_ns, e.shim_ns, e.relocks,
            )
        };
        self.len == other.len
            && self
                .entries
                .iter()
                .map(key)
                .eq(other.entries.iter().map(key))
    }

    /// Returns how many engagements were held before this one; `MAX_HELD`
    /// means the stack was full and the engagement is not tracked.
    #[inline(always)]
    pub fn push(&mut self, mut entry: HeldEntry) -> usize {
        if entry.since_ns != 0 {
            entry.flags |= HELD_TIMED;
        }
        let before = self.len;
        // SAFETY: `len <= MAX_HELD` always (it only grows below MAX_HELD),
        // and the array has MAX_HELD + 1 entries.
        unsafe { *self.entries.get_unchecked_mut(before) = entry };
        self.len = before + usize::from(before < MAX_HELD);
        before
    }

    /// [`push`](Self::push) of an untimed hold taken once (no flags): only
    /// the fields such a hold means are written, the others are left as
    /// the entry's last use left them (see `since_ns`).
    #[inline(always)]
    pub fn push_plain(
        &mut self,
        addr: u64,
        lock_id: u32,
        slot: *const ObjectSlot,
        counter: *mut CounterRecord,
    ) -> usize {
        let before = self.len;
        // SAFETY: as in `push`.
        unsafe { self.entries.get_unchecked_mut(before) }.set_plain(addr, lock_id, slot, counter);
        self.len = before + usize::from(before < MAX_HELD);
        before
    }

    /// [`push_plain`](Self::push_plain) onto an empty stack.
    #[inline(always)]
    pub fn push_plain_first(
        &mut self,
        addr: u64,
        lock_id: u32,
        slot: *const ObjectSlot,
        counter: *mut CounterRecord,
    ) {
        self.entries[0].set_plain(addr, lock_id, slot, counter);
        self.len = 1;
    }

    /// Whether no engagement is held.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The engagements held now, innermost last.
    /// Up to `out.len()` of the locks another thread's stack at `stack`
    /// holds, innermost first, as (lock id, counter record), read with
    /// `read` (which copies memory that may vanish, failing instead of
    /// faulting). `None` if it could not be read.
    pub fn peek(
        stack: *const HeldStack,
        read: impl Fn(u64, &mut [u8]) -> bool,
        out: &mut [(u32, *mut CounterRecord)],
    ) -> Option<usize> {
        let base = stack as u64;
        let mut len = [0u8; 8];
        if stack.is_null()
            || !read(
                base + core::mem::offset_of!(HeldStack, len) as u64,
                &mut len,
            )
        {
            return None;
        }
        let len = (u64::from_ne_bytes(len) as usize).min(MAX_HELD);
        let entries = base + core::mem::offset_of!(HeldStack, entries) as u64;
        let size = core::mem::size_of::<HeldEntry>();
        let mut n = 0;
        for i in (0..len).rev().take(out.len()) {
            let mut raw = [0u8; core::mem::size_of::<HeldEntry>()];
            if !read(entries + (i * size) as u64, &mut raw) {
                return None;
            }
            // SAFETY: `raw` holds the bytes of a HeldEntry (plain integers
            // and pointers; the pointers are only ever read through `read`).
            let e = unsafe { core::ptr::read_unaligned(raw.as_ptr().cast::<HeldEntry>()) };
            out[n] = (e.lock_id, e.counter);
            n += 1;
        }
        Some(n)
    }

    /// The number of engagements held, read without making a reference.
    ///
    /// # Safety
    /// `stack` points to a live `HeldStack` of the calling thread.
    #[inline(always)]
    pub unsafe fn depth(stack: *const HeldStack) -> usize {
        // SAFETY: per the contract; a plain word read.
        unsafe { core::ptr::addr_of!((*stack).len).read_volatile() }
    }

    /// The innermost engagement held now, if any.
    #[inline]
    pub fn top(&self) -> Option<&HeldEntry> {
        self.len.checked_sub(1).and_then(|i| self.entries.get(i))
    }

    pub fn entries(&self) -> &[HeldEntry] {
        &self.entries[..self.len]
    }

    /// The engagements held now and the edge memo, borrowed together.
    pub fn entries_and_memo(&mut self) -> (&[HeldEntry], &mut [EdgeMemo; MAX_HELD]) {
        (&self.entries[..self.len], &mut self.edge_memo)
    }

    /// Removes and returns the innermost engagement of `addr`.
    #[inline]
    pub fn take(&mut self, addr: u64) -> Option<HeldEntry> {
        // Locks are almost always released innermost first.
        if self.len > 0 && self.entries[self.len - 1].addr == addr {
            self.len -= 1;
            return Some(self.entries[self.len]);
        }
        let at = self.entries[..self.len]
            .iter()
            .rposition(|e| e.addr == addr)?;
        let entry = self.entries[at];
        self.entries.copy_within(at + 1..self.len, at);
        self.len -= 1;
        Some(entry)
    }

    /// The innermost engagement, if it is of `addr`.
    #[inline]
    pub fn innermost(&self, addr: u64) -> Option<&HeldEntry> {
        let top = self.len.checked_sub(1)?;
        // SAFETY: `len <= MAX_HELD` always (see `push`), so `top` is in the
        // array; unchecked, so the release path has no panic branch.
        let top = unsafe { self.entries.get_unchecked(top) };
        (top.addr == addr).then_some(top)
    }

    /// The engagement just pushed (on top of `held_before` others) is of a
    /// lock this thread already holds: it becomes a count on that hold, and
    /// its own entry goes (on a full stack it was never counted). Returns
    /// whether it was such a re-acquisition.
    pub fn fold_relock(&mut self, addr: u64, held_before: usize) -> bool {
        let below = held_before.min(MAX_HELD);
        let Some(hold) = self.entries[..below]
            .iter_mut()
            .rev()
            .find(|e| e.addr == addr)
        else {
            return false;
        };
        hold.relocks = if hold.flags & HELD_RELOCKED == 0 {
            1
        } else {
            hold.relocks.saturating_add(1)
        };
        hold.flags |= HELD_RELOCKED;
        self.len = below;
        true
    }

    /// An unlock of a lock this thread took more than once: one count
    /// less, and the lock stays held. Returns whether it was one.
    pub fn unwind_relock(&mut self, addr: u64) -> bool {
        match self.entries[..self.len]
            .iter_mut()
            .rev()
            .find(|e| e.addr == addr)
        {
            Some(hold) if hold.flags & HELD_RELOCKED != 0 => {
                hold.relocks -= 1;
                if hold.relocks == 0 {
                    hold.flags &= !HELD_RELOCKED;
                }
                true
            }
            _ => false,
        }
    }

    /// Drops the innermost engagement, which [`innermost`](Self::innermost)
    /// has just found (so the stack is not empty).
    #[inline(always)]
    pub fn pop_found(&mut self) {
        self.len = self.len.wrapping_sub(1);
    }

    /// Whether this thread holds `addr`.
    pub fn holds(&self, addr: u64) -> bool {
        self.entries().iter().any(|e| e.addr == addr)
    }

    /// Marks the innermost engagement of lock `lock_id` as handed over.
    pub fn mark_handover(&mut self, lock_id: u32) {
        if let Some(e) = self.entries[..self.len]
            .iter_mut()
            .rev()
            .find(|e| e.lock_id == lock_id)
        {
            e.flags |= HELD_HANDOVER;
        }
    }

    /// After fork: the locks are still held, but their counters belong to
    /// the parent's trace.
    pub fn forget_records(&mut self) {
        for e in &mut self.entries[..self.len] {
            e.counter = core::ptr::null_mut();
            e.slot = core::ptr::null();
            e.flags |= HELD_FORGOTTEN;
        }
        self.edge_memo = [NO_EDGE; MAX_HELD];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(addr: u64) -> HeldEntry {
        HeldEntry {
            addr,
            lock_id: addr as u32,
            ..EMPTY
        }
    }

    #[test]
    fn takes_innermost_matching_engagement_out_of_order() {
        let mut s = HeldStack::new();
        assert_eq!(s.push(entry(1)), 0);
        assert_eq!(s.push(entry(2)), 1);
        assert_eq!(s.push(entry(1)), 2);
        assert_eq!(s.take(2).map(|e| e.addr), Some(2));
        assert_eq!(s.take(1).map(|e| e.addr), Some(1));
        assert_eq!(s.take(1).map(|e| e.addr), Some(1));
        assert!(s.take(1).is_none());
    }

    #[test]
    fn a_lock_taken_again_is_a_count_on_its_hold() {
        let mut s = HeldStack::new();
        s.push(entry(1));
        s.push(entry(2));
        // Taken again, under another lock and right on top of itself.
        for _ in 0..3 {
            let before = s.push(entry(1));
            assert!(s.fold_relock(1, before));
        }
        let before = s.push(entry(2));
        assert!(s.fold_relock(2, before));
        assert_eq!(s.entries().len(), 2, "one entry per lock held");
        assert_eq!(s.entries()[0].relocks, 3);
        // A lock held once is not folded.
        let before = s.push(entry(3));
        assert!(!s.fold_relock(3, before));
        assert_eq!(s.take(3).map(|e| e.addr), Some(3));
        for _ in 0..3 {
            assert!(s.unwind_relock(1));
        }
        assert!(!s.unwind_relock(1), "the last unlock lets it go");
        assert!(s.unwind_relock(2));
        assert_eq!(s.take(2).map(|e| e.addr), Some(2));
        assert_eq!(s.take(1).map(|e| e.addr), Some(1));
        assert!(s.entries().is_empty());
    }

    #[test]
    fn every_uncommon_hold_has_a_flag_for_the_common_release_to_see() {
        let mut s = HeldStack::new();
        s.push(entry(1));
        assert_eq!(s.entries()[0].flags, 0, "a plain hold");
        s.push(HeldEntry {
            since_ns: 5,
            ..entry(2)
        });
        assert_eq!(s.entries()[1].flags, HELD_TIMED);
        let before = s.push(entry(1));
        assert!(s.fold_relock(1, before));
        assert_eq!(s.entries()[0].flags, HELD_RELOCKED);
        assert!(s.unwind_relock(1));
        assert_eq!(s.entries()[0].flags, 0, "no longer taken again");
        s.forget_records();
        assert!(s
            .entries()
            .iter()
            .all(|e| e.flags & HELD_FORGOTTEN != 0 && e.slot.is_null()));
    }

    #[test]
    fn a_plain_push_over_a_timed_hold_reads_as_untimed() {
        let mut s = HeldStack::new();
        s.push(HeldEntry {
            since_ns: 5,
            shim_ns: 7,
            ..entry(1)
        });
        let before = s.push(entry(1));
        assert!(s.fold_relock(1, before));
        s.take(1);
        // The same place, pushed plainly: what the last hold left there is
        // not this one's.
        s.push_plain(2, 2, core::ptr::null(), core::ptr::null_mut());
        assert!(!s.unwind_relock(2), "never taken again");
        let e = s.take(2).expect("held");
        assert_eq!((e.flags, e.timed()), (0, (0, 0)));
        // Taken again after a plain push: counted from one.
        s.push_plain(3, 3, core::ptr::null(), core::ptr::null_mut());
        let before = s.push(entry(3));
        assert!(s.fold_relock(3, before));
        assert_eq!(s.entries()[0].relocks, 1);
    }

    #[test]
    fn a_first_plain_push_is_the_innermost_and_only_hold() {
        let mut s = HeldStack::new();
        s.push(HeldEntry {
            since_ns: 9,
            flags: HELD_CONTENDED,
            ..entry(7)
        });
        s.take(7);
        assert!(s.is_empty());
        s.push_plain_first(8, 8, core::ptr::null(), core::ptr::null_mut());
        assert_eq!(s.entries().len(), 1);
        assert_eq!(s.innermost(8).map(|e| e.flags), Some(0));
        assert_eq!(s.push(entry(9)), 1, "one held before the next push");
        let e = s.take(8).expect("held");
        assert_eq!((e.addr, e.flags, e.timed()), (8, 0, (0, 0)));
    }

    #[test]
    fn a_full_stack_still_counts_relocks() {
        let mut s = HeldStack::new();
        for i in 0..MAX_HELD as u64 {
            s.push(entry(i + 1));
        }
        let before = s.push(entry(1));
        assert_eq!(before, MAX_HELD);
        assert!(s.fold_relock(1, before));
        assert_eq!(s.entries().len(), MAX_HELD);
        assert_eq!(s.entries()[0].relocks, 1);
        let before = s.push(entry(999));
        assert!(!s.fold_relock(999, before));
        assert!(!s.holds(999));
    }

    #[test]
    fn refuses_beyond_capacity() {
        let mut s = HeldStack::new();
        for i in 0..MAX_HELD as u64 {
            assert_eq!(s.push(entry(i + 1)), i as usize);
        }
        assert_eq!(s.push(entry(999)), MAX_HELD);
        assert_eq!(s.entries().len(), MAX_HELD);
        assert!(!s.holds(999));
    }
}
