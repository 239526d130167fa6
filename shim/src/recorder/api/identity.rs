//! A lock's identity in the trace: the record made when an object is first
//! used, initialised or opened (with the attributes glibc keeps inside it),
//! and the one made when it is destroyed.

use crate::glibc;
use crate::recorder::api::thread_lane::current_lane;
use crate::recorder::base::caller::Caller;
use crate::recorder::identities::sites::{self, context_of, PythonLines};
use crate::recorder::tables::lanes::Lane;
use crate::recorder::tables::lanes::{drop_op, timed_slow_work};
use crate::recorder::tables::objects;
use crate::recorder::tables::thread_state::InHook;
use crate::recorder::time::clock::now_ns;
use locksuit_format::*;

/// Attributes glibc keeps inside the object (read once, when its identity is
/// made): (ATTR_* bits, mutex type). The offsets are glibc's public struct
/// layouts on x86_64 and aarch64, which have not changed since 2.25.
fn object_attributes(kind: ObjectKind, addr: u64, shared: Option<bool>) -> (u32, u32) {
    // SAFETY: `addr` is a live object of `kind` that the program just
    // passed to an interposed call; each offset lies inside that type.
    let word = |offset: u64| unsafe { glibc::word(addr, offset) };
    let flag = |set: bool, bit: u32| if set { bit } else { 0 };
    let (attrs, mutex_type) = match kind {
        ObjectKind::Mutex => {
            // SAFETY: as above, for a mutex.
            let k = unsafe { glibc::mutex_kind(addr) };
            let attrs = flag(k & glibc::MUTEX_PSHARED != 0, ATTR_PROCESS_SHARED)
                | flag(k & glibc::MUTEX_ROBUST != 0, ATTR_ROBUST)
                | flag(k & glibc::MUTEX_PRIO_INHERIT != 0, ATTR_PRIO_INHERIT)
                | flag(k & glibc::MUTEX_PRIO_PROTECT != 0, ATTR_PRIO_PROTECT);
            (attrs, k & glibc::MUTEX_TYPE_MASK)
        }
        ObjectKind::Rwlock => {
            // SAFETY: as above, for an rwlock.
            let (shared, prefers_writers) = unsafe { glibc::rwlock_attributes(addr) };
            (
                flag(shared, ATTR_PROCESS_SHARED) | flag(prefers_writers, ATTR_PREFER_WRITER),
                u32::MAX,
            )
        }
        // new_sem.private / pthread_barrier.shared: non-zero when shared.
        ObjectKind::Sem => (flag(word(8) != 0, ATTR_PROCESS_SHARED), u32::MAX),
        ObjectKind::Barrier => (flag(word(12) != 0, ATTR_PROCESS_SHARED), u32::MAX),
        // A spinlock is a bare int (its init call says); a cond's flag is
        // not worth reading; a futex word has no attributes of its own.
        ObjectKind::Spin | ObjectKind::Cond | ObjectKind::Futex => (0, u32::MAX),
    };
    // What the init call asked for is the truth where it is known: glibc
    // sets the shared bit inside every robust mutex, shared or not.
    let attrs = match shared {
        Some(true) => attrs | ATTR_PROCESS_SHARED,
        Some(false) => attrs & !ATTR_PROCESS_SHARED,
        None => attrs,
    };
    (attrs, mutex_type)
}

/// Appends the identity record; returns where it landed, so a first use
/// can fill in its site once that is known.
fn write_lock_record(
    lane: &mut Lane,
    (id, kind, addr): (u32, ObjectKind, u64),
    (origin, origin_site): (u32, u32),
    shared: Option<bool>,
) -> Option<*mut LockRecord> {
    let (attrs, mutex_type) = object_attributes(kind, addr, shared);
    crate::recorder::identities::interest::decide_object(id, kind, addr);
    let record = LockRecord {
        hdr: RecordHeader {
            kind: RecordKind::Lock as u16,
            size: core::mem::size_of::<LockRecord>() as u16,
            aux: attrs,
        },
        id,
        kind: kind as u32,
        origin,
        mutex_type,
        address: addr,
        created_ns: now_ns(),
        origin_site,
        _pad: 0,
    };
    lane.append(&record, &[])
}

/// The live identity of the object at `addr`, made on first use (then
/// `Found::record` is its new identity record, whose `origin_site` the
/// caller fills in).
pub(in crate::recorder) fn object(
    lane: &mut Lane,
    addr: u64,
    kind: ObjectKind,
) -> Option<objects::Found> {
    let Some(found) = objects::for_use(addr, kind as u32) else {
        drop_op(Some(lane));
        return None;
    };
    if found.created {
        return Some(first_use(lane, found, (addr, kind)));
    }
    Some(found)
}

