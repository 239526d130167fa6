//! The module map: which file each code address belongs to and at what load
//! bias, so the analyzer can symbolize offline under ASLR and PIE. Recorded
//! when the first site needs it and again whenever a new site's chain
//! reaches code outside every known module (a library loaded later with
//! `dlopen`). A `dlclose` starts a new epoch: the next library may be loaded
//! at the same addresses, so the whole map is recorded again.

use super::lanes::Lane;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use locksuit_format::*;

const MAX_MODULES: usize = 1024;

struct Range {
    start: AtomicU64,
    end: AtomicU64,
}

static KNOWN: [Range; MAX_MODULES] = [const {
    Range {
        start: AtomicU64::new(0),
        end: AtomicU64::new(0),
    }
}; MAX_MODULES];
static KNOWN_COUNT: AtomicUsize = AtomicUsize::new(0);
/// One scan at a time; a thread that finds a scan running skips its own
/// (the running scan records the same modules).
static SCANNING: AtomicBool = AtomicBool::new(false);
/// Bumped by every `dlclose`; recorded with modules and sites.
static EPOCH: AtomicU32 = AtomicU32::new(0);

pub fn reset_after_fork() {
    KNOWN_COUNT.store(0, Ordering::Relaxed);
    SCANNING.store(false, Ordering::Relaxed);
    EPOCH.store(0, Ordering::Relaxed);
}

/// The current module-map epoch.
pub fn epoch() -> u32 {
    EPOCH.load(Ordering::Acquire)
}

/// A library was unloaded: forget every known range, so the next new site
/// records the map afresh in a new epoch.
pub fn map_changed() {
    EPOCH.fetch_add(1, Ordering::AcqRel);
    KNOWN_COUNT.store(0, Ordering::Release);
    super::sites::forget_all();
}

fn covered(addr: u64) -> bool {
    let n = KNOWN_COUNT.load(Ordering::Acquire).min(MAX_MODULES);
    KNOWN[..n].iter().any(|r| {
        let start = r.start.load(Ordering::Relaxed);
        start <= addr && addr < r.end.load(Ordering::Relaxed)
    })
}

/// Records any module not yet recorded if some address in `addrs` is
/// outside all known modules.
pub fn ensure_covered(lane: &mut Lane, addrs: &[u64]) {
    if addrs.iter().all(|&a| covered(a)) {
        return;
    }
    scan(lane);
}

/// Records every loaded module not yet recorded.
pub fn scan(lane: &mut Lane) {
    if SCANNING.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: the callback only reads the phdr info it is given and writes
    // through the lane pointer, which stays valid for the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (lane as *mut Lane).cast()) };
    SCANNING.store(false, Ordering::Release);
}

unsafe extern "C" fn visit(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: dl_iterate_phdr passes a valid info and our lane pointer.
    let (info, lane) = unsafe { (&*info, &mut *data.cast::<Lane>()) };
    let bias = info.dlpi_addr;
    let mut start = u64::MAX;
    let mut end = 0u64;
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
            start = start.min(bias + ph.p_vaddr);
            end = end.max(bias + ph.p_vaddr + ph.p_memsz);
        }
    }
    if start >= end || covered(start) {
        return 0;
    }
    let n = KNOWN_COUNT.load(Ordering::Acquire);
    if n >= MAX_MODULES {
        return 0;
    }
    // The main program has an empty name; the analyzer uses the header's exe.
    let name: &[u8] = if info.dlpi_name.is_null() {
        b""
    } else {
        // SAFETY: a non-null dlpi_name is a NUL-terminated string.
        unsafe { core::ffi::CStr::from_ptr(info.dlpi_name).to_bytes() }
    };
    let name = &name[..name.len().min(MODULE_PATH_MAX)];
    let record = ModuleRecord {
        hdr: RecordHeader {
            kind: RecordKind::Module as u16,
            size: module_record_size(name.len()) as u16,
            aux: name.len() as u32,
        },
        bias,
        start,
        end,
        epoch: epoch() as u64,
    };
    if lane.append(&record, name).is_some() {
        KNOWN[n].start.store(start, Ordering::Relaxed);
        KNOWN[n].end.store(end, Ordering::Relaxed);
        KNOWN_COUNT.store(n + 1, Ordering::Release);
    }
    0
}
