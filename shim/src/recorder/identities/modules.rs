//! The module map: which file each code address belongs to and at what load
//! bias, so the analyzer can symbolize offline under ASLR and PIE, and which
//! file that was (build id, size, mtime), so it can tell a rebuilt one. A
//! module is recorded the first time a new site's chain reaches an address
//! outside every known module. A `dlclose` starts a new epoch: the next
//! library may be loaded at the same addresses, so modules are recorded
//! again.
//!
//! Modules are found with glibc's `_dl_find_object`, which takes no lock.
//! `dl_iterate_phdr` takes the loader lock, which another thread may hold
//! (in `dlopen`) at the moment of a `fork`: a fork child that took it would
//! hang forever. On a C library without `_dl_find_object` (glibc < 2.35)
//! the shim falls back to `dl_iterate_phdr`, except in a fork child, whose
//! modules are then left unrecorded (its frames report as addresses).

use crate::recorder::identities::image::{self, Identity};
use crate::recorder::tables::lanes::Lane;
use core::ffi::{c_char, c_int, c_void, CStr};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use locksuit_format::*;

const MAX_MODULES: usize = 1024;

struct Range {
    start: AtomicU64,
    /// Written last; 0 = the slot holds nothing (yet).
    end: AtomicU64,
}

static KNOWN: [Range; MAX_MODULES] = [const {
    Range {
        start: AtomicU64::new(0),
        end: AtomicU64::new(0),
    }
}; MAX_MODULES];
/// Slots claimed so far (each thread claims its own, so no two write one).
static CLAIMED: AtomicUsize = AtomicUsize::new(0);
/// `_dl_find_object`, or 0 when the C library lacks it.
static FIND_OBJECT: AtomicUsize = AtomicUsize::new(0);
static RESOLVED: AtomicBool = AtomicBool::new(false);
/// This process is a fork child: the loader lock must not be taken.
static FORK_CHILD: AtomicBool = AtomicBool::new(false);

/// glibc's `struct dl_find_object` (2.35).
#[repr(C)]
struct DlFindObject {
    flags: u64,
    map_start: *mut c_void,
    map_end: *mut c_void,
    link_map: *const LinkMap,
    eh_frame: *mut c_void,
    reserved: [u64; 7],
}

/// The public head of glibc's `struct link_map`.
#[repr(C)]
struct LinkMap {
    addr: usize,
    name: *const c_char,
}

type FindObjectFn = unsafe extern "C" fn(*mut c_void, *mut DlFindObject) -> c_int;

/// Looks up `_dl_find_object` once, at process start (never in a fork
/// child: `dlsym` takes the loader lock, and the parent's answer stands).
pub fn init() {
    if RESOLVED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: dlsym with a NUL-terminated name; a null result means absent.
    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_dl_find_object".as_ptr()) };
    FIND_OBJECT.store(f as usize, Ordering::Release);
}

pub fn reset_after_fork() {
    FORK_CHILD.store(true, Ordering::Relaxed);
    forget_ranges();
    crate::recorder::base::caller::set_epoch(0);
}

fn forget_ranges() {
    let n = CLAIMED.swap(0, Ordering::AcqRel).min(MAX_MODULES);
    for r in &KNOWN[..n] {
        r.end.store(0, Ordering::Release);
    }
}

/// A library was unloaded: forget every known range, so the next new site
/// records the map afresh (in a new epoch, see [`crate::recorder::base::caller::epoch`]).
pub fn map_changed() {
    forget_ranges();
}

fn covered(addr: u64) -> bool {
    let n = CLAIMED.load(Ordering::Acquire).min(MAX_MODULES);
    KNOWN[..n].iter().any(|r| {
        let end = r.end.load(Ordering::Acquire);
        end != 0 && r.start.load(Ordering::Relaxed) <= addr && addr < end
    })
}

fn remember(start: u64, end: u64) {
    let n = CLAIMED.fetch_add(1, Ordering::AcqRel);
    if n < MAX_MODULES {
        KNOWN[n].start.store(start, Ordering::Relaxed);
        KNOWN[n].end.store(end, Ordering::Release);
    }
}

/// Records the module of every address in `addrs` not yet covered.
pub fn ensure_covered(lane: &mut Lane, addrs: &[u64]) {
    for &addr in addrs {
        if covered(addr) {
            continue;
        }
        let find = FIND_OBJECT.load(Ordering::Acquire);
        if find != 0 {
            // SAFETY: the address of glibc's `_dl_find_object`, whose
            // prototype `FindObjectFn` matches.
            let find: FindObjectFn = unsafe { core::mem::transmute::<usize, FindObjectFn>(find) };
            record_found(lane, find, addr);
        } else if !FORK_CHILD.load(Ordering::Relaxed) {
            scan(lane);
            return;
        }
    }
}

