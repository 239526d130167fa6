//! A lane's calls from the CPython interpreter on its locks (semaphores up
//! to 3.12), by `.py` path: what the hot cache is to other calls.
//!
//! Every `.py` line reaches a CPython lock through the same native call,
//! so the hot cache, whose entries are checked against the native stack
//! only, cannot tell them apart: such calls never enter it (see
//! `sites.rs`). Here an entry is found by the lock, the return address,
//! the mode and thread, and the whole context, which hashes the thread's
//! innermost Python frames — all known by then — and leads straight to the
//! lock's slot and the thread's counter for that line, skipping the lock
//! table and the counter index.
//!
//! The lane also keeps the last such call, which the thread's next one
//! judges (`python_holds.rs`).

use crate::recorder::tables::objects::ObjectSlot;

/// Entries per lane (a power of two).
const SLOTS: usize = 32;

/// One call path's lock and counter; all zero bits is empty (tag 0 is
/// never a lane's).
#[derive(Clone, Copy)]
pub struct PythonCall {
    pub addr: u64,
    ret: u64,
    context: u64,
    /// As in the hot cache: `generation << MODE_BITS | mode`, so an entry
    /// of the lane's previous thread never matches.
    pub tag: u32,
    /// The lock's identity when cached: a lock destroyed and made again at
    /// the same address is another.
    pub lock_id: u32,
    pub slot: *const ObjectSlot,
    pub counter: *mut u8,
}

pub struct PythonCalls {
    entries: [PythonCall; SLOTS],
    /// The thread's last call from the interpreter not yet judged (`addr`
    /// 0: none).
    last: PythonCall,
}

const EMPTY: PythonCall = PythonCall {
    addr: 0,
    ret: 0,
    context: 0,
    tag: 0,
    lock_id: 0,
    slot: core::ptr::null(),
    counter: core::ptr::null_mut(),
};

fn home(addr: u64, context: u64) -> usize {
    ((addr ^ context).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SLOTS.trailing_zeros())) as usize
}

impl PythonCalls {
    /// The cached lock slot and counter of this call path, if its lock
    /// still lives (not destroyed and made again since).
    pub fn find(
        &self,
        addr: u64,
        (ret, context): (u64, u64),
        tag: u32,
    ) -> Option<(&'static ObjectSlot, *mut u8)> {
        let e = &self.entries[home(addr, context)];
        if (e.addr, e.ret, e.context, e.tag) != (addr, ret, context, tag) {
            return None;
        }
        // SAFETY: slots live in the object table for the life of the process.
        let slot = unsafe { &*e.slot };
        (slot.id() == e.lock_id).then_some((slot, e.counter))
    }

    pub fn remember(
        &mut self,
        (addr, ret, context): (u64, u64, u64),
        tag: u32,
        (slot, lock_id, counter): (&ObjectSlot, u32, *mut u8),
    ) {
        self.entries[home(addr, context)] = PythonCall {
            addr,
            ret,
            context,
            tag,
            lock_id,
            slot,
            counter,
        };
    }

    /// Notes the call now being made, to be judged by the next.
    pub fn set_last(
        &mut self,
        addr: u64,
        tag: u32,
        (slot, lock_id, counter): (&ObjectSlot, u32, *mut u8),
    ) {
        self.last = PythonCall {
            addr,
            tag,
            lock_id,
            slot,
            counter,
            ..EMPTY
        };
    }

    /// The last call not yet judged, forgotten as it is returned.
    pub fn take_last(&mut self) -> Option<PythonCall> {
        let last = core::mem::replace(&mut self.last, EMPTY);
        (last.addr != 0).then_some(last)
    }

    /// A new thread's lane: nothing of the previous one's is judged.
    pub fn forget_last(&mut self) {
        self.last = EMPTY;
    }
}
