//! CPython's own frames: for a call whose native caller is inside a CPython
//! interpreter (3.11 and later), the calling thread's Python frames —
//! function, file, line — read from the thread's own frame stack.
//!
//! Only the calling thread changes its frame stack, so it can be read
//! without the GIL (which is often released around a blocking lock call).
//! The interpreter is found once, by `dlsym` of `Py_Version` (exported
//! since 3.11) and `PyGILState_GetThisThreadState` (the calling thread's
//! state, answered without the GIL). The structures' layout comes from the
//! interpreter's `_Py_DebugOffsets` (the start of `_PyRuntime`, 3.13 and
//! later), else from the tables below, checked against the headers of
//! CPython 3.11.7 and 3.12.1 (Debian's 3.11.2 alike).
//!
//! The calling thread's own state and frames are read directly, once its
//! thread state was checked through `process_vm_readv`
//! (`sys::read_own_memory`, where a wrong pointer fails to read instead of
//! faulting) to be the thread's: by the key made on every call
//! ([`frames_key`]; a system call per frame made a lock-heavy Python
//! program 30 times slower) and by a new site's frames record
//! (`python_frames.rs`), which reads what the frames point to (code
//! objects, names, location tables) through the kernel. A thread state is
//! trusted only if its `thread_id` is the calling thread's; walks are
//! capped. Nothing here allocates or takes a lock.

use crate::sys::read_own_memory;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Where the fields read lie, in bytes from the start of their struct.
#[derive(Clone, Copy)]
pub(super) struct Layout {
    /// 3.11, 3.12: `PyThreadState.cframe` and `_PyCFrame.current_frame`;
    /// `None` when the thread state holds the frame itself (3.13).
    pub(super) ts_cframe: Option<(u32, u32)>,
    pub(super) ts_frame: u32,
    pub(super) ts_thread_id: u32,
    pub(super) fr_previous: u32,
    pub(super) fr_code: u32,
    pub(super) fr_instr: u32,
    pub(super) fr_owner: u32,
    /// The owner value of the C stack's shim frames (3.12 and later).
    pub(super) owner_cstack: Option<u8>,
    pub(super) co_filename: u32,
    pub(super) co_qualname: u32,
    pub(super) co_firstlineno: u32,
    pub(super) co_linetable: u32,
    pub(super) co_code: u32,
    pub(super) bytes_sval: u32,
    pub(super) uni_state: u32,
    pub(super) uni_length: u32,
    pub(super) uni_ascii_size: u32,
    /// `PyCompactUnicodeObject.utf8_length` and `.utf8`.
    pub(super) uni_utf8: (u32, u32),
}

/// CPython 3.11 (`Include/cpython/pystate.h`, `Include/internal/pycore_frame.h`,
/// `Include/cpython/code.h`, `Include/cpython/unicodeobject.h`).
const V3_11: Layout = Layout {
    ts_cframe: Some((56, 8)),
    ts_frame: 0,
    ts_thread_id: 152,
    fr_previous: 48,
    fr_code: 32,
    fr_instr: 56,
    fr_owner: 69,
    owner_cstack: None,
    co_filename: 112,
    co_qualname: 128,
    co_firstlineno: 72,
    co_linetable: 136,
    co_code: 184,
    bytes_sval: 32,
    uni_state: 32,
    uni_length: 16,
    uni_ascii_size: 48,
    uni_utf8: (48, 56),
};

/// CPython 3.12.
const V3_12: Layout = Layout {
    ts_cframe: Some((56, 0)),
    ts_frame: 0,
    ts_thread_id: 136,
    fr_previous: 8,
    fr_code: 0,
    fr_instr: 56,
    fr_owner: 70,
    owner_cstack: Some(3),
    co_filename: 112,
    co_qualname: 128,
    co_firstlineno: 68,
    co_linetable: 136,
    co_code: 192,
    bytes_sval: 32,
    uni_state: 32,
    uni_length: 16,
    uni_ascii_size: 40,
    uni_utf8: (40, 48),
};