/// Whether [`locate`] can answer (the C library has `_dl_find_object`,
/// glibc 2.35 and later).
pub fn can_locate() -> bool {
    FIND_OBJECT.load(Ordering::Acquire) != 0
}

/// The loaded object `addr` lies in: its load bias and file name (empty
/// for the main program), or `None` if it lies in none or the C library
/// cannot say without the loader lock.
pub fn locate(addr: u64) -> Option<(u64, &'static CStr)> {
    let find = FIND_OBJECT.load(Ordering::Acquire);
    if find == 0 {
        return None;
    }
    // SAFETY: the address of glibc's `_dl_find_object`, whose prototype
    // `FindObjectFn` matches.
    let find: FindObjectFn = unsafe { core::mem::transmute::<usize, FindObjectFn>(find) };
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut found: DlFindObject = unsafe { core::mem::zeroed() };
    // SAFETY: `_dl_find_object` reads the address and fills `found`; it
    // takes no lock.
    if unsafe { find(addr as *mut c_void, &mut found) } != 0 || found.link_map.is_null() {
        return None;
    }
    // SAFETY: a loaded object's link map; its name lives while it is loaded
    // (callers use it at once, on the thread that holds an address in it).
    unsafe {
        let map = &*found.link_map;
        let name = if map.name.is_null() {
            c""
        } else {
            CStr::from_ptr(map.name)
        };
        Some((map.addr as u64, name))
    }
}

fn record_found(lane: &mut Lane, find: FindObjectFn, addr: u64) {
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut found: DlFindObject = unsafe { core::mem::zeroed() };
    // SAFETY: `_dl_find_object` reads the address and fills `found`; it
    // takes no lock and is safe in a fork child.
    if unsafe { find(addr as *mut c_void, &mut found) } != 0 || found.link_map.is_null() {
        return; // not in any loaded object (e.g. generated code)
    }
    let (start, end) = (found.map_start as u64, found.map_end as u64);
    if start >= end || covered(start) {
        return;
    }
    // SAFETY: a loaded object's link map, which lives while it is loaded
    // (and our caller's frame returns into it).
    let (bias, name) = unsafe {
        let map = &*found.link_map;
        let name = if map.name.is_null() {
            c""
        } else {
            CStr::from_ptr(map.name)
        };
        (map.addr as u64, name)
    };
    // SAFETY: `start` is the start of the object's first mapping.
    let build_id = match unsafe { image::program_headers(start) } {
        // SAFETY: the headers of the object loaded at `bias`.
        Some(phdrs) => unsafe { image::build_id(bias, phdrs) },
        None => ([0; BUILD_ID_MAX], 0),
    };
    let identity = image::identify(name, build_id);
    if write_record(lane, (bias, start, end), name.to_bytes(), &identity) {
        remember(start, end);
    }
}

fn write_record(
    lane: &mut Lane,
    (bias, start, end): (u64, u64, u64),
    name: &[u8],
    identity: &Identity,
) -> bool {
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
        epoch: crate::recorder::base::caller::epoch() as u64,
        file_size: identity.file_size,
        file_mtime_ns: identity.file_mtime_ns,
        build_id: identity.build_id,
        build_id_len: identity.build_id_len,
        _pad: 0,
    };
    lane.append(&record, name).is_some()
}

/// Records every loaded module not yet recorded (the fallback without
/// `_dl_find_object`; never in a fork child).
fn scan(lane: &mut Lane) {
    // SAFETY: the callback only reads the phdr info it is given and writes
    // through the lane pointer, which stays valid for the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (lane as *mut Lane).cast()) };
}

unsafe extern "C" fn visit(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: dl_iterate_phdr passes a valid info and our lane pointer.
    let (info, lane) = unsafe { (&*info, &mut *data.cast::<Lane>()) };
    // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
    let phdrs = unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let bias = info.dlpi_addr;
    let mut start = u64::MAX;
    let mut end = 0u64;
    for ph in phdrs.iter().filter(|ph| ph.p_type == libc::PT_LOAD) {
        start = start.min(bias + ph.p_vaddr);
        end = end.max(bias + ph.p_vaddr + ph.p_memsz);
    }
    if start >= end || covered(start) {
        return 0;
    }
    // The main program has an empty name; the analyzer uses the header's exe.
    let name = if info.dlpi_name.is_null() {
        c""
    } else {
        // SAFETY: a non-null dlpi_name is a NUL-terminated string.
        unsafe { CStr::from_ptr(info.dlpi_name) }
    };
    // SAFETY: the headers of the object loaded at `bias`.
    let identity = image::identify(name, unsafe { image::build_id(bias, phdrs) });
    if write_record(lane, (bias, start, end), name.to_bytes(), &identity) {
        remember(start, end);
    }
    0
}
