//! Events: their kinds and what each kind's fields mean, and the record.

use super::*;

/// `EventRecord` kinds (`RecordHeader::aux` bits 0..8).
///
/// A contended acquisition: asked at `time`, got the lock at `time2`.
/// `seq` / `seq2`: the lock's release sequence then; `other`: the owner when
/// it asked (0 if unknown); `deadline`: for a timed call, its absolute
/// deadline in ns of the clock it named (`CLOCK_REALTIME` for the
/// `timed*` calls), else 0.
pub const EVENT_BLOCKED: u32 = 1;
/// A release that found threads waiting. `time`: the release; `time2`: when
/// the hold began if it was timed (else 0); `seq2`: the sequence after this
/// release, equal to the `seq2` of the acquisition that followed it;
/// `other`: threads waiting; `deadline`: here, the shim's own slow-path time
/// that fell inside the (timed) hold, for overhead compensation.
pub const EVENT_RELEASED: u32 = 2;
/// A condition wait: from `time` to `time2`. `other`: the mutex's lock id;
/// `deadline`: absolute deadline in ns of the wait's clock (0 if untimed);
/// outcome in aux bits 8..16; `seq`/`seq2`: the condition's notify sequence
/// at the start and the end.
pub const EVENT_COND_WAIT: u32 = 3;
/// A signal or broadcast that found waiters. `other`: threads waiting;
/// `seq2`: the condition's notify sequence after it; aux bit 16: broadcast.
pub const EVENT_NOTIFY: u32 = 4;
/// A timed acquisition that gave up: asked at `time`, gave up at `time2`;
/// fields as for `EVENT_BLOCKED`.
pub const EVENT_TIMED_OUT: u32 = 5;
/// An uncontended acquisition at `time` (full tracing only); `seq2`: the
/// lock's release sequence then.
pub const EVENT_ACQUIRED: u32 = 6;
/// An acquisition with an unusual result, at `time`: `other` is the error
/// number (`EOWNERDEAD`: a robust mutex whose owner died was taken and must
/// be made consistent; `ENOTRECOVERABLE`: refused, the mutex is unusable;
/// `EDEADLK`: an error-checking mutex relocked by its owner; `EINTR`: a
/// semaphore wait a signal interrupted; any other error).
pub const EVENT_OUTCOME: u32 = 7;

/// A blocking call beyond the lock API ([`crate::calls::BlockingCall`]
/// in `seq`) that blocked from `time` to `time2` for at least the header's
/// `block_min_us`. `site_id`: the calling line; `other`: its file
/// descriptor (`u32::MAX` if it takes none); aux bits 8..16: the
/// descriptor's kind (`FD_*`); `lock_id` and `seq2`: the innermost lock the
/// thread held meanwhile and the site that took it (0: none); `deadline`:
/// how many locks it held.
pub const EVENT_CALL: u32 = 8;

/// `LOCKSUIT_SWITCHES=1`: the thread was switched out at `time` and back in
/// at `time2` (the kernel's context-switch records), for at least the
/// header's `block_min_us`. `other`: `SWITCH_*` flags; `site_id`: with
/// `SWITCH_FAULT`, the user call chain of the major page fault it waited
/// for (0 otherwise). Some fall inside waits the hooks recorded (the
/// analyzer drops those).
pub const EVENT_SWITCH: u32 = 9;
/// A `pthread_create` that succeeded, at `time` (taken before the call):
/// `seq2` is the new thread's creation number (`ThreadRecord::create_serial`).
pub const EVENT_CREATED: u32 = 10;
/// A created thread's first recorded moment, at `time`: `seq2` is its
/// creation number, `other` the creating thread's tid.
pub const EVENT_STARTED: u32 = 11;
/// A created thread's last recorded moment (its exit), at `time`: `seq2`
/// is its creation number.
pub const EVENT_EXITED: u32 = 12;
/// A `pthread_join` that returned 0: began at `time`, returned at `time2`;
/// `site_id`: the joining line; `deadline`: here, the `pthread_t` joined
/// (the analyzer finds its thread, and so its creation number, from the
/// thread records).
pub const EVENT_JOINED: u32 = 13;
/// A semaphore post that found threads waiting (even under full tracing,
/// a post that found none writes nothing), at `time`: `seq2` is the semaphore's post count after it,
/// `other` the threads waiting. A wait that blocked and saw the count move
/// past its `seq` follows post `seq + 1`.
pub const EVENT_POSTED: u32 = 14;