/// CPython 3.13, when its debug offsets cannot be read.
const V3_13: Layout = Layout {
    ts_cframe: None,
    ts_frame: 72,
    ts_thread_id: 152,
    fr_previous: 8,
    fr_code: 0,
    fr_instr: 56,
    fr_owner: 70,
    owner_cstack: Some(3),
    co_filename: 112,
    co_qualname: 128,
    co_firstlineno: 68,
    co_linetable: 136,
    co_code: 200,
    ..V3_12
};

/// Frames hashed into a call's key: enough for `queue.Queue.get` →
/// `Condition.wait` → the waiter's `acquire` to keep the program's line.
const KEY_FRAMES: usize = 4;
/// Frames walked at most (shim frames included).
pub(super) const WALK_CAP: usize = 256;

const UNKNOWN: u8 = 0;
const BUSY: u8 = 1;
const ABSENT: u8 = 2;
const PRESENT: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
/// The interpreter's module's load bias (see `modules::locate`).
static BIAS: AtomicU64 = AtomicU64::new(0);
static GET_TSTATE: AtomicUsize = AtomicUsize::new(0);
/// The interpreter's minor version (3.x), once found.
static MINOR: AtomicU8 = AtomicU8::new(0);

struct LayoutCell(UnsafeCell<Layout>);
// SAFETY: written once, by the thread that moved STATE from UNKNOWN to
// BUSY, before it publishes PRESENT (release); read only after PRESENT is
// seen (acquire).
unsafe impl Sync for LayoutCell {}
static LAYOUT: LayoutCell = LayoutCell(UnsafeCell::new(V3_12));

type GetTstate = unsafe extern "C" fn() -> usize;

/// Whether the code `ret` returns into is the CPython interpreter's
/// (looked up once per return address by the caller, see `sites.rs`).
pub fn is_interpreter(ret: u64) -> bool {
    if !found() {
        return false;
    }
    crate::recorder::identities::modules::locate(ret)
        .is_some_and(|(bias, _)| bias == BIAS.load(Ordering::Relaxed))
}

fn found() -> bool {
    match STATE.load(Ordering::Acquire) {
        PRESENT => true,
        UNKNOWN => {
            if STATE
                .compare_exchange(UNKNOWN, BUSY, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                return STATE.load(Ordering::Acquire) == PRESENT;
            }
            let now = if find() { PRESENT } else { ABSENT };
            STATE.store(now, Ordering::Release);
            now == PRESENT
        }
        _ => false,
    }
}

/// Looks the interpreter up (in a fork child it stays where it was).
fn find() -> bool {
    // SAFETY: dlsym with RTLD_DEFAULT and NUL-terminated names.
    let (version, get, runtime) = unsafe {
        (
            libc::dlsym(libc::RTLD_DEFAULT, c"Py_Version".as_ptr()),
            libc::dlsym(
                libc::RTLD_DEFAULT,
                c"PyGILState_GetThisThreadState".as_ptr(),
            ),
            libc::dlsym(libc::RTLD_DEFAULT, c"_PyRuntime".as_ptr()),
        )
    };
    if version.is_null() || get.is_null() {
        return false;
    }
    let Some(hex) = read_u64(version as u64).map(|v| v as u32) else {
        return false;
    };
    let (major, minor) = (hex >> 24, (hex >> 16) & 0xff);
    let layout = match (major, minor) {
        (3, 11) => V3_11,
        (3, 12) => V3_12,
        // Later versions move the debug offsets' fields: not read yet.
        (3, 13) => debug_offsets(runtime as u64, hex).unwrap_or(V3_13),
        _ => return false,
    };
    let Some((bias, _)) = crate::recorder::identities::modules::locate(version as u64) else {
        return false;
    };
    // SAFETY: see `LayoutCell`: this thread holds BUSY.
    unsafe { *LAYOUT.0.get() = layout };
    BIAS.store(bias, Ordering::Relaxed);
    MINOR.store(minor as u8, Ordering::Relaxed);
    GET_TSTATE.store(get as usize, Ordering::Relaxed);
    true
}

