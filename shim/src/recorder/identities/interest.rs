//! A policy's objects and sites of interest: decided once, on the first
//! sight of each (when its record is written), and kept as one bit per id,
//! so deciding whether to write an event costs a bit test. Nothing here
//! runs unless the policy names objects or sites.

use crate::policy;
use crate::recorder::identities::modules;
use crate::recorder::identities::symbols::{self, STT_FUNC, STT_OBJECT};
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// Ids covered by a bitmap (an id beyond is of interest: nothing is lost).
const OBJECT_IDS: usize = 1 << 28;
const SITE_IDS: usize = 1 << 24;

static OBJECTS: AtomicPtr<AtomicU64> = AtomicPtr::new(core::ptr::null_mut());
static SITES: AtomicPtr<AtomicU64> = AtomicPtr::new(core::ptr::null_mut());

/// Maps the bitmaps the policy needs (at process start).
pub fn init() {
    for (ruled, map, ids) in [
        (policy::objects_ruled(), &OBJECTS, OBJECT_IDS),
        (policy::sites_ruled(), &SITES, SITE_IDS),
    ] {
        if ruled && map.load(Ordering::Acquire).is_null() {
            if let Some(p) = crate::recorder::base::mapped::map_anonymous::<AtomicU64>(ids / 8) {
                map.store(p, Ordering::Release);
            }
        }
    }
}

/// In a fork child: ids start again at 1, so the parent's decisions would
/// apply to other objects and sites.
pub fn reset_after_fork() {
    for (map, ids) in [(&OBJECTS, OBJECT_IDS), (&SITES, SITE_IDS)] {
        let bits = map.load(Ordering::Acquire);
        if !bits.is_null() {
            // SAFETY: our own private anonymous pages; they read back as zeros.
            let _ = unsafe { crate::sys::madvise(bits.cast(), ids / 8, libc::MADV_DONTNEED) };
        }
    }
}

fn set(map: &AtomicPtr<AtomicU64>, ids: usize, id: u32) {
    let bits = map.load(Ordering::Acquire);
    if !bits.is_null() && (id as usize) < ids {
        // SAFETY: word index below ids / 64, inside the mapping.
        unsafe { &*bits.add(id as usize / 64) }.fetch_or(1 << (id % 64), Ordering::Relaxed);
    }
}

fn get(map: &AtomicPtr<AtomicU64>, ids: usize, id: u32) -> bool {
    let bits = map.load(Ordering::Relaxed);
    if bits.is_null() || id as usize >= ids {
        return true;
    }
    // SAFETY: as in `set`.
    unsafe { &*bits.add(id as usize / 64) }.load(Ordering::Relaxed) & 1 << (id % 64) != 0
}

/// A new object `id` of `kind` at `addr`: is it of interest?
pub fn decide_object(id: u32, kind: locksuit_format::ObjectKind, addr: u64) {
    if !policy::objects_ruled() {
        return;
    }
    let mut name = [0u8; 256];
    let symbol = symbols::name_at(addr, STT_OBJECT, &mut name).map(|n| &name[..n]);
    if policy::object_selected(kind.name().as_bytes(), addr, symbol) {
        set(&OBJECTS, OBJECT_IDS, id);
    }
}

/// Whether events on object `id` are written.
#[inline]
pub fn object(id: u32) -> bool {
    !policy::objects_ruled() || get(&OBJECTS, OBJECT_IDS, id)
}

/// A new site `id` with call chain `frames` (return addresses, innermost
/// first): is it of interest?
pub fn decide_site(id: u32, frames: &[u64]) {
    if !policy::sites_ruled() {
        return;
    }
    // One name at a time, matched as it is found: little stack, since
    // this may run inside a signal handler.
    let mut name = [0u8; 128];
    let ranges = policy::site_ranges_ruled();
    if ranges && !modules::can_locate() {
        crate::diag::warn_once(
            crate::diag::Warning::PolicyLines,
            b"the policy's FILE:LINE sites need glibc 2.35 or later (_dl_find_object); they match nothing here",
        );
    }
    for &ret in frames {
        // A return address may sit just past its function's end (and its
        // call instruction, which is the line's code, just before it).
        let at = ret.saturating_sub(1);
        let in_range = ranges
            && modules::locate(at).is_some_and(|(bias, path)| {
                path.is_empty() && policy::site_offset_selected(at.wrapping_sub(bias))
            });
        let n = symbols::name_at(at, STT_FUNC, &mut name).unwrap_or(0);
        if in_range || (n > 0 && policy::site_selected(&name[..n])) {
            set(&SITES, SITE_IDS, id);
            return;
        }
    }
}

/// Whether events at site `id` are written (0, an unknown site: yes).
#[inline]
pub fn site(id: u32) -> bool {
    id == 0 || !policy::sites_ruled() || get(&SITES, SITE_IDS, id)
}
