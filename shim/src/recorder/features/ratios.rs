//! Per site, its engagements by their ratio of suitable accesses (programs
//! built with `locksuit cc`), so that a report can apply its `--threshold`
//! to engagements, as the lock-suitability seed does, not only to a site's
//! totals. An access is suitable when the granule it touched had already
//! been touched under a lock by another thread.
//!
//! Nothing is added to the lock hooks' common path: a thread counts each
//! held engagement's accesses in its lane (a `Tally` per depth of its held
//! stack) from the access callbacks, the release's slow path marks an
//! engagement during which another thread began waiting for its lock, and
//! when an access belongs to another
//! engagement at that depth (the counter record of its site, or that
//! counter's engagements, changed) the finished one is added to its site's
//! `SiteRatiosRecord` in the trace, which every thread updates in place. A
//! thread's last engagements are added when the thread ends; at process
//! exit, the exiting thread's.

use crate::recorder::tables::lanes::{Lane, Tally, TALLY_DEPTH};
use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use locksuit_format::*;

/// Sites with ratios: site ids below this (others are not counted).
const SITES_MAX: usize = 1 << 16;

/// A `SiteRatiosRecord` in the trace, as the threads that update it see it.
#[repr(C)]
struct LiveRatios {
    hdr: [u32; 2],
    site_id: u32,
    _pad: u32,
    engagements: [[AtomicU32; RATIO_BUCKETS]; 2],
}

const _: () =
    assert!(core::mem::size_of::<LiveRatios>() == core::mem::size_of::<SiteRatiosRecord>());

/// Each site's record, by site id (lazily touched, 512 KiB reserved).
static RECORDS: AtomicPtr<AtomicPtr<LiveRatios>> = AtomicPtr::new(core::ptr::null_mut());

fn records() -> Option<*mut AtomicPtr<LiveRatios>> {
    crate::recorder::base::mapped::mapped_once(
        &RECORDS,
        SITES_MAX * core::mem::size_of::<AtomicPtr<LiveRatios>>(),
    )
}

/// The tally of the engagement of `counter` (this thread's counter record
/// of `site`), `depth` deep in the held stack (from 1): started afresh,
/// and the one there before added to its site's ratios, if that was
/// another engagement.
#[inline(always)]
pub fn tally_at(
    lane: &mut Lane,
    depth: usize,
    (counter, site): (*mut CounterRecord, u32),
) -> &mut Tally {
    let at = depth.min(TALLY_DEPTH).saturating_sub(1);
    // SAFETY: this thread's own counter record, in the live mapping.
    let engagement = unsafe { (*counter).engagements };
    let tally = &lane.tallies[at];
    if tally.counter != counter as usize || tally.engagement != engagement {
        let finished = core::mem::take(&mut lane.tallies[at]);
        add(lane, finished);
        lane.tallies[at] = Tally {
            counter: counter as usize,
            engagement,
            site,
            ..Tally::default()
        };
    }
    &mut lane.tallies[at]
}

/// One more access in the engagement of `counter` (this thread's counter
/// record of `site`), `depth` deep in the held stack: `suitable` or not.
#[inline(always)]
pub fn count(lane: &mut Lane, depth: usize, engaged: (*mut CounterRecord, u32), suitable: bool) {
    let tally = tally_at(lane, depth, engaged);
    if suitable {
        tally.suitable += 1;
    } else {
        tally.unsuitable += 1;
    }
}

/// Another thread began waiting for the lock during the engagement of
/// `counter` being released (a task switch it caused): if it made
/// accesses, its tally goes to the waited-for side of its site's ratios.
/// Called from the release's slow path, which is where such a wait is
/// seen for certain (the common release is taken only when none began).
/// An engagement whose tally was added before its release is not marked:
/// one held under more than [`TALLY_DEPTH`] others, or a recursive lock
/// taken again at the same line inside it.
#[cold]
pub fn made_others_wait(lane: &mut Lane, counter: *mut CounterRecord) {
    // SAFETY: this thread's own counter record, in the live mapping.
    let engagement = unsafe { (*counter).engagements };
    for tally in &mut lane.tallies {
        if tally.counter == counter as usize && tally.engagement == engagement {
            tally.waited_for = true;
        }
    }
}

/// Adds the thread's engagements, those that made accesses, to their
/// sites' ratios.
pub fn finish(lane: &mut Lane) {
    for at in 0..TALLY_DEPTH {
        let tally = core::mem::take(&mut lane.tallies[at]);
        add(lane, tally);
    }
}

/// Adds a finished engagement, if it made accesses, to its site's ratios
/// (once per engagement: out of the access path's line).
#[cold]
#[inline(never)]
fn add(lane: &mut Lane, tally: Tally) {
    let all = u64::from(tally.suitable) + u64::from(tally.unsuitable);
    if all == 0 || tally.site as usize >= SITES_MAX {
        return;
    }
    let Some(record) = record_of(lane, tally.site) else {
        return;
    };
    let bucket = (u64::from(tally.suitable) * 10 / all) as usize;
    record.engagements[usize::from(tally.waited_for)][bucket].fetch_add(1, Ordering::Relaxed);
}

/// The ratios record of `site`, written into this thread's lane the first
/// time (a thread that loses the race to publish leaves an empty spare).
fn record_of(lane: &mut Lane, site: u32) -> Option<&'static LiveRatios> {
    let table = records()?;
    // SAFETY: `site` is below SITES_MAX, the table's length.
    let entry = unsafe { &*table.add(site as usize) };
    let mut record = entry.load(Ordering::Acquire);
    if record.is_null() {
        let fresh = SiteRatiosRecord {
            hdr: RecordHeader {
                kind: RecordKind::SiteRatios as u16,
                size: core::mem::size_of::<SiteRatiosRecord>() as u16,
                aux: 0,
            },
            site_id: site,
            ..Default::default()
        };
        let written = lane.append(&fresh, &[])?.cast::<LiveRatios>();
        record = match entry.compare_exchange(
            core::ptr::null_mut(),
            written,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => written,
            Err(theirs) => theirs,
        };
    }
    // SAFETY: a published record in the live trace mapping (records are
    // 8-byte aligned), updated only through atomics.
    Some(unsafe { &*record })
}

/// In a fork child: its trace is new, the parent's records are not its own.
pub fn reset_after_fork() {
    let t = RECORDS.load(Ordering::Acquire);
    if !t.is_null() {
        // SAFETY: our own private anonymous pages; they read back as zeros.
        let _ = unsafe {
            crate::sys::madvise(
                t.cast(),
                SITES_MAX * core::mem::size_of::<AtomicPtr<LiveRatios>>(),
                libc::MADV_DONTNEED,
            )
        };
    }
}