/// The layout from `_Py_DebugOffsets` at the start of `_PyRuntime`
/// (`Include/internal/pycore_runtime.h`, 3.13): its cookie, the version it
/// was built for, then each struct's size and fields' offsets.
fn debug_offsets(runtime: u64, hex: u32) -> Option<Layout> {
    if runtime == 0 {
        return None;
    }
    let mut head = [0u8; 576];
    if !read_own_memory(runtime, &mut head) || &head[..8] != b"xdebugpy" {
        return None;
    }
    let at = |o: usize| u64::from_le_bytes(head[o..o + 8].try_into().unwrap_or([0; 8]));
    if at(8) as u32 != hex {
        return None;
    }
    let field = |o: usize| u32::try_from(at(o)).ok().filter(|&v| v < 4096);
    Some(Layout {
        ts_cframe: None,
        ts_frame: field(184)?,
        ts_thread_id: field(192)?,
        fr_previous: field(232)?,
        fr_code: field(240)?,
        fr_instr: field(248)?,
        fr_owner: field(264)?,
        co_filename: field(280)?,
        co_qualname: field(296)?,
        co_linetable: field(304)?,
        co_firstlineno: field(312)?,
        co_code: field(344)?,
        bytes_sval: field(528)?,
        uni_state: field(544)?,
        uni_length: field(552)?,
        uni_ascii_size: field(560)?,
        ..V3_13
    })
}

/// Whether the interpreter found makes its locks of POSIX semaphores
/// (`Python/thread_pthread.h` with `USE_SEMAPHORES`): seen so in 3.11 to
/// 3.13 (3.13's `threading.Lock` is still one; its parking lot's
/// semaphores, one per wait on the waiting thread's stack, are destroyed
/// when the wait ends, which takes them off the held stack). Later
/// versions are not assumed to be.
pub fn locks_are_semaphores() -> bool {
    STATE.load(Ordering::Acquire) == PRESENT && MINOR.load(Ordering::Relaxed) <= 13
}

pub(super) fn layout() -> Option<&'static Layout> {
    // SAFETY: see `LayoutCell`: PRESENT was published after the write.
    (STATE.load(Ordering::Acquire) == PRESENT).then(|| unsafe { &*LAYOUT.0.get() })
}

fn read_u64(addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    read_own_memory(addr, &mut b).then(|| u64::from_le_bytes(b))
}

