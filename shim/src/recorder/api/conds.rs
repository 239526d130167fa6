//! Condition variables: waits (with the mutex handed over and re-engaged)
//! and notifies, counted per thread, line and mutex, and written as events.

use crate::recorder::api::identity::object;
use crate::recorder::api::lean;
use crate::recorder::api::locks::{acquired, released};
use crate::recorder::api::prepared::{prepare, Hold, How, Prepared};
use crate::recorder::api::thread_lane::current_lane;
use crate::recorder::api::threads::{wait_ended, wait_started, PendingWait};
use crate::recorder::base::caller::Caller;
use crate::recorder::features::events;
use crate::recorder::identities::sites::{self, context_of, PythonLines};
use crate::recorder::tables::held::HELD_HANDOVER;
use crate::recorder::tables::lanes::{Lane, MODE_COND_NOTIFY, MODE_COND_WAIT};
use crate::recorder::tables::objects::ObjectSlot;
use crate::recorder::tables::thread_state::InHook;
use crate::recorder::time::clock::now_ns;
use core::sync::atomic::Ordering;
use locksuit_format::*;

/// A condition wait, prepared before the real call.
pub struct CondWait {
    cond: &'static ObjectSlot,
    cond_id: u32,
    record: *mut CondRecord,
    mutex: Option<Prepared>,
}

/// This thread's record for condition `cond_id` at the call site. `key`
/// stands for the return address in the index (a wait's key also names
/// the mutex: one line may wait with different mutexes).
fn cond_record(
    lane: &mut Lane,
    cond_id: u32,
    key: u64,
    caller: Caller,
    mode: u32,
    mutex_id: u32,
) -> Option<*mut CondRecord> {
    let context = context_of(lane, caller, PythonLines::No);
    if let Some(p) = lane.find(cond_id, key, context, mode) {
        return Some(p.cast());
    }
    let site_id = sites::site_id(lane, caller, context, PythonLines::No);
    let record = CondRecord {
        hdr: RecordHeader {
            kind: RecordKind::Cond as u16,
            size: core::mem::size_of::<CondRecord>() as u16,
            aux: mode,
        },
        cond_id,
        site_id,
        mutex_id,
        ..Default::default()
    };
    let p = lane.append(&record, &[])?;
    lane.insert(cond_id, key, context, mode, p.cast());
    Some(p)
}

pub fn cond_prepare(
    g: &InHook,
    cond_addr: u64,
    mutex_addr: u64,
    caller: Caller,
) -> Option<CondWait> {
    // The mutex first: `prepare` takes this thread's lane for itself, and
    // keeps only a raw pointer to it, so the lane below is not aliased.
    let mutex = prepare(g, mutex_addr, ObjectKind::Mutex, MODE_EXCLUSIVE, caller);
    let lane = current_lane(g)?;
    let cond = object(lane, cond_addr, ObjectKind::Cond)?;
    let mutex_id = mutex.as_ref().map_or(0, |m| m.lock_id());
    let key = caller.ret ^ ((mutex_id as u64) << 48);
    let record = cond_record(lane, cond.id, key, caller, MODE_COND_WAIT, mutex_id)?;
    Some(CondWait {
        cond: cond.slot,
        cond_id: cond.id,
        record,
        mutex,
    })
}

/// A condition wait under way. Ended by [`CondWaitInFlight::end`] when the
/// real wait returns; if instead the thread is cancelled in the wait, the
/// forced unwind drops it, and since glibc re-acquires the mutex before
/// unwinding (as POSIX requires), the drop records that re-acquisition.
pub struct CondWaitInFlight<'g> {
    guard: &'g InHook,
    wait: CondWait,
    started: u64,
    /// The condition's notify sequence when the wait began.
    seq: u32,
    /// Absolute deadline (ns on the wait's clock), 0 if untimed.
    deadline: u64,
    ended: bool,
}

impl<'g> CondWaitInFlight<'g> {
    pub fn begin(guard: &'g InHook, wait: CondWait, deadline: u64) -> Self {
        let seq = wait.cond.seq.load(Ordering::Relaxed);
        let started = cond_wait_begin(guard, &wait, deadline);
        CondWaitInFlight {
            guard,
            wait,
            started,
            seq,
            deadline,
            ended: false,
        }
    }

    pub fn end(mut self, rc: i32) {
        self.ended = true;
        self.finish(Some(rc));
    }

