//! What a policy leaves out of the events, and the record that says so:
//! the policy's text and, per rule, how many events it left out (updated
//! in place, so a killed process's trace has them). Counters are never
//! filtered; only events are.

use crate::policy;
use crate::recorder::identities::interest;
use crate::recorder::tables::lanes::Lane;
use core::ptr::addr_of_mut;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use locksuit_format::*;

static RECORD: AtomicPtr<PolicyRecord> = AtomicPtr::new(core::ptr::null_mut());
static WRITTEN: AtomicBool = AtomicBool::new(false);

/// Writes the policy's record into the first lane that asks (a thread's
/// registration), once per process.
pub fn write_record(lane: &mut Lane) {
    if !policy::in_force() || WRITTEN.swap(true, Ordering::AcqRel) {
        return;
    }
    let text = policy::text();
    let record = PolicyRecord {
        hdr: RecordHeader::with_body::<PolicyRecord>(
            RecordKind::Policy,
            text.len(),
            text.len() as u32,
        ),
        ..Default::default()
    };
    if let Some(p) = lane.append(&record, text) {
        RECORD.store(p, Ordering::Release);
    }
}

/// In a fork child: the child's trace gets its own record.
pub fn reset_after_fork() {
    RECORD.store(core::ptr::null_mut(), Ordering::Relaxed);
    WRITTEN.store(false, Ordering::Relaxed);
    for seen in &SEEN {
        seen.store(0, Ordering::Relaxed);
    }
}

/// An event left out by rule `rule` (`FILTER_*`).
pub fn count(rule: usize) {
    crate::recorder::trace::file::count_filtered();
    let r = RECORD.load(Ordering::Acquire);
    if !r.is_null() && rule < FILTER_RULES {
        // SAFETY: the policy record lives in the live mapping; its counts
        // are only ever updated atomically.
        unsafe { AtomicU64::from_ptr(addr_of_mut!((*r).filtered[rule])) }
            .fetch_add(1, Ordering::Relaxed);
    }
}

/// A snapshot taken (`taken`) or refused.
pub fn count_snapshot(taken: bool) {
    let r = RECORD.load(Ordering::Acquire);
    if r.is_null() {
        return;
    }
    // SAFETY: as in `count`.
    let field = unsafe {
        if taken {
            AtomicU32::from_ptr(addr_of_mut!((*r).snapshots_taken))
        } else {
            AtomicU32::from_ptr(addr_of_mut!((*r).snapshots_refused))
        }
    };
    field.fetch_add(1, Ordering::Relaxed);
}

/// Whether the events of a wait from `started` to `ended`, which began with
/// `waiters` threads waiting (itself included; 0: not a wait on an
/// object), pass the thresholds; one that does not is counted.
pub fn wait_kept(started: u64, ended: u64, waiters: u32) -> bool {
    let min = policy::min_wait_ns();
    if min != 0 && ended.saturating_sub(started) < min {
        count(FILTER_SHORT);
        return false;
    }
    let least = policy::min_waiters();
    if least > 1 && waiters != 0 && waiters < least {
        count(FILTER_WAITERS);
        return false;
    }
    true
}

/// Whether `event` (of this lane's thread) is written; one left out is
/// counted under the rule that left it out. With no policy in force, one
/// test: the rules are judged out of line, so that a writer of every
/// event (full tracing) keeps no registers for them.
#[inline(always)]
pub fn event_kept(lane: &mut Lane, event: &EventRecord) -> bool {
    !policy::in_force() || event_kept_by_policy(lane, event)
}

/// [`event_kept`] with a policy in force.
#[cold]
#[inline(never)]
fn event_kept_by_policy(lane: &mut Lane, event: &EventRecord) -> bool {
    let kind = event.hdr.aux & 0xff;
    // A thread's creation, start, exit and join are on no object, and
    // (creation, start, exit) at no line: rules on those do not apply.
    let lifecycle = matches!(
        kind,
        EVENT_CREATED | EVENT_STARTED | EVENT_EXITED | EVENT_JOINED
    );
    let on_object = !lifecycle && !matches!(kind, EVENT_CALL | EVENT_SWITCH);
    let rule = if !policy::keeps_thread(&mut lane.policy_thread, lane.tid) {
        FILTER_THREAD
    } else if on_object && !interest::object(event.lock_id) {
        FILTER_OBJECT
    } else if !lifecycle && !interest::site(event.site_id) {
        FILTER_SITE
    } else if !sampled(lane, kind as usize, event.time) {
        FILTER_SAMPLED
    } else {
        return true;
    };
    count(rule);
    false
}

/// Events seen per kind, process-wide, for `sample_every`.
static SEEN: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];

/// `sample_every`: one event of each kind in N, counted over the process;
/// `sample_period_ms`: at most one event of each kind per period and thread.
fn sampled(lane: &mut Lane, kind: usize, time: u64) -> bool {
    let (every, period) = (policy::sample_every(), policy::sample_period_ns());
    let kind = kind % SEEN.len();
    if every > 1 && !(SEEN[kind].fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(every) {
        return false;
    }
    if period == 0 {
        return true;
    }
    let last = &mut lane.policy_sampling.last_ns[kind];
    if *last != 0 && time.saturating_sub(*last) < period {
        return false;
    }
    *last = time.max(1);
    true
}
