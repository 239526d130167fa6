//! A lock's identity in the trace: the record made when an object is first
//! used, initialised or opened (with the attributes glibc keeps inside it),
//! and the one made when it is destroyed.

use super::lanes::Lane;
use super::{current_lane, drop_op, now_ns, objects, timed_slow_work};
use crate::glibc;
use crate::guard::HookGuard;
use locksuit_format::*;

/// Attributes glibc keeps inside the object (read once, when its identity is
/// made): (ATTR_* bits, mutex type). The offsets are glibc's public struct
/// layouts on x86_64 and aarch64, which have not changed since 2.25.
fn object_attributes(kind: ObjectKind, addr: u64) -> (u32, u32) {
    // SAFETY: `addr` is a live object of `kind` that the program just
    // passed to an interposed call; each offset lies inside that type.
    let word = |offset: u64| unsafe { glibc::word(addr, offset) };
    let flag = |set: bool, bit: u32| if set { bit } else { 0 };
    match kind {
        ObjectKind::Mutex => {
            // SAFETY: as above, for a mutex.
            let k = unsafe { glibc::mutex_kind(addr) };
            let attrs = flag(k & glibc::MUTEX_PSHARED != 0, ATTR_PROCESS_SHARED)
                | flag(k & glibc::MUTEX_ROBUST != 0, ATTR_ROBUST)
                | flag(k & glibc::MUTEX_PRIO_INHERIT != 0, ATTR_PRIO_INHERIT)
                | flag(k & glibc::MUTEX_PRIO_PROTECT != 0, ATTR_PRIO_PROTECT);
            (attrs, k & glibc::MUTEX_TYPE_MASK)
        }
        // __data.__shared
        ObjectKind::Rwlock => (flag(word(28) != 0, ATTR_PROCESS_SHARED), u32::MAX),
        // new_sem.private / pthread_barrier.shared: non-zero when shared.
        ObjectKind::Sem => (flag(word(8) != 0, ATTR_PROCESS_SHARED), u32::MAX),
        ObjectKind::Barrier => (flag(word(12) != 0, ATTR_PROCESS_SHARED), u32::MAX),
        // A spinlock is a bare int; a cond's flag is not worth reading.
        ObjectKind::Spin | ObjectKind::Cond => (0, u32::MAX),
    }
}

fn write_lock_record(lane: &mut Lane, id: u32, kind: ObjectKind, addr: u64, origin: u32) {
    let (attrs, mutex_type) = object_attributes(kind, addr);
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
    };
    lane.append(&record, &[]);
}

/// The live identity of the object at `addr`, made on first use.
pub(super) fn object(lane: &mut Lane, addr: u64, kind: ObjectKind) -> Option<objects::Found> {
    let Some(found) = objects::for_use(addr, kind as u32) else {
        drop_op(Some(lane));
        return None;
    };
    if found.created {
        timed_slow_work(lane, |lane| {
            write_lock_record(lane, found.id, kind, addr, ORIGIN_FIRST_USE)
        });
    }
    Some(found)
}

/// `*_init` of an object at `addr`: a new identity even at a reused address.
pub fn object_initialized(g: &HookGuard, addr: u64, kind: ObjectKind) {
    let Some(lane) = current_lane(g) else {
        drop_op(None);
        return;
    };
    match objects::for_init(addr, kind as u32) {
        Some(found) => write_lock_record(lane, found.id, kind, addr, ORIGIN_INIT),
        None => drop_op(Some(lane)),
    }
}

/// `sem_open` returned the object at `addr`: opening the same name twice
/// returns the same object, so this keeps a live identity.
pub fn object_opened(g: &HookGuard, addr: u64, kind: ObjectKind) {
    let Some(lane) = current_lane(g) else {
        drop_op(None);
        return;
    };
    match objects::for_use(addr, kind as u32) {
        Some(found) if found.created => write_lock_record(lane, found.id, kind, addr, ORIGIN_OPEN),
        Some(_) => {}
        None => drop_op(Some(lane)),
    }
}

/// `*_destroy` of the object at `addr`.
pub fn object_destroyed(g: &HookGuard, addr: u64) {
    let Some(lane) = current_lane(g) else { return };
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