pub(super) fn word(buf: &[u8], at: u32) -> u64 {
    let at = at as usize;
    buf.get(at..at + 8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
}

/// The interpreter's thread state of the calling thread (0: none), as
/// `PyGILState_GetThisThreadState` says (not yet checked).
fn this_thread_state() -> u64 {
    let get = GET_TSTATE.load(Ordering::Relaxed);
    if get == 0 {
        return 0;
    }
    // SAFETY: the address of `PyGILState_GetThisThreadState`, which takes
    // nothing, returns a pointer (or NULL) and takes no lock.
    unsafe { core::mem::transmute::<usize, GetTstate>(get)() as u64 }
}

/// The innermost frame of thread state `tstate`, read through
/// `process_vm_readv`: `None` if the state is not this thread's (or none).
fn top_frame_checked(l: &Layout, tstate: u64) -> Option<u64> {
    if tstate == 0 {
        return None;
    }
    let mut ts = [0u8; 256];
    let need = (l
        .ts_thread_id
        .max(l.ts_frame)
        .max(l.ts_cframe.map_or(0, |c| c.0))
        + 8) as usize;
    if need > ts.len() || !read_own_memory(tstate, &mut ts[..need]) {
        return None;
    }
    // SAFETY: pthread_self reads the thread pointer; it cannot fail.
    if word(&ts, l.ts_thread_id) != unsafe { libc::pthread_self() } as u64 {
        return None; // not this thread's state, or not a thread state at all
    }
    Some(match l.ts_cframe {
        Some((cframe, current)) => match word(&ts, cframe) {
            0 => 0,
            cf => read_u64(cf + u64::from(current)).unwrap_or(0),
        },
        None => word(&ts, l.ts_frame),
    })
}

/// What a frame says of itself: its previous frame, code object, the
/// address of its instruction and whether it is a C stack's shim frame.
pub(super) struct FrameHead {
    pub(super) previous: u64,
    pub(super) code: u64,
    pub(super) instr: u64,
    pub(super) shim: bool,
}

/// A hash of the calling thread's innermost Python frames (code object and
/// instruction of each), or 0 without any: what tells apart the `.py`
/// lines that reach the same native call. Made on every call from the
/// interpreter, so it reads memory directly rather than through a system
/// call — but only what the interpreter keeps for this very thread: its
/// thread state, once `trusted` (checked through `process_vm_readv` to be
/// this thread's, the first time the thread shows it; cached by the
/// caller), and the frames that state chains, which only this thread
/// changes and which stay in place while it is inside our hook.
pub fn frames_key(trusted: &mut u64) -> u64 {
    let Some(l) = layout() else { return 0 };
    let Some(tstate) = trusted_state(l, trusted) else {
        return 0;
    };
    let mut frame = top_frame_trusted(l, tstate);
    let (mut key, mut used) = (0u64, 0usize);
    for _ in 0..WALK_CAP {
        if !plausible(frame) || used == KEY_FRAMES {
            break;
        }
        let head = frame_head_trusted(l, frame);
        if !head.shim {
            let word = head.code ^ head.instr.wrapping_sub(head.code).rotate_left(40);
            key ^= word
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rotate_left(13 * used as u32 + 1);
            used += 1;
        }
        frame = head.previous;
    }
    key
}

/// The calling thread's state, if it is `trusted` or checked now to be the
/// thread's own (then remembered in `trusted`).
#[inline(always)]
pub(super) fn trusted_state(l: &Layout, trusted: &mut u64) -> Option<u64> {
    let tstate = this_thread_state();
    if tstate == 0 {
        return None;
    }
    if tstate != *trusted {
        top_frame_checked(l, tstate)?;
        *trusted = tstate;
    }
    Some(tstate)
}

/// The innermost frame of a trusted thread state (see [`frames_key`]),
/// read directly.
#[inline(always)]
pub(super) fn top_frame_trusted(l: &Layout, tstate: u64) -> u64 {
    // SAFETY: each read is of a field of this thread's own live thread state, at
    // the offsets of this interpreter's version; see `frames_key`.
    let read = |addr: u64| unsafe { core::ptr::read_volatile(addr as *const u64) };
    match l.ts_cframe {
        Some((cframe, current)) => match read(tstate + u64::from(cframe)) {
            0 => 0,
            cf if plausible(cf) => read(cf + u64::from(current)),
            _ => 0,
        },
        None => read(tstate + u64::from(l.ts_frame)),
    }
}

/// [`frame_head`] of a plausible frame of a trusted thread state's chain,
/// read directly (see [`frames_key`]).
#[inline(always)]
pub(super) fn frame_head_trusted(l: &Layout, frame: u64) -> FrameHead {
    // SAFETY: each read is of a field of a frame this thread's own state chains,
    // which stays in place while the thread is in our hook.
    let read = |at: u32| unsafe { core::ptr::read_volatile((frame + u64::from(at)) as *const u64) };
    // SAFETY: as above, one byte.
    let owner = unsafe { core::ptr::read_volatile((frame + u64::from(l.fr_owner)) as *const u8) };
    FrameHead {
        previous: read(l.fr_previous),
        code: read(l.fr_code) & !7,
        instr: read(l.fr_instr),
        shim: l.owner_cstack == Some(owner),
    }
}

/// A pointer that may be a frame's: in user space, above the first page,
/// aligned.
pub(super) fn plausible(p: u64) -> bool {
    (4096..1 << 47).contains(&p) && p.is_multiple_of(8)
}
