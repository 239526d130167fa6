//! Misuse: locks and condition variables used against their rules, each a
//! finding of kind `misuse` at the line that did it.
//!
//! What the shim saw ([`EVENT_MISUSE`], read from the lock's own state, not
//! from what it tracked): an unlock of a lock nobody held or another thread
//! held, a destroy of a held lock or of a condition variable threads were
//! blocked on, a condition wait with a mutex the thread did not hold. What
//! the events show: one condition variable waited on with two different
//! mutexes at the same time (undefined: POSIX binds a condition to one
//! mutex while any thread waits on it), and an error-checking mutex
//! relocked by its holder (`EDEADLK`). A normal mutex relocked by its
//! holder never returns: that is a `deadlock`.

use crate::analysis::deadlocks::Ids;
use crate::model::*;
use locksuit_format::*;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

pub const FINDING_MISUSE: &str = "misuse";

/// What was done, for the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum What {
    UnlockUnlocked,
    UnlockNotOwner,
    DestroyHeld,
    /// Destroyed while threads were blocked on it (not merely woken).
    DestroyWaited,
    WaitUnheld,
    /// Waited on with two mutexes at once: `other` is the second mutex.
    TwoMutexes,
    /// An error-checking mutex relocked by its holder.
    Relocked,
}

/// One kind of misuse of one object at one line, as recorded (raw ids).
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    pub what: What,
    /// The lock, or the condition variable.
    pub object: u32,
    pub site: u32,
    pub count: u64,
    /// The first time: by whom, when, and the other thread (the holder),
    /// mutex (two mutexes) or waiter count it involved.
    pub tid: u32,
    pub time: u64,
    pub other: u32,
    /// `DestroyWaited`: the condition's notify sequence at the destroy.
    pub seq: u32,
    /// `TwoMutexes`: the mutex of this line's wait, and the line that
    /// waited with the other mutex.
    pub mutex: u32,
    pub other_site: u32,
    /// `DestroyWaited`: a wait begun before the destroy, not notified
    /// since, was seen to go on past it (else only a wait still under way
    /// as the trace ends can show the waiters were blocked).
    pub blocked_seen: bool,
}

/// A condition's waits so far with one mutex: the latest end of any
/// (waits arrive in order of their start), and where one was made.
#[derive(Clone, Copy)]
struct WaitsWith {
    mutex: u32,
    latest_end: u64,
    site: u32,
}

/// Reads the events once, with the rest of the event pass.
#[derive(Default)]
pub struct Collector {
    seen: FxHashMap<Key, Seen>,
    waits: FxHashMap<u32, SmallVec<[WaitsWith; 2]>>,
    /// Each condition's destroys while threads waited on it: (when, its
    /// notify sequence then, the misuse it is), to tell blocked waiters
    /// from woken ones by the waits that end after it.
    destroys: FxHashMap<u32, Vec<(u64, u32, Key)>>,
}

/// What a misuse is filed under: what was done, to which object, where.
type Key = (What, u32, u32);

impl Collector {
    fn note(&mut self, (what, object, site): Key, e: &EventRecord, other: u32) {
        let entry = self.seen.entry((what, object, site)).or_insert(Seen {
            what,
            object,
            site,
            count: 0,
            tid: e.tid,
            time: e.time,
            other,
            seq: e.seq,
            mutex: 0,
            other_site: 0,
            blocked_seen: false,
        });
        entry.count += 1;
    }

    pub fn event(&mut self, e: &EventRecord) {
        match e.hdr.aux & 0xff {
            EVENT_MISUSE => {
                let what = match (e.hdr.aux >> 8) & 0xff {
                    MISUSE_UNLOCK_UNLOCKED => What::UnlockUnlocked,
                    MISUSE_UNLOCK_NOT_OWNER => What::UnlockNotOwner,
                    MISUSE_DESTROY_HELD => What::DestroyHeld,
                    MISUSE_DESTROY_WAITED => What::DestroyWaited,
                    MISUSE_WAIT_UNHELD => What::WaitUnheld,
                    _ => return,
                };
                let key = (what, e.lock_id, e.site_id);
                self.note(key, e, e.other);
                if what == What::DestroyWaited {
                    self.destroys
                        .entry(e.lock_id)
                        .or_default()
                        .push((e.time, e.seq, key));
                }
            }
            EVENT_OUTCOME if e.other == libc::EDEADLK as u32 => {
                self.note((What::Relocked, e.lock_id, e.site_id), e, 0);
            }
            EVENT_COND_WAIT => self.cond_wait(e),
            _ => {}
        }
    }

