//! What the other records name: locks (their kind, origin and
//! attributes), their destruction, call sites and loaded modules.

use super::*;

/// `LockRecord` kind (in `RecordHeader::aux` bits 0..8).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    Mutex = 1,
    Rwlock = 2,
    Spin = 3,
    Sem = 4,
    Barrier = 5,
    Cond = 6,
    /// A futex word a thread waited on through `syscall(SYS_futex, …)`:
    /// the contended path of a lock library that makes no pthread call
    /// (Rust's std, parking_lot, abseil, folly). Only its waits and the
    /// wakes that ended them are seen; acquisitions that did not wait make
    /// no call and are not counted.
    Futex = 7,
}

impl ObjectKind {
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::Mutex,
            2 => Self::Rwlock,
            3 => Self::Spin,
            4 => Self::Sem,
            5 => Self::Barrier,
            6 => Self::Cond,
            7 => Self::Futex,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Mutex => "mutex",
            Self::Rwlock => "rwlock",
            Self::Spin => "spin",
            Self::Sem => "sem",
            Self::Barrier => "barrier",
            Self::Cond => "cond",
            Self::Futex => "futex",
        }
    }
}

/// `LockRecord::origin`: created by an explicit `*_init` call.
pub const ORIGIN_INIT: u32 = 1;
/// Created on first use (a statically initialised object, or one whose init
/// happened before the shim was loaded).
pub const ORIGIN_FIRST_USE: u32 = 2;
/// Opened by name (`sem_open`).
pub const ORIGIN_OPEN: u32 = 3;

/// `LockRecord` attribute bits (in `RecordHeader::aux`): the object is
/// `PTHREAD_PROCESS_SHARED`, so other processes may engage it too.
pub const ATTR_PROCESS_SHARED: u32 = 1 << 0;
/// A robust mutex.
pub const ATTR_ROBUST: u32 = 1 << 1;
/// A priority-inheritance mutex.
pub const ATTR_PRIO_INHERIT: u32 = 1 << 2;
/// A priority-protection (ceiling) mutex.
pub const ATTR_PRIO_PROTECT: u32 = 1 << 3;
/// An rwlock that prefers writers (`PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP`):
/// a queued writer holds back new readers, so a read can wait behind a read.
pub const ATTR_PREFER_WRITER: u32 = 1 << 4;

/// A synchronisation object came into being: a new identity, even when the
/// address was used before. `hdr.aux` holds `ATTR_*` bits.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LockRecord {
    pub hdr: RecordHeader,
    pub id: u32,
    /// `ObjectKind` as a number.
    pub kind: u32,
    pub origin: u32,
    /// Mutex type (`PTHREAD_MUTEX_NORMAL`/`RECURSIVE`/`ERRORCHECK`/
    /// `ADAPTIVE_NP`) for mutexes, else `u32::MAX`.
    pub mutex_type: u32,
    pub address: u64,
    pub created_ns: u64,
    /// The site that initialised the object (`*_init`), or that first used
    /// it (a statically initialised one); 0 if unknown. Objects made at one
    /// line form a family, and name each other across runs.
    pub origin_site: u32,
    pub _pad: u32,
}

/// A synchronisation object was destroyed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LockDestroyRecord {
    pub hdr: RecordHeader,
    pub id: u32,
    pub _pad: u32,
    pub time_ns: u64,
}

/// A line of code seen for the first time, with the call chain that led
/// there the first time. `hdr.aux` = number of frames that follow the fixed
/// part, innermost first; frame 0 is the return address into the caller of
/// the interposed function.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SiteRecord {
    pub hdr: RecordHeader,
    pub id: u32,
    /// The module map's epoch when the chain was captured: its addresses
    /// belong to the modules recorded in that epoch or before.
    pub module_epoch: u32,
}

/// A loaded module, for offline symbolization. `hdr.aux` = path length; the
/// path bytes follow, padded to [`RECORD_ALIGN`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ModuleRecord {
    pub hdr: RecordHeader,
    /// Load bias: runtime address minus the address in the ELF file.
    pub bias: u64,
    /// Runtime range of the module's mapping.
    pub start: u64,
    pub end: u64,
    /// The module map's epoch, bumped by every `dlclose`: a library loaded
    /// later at the same addresses is recorded again in a newer epoch.
    pub epoch: u64,
    /// The file's size in bytes and modification time (ns since 1970) when
    /// the module was recorded; 0 when unknown. With the build id they tell
    /// the analyzer whether the file it would symbolize against is still the
    /// one that ran.
    pub file_size: u64,
    pub file_mtime_ns: u64,
    /// The GNU build id of the loaded image (its first `build_id_len`
    /// bytes; 0 = the image has none).
    pub build_id: [u8; BUILD_ID_MAX],
    pub build_id_len: u32,
    pub _pad: u32,
}

/// Longest build id kept (GNU build ids are 20 bytes; some linkers make 16 or 32).
pub const BUILD_ID_MAX: usize = 32;
