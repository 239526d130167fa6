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
    /// Switched out by the kernel (`LOCKSUIT_SWITCHES=1`): preempted, or
    /// waiting for a page fault, or blocked in a way the hooks cannot see.
    Switch { preempted: bool, fault: bool },
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
    /// Lock waits: the thread whose release let this one in, and the raw
    /// site where it had taken the lock (0: not known). Condition waits:
    /// the thread whose notify ended it, and the notify's site.
    pub released_by: (u32, u32),
    /// When that release (or notify) was made (0: not known).
    pub released_at: u64,
}

/// One thread's pass through a barrier round: it arrived at `start`, left
/// at `end`; the round's last arrival (its thread and time) let it go.
#[derive(Clone, Copy, Debug)]
pub struct Round {
    pub tid: u32,
    pub barrier: u32,
    pub site: u32,
    pub start: u64,
    pub end: u64,
    pub last: Option<(u32, u64)>,
    /// The round's last arrival number.
    last_arrival: u32,
}

/// Collects the periods as the events go by.
#[derive(Default)]
pub struct Collector {
    pub periods: Vec<Period>,
    /// Releases that found waiters, by (lock, sequence after them), until
    /// the acquisition they let in is seen (a release is written before the
    /// acquisition it ends; the merged stream keeps that order).
    releases: rustc_hash::FxHashMap<(u32, u32), (u32, u32, u64)>,
    /// Barrier passes, with the arrival that ended each round.
    pub rounds: Vec<Round>,
    /// Arrivals by (barrier, arrival number): who and when. A departure
    /// is written at the time its thread arrived, so the merged stream can
    /// bring it before the round's last arrival: rounds are matched at the
    /// end ([`Collector::finish_rounds`]).
    arrivals: rustc_hash::FxHashMap<(u32, u32), (u32, u64)>,
    /// Under `LOCKSUIT_EVENTS=all`, every acquisition that did not wait,
    /// with the release it followed.
    pub handoffs: Vec<Handoff>,
    /// Releases that found nobody waiting, until the acquisition after
    /// them (written only with every operation).
    quiet_releases: rustc_hash::FxHashMap<(u32, u32), (u32, u64)>,
    /// Notifies that found waiters, by (condition, its notify sequence
    /// after them): who, from where and when. A condition wait comes after
    /// the notifies made during it in the merged stream.
    notifies: rustc_hash::FxHashMap<(u32, u32), (u32, u32, u64)>,
    /// Joins that returned, by (joining thread, start, end): the
    /// `pthread_t` joined. A join that blocked long enough is also a
    /// blocking-call period with the same times.
    pub joins: rustc_hash::FxHashMap<(u32, u64, u64), u64>,
}

/// An acquisition that did not wait: `tid` took `lock` at `at` (from
/// `site`) after `after` (thread and time) released it.
#[derive(Clone, Copy, Debug)]
pub struct Handoff {
    pub tid: u32,
    pub lock: u32,
    pub site: u32,
    pub at: u64,
    pub after: (u32, u64),
}

/// Most releases kept waiting for their acquisition: one whose acquisition
/// was never recorded must not be kept forever.
const RELEASES_KEPT: usize = 1 << 16;

/// Most barrier arrivals kept for matching (24 bytes each).
const ARRIVALS_KEPT: usize = 1 << 20;

/// Keeps `value` under `key` until its match is seen, in a map of at most
/// `most` entries: one whose match never comes must not be kept forever,
/// so a full map starts again.
fn keep<K: std::hash::Hash + Eq, V>(
    map: &mut rustc_hash::FxHashMap<K, V>,
    most: usize,
    key: K,
    value: V,
) {
    if map.len() >= most {
        map.clear();
    }
    map.insert(key, value);
}

/// Most notifies looked at for one condition wait.
const NOTIFIES_LOOKED_AT: u32 = 64;