    /// A condition wait from `time` to `time2` with mutex `other`: misuse
    /// if a wait with another mutex was still under way when it began.
    /// Events arrive in the order they were written, a wait's when it
    /// ended: an earlier wait overlaps this one if it ended after this one
    /// began.
    fn cond_wait(&mut self, e: &EventRecord) {
        let (cond, mutex) = (e.lock_id, e.other);
        // A destroy while this wait went on, with no notify since it began:
        // the waiter was blocked, not on its way out.
        if let Some(destroys) = self.destroys.get(&cond) {
            for &(when, seq, key) in destroys {
                if e.time < when && when < e.time2 && e.seq == seq {
                    if let Some(s) = self.seen.get_mut(&key) {
                        s.blocked_seen = true;
                    }
                }
            }
        }
        if mutex == 0 {
            return;
        }
        let uses = self.waits.entry(cond).or_default();
        let clash = uses
            .iter()
            .find(|u| u.mutex != mutex && u.latest_end > e.time)
            .copied();
        match uses.iter_mut().find(|u| u.mutex == mutex) {
            Some(u) => u.latest_end = u.latest_end.max(e.time2),
            None => uses.push(WaitsWith {
                mutex,
                latest_end: e.time2,
                site: e.site_id,
            }),
        }
        if let Some(earlier) = clash {
            let key = (What::TwoMutexes, cond, e.site_id);
            self.note(key, e, earlier.mutex);
            if let Some(s) = self.seen.get_mut(&key) {
                s.mutex = mutex;
                s.other_site = earlier.site;
            }
        }
    }

    /// What was seen. A destroy of a condition whose waiters had all been
    /// notified before it (they were only on their way out) is allowed, and
    /// dropped; `pending` are the condition waits still under way as the
    /// trace ends (condition id, since).
    pub fn finish(self, pending: &[(u32, u64)]) -> Vec<Seen> {
        let mut out: Vec<Seen> = self
            .seen
            .into_values()
            .filter(|s| {
                s.what != What::DestroyWaited
                    || s.blocked_seen
                    || pending
                        .iter()
                        .any(|&(cond, since)| cond == s.object && since < s.time)
            })
            .collect();
        out.sort_by_key(|s| (s.time, s.what));
        out
    }
}