    fn finish(&self, rc: Option<i32>) {
        let now = cond_wait_end(self.guard, &self.wait, self.started, rc.unwrap_or(0));
        let seq_end = self.wait.cond.seq.load(Ordering::Relaxed);
        let outcome = match rc {
            None => OUTCOME_CANCELLED,
            Some(0) if seq_end == self.seq => OUTCOME_SPURIOUS,
            Some(0) => OUTCOME_NOTIFIED,
            Some(libc::ETIMEDOUT) => OUTCOME_TIMED_OUT,
            Some(libc::EOWNERDEAD) => OUTCOME_OWNER_DIED,
            Some(_) => OUTCOME_ERROR,
        };
        let mutex_id = self.wait.mutex.as_ref().map_or(0, |m| m.lock_id());
        // SAFETY: the record is in this thread's lane; only this thread writes it.
        let site = unsafe { (*self.wait.record).site_id };
        if let Some(lane) = current_lane(self.guard) {
            events::cond_wait(
                lane,
                self.wait.cond_id,
                site,
                mutex_id,
                outcome,
                (self.seq, seq_end),
                (self.started, now),
                self.deadline,
            );
        }
    }
}

impl Drop for CondWaitInFlight<'_> {
    fn drop(&mut self) {
        if !self.ended {
            // Cancelled: the mutex is held again, as after a normal wake-up.
            self.finish(None);
        }
    }
}

/// Just before the real wait (until `deadline`, 0 if untimed): the mutex
/// is handed over.
fn cond_wait_begin(g: &InHook, w: &CondWait, deadline: u64) -> u64 {
    if let Some(m) = &w.mutex {
        w.cond.holder.store(m.lock_id(), Ordering::Relaxed);
        if crate::config::lean() {
            // No held entry: the release that names this thread's line
            // for the mutex's waiters, if its lock word says there are any.
            // SAFETY: the program passed the mutex to a condition wait,
            // which unlocks it (reading its words first).
            if unsafe { crate::glibc::mutex_may_have_waiters(m.addr()) } {
                lean::released_with_waiters(g, m.addr());
            }
        } else if !released(g, m.addr(), HELD_HANDOVER) {
            // SAFETY: the record is in this thread's lane; only this thread writes it.
            let site = unsafe { (*w.record).site_id };
            crate::recorder::api::misuse::wait_unheld(g, m.addr(), site);
        }
    }
    w.cond.waiters.fetch_add(1, Ordering::Relaxed);
    let since_ns = now_ns();
    if let Some(lane) = current_lane(g) {
        let pending = PendingWait {
            kind: WAIT_COND,
            object: w.cond_id,
            // SAFETY: the record is in this thread's lane; only this thread writes it.
            site: unsafe { (*w.record).site_id },
            holder: w.mutex.as_ref().map_or(0, |m| m.lock_id()),
            since_ns,
            target: 0,
            deadline,
        };
        wait_started(lane, pending, g.thread().held().entries());
    }
    since_ns
}

/// After the real wait returned `rc` (the mutex is ours again); returns now.
fn cond_wait_end(g: &InHook, w: &CondWait, started: u64, rc: i32) -> u64 {
    w.cond.waiters.fetch_sub(1, Ordering::Relaxed);
    if let Some(lane) = current_lane(g) {
        wait_ended(lane);
    }
    let now = now_ns();
    // SAFETY: the record is in this thread's lane; only this thread writes it.
    let record = unsafe { &mut *w.record };
    record.waits += 1;
    record.wait_ns += now.saturating_sub(started);
    if rc == libc::ETIMEDOUT {
        record.timeouts += 1;
    }
    if let Some(m) = &w.mutex {
        if rc == 0 || rc == libc::ETIMEDOUT || rc == libc::EOWNERDEAD {
            let hold = if crate::config::lean() {
                Hold::Lean
            } else {
                Hold::Exclusive
            };
            acquired(g, m, How::CondReacquire { now }, hold);
        }
    }
    now
}

/// `pthread_cond_signal` / `_broadcast` on the condition at `cond_addr`.
pub fn cond_notified(g: &InHook, cond_addr: u64, caller: Caller, broadcast: bool) {
    let Some(lane) = current_lane(g) else { return };
    let Some(cond) = object(lane, cond_addr, ObjectKind::Cond) else {
        return;
    };
    let Some(record) = cond_record(lane, cond.id, caller.ret, caller, MODE_COND_NOTIFY, 0) else {
        return;
    };
    // SAFETY: the record is in this thread's lane; only this thread writes it.
    let record = unsafe { &mut *record };
    if broadcast {
        record.broadcasts += 1;
    } else {
        record.signals += 1;
    }
    // The notify sequence lets a waiter tell a real wake-up from a spurious one.
    let seq_after = cond
        .slot
        .seq
        .fetch_add(1, Ordering::Relaxed)
        .wrapping_add(1);
    let waiters = cond.slot.waiters.load(Ordering::Relaxed);
    if waiters > 0 {
        record.notifies_with_waiters += 1;
        // The waiter will take over the mutex we hold: a hand-over.
        let mutex_id = cond.slot.holder.load(Ordering::Relaxed);
        g.thread().held().mark_handover(mutex_id);
        let site = record.site_id;
        events::notify(lane, cond.id, site, seq_after, waiters, now_ns(), broadcast);
    }
}
