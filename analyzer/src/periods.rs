//! Blocking periods: every recorded stretch of time a thread spent blocked,
//! whatever it waited for — a lock, a condition variable, or a blocking
//! call beyond the lock API (sleeps, polls, I/O, joins, barriers). Read
//! from the events in the same pass as contention (see `contention.rs`);
//! what each period means is worked out in `stops.rs`.

use locksuit_format::*;

/// What a thread was blocked in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Blocker {
    /// Acquiring the lock with this raw id.
    Lock,
    /// A condition wait (with its mutex's re-acquisition).
    Cond,
    /// A blocking call beyond the lock API.
    Call(BlockingCall),
}

/// One blocking period of one thread. Kept small: a run can have millions.
#[derive(Clone, Copy, Debug)]
pub struct Period {
    pub tid: u32,
    /// Monotonic nanoseconds.
    pub start: u64,
    pub end: u64,
    pub blocker: Blocker,
    /// The raw site of the blocking line (0: unknown).
    pub site: u32,
    /// Lock: the lock; cond: the condition variable; call: the innermost
    /// lock held meanwhile (0: none). Raw ids.
    pub object: u32,
    /// Lock: the thread that held it when the wait began (0: unknown);
    /// call: the raw site that took the held lock.
    pub other: u32,
    /// Call: what its descriptor was (`FD_*`).
    pub fd_kind: u8,
    /// A timed lock wait that gave up.
    pub timed_out: bool,
}

/// Collects the periods as the events go by.
#[derive(Default)]
pub struct Collector {
    pub periods: Vec<Period>,
}

impl Collector {
    pub fn event(&mut self, e: &EventRecord) {
        let kind = e.hdr.aux & 0xff;
        let (blocker, other, fd_kind) = match kind {
            EVENT_BLOCKED | EVENT_TIMED_OUT => (Blocker::Lock, e.other, 0),
            EVENT_COND_WAIT => (Blocker::Cond, 0, 0),
            EVENT_CALL => match BlockingCall::from_u16(e.seq as u16) {
                Some(call) => (Blocker::Call(call), e.seq2, (e.hdr.aux >> 8 & 0xff) as u8),
                None => return, // a call this analyzer does not know
            },
            _ => return,
        };
        self.periods.push(Period {
            tid: e.tid,
            start: e.time,
            end: e.time2.max(e.time),
            blocker,
            site: e.site_id,
            object: e.lock_id,
            other,
            fd_kind,
            timed_out: kind == EVENT_TIMED_OUT,
        });
    }
}