/// The locks misused, for the findings that must not call them unneeded.
pub fn locks(seen: &[Seen], lock: &dyn Fn(u32) -> Option<LockId>) -> Vec<LockId> {
    let mut out: Vec<LockId> = seen
        .iter()
        .flat_map(|s| match s.what {
            What::DestroyWaited => [None, None],
            What::TwoMutexes => [lock(s.mutex), lock(s.other)],
            _ => [lock(s.object), None],
        })
        .flatten()
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// One finding per kind of misuse, object and line; `kind` says what
/// kind of lock a report id is.
pub fn findings(seen: &[Seen], n: &Ids, kind: &dyn Fn(LockId) -> Option<LockKind>) -> Vec<Finding> {
    seen.iter().map(|s| finding(s, n, kind)).collect()
}

fn finding(s: &Seen, n: &Ids, kind: &dyn Fn(LockId) -> Option<LockKind>) -> Finding {
    let lock = (n.lock)(s.object);
    let object = match s.what {
        What::DestroyWaited | What::TwoMutexes => {
            (n.cond)(s.object).unwrap_or_else(|| "a condition variable".into())
        }
        _ => lock.map_or_else(|| "a lock".to_string(), |l| l.to_string()),
    };
    let who = n.thread(s.tid);
    let at = (n.line)(s.site);
    let times = match s.count {
        1 => String::new(),
        k => format!(" ({k} times)"),
    };
    let message = match s.what {
        What::UnlockUnlocked => format!(
            "{who} unlocked {object} at {at}{times}, which no thread held: unlocking a lock that is not locked is undefined (a normal mutex may be left broken, letting two threads in at once). Find the unlock without its lock: an early return, or an unlock on a path that never took it."
        ),
        What::UnlockNotOwner => format!(
            "{who} unlocked {object} at {at}{times} while {} held it: only the thread that locked a mutex may unlock it (for an error-checking or recursive one the unlock fails with EPERM; for a normal one the result is undefined). To hand work between threads, use a semaphore or a condition variable.",
            n.thread(s.other)
        ),
        What::DestroyHeld => format!(
            "{who} destroyed {object} at {at}{times} while {}: destroying a held lock is undefined (glibc refuses a locked mutex with EBUSY and leaves it locked; an rwlock or spinlock it destroys regardless). Unlock it, and make sure no thread can still take it, first.",
            match s.other {
                0 => "a thread held it".to_string(),
                t if t == s.tid => "it held it itself".to_string(),
                t => format!("{} held it", n.thread(t)),
            }
        ),
        What::DestroyWaited => format!(
            "{who} destroyed {object} at {at}{times} while {} blocked on it without a signal since: destroying a condition variable threads wait on is undefined (glibc's destroy then waits for them, which may be forever). Wake them and let them return first.",
            crate::base::words::count(u64::from(s.other), "thread was", "threads were")
        ),
        What::WaitUnheld => format!(
            "{who} waited on a condition variable at {at}{times} with {object}, which {}: a condition wait must be called with its mutex locked by the waiting thread, or a wake-up between the test and the wait is lost.",
            if s.other == 0 {
                "no thread held".to_string()
            } else {
                format!("{} held", n.thread(s.other))
            }
        ),
        What::TwoMutexes => {
            let second = (n.lock)(s.other).map_or_else(|| "another mutex".into(), |l| l.to_string());
            format!(
                "{object} was waited on with two mutexes at once: {who} at {at} with {} while another thread waited at {} with {second}: POSIX binds a condition variable to one mutex while threads wait on it; waits with two mutexes are undefined. Use one mutex for every wait on it.",
                (n.lock)(s.mutex).map_or_else(|| "one mutex".into(), |l| l.to_string()),
                (n.line)(s.other_site),
            )
        }
        What::Relocked => match lock.and_then(kind) {
            Some(LockKind::Rwlock) => format!(
                "{who} locked the rwlock {object} at {at}{times} while holding it for writing: the call failed with EDEADLK (glibc refuses a writer's relock; where it cannot tell, the thread hangs for good). Take it once: an rwlock does not nest."
            ),
            Some(LockKind::Mutex) => format!(
                "{who} locked the error-checking mutex {object} at {at}{times} while holding it: the call failed with EDEADLK (a normal mutex would have hung the thread for good). Take it once, or make it recursive if nesting is meant."
            ),
            _ => format!(
                "{who} locked {object} at {at}{times} while holding it: the call failed with EDEADLK. Take it once."
            ),
        },
    };
    let mut sites: Vec<SiteId> = [s.site, s.other_site]
        .iter()
        .filter_map(|&r| (r != 0).then(|| (n.site)(r)).flatten())
        .collect();
    sites.dedup();
    let locks: Vec<LockId> = match s.what {
        What::DestroyWaited => Vec::new(),
        What::TwoMutexes => [(n.lock)(s.mutex), (n.lock)(s.other)]
            .into_iter()
            .flatten()
            .collect(),
        _ => lock.into_iter().collect(),
    };
    Finding {
        kind: FINDING_MISUSE,
        lock: locks.first().copied(),
        sites,
        message,
        engagements: s.count,
        locks,
        ..Finding::default()
    }
}
