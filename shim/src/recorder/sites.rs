//! Call sites: a line of the program that called into the lock API, keyed by
//! the return address into it. The full call chain is captured once, the
//! first time a site is seen, and stored in a [`SiteRecord`]; every later
//! operation only looks the return address up.
//!
//! Capture happens only in hooks that do not hold a lock the unwinder could
//! need (never in an unlock hook, never after acquiring): libgcc's unwinder
//! takes a pthread mutex of its own.

use super::lanes::Lane;
use super::modules;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use locksuit_format::*;

const SITE_SLOTS: usize = 1 << 16;
const PROBES: usize = 32;

struct SiteSlot {
    ret: AtomicU64,
    /// 0 while the creating thread is still capturing the chain.
    id: AtomicU32,
}

static SITES: [SiteSlot; SITE_SLOTS] = [const {
    SiteSlot {
        ret: AtomicU64::new(0),
        id: AtomicU32::new(0),
    }
}; SITE_SLOTS];
static NEXT_SITE: AtomicU32 = AtomicU32::new(1);

/// In a fork child: sites are recorded again in the child's own trace.
pub fn reset_after_fork() {
    for slot in SITES.iter() {
        slot.ret.store(0, Ordering::Relaxed);
        slot.id.store(0, Ordering::Relaxed);
    }
    NEXT_SITE.store(1, Ordering::Relaxed);
}

fn hash(ret: u64) -> usize {
    (ret.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SITE_SLOTS.trailing_zeros())) as usize
}

/// The site id for return address `ret`, recording the site (with its call
/// chain, if `may_unwind`) the first time. 0 means "unknown site" (table
/// full or no room in the trace).
pub fn site_id(lane: &mut Lane, ret: u64, may_unwind: bool) -> u32 {
    let home = hash(ret);
    for i in 0..PROBES {
        let slot = &SITES[(home + i) & (SITE_SLOTS - 1)];
        let cur = slot.ret.load(Ordering::Acquire);
        if cur == ret {
            let id = slot.id.load(Ordering::Acquire);
            if id != 0 {
                return id;
            }
            // Being created by another thread right now: record our own
            // copy rather than wait; the analyzer merges sites by address.
            return create(lane, ret, may_unwind, None);
        }
        if cur == 0 {
            match slot
                .ret
                .compare_exchange(0, ret, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return create(lane, ret, may_unwind, Some(slot)),
                Err(now) if now == ret => return create(lane, ret, may_unwind, None),
                Err(_) => continue,
            }
        }
    }
    0
}

fn create(lane: &mut Lane, ret: u64, may_unwind: bool, slot: Option<&SiteSlot>) -> u32 {
    let id = NEXT_SITE.fetch_add(1, Ordering::Relaxed);
    let mut frames = [0u64; MAX_CHAIN_DEPTH];
    let depth = if may_unwind {
        capture_chain(ret, &mut frames)
    } else {
        0
    };
    let depth = if depth == 0 {
        frames[0] = ret;
        1
    } else {
        depth
    };
    modules::ensure_covered(lane, &frames[..depth]);
    let record = SiteRecord {
        hdr: RecordHeader {
            kind: RecordKind::Site as u16,
            size: align_record(site_record_size(depth)) as u16,
            aux: depth as u32,
        },
        id,
        _pad: 0,
    };
    let mut tail = [0u8; MAX_CHAIN_DEPTH * 8];
    for (i, f) in frames[..depth].iter().enumerate() {
        tail[i * 8..i * 8 + 8].copy_from_slice(&f.to_le_bytes());
    }
    let written = lane.append(&record, &tail[..depth * 8]).is_some();
    let id = if written { id } else { 0 };
    if let Some(slot) = slot {
        if id != 0 {
            slot.id.store(id, Ordering::Release);
        } else {
            // Could not record it; let a later call try again.
            slot.ret.store(0, Ordering::Release);
        }
    }
    id
}

/// Unwinds the current stack into `frames`, starting at the frame that
/// returns to `ret` (so the shim's own frames are left out). Returns 0 if
/// `ret` was not found (no unwind information), leaving the caller to record
/// the return address alone.
fn capture_chain(ret: u64, frames: &mut [u64; MAX_CHAIN_DEPTH]) -> usize {
    let mut depth = 0usize;
    let mut found = false;
    let mut seen = 0usize;
    // SAFETY: trace_unsynchronized must not run concurrently with itself on
    // the same thread in a way that breaks the unwinder; the hook guard makes
    // our calls non-reentrant per thread, and libgcc's unwinder is thread-safe.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            seen += 1;
            let ip = frame.ip() as u64;
            if ip == 0 {
                return false; // the outermost frame
            }
            if !found {
                found = ip == ret;
                // The shim's own frames sit below the caller's; give up if
                // the caller never shows up in a sane depth.
                if !found {
                    return seen < 16;
                }
            }
            frames[depth] = ip;
            depth += 1;
            depth < MAX_CHAIN_DEPTH
        });
    }
    if found {
        depth
    } else {
        0
    }
}