/// A thread arrived at a barrier, at `time`: `seq` and `seq2` are its
/// arrival's number (from 1, counted since the barrier's initialisation).
pub const EVENT_ARRIVED: u32 = 15;
/// A thread left a barrier: arrived at `time`, left at `time2`; `seq` and
/// `seq2` are the first and last arrival numbers of its round (the
/// barrier's count apart), all of which came before it; both its own
/// arrival's number when the count is unknown.
pub const EVENT_DEPARTED: u32 = 16;

/// A lock or condition variable used against its rules, at `time`, at
/// `site_id` (0: the line could not be found); aux bits 8..16: what was
/// done (`MISUSE_*`). `other`: the thread that held the lock then (0: none,
/// or not known), or for a condition destroyed with waiters, how many
/// waited; `seq`: that condition's notify sequence then. Read from the
/// lock itself (glibc's fields), not from what the shim tracked, so a hold
/// the shim lost is no misuse.
pub const EVENT_MISUSE: u32 = 17;

/// How much of a contended wait the lock's holder spent on a CPU, sampled
/// by the waiter (at most one wait a millisecond per thread), written just
/// after the wait's `EVENT_BLOCKED`: the wait from `time` to `time2`;
/// `other`: the holder; `deadline`: nanoseconds the holder ran meanwhile
/// (its thread CPU clock at both ends); `seq`/`seq2`: as the wait's, so
/// the hold it waited for is the one whose release left `seq2`. With
/// [`HOLDER_ENDED`] in aux bits 8..16 the holder had ended by the wait's
/// end, and `deadline` is its CPU time when the wait began (its thread
/// record has its CPU time at its end).
pub const EVENT_HOLDER: u32 = 18;
/// aux flag of an [`EVENT_HOLDER`]: the holder ended before the waiter
/// could read its CPU clock again.
pub const HOLDER_ENDED: u32 = 1 << 8;

/// An unlock of a lock nobody held.
pub const MISUSE_UNLOCK_UNLOCKED: u32 = 1;
/// An unlock by a thread other than the one holding the lock (`other`).
pub const MISUSE_UNLOCK_NOT_OWNER: u32 = 2;
/// A destroy of a lock that was held (by `other`, when known).
pub const MISUSE_DESTROY_HELD: u32 = 3;
/// A destroy of a condition variable threads were waiting on (`other`).
pub const MISUSE_DESTROY_WAITED: u32 = 4;
/// A condition wait with a mutex the thread did not hold (`other`: the
/// thread that held it, 0 if nobody did).
pub const MISUSE_WAIT_UNHELD: u32 = 5;

/// Switched out while runnable (preempted).
pub const SWITCH_PREEMPTED: u32 = 1 << 0;
/// Switched out just after a major page fault: waiting for it.
pub const SWITCH_FAULT: u32 = 1 << 1;

/// Condition-wait outcomes (`RecordHeader::aux` bits 8..16 of a wait event).
pub const OUTCOME_NOTIFIED: u32 = 1;
pub const OUTCOME_TIMED_OUT: u32 = 2;
/// Returned 0 although no notify happened since the wait began.
pub const OUTCOME_SPURIOUS: u32 = 3;
pub const OUTCOME_OWNER_DIED: u32 = 4;
pub const OUTCOME_ERROR: u32 = 5;
/// The waiting thread was cancelled (the mutex is held again).
pub const OUTCOME_CANCELLED: u32 = 6;

/// aux bit of a notify event: a broadcast.
pub const NOTIFY_BROADCAST: u32 = 1 << 16;

/// One synchronisation event. By default written only where the shim
/// already reads the clock (contended paths, waits, notifies that wake
/// someone), so the uncontended path stays clock-free;
/// `LOCKSUIT_EVENTS=all` adds every acquisition and release. Threads write their own lanes; the
/// analyzer orders a lock's events by its release sequence (`seq`, `seq2`),
/// never by emission order or timestamps alone.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EventRecord {
    pub hdr: RecordHeader,
    /// The lock (or condition variable).
    pub lock_id: u32,
    /// The site of the operation.
    pub site_id: u32,
    pub seq: u32,
    pub seq2: u32,
    pub other: u32,
    /// The thread that wrote it (event blocks are shared by the threads
    /// that use a lane in turn).
    pub tid: u32,
    /// Monotonic nanoseconds.
    pub time: u64,
    pub time2: u64,
    pub deadline: u64,
    /// The thread's time spent in the shim's own slow paths (site capture,
    /// trace growth) so far, for overhead compensation.
    pub shim_ns: u64,
}