impl Collector {
    /// The notify that ended condition wait `e`: the first made during it
    /// (its condition's sequence moved from `seq` to `seq2` meanwhile),
    /// and before it returned. A broadcast woke every waiter; of several
    /// waiters of one signal, which it woke is not recorded, and the first
    /// signal is taken for each. None for a wait no notify ended (timed
    /// out, woken spuriously) or whose notify was not kept.
    fn notifier(&self, e: &EventRecord) -> Option<(u32, u32, u64)> {
        let made = e.seq2.wrapping_sub(e.seq).min(NOTIFIES_LOOKED_AT);
        (1..=made)
            .filter_map(|i| self.notifies.get(&(e.lock_id, e.seq.wrapping_add(i))))
            .find(|n| n.2 <= e.time2.max(e.time))
            .copied()
    }

    /// Each barrier round's last arrival, once every event has been seen.
    pub fn finish_rounds(&mut self) {
        for r in &mut self.rounds {
            r.last = self.arrivals.get(&(r.barrier, r.last_arrival)).copied();
        }
        self.arrivals = Default::default();
    }

    pub fn event(&mut self, e: &EventRecord) {
        let kind = e.hdr.aux & 0xff;
        if kind == EVENT_RELEASED && e.other > 0 {
            keep(
                &mut self.releases,
                RELEASES_KEPT,
                (e.lock_id, e.seq2),
                (e.tid, e.site_id, e.time),
            );
            return;
        }
        if kind == EVENT_RELEASED {
            keep(
                &mut self.quiet_releases,
                RELEASES_KEPT,
                (e.lock_id, e.seq2),
                (e.tid, e.time),
            );
            return;
        }
        if kind == EVENT_ACQUIRED {
            if let Some(after) = self.quiet_releases.remove(&(e.lock_id, e.seq2)) {
                self.handoffs.push(Handoff {
                    tid: e.tid,
                    lock: e.lock_id,
                    site: e.site_id,
                    at: e.time,
                    after,
                });
            }
            return;
        }
        if kind == EVENT_NOTIFY {
            keep(
                &mut self.notifies,
                RELEASES_KEPT,
                (e.lock_id, e.seq2),
                (e.tid, e.site_id, e.time),
            );
            return;
        }
        if kind == EVENT_JOINED {
            self.joins.insert((e.tid, e.time, e.time2), e.deadline);
            return;
        }
        if kind == EVENT_ARRIVED {
            keep(
                &mut self.arrivals,
                ARRIVALS_KEPT,
                (e.lock_id, e.seq),
                (e.tid, e.time),
            );
            return;
        }
        if kind == EVENT_DEPARTED {
            // The round is arrivals seq..=seq2; its last let everyone go.
            // One round's threads all depart after it: it is not removed.
            self.rounds.push(Round {
                tid: e.tid,
                barrier: e.lock_id,
                site: e.site_id,
                start: e.time,
                end: e.time2.max(e.time),
                last: None,
                last_arrival: e.seq2,
            });
            return;
        }
        let (blocker, other, fd_kind) = match kind {
            EVENT_BLOCKED | EVENT_TIMED_OUT => (Blocker::Lock, e.other, 0),
            EVENT_COND_WAIT => (Blocker::Cond, 0, 0),
            EVENT_SWITCH => {
                let preempted = e.other & SWITCH_PREEMPTED != 0;
                let fault = e.other & SWITCH_FAULT != 0;
                (Blocker::Switch { preempted, fault }, 0, 0)
            }
            EVENT_CALL => match BlockingCall::from_u16(e.seq as u16) {
                Some(call) => (Blocker::Call(call), e.seq2, (e.hdr.aux >> 8 & 0xff) as u8),
                None => return, // a call this analyzer does not know
            },
            _ => return,
        };
        let (by, site, released_at) = match kind {
            EVENT_BLOCKED => self
                .releases
                .remove(&(e.lock_id, e.seq2))
                .unwrap_or((0, 0, 0)),
            EVENT_COND_WAIT => self.notifier(e).unwrap_or((0, 0, 0)),
            _ => (0, 0, 0),
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
            released_by: (by, site),
            released_at,
        });
    }
}