/// A new identity made by its first use: its pages made resident, its
/// record written (out of line, so the common lookup stays short).
#[cold]
#[inline(never)]
fn first_use(
    lane: &mut Lane,
    mut found: objects::Found,
    (addr, kind): (u64, ObjectKind),
) -> objects::Found {
    make_resident(lane, addr, kind);
    found.record = timed_slow_work(lane, |lane| {
        write_lock_record(lane, (found.id, kind, addr), (ORIGIN_FIRST_USE, 0), None)
    })
    .unwrap_or(core::ptr::null_mut());
    found
}

/// Makes the pages of a lock first seen in use (no init call seen, as with
/// a static initialiser) resident and writable before the shim reads it:
/// a read of a page the program has never touched maps the shared zero
/// page, and the program's first write after it must then flush that
/// mapping from every CPU it runs on (an interrupt to each). Nothing is
/// written: `MADV_POPULATE_WRITE` faults the pages in as the program's own
/// write would, and fails without a signal where the lock is mapped
/// read-only (a process-shared lock only tried through a read-only view).
/// Only for kinds whose use writes the object; a semaphore or condition
/// variable may be used by calls that only read it. One call per page for
/// a sweep over an array of locks: the lane keeps the last page.
fn make_resident(lane: &mut Lane, addr: u64, kind: ObjectKind) {
    if !matches!(
        kind,
        ObjectKind::Mutex | ObjectKind::Rwlock | ObjectKind::Spin
    ) {
        return;
    }
    // The object may lie across a page boundary: glibc reads a mutex's
    // kind in the second page before it writes the first.
    let (first, last) = (addr >> 12, (addr + glibc::object_size(kind) - 1) >> 12);
    if first == last && first == lane.resident_page {
        return;
    }
    lane.resident_page = last;
    crate::recorder::base::mapped::populate(addr as *mut u8, glibc::object_size(kind) as usize);
}

/// Names the site that first used a new identity (see [`object`]).
pub(in crate::recorder) fn note_first_use(found: &objects::Found, site_id: u32) {
    if !found.record.is_null() {
        // SAFETY: the identity record this thread just appended to its own
        // lane, in the live mapping.
        unsafe { (*found.record).origin_site = site_id };
    }
}

/// `*_init` of an object at `addr` from `caller`: a new identity even at a
/// reused address. `shared`: what the call asked for, where known.
pub fn object_initialized(
    g: &InHook,
    addr: u64,
    kind: ObjectKind,
    caller: Caller,
    shared: Option<bool>,
) {
    let Some(lane) = current_lane(g) else {
        drop_op(None);
        return;
    };
    timed_slow_work(lane, |lane| {
        // A CPython lock is named by the `.py` line that made it; the
        // thread's last lock call is left for its next one to judge
        // (judged here, a hold was lost under load: python_lines failed
        // 2 in 6 beside busy loops).
        let python_lines = if kind == ObjectKind::Sem {
            PythonLines::Keyed
        } else {
            PythonLines::No
        };
        let context = context_of(lane, caller, python_lines);
        let site = sites::site_id(lane, caller, context, python_lines);
        match objects::for_init(addr, kind as u32) {
            Some(found) => {
                write_lock_record(lane, (found.id, kind, addr), (ORIGIN_INIT, site), shared);
            }
            None => drop_op(Some(lane)),
        }
    });
}

/// `sem_open` returned the object at `addr`: opening the same name twice
/// returns the same object, so this keeps a live identity.
pub fn object_opened(g: &InHook, addr: u64, kind: ObjectKind) {
    let Some(lane) = current_lane(g) else {
        drop_op(None);
        return;
    };
    match objects::for_use(addr, kind as u32) {
        Some(found) if found.created => {
            timed_slow_work(lane, |lane| {
                write_lock_record(lane, (found.id, kind, addr), (ORIGIN_OPEN, 0), None)
            });
        }
        Some(_) => {}
        None => drop_op(Some(lane)),
    }
}

/// `*_destroy` of the object at `addr`.
pub fn object_destroyed(g: &InHook, addr: u64) {
    let Some(lane) = current_lane(g) else { return };
    crate::recorder::identities::python_holds::destroyed(lane, addr);
    if let Some(id) = objects::destroy(addr) {
        let record = LockDestroyRecord {
            hdr: RecordHeader {
                kind: RecordKind::LockDestroy as u16,
                size: core::mem::size_of::<LockDestroyRecord>() as u16,
                aux: 0,
            },
            id,
            _pad: 0,
            time_ns: now_ns(),
        };
        lane.append(&record, &[]);
    }
}
